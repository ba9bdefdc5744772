"""What ends a run from outside its nodes' own outcomes, on a worker: a node task revoked (from
Flower or ``app.control.revoke``), a node past its hard time limit (its process killed by the
worker), a node whose process dies on every delivery.  Each leaves the run cancelled or failed,
recorded like any other end, and resumable; none leaves it running for ever.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from langgraph_celery.checkpoint.base import Checkpoint, PendingTask, WriteKind
from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.errors import NodeError
from langgraph_celery.graph._marks import Failure, Mark, StepMarks
from langgraph_celery.graph.types import END
from langgraph_celery.worker.carried import stored_view
from langgraph_celery.worker.envelope import TaskEnvelope

if TYPE_CHECKING:
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = ["cancel_revoked", "count_delivery", "fail_past_hard_limit"]

log = logging.getLogger("langgraph_celery.worker")


def cancel_revoked(runtime: GraphRuntime, envelope: TaskEnvelope) -> None:
    """The node of ``envelope``'s task was revoked: cancel the run at that step (unless
    the step was done or the run stopped meanwhile); it stays resumable."""
    view = stored_view(runtime, envelope)
    checkpoint = view.checkpoint
    if checkpoint is None:
        return
    marks = StepMarks.of_view(view)
    if marks.stopped or marks.step_committed or (envelope.task_id or "") in marks.updates:
        return
    runtime.record(checkpoint, RunStatus.CANCELLED, envelope.node)
    runtime.mark(checkpoint, Mark.CANCEL, envelope.node or END, {"revoked": True})
    runtime.saver.clear_timer(checkpoint.thread_id, checkpoint.run_id)
    log.warning(
        "node %r of thread %r: its task was revoked, run %s cancelled",
        envelope.node,
        envelope.thread_id,
        checkpoint.run_id,
    )


def fail_past_hard_limit(runtime: GraphRuntime, envelope: TaskEnvelope) -> None:
    """The node of ``envelope``'s task ran past its hard time limit and its process was
    killed: the run fails (unless the step was done or stopped meanwhile)."""
    view = stored_view(runtime, envelope)
    checkpoint = view.checkpoint
    node = envelope.node or "?"
    if checkpoint is None or node not in checkpoint.next:
        return
    marks = StepMarks.of_view(view)
    if marks.stopped or marks.step_committed or (envelope.task_id or "") in marks.updates:
        return
    timeout = runtime.timeouts.get(node) or 0
    failure = Failure(
        node,
        "TimeoutError",
        f"node {node!r} ran past its hard time limit (its timeout of {timeout:g} s raised "
        "TimeoutError in it and it went on): its worker process was killed",
    )
    runtime.mark_failed(checkpoint, failure)
    log.error("node %r of thread %r: %s", node, envelope.thread_id, failure.message)


def count_delivery(
    runtime: GraphRuntime, checkpoint: Checkpoint, task: PendingTask, marks: StepMarks
) -> None:
    """Record one more delivery of ``task``'s message after its worker process died; past
    ``max_deliveries`` the run fails instead of running the node again (a node that kills
    its process every time would otherwise come back in a tight loop)."""
    first = marks.deliveries.get(Mark.delivery_key(task.id), 1) + 1
    number = next(
        (
            n
            for n in range(first, first + 8)
            if runtime.saver.put_writes(
                checkpoint.thread_id,
                checkpoint.checkpoint_id,
                Mark.delivery(task.id, n),
                task.node,
                {"at": datetime.now(UTC).isoformat()},
                WriteKind.DELIVERY,
            )
        ),
        first + 8,
    )
    limit = runtime.executor.max_deliveries
    if number <= limit:
        log.warning(
            "node %r of thread %r: delivery %d of %d (its worker process died)",
            task.node,
            checkpoint.thread_id,
            number,
            limit,
        )
        return
    failure = Failure(
        task.node,
        "WorkerLostError",
        f"the worker process running node {task.node!r} died on each of its {number - 1} "
        "deliveries (killed, exited, or past its hard time limit); the run failed rather "
        "than run the node again: fix the cause and resume it",
    )
    runtime.mark_failed(checkpoint, failure)
    raise NodeError(failure.node_id, failure.error_type, failure.message)
