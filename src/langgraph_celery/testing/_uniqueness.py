"""The conformance tests of the uniqueness rules a store enforces on its own:
:class:`UniquenessConformance` (part of :class:`~langgraph_celery.testing.SaverConformance`).

A checkpoint id is unique in its thread; a run stores each of its steps once; a thread has one
checkpoint without a parent (its first run's); and a checkpoint has one successor
(``testing/_successors.py``).  A refusal is a
:class:`~langgraph_celery.errors.CheckpointConflictError` that names the rule broken, keeps what
was stored, and holds when writers race each other from threads (or, for a store shared by
processes, from handles of their own).  The first of several writers of one pending write
wins.
"""

from __future__ import annotations

import pytest

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    PendingWrite,
)
from langgraph_celery.testing._support import THREAD, SaverFixtures, make_checkpoint, race

__all__ = ["UniquenessConformance"]

#: What a saver tells each refusal by, in its message.
_RULE_WORDS = {
    "id": "checkpoint ids must be unique",
    "step": "stored this step first",
    "root": "another run started on this new thread",
    "successor": "went on from it first",
}


class UniquenessConformance(SaverFixtures):
    """A store's uniqueness rules: one id, one step per run, one first checkpoint per thread,
    one successor, the first pending write; each refused by name, under racing writers."""

    def test_same_run_and_step_conflicts_and_keeps_the_original(
        self, saver: BaseCheckpointSaver
    ) -> None:
        original = make_checkpoint(3, values={"who": "first"})
        saver.put(original)

        with pytest.raises(CheckpointConflictError) as caught:
            saver.put(make_checkpoint(3, values={"who": "second"}))

        message = str(caught.value)
        assert THREAD in message and "run-1" in message and "3" in message
        assert "stored this step first" in message
        assert saver.get(THREAD) == original
        assert list(saver.list(THREAD)) == [original]

    def test_same_checkpoint_id_conflicts(self, saver: BaseCheckpointSaver) -> None:
        original = make_checkpoint(0, checkpoint_id="ck-same", values={"who": "first"})
        saver.put(original)

        with pytest.raises(CheckpointConflictError) as caught:
            saver.put(
                make_checkpoint(1, run="run-2", checkpoint_id="ck-same", values={"who": "second"})
            )

        assert THREAD in str(caught.value)
        assert "checkpoint ids must be unique" in str(caught.value)
        assert saver.get(THREAD, "ck-same") == original
        assert list(saver.list(THREAD)) == [original]

    def test_different_runs_may_store_the_same_step(self, saver: BaseCheckpointSaver) -> None:
        a, b = make_checkpoint(2, run="run-a"), make_checkpoint(2, run="run-b")
        saver.put(a)
        saver.put(b)
        assert list(saver.list(THREAD)) == [b, a]

    def test_one_checkpoint_without_a_parent_per_thread(self, saver: BaseCheckpointSaver) -> None:
        first = make_checkpoint(-1, run="run-a", parent_id=None)
        saver.put(first)
        with pytest.raises(CheckpointConflictError, match="another run started on this new thread"):
            saver.put(make_checkpoint(-1, run="run-b", parent_id=None))
        assert list(saver.list(THREAD)) == [first]
        saver.put(make_checkpoint(-1, run="run-c", parent_id=None, thread="other-thread"))
        saver.release(THREAD)
        saver.put(make_checkpoint(-1, run="run-d", parent_id=None))  # a released thread starts anew

    @pytest.mark.parametrize("rule", sorted(_RULE_WORDS))
    def test_conflicts_name_the_rule_broken_whatever_the_ids_say(
        self,
        saver: BaseCheckpointSaver,
        rule: str,
    ) -> None:
        """Ids that spell the names of columns and constraints do not confuse the saver about which
        rule a refused checkpoint broke."""
        thread = (
            "thread checkpoint_id step parent_id successor_of ckpt_id_uq ckpt_step_uq "
            "ckpt_root_uq ckpt_successor_uq"
        )
        run = "run checkpoint_id ckpt_id_uq ckpt_root_uq ckpt_successor_uq"
        first = make_checkpoint(
            0, thread=thread, run=run, checkpoint_id="ck step ckpt_step_uq", parent_id=None
        )
        stored = [saver.put(first)]
        if rule == "successor":  # (a successor of the first, which the refused one would be)
            second = make_checkpoint(
                1,
                thread=thread,
                run=run,
                checkpoint_id="ck successor_of",
                parent_id=first.checkpoint_id,
            )
            stored.insert(0, saver.put(second))
        refused = {
            "id": make_checkpoint(1, thread=thread, run=run, checkpoint_id=first.checkpoint_id),
            "step": make_checkpoint(0, thread=thread, run=run, checkpoint_id="ck other ckpt_id_uq"),
            "root": make_checkpoint(0, thread=thread, run="run-2 step", parent_id=None),
            "successor": make_checkpoint(
                0,
                thread=thread,
                run="run-2 step ckpt_step_uq",
                checkpoint_id="ck ckpt_root_uq",
                parent_id=first.checkpoint_id,
            ),
        }[rule]
        with pytest.raises(CheckpointConflictError) as caught:
            saver.put(refused)
        message = str(caught.value)
        assert _RULE_WORDS[rule] in message, message
        assert not any(words in message for other, words in _RULE_WORDS.items() if other != rule)
        assert list(saver.list(thread)) == stored

    def test_threads_racing_to_store_a_first_checkpoint_store_one(
        self, saver: BaseCheckpointSaver
    ) -> None:
        racers = 8
        for round_ in range(3):
            thread = f"new-thread-{round_}"
            candidates = [
                make_checkpoint(-1, run=f"run-{i}", parent_id=None, thread=thread)
                for i in range(racers)
            ]

            def put(index: int, candidates: list[Checkpoint] = candidates) -> Checkpoint:
                return saver.put(candidates[index])

            outcomes = race(racers, put)
            assert sum(isinstance(o, Checkpoint) for o in outcomes) == 1, outcomes
            assert sum(isinstance(o, CheckpointConflictError) for o in outcomes) == racers - 1
            assert len(saver.list(thread)) == 1

    def test_threads_racing_for_one_step_store_exactly_one(
        self, saver: BaseCheckpointSaver
    ) -> None:
        racers, rounds = 8, 4
        for step in range(rounds):
            candidates = [make_checkpoint(step, values={"writer": i}) for i in range(racers)]

            def put(index: int, candidates: list[Checkpoint] = candidates) -> Checkpoint:
                return saver.put(candidates[index])

            outcomes = race(racers, put)

            winners = [i for i, o in enumerate(outcomes) if isinstance(o, Checkpoint)]
            assert len(winners) == 1, outcomes
            assert all(
                isinstance(o, CheckpointConflictError)
                for i, o in enumerate(outcomes)
                if i != winners[0]
            ), outcomes
            assert saver.get(THREAD) == candidates[winners[0]]
        assert len(saver.list(THREAD)) == rounds

    def test_threads_racing_put_writes_one_wins(self, saver: BaseCheckpointSaver) -> None:
        racers = 8
        outcomes = race(
            racers, lambda i: saver.put_writes(THREAD, "ck-0", "task", f"node-{i}", {"writer": i})
        )

        assert sorted(outcomes, key=repr) == [False] * (racers - 1) + [True], outcomes
        winner = outcomes.index(True)
        assert list(saver.get_writes(THREAD, "ck-0")) == [
            PendingWrite("task", f"node-{winner}", {"writer": winner})
        ]
