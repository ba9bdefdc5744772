"""The consumer steps ``CeleryExecutor`` adds to its app's workers, each of which a keyword turns
off: ``GuardTaskMessages`` (``guard_task_messages``) here, end to end against the failure it
guards; ``SurviveBrokerLoss`` (``survive_broker_loss``) end to end in
``tests/chaos/test_chaos_broker.py``."""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from kombu import Exchange, Queue

from app_kit import app_env
from celery_support import APPS_DIR, launch_worker, wait_until
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.worker.envelopes import MAX_INFLATED
from langgraph_celery.worker.guard import GuardTaskMessages
from langgraph_celery.worker.reconnect import SurviveBrokerLoss


@pytest.mark.parametrize(
    ("options", "steps"),
    [
        ({}, {GuardTaskMessages, SurviveBrokerLoss}),
        ({"guard_task_messages": False}, {SurviveBrokerLoss}),
        ({"survive_broker_loss": False}, {GuardTaskMessages}),
        ({"guard_task_messages": False, "survive_broker_loss": False}, set()),
    ],
)
def test_each_consumer_step_is_added_unless_turned_off(
    options: dict[str, bool], steps: set[type]
) -> None:
    app = Celery("steps", broker="memory://", set_as_current=False)
    CeleryExecutor(app, **options)
    assert {GuardTaskMessages, SurviveBrokerLoss} & set(app.steps["consumer"]) == steps


def test_the_switches_are_keyword_only() -> None:
    app = Celery("steps", broker="memory://", set_as_current=False)
    with pytest.raises(TypeError):
        CeleryExecutor(app, None, 30.0, 120.0, None, None, False)  # type: ignore[misc]


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


#: Task messages that raise out of Celery's consumer, each with what the guard logs of it:
#: (body, headers over a good message's, the reason logged).
_STOPPING = {
    # a body of two values, not [args, kwargs, embed]
    "body": ([1, 2], {}, "task message body must be [args, kwargs, embed], got list"),
    # a task name Celery cannot look up (unhashable), before any strategy runs
    "task-list": ([[1, 1], {}, {}], {"task": ["guard.add"]}, "task must be a str, got list"),
    "task-dict": ([[1, 1], {}, {}], {"task": {"a": 1}}, "task must be a str, got dict"),
    # stamped headers the request iterates, and looks up, before it runs the task
    "stamped-int": ([[1, 1], {}, {}], {"stamped_headers": 5}, "stamped_headers must be a list"),
    "stamped-lists": (
        [[1, 1], {}, {}],
        {"stamped_headers": [["x"]], "stamps": {}},
        "stamped_headers must be a list of names",
    ),
    # kwargs nested 900 levels deep (2 KB): the main process pickles the request for its pool
    "deep-kwargs": ([[], {"x": _nested(900)}, {}], {}, "nested more than 100 levels"),
}


@pytest.mark.parametrize("case", sorted(_STOPPING))
@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "guard-off"])
def test_a_message_celery_cannot_read_stops_a_worker_only_without_the_guard(
    celery_redis_url: str, tmp_path: Path, guarded: bool, case: str
) -> None:
    """A task message Celery's consumer cannot read (a body that is a list of two values, not
    ``[args, kwargs, embed]``; a ``task`` header that is a list or a mapping; a
    ``stamped_headers`` that is not a list of names) raises out of it: without the guard the
    worker stops ("Unrecoverable error"), and the message, redelivered, would stop the next
    one; with it the message is rejected and logged, and the worker serves on."""
    body, headers, reason = _STOPPING[case]
    queue = f"guard-{uuid.uuid4().hex[:8]}"
    env = app_env(
        APPS_DIR, {"GUARD_BROKER_URL": celery_redis_url, "GUARD_OFF": "0" if guarded else "1"}
    )
    worker = launch_worker("guard_app", [queue], queue, env, tmp_path / "worker.log", 1)
    client = Celery("guard-client", broker=celery_redis_url, backend=celery_redis_url)
    try:
        assert client.send_task("guard.add", (1, 1), queue=queue).get(timeout=30) == 2
        target = Queue(queue, Exchange(queue), routing_key=queue)
        with client.producer_or_acquire() as producer:
            producer.publish(
                json.dumps(body).encode(),
                exchange=target.exchange,
                routing_key=target.routing_key,
                declare=[target],
                content_type="application/json",
                content_encoding="utf-8",
                headers={"lang": "py", "task": "guard.add", "id": str(uuid.uuid4()), **headers},
            )
        if guarded:
            worker.wait_for_log("Received invalid task message: ")
            assert reason in worker.log()
            assert client.send_task("guard.add", (2, 1), queue=queue).get(timeout=30) == 3
            assert worker.alive()
            assert "Unrecoverable error" not in worker.log()
        else:
            wait_until(lambda: not worker.alive(), 30, 0.1, "the unguarded worker to stop")
            assert "Unrecoverable error" in worker.log()
    finally:
        worker.kill()  # what it did is in its log already
        client.close()


