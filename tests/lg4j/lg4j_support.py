"""Helpers shared by the ports of LangGraph4j's core tests (``tests/lg4j``).

Each stands for a LangGraph4j test helper, named in its docstring, spelled through SPEC §1's
name table: ``MessagesState`` is a schema with a ``messages`` appender, ``CustomNodeAction`` of
``LG4JTestUtil`` is :class:`CustomNodeAction`, the hook helpers of ``hook/`` are
:class:`NestedNodeHook` and :class:`NestedEdgeHook`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    Channels,
    Command,
    GraphInterrupt,
    InterruptionMetadata,
    NodeOutput,
    RunnableConfig,
    StateGraph,
)

#: ``MessagesState.SCHEMA``
MESSAGES_SCHEMA: dict[str, Channel] = {"messages": Channels.appender()}

#: ``LG4JTestUtil.State.RESUME``
RESUME = "LG4J_RESUME"

Action = Callable[..., Any]


def messages(state: AgentState) -> list[Any]:
    """``MessagesState.messages()``"""
    return list(state.value("messages", []))


def last_message(state: AgentState) -> Any:
    """``MessagesState.lastMessage()``, ``None`` where Java has ``Optional.empty()``"""
    values = messages(state)
    return values[-1] if values else None


def nodes(outputs: Iterable[NodeOutput]) -> list[str]:
    """``stream(...).stream().map(NodeOutput::node).toList()``"""
    return [output.node for output in outputs]


def make_node(node_id: str) -> Action:
    """``makeNode(id)`` of ``LG4JTest``: appends its id to ``messages``."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": node_id}

    return action


def parallel_branch() -> StateGraph:
    """``testWithParallelBranch``'s graph (``LG4JTest``, ``StateGraphRepresentationTest``): a
    ``MessagesStateGraph`` where ``START -> A``, ``A`` fans out to ``A1``, ``A2``, ``A3``, each
    leads to ``B``, then ``B -> C -> END``; every node a :func:`make_node`."""
    workflow = StateGraph(MESSAGES_SCHEMA)
    for node in ("A", "A1", "A2", "A3", "B", "C"):
        workflow.add_node(node, make_node(node))
    workflow.add_edge("A", "A1").add_edge("A", "A2").add_edge("A", "A3")
    workflow.add_edge("A1", "B").add_edge("A2", "B").add_edge("A3", "B")
    return workflow.add_edge("B", "C").add_edge(START, "A").add_edge("C", END)


def parallel_branch_on_start() -> StateGraph:
    """``testWithParallelBranchOnStart``'s graph: the same with the fan-out from ``START`` to
    ``A1``, ``A2``, ``A3`` (no ``A``)."""
    workflow = StateGraph(MESSAGES_SCHEMA)
    for node in ("A1", "A2", "A3", "B", "C"):
        workflow.add_node(node, make_node(node))
    workflow.add_edge("A1", "B").add_edge("A2", "B").add_edge("A3", "B").add_edge("B", "C")
    workflow.add_edge(START, "A1").add_edge(START, "A2").add_edge(START, "A3")
    return workflow.add_edge("C", END)


