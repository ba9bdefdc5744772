"""Compiled subgraphs on Celery: a subgraph node's task starts (or resumes) a child run and
returns; the child's nodes are tasks of their own; the child's end commits the parent's step.

- **Registration.** The executor registers each compiled subgraph of a graph it attaches as a
  graph of its own (:func:`register_children`): under the child's ``graph_id``, or
  ``"<parent graph_id>/<node>"`` when it has none, with its saver or the parent's.
- **Start.** The subgraph node's task (:func:`start_child`) stores the child run's first
  checkpoint on the child thread ``"<parent thread>/<task id>"`` with a reference to the parent's
  step (``Extra.PARENT``: graph, thread, run, checkpoint, task, node path) and sends the child's
  first tasks; no worker waits for the child.  A redelivered or re-dispatched task finds the
  child run of its step already there (the reference names the same checkpoint) and does
  nothing, or, if that child run completed, commits the parent's step again (idempotent); two
  deliveries racing store one first checkpoint (the store refuses the second).
- **End.** When the child completes (:func:`child_completed`), the changes it made to the state
  the node was given become the node's update, recorded as the parent step's pending write
  (first write wins) and committed as a finishing node task does (compare-and-set).  A child
  that parks parks its parent at the inner node; one that fails fails it (:func:`child_parked`,
  :func:`child_failed`), unless the parent's ``RetryPolicy`` of the node retries the
  :class:`NodeError` it would raise in process (see **Retry**).
- **Cancel.** Cancelling the parent's run cancels the child runs of its step
  (:func:`cancel_children`); a child that ends anyway records the node's update on the
  cancelled step without committing it, for the resume.
- **Resume.** Resuming the parent dispatches the subgraph node's task again: the child run of
  the parent's run that has something pending is resumed, with the updates the parent's thread
  went through since (``graph/_subgraph_state.py``'s ``parent_updates``, as in process).
- **Retry.** In process a ``RetryPolicy`` of the subgraph node (its wrap hook) calls the node
  again when the child run fails, and the node resumes the child's failed step.  Here the
  child's failure (:func:`child_failed`) sends the subgraph node's task again after the
  policy's delay instead of failing the parent, while the policy retries the error
  (``graph/retry.py``'s ``delay_after``; the attempt counts in the child's reference to the
  parent's step, ``"attempt"``); that task (:func:`start_child`) finds the child of its step
  failed and, the policy deciding again from the store, resumes it or fails the parent.  A
  task sent twice resumes it once (the store refuses the second resume's checkpoint).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import Checkpoint, PendingTask
from langgraph_celery.errors import CheckpointConflictError
from langgraph_celery.graph import _loop, _marks
from langgraph_celery.graph._loop import Action
from langgraph_celery.graph._marks import Extra, Failure, Parking, StepMarks
from langgraph_celery.graph._subgraph import child_thread, outer_parking
from langgraph_celery.graph._subgraph_state import (
    changes,
    child_input,
    parent_updates,
    resumes,
    started_with,
)
from langgraph_celery.graph.retry import delay_after
from langgraph_celery.worker.results import TaskResult, TaskStatus

log = logging.getLogger("langgraph_celery.worker")

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph
    from langgraph_celery.worker.executor import CeleryExecutor
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = [
    "cancel_children",
    "child_completed",
    "child_failed",
    "child_parked",
    "parent_of",
    "register_children",
    "shown_parent",
    "start_child",
    "stream_root",
]


def register_children(executor: CeleryExecutor, runtime: GraphRuntime) -> None:
    """Register the compiled subgraphs of ``runtime``'s graph (and theirs) with ``executor``."""
    from langgraph_celery.graph.compiled import CompiledGraph

    parent = runtime.compiled
    for node, child in parent.spec.subgraphs.items():
        assert isinstance(child, CompiledGraph)
        graph_id = child.config.graph_id or f"{runtime.graph_id}/{node}"
        known = executor.runtime(graph_id)
        if known is not None and known.compiled.spec is child.spec:
            runtime.children[node] = known
            continue
        config = dataclasses.replace(
            child.config,
            graph_id=graph_id,
            checkpoint_saver=child.config.checkpoint_saver or parent.config.checkpoint_saver,
            executor=None,
        )
        view: CompiledGraph = CompiledGraph(child.spec, config)
        runtime.children[node] = executor.register(view)


def parent_of(checkpoint: Checkpoint) -> Mapping[str, Any] | None:
    """The reference to the parent's step a child run's checkpoint carries (on Celery)."""
    ref = checkpoint.extra.get(Extra.PARENT) if checkpoint.extra else None
    return ref if isinstance(ref, Mapping) and "checkpoint_id" in ref else None


def shown_parent(checkpoint: Checkpoint) -> str | None:
    """For the tasks of a child run's step, what Flower shows of the parent with their
    arguments: the parent's thread and the subgraph's path (``/``-joined node path, the root
    graph's id first when it has one); ``None`` for a root run's."""
    ref = parent_of(checkpoint)
    if ref is None:
        return None
    path = "/".join(str(part) for part in ref.get("path", ()))
    return f" parent_thread={ref.get('thread_id')} subgraph={path}"


