"""The part of :class:`~langgraph_celery.graph._engine.Engine` every path of a run uses: the
graph, the store (saving a checkpoint, the run index), what callers see of a checkpoint (state,
snapshot, output) and the edges leaving nodes (routes, user code called as the node's).

:class:`EngineBase` is the base of ``_engine_steps.Stepping`` (a step's decision and commit),
itself the base of ``_engine.Engine`` (starting, resuming, forking, updating).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint, PendingTask
from langgraph_celery.checkpoint.index import RunIndex, RunRecord, RunStatus
from langgraph_celery.errors import GraphError, GraphStateError, NodeError
from langgraph_celery.graph import _algo, _loop, _sync
from langgraph_celery.graph._durable import Keeper
from langgraph_celery.graph._marks import Extra
from langgraph_celery.graph._runner import TaskRunner, _resolve
from langgraph_celery.graph._spec import GraphSpec
from langgraph_celery.graph.config import CompileConfig, RunnableConfig
from langgraph_celery.graph.state import AgentState, Ops, apply_update
from langgraph_celery.graph.types import START, NodeOutput, StateSnapshot, StreamMode

__all__ = ["EngineBase", "Store", "new_id"]

#: How a call stores the one checkpoint it makes (by default the saver's ``put``): the Celery
#: executor stores a run's first and last checkpoints together with the run's stall timer; a
#: :class:`~langgraph_celery.graph._durable.Keeper` holds it, or stores it in the background.
Store = Callable[[Checkpoint], Checkpoint] | Keeper


T = TypeVar("T")


def new_id() -> str:
    """A random 128-bit id as 32 hex digits."""
    return os.urandom(16).hex()


async def call_as_node(node: str, where: str, call: Callable[[], Any]) -> Any:
    """The result of user code run for ``node`` besides its action (its conditional edge, its
    ``InterruptibleAction``); what it raises fails the run as the node's failure, alike in
    every executor."""
    try:
        return await _resolve(call())
    except GraphError:
        raise
    except Exception as error:
        raise NodeError(node, type(error).__name__, f"{error} (in its {where})") from error


class EngineBase:
    """Run logic shared by the executors, for one compiled graph: what every path uses."""

    def __init__(self, spec: GraphSpec, config: CompileConfig, graph_id: str) -> None:
        self.spec = spec
        self.config = config
        self.graph_id = graph_id
        #: the graph that owns the threads it runs on (only a graph compiled with a graph_id)
        self.owner = config.graph_id
        self.saver: BaseCheckpointSaver | None = config.checkpoint_saver
        self.runner = TaskRunner(spec, config.checkpoint_saver, graph_id)
        self.interruptible = frozenset(
            node for node in spec.nodes if self.runner.interruptible(node) is not None
        )
        self.interrupt_before = frozenset(config.interrupt_before)

    # -- helpers ------------------------------------------------------------------------------

    def state(self, values: Mapping[str, Any]) -> AgentState:
        return self.spec.state_factory(values)

    async def io(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)``, a call to the store: a saver whose data lives in this process is
        called inline; any other is kept off a caller's event loop (see ``_sync.blocking``)."""
        if self.saver is None or not self.saver.shared_across_processes:
            return call(*args)
        return await _sync.blocking(call, *args)

    async def save(self, checkpoint: Checkpoint, store: Store | None = None) -> Checkpoint:
        if self.owner is not None and checkpoint.extra.get(Extra.GRAPH_ID) != self.owner:
            extra = {**checkpoint.extra, Extra.GRAPH_ID: self.owner}
            checkpoint = dataclasses.replace(checkpoint, extra=extra)
        if isinstance(store, Keeper):
            return await store.hold(checkpoint)
        if store is not None:
            return await self.io(store, checkpoint)
        return await self.io(self.saver.put, checkpoint) if self.saver is not None else checkpoint

    async def save_child(
        self,
        parent: Checkpoint,
        *,
        run_id: str | None = None,
        store: Store | None = None,
        **fields: Any,
    ) -> Checkpoint:
        """Store the checkpoint one step after ``parent`` (same run unless ``run_id``)."""
        return await self.save(
            Checkpoint(
                thread_id=parent.thread_id,
                checkpoint_id=new_id(),
                run_id=run_id or parent.run_id,
                step=parent.step + 1,
                parent_id=parent.checkpoint_id,
                **fields,
            ),
            store,
        )

    def snapshot(self, checkpoint: Checkpoint, config: RunnableConfig) -> StateSnapshot:
        parent = (
            config.with_changes(checkpoint_id=checkpoint.parent_id)
            if checkpoint.parent_id
            else None
        )
        return StateSnapshot(
            node=checkpoint.node or START,
            state=self.state(checkpoint.values),
            update=checkpoint.metadata.get("update"),
            config=config_of(checkpoint, config),
            next=checkpoint.next,
            step=checkpoint.step,
            created_at=checkpoint.created_at,
            parent_config=parent,
            metadata=dict(checkpoint.metadata),
        )

    def output(
        self,
        node: str,
        checkpoint: Checkpoint,
        config: RunnableConfig,
        state: AgentState,
        update: Mapping[str, Any] | None = None,
    ) -> NodeOutput:
        mode = config.stream_mode
        update = _algo.without_goto(update)  # (a command node's output is its update)
        if mode is StreamMode.SNAPSHOTS:
            snapshot = self.snapshot(checkpoint, config)
            return StateSnapshot(
                node=node,
                state=state,
                update=update,
                config=snapshot.config,
                next=snapshot.next,
                step=snapshot.step,
                created_at=snapshot.created_at,
                parent_config=snapshot.parent_config,
                metadata=snapshot.metadata,
            )
        if mode is StreamMode.UPDATES:
            return NodeOutput(node, state, dict(update) if update is not None else {})
        return NodeOutput(node, state)

    def run_record(
        self, checkpoint: Checkpoint, status: RunStatus, node: str | None = None
    ) -> RunRecord | None:
        """``checkpoint``'s run as the run index lists it, now ``status`` at ``node`` (running:
        its next node); ``None`` when the saver keeps no run index.  Runs of a graph compiled
        without a ``graph_id`` (whose id is new in every process) are indexed under ``""``."""
        if not isinstance(self.saver, RunIndex):
            return None
        return RunRecord(
            run_id=checkpoint.run_id,
            thread_id=checkpoint.thread_id,
            graph_id=self.owner or "",
            status=status,
            node=_loop.run_node(status, node, checkpoint),
        )

    async def record(
        self, checkpoint: Checkpoint, status: RunStatus, node: str | None = None
    ) -> None:
        """Keep the saver's run index up to date (see :meth:`run_record`)."""
        record = self.run_record(checkpoint, status, node)
        if record is not None:
            assert isinstance(self.saver, RunIndex)
            await self.io(self.saver.upsert_run, record)

    def check_owner(self, checkpoint: Checkpoint | None) -> None:
        """Refuse to move a thread that holds another graph's runs (``GraphStateError``)."""
        why = _loop.foreign_graph(checkpoint, self.owner)
        if why is not None:
            raise GraphStateError(why)

    def require_thread(self, config: RunnableConfig) -> str:
        if config.thread_id is None:
            raise GraphStateError(
                "this graph has a checkpoint saver, so every call needs a thread: pass "
                "RunnableConfig(thread_id='...')"
            )
        return config.thread_id

    async def _routes(
        self, sources: Sequence[str], values: Mapping[str, Any], config: RunnableConfig
    ) -> dict[str, _algo.RouteDecision]:
        decisions = {}
        for source in sources:
            if source in self.spec.conditional:
                route = partial(self.runner.run_route, source, values, config)
                result = await call_as_node(source, "conditional edge", route)
                decisions[source] = _algo.decide_route(self.spec, source, result)
        return decisions

    async def route_from(
        self,
        sources: Sequence[str],
        values: dict[str, Any],
        barriers: Mapping[str, Sequence[str]],
        config: RunnableConfig,
        gotos: Mapping[str, Sequence[Any]] | None = None,
        ops: Ops | None = None,
    ) -> tuple[list[PendingTask], dict[str, list[str]], dict[str, Any]]:
        """Evaluate the edges leaving ``sources``: next tasks, barriers, state with Command
        updates merged (recorded in ``ops`` if given); ``gotos``: where command nodes among
        them go (``_algo.command_gotos``)."""
        decisions = await self._routes(sources, values, config)
        decisions.update(_algo.command_routes(gotos or {}))
        tasks, new_barriers = _algo.plan_next(self.spec, sources, decisions, barriers)
        for source in sources:
            decision = decisions.get(source)
            if decision is not None and decision.update:
                values = dict(values)
                apply_update(
                    self.spec.schema,
                    values,
                    decision.update,
                    f"the Command of {source!r}'s edge",
                    ops,
                )
        return tasks, new_barriers, values


def config_of(checkpoint: Checkpoint, config: RunnableConfig) -> RunnableConfig:
    """``config`` naming ``checkpoint``, with ``next_node`` its one next node (as LangGraph4j's
    snapshot config and ``updateState`` carry it; ``None`` when it has none or several).  A run
    does not read ``next_node``: it goes on from what the checkpoint records."""
    nodes = checkpoint.next
    return config.with_changes(
        checkpoint_id=checkpoint.checkpoint_id, next_node=nodes[0] if len(nodes) == 1 else None
    )
