"""Port of LangGraph4j's ``LG4JTest`` (``langgraph4j-core``), in process.

Names through SPEC §1's table; each test's docstring names the Java test it ports and says
where SPEC makes it differ.  Not ported, being about Java alone:
``completableFutureException`` (``CompletableFuture.join``'s wrapping) and ``issue370`` (a
``LinkedHashMap`` collector with null values).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from lg4j_support import (
    EDGE_HOOKS,
    MESSAGES_SCHEMA,
    NODE_AFTER_CALL,
    NODE_HOOKS,
    NestedNodeHook,
    make_node,
    messages,
    parallel_branch,
    parallel_branch_on_start,
    register_hook_channel,
)

from langgraph_celery import (
    END,
    MARK_FOR_REMOVAL,
    START,
    AgentState,
    Channel,
    Channels,
    Command,
    CompileConfig,
    CompiledGraph,
    GraphDefinitionError,
    GraphInput,
    NodeError,
    NodeOutput,
    RemoveByHash,
    RunnableConfig,
    StateGraph,
)

STATE_SCHEMA: dict[str, Channel] = {"messages": Channels.appender()}


def steps(state: AgentState) -> int:
    """``LG4JTest.State.steps()``"""
    return int(state.value("steps", 0))


def compile_error(graph: StateGraph) -> str:
    with pytest.raises(GraphDefinitionError) as caught:
        graph.compile()
    return str(caught.value)


def test_validation() -> None:
    """``LG4JTest.testValidation``.

    Differs where SPEC §3 does: a node with no outgoing edge does not compile (LangGraph4j
    compiles ``START -> agent_1`` alone), and errors are ``GraphDefinitionError``s whose message
    names the culprit rather than LangGraph4j's exact texts.  As in LangGraph4j, an edge leaving
    ``END`` and a conditional edge with an empty mapping are refused when added."""
    workflow = StateGraph()
    assert "START" in compile_error(workflow)  # "missing Entry Point"

    workflow.add_edge(START, "agent_1")
    assert "'agent_1'" in compile_error(workflow)  # "... 'agent_1' refers to undefined node!"

    workflow.add_node("agent_1", lambda state, config: {"prop1": "test"})
    # (LangGraph4j compiles here; SPEC §3: a node with no outgoing edge is refused)
    message = compile_error(workflow)
    assert "'agent_1'" in message
    assert "outgoing" in message

    workflow.add_edge("agent_1", END)
    assert isinstance(workflow.compile(), CompiledGraph)

    with pytest.raises(GraphDefinitionError, match="END"):
        workflow.add_edge(END, "agent_1")
    assert isinstance(workflow.compile(), CompiledGraph)  # (the refused edge was not added)

    workflow.add_node("agent_2", lambda state, config: {"prop2": "test"})
    workflow.add_edge("agent_2", "agent_3")
    message = compile_error(workflow)
    assert "'agent_2'" in message or "'agent_3'" in message

    with pytest.raises(GraphDefinitionError, match="'agent_1'"):
        workflow.add_conditional_edges("agent_1", lambda state: "agent_3", {})


def test_running_one_node() -> None:
    """``LG4JTest.testRunningOneNode``."""

    def agent_1(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == "agent_1"
        return {"prop1": "test"}

    app = (
        StateGraph()
        .add_edge(START, "agent_1")
        .add_node("agent_1", agent_1)
        .add_edge("agent_1", END)
        .compile()
    )
    result = app.invoke(GraphInput.args({"input": "test1"}), RunnableConfig())
    assert result is not None
    assert dict(result.data) == {"input": "test1", "prop1": "test"}


def test_runnable_config_metadata() -> None:
    """``LG4JTest.testRunnableConfigMetadata``."""
    seen: list[Any] = []

    def agent(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == "agent_1"
        seen.append(config.metadata.get("configData"))
        return {"prop1": "test"}

    app = (
        StateGraph()
        .add_edge(START, "agent_1")
        .add_node("agent_1", agent)
        .add_edge("agent_1", END)
        .compile()
    )
    config = RunnableConfig().add_metadata("configData", "test")
    result = app.invoke(GraphInput.args({"input": "test1"}), config)
    assert dict(result.data) == {"input": "test1", "prop1": "test"}
    assert seen == ["test"]


def test_running_one_node_one_remove_by_null() -> None:
    """``LG4JTest.testRunningOneNodeOneRemoveByNull`` (``Channels.base(null, null)`` is
    ``Channel()``)."""

    def agent_1(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == "agent_1"
        return {"prop1": MARK_FOR_REMOVAL}

    app = (
        StateGraph({"prop1": Channel()})
        .add_edge(START, "agent_1")
        .add_node("agent_1", agent_1)
        .add_edge("agent_1", END)
        .compile()
    )
    result = app.invoke(GraphInput.args({"input": "test1", "prop1": "test"}), RunnableConfig())
    assert dict(result.data) == {"input": "test1"}


def appender_chain(*actions: Any) -> CompiledGraph:
    graph = StateGraph(STATE_SCHEMA)
    previous = START
    for index, action in enumerate(actions, start=1):
        graph.add_node(f"agent_{index}", action)
        graph.add_edge(previous, f"agent_{index}")
        previous = f"agent_{index}"
    return graph.add_edge(previous, END).compile()


def test_with_appender() -> None:
    """``LG4JTest.testWithAppender`` (Java's ``String[]`` is a list: SPEC §2 appends a list
    element by element and any other value, a tuple too, as one element)."""

    def agent(node_id: str, update: Any) -> Any:
        def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            assert config.node_id == node_id
            return update(state)

        return action

    app = appender_chain(
        agent("agent_1", lambda state: {"messages": "message1"}),
        agent("agent_2", lambda state: {"messages": ["message2"]}),
        agent(
            "agent_3",
            lambda state: {"messages": "message3", "steps": len(messages(state)) + 1},
        ),
    )
    result = app.invoke(GraphInput.no_args(), RunnableConfig())
    assert steps(result) == 3
    assert messages(result) == ["message1", "message2", "message3"]


def test_with_appender_one_remove() -> None:
    """``LG4JTest.testWithAppenderOneRemove``."""
    app = appender_chain(
        lambda state, config: {"messages": "message1"},
        lambda state, config: {"messages": ["message2"]},
        lambda state, config: {
            "messages": RemoveByHash("message2"),
            "steps": len(messages(state)) + 1,
        },
    )
    result = app.invoke(GraphInput.no_args(), RunnableConfig())
    assert steps(result) == 3
    assert messages(result) == ["message1"]


def test_with_appender_one_append_one_remove() -> None:
    """``LG4JTest.testWithAppenderOneAppendOneRemove``."""
    app = appender_chain(
        lambda state, config: {"messages": "message1"},
        lambda state, config: {"messages": ["message2"]},
        lambda state, config: {"messages": ["message3", RemoveByHash("message2")]},
        lambda state, config: {"messages": ["message4"], "steps": len(messages(state)) + 1},
    )
    result = app.invoke(GraphInput.no_args(), RunnableConfig())
    assert steps(result) == 3
    assert messages(result) == ["message1", "message3", "message4"]


def last_state(app: CompiledGraph, config: RunnableConfig) -> AgentState:
    outputs = list(app.stream(GraphInput.no_args(), config))
    assert outputs
    return outputs[-1].state


def test_with_parallel_branch() -> None:
    """``LG4JTest.testWithParallelBranch``: fan-out from a node and from ``START``, with a
    parallel executor (``addParallelNodeExecutor``) given for the fan-out's source."""
    with ThreadPoolExecutor(4) as pool:
        state = last_state(
            parallel_branch().compile(), RunnableConfig(parallel_executors={"A": pool})
        )
    assert messages(state) == ["A", "A1", "A2", "A3", "B", "C"]

    with ThreadPoolExecutor(1) as single:
        state = last_state(
            parallel_branch_on_start().compile(),
            RunnableConfig(parallel_executors={START: single}),
        )
    assert messages(state) == ["A1", "A2", "A3", "B", "C"]


