"""What the run loop's decisions need besides pure functions: calling user code (routes,
``InterruptibleAction``) and storing checkpoints.  :class:`Engine` starts or resumes a run,
answers :meth:`Engine.next_decision` from a stored checkpoint (the rules are
:mod:`~langgraph_celery.graph._loop`'s), commits a step (merge, route, store) and completes.
Every executor drives runs through it; only *how the tasks of a step are executed* differs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointKind,
    PendingTask,
    PendingWrite,
)
from langgraph_celery.checkpoint.index import RunIndex, RunRecord, RunStatus
from langgraph_celery.errors import GraphError, GraphStateError, NodeError
from langgraph_celery.graph import _algo, _loop, _sync
from langgraph_celery.graph._durable import Keeper
from langgraph_celery.graph._loop import Action, Decision, Extra, Parking
from langgraph_celery.graph._runner import TaskRunner, _resolve
from langgraph_celery.graph.builder import GraphSpec
from langgraph_celery.graph.config import CompileConfig, RunnableConfig
from langgraph_celery.graph.state import AgentState, Ops, apply_update, initial_values
from langgraph_celery.graph.types import (
    END,
    START,
    CheckpointSaverTag,
    GraphInput,
    InterruptionMetadata,
    NodeOutput,
    StateSnapshot,
    StreamMode,
)

__all__ = ["Engine", "StepResult", "Store"]

#: How a call stores the one checkpoint it makes (by default the saver's ``put``): the Celery
#: executor stores a run's first and last checkpoints together with the run's stall timer; a
#: :class:`~langgraph_celery.graph._durable.Keeper` holds it, or stores it in the background.
Store = Callable[[Checkpoint], Checkpoint] | Keeper


T = TypeVar("T")


def new_id() -> str:
    """A random 128-bit id as 32 hex digits."""
    return os.urandom(16).hex()


@dataclass
class StepResult:
    """What finishing a step produced: the checkpoint to continue from, the outputs to stream
    and, when the run stops here, the interruption."""

    checkpoint: Checkpoint
    outputs: list[NodeOutput] = field(default_factory=list)
    interruption: InterruptionMetadata | None = None


async def _as_node(node: str, where: str, call: Callable[[], Any]) -> Any:
    """The result of user code run for ``node`` besides its action (its conditional edge, its
    ``InterruptibleAction``); what it raises fails the run as the node's failure, alike in
    every executor."""
    try:
        return await _resolve(call())
    except GraphError:
        raise
    except Exception as error:
        raise NodeError(node, type(error).__name__, f"{error} (in its {where})") from error


class Engine:
    """Run logic shared by the executors, for one compiled graph."""

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
            config=config.with_changes(checkpoint_id=checkpoint.checkpoint_id),
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
        if node is None and status is RunStatus.RUNNING and checkpoint.next:
            node = checkpoint.next[0]
        return RunRecord(
            run_id=checkpoint.run_id,
            thread_id=checkpoint.thread_id,
            graph_id=self.owner or "",
            status=status,
            node=node,
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
                result = await _as_node(source, "conditional edge", route)
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

    # -- the lifecycle ------------------------------------------------------------------------

    async def begin(
        self, graph_input: GraphInput, config: RunnableConfig, store: Store | None = None
    ) -> tuple[Checkpoint, NodeOutput | None]:
        """The checkpoint a run starts from, saved (with ``store`` if given), and the START
        output (none on resume)."""
        thread_id = self.require_thread(config) if self.saver is not None else config.thread_id
        base = None
        if self.saver is not None and thread_id is not None:
            base = await self.io(self.saver.get, thread_id, config.checkpoint_id)
            if base is None and config.checkpoint_id is not None:
                raise GraphStateError(
                    f"thread {thread_id!r} has no checkpoint {config.checkpoint_id!r}"
                )
        return await self.begin_from(base, graph_input, config, store=store)

    async def begin_from(
        self,
        base: Checkpoint | None,
        graph_input: GraphInput,
        config: RunnableConfig,
        *,
        run_id: str | None = None,
        base_writes: Sequence[PendingWrite] | None = None,
        extra: Mapping[str, Any] | None = None,
        store: Store | None = None,
        fresh: bool = False,
    ) -> tuple[Checkpoint, NodeOutput | None]:
        """:meth:`begin` from ``base``, the checkpoint the caller read (and claimed): the one
        ``config.checkpoint_id`` names, else the thread's latest; ``None`` for a new thread,
        whose first checkpoint then has no parent (of two first runs racing on a new thread the
        saver stores one).  A new run gets ``run_id`` if given; ``base_writes`` are ``base``'s
        pending writes if the caller has read them; ``extra`` goes into the stored checkpoint's
        ``extra`` (what an executor records about the invocation); ``store`` stores it.  With
        ``fresh``, ``base``'s values are not the stored ones (a compiled subgraph's new child run
        starts from its initial state): the first checkpoint is stored whole, not as a delta."""
        thread_id = config.thread_id
        self.check_owner(base)
        added = dict(extra or {})
        if graph_input.is_resume:
            stored = await self._resume(
                base, graph_input.value, config, run_id, base_writes, added, store
            )
            return stored, None
        forking = base is not None and config.checkpoint_id is not None
        if forking and graph_input.value is None and _loop.has_pending(base):
            assert base is not None
            resumed = False
            forked = await self._continue(
                base, config, "fork", resumed, run_id=run_id, added=added, store=store
            )
            return forked, None
        values = dict(base.values) if base is not None else initial_values(self.spec.schema)
        ops: Ops = {}
        if graph_input.value:
            apply_update(self.spec.schema, values, graph_input.value, "the input", ops)
        run_id = run_id or new_id()
        run_config = config._for_runtime(graph_id=self.graph_id, run_id=run_id)
        tasks, barriers, values = await self.route_from([START], values, {}, run_config, ops=ops)
        checkpoint = await self.save(
            Checkpoint(
                thread_id=thread_id or "",
                checkpoint_id=new_id(),
                run_id=run_id,
                step=base.step + 1 if base is not None else -1,
                values=values,
                tasks=tuple(tasks),
                parent_id=base.checkpoint_id if base is not None else None,
                node=START,
                extra={Extra.BARRIERS: barriers, **added} if barriers else added,
                metadata={"source": "input", "update": graph_input.value or {}},
                kind=CheckpointKind.INPUT,
                delta=ops if base is not None and not fresh else None,
            ),
            store,
        )
        return checkpoint, self.output(
            START, checkpoint, run_config, self.state(values), graph_input.value or {}
        )

    async def _resume(
        self,
        base: Checkpoint | None,
        update: Mapping[str, Any] | None,
        config: RunnableConfig,
        run_id: str | None,
        base_writes: Sequence[PendingWrite] | None,
        added: dict[str, Any],
        store: Store | None = None,
    ) -> Checkpoint:
        if self.saver is None:
            raise GraphStateError("resume needs a checkpoint saver; compile with one")
        thread_id = self.require_thread(config)
        if base is None:
            raise GraphStateError(f"thread {thread_id!r} has no checkpoint to resume")
        if not _loop.has_pending(base):
            raise GraphStateError(
                f"thread {thread_id!r} has nothing pending to resume (its last run completed); "
                "start a new run with GraphInput.args(...)"
            )
        if config.checkpoint_id is not None:
            latest = await self.io(self.saver.get, thread_id)
            if latest is not None and latest.checkpoint_id != base.checkpoint_id:
                # resumed (or superseded) already: resuming it again would run its nodes twice
                raise GraphStateError(
                    f"thread {thread_id!r} has nothing pending to resume at checkpoint "
                    f"{base.checkpoint_id!r}: it was already resumed or superseded (the thread's "
                    f"latest is {latest.checkpoint_id!r}); resume without a checkpoint_id, or "
                    "fork from it with invoke(None, config)"
                )
        return await self._continue(
            base,
            config,
            "resume",
            True,
            update=update,
            run_id=run_id,
            base_writes=base_writes,
            added=added,
            store=store,
        )

    async def _continue(
        self,
        base: Checkpoint,
        config: RunnableConfig,
        source: str,
        resumed: bool,
        *,
        update: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        base_writes: Sequence[PendingWrite] | None = None,
        added: Mapping[str, Any] | None = None,
        store: Store | None = None,
    ) -> Checkpoint:
        """The checkpoint after ``base`` that runs its pending tasks again (a resume, a fork):
        the same run if ``base`` is the thread's latest, else a new run (``run_id`` if given)."""
        assert self.saver is not None
        values = dict(base.values)
        ops: Ops = {}
        if update:
            apply_update(self.spec.schema, values, update, "the resume's update", ops)
        latest = None
        if config.checkpoint_id is not None:
            latest = await self.io(self.saver.get, base.thread_id)
        same_run = _loop.same_run(base, latest, config.checkpoint_id)
        extra = dict(base.extra)
        extra.pop(Extra.COMPLETION_PENDING, None)
        extra.pop(Extra.STEPS, None)  # a new invocation
        extra[Extra.RESUMED] = resumed
        extra.update(added or {})
        checkpoint = await self.save_child(
            base,
            run_id=None if same_run else (run_id or new_id()),
            values=values,
            tasks=base.tasks,
            node=base.node,
            extra=extra,
            metadata={"source": source, "update": dict(update or {})},
            kind=CheckpointKind(source),
            delta=ops,
            store=store,
        )
        if base_writes is None:
            base_writes = await self.io(self.saver.get_writes, base.thread_id, base.checkpoint_id)
        await self.io(self.carry_writes, base_writes, checkpoint)
        return checkpoint

    def carry_writes(self, writes: Sequence[PendingWrite], checkpoint: Checkpoint) -> None:
        """Record on ``checkpoint`` (a resume or fork) the node updates its base recorded: the
        tasks that succeeded in a stopped step do not run again (the first write wins, so
        carrying twice is harmless)."""
        assert self.saver is not None
        for write in _loop.carried_writes(writes):
            self.saver.put_writes(
                checkpoint.thread_id,
                checkpoint.checkpoint_id,
                write.task_id,
                write.node,
                write.update,
            )

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
            found = await _as_node(node, "InterruptibleAction", ask)
            if found is not None:
                return Parking(found.node_id, found.reason, dict(found.metadata or {}))
        return None

    def interruption(self, checkpoint: Checkpoint, parking: Parking) -> InterruptionMetadata:
        """The interruption a caller sees for a run parked at ``checkpoint``."""
        return InterruptionMetadata(
            parking.node_id,
            self.state(checkpoint.values),
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
        extra.update(_loop.next_extra(checkpoint, stepped=True))
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
        extra = _loop.next_extra(checkpoint, stepped=False)
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

    async def update(
        self,
        base: Checkpoint | None,
        latest: Checkpoint | None,
        values: Mapping[str, Any] | None,
        as_node: str | None,
        config: RunnableConfig,
        store: Store | None = None,
    ) -> Checkpoint:
        """Store what ``update_state`` writes after ``base`` (the checkpoint the call names, else
        the thread's latest ``latest``; ``None`` on a new thread): ``values`` merged through the
        reducers; ``next`` what ``as_node``'s edges pick, else ``base``'s.  It continues
        ``base``'s run when ``base`` is the latest (a parked run is resumed after it)."""
        thread_id = self.require_thread(config)
        self.check_owner(latest or base)
        merged = dict(base.values) if base is not None else initial_values(self.spec.schema)
        ops: Ops = {}
        apply_update(self.spec.schema, merged, values or {}, "update_state's values", ops)
        tasks = base.tasks if base is not None else ()
        extra = {k: v for k, v in (base.extra if base else {}).items() if k != Extra.RESUMED}
        if as_node is not None:
            routed = config._for_runtime(graph_id=self.graph_id)
            barriers = extra.get(Extra.BARRIERS, {})
            next_tasks, barriers, merged = await self.route_from(
                [as_node], merged, barriers, routed, ops=ops
            )
            tasks = tuple(next_tasks)
            extra = {Extra.BARRIERS: barriers} if barriers else {}
        same_run = base is not None and _loop.same_run(base, latest, config.checkpoint_id)
        return await self.save(
            Checkpoint(
                thread_id=thread_id,
                checkpoint_id=new_id(),
                run_id=base.run_id if base is not None and same_run else new_id(),
                step=base.step + 1 if base is not None else -1,
                values=merged,
                tasks=tasks,
                parent_id=base.checkpoint_id if base is not None else None,
                node=as_node or (base.node if base is not None else None),
                extra=extra,
                metadata={"source": "update", "update": dict(values or {}), "as_node": as_node},
                kind=CheckpointKind.UPDATE,
                delta=ops if base is not None else None,
            ),
            store,
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
