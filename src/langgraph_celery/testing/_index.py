"""The conformance tests of a run index: :class:`RunIndexConformance`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    RunIndex,
    Timer,
)
from langgraph_celery.testing._support import THREAD, SaverFixtures, make_checkpoint

__all__ = ["RunIndexConformance"]

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _stored(
    checkpoint_id: str, step: int, run: str = "r1", parent: str | None = "c0"
) -> Checkpoint:
    return Checkpoint(
        thread_id="t1",
        checkpoint_id=checkpoint_id,
        run_id=run,
        step=step,
        values={"step": step},
        parent_id=parent,
    )


class RunIndexConformance(SaverFixtures):
    """What a saver that also implements :class:`~langgraph_celery.checkpoint.RunIndex` must
    do, as the Celery executor relies on it: claims released by compare-and-delete, one timer
    per thread, a checkpoint stored with its timer change or not at all, the run lookup.
    Subclass it next to :class:`SaverConformance` (see :mod:`langgraph_celery.testing`)."""

    def test_the_saver_is_a_run_index(self, saver: BaseCheckpointSaver) -> None:
        assert isinstance(saver, RunIndex), (
            f"{type(saver).__name__} does not implement langgraph_celery.checkpoint.RunIndex"
        )
        assert isinstance(saver, BaseCheckpointSaver)

    def test_thread_of_run(self, saver: BaseCheckpointSaver) -> None:
        assert saver.thread_of_run("r1") is None
        saver.put(make_checkpoint(0, thread="t-a", run="r1"))
        saver.put(make_checkpoint(1, thread="t-a", run="r1"))
        saver.put(make_checkpoint(0, thread="t-b", run="r2"))
        assert saver.thread_of_run("r1") == "t-a"
        assert saver.thread_of_run("r2") == "t-b"
        saver.release("t-a")
        assert saver.thread_of_run("r1") is None
        assert saver.thread_of_run("r2") == "t-b"

    def test_delete_write_compares_the_node(self, saver: BaseCheckpointSaver) -> None:
        saver.put(make_checkpoint(0, checkpoint_id="ck-1"))
        assert saver.put_writes(THREAD, "ck-1", "__claim__", "token-a", {"token": "token-a"})
        assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-b") is False
        assert [w.node for w in saver.get_writes(THREAD, "ck-1")] == ["token-a"]
        assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-a") is True
        assert saver.get_writes(THREAD, "ck-1") == []
        assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-a") is False
        assert saver.put_writes(THREAD, "ck-1", "__claim__", "token-b", {})  # claimable again

    def test_due_timers_earliest_first_and_only_due(self, saver: BaseCheckpointSaver) -> None:
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

    def test_set_timer_replaces_the_threads_timer(self, saver: BaseCheckpointSaver) -> None:
        saver.set_timer("t1", "r1", "g", "stall", T0)
        saver.set_timer("t1", "r2", "g", "deadline", T0 + timedelta(seconds=5))
        due = saver.due_timers(T0 + timedelta(seconds=5))
        assert [(t.thread_id, t.run_id, t.kind) for t in due] == [("t1", "r2", "deadline")]

    def test_clear_timer_only_for_its_run(self, saver: BaseCheckpointSaver) -> None:
        saver.set_timer("t1", "r2", "g", "stall", T0)
        saver.clear_timer("t1", "r1")  # an older run's clear leaves the newer run's timer
        assert [t.run_id for t in saver.due_timers(T0)] == ["r2"]
        saver.clear_timer("t1", "r2")
        assert saver.due_timers(T0) == []

    def test_release_removes_the_timer(self, saver: BaseCheckpointSaver) -> None:
        saver.put(Checkpoint(thread_id="t1", checkpoint_id="c1", run_id="r1", step=-1, values={}))
        saver.set_timer("t1", "r1", "g", "stall", T0)
        saver.release("t1")
        assert saver.due_timers(T0) == []

    def test_put_with_timer_stores_both(self, saver: BaseCheckpointSaver) -> None:
        saver.set_timer("t1", "r0", "g", "deadline", T0)  # (a parked run's deadline, replaced)
        timer = Timer("t1", "r1", "g", "stall", T0 + timedelta(seconds=30))
        stored = saver.put_with_timer(_stored("c1", 0, parent=None), timer)
        assert stored.checkpoint_id == "c1"
        latest = saver.get("t1")
        assert latest is not None and latest.checkpoint_id == "c1"
        assert saver.due_timers(T0 + timedelta(hours=1)) == [timer]

    def test_put_with_timer_refused_keeps_the_threads_timer(
        self, saver: BaseCheckpointSaver
    ) -> None:
        saver.put(_stored("c1", 0, parent=None))
        saver.set_timer("t1", "r0", "g", "deadline", T0)
        taken = _stored("c2", 0)  # the same run and step as c1: refused
        with pytest.raises(CheckpointConflictError):
            saver.put_with_timer(taken, Timer("t1", "r1", "g", "stall", T0 + timedelta(seconds=9)))
        assert [
            (t.run_id, t.kind, t.due_at) for t in saver.due_timers(T0 + timedelta(hours=1))
        ] == [("r0", "deadline", T0)]
        with pytest.raises(CheckpointConflictError):
            saver.put_with_timer(_stored("c1", 5, run="r0"), None)  # (an id the thread has)
        assert [t.run_id for t in saver.due_timers(T0 + timedelta(hours=1))] == ["r0"]
        assert [c.checkpoint_id for c in saver.list("t1")] == ["c1"]

    def test_put_with_no_timer_removes_the_runs_timer_only(
        self, saver: BaseCheckpointSaver
    ) -> None:
        saver.put(_stored("c1", 0, parent=None))
        saver.set_timer("t1", "r2", "g", "stall", T0)  # a newer run's timer stays
        saver.put_with_timer(_stored("c2", 1), None)
        assert [t.run_id for t in saver.due_timers(T0)] == ["r2"]
        saver.set_timer("t1", "r1", "g", "stall", T0)
        saver.put_with_timer(_stored("c3", 2), None)
        assert saver.due_timers(T0 + timedelta(hours=1)) == []
        assert [c.checkpoint_id for c in saver.list("t1")] == ["c3", "c2", "c1"]

    def test_put_with_a_timer_of_another_thread_is_an_error(
        self, saver: BaseCheckpointSaver
    ) -> None:
        with pytest.raises(ValueError, match="its thread's"):
            saver.put_with_timer(_stored("c1", 0, parent=None), Timer("t9", "r1", "g", "stall", T0))
        assert saver.get("t1") is None