def stream_root(checkpoint: Checkpoint) -> Mapping[str, Any] | None:
    """For a child run's checkpoint, the root run's step its outputs are streamed under (run,
    checkpoint, step, task: see ``worker/streaming.py``); ``None`` for a root run's."""
    ref = parent_of(checkpoint)
    root = ref.get("stream") if ref is not None else None
    return root if isinstance(root, Mapping) else None


def _stream_root(checkpoint: Checkpoint, task: PendingTask) -> dict[str, Any]:
    """The root run's step a child that ``task`` of ``checkpoint`` starts streams under."""
    root = stream_root(checkpoint)
    if root is not None:
        return dict(root)
    return {
        "run_id": checkpoint.run_id,
        "checkpoint_id": checkpoint.checkpoint_id,
        "step": checkpoint.step,
        "task_id": task.id,
    }


def _node_path(runtime: GraphRuntime, checkpoint: Checkpoint, task: PendingTask) -> list[str]:
    ref = parent_of(checkpoint)
    if ref is not None:
        return [*ref.get("path", ()), task.node]
    owner = runtime.engine.owner
    return [owner, task.node] if owner else [task.node]


#: The key of a child run's reference to its parent's step that counts the child's attempts at
#: that step (a :class:`RetryPolicy`'s; absent: the first).
ATTEMPT = "attempt"


def _attempt(ref: Mapping[str, Any]) -> int:
    attempt = ref.get(ATTEMPT, 1)
    return attempt if type(attempt) is int and attempt > 0 else 1


def _retry_delay(
    parent: GraphRuntime, node: str, ref: Mapping[str, Any], failure: Failure
) -> float | None:
    """The delay before the parent's subgraph node ``node`` retries the child run that failed
    with ``failure`` (its reference to the parent's step: ``ref``); ``None``: it does not."""
    policy = parent.policies.get(node)
    if policy is None:
        return None
    return delay_after(policy, failure.as_error(), _attempt(ref))


async def start_child(
    runtime: GraphRuntime, checkpoint: Checkpoint, task: PendingTask
) -> TaskResult:
    """The task of subgraph node ``task`` of ``checkpoint``'s step: start or resume its child
    run (once), and return without waiting for it; a child of this step that failed is
    resumed while the node's ``RetryPolicy`` retries it (else the parent fails)."""
    child = runtime.children[task.node]
    thread = child_thread(checkpoint.thread_id, task.id)
    view = child.saver.get_with_writes(thread)
    latest = view.checkpoint
    ref = parent_of(latest) if latest is not None else None
    attempt = 1
    if latest is not None and ref is not None and ref["checkpoint_id"] == checkpoint.checkpoint_id:
        # the child run of this very step exists (a redelivery, the reaper's re-dispatch, a
        # retry sent by child_failed)
        if not _marks.has_pending(latest):
            await child_completed(child, latest)
            return TaskResult(TaskStatus.DUPLICATE, task.node)
        failure = StepMarks.of_view(view).failure
        if failure is None:  # (running, parked, or cancelled)
            return TaskResult(TaskStatus.DUPLICATE, task.node)
        if _retry_delay(runtime, task.node, ref, failure) is None:
            runtime.mark_failed(checkpoint, failure)  # (as child_failed did, or would have)
            return TaskResult(TaskStatus.STOPPED, task.node)
        attempt = _attempt(ref) + 1  # the retry: the child's failed step runs again
    config = runtime.config_of(checkpoint)
    # the parent's before-call hooks of the node: their changes reach the child's input (and,
    # through the child's changes, the node's update)
    given = task.arg if task.has_arg else checkpoint.values
    values = await runtime.engine.runner.before_node(task.node, given, config)
    reference: dict[str, Any] = {
        "run_id": checkpoint.run_id,
        "graph_id": runtime.graph_id,
        "thread_id": checkpoint.thread_id,
        "checkpoint_id": checkpoint.checkpoint_id,
        "task_id": task.id,
        "path": _node_path(runtime, checkpoint, task),
        "stream": _stream_root(checkpoint, task),
    }
    if attempt > 1:
        reference[ATTEMPT] = attempt
    extra: dict[str, Any] = {Extra.PARENT: reference}
    if Extra.RUN_CONFIG in checkpoint.extra:  # the caller's limits and metadata
        extra[Extra.RUN_CONFIG] = checkpoint.extra[Extra.RUN_CONFIG]
    config = config.with_changes(thread_id=thread)
    engine = child.engine
    started = updates = None
    if resumes(latest, checkpoint.run_id):
        assert latest is not None and ref is not None
        started = started_with(child.saver.list(thread), latest)
        saver, parent_thread = runtime.saver, checkpoint.thread_id
        since = ref.get("checkpoint_id")
        updates = parent_updates(checkpoint, since, lambda id_: saver.get(parent_thread, id_))
    graph_input, base = child_input(engine.spec.schema, latest, started, values, updates)
    try:
        first, _ = await engine.begin_from(
            base, graph_input, config, extra=extra, store=child.store_first, fresh=True
        )
    except CheckpointConflictError:
        return TaskResult(TaskStatus.DUPLICATE, task.node)  # another delivery started it
    decision = await child.advance(first, announce=True)
    if decision.error is not None and decision.action is not Action.FAIL:
        raise decision.error
    return TaskResult(TaskStatus.CHILD_STARTED, task.node, checkpoint_id=first.checkpoint_id)