def parallel_graph() -> StateGraph:
    workflow = StateGraph(STATE_SCHEMA)
    for node in ("A", "A1", "A2", "A3", "B", "C"):
        workflow.add_node(node, make_node(node))
    return workflow.add_edge(START, "A").add_edge("C", END)


def test_with_parallel_branch_with_errors() -> None:
    """``LG4JTest.testWithParallelBranchWithErrors``.

    LangGraph4j runs a fan-out as one parallel node, so it refuses branches that do not all lead
    to one node, and conditional edges on a branch.  SPEC §3 runs supersteps instead, where both
    are well defined (each step runs the nodes the previous one's edges picked), so they
    compile and run here: these cases check how.  A duplicate edge is refused, as in
    LangGraph4j (SPEC is silent); a conditional edge from a node that has plain edges is
    refused at compile (SPEC §3), not when it is added."""
    only_one_target = parallel_graph()
    only_one_target.add_edge("A", "A1").add_edge("A", "A2").add_edge("A", "A3")
    only_one_target.add_edge("A1", "B").add_edge("A2", "B").add_edge("A3", "C")
    only_one_target.add_edge("B", "C")
    outputs = list(only_one_target.compile().stream(GraphInput.no_args(), RunnableConfig()))
    # step 3 runs B and C together (from A1, A2 and from A3), step 4 runs C again (from B)
    assert [output.node for output in outputs] == [
        START, "A", "A1", "A2", "A3", "B", "C", "C", END,
    ]  # fmt: skip
    assert messages(outputs[-1].state) == ["A", "A1", "A2", "A3", "B", "C", "C"]

    no_conditional_edge = parallel_graph()
    no_conditional_edge.add_edge("A", "A1").add_edge("A", "A3")
    no_conditional_edge.add_edge("A1", "B").add_edge("A2", "B").add_edge("A3", "B")
    no_conditional_edge.add_edge("B", "C")
    no_conditional_edge.add_conditional_edges("A", lambda state: "next", {"next": "A2"})
    message = compile_error(no_conditional_edge)
    assert "'A'" in message
    assert "conditional" in message

    conditional_edge_on_branch = parallel_graph()
    conditional_edge_on_branch.add_edge("A", "A1").add_edge("A", "A2").add_edge("A", "A3")
    conditional_edge_on_branch.add_edge("A1", "B").add_edge("A2", "B")
    conditional_edge_on_branch.add_conditional_edges("A3", lambda state: "next", {"next": "B"})
    conditional_edge_on_branch.add_edge("B", "C")
    state = last_state(conditional_edge_on_branch.compile(), RunnableConfig())
    assert messages(state) == ["A", "A1", "A2", "A3", "B", "C"]

    duplicate_target = parallel_graph()
    duplicate_target.add_edge("A", "A1").add_edge("A", "A2").add_edge("A", "A3")
    duplicate_target.add_edge("A", "A2")
    duplicate_target.add_edge("A1", "B").add_edge("A2", "B").add_edge("A3", "B")
    duplicate_target.add_edge("B", "C")
    message = compile_error(duplicate_target)  # "edge [A] has duplicate targets [A2]!"
    assert "'A'" in message
    assert "'A2'" in message


