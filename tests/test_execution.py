"""SPEC §3: running graphs in process (nodes, edges, supersteps, streams, configs)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    Channels,
    Command,
    CompileConfig,
    GraphError,
    GraphInput,
    GraphRecursionError,
    GraphResult,
    GraphStateError,
    InvalidUpdateError,
    NodeError,
    NodeOutput,
    RunnableConfig,
    Send,
    StateGraph,
    StateSnapshot,
    StreamMode,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver
from langgraph_celery.graph.config import RESERVED_METADATA_KEYS

Action = Callable[..., Any]


def setter(key: str, value: Any) -> Action:
    def action(state: AgentState) -> dict[str, Any]:
        return {key: value}

    return action


def log_node(name: str) -> Action:
    """A node appending its name to the ``log`` appender."""

    def action(state: AgentState) -> dict[str, Any]:
        return {"log": [name]}

    return action


def log_graph() -> StateGraph:
    return StateGraph({"log": Channels.appender()})


def chain_graph(*nodes: str) -> StateGraph:
    graph = log_graph()
    previous = START
    for node in nodes:
        graph.add_node(node, log_node(node))
        graph.add_edge(previous, node)
        previous = node
    graph.add_edge(previous, END)
    return graph


# -- node actions -------------------------------------------------------------------------------


def test_sync_node_with_state_only() -> None:
    graph = StateGraph()
    graph.add_node("double", lambda state: {"x": state.value("x") * 2})
    graph.add_edge(START, "double").add_edge("double", END)
    assert graph.compile().invoke({"x": 21}).data == {"x": 42}


def test_async_node() -> None:
    async def double(state: AgentState) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"x": state.value("x") * 2}

    graph = StateGraph().add_node("double", double)
    graph.add_edge(START, "double").add_edge("double", END)
    compiled = graph.compile()
    assert compiled.invoke({"x": 2}).data == {"x": 4}
    assert asyncio.run(compiled.ainvoke({"x": 3})).data == {"x": 6}


def test_node_returning_none_changes_nothing() -> None:
    graph = StateGraph().add_node("noop", lambda state: None)
    graph.add_edge(START, "noop").add_edge("noop", END)
    assert graph.compile().invoke({"a": 1}).data == {"a": 1}


def test_node_with_config_sees_runtime_fields() -> None:
    seen: dict[str, Any] = {}

    def sync_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        seen["sync"] = (config.node_id, config.graph_id, dict(config.metadata))
        return {}

    async def async_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        seen["async"] = (config.node_id, config.graph_id, dict(config.metadata))
        return {}

    graph = StateGraph().add_node("first", sync_node).add_node("second", async_node)
    graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    compiled = graph.compile(CompileConfig(graph_id="gid-1"))
    compiled.invoke({}, RunnableConfig(metadata={"user": "ada"}))
    assert seen == {
        "sync": ("first", "gid-1", {"user": "ada"}),
        "async": ("second", "gid-1", {"user": "ada"}),
    }


def test_callable_object_node() -> None:
    class Adder:
        def __call__(self, state: AgentState) -> dict[str, Any]:
            return {"x": state.value("x") + 1}

    graph = StateGraph().add_node("add", Adder())
    graph.add_edge(START, "add").add_edge("add", END)
    assert graph.compile().invoke({"x": 1}).data == {"x": 2}


@pytest.mark.parametrize("bad", ["a string", ["a", "list"], 42, ("t",)])
def test_invalid_node_return_names_the_node(bad: Any) -> None:
    graph = StateGraph().add_node("bad_node", lambda state: bad)
    graph.add_edge(START, "bad_node").add_edge("bad_node", END)
    with pytest.raises(InvalidUpdateError, match="'bad_node'"):
        graph.compile().invoke({})


def test_invalid_async_node_return_in_parallel_step_names_the_node() -> None:
    async def bad(state: AgentState) -> Any:
        return "nope"

    graph = StateGraph().add_node("good", setter("g", 1)).add_node("bad_async", bad)
    graph.add_edge(START, "good").add_edge(START, "bad_async")
    graph.add_edge("good", END).add_edge("bad_async", END)
    with pytest.raises(InvalidUpdateError, match="'bad_async'"):
        graph.compile().invoke({})


def test_node_exception_becomes_node_error() -> None:
    def fails(state: AgentState) -> None:
        raise KeyError("missing thing")

    graph = StateGraph().add_node("fails", fails)
    graph.add_edge(START, "fails").add_edge("fails", END)
    with pytest.raises(NodeError) as info:
        graph.compile().invoke({})
    error = info.value
    assert error.node_id == "fails"
    assert error.error_type == "KeyError"
    assert isinstance(error.__cause__, KeyError)
    assert error.__cause__.args == ("missing thing",)
    assert isinstance(error, GraphError)


def test_async_node_exception_in_parallel_step_becomes_node_error() -> None:
    async def fails(state: AgentState) -> None:
        raise ZeroDivisionError("div")

    graph = StateGraph().add_node("ok", setter("a", 1)).add_node("async_fail", fails)
    graph.add_edge(START, "ok").add_edge(START, "async_fail")
    graph.add_edge("ok", END).add_edge("async_fail", END)
    with pytest.raises(NodeError) as info:
        asyncio.run(graph.compile().ainvoke({}))
    assert info.value.node_id == "async_fail"
    assert info.value.error_type == "ZeroDivisionError"
    assert isinstance(info.value.__cause__, ZeroDivisionError)


# -- fan-out, joins, merge order ----------------------------------------------------------------


def test_fan_out_runs_sync_targets_in_parallel() -> None:
    barrier = threading.Barrier(2, timeout=2)

    def waiter(name: str) -> Action:
        def action(state: AgentState) -> dict[str, Any]:
            barrier.wait()  # raises BrokenBarrierError unless both run at once
            return {"log": [name]}

        return action

    graph = log_graph().add_node("a", waiter("a")).add_node("b", waiter("b"))
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge("a", END).add_edge("b", END)
    assert graph.compile().invoke({})["log"] == ["a", "b"]


def test_fan_out_runs_sync_targets_in_parallel_under_ainvoke() -> None:
    barrier = threading.Barrier(2, timeout=2)

    def waiter(name: str) -> Action:
        def action(state: AgentState) -> dict[str, Any]:
            barrier.wait()
            return {"log": [name]}

        return action

    graph = log_graph().add_node("a", waiter("a")).add_node("b", waiter("b"))
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge("a", END).add_edge("b", END)
    assert asyncio.run(graph.compile().ainvoke({}))["log"] == ["a", "b"]


def test_fan_out_runs_async_targets_concurrently() -> None:
    arrived: list[str] = []

    def waiter(name: str) -> Action:
        async def action(state: AgentState) -> dict[str, Any]:
            arrived.append(name)
            # Completes only if the other node started while this one waits.
            async with asyncio.timeout(2):
                while len(arrived) < 2:
                    await asyncio.sleep(0.001)
            return {"log": [name]}

        return action

    graph = log_graph().add_node("a", waiter("a")).add_node("b", waiter("b"))
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge("a", END).add_edge("b", END)
    assert asyncio.run(graph.compile().ainvoke({}))["log"] == ["a", "b"]
    arrived.clear()
    assert graph.compile().invoke({})["log"] == ["a", "b"]


def test_fan_out_async_targets_with_events() -> None:
    async def run() -> AgentState:
        events = {"a": asyncio.Event(), "b": asyncio.Event()}

        def waiter(me: str, other: str) -> Action:
            async def action(state: AgentState) -> dict[str, Any]:
                events[me].set()
                await asyncio.wait_for(events[other].wait(), timeout=2)
                return {"log": [me]}

            return action

        graph = log_graph().add_node("a", waiter("a", "b")).add_node("b", waiter("b", "a"))
        graph.add_edge(START, "a").add_edge(START, "b")
        graph.add_edge("a", END).add_edge("b", END)
        return await graph.compile().ainvoke({})

    assert asyncio.run(run())["log"] == ["a", "b"]


def test_fan_out_targets_share_one_superstep() -> None:
    """Both targets see the state from before the step; the next node sees both updates."""
    seen: dict[str, Any] = {}

    def observer(name: str) -> Action:
        def action(state: AgentState) -> dict[str, Any]:
            seen[name] = sorted(state.data)
            return {name: True}

        return action

    graph = StateGraph()
    for name in ("a", "b", "after"):
        graph.add_node(name, observer(name))
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge("a", "after").add_edge("b", "after").add_edge("after", END)
    result = graph.compile().invoke({"input": 1})
    assert seen == {"a": ["input"], "b": ["input"], "after": ["a", "b", "input"]}
    assert result.data == {"input": 1, "a": True, "b": True, "after": True}


def test_target_of_two_edges_runs_once_per_step() -> None:
    graph = log_graph()
    for name in ("a", "b", "c"):
        graph.add_node(name, log_node(name))
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge("a", "c").add_edge("b", "c").add_edge("c", END)
    assert graph.compile().invoke({})["log"] == ["a", "b", "c"]


def test_join_waits_for_both_sources_across_steps() -> None:
    seen_by_join: list[list[str]] = []

    def join(state: AgentState) -> dict[str, Any]:
        seen_by_join.append(list(state["log"]))
        return {"log": ["join"]}

    graph = log_graph()
    for name in ("short", "long1", "long2", "long3"):
        graph.add_node(name, log_node(name))
    graph.add_node("join", join)
    graph.add_edge(START, "short").add_edge(START, "long1")
    graph.add_edge("long1", "long2").add_edge("long2", "long3")
    graph.add_edge(["short", "long3"], "join").add_edge("join", END)
    compiled = graph.compile()
    nodes = [output.node for output in compiled.stream({})]
    assert nodes == [START, "short", "long1", "long2", "long3", "join", END]
    result = compiled.invoke({})
    assert seen_by_join == [["short", "long1", "long2", "long3"]] * 2
    assert result["log"] == ["short", "long1", "long2", "long3", "join"]


def test_join_with_sources_in_the_same_step() -> None:
    graph = log_graph()
    for name in ("a", "b", "c"):
        graph.add_node(name, log_node(name))
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge(["a", "b"], "c").add_edge("c", END)
    assert graph.compile().invoke({})["log"] == ["a", "b", "c"]


def test_merge_order_is_node_added_order() -> None:
    """Updates merge in the order the nodes were added, not the order they finish in: here
    ``mid`` waits for ``alpha`` to finish and ``zeta`` (added first) for ``mid``."""
    order: list[str] = []
    finished: list[str] = []
    done = {name: threading.Event() for name in ("zeta", "alpha", "mid")}

    def record(old: Any, new: Any) -> Any:
        order.append(new)
        return (old or []) + [new]

    def writer(name: str, after: str | None) -> Action:
        def action(state: AgentState) -> dict[str, Any]:
            if after is not None and not done[after].wait(10):
                raise TimeoutError(f"{after} never finished: the step's nodes did not run at once")
            finished.append(name)
            done[name].set()
            return {"order": name}

        return action

    graph = StateGraph({"order": Channel(record)})
    graph.add_node("zeta", writer("zeta", after="mid"))
    graph.add_node("alpha", writer("alpha", after=None))
    graph.add_node("mid", writer("mid", after="alpha"))
    graph.add_edge(START, "mid").add_edge(START, "alpha").add_edge(START, "zeta")
    for name in ("zeta", "alpha", "mid"):
        graph.add_edge(name, END)
    result = graph.compile().invoke({})
    assert finished == ["alpha", "mid", "zeta"]
    assert order == ["zeta", "alpha", "mid"]
    assert result["order"] == ["zeta", "alpha", "mid"]


def test_conflicting_writes_without_reducer_raise_naming_key() -> None:
    graph = StateGraph({"safe": Channels.appender()})
    graph.add_node("a", lambda s: {"clash": 1, "safe": "a"})
    graph.add_node("b", lambda s: {"clash": 2, "safe": "b"})
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge("a", END).add_edge("b", END)
    with pytest.raises(InvalidUpdateError, match="'clash'"):
        graph.compile().invoke({})


def test_writes_with_reducer_from_parallel_nodes_are_merged() -> None:
    graph = StateGraph({"safe": Channels.appender()})
    graph.add_node("a", lambda s: {"safe": "a", "only_a": 1})
    graph.add_node("b", lambda s: {"safe": "b", "only_b": 2})
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge("a", END).add_edge("b", END)
    assert graph.compile().invoke({}).data == {"safe": ["a", "b"], "only_a": 1, "only_b": 2}


def test_single_node_may_write_a_key_twice_over_steps() -> None:
    graph = StateGraph().add_node("a", setter("k", 1)).add_node("b", setter("k", 2))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    assert graph.compile().invoke({}).data == {"k": 2}


# -- conditional edges --------------------------------------------------------------------------


def branching_graph(route: Action, mapping: Any = None) -> StateGraph:
    graph = log_graph()
    for name in ("router", "left", "right"):
        graph.add_node(name, log_node(name))
    graph.add_edge(START, "router")
    graph.add_conditional_edges("router", route, mapping)
    graph.add_edge("left", END).add_edge("right", END)
    return graph


def test_conditional_edge_with_label_mapping() -> None:
    def route(state: AgentState) -> str:
        return "go_left" if state.value("side") == "L" else "go_right"

    compiled = branching_graph(route, {"go_left": "left", "go_right": "right"}).compile()
    assert compiled.invoke({"side": "L"})["log"] == ["router", "left"]
    assert compiled.invoke({"side": "R"})["log"] == ["router", "right"]


def test_conditional_edge_mapping_to_end() -> None:
    compiled = branching_graph(lambda s: "stop", {"stop": END, "x": "left", "y": "right"}).compile()
    assert compiled.invoke({})["log"] == ["router"]


def test_conditional_edge_non_string_labels() -> None:
    compiled = branching_graph(lambda s: s.value("n") > 0, {True: "left", False: "right"})
    assert compiled.compile().invoke({"n": 1})["log"] == ["router", "left"]
    assert compiled.compile().invoke({"n": 0})["log"] == ["router", "right"]


def test_conditional_edge_mapping_none_labels_are_node_ids() -> None:
    compiled = branching_graph(lambda s: s.value("to")).compile()
    assert compiled.invoke({"to": "right"})["log"] == ["router", "right"]
    assert compiled.invoke({"to": "left"})["log"] == ["router", "left"]
    assert compiled.invoke({"to": END})["log"] == ["router"]


def test_conditional_edge_mapping_as_list_of_node_ids() -> None:
    compiled = branching_graph(lambda s: "right", ["left", "right"]).compile()
    assert compiled.invoke({})["log"] == ["router", "right"]


def test_conditional_edge_command_goto_and_update() -> None:
    seen: list[Any] = []

    def right(state: AgentState) -> dict[str, Any]:
        seen.append(state.value("flag"))
        return {"log": ["right"]}

    graph = log_graph().add_node("router", log_node("router")).add_node("right", right)
    graph.add_node("left", log_node("left"))
    graph.add_edge(START, "router")
    graph.add_conditional_edges(
        "router",
        lambda s: Command(goto="r", update={"flag": "set-by-route", "log": ["cmd"]}),
        {"r": "right", "l": "left"},
    )
    graph.add_edge("left", END).add_edge("right", END)
    result = graph.compile().invoke({})
    assert seen == ["set-by-route"]
    assert result.data == {"log": ["router", "cmd", "right"], "flag": "set-by-route"}


def test_conditional_edge_command_goto_list() -> None:
    compiled = branching_graph(lambda s: Command(goto=["left", "right"])).compile()
    assert compiled.invoke({})["log"] == ["router", "left", "right"]


def test_conditional_edge_list_of_labels_fans_out_in_one_step() -> None:
    barrier = threading.Barrier(2, timeout=2)

    def waiter(name: str) -> Action:
        def action(state: AgentState) -> dict[str, Any]:
            barrier.wait()
            return {"log": [name]}

        return action

    graph = log_graph().add_node("router", log_node("router"))
    graph.add_node("left", waiter("left")).add_node("right", waiter("right"))
    graph.add_edge(START, "router")
    graph.add_conditional_edges("router", lambda s: ["R", "L"], {"L": "left", "R": "right"})
    graph.add_edge("left", END).add_edge("right", END)
    compiled = graph.compile()
    outputs = list(compiled.stream({}))
    assert [o.node for o in outputs] == [START, "router", "left", "right", END]
    # Both outputs of the fan-out step carry the state merged after the step.
    assert outputs[2].state["log"] == ["router", "left", "right"]
    assert outputs[3].state["log"] == ["router", "left", "right"]


def test_conditional_edge_list_of_sends_map_reduce() -> None:
    received: list[Any] = []
    lock = threading.Lock()

    def square(state: AgentState) -> dict[str, Any]:
        with lock:
            received.append(dict(state.data))
        return {"results": [state.value("n") ** 2]}

    def fan(state: AgentState) -> list[Send]:
        return [Send("square", {"n": n}) for n in state["numbers"]]

    graph = StateGraph({"results": Channels.appender()})
    graph.add_node("plan", lambda s: None).add_node("square", square)
    graph.add_node("total", lambda s: {"total": sum(s["results"])})
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", fan)
    graph.add_edge("square", "total").add_edge("total", END)
    result = graph.compile().invoke({"numbers": [1, 2, 3, 4]})
    # each Send runs the node once with its arg as the state
    assert sorted(r["n"] for r in received) == [1, 2, 3, 4]
    assert all(set(r) == {"n"} for r in received)
    assert result["results"] == [1, 4, 9, 16]  # reduced in Send order
    assert result["total"] == 30
    assert result["numbers"] == [1, 2, 3, 4]


def test_sends_stream_one_output_per_send() -> None:
    graph = StateGraph({"out": Channels.appender()})
    graph.add_node("worker", lambda s: {"out": [s.value("v")]})
    graph.add_conditional_edges(START, lambda s: [Send("worker", {"v": v}) for v in "xyz"])
    graph.add_edge("worker", END)
    outputs = list(graph.compile().stream({}, RunnableConfig(stream_mode=StreamMode.UPDATES)))
    assert [o.node for o in outputs] == [START, "worker", "worker", "worker", END]
    assert [dict(o.update or {}) for o in outputs[1:4]] == [
        {"out": ["x"]},
        {"out": ["y"]},
        {"out": ["z"]},
    ]
    assert outputs[-1].state["out"] == ["x", "y", "z"]


def test_route_with_config_and_async_route() -> None:
    seen: list[Any] = []

    def sync_route(state: AgentState, config: RunnableConfig) -> str:
        seen.append(("sync", config.node_id, config.graph_id, config.metadata.get("pick")))
        return config.metadata["pick"]

    async def async_route(state: AgentState, config: RunnableConfig) -> str:
        await asyncio.sleep(0)
        seen.append(("async", config.node_id, config.graph_id))
        return "done"

    graph = log_graph()
    for name in ("router", "left", "right"):
        graph.add_node(name, log_node(name))
    graph.add_edge(START, "router")
    graph.add_conditional_edges("router", sync_route, {"L": "left", "R": "right"})
    graph.add_conditional_edges("left", async_route, {"done": END})
    graph.add_edge("right", END)
    compiled = graph.compile(CompileConfig(graph_id="routes"))
    result = compiled.invoke({}, RunnableConfig(metadata={"pick": "L"}))
    assert result["log"] == ["router", "left"]
    assert seen == [("sync", "router", "routes", "L"), ("async", "left", "routes")]
    assert asyncio.run(compiled.ainvoke({}, RunnableConfig(metadata={"pick": "R"})))["log"] == [
        "router",
        "right",
    ]


def test_async_route_state_only() -> None:
    async def route(state: AgentState) -> str:
        return "right"

    assert branching_graph(route).compile().invoke({})["log"] == ["router", "right"]


def test_route_sees_the_merged_state_of_its_step() -> None:
    graph = StateGraph().add_node("router", setter("decision", "right"))
    graph.add_node("left", setter("went", "left")).add_node("right", setter("went", "right"))
    graph.add_edge(START, "router")
    graph.add_conditional_edges("router", lambda s: s["decision"])
    graph.add_edge("left", END).add_edge("right", END)
    assert graph.compile().invoke({})["went"] == "right"


def test_unknown_label_is_graph_state_error_naming_edge_and_label() -> None:
    compiled = branching_graph(lambda s: "sideways", {"l": "left", "r": "right"}).compile()
    with pytest.raises(GraphStateError) as info:
        compiled.invoke({})
    message = str(info.value)
    assert "'router'" in message
    assert "'sideways'" in message


def test_unknown_label_with_mapping_none() -> None:
    compiled = branching_graph(lambda s: "no_such_node").compile()
    with pytest.raises(GraphStateError) as info:
        compiled.invoke({})
    assert "'router'" in str(info.value)
    assert "'no_such_node'" in str(info.value)


def test_unknown_label_in_a_list() -> None:
    compiled = branching_graph(lambda s: ["left", "bogus"], ["left", "right"]).compile()
    with pytest.raises(GraphStateError, match="'bogus'"):
        compiled.invoke({})


def test_conditional_entry_point() -> None:
    graph = log_graph().add_node("a", log_node("a")).add_node("b", log_node("b"))
    graph.add_conditional_edges(START, lambda s: s.value("entry"), {"A": "a", "B": "b"})
    graph.add_edge("a", END).add_edge("b", END)
    compiled = graph.compile()
    assert compiled.invoke({"entry": "A"})["log"] == ["a"]
    assert compiled.invoke({"entry": "B"})["log"] == ["b"]
    outputs = list(compiled.stream({"entry": "B"}))
    assert [o.node for o in outputs] == [START, "b", END]


def test_conditional_entry_point_unknown_label() -> None:
    graph = log_graph().add_node("a", log_node("a"))
    graph.add_conditional_edges(START, lambda s: "Z", {"A": "a"})
    graph.add_edge("a", END)
    with pytest.raises(GraphStateError, match="'Z'"):
        graph.compile().invoke({})


def test_loop_with_conditional_edge() -> None:
    graph = StateGraph().add_node("inc", lambda s: {"n": s.value("n", 0) + 1})
    graph.add_edge(START, "inc")
    graph.add_conditional_edges(
        "inc",
        lambda s: "more" if s["n"] < 5 else "stop",
        {
            "more": "inc",
            "stop": END,
        },
    )
    assert graph.compile().invoke({}).data == {"n": 5}


# -- recursion limit ----------------------------------------------------------------------------


def looping_graph(config: CompileConfig | None = None) -> Any:
    graph = StateGraph().add_node("inc", lambda s: {"n": s.value("n", 0) + 1})
    graph.add_edge(START, "inc")
    graph.add_conditional_edges("inc", lambda s: "inc" if s["n"] < s["stop"] else END)
    return graph.compile(config)


def test_recursion_limit_caps_supersteps() -> None:
    compiled = looping_graph(CompileConfig(recursion_limit=3))
    assert compiled.invoke({"stop": 3})["n"] == 3
    with pytest.raises(GraphRecursionError) as info:
        compiled.invoke({"stop": 4})
    assert isinstance(info.value, RecursionError)
    assert isinstance(info.value, GraphError)


def test_default_recursion_limit_is_25() -> None:
    compiled = looping_graph()
    assert compiled.invoke({"stop": 25})["n"] == 25
    with pytest.raises(GraphRecursionError):
        compiled.invoke({"stop": 26})


def test_runnable_config_recursion_limit_overrides_compile_config() -> None:
    compiled = looping_graph(CompileConfig(recursion_limit=2))
    assert compiled.invoke({"stop": 5}, RunnableConfig(recursion_limit=5))["n"] == 5
    with pytest.raises(GraphRecursionError):
        compiled.invoke({"stop": 5}, RunnableConfig(recursion_limit=4))
    generous = looping_graph(CompileConfig(recursion_limit=50))
    with pytest.raises(GraphRecursionError):
        generous.invoke({"stop": 10}, RunnableConfig(recursion_limit=3))


def test_recursion_limit_counts_steps_not_nodes() -> None:
    graph = log_graph()
    for name in ("a", "b", "c", "d"):
        graph.add_node(name, log_node(name))
        graph.add_edge(START, name).add_edge(name, END)
    assert len(graph.compile(CompileConfig(recursion_limit=1)).invoke({})["log"]) == 4


def test_recursion_limit_error_under_stream_and_ainvoke() -> None:
    compiled = looping_graph(CompileConfig(recursion_limit=2))
    with pytest.raises(GraphRecursionError):
        list(compiled.stream({"stop": 10}))
    with pytest.raises(GraphRecursionError):
        asyncio.run(compiled.ainvoke({"stop": 10}))


@pytest.mark.parametrize("limit", [0, -3])
def test_non_positive_recursion_limit_is_value_error(limit: int) -> None:
    with pytest.raises(ValueError):
        RunnableConfig(recursion_limit=limit)
    with pytest.raises(ValueError):
        CompileConfig(recursion_limit=limit)


# -- stream -------------------------------------------------------------------------------------


def diamond() -> StateGraph:
    """START -> a -> (b, c) -> d -> END, each node writing its own key."""
    graph = StateGraph({"log": Channels.appender()})
    for name in ("a", "b", "c", "d"):
        graph.add_node(name, setter_and_log(name))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    graph.add_edge(["b", "c"], "d").add_edge("d", END)
    return graph


def setter_and_log(name: str) -> Action:
    def action(state: AgentState) -> dict[str, Any]:
        return {name: len(state.value("log", [])), "log": [name]}

    return action


def test_stream_values() -> None:
    outputs = list(diamond().compile().stream({"input": "x"}))
    assert all(isinstance(o, NodeOutput) for o in outputs)
    assert [o.node for o in outputs] == [START, "a", "b", "c", "d", END]
    assert outputs[0].is_start() and outputs[-1].is_end()
    assert outputs[0].state.data == {"input": "x", "log": []}
    assert outputs[1].state.data == {"input": "x", "log": ["a"], "a": 0}
    after_bc = {"input": "x", "log": ["a", "b", "c"], "a": 0, "b": 1, "c": 1}
    assert outputs[2].state.data == after_bc
    assert outputs[3].state.data == after_bc
    final = {**after_bc, "log": ["a", "b", "c", "d"], "d": 3}
    assert outputs[4].state.data == final
    assert outputs[5].state.data == final


def test_stream_values_mode_is_the_default() -> None:
    assert RunnableConfig().stream_mode is StreamMode.VALUES
    explicit = list(diamond().compile().stream({}, RunnableConfig(stream_mode=StreamMode.VALUES)))
    default = list(diamond().compile().stream({}))
    assert [(o.node, dict(o.state.data)) for o in explicit] == [
        (o.node, dict(o.state.data)) for o in default
    ]


def test_stream_updates() -> None:
    config = RunnableConfig(stream_mode=StreamMode.UPDATES)
    outputs = list(diamond().compile().stream({"input": "x"}, config))
    assert [o.node for o in outputs] == [START, "a", "b", "c", "d", END]
    updates = {o.node: dict(o.update or {}) for o in outputs[1:-1]}
    assert updates == {
        "a": {"a": 0, "log": ["a"]},
        "b": {"b": 1, "log": ["b"]},
        "c": {"c": 1, "log": ["c"]},
        "d": {"d": 3, "log": ["d"]},
    }
    assert dict(outputs[0].update or {}) == {"input": "x"}
    assert outputs[2].state["log"] == ["a", "b", "c"]


def test_stream_snapshots(saver: BaseCheckpointSaver) -> None:
    compiled = diamond().compile(CompileConfig(checkpoint_saver=saver))
    config = RunnableConfig(thread_id="snap", stream_mode=StreamMode.SNAPSHOTS)
    outputs = list(compiled.stream({"input": "x"}, config))
    assert [o.node for o in outputs] == [START, "a", "b", "c", "d", END]
    assert all(isinstance(o, StateSnapshot) for o in outputs)
    snapshots: list[StateSnapshot] = outputs  # type: ignore[assignment]
    assert [s.next for s in snapshots] == [("a",), ("b", "c"), ("d",), ("d",), (), ()]
    steps = [s.step for s in snapshots]
    assert steps[1] == steps[0] + 1
    assert steps[2] == steps[3] == steps[1] + 1
    assert steps[4] == steps[5] == steps[2] + 1
    for snapshot in snapshots:
        assert snapshot.config is not None
        assert snapshot.config.checkpoint_id
        assert snapshot.config.thread_id == "snap"
    ids = [s.config.checkpoint_id for s in snapshots if s.config is not None]
    assert ids[2] == ids[3]  # one checkpoint per superstep
    assert ids[4] == ids[5]
    assert len(set(ids)) == 4
    history = compiled.get_state_history(RunnableConfig(thread_id="snap"))
    assert [h.checkpoint_id for h in history][:4] == [ids[4], ids[2], ids[1], ids[0]]
    assert snapshots[-1].state.data == compiled.get_state(RunnableConfig(thread_id="snap")).values
    assert snapshots[1].state["log"] == ["a"]


def test_stream_result_is_graph_result() -> None:
    stream = diamond().compile().stream({"input": "x"})
    with pytest.raises(GraphStateError):
        _ = stream.result
    first = next(stream)
    assert first.node == START
    with pytest.raises(GraphStateError):
        _ = stream.result
    rest = list(stream)
    assert rest[-1].node == END
    result = stream.result
    assert isinstance(result, GraphResult)
    assert result.kind.name == "STATE_DATA"
    assert result.is_state_data()
    assert result.is_state_data_or_checkpoint_saver_tag()
    assert not result.is_empty()
    assert not result.is_node_output()
    assert not result.is_interruption_metadata()
    assert not result.is_checkpoint_saver_tag()
    expected = {"input": "x", "log": ["a", "b", "c", "d"], "a": 0, "b": 1, "c": 1, "d": 3}
    assert result.as_state_data() == expected
    assert result.as_state_data_or_last_checkpoint_state_data() == expected


def test_astream() -> None:
    async def run() -> tuple[list[str], GraphResult]:
        stream = diamond().compile().astream({"input": 1})
        nodes = [output.node async for output in stream]
        return nodes, stream.result

    nodes, result = asyncio.run(run())
    assert nodes == [START, "a", "b", "c", "d", END]
    assert result.is_state_data()
    assert result.as_state_data()["log"] == ["a", "b", "c", "d"]


def test_astream_updates_mode() -> None:
    async def run() -> list[tuple[str, dict[str, Any]]]:
        config = RunnableConfig(stream_mode=StreamMode.UPDATES)
        return [
            (o.node, dict(o.update or {}))
            async for o in chain_graph("a", "b").compile().astream({}, config)
        ]

    outputs = asyncio.run(run())
    assert outputs[1:3] == [("a", {"log": ["a"]}), ("b", {"log": ["b"]})]


# -- invoke -------------------------------------------------------------------------------------


def test_invoke_returns_final_state() -> None:
    result = chain_graph("a", "b").compile().invoke({"k": "v"})
    assert isinstance(result, AgentState)
    assert result.data == {"k": "v", "log": ["a", "b"]}
    assert result == {"k": "v", "log": ["a", "b"]}


def test_invoke_final_returns_end_output() -> None:
    last = chain_graph("a", "b").compile().invoke_final({"k": "v"})
    assert isinstance(last, NodeOutput)
    assert last.node == END
    assert last.is_end()
    assert last.state.data == {"k": "v", "log": ["a", "b"]}


def test_async_twins() -> None:
    compiled = chain_graph("a", "b").compile()

    async def run() -> tuple[AgentState, NodeOutput | None]:
        return await compiled.ainvoke({"k": 1}), await compiled.ainvoke_final({"k": 2})

    state, last = asyncio.run(run())
    assert state.data == {"k": 1, "log": ["a", "b"]}
    assert last is not None and last.node == END
    assert last.state.data == {"k": 2, "log": ["a", "b"]}


def test_plain_mapping_input_means_args() -> None:
    compiled = chain_graph("a").compile()
    from_mapping = compiled.invoke({"x": 1})
    from_args = compiled.invoke(GraphInput.args({"x": 1}))
    assert from_mapping.data == from_args.data == {"x": 1, "log": ["a"]}


def test_no_args_input() -> None:
    compiled = chain_graph("a").compile()
    assert compiled.invoke(GraphInput.no_args()).data == {"log": ["a"]}
    assert compiled.invoke(None).data == {"log": ["a"]}
    assert compiled.invoke().data == {"log": ["a"]}


def test_graph_input_args_requires_mapping() -> None:
    with pytest.raises(TypeError):
        GraphInput.args(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_input_does_not_leak_between_runs() -> None:
    compiled = chain_graph("a").compile()
    compiled.invoke({"only_first": True})
    assert compiled.invoke({}).data == {"log": ["a"]}


def test_invoke_rejects_non_config() -> None:
    with pytest.raises(TypeError):
        chain_graph("a").compile().invoke({}, {"thread_id": "x"})  # type: ignore[arg-type]


# -- RunnableConfig -----------------------------------------------------------------------------


def test_runnable_config_defaults() -> None:
    config = RunnableConfig()
    assert config.thread_id is None
    assert config.checkpoint_id is None
    assert config.next_node is None
    assert config.stream_mode is StreamMode.VALUES
    assert config.recursion_limit is None
    assert dict(config.metadata) == {}
    assert dict(config.parallel_executors) == {}
    assert config.clone_state is True
    assert config.graph_id is None
    assert config.node_id is None
    assert config.node_path == ()


def test_runnable_config_is_frozen() -> None:
    config = RunnableConfig(thread_id="t")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.thread_id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.metadata["k"] = "v"  # type: ignore[index]
    with pytest.raises(AttributeError):
        config.node_id = "n"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        config.graph_id = "g"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        config.node_path = ("n",)  # type: ignore[misc]
    assert config.thread_id == "t"


def test_metadata_given_as_dict_is_copied() -> None:
    metadata = {"a": 1}
    config = RunnableConfig(metadata=metadata)
    metadata["a"] = 2
    assert dict(config.metadata) == {"a": 1}


def test_put_metadata_returns_new_config() -> None:
    base = RunnableConfig(thread_id="t", metadata={"a": 1})
    changed = base.put_metadata("b", 2)
    replaced = changed.put_metadata("a", 10)
    assert dict(base.metadata) == {"a": 1}
    assert dict(changed.metadata) == {"a": 1, "b": 2}
    assert dict(replaced.metadata) == {"a": 10, "b": 2}
    assert changed is not base
    assert changed.thread_id == "t"


def test_add_metadata_returns_new_config_and_refuses_existing_key() -> None:
    base = RunnableConfig()
    added = base.add_metadata("k", "v")
    assert dict(added.metadata) == {"k": "v"}
    assert dict(base.metadata) == {}
    with pytest.raises(ValueError, match="'k'"):
        added.add_metadata("k", "other")
    assert dict(added.metadata) == {"k": "v"}


@pytest.mark.parametrize("key", sorted(RESERVED_METADATA_KEYS))
def test_reserved_metadata_keys_are_refused(key: str) -> None:
    assert {"graph_id", "node_id", "node_path"} <= RESERVED_METADATA_KEYS
    with pytest.raises(ValueError, match=key):
        RunnableConfig().put_metadata(key, "x")
    with pytest.raises(ValueError, match=key):
        RunnableConfig().add_metadata(key, "x")
    with pytest.raises(ValueError, match=key):
        RunnableConfig(metadata={key: "x"})


def test_stream_mode_accepts_its_value() -> None:
    assert RunnableConfig(stream_mode="updates").stream_mode is StreamMode.UPDATES  # type: ignore[arg-type]


def test_node_config_is_not_the_callers_config() -> None:
    seen: list[RunnableConfig] = []

    def node(state: AgentState, config: RunnableConfig) -> None:
        seen.append(config)

    graph = StateGraph().add_node("n", node)
    graph.add_edge(START, "n").add_edge("n", END)
    caller = RunnableConfig(metadata={"m": 1})
    graph.compile().invoke({}, caller)
    assert seen[0].node_id == "n"
    assert seen[0].node_path[-1] == "n"
    assert caller.node_id is None
    assert caller.graph_id is None


# -- parallel executors -------------------------------------------------------------------------


def thread_recorder(name: str, seen: dict[str, str]) -> Action:
    def action(state: AgentState) -> dict[str, Any]:
        seen[name] = threading.current_thread().name
        return {"log": [name]}

    return action


def test_node_runs_on_its_parallel_executor() -> None:
    seen: dict[str, str] = {}
    graph = log_graph()
    graph.add_node("custom", thread_recorder("custom", seen))
    graph.add_node("other", thread_recorder("other", seen))
    graph.add_edge(START, "custom").add_edge(START, "other")
    graph.add_edge("custom", END).add_edge("other", END)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="my-custom-pool") as pool:
        result = graph.compile().invoke({}, RunnableConfig(parallel_executors={"custom": pool}))
    assert result["log"] == ["custom", "other"]
    assert seen["custom"].startswith("my-custom-pool")
    assert not seen["other"].startswith("my-custom-pool")


def test_single_node_step_runs_on_its_parallel_executor() -> None:
    seen: dict[str, str] = {}
    graph = log_graph().add_node("solo", thread_recorder("solo", seen))
    graph.add_edge(START, "solo").add_edge("solo", END)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="solo-pool") as pool:
        asyncio.run(graph.compile().ainvoke({}, RunnableConfig(parallel_executors={"solo": pool})))
    assert seen["solo"].startswith("solo-pool")


# -- more edges of the contract -----------------------------------------------------------------


def test_node_update_with_non_string_key_names_the_node() -> None:
    graph = StateGraph().add_node("int_keys", lambda s: {1: "x"})
    graph.add_edge(START, "int_keys").add_edge("int_keys", END)
    with pytest.raises(InvalidUpdateError, match="'int_keys'"):
        graph.compile().invoke({})


def test_node_may_return_any_mapping() -> None:
    graph = StateGraph().add_node("a", lambda s: AgentState({"from_state": 1}))
    graph.add_edge(START, "a").add_edge("a", END)
    assert graph.compile().invoke({}).data == {"from_state": 1}


def test_send_to_unknown_node_is_graph_state_error() -> None:
    graph = StateGraph().add_node("w", lambda s: None)
    graph.add_conditional_edges(START, lambda s: [Send("ghost_node", {})])
    graph.add_edge("w", END)
    with pytest.raises(GraphStateError, match="'ghost_node'"):
        graph.compile().invoke({})


def test_invalid_return_of_a_sent_node_names_the_node() -> None:
    graph = StateGraph().add_node("mapper", lambda s: ["not", "a", "mapping"])
    graph.add_conditional_edges(START, lambda s: [Send("mapper", {"i": i}) for i in range(2)])
    graph.add_edge("mapper", END)
    with pytest.raises(InvalidUpdateError, match="'mapper'"):
        graph.compile().invoke({})


def test_command_goto_end_applies_update() -> None:
    graph = StateGraph().add_node("a", lambda s: None)
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: Command(goto=END, update={"done": True}))
    assert graph.compile().invoke({}).data == {"done": True}


def test_command_update_goes_through_reducers() -> None:
    graph = log_graph().add_node("a", log_node("a")).add_node("b", log_node("b"))
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: Command(goto="b", update={"log": ["routed"]}))
    graph.add_edge("b", END)
    assert graph.compile().invoke({})["log"] == ["a", "routed", "b"]


def test_stream_yields_every_execution_of_a_looping_node() -> None:
    compiled = looping_graph()
    outputs = list(compiled.stream({"stop": 3}))
    assert [o.node for o in outputs] == [START, "inc", "inc", "inc", END]
    assert [o.state.value("n") for o in outputs] == [None, 1, 2, 3, 3]


def test_plain_api_works_inside_a_running_event_loop() -> None:
    compiled = chain_graph("a", "b").compile()

    async def main() -> tuple[AgentState, list[str]]:
        return compiled.invoke({}), [o.node for o in compiled.stream({})]

    state, nodes = asyncio.run(main())
    assert state["log"] == ["a", "b"]
    assert nodes == [START, "a", "b", END]


def test_compiled_graph_runs_repeatedly_and_concurrently() -> None:
    compiled = looping_graph()
    results: dict[int, int] = {}

    def run(stop: int) -> None:
        results[stop] = compiled.invoke({"stop": stop})["n"]

    threads = [threading.Thread(target=run, args=(stop,)) for stop in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    assert results == {stop: stop for stop in range(1, 9)}
