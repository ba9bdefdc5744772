"""Conformance of the savers' timers (the beat reaper's index), on every saver."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from langgraph_celery.checkpoint import BaseCheckpointSaver, Checkpoint

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_due_timers_earliest_first_and_only_due(saver: BaseCheckpointSaver) -> None:
    saver.set_timer("t1", "r1", "g", "stall", T0 + timedelta(seconds=30))
    saver.set_timer("t2", "r2", "g", "deadline", T0 + timedelta(seconds=10))
    saver.set_timer("t3", "r3", "g", "stall", T0 + timedelta(seconds=90))
    due = saver.due_timers(T0 + timedelta(seconds=60))
    assert [(t.thread_id, t.run_id, t.graph_id, t.kind) for t in due] == [
        ("t2", "r2", "g", "deadline"),
        ("t1", "r1", "g", "stall"),
    ]
    assert due[0].due_at == T0 + timedelta(seconds=10)
    assert due[0].due_at.tzinfo is not None
    assert saver.due_timers(T0) == []
    assert len(saver.due_timers(T0 + timedelta(hours=1), limit=2)) == 2


def test_set_timer_replaces_the_threads_timer(saver: BaseCheckpointSaver) -> None:
    saver.set_timer("t1", "r1", "g", "stall", T0)
    saver.set_timer("t1", "r2", "g", "deadline", T0 + timedelta(seconds=5))
    due = saver.due_timers(T0 + timedelta(seconds=5))
    assert [(t.thread_id, t.run_id, t.kind) for t in due] == [("t1", "r2", "deadline")]


def test_clear_timer_only_for_its_run(saver: BaseCheckpointSaver) -> None:
    saver.set_timer("t1", "r2", "g", "stall", T0)
    saver.clear_timer("t1", "r1")  # an older run's clear leaves the newer run's timer
    assert [t.run_id for t in saver.due_timers(T0)] == ["r2"]
    saver.clear_timer("t1", "r2")
    assert saver.due_timers(T0) == []


def test_release_removes_the_timer(saver: BaseCheckpointSaver) -> None:
    saver.put(Checkpoint(thread_id="t1", checkpoint_id="c1", run_id="r1", step=-1, values={}))
    saver.set_timer("t1", "r1", "g", "stall", T0)
    saver.release("t1")
    assert saver.due_timers(T0) == []