def _envelope(queue: str, **changes: Any) -> dict[str, Any]:
    """A kombu Redis envelope of a good ``guard.add(1, 1)`` message on ``queue``, changed."""
    good: dict[str, Any] = {
        "body": base64.b64encode(json.dumps([[1, 1], {}, {}]).encode()).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"lang": "py", "task": "guard.add", "id": str(uuid.uuid4())},
        "properties": {
            "delivery_tag": str(uuid.uuid4()),
            "delivery_info": {"exchange": queue, "routing_key": queue},
            "priority": 0,
            "body_encoding": "base64",
        },
    }
    for key, value in changes.items():
        if key in ("delivery_tag", "delivery_info", "body_encoding"):
            good["properties"][key] = value
        elif value is None:
            good.pop(key)
        else:
            good[key] = value
    return good


#: Items of a queue's Redis list that kombu cannot make a message of, each with what the guard
#: logs of it.
_UNREADABLE: dict[str, tuple[Any, str]] = {
    "not-json": (b"garbage{", "it is not JSON"),
    "not-utf8": (b"\xff\xfe{", "it is not JSON"),
    "too-deep": (b"[" * 100_000, "RecursionError"),
    "a-list": ([1, 2], "it must be a mapping, got list"),
    "no-properties": ({"properties": None}, "its properties must be a mapping"),
    "no-delivery-tag": ({"delivery_tag": None}, "its delivery_tag must be"),
    "delivery-tag-a-list": ({"delivery_tag": ["t"]}, "its delivery_tag must be"),
    "delivery-tag-a-dict": ({"delivery_tag": {"t": 1}}, "its delivery_tag must be"),
    "no-exchange": ({"delivery_info": {}}, "its delivery_info must name its exchange"),
    "body-null": ({"body": None}, "its body must be a text"),
    "content-encoding-a-number": ({"content-encoding": 7}, "its content-encoding must be a text"),
    "body-not-base64": ({"body": "!!!x"}, "Error"),
    "unknown-body-encoding": ({"body_encoding": "rot13"}, "AttributeError"),
    "headers-a-list": ({"headers": ["task"]}, "list"),
    "delivery-info-a-text": ({"delivery_info": "x"}, "str"),
}


def _unreadable(queue: str, case: str) -> bytes:
    item, _ = _UNREADABLE[case]
    if isinstance(item, bytes):
        return item
    if isinstance(item, list):
        return json.dumps(item).encode()
    changes = {k: v for k, v in item.items() if not (k == "delivery_tag" and v is None)}
    envelope = _envelope(queue, **changes)
    if "delivery_tag" in item:
        del envelope["properties"]["delivery_tag"]
    return json.dumps(envelope).encode()


@pytest.mark.parametrize("guarded", [True, False], ids=["guarded", "guard-off"])
def test_an_envelope_kombu_cannot_read_is_dropped_and_the_worker_serves_on(
    celery_redis_url: str, tmp_path: Path, guarded: bool
) -> None:
    """On Redis a message is a JSON envelope in the queue's list, which kombu reads in the
    worker's event loop before Celery sees it: one that is not JSON, not a mapping, or that
    kombu cannot make a message of (no properties or delivery tag, a body its encoding cannot
    decode), or nested deeper than Python's JSON parser goes, stopped the worker.  With the
    guard each is dropped with a log line and the worker serves the next task; without it
    (``guard_task_messages=False``) the first stops the worker."""
    import redis

    queue = f"guard-{uuid.uuid4().hex[:8]}"
    env = app_env(
        APPS_DIR, {"GUARD_BROKER_URL": celery_redis_url, "GUARD_OFF": "0" if guarded else "1"}
    )
    worker = launch_worker("guard_app", [queue], queue, env, tmp_path / "worker.log", 1)
    client = Celery("guard-client", broker=celery_redis_url, backend=celery_redis_url)
    store = redis.Redis.from_url(celery_redis_url)
    try:
        assert client.send_task("guard.add", (1, 1), queue=queue).get(timeout=30) == 2
        # (BRPOP takes the list's right end: the first pushed is read first)
        store.rpush(queue, *(_unreadable(queue, case) for case in sorted(_UNREADABLE)))
        if not guarded:
            wait_until(lambda: not worker.alive(), 30, 0.1, "the unguarded worker to stop")
            assert "Unrecoverable error" in worker.log()
            return
        assert client.send_task("guard.add", (2, 1), queue=queue).get(timeout=30) == 3
        dropped = re.findall(r"Dropped a message on the broker .*?: (.*)", worker.log())
        assert len(dropped) == len(_UNREADABLE), worker.log()
        for case, found in zip(sorted(_UNREADABLE), reversed(dropped), strict=True):
            assert _UNREADABLE[case][1] in found, (case, found)
        assert worker.alive()
        assert "Unrecoverable error" not in worker.log()
        assert store.llen(queue) == 0
    finally:
        worker.kill()
        client.close()
        store.close()


