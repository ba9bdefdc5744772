"""The body of the resume task, which clients of earlier versions send: a client now carries out
a resume's first decision itself (``worker/client.py``).  Only the checkpoint a client's resume
stored is dispatched from here.  A function of a
:class:`~langgraph_celery.worker.runtime.GraphRuntime`, whose ``resume`` is this module's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import CheckpointKind
from langgraph_celery.graph import _loop
from langgraph_celery.graph._marks import StepMarks
from langgraph_celery.graph._sync import run_sync
from langgraph_celery.worker.envelope import TaskEnvelope
from langgraph_celery.worker.results import TaskResult, TaskStatus

if TYPE_CHECKING:
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = ["resume"]

log = logging.getLogger("langgraph_celery.worker")


def resume(runtime: GraphRuntime, envelope: TaskEnvelope) -> dict[str, Any]:
    """The body of the resume task (sent by clients of earlier versions: a client now carries
    out a resume's first decision itself): carry out the resumed checkpoint's next decision."""
    view = runtime.saver.get_with_writes(envelope.thread_id, envelope.checkpoint_id)
    checkpoint = view.checkpoint
    if checkpoint is None:
        log.error(
            "rejected resume: thread %r has no checkpoint %s",
            envelope.thread_id,
            envelope.checkpoint_id,
        )
        return TaskResult(TaskStatus.REJECTED).to_data()
    marks = StepMarks.of_view(view)
    foreign = _loop.foreign_graph(checkpoint, runtime.engine.owner)
    if (
        checkpoint.kind is not CheckpointKind.RESUME
        or marks.stopped
        or marks.step_committed
        or foreign is not None
    ):
        # Only the checkpoint a client's resume stored is dispatched from here: a message
        # naming a parked, failed or cancelled checkpoint, or a step of a run, never moves it.
        log.error(
            "rejected resume: checkpoint %s of thread %r is not a pending resume of graph "
            "%r (kind %r%s)",
            envelope.checkpoint_id,
            envelope.thread_id,
            runtime.graph_id,
            checkpoint.kind.value,
            ", stopped" if marks.stopped else (", another graph's" if foreign else ""),
        )
        return TaskResult(TaskStatus.REJECTED).to_data()
    decision = run_sync(runtime.advance(checkpoint))
    if decision.error is not None:
        raise decision.error
    return TaskResult(TaskStatus.DISPATCHED, checkpoint_id=checkpoint.checkpoint_id).to_data()
