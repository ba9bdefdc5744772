"""Which of a thread's checkpoints :meth:`BaseCheckpointSaver.prune
<langgraph_celery.checkpoint.BaseCheckpointSaver.prune>` keeps, decided in one place.

``prune(thread_id, keep_last=N)`` keeps the thread's ``N`` newest checkpoints and, whatever
their age, what a run or a reader still needs:

* **the latest checkpoint of every run that is not completed** (running, parked, failed or
  cancelled: each of them can still move on, or be resumed), read from the store as the run
  loop reads it (:func:`~langgraph_celery.graph._loop.status_of` on the checkpoint and its
  marks), and that checkpoint's **parent**: a step's status reads its parent's marks (a cancel
  left there), as every node task of a running step does (``get_with_writes``);
* **what a kept checkpoint is read from** (:attr:`StoredRef.needs`), and what those are read
  from in turn, for a saver that names them there.  ``MemorySaver`` and ``SqlSaver`` name
  none: a kept checkpoint stored as a delta (:attr:`StoredRef.whole` false) whose parent is
  removed is first stored whole again (:meth:`~langgraph_celery.checkpoint.BaseCheckpointSaver.
  make_whole`), so pruning frees the chain before it.

The plan is made from what was stored when prune read it; a run may store checkpoints
meanwhile, among them a fork or ``update_state`` of an old checkpoint the plan removes, stored
as a delta of it.  So a saver's removal leaves out, in the same transaction as it removes, every
checkpoint that a delta not removed is read from (:func:`read_through`), and a saver's ``put``
of a delta stores it whole instead when its parent is removed meanwhile.  What prune returns
tells what it removed, and keeps such a checkpoint (``Keep.NEEDED``, read by that delta:
:class:`Removal`, :func:`settle`).

A kept checkpoint keeps its pending writes (a step's updates and the run's marks); a pruned one
loses them.  The oldest kept checkpoint's parent may be gone: its snapshot still names it as
``parent_config``, and reading that one finds nothing.

A pruned checkpoint leaves a row without its state behind (a *tombstone*): its id, run and step
stay taken, so a late writer (a node task delivered again long after its step was done, a
worker that lost a commit race) is refused as it would have been, and cannot store an old step
again on top of the thread.  ``delete_thread`` removes the thread's tombstones with the rest.
The space a pruned state took is reused by the database (a SQLite file shrinks only with
``VACUUM``).

A thread's **child threads** (``"<thread>/<task>"``: those of its compiled subgraphs' child
runs, and theirs) go with it: ``delete_thread`` and ``release`` remove them too, found by the
prefix ``"<thread>/"`` (:func:`child_prefix`, :func:`is_child_of`; a thread ``"a"`` never
removes ``"ab/x"``).  ``prune`` of a thread prunes its child threads with the same
``keep_last``: each child thread keeps what its own runs need (a parked child run's latest
checkpoint, which the parked parent's resume continues from) and the first checkpoint of each
child run that is not completed (its input, which the resume compares the parent's state with:
:func:`needing_run_inputs`).

Deciding is a pure function (:func:`plan_prune`) of the thread's checkpoints as ids
(:class:`StoredRef`, no state read) and of the runs found not completed
(:func:`unfinished_runs`, which reads only the runs it must: the thread's latest run, and any
other one the run index does not record as completed).
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (base.py and index.py import this module)
    from langgraph_celery.checkpoint.base import BaseCheckpointSaver
    from langgraph_celery.checkpoint.index import RunStatus

__all__ = [
    "CHILD_ESCAPE",
    "Keep",
    "Kept",
    "PruneResult",
    "Removal",
    "StoredRef",
    "check_keep_last",
    "child_prefix",
    "is_child_of",
    "needing_run_inputs",
    "plan_prune",
    "read_through",
    "run_heads",
    "settle",
    "unfinished_runs",
]


@dataclass(frozen=True)
class StoredRef:
    """A stored checkpoint as pruning sees it: its ids, not its state."""

    checkpoint_id: str
    run_id: str
    parent_id: str | None = None
    #: The checkpoints this one is read from (a delta's base), kept as long as it is.
    needs: tuple[str, ...] = ()
    #: False for a checkpoint stored as a delta of its parent: if its parent is removed, prune
    #: has the saver store it whole first (``make_whole``).
    whole: bool = True


class Keep(enum.StrEnum):
    """Why ``prune`` kept a checkpoint."""

    #: one of the thread's ``keep_last`` newest checkpoints
    LAST = "last"
    #: the latest checkpoint of a run that is not completed (``Kept.detail``: its status)
    RUN = "run"
    #: the parent of a checkpoint kept for its run, whose status reads the parent's marks
    #: (``Kept.detail``: that checkpoint's id)
    PARENT = "parent"
    #: a kept checkpoint is read from it (``Kept.detail``: that checkpoint's id)
    NEEDED = "needed"


@dataclass(frozen=True)
class Kept:
    """A checkpoint ``prune`` kept, and why."""

    checkpoint_id: str
    reason: Keep
    detail: str | None = None

    def to_data(self) -> dict[str, str | None]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "reason": self.reason.value,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class PruneResult:
    """What :meth:`~langgraph_celery.checkpoint.BaseCheckpointSaver.prune` kept and removed of a
    thread, newest first (with ``dry_run``, what it would have removed: nothing was).
    ``deleted`` names only what this prune removed."""

    thread_id: str
    kept: tuple[Kept, ...] = ()
    deleted: tuple[str, ...] = ()
    dry_run: bool = False

    @property
    def held(self) -> tuple[Kept, ...]:
        """The checkpoints kept beyond the newest ``keep_last``, for a run or a reader."""
        return tuple(kept for kept in self.kept if kept.reason is not Keep.LAST)

    def to_data(self) -> dict[str, object]:
        return {
            "thread_id": self.thread_id,
            "dry_run": self.dry_run,
            "kept": [kept.to_data() for kept in self.kept],
            "deleted": list(self.deleted),
        }


@dataclass(frozen=True)
class Removal:
    """What a saver's removal of the checkpoints a prune planned to remove did: those it
    removed, and those it left because a delta not removed (stored after the plan) is read
    from them, each with that delta's id (``None``: the saver does not say)."""

    removed: frozenset[str] = frozenset()
    left: Mapping[str, str | None] = field(default_factory=dict)


