"""A consumer step that refuses task messages Celery's worker would stop on.

Celery's consumer turns a received message into a request in the worker's main process and
catches only invalid-content errors there: a JSON message whose body is not ``[args, kwargs,
embed]``, or whose headers lack an ``id``, carry a malformed ``timelimit``, a ``task`` that is
a list or a mapping (an unhashable name to look up) or a ``stamped_headers`` that is not a list
of names (the request iterates it, and looks each up, before it runs the task), raises out of
the consumer and stops the worker ("Unrecoverable error"), and so does a message naming an
unknown task without a usable ``id``.  The message is then redelivered to the next worker, which
stops too.  (Keyword arguments named ``self`` only make the task call fail, with a traceback; a
``shadow`` that is not a name fails the worker's count of tasks by name when the pool takes the
task, which skips the rest of that bookkeeping.)  :class:`GuardTaskMessages` wraps every task's
strategy with :func:`check_task_message`, and the consumer's lookup of a message's task and its
handling of unknown tasks, so such a message is rejected and logged like any invalid task
message ("Received invalid task message: ..."), and the worker keeps serving.
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


def _check_stamps(fields: dict[str, Any]) -> None:
    stamped = fields.get("stamped_headers")
    if stamped is not None and (
        not isinstance(stamped, list) or not all(isinstance(name, str) for name in stamped)
    ):
        raise InvalidTaskError("task message stamped_headers must be a list of names")
    if fields.get("stamps") is not None and not isinstance(fields["stamps"], dict):
        raise InvalidTaskError("task message stamps must be a mapping")


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
    if fields.get("shadow") is not None and not isinstance(fields["shadow"], str):
        raise InvalidTaskError("task message shadow must be a name")
    _check_stamps(fields)
    _check_time_limits(fields.get("timelimit"))


def _guarded(strategy: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(message: Any, body: Any, *args: Any, **kwargs: Any) -> Any:
        check_task_message(message, body)
        return strategy(message, body, *args, **kwargs)

    return guarded


class _Strategies(dict[Any, Any]):
    """The consumer's strategies by task name.  Celery's consumer looks a message's ``task`` up
    here before any strategy runs: a name that is a list or a mapping (unhashable) raised
    ``TypeError`` out of the consumer; it is not found (``KeyError``), and the consumer's
    handling of unknown tasks (guarded below) refuses it."""

    def __getitem__(self, name: Any) -> Any:
        try:
            return super().__getitem__(name)
        except TypeError:
            raise KeyError(name) from None


def _guarded_unknown_task(consumer: Any, on_unknown_task: Callable[..., Any]) -> Any:
    """Celery stores a failure result for a message naming an unknown task, under the
    message's id and name: a message whose ``task`` is not a name is rejected as invalid
    instead, and one with no usable id dropped as an unknown message (logged, rejected)."""

    def guarded(body: Any, message: Any, exc: Any) -> Any:
        headers = message.headers if isinstance(message.headers, dict) else {}
        fields = headers if "task" in headers else (message.payload if body is None else body)
        fields = fields if isinstance(fields, dict) else {}
        name = fields.get("task")
        if not isinstance(name, str):
            problem = f"task message task must be a str, got {type(name).__name__}"
            return consumer.on_invalid_task(body, message, InvalidTaskError(problem))
        task_id = fields.get("id")
        if not isinstance(task_id, str) or not task_id:
            return consumer.on_unknown_message(body, message)
        return on_unknown_task(body, message, exc)

    return guarded


class GuardTaskMessages(bootsteps.StartStopStep):  # type: ignore[misc]
    """Wraps the strategy of every task the consumer knows with :func:`check_task_message`,
    and its lookup of a message's task and handling of messages for unknown tasks (before its
    event loop builds the message handler from them)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, consumer: Any) -> None:
        if not isinstance(consumer.strategies, _Strategies):
            consumer.strategies = _Strategies(consumer.strategies)
        for name, strategy in list(consumer.strategies.items()):
            if getattr(strategy, "__wrapped_strategy__", None) is None:
                guarded = _guarded(strategy)
                guarded.__wrapped_strategy__ = strategy  # type: ignore[attr-defined]
                consumer.strategies[name] = guarded
        if "on_unknown_task" not in vars(consumer):
            consumer.on_unknown_task = _guarded_unknown_task(consumer, consumer.on_unknown_task)
