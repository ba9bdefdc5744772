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

from celery import Celery
from lgc_graphs import GRAPHS, ROUTED_GRAPHS

from langgraph_celery import CompileConfig, CompiledGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

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
class Bundle:
    app: Celery
    saver: SqlSaver
    executor: CeleryExecutor
    routed: CeleryExecutor
    graphs: dict[str, CompiledGraph]

    def close(self) -> None:
        self.saver.dispose()
        self.app.close()


def make_app(settings: Mapping[str, str]) -> Celery:
    app = Celery("lgc_app", broker=settings["LGC_BROKER_URL"], backend=settings["LGC_BACKEND_URL"])
    app.conf.task_default_queue = settings["LGC_QUEUE"]
    app.conf.broker_connection_retry_on_startup = True
    app.conf.worker_hijack_root_logger = True
    return app


def build(settings: Mapping[str, str]) -> Bundle:
    app = make_app(settings)
    saver = SqlSaver(settings["LGC_DB_URL"], table_prefix=settings["LGC_TABLE_PREFIX"])
    executor = CeleryExecutor(app)
    routed = CeleryExecutor(app, routes={"n": settings["LGC_SPECIAL_QUEUE"]})
    graphs: dict[str, CompiledGraph] = {}
    for table, chosen in ((GRAPHS, executor), (ROUTED_GRAPHS, routed)):
        for graph_id, (builder, options) in table.items():
            config = CompileConfig(
                checkpoint_saver=saver, graph_id=graph_id, executor=chosen, **options
            )
            graphs[graph_id] = builder().compile(config)
    return Bundle(app, saver, executor, routed, graphs)


def settings_from_env() -> dict[str, str]:
    return {key: os.environ[key] for key in ENV_KEYS}


bundle: Any = build(settings_from_env()) if "LGC_BROKER_URL" in os.environ else None
app: Any = bundle.app if bundle is not None else None
