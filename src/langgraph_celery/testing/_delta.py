"""The conformance tests of checkpoints given with a ``delta``: :class:`DeltaConformance`.

A saver may store a checkpoint's delta instead of its whole state, or ignore it and store the
whole state; either way every read returns the same values.  These tests give chains of deltas
(every op: ``set``, ``del``, ``add``, ``rm``, ``put``, ``pop``), whole values in between
(``delta=None``), forks from a middle checkpoint, a delta whose parent was never stored, and
prune, and check what every handle on the store reads back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph_celery.checkpoint import BaseCheckpointSaver, Checkpoint
from langgraph_celery.checkpoint._delta import apply_delta
from langgraph_celery.testing._support import THREAD, SaverFixtures, make_checkpoint

__all__ = ["DeltaConformance"]

Ops = dict[str, list[list[Any]]]

#: The deltas of a conversation-like thread, each after the one before.
_STEPS: list[Ops] = [
    {"messages": [["add", ["m1"]]], "count": [["set", 1]]},
    {"messages": [["add", ["m2", "m3"]]], "count": [["set", 2]], "scratch": [["set", {"a": 1}]]},
    {"messages": [["rm", "m2"], ["add", ["m4"]]], "scratch": [["del"]]},
    {
        "messages": [["add", [{"role": "ai", "content": "m5"}]]],
        "count": [["set", 5]],
        "files": [["set", {"a.txt": "one", "b.txt": "two", "c.txt": "three"}]],
    },
    {"messages": [["set", ["fresh"]]], "when": [["set", (1, "two")]]},
    {
        "messages": [["add", ["m6"]]],
        "count": [["set", 6]],
        "files": [["pop", ["a.txt"]], ["put", {"d.txt": "four", "b.txt": "2"}]],
    },
]


class DeltaConformance(SaverFixtures):
    """Checkpoints given with a ``delta`` read back with exactly their values."""

    def _thread(
        self,
        saver: BaseCheckpointSaver,
        *,
        whole_at: frozenset[int] = frozenset(),
        thread: str = THREAD,
    ) -> list[Checkpoint]:
        """A root checkpoint, then one per delta of ``_STEPS`` (stored whole, ``delta=None``, at
        the indexes ``whole_at``), each the parent of the next; what was stored, oldest first."""
        values: dict[str, Any] = {"messages": ["m0"], "count": 0}
        root = make_checkpoint(0, thread=thread, values=values, parent_id=None)
        stored = [saver.put(root)]
        for index, delta in enumerate(_STEPS, start=1):
            values = apply_delta(values, [delta])
            writes = {"task": {"messages": delta["messages"][-1][1]}}
            checkpoint = make_checkpoint(
                index,
                thread=thread,
                values=values,
                parent_id=stored[-1].checkpoint_id,
                metadata={"source": "loop", "writes": writes},
                delta=None if index in whole_at else delta,
            )
            stored.append(saver.put(checkpoint))
        return stored

    def _reads(
        self,
        factory: Callable[[], BaseCheckpointSaver],
        saver: BaseCheckpointSaver,
        stored: list[Checkpoint],
        thread: str = THREAD,
    ) -> None:
        for handle in (saver, factory()):
            assert list(handle.list(thread)) == stored[::-1]
            for checkpoint in stored:
                assert handle.get(thread, checkpoint.checkpoint_id) == checkpoint
            latest = handle.get(thread)
            assert latest is not None and latest.values == stored[-1].values
            view = handle.get_with_writes(thread, stored[3].checkpoint_id)
            assert view.checkpoint == stored[3]
        newest_first = stored[::-1]
        for limit in (1, 3):  # (a fresh handle each: a page's deltas read from the store)
            assert list(factory().list_page(thread, limit)) == newest_first[:limit]
            for at, checkpoint in enumerate(newest_first):
                page = factory().list_page(thread, limit, checkpoint.checkpoint_id)
                assert list(page) == newest_first[at + 1 : at + 1 + limit]

    def test_a_chain_of_deltas_reads_back(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        stored = self._thread(saver)
        assert stored[-1].values == {
            "messages": ["fresh", "m6"],
            "count": 6,
            "when": (1, "two"),
            "files": {"b.txt": "2", "c.txt": "three", "d.txt": "four"},
        }
        assert list(stored[-1].values["files"]) == ["b.txt", "c.txt", "d.txt"]
        self._reads(saver_factory, saver, stored)

    def test_whole_values_between_deltas_read_back(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        stored = self._thread(saver, whole_at=frozenset({2, 5}))
        self._reads(saver_factory, saver, stored)

    def test_a_checkpoint_without_a_delta_after_deltas_is_whole(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        stored = self._thread(saver)
        # its values are not those of its parent with any delta: stored whole, read so
        alone = make_checkpoint(
            len(stored), values={"other": [1, 2]}, parent_id=stored[-1].checkpoint_id
        )
        saver.put(alone)
        after = make_checkpoint(
            len(stored) + 1,
            values={"other": [1, 2, 3]},
            parent_id=alone.checkpoint_id,
            delta={"other": [["add", [3]]]},
        )
        saver.put(after)
        for handle in (saver, saver_factory()):
            assert handle.get(THREAD, alone.checkpoint_id) == alone
            assert handle.get(THREAD) == after

    def test_a_delta_whose_parent_was_never_stored_reads_back(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        orphan = make_checkpoint(
            3, values={"messages": ["a", "b"]}, delta={"messages": [["add", ["b"]]]}
        )
        saver.put(orphan)  # (its parent, "ck-parent-<hex>", is not stored)
        for handle in (saver, saver_factory()):
            assert handle.get(THREAD) == orphan

    def test_forks_from_a_middle_checkpoint_read_back(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        stored = self._thread(saver)
        middle = stored[3]
        fork_values = apply_delta(middle.values, [{"messages": [["add", ["forked"]]]}])
        fork = make_checkpoint(
            middle.step + 1,
            run="run-fork",
            values=fork_values,
            parent_id=middle.checkpoint_id,
            delta={"messages": [["add", ["forked"]]]},
            branch=True,  # (a fork: the middle checkpoint's successor is stored already)
        )
        saver.put(fork)
        on = make_checkpoint(
            middle.step + 2,
            run="run-fork",
            values={**fork_values, "count": 99},
            parent_id=fork.checkpoint_id,
            delta={"count": [["set", 99]]},
        )
        saver.put(on)
        for handle in (saver, saver_factory()):
            assert handle.get(THREAD) == on
            assert handle.get(THREAD, fork.checkpoint_id) == fork
            assert list(handle.list(THREAD)) == [on, fork, *stored[::-1]]

    def test_adds_equal_to_another_write_read_back_as_their_own(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        """Tasks of one step that append items equal but not the same (``1``, ``True`` and
        ``1.0``; dicts in another key order), and an update's add next to an equal one: each
        reads back as written, not as the first equal write (a saver that stores an add as a
        reference to a write must store it so only for the very same items)."""
        root = make_checkpoint(0, values={"log": ["start"]}, parent_id=None)
        saver.put(root)
        first, second = {"x": 1, "y": 2}, {"y": 2, "x": 1}
        writes = {"a": {"log": [1, first]}, "b": {"log": [True, second]}, "c": {"log": 1.0}}
        step = make_checkpoint(
            1,
            values={"log": ["start", 1, first, True, second, 1.0]},
            parent_id=root.checkpoint_id,
            metadata={"source": "loop", "writes": writes},
            delta={"log": [["add", [1, first]], ["add", [True, second]], ["add", [1.0]]]},
        )
        saver.put(step)
        update = make_checkpoint(
            2,
            values={"log": [*step.values["log"], 1, True]},
            parent_id=step.checkpoint_id,
            metadata={"source": "update", "update": {"log": [1]}},
            delta={"log": [["add", [1]], ["add", [True]]]},
        )
        saver.put(update)
        for handle in (saver, saver_factory()):
            for checkpoint in (step, update):
                read = handle.get(THREAD, checkpoint.checkpoint_id)
                assert read is not None
                # (repr: 1 == True == 1.0, and dicts equal whatever their order)
                assert repr(read.values["log"]) == repr(checkpoint.values["log"])
            history = [repr(c.values["log"]) for c in handle.list(THREAD)]
            assert history[:2] == [repr(update.values["log"]), repr(step.values["log"])]

    def test_prune_keeps_what_a_kept_delta_is_read_from(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        stored = self._thread(saver)
        result = saver.prune(THREAD, keep_last=2)
        assert [kept.checkpoint_id for kept in result.kept[:2]] == [
            stored[-1].checkpoint_id,
            stored[-2].checkpoint_id,
        ]
        kept = {kept.checkpoint_id for kept in result.kept}
        assert kept | set(result.deleted) == {c.checkpoint_id for c in stored}
        for handle in (saver, saver_factory()):
            assert handle.get(THREAD) == stored[-1]
            assert handle.get(THREAD, stored[-2].checkpoint_id) == stored[-2]
            assert [c.checkpoint_id for c in handle.list(THREAD)] == [
                c.checkpoint_id for c in stored[::-1] if c.checkpoint_id in kept
            ]
        # and the thread goes on from what was kept
        following = make_checkpoint(
            len(stored),
            values=apply_delta(stored[-1].values, [{"count": [["set", 7]]}]),
            parent_id=stored[-1].checkpoint_id,
            delta={"count": [["set", 7]]},
        )
        saver.put(following)
        assert saver_factory().get(THREAD) == following

    def _fork_of(self, parent: Checkpoint) -> Checkpoint:
        """A fork of ``parent`` (a new run's first step) that adds one message."""
        added: Ops = {"messages": [["add", ["forked"]]]}
        return make_checkpoint(
            parent.step + 1,
            run="run-fork",
            values=apply_delta(parent.values, [added]),
            parent_id=parent.checkpoint_id,
            delta=added,
            branch=True,
        )

    def test_a_fork_stored_while_prune_runs_keeps_what_it_is_read_from(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        """Another handle forks a checkpoint that prune's plan removes, after the plan was
        made: the fork reads back, prune removes only what nothing stored is read from, and its
        result says so (what it says it removed is gone, what it says it kept is there)."""
        stored = self._thread(saver)
        fork = self._fork_of(stored[3])
        plan = saver.stored_refs
        forked: list[Checkpoint] = []

        def plan_then_fork(thread_id: str) -> Any:
            refs = plan(thread_id)
            if thread_id == THREAD and not forked:
                forked.append(saver_factory().put(fork))
            return refs

        saver.stored_refs = plan_then_fork  # type: ignore[method-assign]
        result = saver.prune(THREAD, keep_last=1)

        assert forked and stored[3].checkpoint_id not in result.deleted
        kept = [k.checkpoint_id for k in result.kept]
        assert sorted([*kept, *result.deleted]) == sorted(c.checkpoint_id for c in stored)
        for handle in (saver, saver_factory()):
            assert handle.get(THREAD, fork.checkpoint_id) == fork
            assert handle.get(THREAD) == fork
            for checkpoint in stored:
                found = handle.get(THREAD, checkpoint.checkpoint_id)
                assert found == (None if checkpoint.checkpoint_id in result.deleted else checkpoint)
        # and the fork goes on
        following = make_checkpoint(
            fork.step + 1,
            run="run-fork",
            values={**fork.values, "count": 42},
            parent_id=fork.checkpoint_id,
            delta={"count": [["set", 42]]},
        )
        saver_factory().put(following)
        assert saver_factory().get(THREAD) == following

    def test_a_fork_of_a_checkpoint_another_handle_pruned_reads_back(
        self, saver: BaseCheckpointSaver, saver_factory: Callable[[], BaseCheckpointSaver]
    ) -> None:
        """A handle that read a checkpoint (and may have cached where it stands) forks it after
        another handle pruned it: the fork is stored so that it reads back."""
        stored = self._thread(saver)
        other = saver_factory()
        assert other.get(THREAD, stored[3].checkpoint_id) == stored[3]
        assert stored[3].checkpoint_id in saver.prune(THREAD, keep_last=1).deleted
        fork = self._fork_of(stored[3])
        other.put(fork)
        for handle in (saver, other, saver_factory()):
            assert handle.get(THREAD, fork.checkpoint_id) == fork
            assert [c.checkpoint_id for c in handle.list(THREAD)] == [
                fork.checkpoint_id,
                stored[-1].checkpoint_id,
            ]
