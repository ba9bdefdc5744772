"""Wake-ups for clients that follow a run: a worker publishes on the thread's Redis channel when
it commits a checkpoint or a marker, and a client waiting on the run re-reads the checkpoint
store (the source of truth) when woken, instead of polling it in a tight loop.  A client that
only waits for the run to stop (``invoke``, ``RunHandle.wait``) listens on the thread's *final*
channel, published to when a run completes, parks, fails or is cancelled, so it does not wake
(and read the store) at every step.

When the result backend is Redis, Celery already publishes every state a task stores on the
task's result key (``celery-task-meta-<task id>``), and a node task's result is stored after its
step is committed and the next step sent.  A client following every step then also subscribes
to the result keys of the run's node tasks (their ids start ``lgc:<run_id>:``), and the worker
publishes nothing of its own for a step: see :attr:`Notifier.steps_published_by_backend`.

Used when the app's result backend or broker is Redis; otherwise clients poll.  A lost message
only delays a client until its next fallback read.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from langgraph_celery.worker import names

__all__ = ["Notifier", "Subscription"]

log = logging.getLogger("langgraph_celery.worker")


def _redis_url(app: Any) -> str | None:
    for url in (app.conf.result_backend, app.conf.broker_url):
        if isinstance(url, str) and url.startswith(("redis://", "rediss://", "unix://")):
            return url
    return None


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


class Subscription:
    """A client's subscription to one thread's channel (and its run's task results)."""

    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub

    def wait(self, timeout: float) -> bool:
        """Block until a wake-up arrives (True) or ``timeout`` seconds pass (False).  A node task
        that only started is not one: its step is not stored yet."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                message = self._pubsub.get_message(ignore_subscribe_messages=True, timeout=left)
            except Exception:  # a broken connection: the caller falls back to reading the store
                return False
            if message is None:
                return False
            if message.get("type") != "pmessage" or b'"STARTED"' not in message.get("data", b""):
                return True

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a broken connection: nothing to do
            self._pubsub.close()


class Notifier:
    """Publishes and subscribes to per-thread wake-ups over Redis, when the app uses Redis."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._client: Any = None
        self._backend_publishes: bool | None = None
        self._lock = threading.Lock()

    @property
    def steps_published_by_backend(self) -> bool:
        """Whether the result backend publishes a node task's result on Redis (see the module's
        docstring), so a worker need not publish a wake-up for the step the task stored."""
        if self._backend_publishes is None:
            from celery.backends.redis import RedisBackend

            app = self._app
            self._backend_publishes = (
                isinstance(app.backend, RedisBackend)
                and not app.conf.task_ignore_result
                and self._redis() is not None
                and _redis_url(app) == app.conf.result_backend
            )
        return self._backend_publishes

    def _redis(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    url = _redis_url(self._app)
                    if url is None:
                        self._client = False
                    else:
                        import redis

                        self._client = redis.Redis.from_url(url, socket_timeout=5)
        return self._client or None

    def publish(self, thread_id: str, final: bool = False) -> None:
        """Wake the thread's followers; with ``final`` (the run stopped) its waiters too."""
        client = self._redis()
        if client is None:
            return
        try:
            if final:
                pipe = client.pipeline(transaction=False)
                pipe.publish(names.thread_channel(thread_id), b"1")
                pipe.publish(names.thread_channel(thread_id, final=True), b"1")
                pipe.execute()
            else:
                client.publish(names.thread_channel(thread_id), b"1")
        except Exception as error:  # a wake-up is an optimisation; the store stays the truth
            log.debug("could not publish a wake-up for thread %r: %s", thread_id, error)

    def subscribe(
        self, thread_id: str, final: bool = False, run_id: str | None = None
    ) -> Subscription | None:
        """Listen to the thread's every step (of run ``run_id``), or (``final``) only to its runs
        stopping."""
        client = self._redis()
        if client is None:
            return None
        try:
            pubsub = client.pubsub()
            pubsub.subscribe(names.thread_channel(thread_id, final))
            if not final and run_id is not None and self.steps_published_by_backend:
                pattern = names.celery_task_id(_glob_escape(run_id), "*", "*")
                pubsub.psubscribe(self._app.backend.get_key_for_task(pattern))
        except Exception as error:
            log.debug("could not subscribe to thread %r: %s", thread_id, error)
            return None
        return Subscription(pubsub)