def test_get_result_from_generator() -> None:
    """``LG4JTest.testGetResultFromGenerator``."""
    app = (
        StateGraph(STATE_SCHEMA)
        .add_edge(START, "agent_1")
        .add_node("agent_1", make_node("agent_1"))
        .add_edge("agent_1", END)
        .compile()
    )
    stream = app.stream(GraphInput.no_args(), RunnableConfig())
    for _ in stream:
        pass
    result = stream.result
    assert not result.is_empty()
    assert result.is_state_data()
    assert result.as_state_data()["messages"] == ["agent_1"]


def test_command_node_issue163() -> None:
    """``LG4JTest.testCommandNode_Issue163``: a command node (``addNode(id, AsyncCommandAction,
    EdgeMappings)`` is ``add_node(id, action, destinations)``) goes where its Command says."""

    def command_action(state: AgentState, config: RunnableConfig) -> Command:
        return Command(goto="C2", update={"messages": "B", "next_node": "C2"})

    graph = (
        StateGraph(STATE_SCHEMA)
        .add_node("A", make_node("A"))
        .add_node("B", command_action, [END, "C1", "C2"])
        .add_node("C1", make_node("C1"))
        .add_node("C2", make_node("C2"))
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("C1", END)
        .add_edge("C2", END)
        .compile()
    )
    outputs: list[NodeOutput] = list(graph.stream(GraphInput.no_args(), RunnableConfig()))
    assert len(outputs) == 5
    assert [output.node for output in outputs] == [START, "A", "B", "C2", END]
    assert outputs[2].node == "B"
    assert outputs[2].state.value("next_node") == "C2"
    assert messages(outputs[-1].state) == ["A", "B", "C2"]


def failing_graph(action: Any) -> CompiledGraph:
    return (
        StateGraph(MESSAGES_SCHEMA)
        .add_node("node_with_exception", action)
        .add_edge(START, "node_with_exception")
        .add_edge("node_with_exception", END)
        .compile(CompileConfig(graph_id="handle_exception"))
    )


