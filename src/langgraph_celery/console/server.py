"""Serving the console with uvicorn, with the in-process Celery workers its graphs need.

A graph on Celery's in-memory broker (``memory://``, the demo's default) has its queues in the
console's own process: no ``celery worker`` can serve them, so the console runs an embedded
worker for it while it serves (as ``langgraph-celery run`` does), and an approval given in the
browser runs the rest of the graph there.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from langgraph_celery.console.catalog import Catalog
from langgraph_celery.console.settings import ConsoleSettings

__all__ = ["Server", "embedded_workers", "serve"]

log = logging.getLogger("langgraph_celery.console")


@contextmanager
def embedded_workers(catalog: Catalog) -> Iterator[list[Any]]:
    """Start one embedded worker per Celery app of the catalog's graphs that needs one."""
    from langgraph_celery.worker.embedded import embedded_worker_for

    started: list[Any] = []
    apps: list[Any] = []
    try:
        for entry in catalog:
            app = getattr(entry.graph.config.executor, "app", None)
            if app is None or any(app is seen for seen in apps):
                continue
            worker = embedded_worker_for(entry.graph)
            if worker is not None:
                apps.append(app)
                started.append(worker.start())
        yield started
    finally:
        for worker in reversed(started):
            try:
                worker.stop()
            except Exception as error:  # stopping the rest matters more
                log.warning("the embedded worker did not stop cleanly: %r", error)


class Server:
    """uvicorn serving the console in a thread (tests, programs that embed the console)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            server_header=False,
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="lgc-console", daemon=True)

    @property
    def url(self) -> str:
        sockets = self.server.servers[0].sockets if self.server.servers else []
        host, port = sockets[0].getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}"

    def __enter__(self) -> Server:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the console's server stopped while starting (port in use?)")
            self.thread.join(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def serve(catalog: Catalog, settings: ConsoleSettings, out: IO[str]) -> None:
    """Serve the console until interrupted (Ctrl-C)."""
    import uvicorn

    from langgraph_celery.console.app import create_app

    app = create_app(catalog, settings)
    with embedded_workers(catalog) as workers:
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        print(f"langgraph-celery console on http://{host}:{settings.port}/", file=out)
        for entry in catalog:
            where = "Celery" if entry.on_celery else "in process"
            print(f"  graph {entry.label} ({entry.name}, {where})", file=out)
            if entry.index is None:
                print("    its saver keeps no run index: its runs are not listed", file=out)
            elif not entry.shared:
                print(
                    "    its saver lives in this process only: runs of other processes are "
                    "not seen (use SqlSaver)",
                    file=out,
                )
        if workers:
            print("  an in-process Celery worker runs the in-memory broker's tasks", file=out)
        if settings.token is not None:
            print("  open it once with ?token=<your token> at the end of the address", file=out)
        out.flush()
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level="warning",
            server_header=False,
            timeout_graceful_shutdown=2,
        )
