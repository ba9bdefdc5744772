"""The Celery app of the integration tests: ``celery -A lgc_app worker`` imports it.

Everything comes from environment variables (see :func:`settings_from_env`), so the test
process and its worker subprocesses build the same app, saver and graphs: the workers at import
(module attribute ``app``), the test process by calling :func:`build` with the same settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lgc_graphs import GRAPHS, ROUTED_GRAPHS

from app_kit import AppBundle, compile_graphs, make_app
from langgraph_celery.celery import CeleryExecutor

#: Environment variables the app reads.
ENV_KEYS = (
    "LGC_BROKER_URL",  # the broker (Redis db 11 or RabbitMQ)
    "LGC_BACKEND_URL",  # the result backend (Redis db 11)
    "LGC_DB_URL",  # the PostgreSQL database of the checkpoints
    "LGC_TABLE_PREFIX",  # the SqlSaver table prefix (one per test module)
    "LGC_QUEUE",  # the default queue
    "LGC_SPECIAL_QUEUE",  # the queue node ``n`` of graph ``where`` is routed to
    "LGC_REDIS_URL",  # Redis db 11, for the nodes' counters and flags
)
#: Optional: one more key of the routed executor's routes (to the special queue).
EXTRA_ROUTE = "LGC_EXTRA_ROUTE"
#: Optional: Celery's own ``task_soft_time_limit`` (seconds), as a deployment may set it.
SOFT_TIME_LIMIT = "LGC_SOFT_TIME_LIMIT"


@dataclass
class Bundle(AppBundle):
    routed: CeleryExecutor  # routes node ``n`` to the special queue, ``b`` of where-too to main


def build(settings: Mapping[str, str]) -> Bundle:
    app, saver = make_app("lgc_app", settings, "LGC")
    if settings.get(SOFT_TIME_LIMIT):
        app.conf.task_soft_time_limit = float(settings[SOFT_TIME_LIMIT])
    special, main = settings["LGC_SPECIAL_QUEUE"], settings["LGC_QUEUE"]
    # The app's own routes: every node of graph where-too to the special queue (the executor's
    # routes come first, so its route of where-too's b wins).
    app.conf.task_routes = {"langgraph_celery.node.where-too.*": {"queue": special}}
    executor = CeleryExecutor(app)
    routes = {"n": special, "where-too:b": main}
    if settings.get(EXTRA_ROUTE):
        routes[settings[EXTRA_ROUTE]] = special
    routed = CeleryExecutor(app, routes=routes)
    graphs = compile_graphs(
        saver,
        [
            *((gid, builder, executor, options) for gid, (builder, options) in GRAPHS.items()),
            *((gid, builder, routed, opts) for gid, (builder, opts) in ROUTED_GRAPHS.items()),
        ],
    )
    return Bundle(app, saver, executor, graphs, routed)


def settings_from_env() -> dict[str, str]:
    settings = {key: os.environ[key] for key in ENV_KEYS}
    for optional in (EXTRA_ROUTE, SOFT_TIME_LIMIT):
        if optional in os.environ:
            settings[optional] = os.environ[optional]
    return settings


bundle: Any = build(settings_from_env()) if "LGC_BROKER_URL" in os.environ else None
app: Any = bundle.app if bundle is not None else None
