"""Wake-ups over Redis (worker/notify.py): channels, the result backend's task states, and the
connections subscriptions share one after another."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from langgraph_celery.worker import names
from langgraph_celery.worker.notify import Notifier, Subscription


@pytest.fixture
def notifier(redis_url: str) -> Iterator[Notifier]:
    app = Celery(f"notify-{uuid.uuid4().hex[:6]}", broker=redis_url, backend=redis_url)
    yield Notifier(app)
    app.close()


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:
    import redis

    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


def _thread() -> str:
    return f"t-{uuid.uuid4().hex}"


def left_on(subscription: Subscription, client: Any) -> list[Any]:
    """The messages left unread on a subscription's connection: those before a marker published
    now on a channel of its own (Redis delivers a connection's messages in the order it
    published them).  After ``wait()`` returned True on the last message published to the
    subscription, nothing is left: an earlier message did not wake it."""
    pubsub = subscription._pubsub
    marker = f"marker-{uuid.uuid4().hex}".encode()
    pubsub.subscribe(marker)
    client.publish(marker, b"end")
    left = []
    while (message := pubsub.get_message(timeout=10)) is not None:
        if message["type"] == "message" and message["channel"] == marker:
            break
        if message["type"] not in ("subscribe", "unsubscribe", "psubscribe", "punsubscribe"):
            left.append(message)
    else:
        raise AssertionError(f"the marker never came back; before it: {left}")
    pubsub.unsubscribe(marker)
    return left


def test_a_step_wakes_followers_and_a_stop_wakes_waiters_too(
    notifier: Notifier, client: Any
) -> None:
    thread, other_thread = _thread(), _thread()
    follower = notifier.subscribe(thread)
    waiter = notifier.subscribe(thread, final=True)
    other = notifier.subscribe(other_thread, final=True)
    assert follower is not None and waiter is not None and other is not None
    try:
        notifier.publish(thread)
        assert follower.wait(10)
        assert left_on(follower, client) == []
        notifier.publish(thread, final=True)
        assert follower.wait(10)
        assert left_on(follower, client) == []
        # the waiter's only wake-up was the stop: the step before it did not wake it
        assert waiter.wait(10)
        assert left_on(waiter, client) == []
        # nor did the other thread's waiter wake for this thread
        notifier.publish(other_thread, final=True)
        assert other.wait(10)
        assert left_on(other, client) == []
    finally:
        follower.close()
        waiter.close()
        other.close()


def test_a_run_s_stored_task_results_wake_its_followers_but_a_start_does_not(
    notifier: Notifier, client: Any
) -> None:
    assert notifier.steps_published_by_backend
    thread, run, other_run = _thread(), uuid.uuid4().hex, uuid.uuid4().hex
    backend: Any = notifier._app.backend
    follower = notifier.subscribe(thread, run_id=run)
    assert follower is not None
    try:
        backend.store_result(names.celery_task_id(run, "c1", "a#1"), None, "STARTED")
        backend.store_result(names.celery_task_id(other_run, "c1", "a#1"), {}, "SUCCESS")
        backend.store_result(names.celery_task_id(run, "c1", "a#1"), {"status": "ok"}, "SUCCESS")
        assert follower.wait(10)
        # what woke it was the last result: the start, and the other run's result, did not
        assert left_on(follower, client) == []
    finally:
        follower.close()


def test_the_next_subscription_reuses_the_connection_and_not_its_leftovers(
    notifier: Notifier, client: Any
) -> None:
    first_thread, second_thread = _thread(), _thread()
    first = notifier.subscribe(first_thread)
    assert first is not None
    connection = first._pubsub
    notifier.publish(first_thread)  # never read: left on the connection
    first.close()

    second = notifier.subscribe(second_thread)
    assert second is not None
    try:
        assert second._pubsub is connection
        notifier.publish(first_thread)  # unsubscribed: not delivered, or not for this one
        notifier.publish(second_thread)
        assert second.wait(10)
        # what woke it was its own thread's wake-up, published last: not the leftover, nor
        # the first thread's
        assert left_on(second, client) == []
    finally:
        second.close()

    again = notifier.subscribe(first_thread)  # the same channel again, on the same connection
    assert again is not None
    try:
        assert again._pubsub is connection
        notifier.publish(first_thread)
        assert again.wait(10)
    finally:
        again.close()


def test_a_broken_connection_is_not_kept(notifier: Notifier) -> None:
    subscription = notifier.subscribe(_thread())
    assert subscription is not None
    subscription._pubsub.connection.disconnect()
    subscription._pubsub.connection._sock = None
    subscription._broken = True  # (as wait() marks it when its read fails)
    subscription.close()
    assert notifier._idle == []
