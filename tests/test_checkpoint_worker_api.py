"""Conformance of what the Celery side needs from every saver: timers and one-trip reads."""

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


def test_get_with_writes_reports_markers_and_committed_steps(saver: BaseCheckpointSaver) -> None:
    first = Checkpoint(thread_id="t1", checkpoint_id="c1", run_id="r1", step=0, values={"a": 1})
    saver.put(first)
    saver.put_writes("t1", "c1", "__cancel__", "__END__", {})
    saver.put_writes("t1", "c1", "n", "n", {"a": 2})
    view = saver.get_with_writes("t1", "c1")
    assert view.checkpoint is not None and view.checkpoint.values == {"a": 1}
    assert sorted(view.writes) == ["__cancel__", "n"]
    assert view.parent_markers == {}
    assert view.step_committed is False
    saver.put(
        Checkpoint(
            thread_id="t1", checkpoint_id="c2", run_id="r1", step=1, values={}, parent_id="c1"
        )
    )
    latest = saver.get_with_writes("t1")
    assert latest.checkpoint is not None and latest.checkpoint.checkpoint_id == "c2"
    assert latest.writes == {}
    assert list(latest.parent_markers) == ["__cancel__"]  # the parent's task writes are left out
    assert saver.get_with_writes("t1", "c1").step_committed is True
    assert saver.get_with_writes("t1", "c2").step_committed is False
    assert saver.get_with_writes("nobody").checkpoint is None
