"""The in-process executor: runs each superstep's tasks concurrently on this event loop (async
nodes) or in threads (plain nodes), and carries out the run loop's decisions
(:mod:`~langgraph_celery.graph._loop`) through :class:`Engine`.  The run is here; a step's tasks
are run, and what they report gathered, by :mod:`langgraph_celery.graph._local_step`."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.errors import CheckpointConflictError, GraphError
from langgraph_celery.graph import _loop, _marks
from langgraph_celery.graph._durable import Keeper
from langgraph_celery.graph._engine import Engine
from langgraph_celery.graph._local_step import execute_step, keep_writes, raise_failure
from langgraph_celery.graph._loop import Action
from langgraph_celery.graph._marks import MARK_KINDS, Failure, Mark
from langgraph_celery.graph._streaming import Chunks, discard
from langgraph_celery.graph._subgraph import parking_record
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import GraphInput, InterruptionMetadata, NodeOutput

__all__ = ["Begin", "Outcome", "run_local"]

#: Stores the checkpoint a run starts from, given the run's config (see :func:`run_local`).
Begin = Callable[[RunnableConfig], Awaitable[tuple[Checkpoint, NodeOutput | None]]]

log = logging.getLogger("langgraph_celery")


@dataclass
class Outcome:
    """Filled in when the run stops: the stream's final value.  The stream's ``cancel()`` sets
    ``cancelled`` (and ``interrupt``) from any thread; the executor stops the run before its
    next step (with ``interrupt``, it cancels the step running, ``step``, on its ``loop``)."""

    value: Any = None
    done: bool = False
    cancelled: bool = False
    interrupt: bool = False
    step: asyncio.Task[Any] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    #: the outcomes of the child runs of compiled subgraphs this run started (cancelled with it)
    children: list[Outcome] = field(default_factory=list)

    def link(self, child: Outcome) -> None:
        """Cancel ``child`` (a subgraph's child run) with this run, now if it is cancelled."""
        self.children.append(child)
        if self.cancelled:
            child.cancel(self.interrupt)

    def cancel(self, interrupt: bool, running: Any = None) -> None:
        """Cancel the run (and its children's); ``running`` is the parent's step task when a
        parent cancels this child run: that task is cancelled once, by the parent."""
        self.interrupt = self.interrupt or interrupt
        self.cancelled = True
        step, loop = self.step, self.loop
        for child in list(self.children):
            child.cancel(interrupt, step)  # (not the step task this run cancels itself)
        if interrupt and step is not None and loop is not None and step is not running:

            def interrupt_step() -> None:  # (on the loop: only if that step still runs)
                if self.step is step:
                    step.cancel()

            loop.call_soon_threadsafe(interrupt_step)


async def run_local(
    engine: Engine,
    graph_input: GraphInput,
    config: RunnableConfig,
    outcome: Outcome,
    timeout: float | None = None,
    live: bool = False,
    begin: Begin | None = None,
) -> AsyncIterator[NodeOutput]:
    """Run (or resume) one invocation in this process, yielding outputs as steps finish; past
    ``timeout`` seconds it stops between two steps with :class:`TimeoutError`.

    With ``live`` (someone streams the run) the outputs nodes and hooks stream while they run
    (``StreamingOutput`` items, ``config.emit``) are yielded as they come, the step running in a
    task of its own meanwhile; without, they are dropped and the step is awaited inline.
    ``begin(config)``, if given, stores the checkpoint the run starts from instead of
    :meth:`Engine.begin` (a compiled subgraph's fresh child run)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    chunks = Chunks() if live else None
    config = config._for_runtime(
        sink=chunks.put if chunks is not None else discard, outcome=outcome
    )
    if not config.node_path and engine.owner is not None:
        config = config._for_runtime(node_path=(engine.owner,))
    if begin is not None:
        checkpoint, start = await begin(config)
    else:
        checkpoint, start = await engine.begin(graph_input, config)
    config = config._for_runtime(graph_id=engine.graph_id, run_id=checkpoint.run_id)
    await engine.record(checkpoint, RunStatus.RUNNING)
    # where the steps' checkpoints go: the store at once ("sync"), or the run's keeper
    keeper = (
        Keeper(engine, config.durability, checkpoint)
        if engine.saver is not None and config.durability != "sync"
        else None
    )
    status: RunStatus | None = None  # how the run stopped, once the loop decided it
    node: str | None = None
    failure: Failure | None = None
    try:
        if start is not None:
            for chunk in _taken(chunks):  # (emitted by the hooks of START's edges)
                yield chunk
            yield start
        while True:
            if (
                deadline is not None
                and time.monotonic() > deadline
                and _marks.has_pending(checkpoint)
            ):
                status = RunStatus.CANCELLED  # stopped between two steps, resumable
                raise _timed_out(engine, checkpoint, timeout)
            if outcome.cancelled:
                status = RunStatus.CANCELLED  # stopped before its next step, resumable
                outcome.value, outcome.done = None, True
                return
            checkpoint, decision = await engine.next_decision(checkpoint, config, keeper)
            if decision.action is Action.COMPLETE:
                if keeper is not None:  # (stored before the thread may be released)
                    checkpoint = await keeper.flush()
                end, outcome.value = await engine.complete(checkpoint, config)
                outcome.done, status = True, RunStatus.COMPLETED
                for chunk in _taken(chunks):
                    yield chunk
                yield end
                return
            if decision.action is Action.PARK:
                assert decision.parking is not None
                outcome.value = engine.interruption(checkpoint, decision.parking)
                outcome.done, status, node = True, RunStatus.PARKED, decision.parking.node_id
                return
            if decision.action is Action.FAIL:
                assert decision.error is not None
                status, node, failure = RunStatus.FAILED, decision.node, decision.failure
                raise decision.error
            # (the task running this step, for cancel(interrupt=True) to cancel from any thread)
            outcome.loop = asyncio.get_running_loop()
            try:
                if chunks is None:
                    outcome.step = asyncio.current_task()
                    step = await execute_step(engine, checkpoint, config)
                else:
                    running = asyncio.ensure_future(execute_step(engine, checkpoint, config))
                    outcome.step = running
                    try:
                        while not running.done():
                            await chunks.wait(running)
                            for chunk in chunks.take():
                                yield chunk
                    finally:
                        if not running.done():  # (the caller stopped, or was cancelled)
                            running.cancel()
                        elif not running.cancelled():
                            running.exception()  # (a Ctrl-C in a node: raised by the loop)
                    step = running.result()
            except asyncio.CancelledError:
                if not (outcome.cancelled and outcome.interrupt):
                    raise  # (the caller's own task was cancelled)
                if outcome.step is not None and outcome.step is asyncio.current_task():
                    outcome.step.uncancel()  # the cancellation was ours, and is handled here
                status = RunStatus.CANCELLED  # the step stays for a resume
                outcome.value, outcome.done = None, True
                return
            finally:
                outcome.step = None
            # what the step's tasks streamed last (a compiled child's last outputs among it)
            # comes before whatever ends the step: a failure as much as its outputs
            for chunk in _taken(chunks):
                yield chunk
            updates = step.marks.updates
            if step.cancelled:  # a subgraph's child run stopped with this run's cancel
                await keep_writes(engine, checkpoint, step.ran, updates)
                status = RunStatus.CANCELLED
                outcome.value, outcome.done = None, True
                return
            decision = _loop.decide_step(checkpoint.tasks, step.marks)
            if decision.action is not Action.COMMIT:
                if keeper is not None:  # (the step's checkpoint is stored first)
                    checkpoint = await keeper.flush()
                # a stopped step keeps the updates of the tasks that succeeded, for the resume
                await keep_writes(engine, checkpoint, step.ran, updates)
                if decision.action is Action.PARK:
                    assert decision.parking is not None
                    for chunk in _taken(chunks):  # (streamed by the step before it parked)
                        yield chunk
                    outcome.value = engine.interruption(checkpoint, decision.parking)
                    outcome.done, status, node = True, RunStatus.PARKED, decision.node
                    return
                status, node, failure = RunStatus.FAILED, decision.node, decision.failure
                raise_failure(step)
            try:
                result = await engine.finish(checkpoint, updates, config, keeper)
            except GraphError as error:
                if outcome.cancelled and isinstance(error, CheckpointConflictError):
                    # Cancelled while the step ran, and a new run went on from the step's
                    # checkpoint first (a checkpoint has one successor): the step is not
                    # stored; its updates stay at its checkpoint (a fork of it finds them).
                    if keeper is None:
                        await keep_writes(engine, checkpoint, checkpoint.tasks, updates)
                    status = RunStatus.CANCELLED
                    outcome.value, outcome.done = None, True
                    return
                # Every node ran, the step failed as a whole (conflicting writes, a route): keep
                # the updates, as the Celery workers do, so that a resume merges them again.
                if keeper is not None:
                    checkpoint = await keeper.flush()
                await keep_writes(engine, checkpoint, checkpoint.tasks, updates)
                status, node = RunStatus.FAILED, checkpoint.next[-1]
                failure = Failure.of_error(node, error)
                raise
            for output in [*_taken(chunks), *result.outputs]:
                yield output
            checkpoint = result.checkpoint
            if result.interruption is not None:
                outcome.value, outcome.done = result.interruption, True
                status, node = RunStatus.PARKED, result.interruption.node_id
                return
    except Exception:
        status = status or RunStatus.FAILED  # (an error no decision named: the store's, ...)
        raise
    finally:
        if keeper is not None:
            checkpoint = await _flushed(keeper, status)
        # (no status: the caller stopped iterating, or cancelled the task, mid-run)
        if engine.saver is not None and checkpoint.thread_id:
            await engine.record(checkpoint, status or RunStatus.CANCELLED, node)
            await _mark_stop(engine, checkpoint, status, outcome, failure)


async def _flushed(keeper: Keeper, status: RunStatus | None) -> Checkpoint:
    """Where the run stops, its checkpoints stored (``"async"``, ``"exit"``).  A store that
    fails fails the run; when the run is failing already, its own error is what the caller sees
    (the store's is logged) and the run is recorded where it was last stored.  A cancelled
    run's step refused because a new run went on from the run's last stored checkpoint first
    (one successor per checkpoint) is dropped: the run is recorded where it was last stored."""
    failing = sys.exc_info()[1] is not None
    try:
        return await keeper.flush()
    except Exception as error:
        if status is RunStatus.CANCELLED and isinstance(error, CheckpointConflictError):
            log.info("run %s: cancelled, its last step not stored: %s", keeper.stored.run_id, error)
            return keeper.stored
        if not failing:
            raise
        log.error("run %s: storing its last step failed: %s", keeper.stored.run_id, error)
        return keeper.stored


def _taken(chunks: Chunks | None) -> list[NodeOutput]:
    return chunks.take() if chunks is not None else []


async def _mark_stop(
    engine: Engine,
    checkpoint: Checkpoint,
    status: RunStatus | None,
    outcome: Outcome,
    failure: Failure | None,
) -> None:
    """Leave on the checkpoint where the run stopped the mark the Celery executor leaves there
    (parked: the interruption; failed: the failure), so that the store tells how any run
    stopped, whichever executor ran it.  Best effort: a store that fails here does not hide why
    the run stopped."""
    assert engine.saver is not None
    if status is RunStatus.PARKED and isinstance(outcome.value, InterruptionMetadata):
        value = outcome.value
        parking = parking_record(value)
        mark, node, data = Mark.INTERRUPT, value.node_id, parking.to_data(datetime.now(UTC))
    elif status is RunStatus.FAILED and failure is not None:
        mark, node, data = Mark.ERROR, failure.node_id, failure.to_data()
    else:
        return
    saver = engine.saver
    try:
        await engine.io(
            saver.put_writes,
            checkpoint.thread_id,
            checkpoint.checkpoint_id,
            mark,
            node,
            data,
            MARK_KINDS[mark],
        )
    except Exception as error:  # (the run's own outcome is what the caller sees)
        log.warning("could not mark run %s %s: %s", checkpoint.run_id, status, error)


def _timed_out(engine: Engine, checkpoint: Checkpoint, timeout: float | None) -> TimeoutError:
    kept = (
        "with its checkpoints stored: invoke GraphInput.resume() on the thread to continue it"
        if engine.saver is not None
        else "(without a checkpoint saver nothing of it is kept)"
    )
    return TimeoutError(
        f"run {checkpoint.run_id} has not stopped after {timeout:g} s; it stopped before its "
        f"next step (next: {', '.join(checkpoint.next) or 'its edges'}) {kept}"
    )
