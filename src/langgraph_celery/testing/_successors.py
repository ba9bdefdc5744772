"""The conformance tests of the one-successor rule: :class:`SuccessorConformance` (part of
:class:`~langgraph_celery.testing.SaverConformance`).

A thread's checkpoints form a tree.  A checkpoint computed from the thread's latest (a step, a
new run, a resume, an ``update_state``) is its parent's *successor*, and a checkpoint has at
most one: of two writers going on from one checkpoint (a step of a cancelled run that was
finishing, and a new run started after the cancel) the second is refused with
:class:`~langgraph_celery.errors.CheckpointConflictError`, so the thread's latest checkpoint is
never one the thread had already gone on without.  A *branch*
(:attr:`~langgraph_celery.checkpoint.Checkpoint.branch`: a fork or time travel from an older
checkpoint) may share its parent with any number of others.
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    CheckpointKind,
)
from langgraph_celery.testing._support import THREAD, SaverFixtures, make_checkpoint, race

__all__ = ["SuccessorConformance"]


def _line(saver: BaseCheckpointSaver, thread: str = THREAD) -> tuple[Checkpoint, Checkpoint]:
    """Store a thread's first checkpoint ``ck-0`` (run ``run-1``) and its successor ``ck-1``, the
    run's step 0."""
    root = make_checkpoint(-1, thread=thread, checkpoint_id="ck-0", parent_id=None)
    step = make_checkpoint(0, thread=thread, checkpoint_id="ck-1", parent_id="ck-0")
    return saver.put(root), saver.put(step)


def _new_run(parent: str, run: str = "run-2", **fields: Any) -> Checkpoint:
    """A new run's first checkpoint, going on from ``parent``."""
    return make_checkpoint(0, run=run, parent_id=parent, kind=CheckpointKind.INPUT, **fields)


class SuccessorConformance(SaverFixtures):
    """One successor per checkpoint; branches share their parent (see the module)."""

    def test_a_second_successor_of_a_checkpoint_is_refused(
        self, saver: BaseCheckpointSaver
    ) -> None:
        root, step = _line(saver)
        # a new run that read ck-0 as the thread's latest before the run's step stored ck-1
        with pytest.raises(CheckpointConflictError) as caught:
            saver.put(_new_run("ck-0", checkpoint_id="ck-new"))
        message = str(caught.value)
        assert THREAD in message and "ck-0" in message and "run-2" in message, message
        assert "went on from it first" in message, message
        assert saver.get(THREAD) == step
        assert list(saver.list(THREAD)) == [step, root]
        # the other way round (the new run first, the late step second): the step is refused
        saver.put(new := _new_run("ck-1", checkpoint_id="ck-2"))
        with pytest.raises(CheckpointConflictError, match="went on from it first"):
            saver.put(make_checkpoint(1, checkpoint_id="ck-late", parent_id="ck-1"))
        assert saver.get(THREAD) == new
        assert list(saver.list(THREAD)) == [new, step, root]

    def test_branches_share_their_parent_and_have_successors_of_their_own(
        self, saver: BaseCheckpointSaver
    ) -> None:
        root, step = _line(saver)
        fork = saver.put(_new_run("ck-0", run="run-fork", checkpoint_id="ck-f", branch=True))
        again = saver.put(_new_run("ck-0", run="run-fork-2", checkpoint_id="ck-g", branch=True))
        assert saver.get(THREAD) == again
        on = saver.put(make_checkpoint(1, run="run-fork", checkpoint_id="ck-f1", parent_id="ck-f"))
        with pytest.raises(CheckpointConflictError, match="went on from it first"):
            saver.put(_new_run("ck-f", run="run-3"))  # (the branch's own successor holds)
        # a branch is only a branch: a successor of the latest goes on as before
        saver.put(late := _new_run("ck-f1", run="run-4", checkpoint_id="ck-h"))
        assert list(saver.list(THREAD)) == [late, on, again, fork, step, root]
        assert saver.get(THREAD, "ck-f") == fork

    def test_the_rule_holds_per_thread_and_goes_with_the_thread(
        self, saver: BaseCheckpointSaver
    ) -> None:
        _line(saver)
        other_root, other_step = _line(saver, thread="thread-2")  # (the same ids elsewhere)
        assert saver.get("thread-2") == other_step
        saver.release(THREAD)
        root, step = _line(saver)  # (the thread is empty: ck-0 may have a successor again)
        saver.delete_thread(THREAD)
        root, step = _line(saver)
        assert list(saver.list(THREAD)) == [step, root]
        assert list(saver.list("thread-2")) == [other_step, other_root]

    def test_a_pruned_successor_keeps_its_place(self, saver: BaseCheckpointSaver) -> None:
        """A pruned checkpoint keeps its id and step taken, and its place after its parent: a
        late writer going on from that parent is refused, as before pruning."""
        _line(saver)
        last = saver.put(make_checkpoint(1, checkpoint_id="ck-2", parent_id="ck-1"))
        result = saver.prune(THREAD, keep_last=1)
        assert "ck-1" in result.deleted
        with pytest.raises(CheckpointConflictError):
            saver.put(_new_run("ck-0"))
        assert saver.get(THREAD) == last

    def test_writers_racing_to_go_on_from_one_checkpoint_store_one(
        self, saver: BaseCheckpointSaver
    ) -> None:
        racers, rounds = 8, 3
        _line(saver)
        parent = "ck-1"
        for round_ in range(rounds):
            # each racer a run of its own (a late step, new runs): only the parent is shared
            candidates = [
                _new_run(parent, run=f"run-{round_}-{i}", values={"writer": i})
                for i in range(racers)
            ]

            def put(index: int, candidates: list[Checkpoint] = candidates) -> Checkpoint:
                return saver.put(candidates[index])

            outcomes = race(racers, put)

            winners = [o for o in outcomes if isinstance(o, Checkpoint)]
            assert len(winners) == 1, outcomes
            refused = [o for o in outcomes if isinstance(o, CheckpointConflictError)]
            assert len(refused) == racers - 1, outcomes
            assert saver.get(THREAD) == winners[0]
            parent = winners[0].checkpoint_id
        assert len(saver.list(THREAD)) == 2 + rounds