def checked_node(node_id: str, graph_id: str | None = None) -> Action:
    """``NodeActionBuilder`` of ``LG4JTest``/``HookTest``: checks the runtime's node id (and
    graph id), appends its id to ``messages``."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == node_id
        if graph_id is not None:
            assert config.graph_id == graph_id
        return {"messages": node_id}

    return action


class CustomNodeAction:
    """``LG4JTestUtil.CustomNodeAction``: appends ``message`` to ``messages``; with
    ``interrupt_with_exception`` it raises ``GraphInterrupt(message)`` unless the state has
    ``RESUME``; with ``streaming`` it streams two chunks and ends with
    ``{"messages": "Test1Test2"}``."""

    def __init__(
        self, message: str, *, interrupt_with_exception: bool = False, streaming: bool = False
    ) -> None:
        self.message = message
        self.interrupt_with_exception = interrupt_with_exception
        self.streaming = streaming

    def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if self.interrupt_with_exception and not state.value(RESUME, False):
            raise GraphInterrupt(self.message)
        if self.streaming:

            def chunks() -> Any:
                yield "Test1"
                yield "Test2"
                return {"messages": "Test1Test2"}

            return {"_streaming_messages": chunks()}
        return {"messages": self.message}


class InterruptableNodeAction(CustomNodeAction):
    """``CustomNodeAction.Interruptable``: an ``InterruptibleAction`` that stops the run before
    it unless the state has ``RESUME``."""

    def interrupt(
        self, node_id: str, state: AgentState, config: RunnableConfig
    ) -> InterruptionMetadata | None:
        if not state.value(RESUME, False):
            assert node_id == self.message
            return InterruptionMetadata(node_id, state)
        return None


# -- hook/NestedNodeHook, hook/NestedEdgeHook, RegisterHookChannel, HookTest.SumValueChannel ----

NODE_HOOKS = "node-hooks"  # NestedNodeHook.HOOKS_ATTRIBUTE
NODE_AFTER_CALL = "node-after-call"  # NestedNodeHook.AFTER_CALL_ATTRIBUTE
EDGE_HOOKS = "edge-hooks"  # NestedEdgeHook.HOOKS_ATTRIBUTE
EDGE_AFTER_CALL = "edge-after-call"  # NestedEdgeHook.AFTER_CALL_ATTRIBUTE


def _register_hooks(
    old: Mapping[str, list[str]] | None, new: Mapping[str, list[str]] | None
) -> Any:
    if old is None:
        return new
    if new is None:
        return old
    merged = {node: list(levels) for node, levels in old.items()}
    for node, levels in new.items():
        merged[node] = list(dict.fromkeys([*merged.get(node, []), *levels]))
    return merged


def register_hook_channel() -> Channel:
    """``RegisterHookChannel``: per node id, the levels seen, without repeats, in order."""
    return Channel(_register_hooks, default=dict)


def sum_value_channel() -> Channel:
    """``HookTest.SumValueChannel``: ``Integer::sum``, default 0."""
    return Channel(lambda old, new: (old or 0) + new, default=lambda: 0)


def _add_one(update: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    """``AgentState.updateState(lastResult, Map.of(key, 1), schema)`` with a sum channel."""
    result = dict(update or {})
    result[key] = result.get(key, 0) + 1
    return result


class NestedNodeHook:
    """``hook/NestedNodeHook``: hooks that record their level under ``node-hooks``, per node."""

    def __init__(self, level: str) -> None:
        self.level = level

    def wrap(self) -> Action:
        def hook(node_id: str, state: AgentState, config: RunnableConfig, action: Action) -> Any:
            result = action(state, config)
            return {**result, NODE_HOOKS: {node_id: [self.level]}}

        return hook

    def before(self) -> Action:
        # LangGraph4j's hook returns the state with the update merged; ours returns the update
        def hook(node_id: str, state: AgentState, config: RunnableConfig) -> Any:
            return {NODE_HOOKS: {node_id: [self.level]}}

        return hook

    def after(self) -> Action:
        def hook(node_id: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
            return _add_one(result, NODE_AFTER_CALL)

        return hook


class NestedEdgeHook:
    """``hook/NestedEdgeHook``: the same for conditional edges, on the route's ``Command``."""

    def __init__(self, level: str) -> None:
        self.level = level

    def wrap(self) -> Action:
        def hook(source: str, state: AgentState, config: RunnableConfig, action: Action) -> Any:
            result = action(state, config)
            return Command(
                goto=result.goto,
                update={**(result.update or {}), EDGE_HOOKS: {source: [self.level]}},
            )

        return hook

    def before(self) -> Action:
        # as LangGraph4j's, a Command with an update and no goto
        def hook(source: str, state: AgentState, config: RunnableConfig) -> Any:
            return Command(update={EDGE_HOOKS: {source: [self.level]}})

        return hook

    def after(self) -> Action:
        def hook(source: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
            return Command(goto=result.goto, update=_add_one(result.update, EDGE_AFTER_CALL))

        return hook