def _peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def test_a_compression_bomb_or_an_id_celery_cannot_store_leaves_the_worker_serving(
    celery_redis_url: str, tmp_path: Path
) -> None:
    """A 256 KB message whose ``compression`` header has kombu inflate it to 256 MB is refused
    once past 64 MB (the worker's peak memory stays well below the 256 MB); a message for an
    unknown task whose id holds a lone surrogate (Celery stores a failure result under it,
    which Redis cannot encode) is dropped as an unknown message.  The worker serves on after
    both."""
    queue = f"guard-{uuid.uuid4().hex[:8]}"
    env = app_env(APPS_DIR, {"GUARD_BROKER_URL": celery_redis_url, "GUARD_OFF": "0"})
    worker = launch_worker("guard_app", [queue], queue, env, tmp_path / "worker.log", 1)
    client = Celery("guard-client", broker=celery_redis_url, backend=celery_redis_url)
    try:
        assert client.send_task("guard.add", (1, 1), queue=queue).get(timeout=30) == 2
        before = _peak_rss_mb(worker.process.pid)
        target = Queue(queue, Exchange(queue), routing_key=queue)
        bomb = zlib.compress(b"[" + b" " * (256 * 2**20) + b"]", 9)
        assert len(bomb) < 300_000
        with client.producer_or_acquire() as producer:
            producer.publish(
                bomb,
                exchange=target.exchange,
                routing_key=target.routing_key,
                declare=[target],
                content_type="application/json",
                content_encoding="binary",
                headers={
                    "lang": "py",
                    "task": "guard.add",
                    "id": str(uuid.uuid4()),
                    "compression": "application/x-gzip",
                },
            )
            producer.publish(
                json.dumps([[1, 1], {}, {}]).encode(),
                exchange=target.exchange,
                routing_key=target.routing_key,
                content_type="application/json",
                content_encoding="utf-8",
                headers={"lang": "py", "task": "no.such.task", "id": "x\ud800"},
            )
        assert client.send_task("guard.add", (2, 1), queue=queue).get(timeout=30) == 3
        assert worker.alive(), worker.log()[-3000:]
        assert "Unrecoverable error" not in worker.log()
        assert "inflates past" in worker.log()
        # (inflating stops at 64 MB, in buffers of up to twice that; the whole body is 256 MB)
        assert _peak_rss_mb(worker.process.pid) < before + 3 * MAX_INFLATED / 2**20
    finally:
        worker.kill()
        client.close()


def _message(headers: dict[str, Any], body: Any = None) -> Any:
    """A protocol-2 task message as the consumer hands it to a strategy."""
    from types import SimpleNamespace

    good = {"lang": "py", "task": "t", "id": "an-id", "timelimit": [None, None], "retries": 0}
    return SimpleNamespace(headers={**good, **headers}, payload=body or [[], {}, {}])


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"task": ["t"]}, None),  # (refused before: the consumer cannot look it up)
        ({"stamped_headers": 5}, "stamped_headers must be a list of names"),
        ({"stamped_headers": "abc"}, "stamped_headers must be a list of names"),
        ({"stamped_headers": [1]}, "stamped_headers must be a list of names"),
        ({"stamped_headers": ["x"], "stamps": [1]}, "stamps must be a mapping"),
        ({"stamped_headers": ["x"], "stamps": {"x": 1}}, None),
        ({"stamped_headers": None, "stamps": None}, None),
        ({"shadow": ["a"]}, "shadow must be a name"),
        ({"shadow": "another name"}, None),
        ({"timelimit": [1, "a"]}, "timelimit must hold numbers"),
        ({"timelimit": [30, 5]}, None),  # (any task but a node task sets its own)
        ({"retries": -1}, None),
    ],
)
def test_check_task_message(headers: dict[str, Any], reason: str | None) -> None:
    from celery.exceptions import InvalidTaskError

    from langgraph_celery.worker.guard import check_task_message

    if reason is None:
        check_task_message(_message(headers), None)
    else:
        with pytest.raises(InvalidTaskError, match=reason):
            check_task_message(_message(headers), None)