def _parent(child: GraphRuntime, ref: Mapping[str, Any]) -> GraphRuntime | None:
    return child.executor.runtime(str(ref.get("graph_id")))


async def child_completed(child: GraphRuntime, final: Checkpoint) -> None:
    """The child run ended at ``final``: record the node's update on the parent's step and
    commit the step if it was the last write (each at most once)."""
    ref = parent_of(final)
    parent = _parent(child, ref) if ref is not None else None
    if ref is None or parent is None:
        return
    saver = parent.saver
    view = saver.get_with_writes(str(ref["thread_id"]), str(ref["checkpoint_id"]))
    checkpoint = view.checkpoint
    tasks = checkpoint.tasks if checkpoint is not None else ()
    task = next((t for t in tasks if t.id == ref["task_id"]), None)
    if checkpoint is None or task is None:
        return  # (the parent's thread was released or moved on)
    before = task.arg if task.has_arg else checkpoint.values
    config = parent.config_of(checkpoint)
    update = changes(parent.engine.spec.schema, before, final.values)
    # the parent's after-call hooks of the node see (and may change) the child's changes
    update = await parent.engine.runner.after_node(task.node, before, config, update) or {}
    saver.put_writes(checkpoint.thread_id, checkpoint.checkpoint_id, task.id, task.node, update)
    marks = StepMarks.of(
        saver.get_writes(checkpoint.thread_id, checkpoint.checkpoint_id),
        view.parent_markers.values(),
        view.step_committed,
    )
    if marks.step_committed or marks.cancelled or marks.stopped:
        return
    if _loop.decide_step(checkpoint.tasks, marks).action is Action.COMMIT:
        await parent._commit(checkpoint, marks.updates, config, True)


def _parent_step(
    child: GraphRuntime, checkpoint: Checkpoint
) -> tuple[GraphRuntime, Checkpoint, Mapping[str, Any]] | None:
    ref = parent_of(checkpoint)
    parent = _parent(child, ref) if ref is not None else None
    if ref is None or parent is None:
        return None
    stored = parent.saver.get(str(ref["thread_id"]), str(ref["checkpoint_id"]))
    return (parent, stored, ref) if stored is not None else None


def child_parked(child: GraphRuntime, checkpoint: Checkpoint, parking: Parking) -> None:
    """The child run parked at ``checkpoint``: park its parent at the inner node."""
    found = _parent_step(child, checkpoint)
    if found is None:
        return
    parent, stored, ref = found
    node = str(ref.get("path", [""])[-1]) if ref.get("path") else parking.node_id
    parent.mark_parked(stored, outer_parking(node, parking, checkpoint.values))


def child_failed(child: GraphRuntime, checkpoint: Checkpoint, failure: Failure) -> None:
    """The child run failed at ``checkpoint``: its parent fails with the same failure, unless
    the parent's ``RetryPolicy`` of the subgraph node retries it: then the node's task is sent
    again after the policy's delay (it resumes the child: :func:`start_child`)."""
    found = _parent_step(child, checkpoint)
    if found is None:
        return
    parent, stored, ref = found
    task = next((t for t in stored.tasks if t.id == ref.get("task_id")), None)
    delay = _retry_delay(parent, task.node, ref, failure) if task is not None else None
    if task is None or delay is None:
        parent.mark_failed(stored, failure)
        return
    log.info(
        "subgraph node %r of thread %r: its child run failed (%s at node %r); retrying it in "
        "%.2f s (attempt %d)",
        task.node,
        stored.thread_id,
        failure.error_type,
        failure.node_id,
        delay,
        _attempt(ref) + 1,
    )
    envelope = parent.envelope(stored, task)
    parent.executor._send_node(envelope, task, parent=shown_parent(stored), countdown=delay)


def cancel_children(runtime: GraphRuntime, checkpoint: Checkpoint) -> None:
    """Cancel the child runs that the subgraph nodes of ``checkpoint``'s step started (their
    parent's run was cancelled there), and theirs."""
    from langgraph_celery.worker.client import CelerySource

    for task in checkpoint.tasks:
        child = runtime.children.get(task.node)
        if child is None:
            continue
        thread = child_thread(checkpoint.thread_id, task.id)
        latest = child.saver.get(thread)
        ref = parent_of(latest) if latest is not None else None
        if latest is None or ref is None or ref.get("run_id") != checkpoint.run_id:
            continue
        if _marks.has_pending(latest):
            CelerySource(child).cancel(thread, latest.run_id)
