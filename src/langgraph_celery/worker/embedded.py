"""A Celery worker in a background thread of this process, for in-memory brokers (``memory://``).

With ``memory://`` the queues live in this process, so no ``celery worker`` process can serve
them: :class:`EmbeddedWorker` runs one here (solo pool, one task at a time, no heartbeat, mingle
or gossip) for as long as a command needs it.  The checkpoint store, not the broker, holds the
runs, so a run parked by one process resumes in another that starts its own embedded worker.

    with EmbeddedWorker(app):
        graph.invoke({"topic": "..."}, RunnableConfig(thread_id="t1"))

Its consumer loop is Celery's blocking ``synloop`` (the one used for transports without an event
loop, such as ``memory://``) with a short drain timeout and a per-worker stop flag, so ``stop()``
returns within a fraction of a second instead of Celery's two-second drain cycles.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from celery import _state
from celery.bootsteps import RUN
from celery.exceptions import WorkerShutdown
from celery.utils.nodenames import anon_nodename
from celery.worker import WorkController
from celery.worker.consumer import Consumer

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = [
    "EmbeddedWorker",
    "EmbeddedWorkerError",
    "embedded_worker_for",
    "needs_embedded_worker",
]

#: Seconds between polls of an empty in-memory queue, unless the app sets ``polling_interval``
#: in ``broker_transport_options`` (kombu's default is a whole second).
MEMORY_POLLING_INTERVAL = 0.005
#: Longest wait for a message before the loop looks at its stop flag again.
_DRAIN_TIMEOUT = 0.05


class EmbeddedWorkerError(RuntimeError):
    """The in-process worker did not start, stopped unexpectedly, or did not stop in time."""


def needs_embedded_worker(graph: CompiledGraph) -> bool:
    """Whether ``graph`` runs on a Celery executor whose broker lives in this process."""
    executor = graph.config.executor
    app = getattr(executor, "app", None)
    if app is None or not getattr(executor, "in_process", False):
        return False
    return not app.conf.task_always_eager


def embedded_worker_for(graph: CompiledGraph, **options: Any) -> EmbeddedWorker | None:
    """A worker serving ``graph``'s queues (the default one and those of its executor's
    ``routes``) if its broker lives in this process, else ``None``; not started yet.
    ``options`` go to :class:`EmbeddedWorker`."""
    if not needs_embedded_worker(graph):
        return None
    executor = graph.config.executor
    app = executor.app
    routed = sorted(set(getattr(executor, "routes", {}).values()))
    return EmbeddedWorker(app, queues=[app.conf.task_default_queue, *routed], **options)


class _Consumer(Consumer):  # type: ignore[misc]  # celery has no type hints
    """Celery's consumer with a loop that stops as soon as its controller asks."""

    def loop(
        self,
        obj: Any,
        connection: Any,
        consumer: Any,
        blueprint: Any,
        hub: Any,
        qos: Any,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        consumer.on_message = obj.create_task_handler()
        consumer.consume()
        obj.on_ready()
        controller: _Controller = obj.controller
        try:
            while blueprint.state == RUN and obj.connection:
                if controller.stopping.is_set():
                    raise WorkerShutdown(0)  # the WorkController shuts down warm
                if qos.prev != qos.value:
                    qos.update()
                obj.perform_pending_operations()
                try:
                    connection.drain_events(timeout=_DRAIN_TIMEOUT)
                except TimeoutError:
                    pass
                except OSError:
                    if blueprint.state == RUN:
                        raise
        except Exception as error:  # Celery logs it and stops the worker; keep it to report
            controller.error = error
            raise


class _Controller(WorkController):  # type: ignore[misc]  # celery has no type hints
    """A WorkController that says when its consumer is ready and can be asked to stop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()


class EmbeddedWorker:
    """Runs a solo-pool Celery worker for ``app`` in a daemon thread; a context manager."""

    def __init__(
        self,
        app: Any,
        *,
        queues: list[str] | None = None,
        start_timeout: float = 10.0,
        stop_timeout: float = 10.0,
        on_crash: Callable[[], object] | None = None,
    ) -> None:
        self.app = app
        self.queues = queues
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.on_crash = on_crash
        #: Set once the worker stopped without being asked to: why (or True if unknown).
        self.crashed: BaseException | bool = False
        self._controller: _Controller | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> EmbeddedWorker:
        """Start the worker thread; returns once it consumes from its queues."""
        if self._thread is not None:
            raise EmbeddedWorkerError("this embedded worker is already running")
        app = self.app
        if str(app.conf.broker_url or "").startswith("memory://"):
            options = dict(app.conf.broker_transport_options or {})
            options.setdefault("polling_interval", MEMORY_POLLING_INTERVAL)
            app.conf.broker_transport_options = options
        app.finalize(auto=True)
        # A worker's pool marks the whole process as one whose tasks must not wait on results
        # (``result.get()`` then raises); this process is a client as well, so the mark is put
        # back once the worker runs, as Celery's own test worker does.
        joins_block = _state.task_join_will_block()
        controller = _Controller(
            app=app,
            hostname=anon_nodename(hostname="embedded"),
            pool="solo",
            concurrency=1,
            queues=self.queues,
            consumer_cls=_Consumer,
            ready_callback=None,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        self._controller = controller
        self._error = None
        thread = threading.Thread(
            target=self._run, args=(controller,), name="langgraph-celery-worker", daemon=True
        )
        self._thread = thread
        thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not controller.ready.wait(0.01):
            if not thread.is_alive():
                self._thread = None
                raise EmbeddedWorkerError(f"the embedded worker did not start: {self._error!r}")
            if time.monotonic() >= deadline:
                self.stop()
                raise EmbeddedWorkerError(
                    f"the embedded worker did not start within {self.start_timeout} s"
                )
        _state._set_task_join_will_block(joins_block)
        return self

    def _run(self, controller: _Controller) -> None:
        # The solo pool looks tasks up in the thread's current app, as `celery -A app worker` sets.
        self.app.set_current()
        try:
            controller.start()
        except BaseException as error:  # reported by start()
            self._error = error
        if not controller.stopping.is_set():
            self.crashed = controller.error or self._error or True
            if self.on_crash is not None:
                self.on_crash()

    def stop(self) -> None:
        """Let the current task finish, stop consuming and wait for the thread to end."""
        thread, controller = self._thread, self._controller
        self._thread = None
        if thread is None or controller is None:
            return
        controller.stopping.set()
        thread.join(self.stop_timeout)
        if thread.is_alive():
            raise EmbeddedWorkerError(
                f"the embedded worker did not stop within {self.stop_timeout} s"
            )

    def __enter__(self) -> EmbeddedWorker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
