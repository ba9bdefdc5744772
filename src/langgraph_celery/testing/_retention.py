"""The conformance tests of retention: deleting threads, pruning them, finding completed ones.

:class:`PruneConformance` is part of :class:`~langgraph_celery.testing.SaverConformance`
(``delete_thread``, ``prune``); :class:`ExpiryConformance` is part of
:class:`~langgraph_celery.testing.RunIndexConformance` (what ``delete_thread`` removes of the
run index, ``completed_runs`` and ``supersede_run``, which the reaper's ``checkpoint_ttl`` pass
reads).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    CheckpointKind,
    Keep,
    Kept,
    PendingTask,
    PendingWrite,
    RunRecord,
    RunStatus,
    WriteKind,
)
from langgraph_celery.testing._support import SaverFixtures, race

__all__ = ["ExpiryConformance", "PruneConformance"]

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
_TASK = (PendingTask("task", "node"),)


def _chain(
    saver: BaseCheckpointSaver, thread: str, specs: list[tuple[str, str, bool]]
) -> list[Checkpoint]:
    """Store ``(checkpoint id, run id, pending)`` in turn, each the parent of the next, with one
    write each (``task``); a pending checkpoint has a task left (its run is not completed)."""
    stored = []
    parent = None
    steps: dict[str, int] = {}
    for checkpoint_id, run_id, pending in specs:
        step = steps[run_id] = steps.get(run_id, -1) + 1
        checkpoint = Checkpoint(
            thread_id=thread,
            checkpoint_id=checkpoint_id,
            run_id=run_id,
            step=step,
            values={"at": checkpoint_id},
            tasks=_TASK if pending else (),
            parent_id=parent,
        )
        stored.append(saver.put(checkpoint))
        saver.put_writes(thread, checkpoint_id, "task", "node", {"at": checkpoint_id})
        parent = checkpoint_id
    return stored


def _ids(checkpoints: Any) -> list[str]:
    return [checkpoint.checkpoint_id for checkpoint in checkpoints]


class PruneConformance(SaverFixtures):
    """``delete_thread`` and ``prune`` on a :class:`~langgraph_celery.checkpoint.
    BaseCheckpointSaver` (part of :class:`~langgraph_celery.testing.SaverConformance`)."""

    def test_delete_thread_deletes_everything_without_returning_it(
        self, saver: BaseCheckpointSaver
    ) -> None:
        stored = _chain(saver, "t1", [("c0", "r1", True), ("c1", "r1", True), ("c2", "r1", False)])
        kept = _chain(saver, "t2", [("c0", "r9", False)])
        saver.put_writes("t1", "never-stored", "task", "node", {"x": 1})

        assert saver.delete_thread("t1") == 3
        assert saver.get("t1") is None and list(saver.list("t1")) == []
        assert list(saver.get_writes("t1", "c0")) == []
        assert list(saver.get_writes("t1", "never-stored")) == []
        assert list(saver.list("t2")) == kept
        assert saver.get_writes("t2", "c0") == [PendingWrite("task", "node", {"at": "c0"})]
        assert saver.delete_thread("t1") == 0
        assert saver.delete_thread("nobody") == 0
        # The thread is empty: a first checkpoint (no parent) and the same ids are stored anew.
        again = _chain(saver, "t1", [("c0", "r1", False)])
        assert list(saver.list("t1")) == again and again != stored[:1]

    def test_prune_keeps_the_last_checkpoints_with_their_writes(
        self, saver: BaseCheckpointSaver
    ) -> None:
        specs = [(f"c{i}", "r1", i < 5) for i in range(6)]  # a run that completed at c5
        stored = _chain(saver, "t1", specs)

        result = saver.prune("t1", keep_last=2)

        assert result.thread_id == "t1" and result.dry_run is False
        assert result.kept == (Kept("c5", Keep.LAST), Kept("c4", Keep.LAST))
        assert result.held == ()
        assert result.deleted == ("c3", "c2", "c1", "c0")
        assert list(saver.list("t1")) == stored[:-3:-1]
        assert saver.get("t1") == stored[5]
        for gone in ("c0", "c3"):
            assert saver.get("t1", gone) is None
            assert list(saver.get_writes("t1", gone)) == []
        assert saver.get_writes("t1", "c4") == [PendingWrite("task", "node", {"at": "c4"})]
        # The oldest kept checkpoint's parent is gone: it reads back whole, with no parent marks.
        view = saver.get_with_writes("t1", "c4")
        assert view.checkpoint == stored[4]
        assert view.checkpoint.parent_id == "c3"
        assert view.parent_markers == {} and list(view.writes) == ["task"]
        assert view.step_committed is True
        # Pruning again removes nothing more.
        assert saver.prune("t1", keep_last=2).deleted == ()

    def test_list_page_leaves_out_what_prune_removed(self, saver: BaseCheckpointSaver) -> None:
        specs = [(f"c{i}", "r1", i < 6) for i in range(7)]  # a run that completed at c6
        stored = _chain(saver, "t1", specs)
        saver.prune("t1", keep_last=3)
        assert list(saver.list_page("t1", 2)) == [stored[6], stored[5]]
        assert list(saver.list_page("t1", 2, "c5")) == [stored[4]]
        assert list(saver.list_page("t1", 2, "c4")) == []

    def test_pruned_ids_and_steps_stay_taken_until_the_thread_is_deleted(
        self, saver: BaseCheckpointSaver
    ) -> None:
        _chain(saver, "t1", [("c0", "r1", True), ("c1", "r1", True), ("c2", "r1", False)])
        saver.prune("t1", keep_last=1)

        late_step = Checkpoint("t1", "late", "r1", 1, {"late": True}, parent_id="c0")
        with pytest.raises(CheckpointConflictError, match="stored this step first"):
            saver.put(late_step)  # a late writer of step 1 is refused, as before pruning
        with pytest.raises(CheckpointConflictError, match="checkpoint ids must be unique"):
            saver.put(Checkpoint("t1", "c1", "r2", 0, {}, parent_id="c2"))
        with pytest.raises(CheckpointConflictError, match="another run started"):
            saver.put(Checkpoint("t1", "root", "r3", -1, {}, parent_id=None))
        assert _ids(saver.list("t1")) == ["c2"]
        assert saver.delete_thread("t1") == 1
        saver.put(dataclasses.replace(late_step, parent_id=None))
        assert _ids(saver.list("t1")) == ["late"]

    def test_a_kept_checkpoint_whose_next_step_was_pruned_still_has_it_done(
        self, saver: BaseCheckpointSaver
    ) -> None:
        """A late task of a kept checkpoint's step finds the step done (and could not store it
        again), though the checkpoint that step stored was pruned."""
        _chain(saver, "t1", [("x0", "r1", True), ("x1", "r1", False)])
        fork = Checkpoint("t1", "fork", "r2", 1, {}, tasks=_TASK, parent_id="x0", branch=True)
        saver.put(fork)  # (a fork of x0, whose successor x1 is)
        saver.put(Checkpoint("t1", "last", "r3", 0, {}, parent_id="fork"))

        result = saver.prune("t1", keep_last=1)

        assert result.deleted == ("x1",)
        assert [k.checkpoint_id for k in result.kept] == ["last", "fork", "x0"]
        assert saver.get_with_writes("t1", "x0").step_committed is True
        with pytest.raises(CheckpointConflictError):
            saver.put(Checkpoint("t1", "x1-again", "r1", 1, {}, parent_id="x0"))

    def test_release_after_prune_returns_what_was_kept_and_frees_the_thread(
        self, saver: BaseCheckpointSaver
    ) -> None:
        stored = _chain(saver, "t1", [(f"c{i}", "r1", i < 3) for i in range(4)])
        saver.prune("t1", keep_last=2)
        assert list(saver.release("t1")) == stored[:1:-1]
        assert saver.put(stored[0]) == stored[0]  # (the pruned first checkpoint's id is free)

    def test_prune_keeps_what_runs_that_did_not_complete_need(
        self, saver: BaseCheckpointSaver
    ) -> None:
        """The latest checkpoint of a parked, failed, cancelled or running run stays, with its
        parent (whose marks its status reads); a completed run's go."""
        _chain(
            saver,
            "t1",
            [
                ("p0", "parked", True),
                ("p1", "parked", True),
                ("f0", "failed", True),
                ("f1", "failed", True),
                ("k0", "cancelled", True),
                ("k1", "cancelled", True),  # (stored as its step finished: the parent's mark)
                ("d0", "done", True),
                ("d1", "done", False),
                ("u0", "updated", False),
                ("x0", "running", True),
                ("x1", "running", True),
            ],
        )
        interrupt, error, cancel = WriteKind.INTERRUPT, WriteKind.ERROR, WriteKind.CANCEL
        saver.put_writes("t1", "p1", "__interrupt__", "node", {"node_id": "node"}, interrupt)
        saver.put_writes("t1", "f1", "__error__", "node", {"node_id": "node"}, error)
        saver.put_writes("t1", "k0", "__cancel__", "__END__", {}, cancel)
        update = Checkpoint(
            "t1",
            "u1",
            "updated",
            1,
            {},
            tasks=_TASK,
            parent_id="u0",
            kind=CheckpointKind.UPDATE,
            branch=True,
        )
        saver.put(update)  # (update_state of u0, which x0 goes on from: parked until a resume)
        saver.put(Checkpoint("t1", "x2", "running", 2, {}, tasks=_TASK, parent_id="x1"))

        result = saver.prune("t1", keep_last=1)

        assert result.kept == (
            Kept("x2", Keep.LAST),
            Kept("u1", Keep.RUN, "parked"),
            Kept("x1", Keep.PARENT, "x2"),
            Kept("u0", Keep.PARENT, "u1"),
            Kept("k1", Keep.RUN, "cancelled"),
            Kept("k0", Keep.PARENT, "k1"),
            Kept("f1", Keep.RUN, "failed"),
            Kept("f0", Keep.PARENT, "f1"),
            Kept("p1", Keep.RUN, "parked"),
            Kept("p0", Keep.PARENT, "p1"),
        )
        assert result.deleted == ("x0", "d1", "d0")
        assert _ids(saver.list("t1")) == [k.checkpoint_id for k in result.kept]
        assert "__interrupt__" in saver.get_with_writes("t1", "p1").writes
        assert "__cancel__" in saver.get_with_writes("t1", "k1").parent_markers
        assert "__error__" in saver.get_with_writes("t1", "f1").writes

    def test_a_dry_run_removes_nothing(self, saver: BaseCheckpointSaver) -> None:
        stored = _chain(saver, "t1", [(f"c{i}", "r1", i < 3) for i in range(4)])
        dry = saver.prune("t1", keep_last=1, dry_run=True)
        assert dry.dry_run is True and dry.deleted == ("c2", "c1", "c0")
        assert list(saver.list("t1")) == stored[::-1]
        assert saver.get_writes("t1", "c0") == [PendingWrite("task", "node", {"at": "c0"})]
        real = saver.prune("t1", keep_last=1)
        assert (real.kept, real.deleted) == (dry.kept, dry.deleted)

    @pytest.mark.parametrize("keep_last", [0, -1, True, 1.5])
    def test_prune_keeps_at_least_the_latest(
        self, saver: BaseCheckpointSaver, keep_last: Any
    ) -> None:
        _chain(saver, "t1", [("c0", "r1", False)])
        with pytest.raises(ValueError, match="delete_thread"):
            saver.prune("t1", keep_last=keep_last)
        assert _ids(saver.list("t1")) == ["c0"]

    @pytest.mark.parametrize("thread_id", [123, None, b"t1", "", "t" * 256])
    def test_retention_refuses_what_cannot_be_a_thread_id(
        self, saver: BaseCheckpointSaver, thread_id: Any
    ) -> None:
        """``prune``, ``delete_thread`` and ``release`` refuse a thread id that is not a
        non-empty string of at most 255 characters, and touch nothing (``""`` would name
        every thread starting with ``"/"`` as its child threads)."""
        _chain(saver, "t1", [("c0", "r1", False)])
        _chain(saver, "/t1", [("c0", "r2", False)])
        calls: dict[str, Callable[[], object]] = {
            "prune": lambda: saver.prune(thread_id, keep_last=1),
            "delete_thread": lambda: saver.delete_thread(thread_id),
            "release": lambda: saver.release(thread_id),
        }
        for name, call in calls.items():
            with pytest.raises(ValueError, match="thread_id"):
                call()
                pytest.fail(f"{name}({thread_id!r}) was not refused")
        assert _ids(saver.list("t1")) == ["c0"] and _ids(saver.list("/t1")) == ["c0"]
        longest = "t" * 255  # (the longest there may be)
        assert saver.delete_thread(longest) == 0 and list(saver.release(longest)) == []
        assert saver.prune(longest, keep_last=1).deleted == ()

    def test_pruning_an_unknown_thread_does_nothing(self, saver: BaseCheckpointSaver) -> None:
        result = saver.prune("nobody", keep_last=3)
        assert (result.kept, result.deleted) == ((), ())
        assert saver.get("nobody") is None

    def test_pruning_while_a_run_stores_its_steps_removes_none_of_them(
        self, saver: BaseCheckpointSaver
    ) -> None:
        """Pruners racing a writer: each step the writer stores is there when it stores the
        next one (a running step's checkpoint and parent are kept), and the thread ends with
        its latest and that one's parent."""
        _chain(saver, "t1", [(f"c{i}", "r1", True) for i in range(5)])
        steps, problems = 40, []
        done = threading.Event()

        def write() -> None:
            try:
                for i in range(5, 5 + steps):
                    parent = saver.get("t1")
                    assert parent is not None and parent.checkpoint_id == f"c{i - 1}", i
                    # what a node task of the step reads: its checkpoint, writes, parent marks
                    view = saver.get_with_writes("t1", parent.checkpoint_id)
                    assert view.checkpoint == parent and "task" in view.writes, i
                    step = Checkpoint("t1", f"c{i}", "r1", i, {}, _TASK, parent.checkpoint_id)
                    saver.put(step)
                    saver.put_writes("t1", step.checkpoint_id, "task", "node", {"at": f"c{i}"})
            except Exception as error:  # pragma: no cover - reported below
                problems.append(error)
            finally:
                done.set()

        def prune(index: int) -> int:
            if index == 0:
                write()
                return 0
            rounds = 0
            while not done.is_set():
                saver.prune("t1", keep_last=1)
                rounds += 1
            return rounds

        outcomes = race(3, prune)
        assert problems == [] and all(isinstance(o, int) for o in outcomes), (problems, outcomes)
        saver.prune("t1", keep_last=1)
        last = f"c{4 + steps}"
        assert _ids(saver.list("t1")) == [last, f"c{3 + steps}"]
        assert saver.get_with_writes("t1").writes["task"].update == {"at": last}


