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
from langgraph_celery.testing._support import THREAD, make_checkpoint
from langgraph_celery.testing._uniqueness import UniquenessConformance

__all__ = ["SaverConformance"]


class _Opaque:
    """A value no serializer allows."""


class SaverConformance(
    UniquenessConformance, PruneConformance, DeltaConformance, SuccessorConformance
):
    """What every :class:`~langgraph_celery.checkpoint.BaseCheckpointSaver` must do: storing,
    reading and listing checkpoints, pending writes, release, serialization failures;
    uniqueness under concurrent writers (``testing/_uniqueness.py``; one successor per
    checkpoint: ``testing/_successors.py``); checkpoints given with a delta
    (``testing/_delta.py``); and retention (``delete_thread``, ``prune``: see
    ``testing/_retention.py``).  Subclass it in a test module and override
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

    def test_list_page_is_a_page_of_list(self, saver: BaseCheckpointSaver) -> None:
        stored = [make_checkpoint(step, run=f"run-{step % 2}") for step in range(7)]
        for checkpoint in stored:
            saver.put(checkpoint)
        saver.put(make_checkpoint(0, thread="other-thread"))
        ids = [c.checkpoint_id for c in saver.list(THREAD)]

        def page(limit: int, before: str | None = None) -> list[str]:
            return [c.checkpoint_id for c in saver.list_page(THREAD, limit, before)]

        assert page(3) == ids[:3]
        assert page(100) == ids
        assert page(0) == []
        assert page(3, ids[2]) == ids[3:6]
        assert page(3, ids[5]) == ids[6:]
        assert page(3, ids[-1]) == []
        assert page(3, "ck-missing") == []
        assert list(saver.list_page(THREAD, 2, ids[0])) == list(saver.list(THREAD))[1:3]
        assert saver.list_page("no-such-thread", 5) == []

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
