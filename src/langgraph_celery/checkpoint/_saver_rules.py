"""What :class:`~langgraph_celery.checkpoint.base.BaseCheckpointSaver` asks of every saver
beside its own methods: the run index's placeholders (methods a saver that does not index runs
lacks), the checks of a timer or run record stored with a checkpoint, the messages of what a
saver cannot do, and :func:`put_with_timer_in_turn`, the default of ``put_with_timer``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph_celery.checkpoint._records import Checkpoint, Timer

if TYPE_CHECKING:
    from langgraph_celery.checkpoint.base import BaseCheckpointSaver
    from langgraph_celery.checkpoint.index import RunRecord

__all__ = [
    "cannot_prune",
    "check_run_of",
    "check_timer_thread",
    "is_placeholder",
    "not_indexed",
    "placeholder",
    "put_with_timer_in_turn",
    "root_conflict_message",
]

_F = TypeVar("_F", bound=Callable[..., Any])
_PLACEHOLDERS: list[Callable[..., Any]] = []


def placeholder(method: _F) -> _F:
    """Mark ``method`` of the base saver as a run index placeholder (see :func:`is_placeholder`)."""
    _PLACEHOLDERS.append(method)
    return method


def put_with_timer_in_turn(
    saver: BaseCheckpointSaver,
    checkpoint: Checkpoint,
    timer: Timer | None,
    run: RunRecord | None = None,
) -> Checkpoint:
    """``saver.put(checkpoint)`` and the timer change, as calls in turn (not atomic): the timer
    first when setting it (a run is never stored unwatched; if the checkpoint is refused, the
    timer just set is removed, and with it the thread's earlier one), the checkpoint first when
    removing it.  ``run``, the run's record, goes before both (whoever sees the checkpoint finds
    the record; a refused checkpoint leaves it stored).  The default of ``put_with_timer``;
    savers override it to do them at once."""
    if run is not None:
        check_run_of(checkpoint, run)
        upsert = getattr(saver, "upsert_run", None)
        if upsert is None:
            raise NotImplementedError(not_indexed(saver, "upsert_run"))
        upsert(run)
    if timer is None:
        stored = saver.put(checkpoint)
        saver.clear_timer(checkpoint.thread_id, checkpoint.run_id)
        return stored
    check_timer_thread(checkpoint, timer)
    saver.set_timer(timer.thread_id, timer.run_id, timer.graph_id, timer.kind, timer.due_at)
    try:
        return saver.put(checkpoint)
    except BaseException:
        saver.clear_timer(timer.thread_id, timer.run_id, timer.due_at)
        raise


def is_placeholder(attribute: object) -> bool:
    """Whether ``attribute`` (a method looked up on a class) is one of
    :class:`BaseCheckpointSaver`'s run-index placeholders, i.e. not implemented."""
    return any(attribute is placeholder for placeholder in _PLACEHOLDERS)


def not_indexed(saver: BaseCheckpointSaver, method: str) -> str:
    return (
        f"{type(saver).__name__} does not index runs (it has no {method}): a saver that runs "
        "graphs on Celery implements langgraph_celery.checkpoint.RunIndex, as MemorySaver and "
        "SqlSaver do"
    )


def cannot_prune(saver: BaseCheckpointSaver, method: str) -> str:
    return (
        f"{type(saver).__name__} cannot prune checkpoints (it has no {method}): implement "
        "stored_refs and remove_checkpoints, as MemorySaver and SqlSaver do, or delete whole "
        "threads with delete_thread"
    )


def check_timer_thread(checkpoint: Checkpoint, timer: Timer) -> None:
    if timer.thread_id != checkpoint.thread_id:
        raise ValueError(
            f"a timer stored with a checkpoint must be its thread's: timer of thread "
            f"{timer.thread_id!r}, checkpoint of thread {checkpoint.thread_id!r}"
        )


def check_run_of(checkpoint: Checkpoint, run: RunRecord) -> None:
    if (run.run_id, run.thread_id) != (checkpoint.run_id, checkpoint.thread_id):
        raise ValueError(
            f"a run record stored with a checkpoint must be its run's: record of run "
            f"{run.run_id!r} on thread {run.thread_id!r}, checkpoint of run "
            f"{checkpoint.run_id!r} on thread {checkpoint.thread_id!r}"
        )


def root_conflict_message(checkpoint: Checkpoint) -> str:
    return (
        f"thread {checkpoint.thread_id!r} already has a first checkpoint: another run started "
        f"on this new thread at the same time (storing run {checkpoint.run_id!r}); wait for it "
        "or start again"
    )
