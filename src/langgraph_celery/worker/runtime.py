"""What happens on a worker (and, for dispatch, on the client) for one registered graph.

A node task runs its node, records the update as a pending write (first write wins), and when
the run loop decides the step is complete (:func:`~langgraph_celery.graph._loop.decide_step`),
stores the next checkpoint.  Storing is a compare-and-set on ``(thread, run, step)``: only the
writer that committed goes on to carry out the next decision
(:meth:`~langgraph_celery.graph._engine.Engine.next_decision`: dispatch, park, fail, complete),
so an update reaches the thread's state once whatever the broker redelivers.  A node that fails
for good is recorded on its checkpoint (the run stays resumable) and fails its Celery task.
With ``durability="exit"`` a step's checkpoint is carried to the next step's task in the result
backend instead of being stored; with ``"async"`` it is carried likewise and stored right after
the next step's task is sent (``worker/carried.py``, ``worker/carry.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointKind,
    PendingTask,
    Timer,
)
from langgraph_celery.checkpoint.index import RunIndex, RunStatus
from langgraph_celery.errors import (
    CheckpointConflictError,
    GraphError,
    SerializationError,
)
from langgraph_celery.graph import _marks
from langgraph_celery.graph._engine import Engine
from langgraph_celery.graph._loop import Action, Decision
from langgraph_celery.graph._marks import Extra, Failure, Mark, Parking
from langgraph_celery.graph._streaming import discard
from langgraph_celery.graph._sync import run_sync
from langgraph_celery.graph.config import DURABILITY_MODES, RunnableConfig
from langgraph_celery.graph.retry import RetryPolicy, _RetryHook
from langgraph_celery.serde import JsonSerializer
from langgraph_celery.worker import carried as carried_steps
from langgraph_celery.worker import names, node_task, resume_task, subgraphs
from langgraph_celery.worker.carry import Carried, Carrier
from langgraph_celery.worker.envelope import TaskEnvelope
from langgraph_celery.worker.results import TaskResult, TaskStatus
from langgraph_celery.worker.streaming import publish_step

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph
    from langgraph_celery.worker.executor import CeleryExecutor

__all__ = ["GraphRuntime"]

log = logging.getLogger("langgraph_celery.worker")


def jsonable_config(config: RunnableConfig) -> dict[str, Any]:
    """What each checkpoint of an invocation records of its config (``Extra.RUN_CONFIG``)."""
    data: dict[str, Any] = {"metadata": dict(config.metadata), "clone_state": config.clone_state}
    if config.recursion_limit is not None:
        data["recursion_limit"] = config.recursion_limit
    if config.durability != "sync":
        data["durability"] = config.durability
    return data


class GraphRuntime:
    """One compiled graph as the Celery executor runs it."""

    def __init__(self, executor: CeleryExecutor, compiled: CompiledGraph) -> None:
        self.executor = executor
        self.compiled = compiled
        self.graph_id = compiled.graph_id
        # Retries are Celery's job here: the node chains run without the RetryPolicy hooks.
        spec = compiled.spec
        self.policies: dict[str, RetryPolicy] = {}
        for hook in spec.hooks:
            if isinstance(hook.fn, _RetryHook):
                for node in [hook.target] if hook.target else list(spec.nodes):
                    self.policies.setdefault(node, hook.fn.policy)
        hooks = tuple(h for h in spec.hooks if not isinstance(h.fn, _RetryHook))
        # Time limits too: the node's task has them as Celery's soft and hard time limits.
        self.timeouts = {
            node: spec.timeouts.get(node, executor.node_timeout) for node in spec.nodes
        }
        worker_spec = dataclasses.replace(spec, hooks=hooks, timeouts={})
        self.engine = Engine(worker_spec, compiled.config, self.graph_id)
        assert compiled.config.checkpoint_saver is not None
        self.saver: BaseCheckpointSaver = compiled.config.checkpoint_saver
        serializer = self.saver.serializer
        self.serializer = serializer if isinstance(serializer, JsonSerializer) else JsonSerializer()
        #: the runtimes of the graph's compiled subgraphs, by node id (``worker/subgraphs.py``)
        self.children: dict[str, GraphRuntime] = {}
        #: where a run with durability "exit" carries its checkpoints between steps
        self.carrier = Carrier(executor.app, self.serializer)

    # -- configs and envelopes ------------------------------------------------------------------

    def config_of(self, checkpoint: Checkpoint) -> RunnableConfig:
        """The config of the invocation ``checkpoint`` belongs to, as its client recorded it in
        the store (recursion limit, metadata, clone_state): never taken from a message."""
        data = checkpoint.extra.get(Extra.RUN_CONFIG)
        data = data if isinstance(data, Mapping) else {}
        limit = data.get("recursion_limit")
        metadata = data.get("metadata")
        durability = data.get("durability")
        config = RunnableConfig(
            thread_id=checkpoint.thread_id,
            recursion_limit=limit if isinstance(limit, int) and limit > 0 else None,
            metadata=metadata if isinstance(metadata, Mapping) else {},
            clone_state=data.get("clone_state", True) is not False,
            durability=durability if durability in DURABILITY_MODES else "sync",
        )
        # (a route or hook of a step committed outside a node task streams to nobody)
        config = config._for_runtime(graph_id=self.graph_id, run_id=checkpoint.run_id, sink=discard)
        parent = subgraphs.parent_of(checkpoint)  # a child run's nodes: the enclosing path
        if parent is not None:
            return config._for_runtime(node_path=tuple(parent.get("path", ())))
        owner = self.engine.owner
        return config._for_runtime(node_path=(owner,)) if owner else config

    def envelope(self, checkpoint: Checkpoint, task: PendingTask | None = None) -> TaskEnvelope:
        """The message of one of ``checkpoint``'s tasks (or, without one, of its resume): it
        names the step, nothing else."""
        return TaskEnvelope(
            graph_id=self.graph_id,
            thread_id=checkpoint.thread_id,
            run_id=checkpoint.run_id,
            step=checkpoint.step,
            checkpoint_id=checkpoint.checkpoint_id,
            node=task.node if task is not None else None,
            task_id=task.id if task is not None else None,
        )

    # -- marks --------------------------------------------------------------------------------

    def mark(self, checkpoint: Checkpoint, mark: str, node: str, data: Mapping[str, Any]) -> bool:
        stored = self.saver.put_writes(
            checkpoint.thread_id,
            checkpoint.checkpoint_id,
            mark,
            node,
            dict(data),
            _marks.MARK_KINDS[mark],
        )
        self.executor.notifier.publish(checkpoint.thread_id, final=mark in _marks.STOPS)
        return stored

    def record(self, checkpoint: Checkpoint, status: RunStatus, node: str | None = None) -> None:
        """The run index: ``checkpoint``'s run is now ``status`` (at ``node``)."""
        record = self.engine.run_record(checkpoint, status, node)
        if record is not None and isinstance(self.saver, RunIndex):
            self.saver.upsert_run(record)

    def mark_parked(self, checkpoint: Checkpoint, parking: Parking) -> None:
        """Park the run at ``checkpoint``; with an interrupt timeout, arm its deadline.

        The mark goes first: if storing it fails, the stall timer is still there and the
        reaper parks the run on its next pass.  Without a deadline the stall timer is left for
        the reaper to remove (compare-and-delete), so a resume that re-arms it meanwhile keeps it.
        """
        metadata = dict(parking.metadata)
        timeout = metadata.get("timeout", self.executor.interrupt_timeout)
        now = datetime.now(UTC)
        due = None
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0:
            due = now + timedelta(seconds=float(timeout))
            metadata["expires_at"] = due.isoformat()
        # the run index first: whoever sees the mark (the run's waiters) finds the record
        self.record(checkpoint, RunStatus.PARKED, parking.node_id)
        parked = dataclasses.replace(parking, metadata=metadata)
        self.mark(checkpoint, Mark.INTERRUPT, parking.node_id, parked.to_data(now))
        if due is not None:
            self.saver.set_timer(
                checkpoint.thread_id, checkpoint.run_id, self.graph_id, names.DEADLINE_TIMER, due
            )
        if Extra.PARENT in checkpoint.extra:  # a compiled subgraph's child run: its parent too
            subgraphs.child_parked(self, checkpoint, parking)

    def mark_failed(self, checkpoint: Checkpoint, failure: Failure) -> None:
        """Stop the run at ``checkpoint`` as failed (its stall timer is left to the reaper)."""
        self.record(checkpoint, RunStatus.FAILED, failure.node_id)  # (first: see mark_parked)
        self.mark(checkpoint, Mark.ERROR, failure.node_id, failure.to_data())
        if Extra.PARENT in checkpoint.extra:  # a compiled subgraph's child run: its parent too
            subgraphs.child_failed(self, checkpoint, failure)

    def stall_timer(self, checkpoint: Checkpoint) -> Timer:
        """The reaper's timer that watches ``checkpoint``'s run from now on."""
        due = datetime.now(UTC) + timedelta(seconds=self.executor.stalled_after)
        return Timer(checkpoint.thread_id, checkpoint.run_id, self.graph_id, names.STALL_TIMER, due)

    def store_first(self, checkpoint: Checkpoint) -> Checkpoint:
        """Store an invocation's first checkpoint together with its run's stall timer and its
        run's record (running), all or none: whoever sees the run finds its record."""
        record = self.engine.run_record(checkpoint, RunStatus.RUNNING)
        return self.saver.put_with_timer(checkpoint, self.stall_timer(checkpoint), record)

    # -- carrying out the run loop's decisions ------------------------------------------------

    async def advance(
        self,
        checkpoint: Checkpoint,
        *,
        announce: bool = False,
        timer_cleared: bool = False,
        decision: Decision | None = None,
    ) -> Decision:
        """From a stored checkpoint: carry out the run loop's decision (complete, park, fail,
        send the step's tasks) and return it.

        Followers of the thread are woken when the run stops here (completed, parked, failed);
        with ``announce`` (``checkpoint`` is a new step) also when its tasks are sent.  With
        ``timer_cleared`` the run's stall timer went with ``checkpoint`` already.  ``decision``:
        the one already taken from ``checkpoint`` (a carried step's, now stored).
        """
        at = checkpoint
        if decision is None:
            at, decision = await self.engine.next_decision(checkpoint, self.config_of(checkpoint))
        if decision.action is Action.COMPLETE:
            # the client that waits for the run reads it (and releases the thread)
            if not timer_cleared or at is not checkpoint:  # (else stored with the checkpoint)
                self.record(at, RunStatus.COMPLETED)
                self.saver.clear_timer(at.thread_id, at.run_id)
            self.executor.notifier.publish(at.thread_id, final=True)
            if Extra.PARENT in at.extra:  # a compiled subgraph's child run: its parent goes on
                await subgraphs.child_completed(self, at)
        elif decision.action is Action.PARK:
            assert decision.parking is not None
            self.mark_parked(at, decision.parking)
        elif decision.action is Action.FAIL:
            assert decision.failure is not None
            self.mark_failed(at, decision.failure)
        else:
            self.send(at, carried_steps.carry_first(self, at, decision))
            if announce:
                self.executor.notifier.publish(at.thread_id)
        return decision

    def send(self, checkpoint: Checkpoint, carried: bool = False) -> None:
        """Send ``checkpoint``'s tasks; ``carried``: the checkpoint is in the result backend."""
        parent = subgraphs.shown_parent(checkpoint)
        for task in checkpoint.tasks:
            self.executor._send_node(self.envelope(checkpoint, task), task, carried, parent)

    def store_step(self, checkpoint: Checkpoint) -> Checkpoint:
        """Store a step's checkpoint (the run's last goes with its stall timer)."""
        if _marks.has_pending(checkpoint):
            return self.saver.put(checkpoint)
        # The run's last: its stall timer goes too, and its record (completed) with it, so that
        # whoever sees the run complete finds its record (if this put is refused, neither is
        # stored: the run ends another way, and that is recorded then).
        record = self.engine.run_record(checkpoint, RunStatus.COMPLETED)
        return self.saver.put_with_timer(checkpoint, None, record)

    # -- the node task --------------------------------------------------------------------------

    def run_node(
        self,
        envelope: TaskEnvelope,
        retries: int,
        retry: Any,
        redelivered: bool = False,
        carried: bool = False,
        soft_limit: float | None = None,
    ) -> dict[str, Any]:
        """The body of a node task (``worker/node_task.py``)."""
        return node_task.run_node(self, envelope, retries, retry, redelivered, carried, soft_limit)

    def commit(self, checkpoint: Checkpoint, writes: Mapping[str, Mapping[str, Any]]) -> TaskResult:
        """Store the next checkpoint from every update of ``checkpoint``'s step, and go on."""
        config = self.config_of(checkpoint)
        return run_sync(self._commit(checkpoint, writes, config, announce=True))

    async def _commit(
        self,
        checkpoint: Checkpoint,
        writes: Mapping[str, Mapping[str, Any]],
        config: RunnableConfig,
        announce: bool,
        carried: Carried | None = None,
    ) -> TaskResult:
        if config.durability != "sync":
            # the step's checkpoint came from the result backend, or else from the store (where
            # the run's stall timer was last armed or seen progressing)
            kept = carried is not None
            if carried is None:
                carried = Carried(checkpoint, checkpoint.checkpoint_id, checkpoint.created_at)
            return await carried_steps.commit_carried(
                self, checkpoint, writes, config, carried, kept, announce
            )
        try:
            result = await self.engine.finish(checkpoint, writes, config, self.store_step)
        except CheckpointConflictError:
            # Another copy of the step stored it, or (the run cancelled meanwhile) a new run
            # went on from the step's checkpoint first: this one stops.  A step of one task
            # has not recorded its update: it is kept there, as a step of several keeps its
            # tasks' (a fork of the checkpoint finds it; the first write wins).
            self.keep_update(checkpoint, writes)
            return TaskResult(TaskStatus.MERGED_ELSEWHERE)
        except GraphError as error:
            self.step_failed(checkpoint, writes, error)
            raise
        new = result.checkpoint
        root = subgraphs.stream_root(new)
        if root is not None and new.kind is CheckpointKind.LOOP:
            # a child run's step: its node outputs go to the root run's clients before the
            # child's next tasks (or its end) do anything
            publish_step(self.executor.notifier, root, self.graph_id, new)
        # (each way on wakes the thread's followers once: a mark, the completion, the send)
        if result.interruption is not None:
            interruption = result.interruption
            self.mark_parked(
                new,
                Parking(interruption.node_id, interruption.reason, dict(interruption.metadata)),
            )
        else:
            decision = await self.advance(
                new, announce=announce, timer_cleared=not _marks.has_pending(new)
            )
            if decision.error is not None:
                raise decision.error  # the run failed on its way to the next step
        return self.merged(new)

    def step_stored(self, new: Checkpoint, announce: bool) -> None:
        """(async) ``new``, a step stored behind its tasks, is in the store: a child run's node
        outputs go to the root run's clients, and, with ``announce`` (no task result published
        by the backend wakes them), the thread's followers are woken."""
        root = subgraphs.stream_root(new)
        if root is not None and new.kind is CheckpointKind.LOOP:
            publish_step(self.executor.notifier, root, self.graph_id, new)
        if announce:
            self.executor.notifier.publish(new.thread_id)

    def merged(self, new: Checkpoint) -> TaskResult:
        """The result of the task that stored ``new``: with the final state when the run ended
        there (a node task's result is never bigger than the run's final state)."""
        final = not _marks.has_pending(new)
        return TaskResult(
            TaskStatus.MERGED,
            checkpoint_id=new.checkpoint_id,
            step=new.step,
            next=new.next,
            state=self.serializer.to_jsonable(new.values) if final else None,
        )

    def step_failed(
        self, checkpoint: Checkpoint, writes: Mapping[str, Mapping[str, Any]], error: GraphError
    ) -> None:
        """Every node of ``checkpoint``'s step ran but the step failed as a whole (a route, a
        reducer): keep their updates (see :meth:`keep_update`), as the in-process executor
        does, so that a resume merges them again; the run fails."""
        self.keep_update(checkpoint, writes)
        self.mark_failed(checkpoint, Failure.of_error(checkpoint.next[-1], error))

    def keep_update(self, checkpoint: Checkpoint, writes: Mapping[str, Mapping[str, Any]]) -> None:
        """Record the update of a step of one task as a pending write of ``checkpoint`` (a
        step of several tasks has recorded each already), for a step that is not stored."""
        if len(checkpoint.tasks) == 1:
            only = checkpoint.tasks[0]
            # (not kept if the update itself is what the store refuses)
            with contextlib.suppress(SerializationError):
                self.saver.put_writes(
                    checkpoint.thread_id,
                    checkpoint.checkpoint_id,
                    only.id,
                    only.node,
                    dict(writes.get(only.id) or {}),
                )

    def resume(self, envelope: TaskEnvelope) -> dict[str, Any]:
        """The body of the resume task (``worker/resume_task.py``)."""
        return resume_task.resume(self, envelope)
