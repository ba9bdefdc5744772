"""The conformance tests of a run index: :class:`RunIndexConformance`."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    RunIndex,
    RunRecord,
    RunStatus,
    Timer,
    WriteKind,
)
from langgraph_celery.testing._retention import ExpiryConformance
from langgraph_celery.testing._support import THREAD, make_checkpoint, race

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


class RunIndexConformance(ExpiryConformance):
    """What a saver that also implements :class:`~langgraph_celery.checkpoint.RunIndex` must
    do, as the Celery executor relies on it: claims released by compare-and-delete, one timer
    per thread, a checkpoint stored with its timer change or not at all, the run lookup, run
    records listed newest first a page at a time; and what retention asks of it (see
    ``testing/_retention.py``).  (Tests that call methods only a RunIndex has
    take the saver as ``Any``.)
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
        claim = WriteKind.CLAIM
        assert saver.put_writes(THREAD, "ck-1", "__claim__", "token-a", {"token": "a"}, claim)
        assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-b") is False
        assert [w.node for w in saver.get_writes(THREAD, "ck-1")] == ["token-a"]
        assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-a") is True
        assert saver.get_writes(THREAD, "ck-1") == []
        assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-a") is False
        assert saver.put_writes(THREAD, "ck-1", "__claim__", "token-b", {}, claim)  # again

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
        saver.put_with_timer(_stored("c2", 1, parent="c1"), None)
        assert [t.run_id for t in saver.due_timers(T0)] == ["r2"]
        saver.set_timer("t1", "r1", "g", "stall", T0)
        saver.put_with_timer(_stored("c3", 2, parent="c2"), None)
        assert saver.due_timers(T0 + timedelta(hours=1)) == []
        assert [c.checkpoint_id for c in saver.list("t1")] == ["c3", "c2", "c1"]

    def test_put_with_a_timer_of_another_thread_is_an_error(
        self, saver: BaseCheckpointSaver
    ) -> None:
        with pytest.raises(ValueError, match="its thread's"):
            saver.put_with_timer(_stored("c1", 0, parent=None), Timer("t9", "r1", "g", "stall", T0))
        assert saver.get("t1") is None

    def test_put_with_timer_stores_the_runs_record_with_the_checkpoint(self, saver: Any) -> None:
        later = T0 + timedelta(seconds=5)
        first = RunRecord("r1", "t1", "g", RunStatus.RUNNING, "agent", T0, T0)
        saver.put_with_timer(
            _stored("c1", 0, parent=None), Timer("t1", "r1", "g", "stall", T0), first
        )
        assert saver.get_run("r1") == first
        done = RunRecord("r1", "t1", "g", RunStatus.COMPLETED, None, later, later)
        saver.put_with_timer(_stored("c2", 1, parent="c1"), None, done)
        assert saver.get_run("r1") == RunRecord(
            "r1", "t1", "g", RunStatus.COMPLETED, None, T0, later
        )
        assert saver.due_timers(T0 + timedelta(hours=1)) == []
        stale = RunRecord("r1", "t1", "g", RunStatus.RUNNING, "agent", T0, T0)  # (older)
        saver.put_with_timer(_stored("c3", 2, parent="c2"), None, stale)
        assert saver.get_run("r1").status is RunStatus.COMPLETED  # (the newer record is kept)
        assert [c.checkpoint_id for c in saver.list("t1")] == ["c3", "c2", "c1"]

    def test_put_with_timer_refused_stores_no_record(self, saver: Any) -> None:
        if _puts_in_turn(saver):
            pytest.skip("the default put_with_timer stores the record first, in turn")
        saver.put(_stored("c1", 0, parent=None))
        record = RunRecord("r1", "t1", "g", RunStatus.COMPLETED, None, T0, T0)
        with pytest.raises(CheckpointConflictError):
            saver.put_with_timer(_stored("c2", 0), None, record)  # (the step c1 holds)
        assert saver.get_run("r1") is None
        other = RunRecord("r1", "t1", "other", RunStatus.RUNNING, None, T0, T0)
        saver.upsert_run(other)
        with pytest.raises(CheckpointConflictError):
            saver.put_with_timer(_stored("c1", 3), Timer("t1", "r1", "g", "stall", T0), record)
        assert saver.get_run("r1") == other

    def test_put_with_timer_refused_as_a_second_successor_changes_nothing(self, saver: Any) -> None:
        """A new run's first checkpoint (stored with its timer and its record) going on from a
        checkpoint that a late step of the previous run went on from first is refused: the
        thread keeps its timer, and (where the saver stores them at once) no record of the new
        run is stored; as a branch the same checkpoint is stored with both."""
        saver.put(_stored("c1", 0, parent=None))
        saver.put(_stored("c2", 1, parent="c1"))  # (the late step, first)
        saver.set_timer("t1", "r1", "g", "deadline", T0)
        new_run = _stored("n1", 1, run="r2", parent="c1")
        record = RunRecord("r2", "t1", "g", RunStatus.RUNNING, "agent", T0, T0)
        stall = Timer("t1", "r2", "g", "stall", T0 + timedelta(seconds=9))
        with pytest.raises(CheckpointConflictError, match="went on from it first"):
            saver.put_with_timer(new_run, stall, record)
        assert [(t.run_id, t.kind) for t in saver.due_timers(T0 + timedelta(hours=1))] == [
            ("r1", "deadline")
        ]
        with pytest.raises(CheckpointConflictError, match="went on from it first"):
            saver.put_with_timer(new_run, None, record)
        if not _puts_in_turn(saver):
            assert saver.get_run("r2") is None
        assert [c.checkpoint_id for c in saver.list("t1")] == ["c2", "c1"]
        saver.put_with_timer(dataclasses.replace(new_run, branch=True), stall, record)
        assert saver.get("t1") == new_run
        assert saver.due_timers(T0 + timedelta(hours=1)) == [stall]
        assert saver.get_run("r2") == record

    def test_put_with_the_record_of_another_run_is_an_error(self, saver: Any) -> None:
        record = RunRecord("r9", "t1", "g", RunStatus.RUNNING, None, T0, T0)
        with pytest.raises(ValueError, match="its run's"):
            saver.put_with_timer(_stored("c1", 0, parent=None), None, record)
        moved = RunRecord("r1", "t9", "g", RunStatus.RUNNING, None, T0, T0)
        with pytest.raises(ValueError, match="its run's"):
            saver.put_with_timer(_stored("c1", 0, parent=None), None, moved)
        assert (
            saver.get("t1") is None and saver.get_run("r1") is None and saver.get_run("r9") is None
        )

    # -- run records ---------------------------------------------------------------------------

    def test_upsert_run_creates_then_updates_keeping_created_at(self, saver: Any) -> None:
        assert saver.get_run("r1") is None
        first = RunRecord("r1", "t1", "g", RunStatus.RUNNING, "agent", T0, T0)
        assert saver.upsert_run(first) is True
        assert saver.get_run("r1") == first
        later = T0 + timedelta(minutes=5)
        parked = RunRecord("r1", "t1", "g", RunStatus.PARKED, "approve", later, later)
        assert saver.upsert_run(parked) is True
        assert saver.get_run("r1") == RunRecord(
            "r1", "t1", "g", RunStatus.PARKED, "approve", created_at=T0, updated_at=later
        )
        assert saver.upsert_run(parked) is True  # (the same record again: applied, no change)
        done = RunRecord("r1", "t1", "g", RunStatus.COMPLETED, None, T0, later)
        assert saver.upsert_run(done) is True  # (as new as the stored one: applied)
        stored = saver.get_run("r1")
        assert stored is not None and stored.status is RunStatus.COMPLETED
        assert stored.node is None

    def test_an_older_run_record_is_not_applied(self, saver: Any) -> None:
        later = T0 + timedelta(seconds=30)
        saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.FAILED, "tool", T0, later))
        late_writer = RunRecord("r1", "t1", "g", RunStatus.RUNNING, "tool", T0, T0)
        assert saver.upsert_run(late_writer) is False
        stored = saver.get_run("r1")
        assert stored is not None
        assert (stored.status, stored.updated_at) == (RunStatus.FAILED, later)

    def test_a_run_belongs_to_one_thread_of_one_graph(self, saver: Any) -> None:
        saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.RUNNING, None, T0, T0))
        later = T0 + timedelta(seconds=1)
        for thread, graph in (("t2", "g"), ("t1", "other-graph")):
            with pytest.raises(ValueError) as caught:
                saver.upsert_run(RunRecord("r1", thread, graph, RunStatus.PARKED, None, T0, later))
            message = str(caught.value)
            assert "'r1'" in message and "'t1'" in message and repr(thread) in message
        stored = saver.get_run("r1")
        assert stored is not None and stored.status is RunStatus.RUNNING

    def test_run_times_are_utc_and_the_same_instant(self, saver: Any) -> None:
        plus_two = timezone(timedelta(hours=2))
        when = datetime(2026, 6, 1, 1, 30, 15, 250000, tzinfo=plus_two)
        saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.RUNNING, None, when, when))
        stored = saver.get_run("r1")
        assert stored is not None
        assert stored.created_at == when and stored.updated_at == when
        assert stored.created_at.utcoffset() == timedelta(0)
        assert stored.created_at.day == 31  # reported in UTC: the day before

    def test_list_runs_newest_first_by_graph_and_status(self, saver: Any) -> None:
        statuses = [RunStatus.COMPLETED, RunStatus.PARKED, RunStatus.RUNNING, RunStatus.PARKED]
        for i, status in enumerate(statuses):
            created = T0 + timedelta(seconds=i)
            saver.upsert_run(RunRecord(f"r{i}", f"t{i}", "g", status, None, created, created))
        saver.upsert_run(RunRecord("x0", "tx", "other", RunStatus.PARKED, None, T0, T0))

        assert [r.run_id for r in saver.list_runs("g")] == ["r3", "r2", "r1", "r0"]
        assert [r.run_id for r in saver.list_runs("g", RunStatus.PARKED)] == ["r3", "r1"]
        assert [r.run_id for r in saver.list_runs("g", RunStatus.FAILED)] == []
        assert [r.run_id for r in saver.list_runs("other")] == ["x0"]
        assert [r.run_id for r in saver.list_runs(status=RunStatus.PARKED)] == ["r3", "r1", "x0"]
        assert len(saver.list_runs()) == 5
        assert [r.run_id for r in saver.list_runs("g", limit=2)] == ["r3", "r2"]
        assert all(isinstance(r.status, RunStatus) for r in saver.list_runs())
        assert saver.list_runs("g", RunStatus.PARKED)[0] == saver.get_run("r3")
        with pytest.raises(ValueError, match="at least one"):
            saver.list_runs("g", limit=0)

    def test_list_runs_pages_through_every_run_once(self, saver: Any) -> None:
        # ten runs, created in pairs at the same instant (ties are ordered by run id)
        for i in range(10):
            created = T0 + timedelta(seconds=i // 2)
            saver.upsert_run(RunRecord(f"r{i}", f"t{i}", "g", RunStatus.RUNNING, None, created))
        expected = [f"r{i}" for i in (9, 8, 7, 6, 5, 4, 3, 2, 1, 0)]
        seen: list[str] = []
        page = saver.list_runs("g", limit=3)
        while page:
            seen.extend(r.run_id for r in page)
            if len(seen) == 3:  # a run created meanwhile does not shift the next pages
                newest = T0 + timedelta(hours=1)
                saver.upsert_run(RunRecord("new", "tn", "g", RunStatus.RUNNING, None, newest))
            page = saver.list_runs("g", limit=3, before=page[-1])
        assert seen == expected
        statuses = [saver.list_runs("g", RunStatus.RUNNING, limit=4)]
        while statuses[-1]:
            last = statuses[-1][-1]
            statuses.append(saver.list_runs("g", RunStatus.RUNNING, limit=4, before=last))
        assert [r.run_id for page in statuses for r in page] == ["new", *expected]

    def test_release_deletes_the_threads_run_records(self, saver: Any) -> None:
        saver.put(make_checkpoint(0, thread="t1", run="r1"))
        saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.COMPLETED, None, T0, T0))
        saver.upsert_run(RunRecord("r2", "t2", "g", RunStatus.RUNNING, None, T0, T0))
        saver.release("t1")
        assert saver.get_run("r1") is None
        assert [r.run_id for r in saver.list_runs("g")] == ["r2"]

    def test_threads_racing_to_update_a_run_leave_the_newest_record(self, saver: Any) -> None:
        saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.RUNNING, None, T0, T0))
        statuses = list(RunStatus)

        def update(i: int) -> bool:
            status = statuses[i % len(statuses)]
            record = RunRecord("r1", "t1", "g", status, f"n{i}", T0, T0 + timedelta(seconds=i))
            result: bool = saver.upsert_run(record)
            return result

        outcomes = race(8, update)
        assert all(isinstance(outcome, bool) for outcome in outcomes), outcomes
        assert outcomes[7] is True  # the newest is never refused
        stored = saver.get_run("r1")
        assert stored is not None
        assert (stored.node, stored.updated_at) == ("n7", T0 + timedelta(seconds=7))
        assert stored.status is statuses[7 % len(statuses)]


def _puts_in_turn(saver: Any) -> bool:
    """Whether ``saver`` keeps the default ``put_with_timer`` (the calls in turn, not atomic)."""
    method = type(saver).put_with_timer
    return method is RunIndex.put_with_timer or method is BaseCheckpointSaver.put_with_timer
