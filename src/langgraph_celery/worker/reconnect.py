"""A consumer step that keeps a worker serving when closing a lost broker connection fails.

When the broker goes away, Celery's consumer first collects the lost connection and then closes
it again before reconnecting (``Consumer.on_connection_error_after_connected``).  With Kombu's
Redis transport the second close can raise ``AttributeError`` ("'NoneType' object has no
attribute 'hostname'"): if a ``BRPOP`` was in flight, the first close of the consumer's channel
stops at the failed read, a second channel (the worker's control channel) then fails to close
and ends the collection early, and the transport is detached with the consumer's channel still
open and holding unacknowledged messages.  Closing it again tries to requeue them through the
detached transport.  The error escapes the consumer and stops the worker ("Unrecoverable
error") instead of letting it reconnect.

:class:`SurviveBrokerLoss` wraps the consumer's handler: an error raised once the lost
connection has been let go (``consumer.connection`` is ``None``) is logged and the consumer
reconnects as it does after any broker loss.  Nothing is lost by it: the unacknowledged
messages stay in the broker's unacked index, which Kombu restores after its visibility timeout,
and the checkpoint store's reaper re-dispatches any step whose message the broker lost.
``CeleryExecutor(app)`` adds it to the app's consumer steps; ``CeleryExecutor(app,
survive_broker_loss=False)`` does not (``tests/chaos/test_chaos_broker.py`` shows a worker
without it stopped there).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import bootsteps

from langgraph_celery.worker.lost import NodeRequest

__all__ = ["SurviveBrokerLoss", "SurvivingRequest"]

log = logging.getLogger("langgraph_celery.worker")

_HANDLER = "on_connection_error_after_connected"


def _surviving(consumer: Any, handler: Callable[[BaseException], None]) -> Any:
    def on_connection_error_after_connected(exc: BaseException) -> None:
        try:
            handler(exc)
        except Exception as error:
            if getattr(consumer, "connection", None) is not None:
                raise  # not from closing the lost connection: Celery decides, as before
            log.warning(
                "closing the lost broker connection failed (%r); reconnecting anyway",
                error,
                exc_info=True,
            )

    on_connection_error_after_connected.__wrapped__ = handler  # type: ignore[attr-defined]
    return on_connection_error_after_connected


class SurviveBrokerLoss(bootsteps.StartStopStep):  # type: ignore[misc]
    """Wraps the consumer's handler of a lost broker connection (see the module's text)."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def __init__(self, consumer: Any, **kwargs: Any) -> None:
        super().__init__(consumer, **kwargs)
        _install(consumer)


def _install(consumer: Any) -> None:
    """Wrap ``consumer``'s handler of a lost broker connection, once."""
    if _HANDLER not in vars(consumer):
        setattr(consumer, _HANDLER, _surviving(consumer, getattr(consumer, _HANDLER)))


def _detached(message: Any) -> bool:
    """Whether ``message`` came on a channel whose connection was let go (a lost broker)."""
    connection = getattr(getattr(message, "channel", None), "connection", None)
    return connection is None or getattr(connection, "client", None) is None


class SurvivingRequest(NodeRequest):
    """A task request whose acknowledgement does not stop the worker when the message came on a
    connection that was lost meanwhile (the broker restarted while the task ran).

    Kombu's Redis transport then raises ``AttributeError`` from the detached channel (the same
    "'NoneType' object has no attribute 'hostname'"), out of the consumer's event loop, which
    stops the worker.  The message cannot be acknowledged on a connection that is gone: it is
    logged and left; the broker delivers it again if it still holds it, and the task finds its
    step already done (its update is applied once).  Any other error propagates as before.

    The guard is on the message's own ``ack`` and ``reject``, not on :meth:`acknowledge`:
    Celery 5.7's consumer hands the request an ``on_ack`` that only schedules the
    acknowledgement on the event loop (``Consumer.call_soon_ack``), so the error is raised
    there, after :meth:`acknowledge` has returned.
    """

    def __init__(self, message: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(message, *args, **kwargs)
        _guard_settling(message, self.id)


def _guard_settling(message: Any, task_id: str) -> None:
    """Make ``message``'s ``ack`` and ``reject`` log, not raise, the ``AttributeError`` of a
    channel whose connection is gone (see :class:`SurvivingRequest`)."""
    for name, undone in (("ack", "acknowledged"), ("reject", "rejected")):
        setattr(message, name, _guarded(message, task_id, undone, getattr(message, name)))


def _guarded(
    message: Any, task_id: str, undone: str, settle: Callable[..., None]
) -> Callable[..., None]:
    def guarded(*args: Any, **kwargs: Any) -> None:
        try:
            settle(*args, **kwargs)
        except AttributeError as error:
            if not _detached(message):
                raise
            log.warning(
                "task %s: its message came on a broker connection that is gone; not %s (%r), "
                "it may be delivered again and is then applied once",
                task_id,
                undone,
                error,
            )

    return guarded
