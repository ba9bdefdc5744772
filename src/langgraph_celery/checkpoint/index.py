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
  run id alone.

``CeleryExecutor`` checks at compile that its saver implements this
(:func:`missing_for_celery`), and names what is missing.  ``langgraph_celery.testing`` has
the conformance tests of both halves.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    Timer,
    is_placeholder,
    put_with_timer_in_turn,
)

__all__ = ["CELERY_NEEDS", "RunIndex", "missing_for_celery"]

#: The run-index methods the Celery executor calls.
CELERY_NEEDS: tuple[str, ...] = (
    "delete_write",
    "set_timer",
    "clear_timer",
    "put_with_timer",
    "due_timers",
    "thread_of_run",
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

    def put_with_timer(self, checkpoint: Checkpoint, timer: Timer | None) -> Checkpoint:
        """Store ``checkpoint`` and, with it, set the thread's timer to ``timer`` or (with
        ``None``) remove the thread's timer of ``checkpoint.run_id``: both, or neither when the
        checkpoint is refused (the thread keeps the timer it had).  A run's first and last
        checkpoints are stored this way.

        The default makes the calls in turn
        (:func:`~langgraph_celery.checkpoint.base.put_with_timer_in_turn`); override it to do
        both at once, as ``SqlSaver`` does.
        """
        if not isinstance(self, BaseCheckpointSaver):
            raise TypeError(
                f"{type(self).__name__}.put_with_timer: the default stores the checkpoint with "
                "put(), so the saver must also be a BaseCheckpointSaver; or override it"
            )
        return put_with_timer_in_turn(self, checkpoint, timer)

    @abc.abstractmethod
    def due_timers(self, now: datetime, limit: int = 100) -> Sequence[Timer]:
        """Timers due at ``now`` or earlier, earliest first, at most ``limit``."""

    @abc.abstractmethod
    def thread_of_run(self, run_id: str) -> str | None:
        """The thread a run belongs to (``None`` if no checkpoint of it is stored)."""


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
