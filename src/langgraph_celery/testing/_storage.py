"""The conformance tests of a checkpoint store: :class:`SaverConformance`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    CheckpointKind,
    PendingTask,
    PendingWrite,
    WriteKind,
)
from langgraph_celery.errors import SerializationError
from langgraph_celery.testing._delta import DeltaConformance
from langgraph_celery.testing._retention import PruneConformance
from langgraph_celery.testing._successors import SuccessorConformance
from langgraph_celery.testing._support import THREAD, make_checkpoint, race

__all__ = ["SaverConformance"]

#: What a saver tells each refusal by, in its message.
_RULE_WORDS = {
    "id": "checkpoint ids must be unique",
    "step": "stored this step first",
    "root": "another run started on this new thread",
    "successor": "went on from it first",
}


class _Opaque:
    """A value no serializer allows."""


class SaverConformance(PruneConformance, DeltaConformance, SuccessorConformance):
    """What every :class:`~langgraph_celery.checkpoint.BaseCheckpointSaver` must do: storing,
    reading and listing checkpoints, pending writes, uniqueness under concurrent writers (one
    successor per checkpoint: ``testing/_successors.py``), release, serialization failures;
    checkpoints given with a delta (``testing/_delta.py``); and retention (``delete_thread``,
    ``prune``: see ``testing/_retention.py``).  Subclass it in a test module and override
    :meth:`saver_factory` (see :mod:`langgraph_celery.testing`)."""

    def test_unknown_thread_is_empty(self, saver: BaseCheckpointSaver) -> None:
        assert saver.get("nobody") is None
        assert saver.get("nobody", "ck-missing") is None
        assert list(saver.list("nobody")) == []
        assert list(saver.get_writes("nobody", "ck-missing")) == []
        assert list(saver.release("nobody")) == []

    def test_put_then_get_latest_and_by_id(self, saver: BaseCheckpointSaver) -> None:
        first = make_checkpoint(0, values={"a": 1}, metadata={"source": "input"})
        second = make_checkpoint(
            1,
            values={"a": 2},
            parent_id=first.checkpoint_id,
            node="agent",
            extra={"barrier": ["x", "y"]},
            metadata={"source": "loop", "writes": {"agent": 1}},
            tasks=(PendingTask("t1", "tools"),),
        )
        assert saver.put(first) == first
        assert saver.put(second) == second

        assert saver.get(THREAD) == second
        assert saver.get(THREAD, first.checkpoint_id) == first
        assert saver.get(THREAD, second.checkpoint_id) == second
        assert saver.get(THREAD, "ck-missing") is None
        assert saver.get("other-thread", first.checkpoint_id) is None
        got = saver.get(THREAD)
        assert got is not None
        assert got.parent_id == first.checkpoint_id
        assert got.next == ("tools",)

    def test_list_is_newest_stored_first_not_highest_step(self, saver: BaseCheckpointSaver) -> None:
        stored = [
            make_checkpoint(5, run="run-a"),
            make_checkpoint(0, run="run-b"),
            make_checkpoint(3, run="run-a"),
        ]
        for checkpoint in stored:
            saver.put(checkpoint)

        assert [c.checkpoint_id for c in saver.list(THREAD)] == [
            c.checkpoint_id for c in reversed(stored)
        ]
        assert list(saver.list(THREAD)) == list(reversed(stored))
        latest = saver.get(THREAD)
        assert latest is not None and latest.checkpoint_id == stored[-1].checkpoint_id

    def test_values_round_trip_with_their_types(self, saver: BaseCheckpointSaver) -> None:
        moment = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
        values: dict[str, Any] = {
            "tuple": (1, "two", (3.5, None)),
            "set": {1, 2, 3},
            "when": moment,
            "bytes": b"\x00\xff",
            "uuid": uuid.UUID(int=7),
            "nested": {"list": [1, {"deep": (True, False)}], "empty": {}},
            "text": "héllo",
            "float": 0.25,
            "none": None,
        }
        saver.put(make_checkpoint(0, values=values))

        got = saver.get(THREAD)
        assert got is not None
        assert got.values == values
        assert type(got.values["tuple"]) is tuple
        assert type(got.values["tuple"][2]) is tuple
        assert type(got.values["set"]) is set
        assert got.values["when"] == moment and got.values["when"].tzinfo is not None
        assert type(got.values["nested"]["list"][1]["deep"]) is tuple

    def test_stored_values_are_copies(self, saver: BaseCheckpointSaver) -> None:
        values: dict[str, Any] = {"items": [1, 2], "nested": {"a": [1]}}
        saver.put(make_checkpoint(0, values=values))
        values["items"].append("mutated after put")
        values["nested"]["b"] = "new key"

        got = saver.get(THREAD)
        assert got is not None
        assert got.values == {"items": [1, 2], "nested": {"a": [1]}}
        got.values["items"].append(99)
        got.values["nested"]["a"].append(2)
        got.extra["added"] = True

        again = saver.get(THREAD)
        assert again is not None
        assert again.values == {"items": [1, 2], "nested": {"a": [1]}}
        assert again.extra == {}
        assert saver.list(THREAD)[0].values == {"items": [1, 2], "nested": {"a": [1]}}

    def test_created_at_is_tz_aware_and_the_same_instant(self, saver: BaseCheckpointSaver) -> None:
        plus_two = timezone(timedelta(hours=2))
        when = datetime(2023, 12, 31, 23, 59, 58, 654321, tzinfo=plus_two)
        saver.put(make_checkpoint(0, created_at=when))
        saver.put(make_checkpoint(1))

        for got in saver.list(THREAD):
            assert got.created_at.tzinfo is not None
            assert got.created_at.utcoffset() == timedelta(0)
        oldest = saver.list(THREAD)[-1]
        assert oldest.created_at == when
        assert oldest.created_at.hour == 21  # reported in UTC

    def test_pending_tasks_keep_has_arg(self, saver: BaseCheckpointSaver) -> None:
        tasks = (
            PendingTask("a", "plain"),
            PendingTask("b", "send-none", arg=None, has_arg=True),
            PendingTask("c", "send-value", arg={"k": (1, 2)}, has_arg=True),
            PendingTask("d", "send-zero", arg=0, has_arg=True),
        )
        saver.put(make_checkpoint(0, tasks=tasks))

        got = saver.get(THREAD)
        assert got is not None
        assert got.tasks == tasks
        assert [t.has_arg for t in got.tasks] == [False, True, True, True]
        assert got.tasks[1].arg is None
        assert got.tasks[2].arg == {"k": (1, 2)}
        assert got.next == ("plain", "send-none", "send-value", "send-zero")

    def test_every_kind_reads_back(self, saver: BaseCheckpointSaver) -> None:
        stored = [make_checkpoint(step, kind=kind) for step, kind in enumerate(CheckpointKind)]
        for checkpoint in stored:
            saver.put(checkpoint)
        assert [c.kind for c in saver.list(THREAD)] == [c.kind for c in reversed(stored)]
        for checkpoint in stored:
            got = saver.get(THREAD, checkpoint.checkpoint_id)
            assert got is not None and got.kind is checkpoint.kind
        view = saver.get_with_writes(THREAD)
        assert view.checkpoint is not None and view.checkpoint.kind is stored[-1].kind

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

    def test_threads_are_isolated(self, saver: BaseCheckpointSaver) -> None:
        one = make_checkpoint(0, thread="t-one", checkpoint_id="ck-1", values={"thread": 1})
        two = make_checkpoint(0, thread="t-two", checkpoint_id="ck-1", values={"thread": 2})
        saver.put(one)
        saver.put(two)  # same id, run and step in another thread: no conflict
        assert saver.put_writes("t-one", "ck-1", "task", "n", {"from": 1}) is True
        assert saver.put_writes("t-two", "ck-1", "task", "n", {"from": 2}) is True

        assert saver.get("t-one") == one and saver.get("t-two") == two
        assert saver.get_writes("t-one", "ck-1") == [PendingWrite("task", "n", {"from": 1})]
        assert saver.release("t-one") == [one]
        assert saver.get("t-one") is None
        assert saver.get("t-two") == two
        assert saver.get_writes("t-two", "ck-1") == [PendingWrite("task", "n", {"from": 2})]

    def test_put_writes_first_wins_in_insertion_order(self, saver: BaseCheckpointSaver) -> None:
        saver.put(make_checkpoint(0, checkpoint_id="ck-0"))
        update: dict[str, Any] = {"messages": ["b"], "pair": (1, 2)}
        assert saver.put_writes(THREAD, "ck-0", "task-b", "node-b", update) is True
        assert saver.put_writes(THREAD, "ck-0", "task-a", "node-a", {"x": 1}) is True
        assert saver.put_writes(THREAD, "ck-0", "task-c", "node-c", {}) is True
        assert (
            saver.put_writes(THREAD, "ck-0", "task-b", "node-b", {"messages": ["again"]}) is False
        )
        assert saver.put_writes(THREAD, "ck-other", "task-b", "node-b", {"y": 2}) is True
        update["messages"].append("mutated after put_writes")

        expected = [
            PendingWrite("task-b", "node-b", {"messages": ["b"], "pair": (1, 2)}),
            PendingWrite("task-a", "node-a", {"x": 1}),
            PendingWrite("task-c", "node-c", {}),
        ]
        got = list(saver.get_writes(THREAD, "ck-0"))
        assert got == expected
        got[0].update["messages"].append("mutated after get_writes")
        assert list(saver.get_writes(THREAD, "ck-0")) == expected
        assert list(saver.get_writes(THREAD, "ck-other")) == [
            PendingWrite("task-b", "node-b", {"y": 2})
        ]

    def test_release_returns_and_deletes_everything(self, saver: BaseCheckpointSaver) -> None:
        stored = [make_checkpoint(step, checkpoint_id=f"ck-{step}") for step in range(3)]
        for checkpoint in stored:
            saver.put(checkpoint)
        saver.put_writes(THREAD, "ck-0", "task", "n", {"v": 0})
        saver.put_writes(THREAD, "ck-2", "task", "n", {"v": 2})
        kept = make_checkpoint(0, thread="kept")
        saver.put(kept)

        released = list(saver.release(THREAD))

        assert released == list(reversed(stored))
        assert saver.get(THREAD) is None
        assert saver.get(THREAD, "ck-1") is None
        assert list(saver.list(THREAD)) == []
        assert list(saver.get_writes(THREAD, "ck-0")) == []
        assert list(saver.get_writes(THREAD, "ck-2")) == []
        assert list(saver.release(THREAD)) == []
        assert saver.get("kept") == kept
        # The thread is really empty: the same ids and steps can be stored again.
        saver.put(stored[0])
        assert saver.put_writes(THREAD, "ck-0", "task", "n", {"v": "again"}) is True
        assert list(saver.list(THREAD)) == [stored[0]]

    def test_non_serializable_value_fails_and_stores_nothing(
        self, saver: BaseCheckpointSaver
    ) -> None:
        with pytest.raises(SerializationError) as caught:
            saver.put(make_checkpoint(0, values={"fine": 1, "bad_key": _Opaque()}))
        assert "bad_key" in str(caught.value) and "_Opaque" in str(caught.value)
        assert saver.get(THREAD) is None
        assert list(saver.list(THREAD)) == []

        with pytest.raises(SerializationError):
            saver.put_writes(THREAD, "ck-0", "task", "n", {"bad_key": _Opaque()})
        assert list(saver.get_writes(THREAD, "ck-0")) == []
        assert saver.put_writes(THREAD, "ck-0", "task", "n", {"good": 1}) is True

        # The failed put did not reserve its step: the same run and step can be stored.
        good = make_checkpoint(0, values={"fine": 1})
        saver.put(good)
        assert saver.get(THREAD) == good

    def test_every_handle_sees_the_latest_data(
        self,
        saver_factory: Callable[[], BaseCheckpointSaver],
    ) -> None:
        a, b = saver_factory(), saver_factory()
        first = make_checkpoint(0)
        a.put(first)
        assert b.get(THREAD) == first
        second = make_checkpoint(1)
        b.put(second)
        assert a.get(THREAD) == second
        assert a.put_writes(THREAD, first.checkpoint_id, "task", "n", {"v": 1}) is True
        assert b.put_writes(THREAD, first.checkpoint_id, "task", "n", {"v": 2}) is False
        with pytest.raises(CheckpointConflictError):
            b.put(make_checkpoint(1))
        assert list(b.release(THREAD)) == [second, first]
        assert a.get(THREAD) is None

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

    def test_get_with_writes_reports_markers_and_committed_steps(
        self, saver: BaseCheckpointSaver
    ) -> None:
        first = Checkpoint(thread_id="t1", checkpoint_id="c1", run_id="r1", step=0, values={"a": 1})
        saver.put(first)
        saver.put_writes("t1", "c1", "__cancel__", "__END__", {}, WriteKind.CANCEL)
        saver.put_writes("t1", "c1", "n", "n", {"a": 2})
        view = saver.get_with_writes("t1", "c1")
        assert view.checkpoint is not None and view.checkpoint.values == {"a": 1}
        assert sorted(view.writes) == ["__cancel__", "n"]
        # each write reads back with its kind
        assert view.writes["__cancel__"].kind is WriteKind.CANCEL
        assert view.writes["n"].kind is WriteKind.UPDATE
        assert [w.kind for w in saver.get_writes("t1", "c1")] == [
            WriteKind.CANCEL,
            WriteKind.UPDATE,
        ]
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
        assert list(latest.parent_markers) == [
            "__cancel__"
        ]  # the parent's marks (writes of another kind than an update); its updates are left out
        assert saver.get_with_writes("t1", "c1").step_committed is True
        assert saver.get_with_writes("t1", "c2").step_committed is False
        assert saver.get_with_writes("nobody").checkpoint is None
