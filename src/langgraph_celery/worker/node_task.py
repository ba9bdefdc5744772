"""The body of a node task: read the step (from the store, or carried in the result backend),
run the node unless its update is in, record the update, and carry out what the run loop decides
for the step (:meth:`~langgraph_celery.worker.runtime.GraphRuntime.commit` stores the next
checkpoint).  Functions of a :class:`~langgraph_celery.worker.runtime.GraphRuntime`, whose
``run_node`` is this module's.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from celery.exceptions import SoftTimeLimitExceeded

from langgraph_celery._clone import clone_value
from langgraph_celery.checkpoint.base import Checkpoint, CheckpointKind, PendingTask, PendingWrite
from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.errors import GraphError, NodeError, SerializationError
from langgraph_celery.graph import _loop
from langgraph_celery.graph._loop import Action
from langgraph_celery.graph._marks import Failure, Mark, StepMarks
from langgraph_celery.graph._subgraph import parking_of
from langgraph_celery.graph._sync import run_sync
from langgraph_celery.graph.retry import delay_after
from langgraph_celery.graph.types import END, GraphInterrupt
from langgraph_celery.worker import carried as carried_steps
from langgraph_celery.worker import endings, subgraphs
from langgraph_celery.worker.carry import Carried
from langgraph_celery.worker.envelope import TaskEnvelope
from langgraph_celery.worker.results import TaskResult, TaskStatus
from langgraph_celery.worker.streaming import output_sink

if TYPE_CHECKING:
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = ["run_node"]

log = logging.getLogger("langgraph_celery.worker")


def run_node(
    runtime: GraphRuntime,
    envelope: TaskEnvelope,
    retries: int,
    retry: Any,
    redelivered: bool = False,
    carried: bool = False,
    soft_limit: float | None = None,
) -> dict[str, Any]:
    """The body of a node task; ``retry(countdown, exc)`` asks Celery to retry it;
    ``redelivered``: the broker delivers the message again (its worker process died);
    ``carried``: the step's checkpoint is carried in the result backend (durability exit
    or async); ``soft_limit``: the soft time limit Celery applies to the task (the node's
    timeout, or the app's ``task_soft_time_limit``), named when it raises in the node.

    One read (the checkpoint, its writes, its parent's marks) and, for a step of one task,
    one compare-and-set write: the update goes straight into the next checkpoint.  A step of
    several tasks records each update as a pending write first.  A node that fails for good
    raises (after its failure is recorded), so Celery records the task as failed.
    """
    held: Carried | None = None
    if carried:
        view, held = carried_steps.carried_view(runtime, envelope, redelivered)
    else:
        # the saver's cached values, uncopied: the node reads them through CopyOnRead and
        # nothing here changes them (a step costs what it changes, not the state's size)
        view = runtime.saver._shared_view(envelope.thread_id, envelope.checkpoint_id)
    checkpoint = view.checkpoint
    if checkpoint is None:
        log.warning(
            "dropping task %s of thread %r: checkpoint %s no longer exists",
            envelope.node,
            envelope.thread_id,
            envelope.checkpoint_id,
        )
        return TaskResult(TaskStatus.STALE, envelope.node).to_data()
    task = next((t for t in checkpoint.tasks if t.id == envelope.task_id), None)
    foreign = _loop.foreign_graph(checkpoint, runtime.engine.owner)
    if (
        task is None
        or task.node != envelope.node
        or foreign is not None
        or not _loop.dispatchable(checkpoint)
    ):
        log.error(
            "rejected message: checkpoint %s of thread %r has no task %r for node %r of "
            "graph %r to run (kind %r)",
            envelope.checkpoint_id,
            envelope.thread_id,
            envelope.task_id,
            envelope.node,
            runtime.graph_id,
            checkpoint.kind.value,
        )
        return TaskResult(TaskStatus.REJECTED, envelope.node).to_data()
    marks = StepMarks.of_view(view)
    if (
        marks.parent_cancelled
        and not marks.cancelled
        and checkpoint.kind in (CheckpointKind.LOOP, CheckpointKind.EDGES)
    ):
        # cancelled while the previous step was finishing: the run stops here
        runtime.record(checkpoint, RunStatus.CANCELLED)
        runtime.mark(checkpoint, Mark.CANCEL, END, {})
        return TaskResult(TaskStatus.CANCELLED, task.node).to_data()
    if marks.step_committed:
        return TaskResult(TaskStatus.DUPLICATE, task.node).to_data()  # a redelivery
    if marks.cancelled or (marks.stopped and len(checkpoint.tasks) == 1):
        return TaskResult(TaskStatus.STOPPED, task.node).to_data()
    if _stopped_the_step(marks, checkpoint, task):
        # this node parked or failed the step: it has its outcome, and runs again only when a
        # resume asks (a copy of its message must not record an update the resume would keep)
        return TaskResult(TaskStatus.STOPPED, task.node).to_data()
    if redelivered and task.id not in marks.updates:
        endings.count_delivery(runtime, checkpoint, task, marks)
    # A sibling failed or was interrupted: this node still runs and records its update, as
    # every node of a step does in process, so that a resume finds the same writes.
    parent_marks = view.parent_markers.values()
    result = run_sync(
        _run_task(
            runtime,
            checkpoint,
            task,
            marks,
            parent_marks,
            retries,
            retry,
            held,
            carried,
            soft_limit,
        )
    )
    return result.to_data()


def _stopped_the_step(marks: StepMarks, checkpoint: Checkpoint, task: PendingTask) -> bool:
    """Whether ``task``'s node is the one that parked or failed its step (and the step's only
    task of that node, so the mark, which names the node, names this task)."""
    if task.id in marks.updates:
        return False
    stopped_by = marks.parking.node_id if marks.parking is not None else None
    if stopped_by is None and marks.failure is not None:
        stopped_by = marks.failure.node_id
    if stopped_by != task.node:
        return False
    return sum(1 for other in checkpoint.tasks if other.node == task.node) == 1


def _timed_out(
    runtime: GraphRuntime, node: str, error: Exception, soft_limit: float | None
) -> Exception:
    """Celery's soft time limit as the ``TimeoutError`` the node's timeout promises; a node
    without one can still meet the app's own (``task_soft_time_limit``): it is named then."""
    if not isinstance(error, SoftTimeLimitExceeded):
        return error
    timeout = runtime.timeouts.get(node)
    if timeout is not None:
        return TimeoutError(f"node {node!r} did not finish within its timeout of {timeout:g} s")
    within = f" of {soft_limit:g} s" if soft_limit is not None else ""
    return TimeoutError(
        f"node {node!r} did not finish within Celery's soft time limit{within} (the app's "
        "task_soft_time_limit; the node has no timeout of its own)"
    )


async def _run_task(
    runtime: GraphRuntime,
    checkpoint: Checkpoint,
    task: PendingTask,
    marks: StepMarks,
    parent_marks: Iterable[PendingWrite],
    retries: int,
    retry: Any,
    carried: Carried | None = None,
    unpublished: bool = False,
    soft_limit: float | None = None,
) -> TaskResult:
    """Run the node (unless its update is in), record the update, and carry out what the
    run loop decides for the step: one pass on the event loop for the whole task.  A
    ``carried`` checkpoint is stored before the run parks or fails there; ``unpublished``:
    the task's message ignores its result (a carried step's), which wakes no follower;
    ``soft_limit``: Celery's soft time limit on the task (see :func:`run_node`)."""
    saver = runtime.saver
    config = runtime.config_of(checkpoint)
    notifier = runtime.executor.notifier
    if notifier.can_publish():  # what the node streams goes to the run's outputs channel
        root = subgraphs.stream_root(checkpoint)
        sink = output_sink(
            notifier,
            runtime.serializer,
            checkpoint,
            task,
            (runtime.graph_id, root) if root is not None else None,
        )
        config = config._for_runtime(sink=sink)
    if task.node in runtime.children and task.id not in marks.updates:
        # a compiled subgraph: its child run's nodes are tasks of their own
        try:
            return await subgraphs.start_child(runtime, checkpoint, task)
        except (ValueError, GraphError) as refused:
            # (the child run cannot start: an id past 255 characters, an input its reducers
            # refuse; the same every time, so the run fails rather than being sent again)
            runtime.mark_failed(checkpoint, Failure.of_error(task.node, refused))
            if isinstance(refused, GraphError):
                raise
            raise NodeError(task.node, type(refused).__name__, str(refused)) from refused
    if task.id not in marks.updates:
        try:
            # (the saver's values are shared: a node that opted out of CopyOnRead gets a copy)
            values = checkpoint.values if config.clone_state else clone_value(checkpoint.values)
            update = await runtime.engine.runner.run_task(task, values, config)
        except GraphInterrupt as interrupt:
            parking = parking_of(task.node, interrupt)
            if carried is not None:
                stored = carried_steps.materialize(runtime, carried)
                if stored is None:
                    return TaskResult(TaskStatus.MERGED_ELSEWHERE, task.node)
                checkpoint = stored
            runtime.mark_parked(checkpoint, parking)
            return TaskResult(TaskStatus.INTERRUPTED, task.node)
        except Exception as raised:
            error = _timed_out(runtime, task.node, raised, soft_limit)
            policy = runtime.policies.get(task.node)
            if policy is not None and not isinstance(error, GraphError):
                delay = delay_after(policy, error, retries + 1)
                if delay is not None:
                    retry(delay, error)
            if carried is not None:
                checkpoint = carried_steps.materialize(runtime, carried) or checkpoint
            runtime.mark_failed(checkpoint, Failure.of_error(task.node, error))
            if isinstance(error, GraphError):
                raise
            raise NodeError(task.node, type(error).__name__, str(error)) from raised
        if len(checkpoint.tasks) == 1:
            marks = dataclasses.replace(marks, updates={task.id: update or {}})
        else:
            try:
                saver.put_writes(
                    checkpoint.thread_id,
                    checkpoint.checkpoint_id,
                    task.id,
                    task.node,
                    update or {},
                )
            except SerializationError as error:  # the store refuses the update: it fails
                runtime.mark_failed(checkpoint, Failure.of_error(task.node, error))
                raise
            writes = saver.get_writes(checkpoint.thread_id, checkpoint.checkpoint_id)
            marks = StepMarks.of(writes, parent_marks)
    decision = _loop.decide_step(checkpoint.tasks, marks)
    if decision.action is Action.WAIT:
        return TaskResult(TaskStatus.WRITTEN, task.node)
    if decision.action is not Action.COMMIT:
        return TaskResult(TaskStatus.STOPPED, task.node)
    # The task's result, stored once this returns, wakes the run's followers when the
    # backend publishes it; else (or the task ignores its result: ``unpublished``, a carried
    # step's) the worker publishes a wake-up for the step.
    announce = unpublished or not runtime.executor.notifier.steps_published_by_backend
    return await runtime._commit(checkpoint, marks.updates, config, announce, carried)
