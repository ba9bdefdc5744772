"""Port of LangGraph4j's ``hook/HookTest`` (``langgraph4j-core``), in process.

LangGraph4j's test applies its internal hook chains (``NodeHooks``, ``EdgeHooks``) by hand:
the before-call chain, then the after-call chain, then the wrap chain, each on its own.  Their
public form is a graph with the hooks registered (SPEC §6), so here one run applies them all,
around one node and one conditional edge, and the tests check what each chain left in the
state.  The hooks are ``NestedNodeHook``/``NestedEdgeHook`` at levels ``level1`` and
``level2`` (``lg4j_support``), with ``RegisterHookChannel`` and ``SumValueChannel`` in the schema.
"""

from __future__ import annotations

from typing import Any

from lg4j_support import (
    EDGE_AFTER_CALL,
    EDGE_HOOKS,
    NODE_AFTER_CALL,
    NODE_HOOKS,
    NestedEdgeHook,
    NestedNodeHook,
    checked_node,
    register_hook_channel,
    sum_value_channel,
)

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    Command,
    RunnableConfig,
    StateGraph,
)


def test_node_hooks() -> None:
    """``HookTest.testNodeHooks``: before-call hooks run last-added first (their updates reach
    the state: ``level2`` then ``level1``), after-call hooks chain their results (the sum is
    2), and the wrap hooks' result holds the node's update and the hooks' key."""
    schema = {
        "messages": Channels.appender(),
        NODE_HOOKS: register_hook_channel(),
        NODE_AFTER_CALL: sum_value_channel(),
    }
    hook1, hook2 = NestedNodeHook("level1"), NestedNodeHook("level2")
    seen: list[dict[str, Any]] = []
    wrapped: list[dict[str, Any]] = []
    after2 = hook2.after()

    def recording_after2(node: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
        wrapped.append(dict(result))  # (the first after-call hook gets the wrap chain's result)
        return after2(node, state, config, result)

    def node_1(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        seen.append(dict(state.data))
        return checked_node("node_1")(state, config)

    graph = (
        StateGraph(schema)
        .add_before_call_node_hook(hook1.before())
        .add_before_call_node_hook(hook2.before())
        .add_wrap_call_node_hook(hook1.wrap())
        .add_wrap_call_node_hook(hook2.wrap())
        .add_after_call_node_hook(hook1.after())
        .add_after_call_node_hook(recording_after2)
        .add_node("node_1", node_1)
        .add_edge(START, "node_1")
        .add_edge("node_1", END)
        .compile()
    )
    state = graph.invoke({})

    # the before-call chain: the node sees both levels, last added first
    assert seen[0][NODE_HOOKS] == {"node_1": ["level2", "level1"]}
    assert state.value(NODE_HOOKS) == {"node_1": ["level2", "level1"]}
    # the after-call chain: each hook adds 1 to the result of the previous one
    assert state.value(NODE_AFTER_CALL) == 2
    # the wrap chain: the node's update with the hooks' key, the outer hook's (level1) last
    assert wrapped == [{"messages": "node_1", NODE_HOOKS: {"node_1": ["level1"]}}]
    assert state.value("messages") == ["node_1"]


def test_edge_hooks() -> None:
    """``HookTest.testEdgeHooks``: before-call edge hooks run last-added first (the route
    sees ``level2`` then ``level1``, and that update goes no further, as in LangGraph4j),
    after-call edge hooks chain their ``Command``s (the sum is 2), and the wrap hooks'
    ``Command`` keeps the route's ``goto`` with the hooks' key in its update."""
    schema = {
        "messages": Channels.appender(),
        EDGE_HOOKS: register_hook_channel(),
        EDGE_AFTER_CALL: sum_value_channel(),
    }
    hook1, hook2 = NestedEdgeHook("level1"), NestedEdgeHook("level2")
    seen: list[Any] = []

    def route(state: AgentState, config: RunnableConfig) -> Command:
        seen.append(state.value(EDGE_HOOKS))
        return Command(goto=END)

    graph = (
        StateGraph(schema)
        .add_before_call_edge_hook(hook1.before())
        .add_before_call_edge_hook(hook2.before())
        .add_wrap_call_edge_hook(hook1.wrap())
        .add_wrap_call_edge_hook(hook2.wrap())
        .add_after_call_edge_hook(hook1.after())
        .add_after_call_edge_hook(hook2.after())
        .add_node("node_1", checked_node("node_1"))
        .add_edge(START, "node_1")
        .add_conditional_edges("node_1", route, {END: END})
        .compile()
    )
    state = graph.invoke({})

    assert seen == [{"node_1": ["level2", "level1"]}]
    assert state.value(EDGE_AFTER_CALL) == 2
    # the outer wrap hook (level1, added first) writes the key last
    assert state.value(EDGE_HOOKS) == {"node_1": ["level1"]}
    assert state.value("messages") == ["node_1"]