def test_handle_runtime_exception() -> None:
    """``LG4JTest.testHandleRuntimeException``: a node's failure names the node, with the
    original as its cause.  LangGraph4j's ``GraphRunnerException`` carries the node's config;
    SPEC's ``NodeError`` carries ``node_id`` and ``error_type``.  The graph id is set with
    ``CompileConfig(graph_id=...)``: SPEC's ``graph_id`` is read-only, so it is no metadata key."""
    seen: list[str | None] = []

    def node_with_exception(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        seen.append(config.graph_id)
        raise RuntimeError("test exception")

    with pytest.raises(NodeError) as caught:
        failing_graph(node_with_exception).invoke(GraphInput.no_args(), RunnableConfig())
    assert caught.value.node_id == "node_with_exception"
    assert caught.value.error_type == "RuntimeError"
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert str(caught.value.__cause__) == "test exception"
    assert seen == ["handle_exception"]


def test_handle_graph_run_exception() -> None:
    """``LG4JTest.testHandleGraphRunException``: a node that raises the library's node error
    itself (``new GraphRunnerException(config, "test exception")``; here
    ``NodeError(config.node_id, ...)``) fails the run with that very error, unwrapped."""
    raised: list[NodeError] = []

    def node_with_exception(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id is not None
        raised.append(NodeError(config.node_id, "RuntimeError", "test exception"))
        raise raised[0]

    with pytest.raises(NodeError) as caught:
        failing_graph(node_with_exception).invoke(GraphInput.no_args(), RunnableConfig())
    assert caught.value is raised[0]
    assert caught.value.__cause__ is None  # (it is the root cause)
    assert caught.value.node_id == "node_with_exception"
    assert caught.value.error_message == "test exception"


# -- testNestedNodeWrapHooks, testNestedNodeAndEdgeWrapHooks ------------------------------


def node_action(node_id: str) -> Any:
    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == node_id
        return {"messages": node_id}

    return action


def nested_hooks_graph(schema: dict[str, Channel]) -> StateGraph:
    graph = StateGraph(schema)
    graph.add_wrap_call_node_hook(NestedNodeHook("wrap-global-1").wrap())
    graph.add_before_call_node_hook(NestedNodeHook("before-global-1").before())
    graph.add_before_call_node_hook(NestedNodeHook("before-global-2").before())
    graph.add_after_call_node_hook(NestedNodeHook("after-global-1").after())
    for node in ("node_1", "node_2", "node_3", "node_4"):
        graph.add_node(node, node_action(node))
    return graph


TRACE = ["before-global-2", "before-global-1", "wrap-global-1"]


def test_nested_node_wrap_hooks() -> None:
    """``LG4JTest.testNestedNodeWrapHooks``"""
    schema = {"messages": Channels.appender(), NODE_HOOKS: register_hook_channel()}
    graph = nested_hooks_graph(schema)
    graph.add_edge(START, "node_1").add_edge("node_1", "node_2").add_edge("node_2", "node_3")
    graph.add_edge("node_3", "node_4").add_edge("node_4", END)

    state = graph.compile().invoke(GraphInput.args({"input": "test1"}), RunnableConfig())
    assert state.value("messages") == ["node_1", "node_2", "node_3", "node_4"]
    hooks = state.value(NODE_HOOKS)
    assert isinstance(hooks, dict)
    assert "node_1" in hooks
    for node in ("node_1", "node_2", "node_3", "node_4"):
        assert hooks[node] == TRACE
    assert state.value(NODE_AFTER_CALL) == 1  # (not asserted by LangGraph4j's test)


def test_nested_node_and_edge_wrap_hooks() -> None:
    """``LG4JTest.testNestedNodeAndEdgeWrapHooks``"""
    schema = {
        "messages": Channels.appender(),
        NODE_HOOKS: register_hook_channel(),
        EDGE_HOOKS: register_hook_channel(),
    }

    def after_edge_hook_go_to_end(
        source_id: str, state: AgentState, config: RunnableConfig, last_result: Command
    ) -> Command:
        assert source_id == config.node_id
        return Command(goto=END, update=last_result.update)

    graph = nested_hooks_graph(schema)
    graph.add_after_call_edge_hook("node_2", after_edge_hook_go_to_end)
    graph.add_edge(START, "node_1").add_edge("node_1", "node_2")
    graph.add_conditional_edges(
        "node_2", lambda s, c: Command(goto="node_3"), {"node_3": "node_3", END: END}
    )
    graph.add_edge("node_3", "node_4").add_edge("node_4", END)

    state = graph.compile().invoke(GraphInput.args({"input": "test1"}), RunnableConfig())
    assert state.value("messages") == ["node_1", "node_2"]
    hooks = state.value(NODE_HOOKS)
    assert isinstance(hooks, dict)
    assert "node_1" in hooks
    assert hooks["node_1"] == TRACE
    assert hooks["node_2"] == TRACE
    assert hooks.get("node_3") is None
    assert hooks.get("node_4") is None
