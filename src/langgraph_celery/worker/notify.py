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
publishes nothing of its own for a step: see :attr:`Notifier.steps_published_by_backend`.  A
carried step's task (``durability="exit"`` or ``"async"``) stores no result: the worker wakes
the followers of a step it stores itself, and announces a step it carries on the run's outputs
channel.

Used when the app's result backend or broker is Redis; otherwise clients poll.  A lost message
only delays a client until its next fallback read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from typing import Any

from langgraph_celery.worker import names

__all__ = ["Notifier", "Subscription"]

log = logging.getLogger("langgraph_celery.worker")

#: Subscription connections a client process keeps open between subscriptions.
_KEEP_IDLE = 8


def _redis_url(app: Any) -> str | None:
    for url in (app.conf.result_backend, app.conf.broker_url):
        if isinstance(url, str) and url.startswith(("redis://", "rediss://", "unix://")):
            return url
    return None


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def _bytes(name: str | bytes) -> bytes:
    return name if isinstance(name, bytes) else name.encode()


class Subscription:
    """A client's subscription to one thread's channel (and its run's task results), on a
    connection the notifier keeps for the next subscription once this one is closed."""

    def __init__(
        self,
        notifier: Notifier,
        pubsub: Any,
        channels: set[bytes],
        patterns: set[bytes],
        outputs: bytes | None = None,
    ) -> None:
        self._notifier = notifier
        self._pubsub = pubsub
        self._channels = channels
        self._patterns = patterns
        self._outputs_channel = outputs
        self._outputs: list[bytes] = []
        self._stepped = False
        self._broken = False

    @property
    def relays_outputs(self) -> bool:
        """Whether it receives the run's outputs channel."""
        return self._outputs_channel is not None

    def take_outputs(self) -> tuple[list[bytes], bool]:
        """The messages of the run's outputs channel received so far (in order), and whether a
        step wake-up came with them; both reset."""
        outputs, stepped = self._outputs, self._stepped
        self._outputs, self._stepped = [], False
        return outputs, stepped

    def wait(self, timeout: float) -> bool:
        """Block until a wake-up arrives (True) or ``timeout`` seconds pass (False).  A node task
        that only started is not one (its step is not stored yet), nor a message left on the
        connection for an earlier subscription.  A message on the run's outputs channel (when
        subscribed to it) wakes too, and is kept for :meth:`take_outputs`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            message = self._next(left)
            if message is None:
                if self._broken:
                    return False
                continue
            if self._keep(message):
                return True

    def sync(self, timeout: float) -> bool:
        """Receive every message Redis published to this subscription before the call (kept as
        :meth:`wait` keeps them); True once they are in, False if that took over ``timeout``
        seconds or the connection failed.

        A barrier: the subscription's connection gets Redis's answers in the order Redis made
        them, so the answer to a ``PING`` sent now comes after every message published before.
        A client that read a step in the store calls it to have every output the step's nodes
        streamed (they were published before the step was stored)."""
        token = uuid.uuid4().hex.encode()
        try:
            self._pubsub.ping(token)
        except Exception:
            self._broken = True
            return False
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            message = self._next(left)
            if message is None:
                if self._broken:
                    return False
                continue
            if message.get("type") == "pong":
                if message.get("data") == token:
                    return True
                continue
            self._keep(message)

    def _next(self, timeout: float) -> dict[str, Any] | None:
        try:
            message: dict[str, Any] | None = self._pubsub.get_message(
                ignore_subscribe_messages=True, timeout=timeout
            )
        except Exception:  # a broken connection: the caller falls back to reading the store
            self._broken = True
            return None
        return message  # (None: the time ran out, or it read a subscription's confirmation)

    def _keep(self, message: dict[str, Any]) -> bool:
        """Record ``message`` (an output, or a step's wake-up); whether it is one."""
        kind = message.get("type")
        channel = message.get("channel")
        if kind == "message" and channel is not None and channel == self._outputs_channel:
            self._outputs.append(message.get("data", b""))
            return True
        if kind == "message" and channel in self._channels:
            self._stepped = True
            return True
        if (
            kind == "pmessage"
            and message.get("pattern") in self._patterns
            and b'"STARTED"' not in message.get("data", b"")
        ):
            self._stepped = True
            return True
        return False

    def close(self) -> None:
        """Unsubscribe, and leave the connection to the notifier (closed if it failed)."""
        pubsub = self._pubsub
        try:
            if self._broken:
                raise ConnectionError("the subscription's connection failed")
            pubsub.unsubscribe(*self._channels)
            if self._outputs_channel is not None:
                pubsub.unsubscribe(self._outputs_channel)
            if self._patterns:
                pubsub.punsubscribe(*self._patterns)
        except Exception:
            with contextlib.suppress(Exception):  # closing a broken connection: nothing to do
                pubsub.close()
            return
        self._notifier._give_back(pubsub)


class Notifier:
    """Publishes and subscribes to per-thread wake-ups over Redis, when the app uses Redis."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._client: Any = None
        self._backend_publishes: bool | None = None
        self._lock = threading.Lock()
        # Subscriptions' connections, kept open for the next ones (a new one costs a connect
        # and a handshake); a forked child leaves its parent's alone.
        self._idle: list[Any] = []
        self._pid = os.getpid()

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
        """Wake the thread's followers; with ``final`` (the run stopped) its waiters too, on the
        final channel, which followers also listen to."""
        client = self._redis()
        if client is None:
            return
        try:
            client.publish(names.thread_channel(thread_id, final), b"1")
        except Exception as error:  # a wake-up is an optimisation; the store stays the truth
            log.debug("could not publish a wake-up for thread %r: %s", thread_id, error)

    def can_publish(self) -> bool:
        """Whether the app uses Redis, so that wake-ups and outputs can be published."""
        return self._redis() is not None

    def publish_output(self, run_id: str, data: str) -> None:
        """Publish one output a node of run ``run_id`` streamed (see ``worker/streaming.py``).
        Nobody stores it: a failure to publish loses it for the clients, never fails the
        node."""
        client = self._redis()
        if client is None:
            return
        try:
            client.publish(names.run_outputs_channel(run_id), data)
        except Exception as error:
            log.warning("could not publish an output of run %s: %s", run_id, error)

    def subscribe(
        self, thread_id: str, final: bool = False, run_id: str | None = None, outputs: bool = False
    ) -> Subscription | None:
        """Listen to the thread's every step (of run ``run_id``), or (``final``) only to its runs
        stopping; with ``outputs`` (and ``run_id``) to what the run's nodes stream too."""
        client = self._redis()
        if client is None:
            return None
        channels = {_bytes(names.thread_channel(thread_id, final=True))}
        if not final:
            channels.add(_bytes(names.thread_channel(thread_id)))
        patterns = set()
        if not final and run_id is not None and self.steps_published_by_backend:
            pattern = names.celery_task_id(_glob_escape(run_id), "*", "*")
            patterns.add(_bytes(self._app.backend.get_key_for_task(pattern)))
        output_channel = None
        if outputs and run_id is not None:
            output_channel = _bytes(names.run_outputs_channel(run_id))
        pubsub = None
        try:
            pubsub = self._take(client)
            pubsub.subscribe(*channels, *([output_channel] if output_channel else []))
            if patterns:
                pubsub.psubscribe(*patterns)
        except Exception as error:
            log.debug("could not subscribe to thread %r: %s", thread_id, error)
            if pubsub is not None:
                with contextlib.suppress(Exception):
                    pubsub.close()
            return None
        return Subscription(self, pubsub, channels, patterns, output_channel)

    def _take(self, client: Any) -> Any:
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        return client.pubsub()

    def _give_back(self, pubsub: Any) -> None:
        with self._lock:
            if self._pid == os.getpid() and len(self._idle) < _KEEP_IDLE:
                self._idle.append(pubsub)
                return
        with contextlib.suppress(Exception):
            pubsub.close()
