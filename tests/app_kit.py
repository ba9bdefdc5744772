"""What the test apps share (``lgc_app``, ``lgc_beat_app``, ``chaos_app``, ``fuzz_app``: the
modules ``celery -A ... worker`` imports in the tests): the Celery app, the saver and the graphs,
built from settings so that the test process and its worker subprocesses build the same ones.

Worker subprocesses find this module because :func:`app_env` puts this folder, with the suite's
apps folder, on their ``PYTHONPATH``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery

from langgraph_celery import CompileConfig, CompiledGraph, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

__all__ = [
    "TESTS_DIR",
    "WORKER_CLIENT_NAME_ENV",
    "WORKER_CLIENT_PREFIX",
    "AppBundle",
    "GraphEntry",
    "app_env",
    "compile_graphs",
    "make_app",
]

TESTS_DIR = Path(__file__).resolve().parent

#: Set in the environment of every worker the tests start: the name its connections to a Redis
#: broker carry (``CLIENT LIST`` shows it), so that a test tells the workers' from its own.
WORKER_CLIENT_NAME_ENV = "LGC_TEST_WORKER_CLIENT_NAME"
#: How those names start.
WORKER_CLIENT_PREFIX = "lgc-test-worker-"

#: ``(graph_id, builder, executor, compile options)``.
GraphEntry = tuple[str, Any, CeleryExecutor, Mapping[str, Any]]


@dataclass
class AppBundle:
    """A test app as built from its settings: its Celery app, saver, executor and graphs."""

    app: Celery
    saver: SqlSaver
    executor: CeleryExecutor
    graphs: dict[str, CompiledGraph]

    def close(self) -> None:
        self.saver.dispose()
        self.app.close()


def make_app(name: str, settings: Mapping[str, str], key: str) -> tuple[Celery, SqlSaver]:
    """The Celery app and the saver of a test app whose settings are named ``<key>_...``:
    ``BROKER_URL``, ``BACKEND_URL`` (the broker's if absent), ``QUEUE`` (the default queue),
    ``DB_URL`` and ``TABLE_PREFIX`` (the saver's tables in the test database).  The app logs
    on the worker's handlers; in a worker, its Redis connections carry the name
    :data:`WORKER_CLIENT_NAME_ENV` gives."""
    broker = settings[f"{key}_BROKER_URL"]
    app = Celery(name, broker=broker, backend=settings.get(f"{key}_BACKEND_URL", broker))
    app.conf.task_default_queue = settings[f"{key}_QUEUE"]
    app.conf.broker_connection_retry_on_startup = True
    app.conf.worker_hijack_root_logger = True
    client_name = os.environ.get(WORKER_CLIENT_NAME_ENV)
    if client_name and broker.startswith("redis"):
        app.conf.broker_transport_options = {"client_name": client_name}
    saver = SqlSaver(settings[f"{key}_DB_URL"], table_prefix=settings[f"{key}_TABLE_PREFIX"])
    return app, saver


def compile_graphs(saver: SqlSaver, entries: Iterable[GraphEntry]) -> dict[str, CompiledGraph]:
    """Each entry's graph (``builder()`` gives its ``StateGraph``) compiled for Celery."""
    graphs: dict[str, CompiledGraph] = {}
    for graph_id, builder, executor, options in entries:
        graph: StateGraph = builder()
        config = CompileConfig(
            checkpoint_saver=saver, graph_id=graph_id, executor=executor, **options
        )
        graphs[graph_id] = graph.compile(config)
    return graphs


def app_env(
    apps_dir: Path, settings: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a subprocess that imports a test app of ``apps_dir`` with
    ``settings``: both folders on its ``PYTHONPATH``, unbuffered output."""
    env = dict(os.environ)
    env.update(settings)
    env.update(extra or {})
    paths = [str(apps_dir), str(TESTS_DIR), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env
