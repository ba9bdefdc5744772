"""Compiled subgraphs: ``add_node(id, compiled)`` runs a :class:`CompiledGraph` as one node.

The node's task runs a *child run* of the compiled graph on the parent's state and returns, as
the node's update, what the child changed (:func:`changes`), so that the parent's reducers see
each change once (an appender is not doubled).

- **The child's thread** is ``f"{parent thread}/{task id}"`` (the task id is the node id, or
  ``node#sendN`` for a ``Send``; a parent without a thread uses its run id instead).  The child
  stores its checkpoints there with its own saver, or the parent's when it has none.  Each new
  invocation of the node starts a fresh child run there (the child's state is the parent's, not
  merged with an earlier child run's); its checkpoints carry the parent's run id
  (``Extra.PARENT``).
- **Resume.** When the child's latest run on that thread has something pending and belongs to
  the parent's run, the node resumes it instead of starting a new one, with the updates the
  parent's thread went through since the child last started or resumed (a resume's update, an
  ``update_state``'s values: :func:`parent_updates`, read back from the parent's checkpoints
  down to the one the child's ``Extra.PARENT`` names), merged through the child's reducers into
  the child's own state: a resume that clears a list (``ReplaceAllWith([])``) clears what the
  child appended, as in LangGraph4j.  Where that checkpoint is not found, the changes the
  parent's state went through since the child started are used instead.
- **Interruptions.** A child that parks raises :class:`SubgraphInterrupt`: the parent parks too,
  its :class:`InterruptionMetadata` naming the inner node, with ``metadata["subgraph_path"]``
  the ids from the parent's node down to it, and the inner run's state (:func:`outer_parking`,
  which the Celery executor uses too).
- **Config.** The child inherits the caller's recursion limit, metadata, stream mode,
  ``clone_state`` and parallel executors; ``config.node_path`` in its nodes starts with the
  enclosing path.  Its outputs are streamed as the parent's, with the child's node ids.
- **Cancellation.** The child's run is linked to the parent's: cancelling the parent's stream
  cancels it (:class:`SubgraphCancelled` then stops the parent's step without an update).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint
from langgraph_celery.graph._marks import Extra, Parking
from langgraph_celery.graph._streaming import is_streamed
from langgraph_celery.graph._subgraph_state import (
    changes,
    child_input,
    parent_updates,
    resumes,
    started_with,
)
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.state import (
    AgentState,
    Channel,
)
from langgraph_celery.graph.types import (
    END,
    START,
    GraphInterrupt,
    InterruptionMetadata,
    NodeOutput,
)

if TYPE_CHECKING:
    from langgraph_celery.graph._engine import Engine
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = [
    "SUBGRAPH_PATH",
    "SubgraphCancelled",
    "SubgraphInterrupt",
    "SubgraphNode",
    "child_thread",
    "outer_parking",
    "parking_of",
    "parking_record",
]

#: The key of an interruption's metadata that holds, for an interruption inside a compiled
#: subgraph, the ids from the parent's subgraph node down to the inner node that stopped.
SUBGRAPH_PATH = "subgraph_path"


def child_thread(parent_thread: str, task_id: str) -> str:
    """The thread a compiled subgraph node's child runs on."""
    return f"{parent_thread}/{task_id}"


class SubgraphInterrupt(GraphInterrupt):
    """A compiled subgraph's child run parked: its parent parks as ``parking`` says (at the
    inner node)."""

    def __init__(self, parking: Parking) -> None:
        super().__init__(parking.reason or "", parking.metadata)
        self.node_id = parking.node_id
        self.parking = parking


class SubgraphCancelled(Exception):
    """A compiled subgraph's child run was cancelled (its parent's run is being cancelled)."""


def parking_of(node: str, interrupt: GraphInterrupt) -> Parking:
    """Where a task of ``node`` that raised ``interrupt`` parks its run."""
    if isinstance(interrupt, SubgraphInterrupt):
        return interrupt.parking
    return Parking(node, interrupt.reason or None, dict(interrupt.metadata))


def outer_parking(node: str, inner: Parking, state: Mapping[str, Any]) -> Parking:
    """Where the parent of a child run that parked as ``inner`` (with the child's ``state``)
    parks, its subgraph node being ``node``: at the inner node, with its reason and metadata,
    ``subgraph_path`` the ids from ``node`` down to the inner node, and, as the state the
    caller sees, the innermost run's (``inner.state`` when a child of the child parked it), as
    LangGraph4j's interruption of a subgraph carries the subgraph's state."""
    metadata = dict(inner.metadata)
    metadata.pop("expires_at", None)  # (the child's own deadline, if it had one)
    path = metadata.get(SUBGRAPH_PATH) or [inner.node_id]
    metadata[SUBGRAPH_PATH] = [node, *path]
    held = inner.state if inner.state is not None else state
    return Parking(inner.node_id, inner.reason, metadata, dict(held))


def parking_record(interruption: InterruptionMetadata) -> Parking:
    """What the mark of a run parked with ``interruption`` stores: its state too when a child
    run parked it (the child's, which the parent's checkpoint does not hold)."""
    metadata = dict(interruption.metadata)
    state = _data(interruption.state) if SUBGRAPH_PATH in metadata else None
    return Parking(interruption.node_id, interruption.reason, metadata, state)