#: The escape character of :func:`child_prefix`'s LIKE pattern.
CHILD_ESCAPE = "\\"


def child_prefix(thread_id: str) -> str:
    """The SQL ``LIKE`` pattern (escaped with :data:`CHILD_ESCAPE`) of ``thread_id``'s child
    threads: ``"<thread>/"`` then anything; ``%`` and ``_`` in the thread id match only
    themselves."""
    escaped = "".join(CHILD_ESCAPE + c if c in "%_" + CHILD_ESCAPE else c for c in thread_id)
    return f"{escaped}/%"


def is_child_of(candidate: str, thread_id: str) -> bool:
    """Whether thread ``candidate`` is a child thread of ``thread_id`` (at any depth)."""
    return candidate.startswith(f"{thread_id}/")


def needing_run_inputs(
    stored: Sequence[StoredRef], unfinished: Mapping[str, RunStatus]
) -> list[StoredRef]:
    """``stored`` (a child thread's, newest first) with the head of each run in
    ``unfinished`` also needing its run's first checkpoint (the child run's input)."""
    first: dict[str, str] = {}
    for ref in stored:
        first[ref.run_id] = ref.checkpoint_id  # (the last seen is the oldest)
    return [
        replace(ref, needs=(*ref.needs, first[ref.run_id]))
        if ref.checkpoint_id in unfinished and first[ref.run_id] != ref.checkpoint_id
        else ref
        for ref in stored
    ]


def check_keep_last(keep_last: int) -> None:
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise ValueError(
            f"prune(keep_last={keep_last!r}): keep at least the latest checkpoint (an integer "
            "of 1 or more); to remove a whole thread use delete_thread(thread_id)"
        )


def run_heads(stored: Sequence[StoredRef]) -> dict[str, StoredRef]:
    """Each run's latest checkpoint by run id, from ``stored`` (newest first)."""
    heads: dict[str, StoredRef] = {}
    for ref in stored:
        heads.setdefault(ref.run_id, ref)
    return heads


