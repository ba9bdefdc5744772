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


@dataclass
class Bundle(AppBundle):
    routed: CeleryExecutor  # routes node ``n`` to the special queue


def build(settings: Mapping[str, str]) -> Bundle:
    app, saver = make_app("lgc_app", settings, "LGC")
    executor = CeleryExecutor(app)
    routed = CeleryExecutor(app, routes={"n": settings["LGC_SPECIAL_QUEUE"]})
    graphs = compile_graphs(
        saver,
        [
            *((gid, builder, executor, options) for gid, (builder, options) in GRAPHS.items()),
            *((gid, builder, routed, opts) for gid, (builder, opts) in ROUTED_GRAPHS.items()),
        ],
    )
    return Bundle(app, saver, executor, graphs, routed)


def settings_from_env() -> dict[str, str]:
    return {key: os.environ[key] for key in ENV_KEYS}


bundle: Any = build(settings_from_env()) if "LGC_BROKER_URL" in os.environ else None
app: Any = bundle.app if bundle is not None else None
