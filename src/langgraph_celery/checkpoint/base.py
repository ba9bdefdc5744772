"""The checkpoint model and the abstract saver every store implements.

A checkpoint is an immutable record of a thread's state after one superstep (or after the input,
an interruption or ``update_state``).  It is identified by ``(thread_id, checkpoint_id)`` and also
unique by ``(thread_id, run_id, step)``: two writers that both try to store the same step of the
same run are detected (:class:`CheckpointConflictError`), never merged or duplicated.

A thread's checkpoints form a tree (each names its parent).  A checkpoint computed from the
thread's latest one (a step, a new run, a resume, an ``update_state``) is its parent's
*successor*, and a checkpoint has at most one: of two writers that both go on from the same
checkpoint (a step of a cancelled run finishing late, and a new run started after the cancel)
the second is refused.  One made from an older checkpoint the caller named (a fork, time
travel) is a *branch* (:attr:`Checkpoint.branch`), which may share its parent with others.

Alongside checkpoints a saver keeps *pending writes*: the update of each task that finished in the
step that starts from a checkpoint, keyed by ``(thread_id, checkpoint_id, task_id)``.  The first
write for a key wins; a second one is refused.  They let a step whose other tasks failed or were
interrupted keep what already succeeded, and make a redelivered task a no-op.

Retention: :meth:`BaseCheckpointSaver.delete_thread` removes a thread, and
:meth:`BaseCheckpointSaver.prune` keeps its last checkpoints and what its runs still need
(see :mod:`langgraph_celery.checkpoint._retention`).
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph_celery.checkpoint._records import (
    Checkpoint,
    CheckpointKind,
    CheckpointView,
    PendingTask,
    PendingWrite,
    Timer,
    WriteKind,
    kind_of_body,
)
from langgraph_celery.checkpoint._retention import (
    PruneResult,
    Removal,
    StoredRef,
    check_keep_last,
    needing_run_inputs,
    plan_prune,
    read_through,
    settle,
    unfinished_runs,
)
from langgraph_celery.checkpoint._saver_rules import (
    cannot_prune,
    check_run_of,
    check_timer_thread,
    is_placeholder,
    not_indexed,
    placeholder,
    put_with_timer_in_turn,
    root_conflict_message,
)
from langgraph_celery.errors import SerializationError
from langgraph_celery.graph.config import require_id
from langgraph_celery.serde import JsonSerializer, Serializer

if TYPE_CHECKING:
    from langgraph_celery.checkpoint.index import RunRecord

__all__ = [
    "BaseCheckpointSaver",
    "Checkpoint",
    "CheckpointKind",
    "CheckpointView",
    "PagedReads",
    "PendingTask",
    "PendingWrite",
    "Timer",
    "WriteKind",
    "check_run_of",
    "check_timer_thread",
    "is_placeholder",
    "kind_of_body",
    "put_with_timer_in_turn",
    "root_conflict_message",
]


_F = TypeVar("_F", bound=Callable[..., Any])

#: The methods that take a thread id first and may remove what is stored of it: every saver's
#: own are wrapped to refuse a thread id that cannot be one (see ``__init_subclass__``).
_THREAD_METHODS = ("release", "delete_thread", "prune")


def _checking_thread_id(method: _F) -> _F:
    """``method`` (whose first argument is a thread id), refusing with ``ValueError`` a thread
    id that is not a non-empty string of at most 255 characters (``require_id``)."""
    if getattr(method, "_checks_thread_id", False):
        return method

    @functools.wraps(method)
    def checked(self: Any, thread_id: Any, *args: Any, **kwargs: Any) -> Any:
        require_id("thread_id", thread_id)
        return method(self, thread_id, *args, **kwargs)

    checked._checks_thread_id = True  # type: ignore[attr-defined]
    return checked  # type: ignore[return-value]


class BaseCheckpointSaver(abc.ABC):
    """Stores checkpoints and pending writes of threads.  Implementations must be thread-safe.

    This is the storage half of the saver contract; what indexes runs (claims, timers, the run
    lookup) is :class:`~langgraph_celery.checkpoint.RunIndex`, which a saver that runs graphs on
    Celery implements as well.  The run index's methods are declared here too, as placeholders
    that raise, so that code typed with this class keeps calling them.

    Values are stored with ``self.serializer`` (a :class:`JsonSerializer` unless given), so what
    comes back is a fresh copy, never the object that was stored.
    """

    #: False for savers whose data lives in this process only (Celery workers elsewhere
    #: cannot see it).
    shared_across_processes: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A saver's own ``release``, ``delete_thread`` and ``prune`` refuse a thread id that
        cannot be one (not a string, empty, longer than 255 characters) with ``ValueError``,
        before they touch the store: one rule for every saver."""
        super().__init_subclass__(**kwargs)
        for name in _THREAD_METHODS:
            method = cls.__dict__.get(name)
            if callable(method):
                setattr(cls, name, _checking_thread_id(method))

    def __init__(self, serializer: Serializer | None = None) -> None:
        self.serializer: Serializer = serializer if serializer is not None else JsonSerializer()

    def setup(self) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Create whatever storage the saver needs.  Idempotent; also done on first use."""

    def dump_body(self, checkpoint: Checkpoint) -> str:
        """``checkpoint.body()`` as the serializer's text; an error names the state key at
        fault (``'approved'``, not ``'values'``)."""
        try:
            return self.serializer.dumps(checkpoint.body())
        except SerializationError:
            self.serializer.dumps(checkpoint.values)
            raise

    @abc.abstractmethod
    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        """Store a new checkpoint and return it.

        Raises :class:`CheckpointConflictError` if the thread already has a checkpoint with the
        same ``checkpoint_id`` or the same ``(run_id, step)``, or if ``checkpoint`` has no parent
        and the thread already has a checkpoint (two first runs of a new thread: one wins), or
        if ``checkpoint`` is a successor (not a :attr:`~Checkpoint.branch`) and the thread
        already has a successor of its parent (two writers went on from one checkpoint: one
        wins), and :class:`SerializationError` (naming the key and type) if a value cannot be
        serialized.
        """

    @abc.abstractmethod
    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        """The thread's latest checkpoint, or the one named; ``None`` if there is none."""

    @abc.abstractmethod
    def list(self, thread_id: str) -> Sequence[Checkpoint]:
        """All of the thread's checkpoints, newest (last stored) first."""

    def list_page(
        self, thread_id: str, limit: int, before: str | None = None
    ) -> Sequence[Checkpoint]:
        """At most ``limit`` of the thread's checkpoints, newest first: the newest, or those
        stored before checkpoint ``before`` (none when it is not the thread's).  What shows a
        long thread a page at a time (the console) reads only that page; this default reads
        the whole thread, which a saver that can read fewer rows overrides."""
        checkpoints = list(self.list(thread_id))
        if before is not None:
            ids = [checkpoint.checkpoint_id for checkpoint in checkpoints]
            checkpoints = checkpoints[ids.index(before) + 1 :] if before in ids else []
        return checkpoints[: max(limit, 0)]

    @abc.abstractmethod
    def put_writes(
        self,
        thread_id: str,
        checkpoint_id: str,
        task_id: str,
        node: str,
        update: Mapping[str, Any],
        kind: WriteKind = WriteKind.UPDATE,
    ) -> bool:
        """Record one task's update (or, with another ``kind``, a mark) for the step starting at
        ``checkpoint_id``; the kind is stored with it and read back.

        Returns ``True`` if stored, ``False`` if a write for that task is already there (the
        first write wins and is never replaced).
        """

    @abc.abstractmethod
    def get_writes(self, thread_id: str, checkpoint_id: str) -> Sequence[PendingWrite]:
        """The pending writes recorded for the step starting at ``checkpoint_id``."""

    def get_with_writes(self, thread_id: str, checkpoint_id: str | None = None) -> CheckpointView:
        """The checkpoint (latest, or the one named), its writes by task id, and the writes of
        its parent whose task ids start with ``__`` (markers).  Savers may do it in one trip."""
        checkpoint = self.get(thread_id, checkpoint_id)
        if checkpoint is None:
            return CheckpointView(None)
        writes = {w.task_id: w for w in self.get_writes(thread_id, checkpoint.checkpoint_id)}
        parent: dict[str, PendingWrite] = {}
        if checkpoint.parent_id is not None:
            parent = {
                w.task_id: w
                for w in self.get_writes(thread_id, checkpoint.parent_id)
                if w.kind is not WriteKind.UPDATE
            }
        return CheckpointView(checkpoint, writes, parent, self._has_step(checkpoint))

    def _shared_page(
        self, thread_id: str, limit: int, before: str | None = None
    ) -> Sequence[Checkpoint]:
        """:meth:`list_page` for a reader that only shows what it reads (the console): a saver
        may return the values it holds without a copy; the caller must never change them.  By
        default, a copy."""
        return self.list_page(thread_id, limit, before)

    def _shared_view(self, thread_id: str, checkpoint_id: str) -> CheckpointView:
        """:meth:`get_with_writes` for a worker's node task: a saver may return the values it
        holds (its cache of reconstructed states) without a copy, so a step costs nothing in
        the size of the state.  The caller must never change them: the node gets them through
        ``CopyOnRead`` and the run loop merges into new containers.  By default, a copy."""
        return self.get_with_writes(thread_id, checkpoint_id)

    def _has_step(self, checkpoint: Checkpoint) -> bool:
        """Whether ``checkpoint``'s run has a checkpoint at the next step (``False`` if unknown)."""
        return False

    @abc.abstractmethod
    def release(self, thread_id: str) -> Sequence[Checkpoint]:
        """Delete the thread's checkpoints and writes (and whatever else the saver keeps of
        it), and its child threads (as :meth:`delete_thread`); return the thread's checkpoints
        deleted, newest first."""

    # -- retention -----------------------------------------------------------------------------

    @_checking_thread_id
    def delete_thread(self, thread_id: str) -> int:
        """Delete everything the saver keeps of the thread and of its child threads (those
        of its compiled subgraphs' child runs, ``"<thread>/<node>"``): their checkpoints (and
        what :meth:`prune` left of pruned ones), their writes, and, for a saver that indexes
        runs, their timers and their runs' records.  Returns how many checkpoints were deleted
        (not counting pruned ones); 0 for an unknown thread.

        :meth:`release` deletes the same things but reads and returns every checkpoint (what
        ``CompileConfig(release_thread=True)`` hands back); this reads none.  Checkpoints stored
        while it runs may stay.  A run still running on the thread is not stopped: a step in
        flight stores its checkpoint when it finishes and the run goes on from there, writing
        the thread again; cancel the run and wait until it stops first (the beat reaper's
        ``checkpoint_ttl`` deletes completed threads only).  The default calls :meth:`release`;
        savers override it to skip the reading.
        """
        return len(self.release(thread_id))

    @_checking_thread_id
    def prune(self, thread_id: str, *, keep_last: int, dry_run: bool = False) -> PruneResult:
        """Remove the thread's checkpoints but the ``keep_last`` newest and what its runs still
        need: the latest checkpoint of every run that is not completed (running, parked,
        failed, cancelled) with its parent, and what a kept checkpoint is read from (see
        :mod:`langgraph_celery.checkpoint._retention`).  A removed checkpoint loses its state
        and its writes; its ids stay taken (no late writer can store that step again).

        Safe while the thread's run is running: what its step reads is kept, and a checkpoint
        stored meanwhile is never removed, nor what it is read from (a fork of an old
        checkpoint stored as a delta of it: the result keeps those, ``Keep.NEEDED``).
        ``get_state``, history, resume and forks of what is kept work as before; the oldest
        kept checkpoint's parent may be gone.  With ``dry_run`` nothing is removed.  Returns
        what was kept (and why) and what was removed, newest first.  ``ValueError`` if
        ``keep_last`` is below 1, or ``thread_id`` is not a non-empty string of at most 255
        characters (as for :meth:`delete_thread` and :meth:`release`).

        The thread's child threads (``"<thread>/<node>"``) are pruned with it, each keeping
        what its own runs need (a parked child run, which the parked parent resumes); the
        result tells of the thread's own checkpoints.

        Run records stay: the run index still lists a run whose checkpoints were all pruned
        (``thread_of_run`` no longer finds it); :meth:`delete_thread` removes them.
        """
        check_keep_last(keep_last)
        stored = self.stored_refs(thread_id)
        unfinished = unfinished_runs(self, thread_id, stored, self._recorded_completed(thread_id))
        kept, deleted = plan_prune(stored, keep_last, unfinished)
        if deleted and not dry_run:
            removal = self._remove_pruned(thread_id, stored, kept, deleted)
            kept, deleted = settle(stored, kept, deleted, removal)
        for child in self._children_of(thread_id):  # each keeps what its own runs need
            child_stored = self.stored_refs(child)
            recorded = self._recorded_completed(child)
            child_unfinished = unfinished_runs(self, child, child_stored, recorded)
            child_stored = needing_run_inputs(child_stored, child_unfinished)
            child_kept, removed = plan_prune(child_stored, keep_last, child_unfinished)
            if removed and not dry_run:
                self._remove_pruned(child, child_stored, child_kept, removed)
        return PruneResult(thread_id, tuple(kept), tuple(deleted), dry_run)

    def _remove_pruned(
        self,
        thread_id: str,
        stored: Sequence[StoredRef],
        kept: Sequence[Any],
        deleted: Sequence[str],
    ) -> Removal:
        """Remove ``deleted``, first storing whole each kept delta whose parent goes."""
        gone = set(deleted)
        kept_ids = {k.checkpoint_id for k in kept}
        rewrite = [
            ref.checkpoint_id
            for ref in stored
            if ref.checkpoint_id in kept_ids and not ref.whole and ref.parent_id in gone
        ]
        if rewrite:
            self.make_whole(thread_id, rewrite)
        return self._remove_unneeded(thread_id, deleted)

    def _remove_unneeded(self, thread_id: str, checkpoint_ids: Sequence[str]) -> Removal:
        """:meth:`remove_checkpoints`, saying what it removed and what it left because a delta
        stored after prune's plan is read from it.  By default: what is no longer stored,
        unless it removed them all; savers that know override it."""
        ids = list(dict.fromkeys(checkpoint_ids))
        if self.remove_checkpoints(thread_id, ids) >= len(ids):
            return Removal(frozenset(ids))
        stored = self.stored_refs(thread_id)
        live = {ref.checkpoint_id for ref in stored}
        left = [checkpoint_id for checkpoint_id in ids if checkpoint_id in live]
        readers = read_through(stored, left)
        return Removal(
            frozenset(ids) - live,
            {checkpoint_id: readers.get(checkpoint_id) for checkpoint_id in left},
        )

    def _children_of(self, thread_id: str) -> Sequence[str]:
        """The thread's child threads (``"<thread>/..."``: see ``_retention``), which
        :meth:`delete_thread`, :meth:`release` and :meth:`prune` treat with it; a saver that
        does not say has none."""
        return ()

    def stored_refs(self, thread_id: str) -> Sequence[StoredRef]:
        """For :meth:`prune`: the thread's checkpoints (not those pruned) as ids, newest first,
        without reading their state; a checkpoint stored relative to others (a delta) names
        them in :attr:`StoredRef.needs <langgraph_celery.checkpoint._retention.StoredRef.needs>`
        and prune keeps them with it.  Savers implement it to support pruning."""
        raise NotImplementedError(cannot_prune(self, "stored_refs"))

    def remove_checkpoints(self, thread_id: str, checkpoint_ids: Sequence[str]) -> int:
        """For :meth:`prune`: drop the state and the writes of the thread's checkpoints
        ``checkpoint_ids`` (in one transaction where the store has them), keeping their ids,
        runs and steps taken: ``get`` and ``list`` no longer return them, ``put`` refuses them
        again.  Returns how many were removed (ids unknown or already removed are skipped, and
        so are those a delta not removed is read from: a checkpoint stored meanwhile).
        Savers implement it to support pruning."""
        raise NotImplementedError(cannot_prune(self, "remove_checkpoints"))

    def make_whole(self, thread_id: str, checkpoint_ids: Sequence[str]) -> None:
        """For :meth:`prune`: store the thread's checkpoints ``checkpoint_ids``, stored as deltas
        of their parents (:attr:`StoredRef.whole` false), whole, so that their parents can be
        removed.  Savers that report deltas in :meth:`stored_refs` implement it."""
        raise NotImplementedError(cannot_prune(self, "make_whole"))

    def _recorded_completed(self, thread_id: str) -> frozenset[str]:
        """The thread's runs the saver's run index records as completed (:meth:`prune` does not
        read their checkpoints); none by default."""
        return frozenset()

    # -- the run index's methods: placeholders, for callers typed with this class --------------
    # A saver that runs graphs on Celery also implements RunIndex (checkpoint/index.py), where
    # these are documented; CeleryExecutor checks at compile that a saver does.  These raise.

    @placeholder
    def delete_write(self, thread_id: str, checkpoint_id: str, task_id: str, node: str) -> bool:
        """:meth:`RunIndex.delete_write <langgraph_celery.checkpoint.RunIndex.delete_write>`."""
        raise NotImplementedError(not_indexed(self, "delete_write"))

    @placeholder
    def set_timer(
        self, thread_id: str, run_id: str, graph_id: str, kind: str, due_at: datetime
    ) -> None:
        """:meth:`RunIndex.set_timer <langgraph_celery.checkpoint.RunIndex.set_timer>`."""
        raise NotImplementedError(not_indexed(self, "set_timer"))

    @placeholder
    def clear_timer(self, thread_id: str, run_id: str, due_at: datetime | None = None) -> None:
        """:meth:`RunIndex.clear_timer <langgraph_celery.checkpoint.RunIndex.clear_timer>`."""
        raise NotImplementedError(not_indexed(self, "clear_timer"))

    def put_with_timer(
        self, checkpoint: Checkpoint, timer: Timer | None, run: RunRecord | None = None
    ) -> Checkpoint:
        """:meth:`RunIndex.put_with_timer <langgraph_celery.checkpoint.RunIndex.put_with_timer>`:
        by default :func:`put_with_timer_in_turn`."""
        return put_with_timer_in_turn(self, checkpoint, timer, run)

    @placeholder
    def due_timers(self, now: datetime, limit: int = 100) -> Sequence[Timer]:
        """:meth:`RunIndex.due_timers <langgraph_celery.checkpoint.RunIndex.due_timers>`."""
        raise NotImplementedError(not_indexed(self, "due_timers"))

    @placeholder
    def thread_of_run(self, run_id: str) -> str | None:
        """:meth:`RunIndex.thread_of_run <langgraph_celery.checkpoint.RunIndex.thread_of_run>`."""
        raise NotImplementedError(not_indexed(self, "thread_of_run"))


class PagedReads:
    """``list_page`` and ``_shared_page`` of a saver that reads a page itself: both are its
    ``_page``, with or without a copy of the values."""

    def _page(
        self, thread_id: str, limit: int, before: str | None, copy: bool
    ) -> Sequence[Checkpoint]:
        raise NotImplementedError

    def list_page(
        self, thread_id: str, limit: int, before: str | None = None
    ) -> Sequence[Checkpoint]:
        return self._page(thread_id, limit, before, copy=True)

    def _shared_page(
        self, thread_id: str, limit: int, before: str | None = None
    ) -> Sequence[Checkpoint]:
        return self._page(thread_id, limit, before, copy=False)