@pytest.mark.parametrize(
    ("own", "headers", "reason"),
    [
        ((None, None), {}, None),
        ((None, None), {"timelimit": None, "retries": None}, None),
        ((None, None), {"timelimit": [1.0, 0.5]}, "timelimit [1.0, 0.5] is not its task's own"),
        ((None, None), {"timelimit": [1.0, None]}, "is not its task's own [None, None]"),
        ((2.5, 0.5), {"timelimit": [2.5, 0.5], "retries": 3}, None),
        ((2.5, 0.5), {"timelimit": [None, None]}, None),
        ((2.5, 0.5), {"timelimit": [None, 30]}, "never from a message"),
        ((2.5, 0.5), {"timelimit": [3000, 3000]}, "never from a message"),
        ((None, None), {"retries": -1}, "retries must be a count from 0, got -1"),
        ((None, None), {"retries": "1"}, "retries must be a count from 0, got '1'"),
        ((None, None), {"retries": True}, "retries must be a count from 0"),
        ((None, None), {"retries": 1.5}, "retries must be a count from 0"),
        ((None, None), {"expires": None}, None),
        ((None, None), {"expires": "2000-01-01T00:00:00+00:00"}, "a node task never expires"),
    ],
)
def test_a_node_task_message_sets_neither_its_limits_nor_its_attempts(
    own: tuple[Any, Any], headers: dict[str, Any], reason: str | None
) -> None:
    """A node task's time limits are its task's (the node's timeout), and its attempts the
    retries Celery counts from 0: a message that says otherwise is refused (SPEC §8)."""
    from celery.exceptions import InvalidTaskError

    from langgraph_celery.worker.guard import NodeRules, check_task_message

    rules = NodeRules(own, 3600.0)
    if reason is None:
        check_task_message(_message(headers), None, rules)
    else:
        with pytest.raises(InvalidTaskError, match=re.escape(reason)):
            check_task_message(_message(headers), None, rules)


@pytest.mark.parametrize(
    ("eta", "reason"),
    [
        (None, None),
        ("in 3000 s", None),  # (a retry waits at most 0.9 of the visibility timeout)
        ("1 day ago", None),
        ("in 3700 s", "is more than 3600 s ahead"),
        ("in 365 days", "is more than 3600 s ahead"),
        ("9999-12-31T23:59:59+00:00", "is more than 3600 s ahead"),
        ("9999-12-31T23:59:59", "is more than 3600 s ahead"),  # (no zone: UTC)
        ("not a time", None),  # (Celery's request refuses it)
        (12, None),
    ],
)
def test_a_node_task_message_is_due_within_the_visibility_timeout(
    eta: Any, reason: str | None
) -> None:
    """A copy of a node task message due further ahead than a retry ever waits is refused: a
    worker would hold it as scheduled, and the reaper wait for it (``test_celery_beat.py``
    has the run it wedged)."""
    from datetime import UTC, datetime, timedelta

    from celery.exceptions import InvalidTaskError

    from langgraph_celery.worker.guard import NodeRules, check_task_message

    if isinstance(eta, str) and eta.startswith(("in ", "1 day")):
        amount, unit = eta.removeprefix("in ").split()[:2]
        seconds = float(amount) * (86400 if unit.startswith("day") else 1)
        eta = datetime.now(UTC) + timedelta(seconds=-86400 if "ago" in eta else seconds)
        eta = eta.isoformat()
    message = _message({"eta": eta})
    rules = NodeRules((None, None), 3600.0)
    if reason is None:
        check_task_message(message, None, rules)
    else:
        with pytest.raises(InvalidTaskError, match=re.escape(reason)):
            check_task_message(message, None, rules)


