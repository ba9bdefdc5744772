"""What indexes runs, beside storing checkpoints: :class:`RunIndex`.

A :class:`~langgraph_celery.checkpoint.BaseCheckpointSaver` stores checkpoints and pending
writes, which is all the in-process executor needs.  Running graphs on Celery also needs an index
of runs, which a saver provides by implementing :class:`RunIndex` as well (``MemorySaver`` and
``SqlSaver`` do)::

    class MySaver(BaseCheckpointSaver, RunIndex): ...

* **claims**: a client takes a thread by storing a pending write under a claim task id and
  releases it with :meth:`RunIndex.delete_write`, a compare-and-delete;
* **timers**: one per thread with an active or parked run, which the beat reaper reads with
  :meth:`RunIndex.due_timers` (:meth:`~RunIndex.set_timer`, :meth:`~RunIndex.clear_timer`,
  :meth:`~RunIndex.put_with_timer`);
* **the run lookup**: :meth:`RunIndex.thread_of_run`, so a ``RunHandle`` can be rebuilt from a
  run id alone;
* **run records**: one :class:`RunRecord` per run (its thread, graph, :class:`RunStatus`,
  current or pending node, times), kept by :meth:`RunIndex.upsert_run` and listed by graph and
  status, newest first, a page at a time (:meth:`RunIndex.list_runs`);
* **completed threads**: :meth:`RunIndex.completed_runs` finds the threads whose last run
  completed before a time, for the beat reaper's ``checkpoint_ttl`` pass, which sets aside
  (:meth:`RunIndex.supersede_run`) the records of threads it finds have gone on.

``CeleryExecutor`` checks at compile that its saver implements this
(:func:`missing_for_celery`), and names what is missing.  ``langgraph_celery.testing`` has
the conformance tests of both halves.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    Timer,
    is_placeholder,
    put_with_timer_in_turn,
)

__all__ = [
    "CELERY_NEEDS",
    "RunIndex",
    "RunRecord",
    "RunStatus",
    "check_page",
    "check_run_owner",
    "missing_for_celery",
    "run_order",
]

#: The run-index methods the Celery executor calls.
CELERY_NEEDS: tuple[str, ...] = (
    "delete_write",
    "set_timer",
    "clear_timer",
    "put_with_timer",
    "due_timers",
    "thread_of_run",
)


class RunStatus(enum.StrEnum):
    """Where a run is; every run ends ``PARKED``, ``FAILED``, ``COMPLETED`` or ``CANCELLED``."""

    #: a step is being run (or waits for a worker)
    RUNNING = "running"
    #: interrupted: nothing runs until a resume
    PARKED = "parked"
    #: a node failed for good; a resume runs the failed step again
    FAILED = "failed"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RunRecord:
    """One run, as the run index lists it.  ``node`` is the node running (``RUNNING``) or
    pending (``PARKED``, ``FAILED``), else ``None``.  ``created_at`` is kept from the run's first
    record; ``updated_at`` orders a run's records (a record older than the stored one is not
    applied)."""

    run_id: str
    thread_id: str
    graph_id: str
    status: RunStatus
    node: str | None = None
    created_at: datetime = field(default_factory=_utcnow)
    updated_at: datetime = field(default_factory=_utcnow)

    def __post_init__(self) -> None:
        if not isinstance(self.status, RunStatus):
            try:
                status = RunStatus(self.status)
            except ValueError:
                words = ", ".join(status.value for status in RunStatus)
                raise ValueError(
                    f"run {self.run_id!r}: {self.status!r} is not a run status; use one of "
                    f"{words} (RunStatus)"
                ) from None
            object.__setattr__(self, "status", status)


def run_order(record: RunRecord) -> tuple[datetime, str]:
    """The order :meth:`RunIndex.list_runs` lists runs in, newest first (descending)."""
    return (record.created_at, record.run_id)


def check_page(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"list_runs(limit={limit}): a page holds at least one run")


def check_run_owner(stored: RunRecord, record: RunRecord) -> None:
    """A run belongs to one thread of one graph: ``ValueError`` if ``record`` says otherwise."""
    if (stored.thread_id, stored.graph_id) != (record.thread_id, record.graph_id):
        raise ValueError(
            f"run {record.run_id!r} is of thread {stored.thread_id!r} of graph "
            f"{stored.graph_id!r}; a record for it names thread {record.thread_id!r} of graph "
            f"{record.graph_id!r}: a run id belongs to one thread, use a new one"
        )


class RunIndex(abc.ABC):
    """The index of runs a saver keeps for the Celery executor: claims, timers, run lookup.

    Implement it together with :class:`~langgraph_celery.checkpoint.BaseCheckpointSaver` (in
    either order of bases): ``BaseCheckpointSaver`` declares these methods too, as placeholders
    that raise, and a class deriving from ``RunIndex`` that leaves one of them a placeholder is
    refused when it is defined.  Implementations must be thread-safe and, for a saver shared by
    several processes, safe across processes.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        left = [name for name in CELERY_NEEDS if is_placeholder(getattr(cls, name, None))]
        if left:
            raise TypeError(
                f"{cls.__name__} derives from RunIndex but leaves {', '.join(left)} as "
                "BaseCheckpointSaver's placeholders: implement them (or do not derive from "
                "RunIndex)"
            )

    @abc.abstractmethod
    def delete_write(self, thread_id: str, checkpoint_id: str, task_id: str, node: str) -> bool:
        """Remove the write of ``task_id`` at ``checkpoint_id`` if it was recorded with ``node``
        (compare-and-delete: a write recorded by someone else since stays).  ``True`` if removed.
        Used to release a claim; the first write of a node's update is never removed."""

    @abc.abstractmethod
    def set_timer(
        self, thread_id: str, run_id: str, graph_id: str, kind: str, due_at: datetime
    ) -> None:
        """Create or replace the thread's timer (one per thread)."""

    @abc.abstractmethod
    def clear_timer(self, thread_id: str, run_id: str, due_at: datetime | None = None) -> None:
        """Remove the thread's timer if it belongs to ``run_id`` (a newer run's timer stays) and,
        with ``due_at``, only if it is still the timer read then (compare-and-delete: a timer
        re-armed meanwhile stays)."""

    def put_with_timer(
        self, checkpoint: Checkpoint, timer: Timer | None, run: RunRecord | None = None
    ) -> Checkpoint:
        """Store ``checkpoint`` and, with it, set the thread's timer to ``timer`` or (with
        ``None``) remove the thread's timer of ``checkpoint.run_id``: both, or neither when the
        checkpoint is refused (the thread keeps the timer it had).  A run's first and last
        checkpoints are stored this way.

        With ``run`` (the record of ``checkpoint``'s run, as :meth:`upsert_run` takes it), the
        run's record is stored too, in the same transaction: it is visible exactly when the
        checkpoint is, and not stored when the checkpoint is refused.  A stored record newer
        than ``run`` is kept (as :meth:`upsert_run` keeps it); ``ValueError`` if ``run`` is not
        of ``checkpoint``'s run and thread.

        The default makes the calls in turn
        (:func:`~langgraph_celery.checkpoint.base.put_with_timer_in_turn`: the record first);
        override it to do them at once, as ``SqlSaver`` and ``MemorySaver`` do.
        """
        if not isinstance(self, BaseCheckpointSaver):
            raise TypeError(
                f"{type(self).__name__}.put_with_timer: the default stores the checkpoint with "
                "put(), so the saver must also be a BaseCheckpointSaver; or override it"
            )
        return put_with_timer_in_turn(self, checkpoint, timer, run)

    @abc.abstractmethod
    def due_timers(self, now: datetime, limit: int = 100) -> Sequence[Timer]:
        """Timers due at ``now`` or earlier, earliest first, at most ``limit``."""

    @abc.abstractmethod
    def thread_of_run(self, run_id: str) -> str | None:
        """The thread a run belongs to (``None`` if no checkpoint of it is stored)."""

    # -- run records ------------------------------------------------------------------------

    @abc.abstractmethod
    def upsert_run(self, record: RunRecord) -> bool:
        """Store the run's record: create it, or update its ``status``, ``node`` and
        ``updated_at`` (``created_at`` stays the first record's).  ``False`` (nothing changed)
        if the stored record is newer (a later ``updated_at``): a late writer never undoes a
        newer status.  ``ValueError`` if the run is stored with another thread or graph.
        An update brings back a record :meth:`supersede_run` set aside.  Releasing the thread
        deletes its runs' records."""

    @abc.abstractmethod
    def get_run(self, run_id: str) -> RunRecord | None:
        """The run's record, ``None`` if there is none."""

    @abc.abstractmethod
    def list_runs(
        self,
        graph_id: str | None = None,
        status: RunStatus | None = None,
        *,
        limit: int = 50,
        before: RunRecord | None = None,
    ) -> Sequence[RunRecord]:
        """Runs of ``graph_id`` (every graph's if ``None``) with ``status`` (any if ``None``),
        newest first (by ``created_at``, then ``run_id``, descending), at most ``limit``.  The
        next page: ``before=`` the last record of this one (runs created meanwhile do not shift
        the pages)."""

    # -- completed threads (the reaper's checkpoint_ttl pass) --------------------------------

    def completed_runs(
        self, graph_id: str, before: datetime, *, limit: int = 100
    ) -> Sequence[RunRecord]:
        """Records of ``graph_id``'s completed runs last updated before ``before``, oldest
        first, at most ``limit``, leaving out the runs set aside: those whose thread has a run
        recorded after them (set aside on the way, as they can never again be their thread's
        last) and those :meth:`supersede_run` set aside.  The beat reaper's ``checkpoint_ttl``
        pass reads it every pass, so it must not cost more as records accumulate: each record
        is passed over once (``SqlSaver`` reads an index on ``(graph_id, status, superseded,
        updated_at)``).  Not abstract, so that savers written before it still load; without
        it, ``checkpoint_ttl`` cannot be used with the saver."""
        raise NotImplementedError(_no_ttl(self, "completed_runs"))

    def supersede_run(self, record: RunRecord) -> bool:
        """Leave ``record``'s run out of :meth:`completed_runs` until its record is next updated
        (compare-and-set on its ``updated_at``: a record updated meanwhile is not set aside).
        ``True`` if set aside."""
        raise NotImplementedError(_no_ttl(self, "supersede_run"))


def _no_ttl(index: RunIndex, method: str) -> str:
    return (
        f"{type(index).__name__} does not implement RunIndex.{method}, which the reaper's "
        "checkpoint_ttl pass needs to find completed threads: implement completed_runs and "
        "supersede_run (as MemorySaver and SqlSaver do), or leave checkpoint_ttl unset"
    )


def missing_for_celery(saver: object) -> tuple[str, ...]:
    """What ``saver`` lacks to run graphs on Celery: ``("RunIndex",)`` if it does not implement
    :class:`RunIndex`, followed by the methods the executor calls that it does not have (or has
    only as placeholders); ``()`` if nothing."""
    cls = type(saver)
    methods = tuple(
        name
        for name in CELERY_NEEDS
        if not callable(getattr(cls, name, None)) or is_placeholder(getattr(cls, name))
    )
    if isinstance(saver, RunIndex):
        return methods
    return ("RunIndex", *methods)
