"""Wake-ups over Redis (worker/notify.py): channels, the result backend's task states, and the
connections subscriptions share one after another."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from langgraph_celery.worker import names
from langgraph_celery.worker.notify import Notifier


@pytest.fixture
def notifier(redis_url: str) -> Iterator[Notifier]:
    app = Celery(f"notify-{uuid.uuid4().hex[:6]}", broker=redis_url, backend=redis_url)
    yield Notifier(app)
    app.close()


def _thread() -> str:
    return f"t-{uuid.uuid4().hex}"


def test_a_step_wakes_followers_and_a_stop_wakes_waiters_too(notifier: Notifier) -> None:
    thread = _thread()
    follower = notifier.subscribe(thread)
    waiter = notifier.subscribe(thread, final=True)
    assert follower is not None and waiter is not None
    try:
        notifier.publish(thread)
        assert follower.wait(2.0)
        assert not waiter.wait(0.3)
        notifier.publish(thread, final=True)
        assert waiter.wait(2.0)
        assert follower.wait(2.0)
        assert not notifier.subscribe(_thread(), final=True).wait(0.2)  # type: ignore[union-attr]
    finally:
        follower.close()
        waiter.close()


def test_a_run_s_stored_task_results_wake_its_followers_but_a_start_does_not(
    notifier: Notifier,
) -> None:
    assert notifier.steps_published_by_backend
    thread, run, other_run = _thread(), uuid.uuid4().hex, uuid.uuid4().hex
    backend: Any = notifier._app.backend
    follower = notifier.subscribe(thread, run_id=run)
    assert follower is not None
    try:
        backend.store_result(names.celery_task_id(run, "c1", "a#1"), None, "STARTED")
        backend.store_result(names.celery_task_id(other_run, "c1", "a#1"), {}, "SUCCESS")
        assert not follower.wait(0.5)
        backend.store_result(names.celery_task_id(run, "c1", "a#1"), {"status": "ok"}, "SUCCESS")
        assert follower.wait(2.0)
    finally:
        follower.close()


def test_the_next_subscription_reuses_the_connection_and_not_its_leftovers(
    notifier: Notifier,
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
        assert not second.wait(0.5)
        notifier.publish(first_thread)  # unsubscribed: not delivered, or not for this one
        assert not second.wait(0.3)
        notifier.publish(second_thread)
        assert second.wait(2.0)
    finally:
        second.close()

    again = notifier.subscribe(first_thread)  # the same channel again, on the same connection
    assert again is not None
    try:
        assert again._pubsub is connection
        notifier.publish(first_thread)
        assert again.wait(2.0)
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