def _data(state: Any) -> dict[str, Any]:
    return dict(state.data if isinstance(state, AgentState) else state)


class SubgraphNode:
    """The action of a compiled subgraph node; :meth:`bound` to the parent graph's schema and
    saver by the parent's task runner."""

    def __init__(
        self,
        node_id: str,
        compiled: CompiledGraph,
        schema: Mapping[str, Channel] | None = None,
        saver: BaseCheckpointSaver | None = None,
        parent_id: str | None = None,
    ) -> None:
        self.node_id = node_id
        self.compiled = compiled
        self.schema: Mapping[str, Channel] = schema if schema is not None else {}
        self.saver = saver
        self.parent_id = parent_id
        self.__name__ = node_id
        self._child: Engine | None = None

    def bound(
        self,
        schema: Mapping[str, Channel],
        saver: BaseCheckpointSaver | None,
        parent_id: str | None = None,
    ) -> Any:
        """This node for a parent (graph ``parent_id``) whose state has ``schema`` and whose
        saver is ``saver``."""
        return SubgraphNode(self.node_id, self.compiled, schema, saver, parent_id)

    @property
    def engine(self) -> Engine:
        """The engine of the child runs: the child's, with the parent's saver when it has
        none of its own; a child compiled without a ``graph_id`` is ``"<parent>/<node>"`` (as
        the Celery executor registers it)."""
        if self._child is None:
            from langgraph_celery.graph._engine import Engine

            compiled = self.compiled
            config = compiled.config
            graph_id = compiled.graph_id
            if config.graph_id is None and self.parent_id is not None:
                graph_id = f"{self.parent_id}/{self.node_id}"
            if config.checkpoint_saver is None and self.saver is not None:
                config = dataclasses.replace(config, checkpoint_saver=self.saver, executor=None)
            if config is compiled.config and graph_id == compiled.graph_id:
                self._child = compiled._engine
            else:
                self._child = Engine(compiled.spec, config, graph_id)
        return self._child

    async def _parent_updates(
        self, latest: Checkpoint, config: RunnableConfig
    ) -> list[Mapping[str, Any]] | None:
        """:func:`parent_updates` on this node's parent thread, from the step being run."""
        parent_saver, step_id = self.saver, config._step_id
        ref = latest.extra.get(Extra.PARENT)
        since = ref.get("checkpoint_id") if isinstance(ref, Mapping) else None
        if parent_saver is None or step_id is None or not isinstance(since, str):
            return None
        thread = config.thread_id or ""

        def read() -> list[Mapping[str, Any]] | None:
            step = parent_saver.get(thread, step_id)
            if step is None:
                return None
            return parent_updates(step, since, lambda id_: parent_saver.get(thread, id_))

        return await self.engine.io(read)

    def child_config(self, config: RunnableConfig) -> RunnableConfig:
        """The child run's config: the caller's, on the child's thread and path."""
        task = config._task_id or config.node_id or self.node_id
        thread = child_thread(config.thread_id or config.run_id or "", task)
        child = RunnableConfig(
            thread_id=thread,
            stream_mode=config.stream_mode,
            recursion_limit=config.recursion_limit,
            metadata=config.metadata,
            parallel_executors=config.parallel_executors,
            clone_state=config.clone_state,
        )
        return child._for_runtime(node_path=config.node_path)

    async def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        from langgraph_celery.graph._local import Outcome, run_local

        engine = self.engine
        values = _data(state)
        child_config = self.child_config(config)
        thread = child_config.thread_id or ""
        parent_run = config.run_id or ""
        saver = engine.saver
        latest = await engine.io(saver.get, thread) if saver is not None else None
        started = updates = None
        if saver is not None and latest is not None and resumes(latest, parent_run):
            started = started_with(await engine.io(saver.list, thread), latest)
            updates = await self._parent_updates(latest, config)
        graph_input, base = child_input(engine.spec.schema, latest, started, values, updates)
        # (the parent's step the child starts or resumes from, for its next resume)
        reference = {"run_id": parent_run, "checkpoint_id": config._step_id}

        async def begin(run_config: RunnableConfig) -> tuple[Checkpoint, NodeOutput | None]:
            return await engine.begin_from(
                base,
                graph_input,
                run_config,
                extra={Extra.PARENT: reference},
                fresh=not graph_input.is_resume,
            )

        outcome = Outcome()
        parent_outcome = config._outcome
        if isinstance(parent_outcome, Outcome):
            parent_outcome.link(outcome)
        live = is_streamed(config)
        final: dict[str, Any] | None = None
        async for output in run_local(
            engine, graph_input, child_config, outcome, live=live, begin=begin
        ):
            if output.node == END:
                final = _data(output.state)
            elif output.node != START and live:
                config.emit(output)
        if isinstance(outcome.value, InterruptionMetadata):
            inner = outcome.value  # (its state is the innermost run's already)
            parked = Parking(inner.node_id, inner.reason, dict(inner.metadata))
            raise SubgraphInterrupt(outer_parking(self.node_id, parked, _data(inner.state)))
        if final is None:
            raise SubgraphCancelled(f"the child run of subgraph node {self.node_id!r} stopped")
        return changes(self.schema, values, final)