def plan_prune(
    stored: Sequence[StoredRef], keep_last: int, unfinished: Mapping[str, RunStatus]
) -> tuple[list[Kept], list[str]]:
    """What to keep and what to remove of a thread's checkpoints ``stored`` (newest first),
    keeping the ``keep_last`` newest; ``unfinished`` maps the latest checkpoint of each run that
    is not completed to the run's status.  Both lists newest first."""
    check_keep_last(keep_last)
    by_id = {ref.checkpoint_id: ref for ref in stored}
    kept: dict[str, Kept] = {}
    for ref in stored[:keep_last]:
        kept[ref.checkpoint_id] = Kept(ref.checkpoint_id, Keep.LAST)
    for head_id, status in unfinished.items():
        head = by_id.get(head_id)
        if head is None:
            continue
        kept.setdefault(head_id, Kept(head_id, Keep.RUN, status.value))
        if head.parent_id in by_id:
            assert head.parent_id is not None
            kept.setdefault(head.parent_id, Kept(head.parent_id, Keep.PARENT, head_id))
    todo = list(kept)
    while todo:
        needer = todo.pop()
        for needed in by_id[needer].needs:
            if needed in by_id and needed not in kept:
                kept[needed] = Kept(needed, Keep.NEEDED, needer)
                todo.append(needed)
    ordered = [kept[ref.checkpoint_id] for ref in stored if ref.checkpoint_id in kept]
    deleted = [ref.checkpoint_id for ref in stored if ref.checkpoint_id not in kept]
    return ordered, deleted


def read_through(stored: Sequence[StoredRef], removing: Collection[str]) -> dict[str, str]:
    """Of ``removing``, the checkpoints a delta that stays (one of ``stored``, the thread's
    checkpoints not pruned, that is not in ``removing``) is read from: its parents back to the
    first one stored whole.  Each with the id of such a delta (the newest, for ``stored``
    newest first)."""
    by_id = {ref.checkpoint_id: ref for ref in stored}
    readers: dict[str, str] = {}  # each checkpoint read through, by the delta that reads it

    def parent_of(ref: StoredRef) -> StoredRef | None:
        return None if ref.parent_id is None else by_id.get(ref.parent_id)

    for ref in stored:
        if ref.whole or ref.checkpoint_id in removing:
            continue
        parent = parent_of(ref)
        while parent is not None and parent.checkpoint_id not in readers:
            readers[parent.checkpoint_id] = ref.checkpoint_id
            parent = None if parent.whole else parent_of(parent)
    return {
        checkpoint_id: readers[checkpoint_id]
        for checkpoint_id in removing
        if checkpoint_id in readers
    }


def settle(
    stored: Sequence[StoredRef], kept: Sequence[Kept], deleted: Sequence[str], removal: Removal
) -> tuple[list[Kept], list[str]]:
    """What a prune that planned ``kept`` and ``deleted`` of ``stored`` (newest first) kept and
    removed in the end: what ``removal`` left is kept (``Keep.NEEDED``, with the delta read
    from it), and only what it removed is removed.  Both newest first."""
    held = {k.checkpoint_id: k for k in kept}
    for checkpoint_id, reader in removal.left.items():
        held.setdefault(checkpoint_id, Kept(checkpoint_id, Keep.NEEDED, reader))
    ordered = [held[ref.checkpoint_id] for ref in stored if ref.checkpoint_id in held]
    return ordered, [checkpoint_id for checkpoint_id in deleted if checkpoint_id in removal.removed]


def unfinished_runs(
    saver: BaseCheckpointSaver,
    thread_id: str,
    stored: Sequence[StoredRef],
    completed: frozenset[str] = frozenset(),
) -> dict[str, RunStatus]:
    """The latest checkpoint of each of the thread's runs that is not completed, with the run's
    status, as the run loop reads it from the store.  Runs in ``completed`` (recorded so by the
    run index) are not read, except the thread's latest run: the index records a completion just
    before the last checkpoint is stored, and a run that ended may be continued only from the
    thread's latest checkpoint."""
    # The run loop's rule, imported when used: the run loop imports this package.
    from langgraph_celery.graph._loop import RunStatus, status_of
    from langgraph_celery.graph._marks import StepMarks

    found: dict[str, RunStatus] = {}
    latest_run = stored[0].run_id if stored else None
    for run_id, head in run_heads(stored).items():
        if run_id in completed and run_id != latest_run:
            continue
        view = saver.get_with_writes(thread_id, head.checkpoint_id)
        if view.checkpoint is None:  # (pruned by someone else meanwhile)
            continue
        status = status_of(view.checkpoint, StepMarks.of_view(view)).status
        if status is not RunStatus.COMPLETED:
            found[head.checkpoint_id] = status
    return found
