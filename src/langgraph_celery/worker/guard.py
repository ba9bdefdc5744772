"""A consumer step that refuses task messages Celery's worker would stop on.

Celery's consumer turns a received message into a request in the worker's main process and
catches only invalid-content errors there: a JSON message whose body is not ``[args, kwargs,
embed]``, or whose headers lack an ``id`` or carry a malformed ``timelimit``, raises out of the
consumer and stops the worker ("Unrecoverable error"), and so does a message naming an unknown
task without a usable ``id``.  The message is then redelivered to the next worker, which stops
too.  (Keyword arguments named ``self`` only make the task call fail, with a traceback.)
:class:`GuardTaskMessages` wraps every task's strategy with :func:`check_task_message`, so
such a message is rejected and logged like any invalid task message ("Received invalid task
message: ..."), and the worker keeps serving.
``CeleryExecutor(app)`` adds it to the app's consumer steps; ``CeleryExecutor(app,
guard_task_messages=False)`` does not (``tests/celery/test_celery_consumer_steps.py`` shows a
worker without it stopped by such a message).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import bootsteps
from celery.exceptions import InvalidTaskError

__all__ = ["GuardTaskMessages", "check_task_message"]


def _sequence(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _check_time_limits(value: Any) -> None:
    if value is None:
        return
    if not _sequence(value) or len(value) != 2:
        raise InvalidTaskError(f"timelimit must be [hard, soft], got {type(value).__name__}")
    for limit in value:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int | float)):
            raise InvalidTaskError(f"timelimit must hold numbers, got {type(limit).__name__}")


def check_task_message(message: Any, body: Any) -> None:
    """Raise :class:`InvalidTaskError` unless ``message`` has the shape of a task message.

    ``body`` is what the consumer decoded for a protocol-1 message (``None`` for protocol 2,
    whose headers name the task and whose body is decoded here; decoding errors and refused
    content types propagate as Celery reports them).
    """
    payload = message.payload if body is None else body
    headers = message.headers
    if isinstance(payload, dict) and (body is not None or "args" in payload):
        # protocol 1, or a hybrid: everything is in the body
        fields, args, kwargs = payload, payload.get("args", ()), payload.get("kwargs", {})
    elif _sequence(payload) and len(payload) == 3:
        fields, (args, kwargs, embed) = headers, payload
        if embed is not None and not isinstance(embed, dict):
            raise InvalidTaskError(f"task message embed must be a mapping, got {type(embed)}")
    else:
        raise InvalidTaskError(
            f"task message body must be [args, kwargs, embed], got {type(payload).__name__}"
        )
    if not isinstance(fields, dict):
        raise InvalidTaskError("task message headers must be a mapping")
    if not _sequence(args) or not isinstance(kwargs, dict):
        raise InvalidTaskError("task message args must be a list and kwargs a mapping")
    if "self" in kwargs:  # Celery's task call takes it as its own argument and fails
        raise InvalidTaskError("task message kwargs name 'self'")
    if not isinstance(fields.get("id"), str) or not fields["id"]:
        raise InvalidTaskError("task message has no id")
    _check_time_limits(fields.get("timelimit"))


def _guarded(strategy: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(message: Any, body: Any, *args: Any, **kwargs: Any) -> Any:
        check_task_message(message, body)
        return strategy(message, body, *args, **kwargs)

    return guarded


def _guarded_unknown_task(consumer: Any, on_unknown_task: Callable[..., Any]) -> Any:
    """Celery stores a failure result for a message naming an unknown task, under the
    message's id: with no usable id that raises out of the consumer.  Such a message is
    dropped as an unknown message instead (logged, rejected)."""

    def guarded(body: Any, message: Any, exc: Any) -> Any:
        headers = message.headers if isinstance(message.headers, dict) else {}
        fields = headers if "task" in headers else body
        task_id = fields.get("id") if isinstance(fields, dict) else None
        if not isinstance(task_id, str) or not task_id:
            return consumer.on_unknown_message(body, message)
        return on_unknown_task(body, message, exc)

    return guarded


class GuardTaskMessages(bootsteps.StartStopStep):  # type: ignore[misc]
    """Wraps the strategy of every task the consumer knows with :func:`check_task_message`,
    and its handling of messages for unknown tasks (before its event loop builds the message
    handler from them)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, consumer: Any) -> None:
        for name, strategy in list(consumer.strategies.items()):
            if getattr(strategy, "__wrapped_strategy__", None) is None:
                guarded = _guarded(strategy)
                guarded.__wrapped_strategy__ = strategy  # type: ignore[attr-defined]
                consumer.strategies[name] = guarded
        if "on_unknown_task" not in vars(consumer):
            consumer.on_unknown_task = _guarded_unknown_task(consumer, consumer.on_unknown_task)
