"""A consumer step that refuses task messages Celery's worker would stop on, and node task
messages that would set what only the store sets.

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

A node task takes its limits from its task (the node's ``timeout``) and its attempt count from
the retries Celery itself sends: a node task message whose ``timelimit`` is other than ``[None,
None]`` or the task's own ``[time_limit, soft_time_limit]`` (as a client sends it), or whose
``retries`` is not a count from 0 (a negative one would retry a node with no delay and no end),
is refused the same way: a message cannot lift or shorten a node's time limit (SPEC §8).  So is
one with an ``expires`` (a node task never has one): Celery discards an expired message as
revoked and adds its id to the worker's revoked ids, so that an expired copy of a step's message
under the step's own task id would have the step's real message (its retry waiting for its
countdown, a redelivery) discarded as revoked, and the run cancelled.  Nor may its ``eta`` lie
further ahead than the broker's visibility timeout (:func:`longest_countdown` is the longest a
node's retry waits): a worker holds a message with a later one as scheduled, and the reaper,
which asks the workers whether a lost step's task is alive, would wait for that copy instead of
sending the step again.  (An ``eta`` of AMQP's timestamp type, which Celery takes as it is, too.)
A message of any other task under a step's task id (``lgc:...``) is held to the same two rules
for ``expires`` and ``eta``: Celery keys the worker's revoked ids and the tasks the reaper asks
about by id, whatever the task, so an expired resume message under a running step's id had the
step's next delivery discarded as revoked, and the run cancelled.
On Redis it also checks each envelope kombu reads from a queue's list before Celery's consumer
sees it (:mod:`langgraph_celery.worker.envelopes`): one kombu cannot make a message of is
dropped with a log line instead of stopping the worker; on AMQP, properties ``py-amqp`` cannot
decode are decoded as none (logged), and Celery's consumer refuses the message.
``CeleryExecutor(app)`` adds it to the app's consumer steps; ``CeleryExecutor(app,
guard_task_messages=False)`` does not (``tests/celery/test_celery_consumer_steps.py`` shows a
worker without it stopped by such a message).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery, bootsteps
from celery.exceptions import InvalidTaskError
from celery.utils.time import maybe_iso8601
from kombu.exceptions import ContentDisallowed, DecodeError

from langgraph_celery.worker import names
from langgraph_celery.worker.envelopes import (
    bound_decompression,
    guard_amqp_properties,
    guard_redis_envelopes,
)

__all__ = ["GuardTaskMessages", "NodeRules", "check_task_message", "longest_countdown"]

log = logging.getLogger("langgraph_celery.worker")

#: ``timelimit``s a node task message may carry: none, or its task's own.
_NO_LIMITS = (None, None)


def _visibility_timeout(app: Celery) -> float:
    return float(app.conf.broker_transport_options.get("visibility_timeout", 3600))


def longest_countdown(app: Celery) -> float:
    """The longest a node task message waits before it runs (a node's retry, a subgraph's
    retry of its child run): 0.9 of the broker's visibility timeout (3600 s unless
    ``broker_transport_options`` sets it), so Redis never redelivers a message still waiting."""
    return 0.9 * _visibility_timeout(app)


class NodeRules:
    """What a node task message may carry: its task's own ``(time_limit, soft_time_limit)``
    (``limits``) and an ``eta`` at most ``furthest`` seconds ahead (the broker's visibility
    timeout: :func:`longest_countdown` and a margin for the clocks of other hosts)."""

    __slots__ = ("furthest", "limits")

    def __init__(self, limits: tuple[Any, Any], furthest: float) -> None:
        self.limits = limits
        self.furthest = furthest


#: The deepest a task message's headers and body may nest (lists and mappings): a worker's main
#: process pickles a request to hand it to its pool, and about 900 levels stopped it.
MAX_DEPTH = 100


def _too_deep(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and mappings more than ``limit`` levels deep."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        inner: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                inner.extend(item.values())
            elif isinstance(item, list | tuple):
                inner.extend(item)
        if not inner:
            return False
        level = inner
    return True


def _usable_id(value: Any) -> bool:
    """A task id Celery can key results by: a non-empty text that encodes as UTF-8."""
    if not isinstance(value, str) or not value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # (a lone surrogate)
        return False
    return True


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


def _check_retries(value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidTaskError(f"task message retries must be a count from 0, got {value!r:.40}")


def _check_eta(value: Any, furthest: float, what: str) -> None:
    if isinstance(value, datetime):
        eta = value  # (an AMQP header of type timestamp: Celery's request takes it as it is)
    elif not value or not isinstance(value, str):
        return  # (none; one of another type Celery's request refuses itself)
    else:
        try:
            eta = maybe_iso8601(value)  # (as Celery's request reads it)
        except (ValueError, OverflowError):
            return  # (Celery's request refuses it)
    if eta.tzinfo is None:
        eta = eta.replace(tzinfo=UTC)
    try:
        latest = datetime.now(UTC) + timedelta(seconds=furthest)
    except OverflowError:
        return
    if eta > latest:
        raise InvalidTaskError(
            f"{what} eta {str(value)[:40]!r} is more than {furthest:.0f} s ahead (the "
            "broker's visibility timeout): a node task waits at most that long (its retries)"
        )


def _check_node_limits(value: Any, own: tuple[Any, Any]) -> None:
    if value is None or tuple(value) in (_NO_LIMITS, own):
        return
    raise InvalidTaskError(
        f"node task message timelimit {list(value)!r} is not its task's own {list(own)!r}: a "
        "node's limits come from its task, never from a message"
    )


def check_task_message(
    message: Any, body: Any, node: NodeRules | None = None, furthest: float | None = None
) -> None:
    """Raise :class:`InvalidTaskError` unless ``message`` has the shape of a task message;
    with ``node`` (a node task's rules), of a node task message: its ``timelimit`` none or its
    task's own, its ``retries`` a count, no ``expires``, an ``eta`` no further than the rules'.
    With ``furthest`` (the broker's visibility timeout), a message of another task under a
    step's task id (``lgc:...``) has no ``expires`` and no ``eta`` further ahead either: the
    worker keys its revoked and its scheduled tasks by id, whatever their task.

    ``body`` is what the consumer decoded for a protocol-1 message (``None`` for protocol 2,
    whose headers name the task and whose body is decoded here; decoding errors and refused
    content types propagate as Celery reports them).
    """
    if body is None:
        try:
            payload = message.payload
        except (DecodeError, ContentDisallowed):
            raise  # (Celery's consumer reports these itself)
        except Exception as error:  # kombu's own code raising on what a message holds
            problem = f"{type(error).__name__}: {error}"
            raise InvalidTaskError(f"task message body cannot be decoded ({problem})") from error
    else:
        payload = body
    headers = message.headers
    if _too_deep((headers, payload), MAX_DEPTH):
        raise InvalidTaskError(
            f"task message nested more than {MAX_DEPTH} levels deep (the worker hands a "
            "request to its pool process by pickling it, which such nesting stops)"
        )
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
    if not _usable_id(fields.get("id")):
        raise InvalidTaskError("task message has no id (a non-empty text of UTF-8 characters)")
    if fields.get("shadow") is not None and not isinstance(fields["shadow"], str):
        raise InvalidTaskError("task message shadow must be a name")
    _check_stamps(fields)
    _check_time_limits(fields.get("timelimit"))
    if node is not None:
        _check_node_limits(fields.get("timelimit"), node.limits)
        _check_retries(fields.get("retries"))
        what, furthest = "node task message", node.furthest
    elif furthest is not None and fields["id"].startswith(names.STEP_TASK_ID_PREFIX):
        # A message of any task under a step's id may neither expire (Celery adds an expired
        # message's id to the worker's revoked ids, and would discard the step's own next
        # delivery as revoked, cancelling its run) nor be due later than a node task message
        # (the reaper asks the workers whether they hold a lost step's task, by id).
        what = f"task message under a step's task id ({fields['id'][:80]!r})"
    else:
        return
    if fields.get("expires") is not None:
        raise InvalidTaskError(f"{what} has an expires: a node task never expires")
    _check_eta(fields.get("eta"), furthest, what)


def _guarded(
    strategy: Callable[..., Any], node: NodeRules | None, furthest: float
) -> Callable[..., Any]:
    def guarded(message: Any, body: Any, *args: Any, **kwargs: Any) -> Any:
        check_task_message(message, body, node, furthest)
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
        if not _usable_id(fields.get("id")):  # (Celery would store a result under it)
            return consumer.on_unknown_message(body, message)
        return on_unknown_task(body, message, exc)

    return guarded


def _never_raising(consumer: Any, handler: Callable[..., Any], settle: str) -> Any:
    """Celery's handler of an invalid or undecodable message (``on_invalid_task``,
    ``on_decode_error``), which prints the message's body first: one whose body is not text
    (``null``) raised out of it and stopped the worker, and the message, redelivered, stopped
    the next.  If it raises, the message is logged and settled (``settle``: ``reject`` or
    ``ack``) here."""

    def guarded(*args: Any) -> Any:
        message = args[1] if settle == "reject" else args[0]
        try:
            return handler(*args)
        except Exception as error:
            log.error(
                "Received an unusable message (%s), not shown: %s: %s",
                _summary(message),
                type(error).__name__,
                error,
            )
            if settle == "reject":
                message.reject_log_error(log, consumer.connection_errors)
            else:
                message.ack_log_error(log, consumer.connection_errors)
            return None

    guarded.__guarded_handler__ = True  # type: ignore[attr-defined]
    return guarded


def _summary(message: Any) -> str:
    headers = getattr(message, "headers", None)
    headers = headers if isinstance(headers, dict) else {}
    return f"task {str(headers.get('task'))[:80]!r}, id {str(headers.get('id'))[:80]!r}"


def _node_rules(consumer: Any, name: str) -> NodeRules | None:
    """A node task's rules (its own limits, the app's visibility timeout); ``None`` for other
    tasks."""
    task = consumer.app.tasks.get(name) if names.is_node_task(name) else None
    if task is None:
        return None
    return NodeRules((task.time_limit, task.soft_time_limit), _visibility_timeout(consumer.app))


class GuardTaskMessages(bootsteps.StartStopStep):  # type: ignore[misc]
    """Wraps the strategy of every task the consumer knows with :func:`check_task_message`,
    and its lookup of a message's task and handling of messages for unknown tasks (before its
    event loop builds the message handler from them); on Redis, guards the task consumer's
    channel against envelopes kombu cannot read."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, consumer: Any) -> None:
        if not isinstance(consumer.strategies, _Strategies):
            consumer.strategies = _Strategies(consumer.strategies)
        for name, strategy in list(consumer.strategies.items()):
            if getattr(strategy, "__wrapped_strategy__", None) is None:
                furthest = _visibility_timeout(consumer.app)
                guarded = _guarded(strategy, _node_rules(consumer, name), furthest)
                guarded.__wrapped_strategy__ = strategy  # type: ignore[attr-defined]
                consumer.strategies[name] = guarded
        if "on_unknown_task" not in vars(consumer):
            consumer.on_unknown_task = _guarded_unknown_task(consumer, consumer.on_unknown_task)
        if not getattr(consumer.on_invalid_task, "__guarded_handler__", False):
            consumer.on_invalid_task = _never_raising(consumer, consumer.on_invalid_task, "reject")
        if not getattr(consumer.on_decode_error, "__guarded_handler__", False):
            consumer.on_decode_error = _never_raising(consumer, consumer.on_decode_error, "ack")
        task_consumer = getattr(consumer, "task_consumer", None)
        if task_consumer is not None:
            task_consumer.on_decode_error = consumer.on_decode_error
        guard_redis_envelopes(getattr(task_consumer, "channel", None))
        guard_amqp_properties()
        bound_decompression()
