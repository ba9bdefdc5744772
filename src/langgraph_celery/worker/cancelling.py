"""Cancelling a run on Celery, from the checkpoint store alone.

A cancel is a mark on the run's latest checkpoint: the next node task that starts from it sees
the mark and stops, a step that finishes meanwhile stores its checkpoint, which is marked too,
and a parked run stays where it is, cancelled.  Nothing needs the graph: the run handle
(:meth:`CelerySource.cancel`) and ``langgraph-celery cancel RUN_ID --db URL`` (a process that
has only the store) both call :func:`cancel_run`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from langgraph_celery.checkpoint.index import RunIndex, RunStatus
from langgraph_celery.graph import _loop, _marks
from langgraph_celery.graph._loop import Status
from langgraph_celery.graph._marks import Mark, StepMarks
from langgraph_celery.graph.types import END
from langgraph_celery.worker._store_calls import store

if TYPE_CHECKING:
    from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint

__all__ = ["cancel_run", "latest_of_run", "run_in_history", "stored_status"]

#: ``wake(thread_id, final)``: tells the thread's followers and waiters to read the store again.
Wake = Callable[[str, bool], None]
#: ``record(checkpoint, status)``: the run index learns the run's new status.
Record = Callable[["Checkpoint", RunStatus], None]


#: How many checkpoints a search down a thread's history reads at a time.
HISTORY_PAGE = 32


def latest_of_run(saver: BaseCheckpointSaver, thread_id: str, run_id: str) -> Checkpoint | None:
    """The latest checkpoint of run ``run_id`` of the thread: usually the thread's latest; else
    found down the thread's history, read a page at a time (``None`` when the thread holds none
    of the run's: deleted, or pruned away)."""
    latest = saver.get(thread_id)
    if latest is not None and latest.run_id != run_id:
        return run_in_history(saver, thread_id, run_id, latest.checkpoint_id)
    return latest


def run_in_history(
    saver: BaseCheckpointSaver, thread_id: str, run_id: str, before: str | None = None
) -> Checkpoint | None:
    """The newest checkpoint of run ``run_id`` stored before checkpoint ``before`` (the newest
    of all without), reading the thread's history a page at a time, not all of it at once."""
    while True:
        page = saver.list_page(thread_id, HISTORY_PAGE, before)
        found = next((checkpoint for checkpoint in page if checkpoint.run_id == run_id), None)
        if found is not None or len(page) < HISTORY_PAGE:
            return found
        before = page[-1].checkpoint_id


def stored_status(saver: BaseCheckpointSaver, checkpoint: Checkpoint | None) -> Status:
    """Where the run at ``checkpoint`` stands, by the run loop's rule on its stored marks."""
    if checkpoint is None:
        return Status(RunStatus.COMPLETED, None)
    thread_id, checkpoint_id = checkpoint.thread_id, checkpoint.checkpoint_id
    view = store(lambda: saver.get_with_writes(thread_id, checkpoint_id))
    return _loop.status_of(view.checkpoint, StepMarks.of_view(view))


def _mark(saver: BaseCheckpointSaver, checkpoint: Checkpoint, wake: Wake | None) -> bool:
    stored = saver.put_writes(
        checkpoint.thread_id,
        checkpoint.checkpoint_id,
        Mark.CANCEL,
        END,
        {},
        _marks.MARK_KINDS[Mark.CANCEL],
    )
    if wake is not None:
        wake(checkpoint.thread_id, True)  # a cancel stops the run: its waiters too
    return stored


def _record_in_index(saver: BaseCheckpointSaver) -> Record | None:
    """Without the graph: the run's record, as the index has it, now cancelled."""
    if not isinstance(saver, RunIndex):
        return None
    index = saver

    def record(checkpoint: Checkpoint, status: RunStatus) -> None:
        known = index.get_run(checkpoint.run_id)
        if known is not None:
            node = _loop.run_node(status, known.node, checkpoint)
            index.upsert_run(dataclasses.replace(known, status=status, node=node))

    return record


def cancel_run(
    saver: BaseCheckpointSaver,
    thread_id: str,
    run_id: str,
    *,
    wake: Wake | None = None,
    record: Record | None = None,
    then: Callable[[Checkpoint], None] | None = None,
) -> bool:
    """Stop run ``run_id`` at its current step, or cancel it where it is parked; True if this
    call cancelled it (False when it had failed, completed or been cancelled, or reached END
    while being cancelled: it stays completed).  A cancelled run is resumable.

    Nodes already running finish, but no further step is dispatched.  ``record`` updates the
    run index (by default the run's record is copied with the new status); ``then`` is called
    with the last checkpoint marked (to cancel what the run started there: its child runs).
    """
    status = stored_status(saver, store(latest_of_run, saver, thread_id, run_id))
    if status.status not in (RunStatus.RUNNING, RunStatus.PARKED) or status.checkpoint is None:
        return False
    marked = status.checkpoint
    cancelled = store(_mark, saver, marked, wake)
    # A step that was finishing may have stored the next checkpoint meanwhile: mark it too
    # (never one where the run completed).
    for _ in range(3):
        newest = store(latest_of_run, saver, thread_id, run_id)
        if newest is None or newest.checkpoint_id == marked.checkpoint_id:
            break
        if not _marks.has_pending(newest):
            return False
        store(_mark, saver, newest, wake)
        marked = newest
    store(saver.clear_timer, marked.thread_id, marked.run_id)
    took_effect = cancelled and stored_status(saver, marked).status is RunStatus.CANCELLED
    record = record if record is not None else _record_in_index(saver)
    if took_effect and record is not None:
        store(record, marked, RunStatus.CANCELLED)
    if then is not None:
        then(marked)
    return took_effect
