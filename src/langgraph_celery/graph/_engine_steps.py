"""The steps of a run, as :class:`~langgraph_celery.graph._engine.Engine` takes them: what to do
from a stored checkpoint (:meth:`Stepping.next_decision`, with the routes and
``InterruptibleAction`` it calls), committing a step (:meth:`Stepping.finish`: merge, route,
store), the edges left for a resume, and completing the run.

:class:`Stepping` derives from ``_engine_base.EngineBase``; ``Engine`` derives from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint, CheckpointKind, PendingTask
from langgraph_celery.errors import GraphError
from langgraph_celery.graph import _algo, _loop, _marks
from langgraph_celery.graph._engine_base import EngineBase, Store, call_as_node
from langgraph_celery.graph._loop import Action, Decision
from langgraph_celery.graph._marks import Extra, Parking
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.state import Ops
from langgraph_celery.graph.types import (
    END,
    START,
    CheckpointSaverTag,
    InterruptionMetadata,
    NodeOutput,
)

__all__ = ["StepResult", "Stepping"]


@dataclass
class StepResult:
    """What finishing a step produced: the checkpoint to continue from, the outputs to stream
    and, when the run stops here, the interruption."""

    checkpoint: Checkpoint
    outputs: list[NodeOutput] = field(default_factory=list)
    interruption: InterruptionMetadata | None = None


class Stepping(EngineBase):
    """A run's steps: decide, commit, complete (a base of ``Engine``)."""

    def limit(self, config: RunnableConfig) -> int:
        """The run's recursion limit (the call's, else the graph's)."""
        return config.recursion_limit or self.config.recursion_limit

    async def next_decision(
        self,
        checkpoint: Checkpoint,
        config: RunnableConfig,
        store: Store | None = None,
    ) -> tuple[Checkpoint, Decision]:
        """What to do from ``checkpoint`` (see :func:`_loop.decide_next`), with the user code
        it needs called: edges left for the resume are evaluated and stored (with ``store``)
        and the checkpoint it continues from is returned with the decision; the nodes'
        ``InterruptibleAction``s are asked before a dispatch.  Never COMMIT, WAIT or EDGES."""
        while True:
            decision = _loop.decide_next(
                checkpoint,
                limit=self.limit(config),
                interrupt_before=self.interrupt_before,
                interruptible=self.interruptible,
            )
            try:
                if decision.action is Action.EDGES:
                    checkpoint = await self.pending_edges(checkpoint, config, store)
                    continue
                if decision.action is Action.DISPATCH and decision.ask:
                    parking = await self._ask(checkpoint, decision.ask, config)
                    if parking is not None:
                        return checkpoint, Decision(
                            Action.PARK, node=parking.node_id, parking=parking
                        )
            except GraphError as error:  # a route or an InterruptibleAction failed
                return checkpoint, _loop.fail(checkpoint.node or START, error)
            return checkpoint, decision

    async def _ask(
        self, checkpoint: Checkpoint, nodes: Sequence[str], config: RunnableConfig
    ) -> Parking | None:
        """The first of ``nodes`` whose ``InterruptibleAction`` asks to stop, as a parking."""
        for node in nodes:
            action = self.runner.interruptible(node)
            node_config = config._for_runtime(node_id=node)
            ask = partial(action.interrupt, node, self.state(checkpoint.values), node_config)
            found = await call_as_node(node, "InterruptibleAction", ask)
            if found is not None:
                return Parking(found.node_id, found.reason, dict(found.metadata or {}))
        return None

    def interruption(self, checkpoint: Checkpoint, parking: Parking) -> InterruptionMetadata:
        """The interruption a caller sees for a run parked at ``checkpoint``: with the state
        of the child run that parked it, for a compiled subgraph's (as LangGraph4j)."""
        values = parking.state if parking.state is not None else checkpoint.values
        return InterruptionMetadata(
            parking.node_id,
            self.state(values),
            parking.reason,
            dict(parking.metadata),
        )

    async def finish(
        self,
        checkpoint: Checkpoint,
        writes: Mapping[str, Mapping[str, Any] | None],
        config: RunnableConfig,
        store: Store | None = None,
    ) -> StepResult:
        """Merge a completed step's writes (by task id), route, save the next checkpoint
        (with ``store`` if given)."""
        tasks = checkpoint.tasks
        ops: Ops = {}
        merged = _algo.merge_writes(
            self.spec, checkpoint.values, [(task.node, writes.get(task.id)) for task in tasks], ops
        )
        executed = _algo.executed_nodes(tasks)
        gotos = _algo.command_gotos([(task.node, writes.get(task.id)) for task in tasks])
        barriers = checkpoint.extra.get(Extra.BARRIERS, {})
        stop_after = _algo.interrupt_after_node(self.config.interrupt_after, executed)
        if stop_after is not None and self.config.interrupt_before_edge:
            next_tasks: list[PendingTask] = []
            extra: dict[str, Any] = {Extra.EDGES_PENDING: executed}
            if gotos:
                extra[Extra.GOTOS] = gotos
        else:
            next_tasks, barriers, merged = await self.route_from(
                executed, merged, barriers, config, gotos, ops
            )
            completion_pending = stop_after is not None and not next_tasks
            extra = {Extra.COMPLETION_PENDING: True} if completion_pending else {}
        extra.update(_marks.next_extra(checkpoint, stepped=True))
        if barriers:
            extra[Extra.BARRIERS] = barriers
        new = await self.save_child(
            checkpoint,
            values=merged,
            tasks=tuple(next_tasks),
            node=executed[-1] if executed else None,
            extra=extra,
            metadata={"source": "loop", "writes": {t.id: writes.get(t.id) for t in tasks}},
            kind=CheckpointKind.LOOP,
            delta=ops,
            store=store,
        )
        state = self.state(merged)
        outputs = [
            self.output(task.node, new, config, state, writes.get(task.id)) for task in tasks
        ]
        interruption = InterruptionMetadata(stop_after, state) if stop_after is not None else None
        return StepResult(new, outputs, interruption)

    async def pending_edges(
        self, checkpoint: Checkpoint, config: RunnableConfig, store: Store | None = None
    ) -> Checkpoint:
        """Evaluate edges left for the resume (``interrupt_before_edge``) and save the result."""
        sources = list(checkpoint.extra.get(Extra.EDGES_PENDING, ()))
        barriers = checkpoint.extra.get(Extra.BARRIERS, {})
        gotos = checkpoint.extra.get(Extra.GOTOS, {})
        ops: Ops = {}
        tasks, barriers, values = await self.route_from(
            sources, dict(checkpoint.values), barriers, config, gotos, ops
        )
        extra = _marks.next_extra(checkpoint, stepped=False)
        if barriers:
            extra[Extra.BARRIERS] = barriers
        return await self.save_child(
            checkpoint,
            values=values,
            tasks=tuple(tasks),
            node=checkpoint.node,
            extra=extra,
            metadata={"source": "edges"},
            kind=CheckpointKind.EDGES,
            delta=ops,
            store=store,
        )

    async def complete(
        self, checkpoint: Checkpoint, config: RunnableConfig
    ) -> tuple[NodeOutput, Any]:
        """The END output and the run's result (state data, or a CheckpointSaverTag)."""
        output = self.output(END, checkpoint, config, self.state(checkpoint.values))
        if self.config.release_thread and self.saver is not None:
            released = await self.io(self.saver.release, checkpoint.thread_id)
            return output, CheckpointSaverTag(checkpoint.thread_id, tuple(released))
        return output, dict(checkpoint.values)