class ExpiryConformance(SaverFixtures):
    """What retention asks of a :class:`~langgraph_celery.checkpoint.RunIndex` (part of
    :class:`~langgraph_celery.testing.RunIndexConformance`).  (The saver is typed ``Any``: these
    are methods only a RunIndex has.)"""

    def test_delete_thread_deletes_its_timer_and_run_records(self, saver: Any) -> None:
        _chain(saver, "t1", [("c0", "r1", False)])
        _chain(saver, "t2", [("c0", "r2", True)])
        saver.set_timer("t1", "r1", "g", "stall", T0)
        saver.set_timer("t2", "r2", "g", "stall", T0)
        saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.COMPLETED, None, T0, T0))
        saver.upsert_run(RunRecord("r2", "t2", "g", RunStatus.RUNNING, None, T0, T0))

        saver.delete_thread("t1")

        assert saver.get_run("r1") is None and saver.thread_of_run("r1") is None
        assert [t.thread_id for t in saver.due_timers(T0)] == ["t2"]
        assert [r.run_id for r in saver.list_runs("g")] == ["r2"]
        assert saver.thread_of_run("r2") == "t2"

    def test_a_run_pruned_whole_is_no_longer_found(self, saver: Any) -> None:
        _chain(saver, "t1", [("a0", "r1", True), ("a1", "r1", False), ("b0", "r2", False)])
        saver.prune("t1", keep_last=1)
        assert saver.thread_of_run("r1") is None
        assert saver.thread_of_run("r2") == "t1"

    def test_completed_runs_finds_threads_whose_last_run_completed_before(self, saver: Any) -> None:
        def record(run: str, thread: str, status: RunStatus, at: datetime, graph: str = "g") -> Any:
            return saver.upsert_run(RunRecord(run, thread, graph, status, None, at, at))

        hour = timedelta(hours=1)
        record("old", "t-old", RunStatus.COMPLETED, T0)
        record("older", "t-older", RunStatus.COMPLETED, T0 - hour)
        record("went-on", "t-busy", RunStatus.COMPLETED, T0 - 2 * hour)
        record("busy", "t-busy", RunStatus.RUNNING, T0)  # a newer run of the same thread
        record("young", "t-young", RunStatus.COMPLETED, T0 + 2 * hour)
        record("parked", "t-parked", RunStatus.PARKED, T0)
        record("other", "t-other", RunStatus.COMPLETED, T0, graph="h")

        before = T0 + hour
        found = saver.completed_runs("g", before)
        assert [r.run_id for r in found] == ["older", "old"]
        assert found[1] == saver.get_run("old")
        assert [r.run_id for r in saver.completed_runs("g", before, limit=1)] == ["older"]
        assert [r.run_id for r in saver.completed_runs("h", before)] == ["other"]
        # the record a newer run superseded stays out, even when that run completes long after
        record("busy", "t-busy", RunStatus.COMPLETED, T0 + timedelta(minutes=1))
        assert [r.run_id for r in saver.completed_runs("g", before)] == ["older", "old", "busy"]
        with pytest.raises(ValueError, match="at least one"):
            saver.completed_runs("g", before, limit=0)

    def test_supersede_run_sets_a_record_aside_until_it_is_updated(self, saver: Any) -> None:
        first = RunRecord("r1", "t1", "g", RunStatus.COMPLETED, None, T0, T0)
        saver.upsert_run(first)
        stale = RunRecord("r1", "t1", "g", RunStatus.COMPLETED, None, T0, T0 - timedelta(1))
        assert saver.supersede_run(stale) is False  # (not the record stored: left as it is)
        assert [r.run_id for r in saver.completed_runs("g", T0 + timedelta(1))] == ["r1"]
        assert saver.supersede_run(first) is True
        assert saver.completed_runs("g", T0 + timedelta(1)) == []
        assert saver.get_run("r1") == first  # (still listed and read as it was)
        assert [r.run_id for r in saver.list_runs("g")] == ["r1"]
        later = T0 + timedelta(seconds=5)
        saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.COMPLETED, None, T0, later))
        assert [r.run_id for r in saver.completed_runs("g", T0 + timedelta(1))] == ["r1"]
