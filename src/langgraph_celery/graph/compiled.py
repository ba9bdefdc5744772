"""The compiled graph: run it (plain and async, invoke and stream) and inspect its threads."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint
from langgraph_celery.errors import CheckpointConflictError, GraphStateError
from langgraph_celery.graph import _loop, _sync
from langgraph_celery.graph._engine import Engine, new_id
from langgraph_celery.graph._engine_base import config_of
from langgraph_celery.graph._local import Outcome, run_local
from langgraph_celery.graph._spec import GraphSpec
from langgraph_celery.graph.config import CompileConfig, RunnableConfig
from langgraph_celery.graph.draw import draw
from langgraph_celery.graph.state import AgentState
from langgraph_celery.graph.types import (
    GraphInput,
    GraphRepresentation,
    GraphResult,
    NodeOutput,
    StateSnapshot,
)

__all__ = ["CompiledGraph", "GraphStream"]

InputLike = GraphInput | Mapping[str, Any] | None


class _RunSource(Protocol):
    """Where runs execute: in process, or through an executor such as CeleryExecutor."""

    def astream(
        self,
        graph_input: GraphInput,
        config: RunnableConfig,
        outcome: Outcome,
        steps: bool = True,
        timeout: float | None = None,
    ) -> AsyncIterator[NodeOutput]:
        """The run's outputs; without ``steps`` the caller only wants where it stops, and a
        source may leave out the outputs of the steps in between.  Past ``timeout`` seconds
        the iteration raises :class:`TimeoutError` naming the run (the run is not lost)."""
        ...

    async def update_state(
        self, config: RunnableConfig, values: Mapping[str, Any] | None, as_node: str | None
    ) -> Checkpoint:
        """Store what ``update_state`` writes on ``config``'s thread (checked by the caller);
        an executor refuses it while a run of the thread is running."""
        ...


class _LocalSource:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def astream(
        self,
        graph_input: GraphInput,
        config: RunnableConfig,
        outcome: Outcome,
        steps: bool = True,
        timeout: float | None = None,
    ) -> AsyncIterator[NodeOutput]:
        return run_local(self.engine, graph_input, config, outcome, timeout, live=steps)

    async def update_state(
        self, config: RunnableConfig, values: Mapping[str, Any] | None, as_node: str | None
    ) -> Checkpoint:
        """An update of the thread's latest checkpoint goes on from a later step of its run
        stored meanwhile (a cancelled run's step that was finishing: ``_loop.overtaken``)."""
        engine = self.engine
        saver = engine.saver
        assert saver is not None
        thread_id = engine.require_thread(config)
        for attempt in range(_loop.LATE_STEPS + 1):
            base = await engine.io(saver.get, thread_id, config.checkpoint_id)
            if base is None and config.checkpoint_id is not None:
                raise GraphStateError(
                    f"thread {thread_id!r} has no checkpoint {config.checkpoint_id!r}"
                )
            latest = base
            if config.checkpoint_id is not None:
                latest = await engine.io(saver.get, thread_id)
            try:
                return await engine.update(base, latest, values, as_node, config)
            except CheckpointConflictError:
                if config.checkpoint_id is not None or attempt == _loop.LATE_STEPS:
                    raise
                if not _loop.overtaken(latest, await engine.io(saver.get, thread_id)):
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")


class GraphStream(Iterator[NodeOutput], AsyncIterator[NodeOutput]):
    """The outputs of one run, as they come; ``result`` once exhausted.

    Iterate it with ``for`` (from ``stream()``) or ``async for`` (from ``astream()``).
    """

    def __init__(self, generator: AsyncIterator[NodeOutput], outcome: Outcome) -> None:
        self._generator = generator
        self._outcome = outcome
        self._finished = False
        self._pinned: ThreadPoolExecutor | None = None

    def cancel(self, interrupt: bool = False) -> bool:
        """Stop the run before its next step; with ``interrupt``, also cancel the async nodes of
        the step that is running (plain nodes finish in their threads).  The checkpoints stored
        so far stay, so the thread can be resumed; iteration ends, and ``result.is_empty()``.
        On Celery it cancels the run as ``RunHandle.cancel()`` does.  ``False`` if the stream
        had ended already."""
        if self._finished or self._outcome.done:
            return False
        self._outcome.cancel(interrupt)
        return True

    def is_cancelled(self) -> bool:
        """Whether :meth:`cancel` was called before the stream ended."""
        return self._outcome.cancelled

    @property
    def result(self) -> GraphResult:
        """The run's :class:`GraphResult`; available after the stream is exhausted."""
        if not self._finished:
            raise GraphStateError("the stream is not exhausted yet; iterate it to the end first")
        return GraphResult.of(self._outcome.value, cancelled=self._outcome.cancelled)

    def __iter__(self) -> GraphStream:
        return self

    def __next__(self) -> NodeOutput:
        if self._finished:
            raise StopIteration
        try:
            if self._pinned is None and _sync._in_running_loop():
                self._pinned = ThreadPoolExecutor(max_workers=1)
            if self._pinned is not None:
                return self._pinned.submit(_sync.step_sync, self._generator).result()
            return _sync.step_sync(self._generator)
        except StopAsyncIteration:
            self._close()
            raise StopIteration from None
        except BaseException:
            self._close()
            raise

    def __aiter__(self) -> GraphStream:
        return self

    async def __anext__(self) -> NodeOutput:
        if self._finished:
            raise StopAsyncIteration
        try:
            return await self._generator.__anext__()
        except BaseException:
            self._close()
            raise

    def close(self) -> None:
        """Stop iterating.  In process, a run still going stops where it is, recorded
        cancelled (its checkpoints stay: the thread can be resumed); on Celery the run goes on
        on the workers (stop it with :meth:`cancel`).  Nothing happens once the stream ended."""
        if self._finished:
            return
        self._close()
        _sync.run_sync(self._generator.aclose())  # type: ignore[attr-defined]

    def _close(self) -> None:
        self._finished = True
        if self._pinned is not None:
            self._pinned.shutdown(wait=False)
            self._pinned = None


class CompiledGraph:
    """A checked, runnable graph.  Build it with ``StateGraph(...).compile(config)``."""

    def __init__(self, spec: GraphSpec, config: CompileConfig) -> None:
        self.spec = spec
        self.config = config
        self.graph_id = config.graph_id or f"graph-{new_id()[:12]}"
        self._engine = Engine(spec, config, self.graph_id)
        self._source: _RunSource = _LocalSource(self._engine)
        if config.executor is not None:
            attach = getattr(config.executor, "attach", None)
            if attach is None:
                raise TypeError(
                    "CompileConfig.executor must be an executor such as "
                    "langgraph_celery.celery.CeleryExecutor(app)"
                )
            self._source = attach(self)

    @property
    def checkpoint_saver(self) -> BaseCheckpointSaver | None:
        return self.config.checkpoint_saver

    # -- running ------------------------------------------------------------------------------

    def _start(
        self,
        input: InputLike,
        config: RunnableConfig | None,
        steps: bool = True,
        timeout: float | None = None,
    ) -> GraphStream:
        config = config if config is not None else RunnableConfig()
        if not isinstance(config, RunnableConfig):
            raise TypeError(f"config must be a RunnableConfig, got {type(config).__name__}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive seconds (or None), got {timeout!r}")
        outcome = Outcome()
        source = self._source.astream(GraphInput.of(input), config, outcome, steps, timeout)
        return GraphStream(source, outcome)

    def stream(
        self,
        input: InputLike = None,
        config: RunnableConfig | None = None,
        timeout: float | None = None,
    ) -> GraphStream:
        """Run and yield a :class:`NodeOutput` for START, each executed node and END.

        Past ``timeout`` seconds iterating raises :class:`TimeoutError` naming the run; on
        Celery the run goes on (wait for it with a ``RunHandle``), in process it stops after
        its current step with its checkpoints stored (``GraphInput.resume()`` continues it).
        """
        return self._start(input, config, timeout=timeout)

    def astream(
        self,
        input: InputLike = None,
        config: RunnableConfig | None = None,
        timeout: float | None = None,
    ) -> GraphStream:
        """``stream`` for ``async for``."""
        return self._start(input, config, timeout=timeout)

    def start(self, input: InputLike = None, config: RunnableConfig | None = None) -> Any:
        """Start a run on the graph's executor and return a ``RunHandle`` at once."""
        start = getattr(self._source, "start", None)
        if start is None:
            raise GraphStateError(
                "start() needs a graph compiled with an executor, e.g. "
                "CompileConfig(executor=CeleryExecutor(app)); use invoke() or stream() in process"
            )
        return start(GraphInput.of(input), config if config is not None else RunnableConfig())

    def invoke(
        self,
        input: InputLike = None,
        config: RunnableConfig | None = None,
        timeout: float | None = None,
    ) -> AgentState:
        """Run to completion or interruption; the state at which the run stopped
        (``timeout`` as for :meth:`stream`)."""
        return _sync.run_sync(self.ainvoke(input, config, timeout))

    async def ainvoke(
        self,
        input: InputLike = None,
        config: RunnableConfig | None = None,
        timeout: float | None = None,
    ) -> AgentState:
        last = await self.ainvoke_final(input, config, timeout)
        return last.state if last is not None else self.spec.state_factory({})

    def invoke_final(
        self,
        input: InputLike = None,
        config: RunnableConfig | None = None,
        timeout: float | None = None,
    ) -> NodeOutput | None:
        """Run to completion or interruption; the last :class:`NodeOutput`."""
        return _sync.run_sync(self.ainvoke_final(input, config, timeout))

    async def ainvoke_final(
        self,
        input: InputLike = None,
        config: RunnableConfig | None = None,
        timeout: float | None = None,
    ) -> NodeOutput | None:
        stream = self._start(input, config, steps=False, timeout=timeout)
        last: NodeOutput | None = None
        async for output in stream:
            last = output
        result = stream.result
        if result.is_interruption_metadata():
            metadata = result.as_interruption_metadata()
            if last is None or last.state.data != metadata.state.data:
                last = NodeOutput(metadata.node_id, metadata.state)
        return last

    # -- threads ------------------------------------------------------------------------------

    def _saver(self) -> BaseCheckpointSaver:
        if self.config.checkpoint_saver is None:
            raise GraphStateError(
                "this graph has no checkpoint saver; compile it with "
                "CompileConfig(checkpoint_saver=...) to keep state between calls"
            )
        return self.config.checkpoint_saver

    def _checkpoint(self, config: RunnableConfig) -> Checkpoint:
        saver = self._saver()
        thread_id = self._engine.require_thread(config)
        checkpoint = saver.get(thread_id, config.checkpoint_id)
        if checkpoint is None:
            what = f"checkpoint {config.checkpoint_id!r}" if config.checkpoint_id else "checkpoint"
            raise GraphStateError(f"thread {thread_id!r} has no {what}")
        return checkpoint

    def get_state(self, config: RunnableConfig) -> StateSnapshot:
        """The thread's latest snapshot, or the one ``config.checkpoint_id`` names."""
        return self._engine.snapshot(self._checkpoint(config), config)

    def get_state_history(self, config: RunnableConfig) -> list[StateSnapshot]:
        """All of the thread's snapshots, newest first."""
        saver = self._saver()
        thread_id = self._engine.require_thread(config)
        return [self._engine.snapshot(c, config) for c in saver.list(thread_id)]

    def update_state(
        self,
        config: RunnableConfig,
        values: Mapping[str, Any] | None,
        as_node: str | None = None,
    ) -> RunnableConfig:
        """Write a checkpoint with ``values`` merged through the reducers; returns its config.

        With ``as_node``, ``next`` is what that node's edges pick; without, it stays that of
        the checkpoint it starts from.
        """
        return _sync.run_sync(self.aupdate_state(config, values, as_node))

    async def aupdate_state(
        self,
        config: RunnableConfig,
        values: Mapping[str, Any] | None,
        as_node: str | None = None,
    ) -> RunnableConfig:
        self._saver()
        self._engine.require_thread(config)
        if as_node is not None and as_node not in self.spec.nodes:
            raise GraphStateError(f"update_state as_node names unknown node {as_node!r}")
        if values is not None and not isinstance(values, Mapping):
            raise TypeError(f"update_state takes a mapping, got {type(values).__name__}")
        checkpoint = await self._source.update_state(config, values, as_node)
        return config_of(checkpoint, config)

    # -- drawing ------------------------------------------------------------------------------

    def get_graph(self, kind: str = "mermaid", title: str | None = None) -> GraphRepresentation:
        """A Mermaid (``"mermaid"``) or PlantUML (``"plantuml"``) diagram of the graph."""
        return draw(self.spec, kind, title or self.config.graph_id)
