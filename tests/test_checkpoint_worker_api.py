"""Conformance of what the Celery side needs from every saver: timers and one-trip reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    MemorySaver,
)
from langgraph_celery.checkpoint.base import Timer

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


# -- a run's first and last checkpoints, stored with its timer ------------------------------------


def _ckpt(checkpoint_id: str, step: int, run: str = "r1", parent: str | None = "c0") -> Checkpoint:
    return Checkpoint(
        thread_id="t1",
        checkpoint_id=checkpoint_id,
        run_id=run,
        step=step,
        values={"step": step},
        parent_id=parent,
    )


def test_put_with_timer_stores_both(saver: BaseCheckpointSaver) -> None:
    saver.set_timer("t1", "r0", "g", "deadline", T0)  # (a parked run's deadline, replaced)
    timer = Timer("t1", "r1", "g", "stall", T0 + timedelta(seconds=30))
    stored = saver.put_with_timer(_ckpt("c1", 0, parent=None), timer)
    assert stored.checkpoint_id == "c1"
    latest = saver.get("t1")
    assert latest is not None and latest.checkpoint_id == "c1"
    assert saver.due_timers(T0 + timedelta(hours=1)) == [timer]


def test_put_with_timer_refused_keeps_the_threads_timer(saver: BaseCheckpointSaver) -> None:
    saver.put(_ckpt("c1", 0, parent=None))
    saver.set_timer("t1", "r0", "g", "deadline", T0)
    taken = _ckpt("c2", 0)  # the same run and step as c1: refused
    with pytest.raises(CheckpointConflictError):
        saver.put_with_timer(taken, Timer("t1", "r1", "g", "stall", T0 + timedelta(seconds=9)))
    assert [(t.run_id, t.kind, t.due_at) for t in saver.due_timers(T0 + timedelta(hours=1))] == [
        ("r0", "deadline", T0)
    ]
    with pytest.raises(CheckpointConflictError):
        saver.put_with_timer(_ckpt("c1", 5, run="r0"), None)  # (an id the thread has)
    assert [t.run_id for t in saver.due_timers(T0 + timedelta(hours=1))] == ["r0"]
    assert [c.checkpoint_id for c in saver.list("t1")] == ["c1"]


def test_put_with_no_timer_removes_the_runs_timer_only(saver: BaseCheckpointSaver) -> None:
    saver.put(_ckpt("c1", 0, parent=None))
    saver.set_timer("t1", "r2", "g", "stall", T0)  # a newer run's timer stays
    saver.put_with_timer(_ckpt("c2", 1), None)
    assert [t.run_id for t in saver.due_timers(T0)] == ["r2"]
    saver.set_timer("t1", "r1", "g", "stall", T0)
    saver.put_with_timer(_ckpt("c3", 2), None)
    assert saver.due_timers(T0 + timedelta(hours=1)) == []
    assert [c.checkpoint_id for c in saver.list("t1")] == ["c3", "c2", "c1"]


def test_put_with_a_timer_of_another_thread_is_an_error(saver: BaseCheckpointSaver) -> None:
    with pytest.raises(ValueError, match="its thread's"):
        saver.put_with_timer(_ckpt("c1", 0, parent=None), Timer("t9", "r1", "g", "stall", T0))
    assert saver.get("t1") is None


class _InTurn(MemorySaver):
    """A saver that keeps the base class's put_with_timer (the calls made in turn)."""

    put_with_timer = BaseCheckpointSaver.put_with_timer


def test_the_default_put_with_timer_sets_then_stores_and_stores_then_clears() -> None:
    saver = _InTurn()
    timer = Timer("t1", "r1", "g", "stall", T0)
    saver.put_with_timer(_ckpt("c1", 0, parent=None), timer)
    assert saver.due_timers(T0) == [timer]
    with pytest.raises(CheckpointConflictError):  # refused: the timer it set is removed
        saver.put_with_timer(_ckpt("c2", 0), Timer("t1", "r1", "g", "stall", T0))
    assert saver.due_timers(T0) == []
    saver.set_timer("t1", "r1", "g", "stall", T0)
    saver.put_with_timer(_ckpt("c3", 1), None)
    assert saver.due_timers(T0) == []
    assert [c.checkpoint_id for c in saver.list("t1")] == ["c3", "c1"]
