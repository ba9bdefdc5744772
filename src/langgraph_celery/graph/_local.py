"""The in-process executor: runs each superstep's tasks concurrently on this event loop (async
nodes) or in threads (plain nodes), and drives the run through :class:`Engine`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint, CheckpointKind, PendingTask
from langgraph_celery.errors import GraphError, GraphRecursionError, NodeError
from langgraph_celery.graph import _algo
from langgraph_celery.graph._engine import Engine
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import (
    GraphInput,
    GraphInterrupt,
    InterruptionMetadata,
    NodeOutput,
)

__all__ = ["Outcome", "run_local"]


@dataclass
class Outcome:
    """Filled in when the run stops: the stream's final value."""

    value: Any = None
    done: bool = False


async def _run_tasks(
    engine: Engine, checkpoint: Checkpoint, tasks: list[PendingTask], config: RunnableConfig
) -> list[Any]:
    runner = engine.runner
    if len(tasks) == 1:
        try:
            return [await runner.run_task(tasks[0], checkpoint.values, config)]
        except BaseException as error:
            if not isinstance(error, Exception):
                raise
            return [error]
    coroutines = [runner.run_task(task, checkpoint.values, config, threaded=True) for task in tasks]
    return list(await asyncio.gather(*coroutines, return_exceptions=True))


def _keep_writes(
    engine: Engine, checkpoint: Checkpoint, tasks: Sequence[PendingTask], writes: Mapping[str, Any]
) -> None:
    """Store the writes of ``tasks`` as pending writes of ``checkpoint`` (first write wins)."""
    if engine.saver is None:
        return
    for task in tasks:
        if task.id in writes:
            engine.saver.put_writes(
                checkpoint.thread_id,
                checkpoint.checkpoint_id,
                task.id,
                task.node,
                writes[task.id] or {},
            )


async def _execute_step(
    engine: Engine, checkpoint: Checkpoint, config: RunnableConfig
) -> dict[str, Any] | InterruptionMetadata:
    """Run a step's tasks; the writes by task id, or the interruption a node raised.

    A failed or interrupted step keeps the writes of the tasks that succeeded as pending writes
    of its checkpoint, so a resume runs only what is left.
    """
    saver = engine.saver
    writes: dict[str, Any] = {}
    if saver is not None and checkpoint.kind in (CheckpointKind.RESUME, CheckpointKind.FORK):
        for write in saver.get_writes(checkpoint.thread_id, checkpoint.checkpoint_id):
            writes[write.task_id] = write.update
    todo = [task for task in checkpoint.tasks if task.id not in writes]
    results = await _run_tasks(engine, checkpoint, todo, config)
    failure: tuple[PendingTask, BaseException] | None = None
    for task, result in zip(todo, results, strict=True):
        if isinstance(result, BaseException):
            if failure is None or (
                isinstance(result, GraphInterrupt) and not isinstance(failure[1], GraphInterrupt)
            ):
                failure = (task, result)
        else:
            writes[task.id] = result
    if failure is None:
        return writes
    _keep_writes(engine, checkpoint, todo, writes)
    task, error = failure
    if isinstance(error, GraphInterrupt):
        return InterruptionMetadata(
            task.node, engine.state(checkpoint.values), error.reason or None, error.metadata
        )
    if isinstance(error, GraphError):
        raise error
    raise NodeError(task.node, type(error).__name__, str(error)) from error


async def run_local(
    engine: Engine, graph_input: GraphInput, config: RunnableConfig, outcome: Outcome
) -> AsyncIterator[NodeOutput]:
    """Run (or resume) one invocation in this process, yielding outputs as steps finish."""
    checkpoint, start = await engine.begin(graph_input, config)
    config = config._for_runtime(graph_id=engine.graph_id, run_id=checkpoint.run_id)
    if start is not None:
        yield start
    limit = config.recursion_limit or engine.config.recursion_limit
    steps = 0
    while True:
        if checkpoint.extra.get(_algo.EDGES_PENDING):
            checkpoint = await engine.pending_edges(checkpoint, config)
            continue
        if not checkpoint.tasks:
            end, outcome.value = engine.complete(checkpoint, config)
            outcome.done = True
            yield end
            return
        interruption = await engine.interruption_before(checkpoint, config)
        if interruption is not None:
            outcome.value, outcome.done = interruption, True
            return
        if steps >= limit:
            raise GraphRecursionError(
                f"the run reached its recursion limit of {limit} supersteps without completing "
                f"(next: {', '.join(checkpoint.next)}); raise recursion_limit in RunnableConfig "
                "or CompileConfig if the graph really needs more"
            )
        steps += 1
        executed = await _execute_step(engine, checkpoint, config)
        if isinstance(executed, InterruptionMetadata):
            outcome.value, outcome.done = executed, True
            return
        try:
            result = await engine.finish(checkpoint, executed, config)
        except GraphError:
            # Every node ran, the step failed as a whole (conflicting writes, a route): keep the
            # updates, as the Celery workers do, so that a resume merges them again.
            _keep_writes(engine, checkpoint, checkpoint.tasks, executed)
            raise
        for output in result.outputs:
            yield output
        checkpoint = result.checkpoint
        if result.interruption is not None:
            outcome.value, outcome.done = result.interruption, True
            return