def _noop() -> None:
    return None


def _publish_one(connection: Any, prefix: str, task_id: str | None = None) -> tuple[Any, Any]:
    """Publish a task message ``x`` (id ``task_id``) to a new queue and take it (unacknowledged)
    as a consumer does: (the queue, the message)."""
    queue_name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    channel = connection.channel()
    queue = Queue(queue_name, Exchange(queue_name), queue_name, channel=channel)
    queue.declare()
    connection.Producer(channel=channel).publish(
        [[], {}, {}],
        exchange=queue_name,
        routing_key=queue_name,
        headers={"id": task_id or uuid.uuid4().hex, "task": "x", "lang": "py"},
        serializer="json",
        declare=[queue],
    )
    message = queue.get(no_ack=False)
    assert message is not None
    return queue, message


def _detached_message(broker_url: str) -> Any:
    """A real task message taken from a Redis queue on a connection that is then let go, as
    Celery's consumer does when the broker goes away while the task runs."""
    from kombu import Connection

    connection = Connection(broker_url)
    _, message = _publish_one(connection, "detached")
    connection.collect()  # (the consumer lets the lost connection go)
    return message


def _settle_later(hub: Any) -> Any:
    """What Celery 5.7's consumer passes a task's request as ``on_ack`` / ``on_reject``: a
    callable that only schedules the message's ``ack_log_error`` (or ``reject_log_error``) on
    the worker's event loop (``Consumer.call_soon_ack``); ``hub.run_once()`` runs it."""

    def later(settle: Any) -> Any:
        return lambda *args, **kwargs: hub.call_soon(lambda: settle(*args, **kwargs))

    return later


@pytest.mark.parametrize("on_the_loop", [True, False], ids=["scheduled", "at-once"])
@pytest.mark.parametrize("surviving", [True, False], ids=["executor's request", "celery's"])
@pytest.mark.parametrize("settling", ["acknowledge", "reject"])
def test_settling_on_a_lost_connection_does_not_stop_the_worker(
    celery_redis_url: str,
    surviving: bool,
    on_the_loop: bool,
    settling: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kombu's Redis transport raises AttributeError when a task finished after the broker went
    away acknowledges (or rejects) its message on the detached channel; out of the consumer's
    loop it stops the worker.  The executor's request class logs it instead (the message, if
    the broker still holds it, comes again and is applied once), whether the settling runs at
    once or, as Celery 5.7's consumer has it, later on the event loop.  The failure is injected
    where Kombu raises it: the message's ``ack`` / ``reject``."""
    from celery.worker.request import Request
    from kombu.asynchronous import Hub

    from langgraph_celery.worker.reconnect import SurvivingRequest

    app = Celery("acks", broker=celery_redis_url, set_as_current=False)
    task = app.task(name="x", shared=False)(_noop)
    message = _detached_message(celery_redis_url)

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AttributeError("'NoneType' object has no attribute 'hostname'")

    message.ack = message.reject = fail
    hub = Hub()
    try:
        later = _settle_later(hub) if on_the_loop else (lambda settle: settle)
        kind = SurvivingRequest if surviving else Request
        # (built as Celery's consumer builds a task's request)
        request = kind(
            message,
            on_ack=later(message.ack_log_error),
            on_reject=later(message.reject_log_error),
            app=app,
            task=task,
        )

        def settle() -> None:
            getattr(request, settling)()
            if on_the_loop:
                hub.run_once()

        if surviving:
            settle()
            assert request.acknowledged
            assert "came on a broker connection that is gone" in caplog.text
        else:
            with pytest.raises(AttributeError, match="hostname"):
                settle()
    finally:
        hub.close()


def test_an_acknowledgement_error_on_a_live_connection_still_propagates(
    celery_redis_url: str,
) -> None:
    from kombu import Connection

    from langgraph_celery.worker.reconnect import SurvivingRequest

    app = Celery("acks-live", broker=celery_redis_url, set_as_current=False)
    task = app.task(name="x", shared=False)(_noop)
    with Connection(celery_redis_url) as connection:
        queue, message = _publish_one(connection, "live")

        def ack(*args: Any, **kwargs: Any) -> None:
            raise AttributeError("a bug, not a lost connection")

        message.ack = ack
        request = SurvivingRequest(message, on_ack=message.ack_log_error, app=app, task=task)
        with pytest.raises(AttributeError, match="a bug"):
            request.acknowledge()
        queue.delete()


