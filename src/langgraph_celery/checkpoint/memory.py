"""An in-process checkpoint saver: fast, thread-safe, gone when the process exits.

Checkpoints and writes are kept *serialized* (the serializer's text), exactly like the SQL saver
keeps them, so a value that would not survive a database does not survive here either, and what
``get`` returns is always a fresh copy.

Checkpoints, retention and pending writes are here; timers and run records are
:class:`~langgraph_celery.checkpoint._memory_runs.MemoryRuns`'s (a base of :class:`MemorySaver`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph_celery.checkpoint._conflicts import Rule
from langgraph_celery.checkpoint._conflicts import message as conflict_message
from langgraph_celery.checkpoint._delta import Chain
from langgraph_celery.checkpoint._incremental import Incremental
from langgraph_celery.checkpoint._memory_runs import MemoryRuns
from langgraph_celery.checkpoint._records import as_utc
from langgraph_celery.checkpoint._retention import Removal, StoredRef, is_child_of, read_through
from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    PagedReads,
    PendingWrite,
    Timer,
    WriteKind,
    check_run_of,
    check_timer_thread,
)
from langgraph_celery.checkpoint.index import RunIndex, RunRecord
from langgraph_celery.errors import CheckpointConflictError
from langgraph_celery.serde import Serializer

__all__ = ["MemorySaver"]


@dataclass(frozen=True, slots=True)
class _Stored:
    checkpoint_id: str
    run_id: str
    step: int
    parent_id: str | None
    created_at: datetime
    #: ``None`` once pruned: the entry stays, keeping its id and step taken.
    body: str | None
    #: where it stands in its chain of deltas (``chain.base_id`` ``None``: stored whole)
    chain: Chain


@dataclass(slots=True)
class _Thread:
    # Insertion order is storage order: the last value is the latest checkpoint.
    checkpoints: dict[str, _Stored] = field(default_factory=dict)
    # (run_id, step) -> checkpoint_id, for the second uniqueness rule.
    steps: dict[tuple[str, int], str] = field(default_factory=dict)
    # parent_id -> checkpoint_id of its successor, for the one-successor rule.
    successors: dict[str, str] = field(default_factory=dict)
    # checkpoint_id -> task_id -> (node, serialized update), in insertion order.
    writes: dict[str, dict[str, tuple[str, str, WriteKind]]] = field(default_factory=dict)


class MemorySaver(MemoryRuns, PagedReads, BaseCheckpointSaver, RunIndex):
    """Keeps checkpoints in this process's memory.  For tests and single-process use.

    Celery workers in other processes cannot see it (``shared_across_processes`` is False).
    """

    shared_across_processes = False

    def __init__(self, serializer: Serializer | None = None) -> None:
        super().__init__(serializer)
        self._lock = threading.Lock()
        self._threads: dict[str, _Thread] = {}
        self._runs: dict[str, str] = {}  # run_id -> thread_id
        self._timers: dict[str, Timer] = {}  # thread_id -> its timer
        self._run_records: dict[str, RunRecord] = {}  # run_id -> its record
        self._superseded: set[str] = set()  # run ids completed_runs leaves out
        self._incremental = Incremental(self.serializer, self.dump_body)

    # -- checkpoints -------------------------------------------------------------------------

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        return self._put(checkpoint, None, timer_change=False)

    def put_with_timer(
        self, checkpoint: Checkpoint, timer: Timer | None, run: RunRecord | None = None
    ) -> Checkpoint:
        if timer is not None:
            check_timer_thread(checkpoint, timer)
        if run is not None:
            check_run_of(checkpoint, run)
        return self._put(checkpoint, timer, timer_change=True, run=run)

    def _put(
        self,
        checkpoint: Checkpoint,
        timer: Timer | None,
        timer_change: bool,
        run: RunRecord | None = None,
    ) -> Checkpoint:
        encoded = self._incremental.encode(
            checkpoint, lambda parent_id: self._chain(checkpoint.thread_id, parent_id)
        )
        created_at = as_utc(checkpoint.created_at)
        step_key = (checkpoint.run_id, checkpoint.step)
        successor_of = checkpoint.successor_of
        with self._lock:
            thread = self._threads.get(checkpoint.thread_id)
            if thread is None:
                thread = self._threads[checkpoint.thread_id] = _Thread()
            if encoded.chain.base_id is not None and not _is_live(thread, checkpoint.parent_id):
                # (its parent was pruned after it was encoded: stored whole, needing none)
                encoded = self._incremental.encode(checkpoint, whole=True)
            stored = _Stored(
                checkpoint_id=checkpoint.checkpoint_id,
                run_id=checkpoint.run_id,
                step=checkpoint.step,
                parent_id=checkpoint.parent_id,
                created_at=created_at,
                body=encoded.text,
                chain=encoded.chain,
            )
            refused = None
            held_by = None
            if checkpoint.checkpoint_id in thread.checkpoints:
                refused = Rule.CHECKPOINT_ID
            elif checkpoint.parent_id is None and thread.checkpoints:
                refused = Rule.ROOT
            elif step_key in thread.steps:
                refused, held_by = Rule.STEP, thread.steps[step_key]
            elif successor_of is not None and successor_of in thread.successors:
                refused, held_by = Rule.SUCCESSOR, thread.successors[successor_of]
            if refused is not None:
                raise CheckpointConflictError(conflict_message(checkpoint, refused, held_by))
            record = self._run_record_to_store(run) if run is not None else None
            if record is not None:
                self._run_records[record.run_id] = record
                self._superseded.discard(record.run_id)
            thread.checkpoints[checkpoint.checkpoint_id] = stored
            thread.steps[step_key] = checkpoint.checkpoint_id
            if successor_of is not None:
                thread.successors[successor_of] = checkpoint.checkpoint_id
            self._runs[checkpoint.run_id] = checkpoint.thread_id
            if timer is not None:
                self._timers[timer.thread_id] = dataclasses.replace(
                    timer, due_at=as_utc(timer.due_at)
                )
            elif timer_change:
                held = self._timers.get(checkpoint.thread_id)
                if held is not None and held.run_id == checkpoint.run_id:
                    del self._timers[checkpoint.thread_id]
        self._incremental.stored(checkpoint, encoded)
        if created_at is checkpoint.created_at:
            return checkpoint
        return dataclasses.replace(checkpoint, created_at=created_at)

    def _chain(self, thread_id: str, checkpoint_id: str) -> Chain | None:
        with self._lock:
            thread = self._threads.get(thread_id)
            stored = None if thread is None else thread.checkpoints.get(checkpoint_id)
        return None if stored is None or stored.body is None else stored.chain

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        with self._lock:
            thread = self._threads.get(thread_id)
            if thread is None:
                return None
            stored: _Stored | None
            if checkpoint_id is None:  # (the latest is never pruned: the loop ends at once)
                stored = next((s for s in _newest_first(thread) if s.body is not None), None)
            else:
                stored = thread.checkpoints.get(checkpoint_id)
        if stored is None or stored.body is None:
            return None
        return self._load(thread_id, stored, thread)

    def list(self, thread_id: str) -> Sequence[Checkpoint]:
        with self._lock:
            thread = self._threads.get(thread_id)
            rows = _live(thread)
        if thread is None:
            return []
        return [self._load(thread_id, stored, thread) for stored in rows]

    def _page(
        self, thread_id: str, limit: int, before: str | None, copy: bool
    ) -> Sequence[Checkpoint]:
        with self._lock:
            thread = self._threads.get(thread_id)
            rows = _live(thread)
            if before is not None:
                ids = [stored.checkpoint_id for stored in rows]
                anchor = thread.checkpoints.get(before) if thread is not None else None
                if anchor is None:
                    rows = []
                elif before in ids:
                    rows = rows[ids.index(before) + 1 :]
                else:  # (pruned: those stored before it)
                    order = list(thread.checkpoints) if thread is not None else []
                    older = set(order[: order.index(before)])
                    rows = [stored for stored in rows if stored.checkpoint_id in older]
            rows = rows[: max(limit, 0)]
        if thread is None:
            return []
        return [self._load(thread_id, stored, thread, copy) for stored in rows]

    def _has_step(self, checkpoint: Checkpoint) -> bool:
        with self._lock:
            thread = self._threads.get(checkpoint.thread_id)
            return thread is not None and (checkpoint.run_id, checkpoint.step + 1) in thread.steps

    def release(self, thread_id: str) -> Sequence[Checkpoint]:
        with self._lock:
            thread = self._threads.pop(thread_id, None)
            self._forget_thread(thread_id, thread)
            for child in self._children(thread_id):  # (they go with it)
                self._forget_thread(child, self._threads.pop(child, None))
        if thread is None:
            return []
        released = [self._load(thread_id, stored, thread) for stored in _live(thread)]
        self._incremental.forget(thread_id)  # (what reading them cached)
        return released

    # -- retention ---------------------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> int:
        """Drops the thread's entries, and its child threads', without reading them (see the
        base class)."""
        deleted = 0
        with self._lock:
            for name in [thread_id, *self._children(thread_id)]:
                thread = self._threads.pop(name, None)
                self._forget_thread(name, thread)
                if thread is not None:
                    deleted += sum(s.body is not None for s in thread.checkpoints.values())
        return deleted

    def _children_of(self, thread_id: str) -> Sequence[str]:
        with self._lock:
            return self._children(thread_id)

    def _children(self, thread_id: str) -> Sequence[str]:
        """(Holding the lock) the thread's child threads."""
        return sorted(t for t in self._threads if is_child_of(t, thread_id))

    def _forget_thread(self, thread_id: str, thread: _Thread | None) -> None:
        """(Holding the lock) the thread's timer, run records, run lookups and cached states."""
        self._incremental.forget(thread_id)
        self._timers.pop(thread_id, None)
        for record in [r for r in self._run_records.values() if r.thread_id == thread_id]:
            del self._run_records[record.run_id]
            self._superseded.discard(record.run_id)
        if thread is not None:
            for run_id, _step in thread.steps:
                self._runs.pop(run_id, None)

    def stored_refs(self, thread_id: str) -> Sequence[StoredRef]:
        with self._lock:
            thread = self._threads.get(thread_id)
            rows = _live(thread)
        return [_ref(stored) for stored in rows]

    def make_whole(self, thread_id: str, checkpoint_ids: Sequence[str]) -> None:
        for checkpoint_id in checkpoint_ids:
            checkpoint = self.get(thread_id, checkpoint_id)
            if checkpoint is None:
                continue
            text = self.dump_body(checkpoint)
            with self._lock:
                thread = self._threads.get(thread_id)
                stored = None if thread is None else thread.checkpoints.get(checkpoint_id)
                if thread is None or stored is None or stored.body is None:
                    continue
                # (replacing a key's value keeps its place: storage order is unchanged)
                thread.checkpoints[checkpoint_id] = dataclasses.replace(
                    stored, body=text, chain=Chain.whole(len(text))
                )
            self._incremental.forget(thread_id, [checkpoint_id])

    def remove_checkpoints(self, thread_id: str, checkpoint_ids: Sequence[str]) -> int:
        return len(self._remove_unneeded(thread_id, checkpoint_ids).removed)

    def _remove_unneeded(self, thread_id: str, checkpoint_ids: Sequence[str]) -> Removal:
        """Under the lock: what a delta not removed is read from stays (a checkpoint stored
        after prune's plan: a fork of an old one)."""
        with self._lock:
            thread = self._threads.get(thread_id)
            if thread is None:
                return Removal()
            ids = list(dict.fromkeys(checkpoint_ids))
            refs = [_ref(stored) for stored in _live(thread)]
            left = read_through(refs, set(ids))
            removed: list[str] = []
            runs: set[str] = set()
            for checkpoint_id in ids:
                stored = thread.checkpoints.get(checkpoint_id)
                if checkpoint_id in left or stored is None or stored.body is None:
                    continue
                # (replacing a key's value keeps its place: storage order is unchanged)
                thread.checkpoints[checkpoint_id] = dataclasses.replace(stored, body=None)
                thread.writes.pop(checkpoint_id, None)
                runs.add(stored.run_id)
                removed.append(checkpoint_id)
            self._incremental.forget(thread_id, removed)
            live = {s.run_id for s in thread.checkpoints.values() if s.body is not None}
            for run_id in runs - live:  # (thread_of_run finds runs by their checkpoints)
                if self._runs.get(run_id) == thread_id:
                    del self._runs[run_id]
            return Removal(frozenset(removed), left)

    # -- pending writes ----------------------------------------------------------------------

    def put_writes(
        self,
        thread_id: str,
        checkpoint_id: str,
        task_id: str,
        node: str,
        update: Mapping[str, Any],
        kind: WriteKind = WriteKind.UPDATE,
    ) -> bool:
        body = self.serializer.dumps(dict(update))
        with self._lock:
            thread = self._threads.get(thread_id)
            if thread is None:
                thread = self._threads[thread_id] = _Thread()
            step_writes = thread.writes.setdefault(checkpoint_id, {})
            if task_id in step_writes:
                return False
            step_writes[task_id] = (node, body, WriteKind(kind))
            return True

    def delete_write(self, thread_id: str, checkpoint_id: str, task_id: str, node: str) -> bool:
        with self._lock:
            thread = self._threads.get(thread_id)
            step_writes = None if thread is None else thread.writes.get(checkpoint_id)
            if step_writes is None or step_writes.get(task_id, ("",))[0] != node:
                return False
            del step_writes[task_id]
            return True

    def get_writes(self, thread_id: str, checkpoint_id: str) -> Sequence[PendingWrite]:
        with self._lock:
            thread = self._threads.get(thread_id)
            step_writes = None if thread is None else thread.writes.get(checkpoint_id)
            items = [] if step_writes is None else list(step_writes.items())
        return [
            PendingWrite(task_id, node, dict(self.serializer.loads(body)), kind)
            for task_id, (node, body, kind) in items
        ]

    # -- helpers -----------------------------------------------------------------------------

    def _load(
        self, thread_id: str, stored: _Stored, thread: _Thread, copy: bool = True
    ) -> Checkpoint:
        assert stored.body is not None  # (pruned entries are never loaded)
        body = self.serializer.loads(stored.body)
        entries = thread.checkpoints

        def parent_of(checkpoint_id: str) -> str | None:
            return entries[checkpoint_id].parent_id

        def body_of(checkpoint_id: str) -> Any:
            held = entries.get(checkpoint_id)
            if held is None or held.body is None:
                raise LookupError(
                    f"checkpoint {stored.checkpoint_id!r} of thread {thread_id!r} is stored as "
                    f"a delta of {checkpoint_id!r}, which is gone"
                )
            return self.serializer.loads(held.body)

        values = self._incremental.values(
            thread_id, stored.checkpoint_id, body, parent_of, body_of, copy
        )
        return Checkpoint.from_body(
            body,
            values=values,
            thread_id=thread_id,
            checkpoint_id=stored.checkpoint_id,
            run_id=stored.run_id,
            step=stored.step,
            parent_id=stored.parent_id,
            created_at=stored.created_at,
        )


def _newest_first(thread: _Thread) -> Iterator[_Stored]:
    return reversed(thread.checkpoints.values())


def _live(thread: _Thread | None) -> list[_Stored]:
    """The thread's checkpoints not pruned, newest first."""
    if thread is None:
        return []
    return [stored for stored in _newest_first(thread) if stored.body is not None]


def _is_live(thread: _Thread, checkpoint_id: str | None) -> bool:
    """Whether the thread holds ``checkpoint_id``, not pruned."""
    stored = None if checkpoint_id is None else thread.checkpoints.get(checkpoint_id)
    return stored is not None and stored.body is not None


def _ref(stored: _Stored) -> StoredRef:
    return StoredRef(
        stored.checkpoint_id, stored.run_id, stored.parent_id, whole=stored.chain.base_id is None
    )
