"""One superstep in process, for :func:`~langgraph_celery.graph._local.run_local`: its tasks run
concurrently on this event loop (async nodes) or in threads (plain nodes), and what they report
is gathered into a :class:`Step` (updates, a parking, a failure); ``keep_writes`` stores the
updates of a step that stops, for the resume.  Used by :mod:`langgraph_celery.graph._local`
only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint, PendingTask
from langgraph_celery.errors import GraphError, NodeError
from langgraph_celery.graph import _loop, _sync
from langgraph_celery.graph._engine import Engine
from langgraph_celery.graph._marks import Failure, Parking, StepMarks
from langgraph_celery.graph._streaming import is_streamed
from langgraph_celery.graph._subgraph import SubgraphCancelled, parking_of
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import GraphInterrupt

__all__ = ["Step", "execute_step", "keep_writes", "raise_failure", "run_tasks"]


async def run_tasks(
    engine: Engine, checkpoint: Checkpoint, tasks: list[PendingTask], config: RunnableConfig
) -> list[Any]:
    """What each of ``tasks`` returned, or the exception it raised, in order."""
    runner = engine.runner
    if engine.spec.subgraphs:  # (a compiled subgraph's node finds the parent's step by it)
        config = config._for_runtime(step_id=checkpoint.checkpoint_id)
    if len(tasks) == 1:
        # a plain node runs inline on our own loop (plain invoke), in a thread on a caller's
        # loop, or when the run is streamed and the node may emit: what it emits then reaches
        # the caller while it runs
        task = tasks[0]
        threaded = not _sync.on_own_loop() or (is_streamed(config) and runner.may_emit(task.node))
        try:
            return [await runner.run_task(task, checkpoint.values, config, threaded=threaded)]
        except BaseException as error:
            if not isinstance(error, Exception):
                raise
            return [error]
    coroutines = [runner.run_task(task, checkpoint.values, config, threaded=True) for task in tasks]
    return list(await asyncio.gather(*coroutines, return_exceptions=True))


async def keep_writes(
    engine: Engine, checkpoint: Checkpoint, tasks: Sequence[PendingTask], writes: Mapping[str, Any]
) -> None:
    """Store the writes of ``tasks`` as pending writes of ``checkpoint`` (first write wins)."""
    if engine.saver is None:
        return
    for task in tasks:
        if task.id in writes:
            await engine.io(
                engine.saver.put_writes,
                checkpoint.thread_id,
                checkpoint.checkpoint_id,
                task.id,
                task.node,
                writes[task.id] or {},
            )


@dataclass
class Step:
    """A step's tasks as they reported: updates by task id, how it stopped, and the error that
    failed it (raised to the caller, with the original as its cause)."""

    marks: StepMarks
    ran: list[PendingTask]
    error: BaseException | None = None
    #: a compiled subgraph's child run was cancelled with this run: the step stops unfinished
    cancelled: bool = False


async def execute_step(engine: Engine, checkpoint: Checkpoint, config: RunnableConfig) -> Step:
    """Run the tasks of a step that have no update recorded (a resume carries the updates of
    the tasks that succeeded in the step it continues)."""
    saver = engine.saver
    writes: dict[str, Any] = {}
    if saver is not None and _loop.is_continued(checkpoint):
        stored = await engine.io(saver.get_writes, checkpoint.thread_id, checkpoint.checkpoint_id)
        for write in stored:
            writes[write.task_id] = write.update
    todo = [task for task in checkpoint.tasks if task.id not in writes]
    results = await run_tasks(engine, checkpoint, todo, config)
    parking: Parking | None = None
    failed: tuple[PendingTask, BaseException] | None = None
    cancelled = False
    for task, result in zip(todo, results, strict=True):
        if isinstance(result, GraphInterrupt):
            if parking is None:
                parking = parking_of(task.node, result)
        elif isinstance(result, SubgraphCancelled):
            cancelled = True
        elif isinstance(result, BaseException):
            failed = failed or (task, result)
        else:
            writes[task.id] = result
    failure = None
    error = None
    if failed is not None:
        task, error = failed
        failure = Failure(task.node, type(error).__name__, str(error))
    return Step(StepMarks(writes, parking, failure), todo, error, cancelled)


def raise_failure(step: Step) -> None:
    """Raise the error that failed ``step``: a :class:`GraphError` as it is, any other as the
    cause of a :class:`NodeError` naming the node."""
    assert step.marks.failure is not None and step.error is not None
    failure, error = step.marks.failure, step.error
    if isinstance(error, GraphError):
        raise error
    raise NodeError(failure.node_id, failure.error_type, failure.message) from error