def _bound_noop(task: Any) -> None:
    return None


def _dead_pid(zombie: bool) -> tuple[int, Any]:
    """The pid of a process that has ended: reaped, or a zombie (not yet waited for)."""
    import subprocess
    import time

    child = subprocess.Popen(["true"])
    if zombie:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
    else:
        child.wait()
    return child.pid, child


@pytest.mark.parametrize("process", ["reaped", "zombie", "alive"])
def test_a_task_reported_past_its_hard_limit_whose_process_had_died_is_requeued_as_lost(
    celery_redis_url: str, process: str
) -> None:
    """Billiard's pool reports a job ``TimeLimitExceeded`` (on_failure, then on_timeout) and
    only then kills its process; a process already gone was killed by something else (``kill
    -9`` shortly before the limit, before the pool noticed).  The executor's request class
    reports that as Celery reports a lost worker: the message goes back to the queue, no failure
    is recorded.  A process still running really ran past its limit: Celery's handling stays
    (failure recorded, the task's failure hook called, the message acknowledged)."""
    from billiard.einfo import ExceptionInfo
    from celery.exceptions import TimeLimitExceeded
    from kombu import Connection

    from langgraph_celery.worker.lost import NodeRequest, process_gone

    failures: list[BaseException] = []

    def on_failure(task: Any, exc: BaseException, *args: Any) -> None:
        failures.append(exc)

    app = Celery("limits", broker=celery_redis_url, backend=celery_redis_url, set_as_current=False)
    task = app.task(
        name="x",
        bind=True,
        shared=False,
        acks_late=True,
        reject_on_worker_lost=True,
        on_failure=on_failure,
    )(_bound_noop)
    child = None
    if process == "alive":
        pid = os.getpid()
    else:
        pid, child = _dead_pid(zombie=process == "zombie")
    assert process_gone(pid) is (process != "alive")
    task_id = uuid.uuid4().hex
    with Connection(celery_redis_url) as connection:
        queue, message = _publish_one(connection, "limits", task_id)
        request = NodeRequest(
            message,
            on_ack=message.ack_log_error,
            on_reject=message.reject_log_error,
            app=app,
            task=task,
        )
        request.worker_pid = pid
        # (in billiard's order: the job's result set, then its timeout handled)
        try:
            raise TimeLimitExceeded(4.0)
        except TimeLimitExceeded:
            request.on_failure(ExceptionInfo(), return_ok=True)
        request.on_timeout(soft=False, timeout=4.0)
        again = queue.get(no_ack=True)
        state = app.AsyncResult(task_id).state
        queue.delete()
    if child is not None:
        child.wait()
    if process == "alive":
        assert again is None  # acknowledged
        assert state == "FAILURE"
        assert any(isinstance(error, TimeLimitExceeded) for error in failures)
    else:
        assert again is not None and again.headers["id"] == task_id  # back on the queue
        assert state == "PENDING"  # no failure recorded
        assert failures == []


def test_process_gone() -> None:
    from langgraph_celery.worker.lost import process_gone

    assert not process_gone(os.getpid())
    assert not process_gone(None)
    pid, _ = _dead_pid(zombie=False)
    assert process_gone(pid)


def test_a_node_task_message_is_sent_due_no_later_than_a_worker_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A compiled subgraph node's retry of its child run waits what its ``RetryPolicy`` says,
    at most :func:`longest_countdown` (0.9 of the visibility timeout), as a node's own retry
    does: a worker refuses a message due later."""
    from langgraph_celery.checkpoint.base import PendingTask
    from langgraph_celery.worker.envelope import TaskEnvelope
    from langgraph_celery.worker.guard import longest_countdown

    app = Celery("countdowns", broker="memory://", set_as_current=False)
    app.conf.broker_transport_options = {"visibility_timeout": 600}
    executor = CeleryExecutor(app)
    sent: list[Any] = []
    monkeypatch.setattr(app, "send_task", lambda *a, **kw: sent.append(kw["countdown"]))
    envelope = TaskEnvelope(
        graph_id="g", thread_id="t", run_id="r", step=1, checkpoint_id="c", node="n", task_id="k"
    )
    task = PendingTask(id="k", node="n")
    for countdown in (None, 2.5, 539.0, 7200.0):
        executor._send_node(envelope, task, countdown=countdown)
    assert longest_countdown(app) == 540.0
    assert sent == [None, 2.5, 539.0, 540.0]
