"""SPEC §6: node and edge hooks (before, after, wrap; global and per node; plain and async)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    Command,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    GraphInterrupt,
    InvalidUpdateError,
    RemoveByHash,
    RetryPolicy,
    RunnableConfig,
    Send,
    StateGraph,
    StreamMode,
)
from langgraph_celery.checkpoint import MemorySaver
from langgraph_celery.graph.state import InTurn


class Trace:
    """A thread-safe list of events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[Any] = []

    def add(self, event: Any) -> None:
        with self._lock:
            self.events.append(event)


def appender(name: str) -> Any:
    def action(state: AgentState) -> dict[str, Any]:
        return {"log": name}

    return action


def two_nodes(trace: Trace | None = None) -> StateGraph:
    """START -> a -> b -> END; each node appends its name to ``log`` and traces itself."""

    def node(name: str) -> Any:
        def action(state: AgentState) -> dict[str, Any]:
            if trace is not None:
                trace.add(name)
            return {"log": name}

        return action

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", node("a")).add_node("b", node("b"))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    return graph


def routed(trace: Trace) -> StateGraph:
    """START -> a -(route: "go" or "b")-> b | c -> END."""

    def route(state: AgentState) -> str:
        trace.add(("route", state.value("go")))
        return str(state.value("go", "b"))

    graph = StateGraph({"log": Channels.appender()})
    for name in ("a", "b", "c"):
        graph.add_node(name, appender(name))
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", route, {"b": "b", "c": "c"})
    graph.add_edge("b", END).add_edge("c", END)
    return graph


def log_of(graph: CompiledGraph, data: dict[str, Any] | None = None) -> list[str]:
    return list(graph.invoke(data or {}).value("log"))


# -- before ------------------------------------------------------------------------------------


def test_global_before_hook_update_is_seen_by_every_node() -> None:
    seen: list[tuple[str, Any, Any]] = []
    calls: list[tuple[str, str | None]] = []

    def before(node_id: str, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        calls.append((node_id, config.node_id))
        return {"hint": f"for-{node_id}"}

    def a(state: AgentState) -> dict[str, Any]:
        seen.append(("a", state.value("hint"), list(state.value("log"))))
        return {"log": "a"}

    def b(state: AgentState) -> dict[str, Any]:
        seen.append(("b", state.value("hint"), list(state.value("log"))))
        return {"log": "b"}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", a).add_node("b", b)
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    graph.add_before_call_node_hook(before)
    final = graph.compile().invoke({})
    assert seen == [("a", "for-a", []), ("b", "for-b", ["a"])]
    assert calls == [("a", "a"), ("b", "b")]
    # the hook's update is part of each node's update: b's is the last one merged
    assert dict(final.data) == {"log": ["a", "b"], "hint": "for-b"}


def test_before_hook_update_goes_through_reducers() -> None:
    seen: list[list[str]] = []

    def before(node_id: str, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return {"log": f"pre-{node_id}"}

    def b(state: AgentState) -> None:
        seen.append(list(state.value("log")))

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", lambda s: {"log": "a"}).add_node("b", b)
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    graph.add_before_call_node_hook("b", before)
    final = graph.compile().invoke({})
    assert seen == [["a", "pre-b"]]
    assert final.value("log") == ["a", "pre-b"]  # b returned None: its update is the hook's


def test_per_node_before_hook_only_runs_for_its_node() -> None:
    calls: list[str] = []

    def before(node_id: str, state: AgentState, config: RunnableConfig) -> None:
        calls.append(node_id)

    graph = two_nodes().add_before_call_node_hook("b", before)
    assert log_of(graph.compile()) == ["a", "b"]
    assert calls == ["b"]


def test_before_hook_returning_a_non_mapping_is_invalid_update() -> None:
    graph = two_nodes().add_before_call_node_hook("a", lambda n, s, c: 42)
    with pytest.raises(InvalidUpdateError, match="'a'"):
        graph.compile().invoke({})


# -- after -------------------------------------------------------------------------------------


def test_after_hook_result_is_the_one_used() -> None:
    seen: list[tuple[str, Any]] = []

    def after(
        node_id: str, state: AgentState, config: RunnableConfig, result: dict[str, Any]
    ) -> dict[str, Any]:
        seen.append((node_id, result))
        return {"log": result["log"].upper(), "after": node_id}

    graph = two_nodes().add_after_call_node_hook(after)
    final = graph.compile().invoke({})
    assert dict(final.data) == {"log": ["A", "B"], "after": "b"}
    assert seen == [("a", {"log": "a"}), ("b", {"log": "b"})]


def test_per_node_after_hook_can_drop_the_update() -> None:
    graph = two_nodes().add_after_call_node_hook("a", lambda n, s, c, r: None)
    assert log_of(graph.compile()) == ["b"]


# -- wrap --------------------------------------------------------------------------------------


def test_wrap_hook_decides_whether_to_call_the_action() -> None:
    trace = Trace()

    def skip_a(node_id: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        if node_id == "a":
            return {"log": "skipped-a"}
        result = action(state, config)
        return {"log": f"{result['log']}!"}

    graph = two_nodes(trace).add_wrap_call_node_hook(skip_a)
    assert log_of(graph.compile()) == ["skipped-a", "b!"]
    assert trace.events == ["b"]  # a's action never ran


def test_wrap_hook_may_call_the_action_with_another_state() -> None:
    seen: list[Any] = []

    def node(state: AgentState) -> dict[str, Any]:
        seen.append(state.value("injected"))
        return {"log": "n"}

    def wrap(node_id: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        return action(AgentState({**state.data, "injected": 1}), config)

    graph = StateGraph({"log": Channels.appender()}).add_node("n", node)
    graph.add_edge(START, "n").add_edge("n", END).add_wrap_call_node_hook("n", wrap)
    assert graph.compile().invoke({}).value("log") == ["n"]
    assert seen == [1]


# -- order -------------------------------------------------------------------------------------


def _tracing_hooks(graph: StateGraph, trace: Trace, *names: str, node: str | None = None) -> None:
    for name in names:

        def before(
            node_id: str, state: AgentState, config: RunnableConfig, name: str = name
        ) -> None:
            trace.add(f"before:{name}:{node_id}")

        def after(
            node_id: str, state: AgentState, config: RunnableConfig, result: Any, name: str = name
        ) -> Any:
            trace.add(f"after:{name}:{node_id}")
            return result

        def wrap(
            node_id: str, state: AgentState, config: RunnableConfig, action: Any, name: str = name
        ) -> Any:
            trace.add(f"wrap-in:{name}:{node_id}")
            result = action(state, config)
            trace.add(f"wrap-out:{name}:{node_id}")
            return result

        if node is None:
            graph.add_before_call_node_hook(before)
            graph.add_after_call_node_hook(after)
            graph.add_wrap_call_node_hook(wrap)
        else:
            graph.add_before_call_node_hook(node, before)
            graph.add_after_call_node_hook(node, after)
            graph.add_wrap_call_node_hook(node, wrap)


def test_hook_order_before_after_lifo_wrap_fifo() -> None:
    trace = Trace()
    graph = StateGraph().add_node("n", lambda s: trace.add("node:n"))
    graph.add_edge(START, "n").add_edge("n", END)
    _tracing_hooks(graph, trace, "1", "2", "3")
    graph.compile().invoke({})
    assert trace.events == [
        "before:3:n",
        "before:2:n",
        "before:1:n",
        "wrap-in:1:n",
        "wrap-in:2:n",
        "wrap-in:3:n",
        "node:n",
        "wrap-out:3:n",
        "wrap-out:2:n",
        "wrap-out:1:n",
        "after:3:n",
        "after:2:n",
        "after:1:n",
    ]


def test_hook_order_mixes_global_and_per_node_by_registration() -> None:
    trace = Trace()
    graph = two_nodes(trace)
    _tracing_hooks(graph, trace, "g1")
    _tracing_hooks(graph, trace, "a1", node="a")
    _tracing_hooks(graph, trace, "g2")
    graph.compile().invoke({})
    assert trace.events == [
        "before:g2:a",
        "before:a1:a",
        "before:g1:a",
        "wrap-in:g1:a",
        "wrap-in:a1:a",
        "wrap-in:g2:a",
        "a",
        "wrap-out:g2:a",
        "wrap-out:a1:a",
        "wrap-out:g1:a",
        "after:g2:a",
        "after:a1:a",
        "after:g1:a",
        "before:g2:b",
        "before:g1:b",
        "wrap-in:g1:b",
        "wrap-in:g2:b",
        "b",
        "wrap-out:g2:b",
        "wrap-out:g1:b",
        "after:g2:b",
        "after:g1:b",
    ]


def test_after_hooks_chain_results_last_added_first() -> None:
    graph = StateGraph().add_node("n", lambda s: {"v": "x"})
    graph.add_edge(START, "n").add_edge("n", END)
    graph.add_after_call_node_hook(lambda n, s, c, r: {"v": r["v"] + "1"})
    graph.add_after_call_node_hook(lambda n, s, c, r: {"v": r["v"] + "2"})
    assert graph.compile().invoke({}).value("v") == "x21"


def test_before_hooks_chain_updates_last_added_first() -> None:
    seen: list[Any] = []
    graph = StateGraph().add_node("n", lambda s: seen.append(s.value("v")))
    graph.add_edge(START, "n").add_edge("n", END)
    graph.add_before_call_node_hook(lambda n, s, c: {"v": s.value("v") + "1"})
    graph.add_before_call_node_hook(lambda n, s, c: {"v": s.value("v") + "2"})
    graph.compile().invoke({"v": "x"})
    assert seen == ["x21"]


# -- plain and async ---------------------------------------------------------------------------


def test_async_before_and_after_hooks() -> None:
    seen: list[Any] = []

    async def before(node_id: str, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"hint": node_id}

    async def after(node_id: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
        await asyncio.sleep(0)
        return {**result, "after": f"{node_id}:{state.value('hint')}"}

    def node(state: AgentState) -> dict[str, Any]:
        seen.append(state.value("hint"))
        return {"log": "n"}

    graph = StateGraph({"log": Channels.appender()}).add_node("n", node)
    graph.add_edge(START, "n").add_edge("n", END)
    graph.add_before_call_node_hook(before).add_after_call_node_hook(after)
    final = graph.compile().invoke({})
    assert seen == ["n"]
    assert dict(final.data) == {"log": ["n"], "hint": "n", "after": "n:n"}


def test_async_wrap_over_async_node_gets_an_awaitable_action() -> None:
    kinds: list[bool] = []

    async def node(state: AgentState) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"log": "async-node"}

    async def wrap(node_id: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        pending = action(state, config)
        kinds.append(inspect.isawaitable(pending))
        result = await pending
        return {"log": result["log"] + "+wrapped"}

    graph = StateGraph({"log": Channels.appender()}).add_node("n", node)
    graph.add_edge(START, "n").add_edge("n", END).add_wrap_call_node_hook(wrap)
    assert graph.compile().invoke({}).value("log") == ["async-node+wrapped"]
    assert kinds == [True]


def test_plain_wrap_over_async_node_gets_a_plain_action() -> None:
    results: list[Any] = []

    async def node(state: AgentState) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"log": "async-node"}

    def wrap(node_id: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        result = action(state, config)
        results.append(result)
        return {"log": result["log"] + "+plain"}

    graph = StateGraph({"log": Channels.appender()}).add_node("n", node)
    graph.add_edge(START, "n").add_edge("n", END).add_wrap_call_node_hook(wrap)
    assert graph.compile().invoke({}).value("log") == ["async-node+plain"]
    assert results == [{"log": "async-node"}]  # a plain result, not a coroutine


def test_async_wrap_over_plain_node_gets_an_awaitable_action() -> None:
    kinds: list[bool] = []

    def node(state: AgentState) -> dict[str, Any]:
        return {"log": "plain-node"}

    async def wrap(node_id: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        pending = action(state, config)
        kinds.append(inspect.isawaitable(pending))
        result = await pending
        return {"log": result["log"] + "+async"}

    graph = StateGraph({"log": Channels.appender()}).add_node("n", node)
    graph.add_edge(START, "n").add_edge("n", END).add_wrap_call_node_hook(wrap)
    assert graph.compile().invoke({}).value("log") == ["plain-node+async"]
    assert kinds == [True]


def test_mixed_plain_and_async_wraps_nest_in_order() -> None:
    trace = Trace()

    async def node(state: AgentState) -> dict[str, Any]:
        trace.add("node")
        return {"log": "n"}

    def plain(node_id: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        trace.add("plain-in")
        result = action(state, config)
        assert isinstance(result, dict)
        trace.add("plain-out")
        return {"log": result["log"] + "p"}

    async def async_(node_id: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        trace.add("async-in")
        result = await action(state, config)
        trace.add("async-out")
        return {"log": result["log"] + "a"}

    graph = StateGraph({"log": Channels.appender()}).add_node("n", node)
    graph.add_edge(START, "n").add_edge("n", END)
    graph.add_wrap_call_node_hook(plain).add_wrap_call_node_hook(async_)
    assert graph.compile().invoke({}).value("log") == ["nap"]
    assert trace.events == ["plain-in", "async-in", "node", "async-out", "plain-out"]


def test_hooks_in_async_invocation() -> None:
    trace = Trace()
    graph = two_nodes(trace)
    _tracing_hooks(graph, trace, "h")
    compiled = graph.compile()
    final = asyncio.run(compiled.ainvoke({}))
    assert final.value("log") == ["a", "b"]
    assert trace.events[:5] == ["before:h:a", "wrap-in:h:a", "a", "wrap-out:h:a", "after:h:a"]
    assert len(trace.events) == 10


def test_hooks_on_parallel_nodes() -> None:
    trace = Trace()
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", lambda s: {"log": "a"}).add_node("b", lambda s: {"log": "b"})
    graph.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
    graph.add_after_call_node_hook(lambda n, s, c, r: {"log": r["log"] * 2})
    graph.add_before_call_node_hook(lambda n, s, c: trace.add(n))
    assert graph.compile().invoke({}).value("log") == ["aa", "bb"]
    assert sorted(trace.events) == ["a", "b"]


# -- edge hooks --------------------------------------------------------------------------------


def test_edge_hooks_only_wrap_conditional_edges() -> None:
    trace = Trace()
    graph = routed(trace)
    graph.add_before_call_edge_hook(
        lambda source, state, config: trace.add(("before", source, list(state.value("log"))))
    )
    graph.add_after_call_edge_hook(
        lambda source, state, config, result: trace.add(("after", source, result)) or result
    )
    assert log_of(graph.compile()) == ["a", "b"]
    # called once, for the conditional edge leaving a (after a's update is merged)
    assert trace.events == [("before", "a", ["a"]), ("route", None), ("after", "a", "b")]


def test_after_edge_hook_changes_the_route() -> None:
    trace = Trace()
    graph = routed(trace)
    graph.add_after_call_edge_hook("a", lambda source, state, config, result: "c")
    assert log_of(graph.compile()) == ["a", "c"]
    assert trace.events == [("route", None)]


def test_after_edge_hook_may_return_a_command() -> None:
    trace = Trace()
    graph = routed(trace)
    graph.add_after_call_edge_hook(
        "a", lambda source, state, config, result: Command(goto="c", update={"why": result})
    )
    final = graph.compile().invoke({})
    assert dict(final.data) == {"log": ["a", "c"], "why": "b"}


def test_wrap_edge_hook_decides_whether_to_call_the_route() -> None:
    trace = Trace()
    graph = routed(trace)

    def wrap(source: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        trace.add(("wrap", source, config.node_id))
        if state.value("skip_route"):
            return "c"
        return action(state, config)

    graph.add_wrap_call_edge_hook(wrap)
    compiled = graph.compile()
    assert log_of(compiled, {"skip_route": True}) == ["a", "c"]
    assert trace.events == [("wrap", "a", "a")]
    trace.events.clear()
    assert log_of(compiled, {"go": "c"}) == ["a", "c"]
    assert trace.events == [("wrap", "a", "a"), ("route", "c")]


def test_async_edge_hooks() -> None:
    trace = Trace()
    graph = routed(trace)

    async def before(source: str, state: AgentState, config: RunnableConfig) -> None:
        await asyncio.sleep(0)
        trace.add(("before", source))

    async def wrap(source: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        pending = action(state, config)
        trace.add(("awaitable", inspect.isawaitable(pending)))
        return await pending

    async def after(source: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
        await asyncio.sleep(0)
        return "c" if result == "b" else "b"

    graph.add_before_call_edge_hook(before).add_wrap_call_edge_hook(wrap)
    graph.add_after_call_edge_hook(after)
    assert log_of(graph.compile()) == ["a", "c"]
    assert trace.events == [("before", "a"), ("awaitable", True), ("route", None)]


def test_edge_hook_order_and_per_source_filter() -> None:
    trace = Trace()
    # two conditional edges, so a per-source hook has something to skip
    graph = StateGraph({"log": Channels.appender()})
    for name in ("a", "b"):
        graph.add_node(name, appender(name))
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: "b")
    graph.add_conditional_edges("b", lambda s: END)
    graph.add_before_call_edge_hook(lambda src, s, c: trace.add(f"before1:{src}"))
    graph.add_before_call_edge_hook("b", lambda src, s, c: trace.add(f"before2:{src}"))
    graph.add_after_call_edge_hook(lambda src, s, c, r: trace.add(f"after1:{src}") or r)
    graph.add_after_call_edge_hook("a", lambda src, s, c, r: trace.add(f"after2:{src}") or r)
    assert log_of(graph.compile()) == ["a", "b"]
    assert trace.events == [
        "before1:a",
        "after2:a",
        "after1:a",
        "before2:b",
        "before1:b",
        "after1:b",
    ]


def test_edge_hooks_on_conditional_entry_point() -> None:
    trace = Trace()
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("x", lambda s: {"log": "x"}).add_node("y", lambda s: {"log": "y"})
    graph.add_conditional_edges(START, lambda s: "x", {"x": "x", "y": "y"})
    graph.add_edge("x", END).add_edge("y", END)
    graph.add_before_call_edge_hook(lambda src, s, c: trace.add(src))
    graph.add_after_call_edge_hook(START, lambda src, s, c, r: "y")
    assert log_of(graph.compile()) == ["y"]
    assert trace.events == [START]


def test_node_hooks_do_not_run_for_edges_and_vice_versa() -> None:
    trace = Trace()
    graph = routed(trace)
    graph.add_before_call_node_hook(lambda n, s, c: trace.add(("node-hook", n)))
    graph.add_before_call_edge_hook(lambda n, s, c: trace.add(("edge-hook", n)))
    assert log_of(graph.compile()) == ["a", "b"]
    assert trace.events == [
        ("node-hook", "a"),
        ("edge-hook", "a"),
        ("route", None),
        ("node-hook", "b"),
    ]


# -- a before-call hook's update is part of its node's update (as in LangGraph4j) ---------------


def test_before_hook_update_reaches_the_checkpoint_and_the_node_update() -> None:
    graph = two_nodes().add_before_call_node_hook(
        "b", lambda node_id, state, config: {"log": f"pre-{node_id}", "seen_by": node_id}
    )
    compiled = graph.compile(CompileConfig(checkpoint_saver=MemorySaver()))
    config = RunnableConfig(thread_id="t", stream_mode=StreamMode.UPDATES)
    updates = {out.node: out.update for out in compiled.stream({}, config)}
    # appends of the hook and of the node make one list, in that order
    assert updates["b"] == {"log": ["pre-b", "b"], "seen_by": "b"}
    assert updates["a"] == {"log": "a"}
    snapshot = compiled.get_state(config)
    assert dict(snapshot.state.data) == {"log": ["a", "pre-b", "b"], "seen_by": "b"}
    b_step = next(s for s in compiled.get_state_history(config) if s.node == "b")
    assert b_step.metadata["writes"]["b"] == {"log": ["pre-b", "b"], "seen_by": "b"}


def test_node_update_is_merged_after_the_before_hook_update() -> None:
    def node(state: AgentState) -> dict[str, Any]:
        return {"v": f"node-saw-{state.value('v')}", "log": RemoveByHash("tmp")}

    graph = StateGraph({"log": Channels.appender()}).add_node("n", node)
    graph.add_edge(START, "n").add_edge("n", END)
    graph.add_before_call_node_hook(lambda n, s, c: {"v": "hook", "log": "tmp", "kept": 1})
    compiled = graph.compile()
    final = compiled.invoke({"log": ["x"]})
    # overwritten keys take the node's value; the node's removal applies after the hook's append
    assert dict(final.data) == {"log": ["x"], "v": "node-saw-hook", "kept": 1}
    config = RunnableConfig(stream_mode=StreamMode.UPDATES)
    update = next(out.update for out in compiled.stream({}, config) if out.node == "n")
    assert update == {"v": "node-saw-hook", "log": InTurn(("tmp", RemoveByHash("tmp"))), "kept": 1}


def test_several_before_hooks_are_merged_last_added_first() -> None:
    seen: list[Any] = []
    graph = StateGraph({"log": Channels.appender()}).add_node("n", lambda s: seen.append(s.data))
    graph.add_edge(START, "n").add_edge("n", END)
    graph.add_before_call_node_hook(lambda n, s, c: {"log": "1", "v": f"{s.value('v')}+1"})
    graph.add_before_call_node_hook(lambda n, s, c: {"log": "2", "v": "2"})
    final = graph.compile().invoke({})
    assert [dict(data) for data in seen] == [{"log": ["2", "1"], "v": "2+1"}]
    assert dict(final.data) == {"log": ["2", "1"], "v": "2+1"}


def test_after_hook_sees_the_node_result_and_cannot_drop_the_before_update() -> None:
    seen: list[tuple[Any, Any]] = []

    def after(node_id: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
        seen.append((state.value("hint"), result))
        return None

    graph = two_nodes().add_before_call_node_hook("a", lambda n, s, c: {"hint": "h"})
    graph.add_after_call_node_hook("a", after)
    final = graph.compile().invoke({})
    assert seen == [("h", {"log": "a"})]  # the state has the hook's update, the result not
    assert dict(final.data) == {"log": ["b"], "hint": "h"}


def test_before_hook_update_is_applied_once_across_retries() -> None:
    attempts: list[int] = []

    def flaky(state: AgentState) -> dict[str, Any]:
        attempts.append(len(state.value("log")))
        if len(attempts) < 3:
            raise ConnectionError("not yet")
        return {"log": "n"}

    graph = StateGraph({"log": Channels.appender()}).add_node("n", flaky)
    graph.add_edge(START, "n").add_edge("n", END)
    policy = RetryPolicy(retry_on=ConnectionError, retry_delay=0.001, jitter=False)
    graph.add_wrap_call_node_hook("n", policy.as_hook())
    graph.add_before_call_node_hook(lambda n, s, c: {"log": "pre"})
    assert graph.compile().invoke({}).value("log") == ["pre", "n"]
    assert attempts == [1, 1, 1]


def test_before_hook_update_is_discarded_with_an_interrupted_node() -> None:
    def gate(state: AgentState) -> dict[str, Any]:
        if not state.value("approved"):
            raise GraphInterrupt("approve?")
        return {"log": "gate"}

    graph = StateGraph({"log": Channels.appender()}).add_node("gate", gate)
    graph.add_edge(START, "gate").add_edge("gate", END)
    graph.add_before_call_node_hook(lambda n, s, c: {"log": "pre"})
    compiled = graph.compile(CompileConfig(checkpoint_saver=MemorySaver()))
    config = RunnableConfig(thread_id="t")
    assert compiled.invoke({}, config).value("log") == []
    final = compiled.invoke(GraphInput.resume({"approved": True}), config)
    assert final.value("log") == ["pre", "gate"]


def test_before_hook_on_parallel_nodes_writing_a_plain_key_conflicts() -> None:
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", lambda s: {"log": "a"}).add_node("b", lambda s: {"log": "b"})
    graph.add_edge(START, "a").add_edge(START, "b").add_edge("a", END).add_edge("b", END)
    graph.add_before_call_node_hook(lambda n, s, c: {"last": n, "log": f"pre-{n}"})
    with pytest.raises(InvalidUpdateError, match="'a' and 'b' both wrote key 'last'"):
        graph.compile().invoke({})


def test_before_hook_of_a_send_task_reaches_the_run_state() -> None:
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("plan", lambda s: None)
    graph.add_node("work", lambda s: {"log": f"work-{s.value('item')}"})
    graph.add_edge(START, "plan").add_edge("work", END)
    graph.add_conditional_edges("plan", lambda s: [Send("work", {"item": i}) for i in (1, 2)])
    graph.add_before_call_node_hook("work", lambda n, s, c: {"log": f"pre-{s.value('item')}"})
    assert graph.compile().invoke({}).value("log") == ["pre-1", "work-1", "pre-2", "work-2"]


def test_before_hook_update_with_a_bad_key_is_invalid_update() -> None:
    graph = two_nodes().add_before_call_node_hook("b", lambda n, s, c: {1: "x"})
    with pytest.raises(InvalidUpdateError, match=r"before-call hook of 'b'.*non-string key 1"):
        graph.compile().invoke({})


def test_before_edge_hook_update_is_seen_by_the_route_only() -> None:
    trace = Trace()
    graph = routed(trace).add_before_call_edge_hook(lambda source, s, c: {"go": "c"})
    final = graph.compile().invoke({})
    assert trace.events == [("route", "c")]
    assert dict(final.data) == {"log": ["a", "c"]}  # as in LangGraph4j: not in the run's state


def test_before_edge_hook_may_return_a_command_without_goto() -> None:
    """As LangGraph4j's ``EdgeHook.BeforeCall``, which returns a ``Command``: its update is
    what the route sees."""
    trace = Trace()
    graph = routed(trace).add_before_call_edge_hook(
        lambda source, s, c: Command(update={"go": "c"})
    )
    final = graph.compile().invoke({})
    assert trace.events == [("route", "c")]
    assert dict(final.data) == {"log": ["a", "c"]}


def test_before_edge_hook_command_with_goto_is_invalid_update() -> None:
    trace = Trace()
    graph = routed(trace).add_before_call_edge_hook(lambda source, s, c: Command(goto="c"))
    with pytest.raises(InvalidUpdateError, match=r"before-call edge hook of 'a'.*goto 'c'"):
        graph.compile().invoke({})
    assert trace.events == []


def test_before_node_hook_may_not_return_a_command() -> None:
    graph = two_nodes().add_before_call_node_hook("b", lambda n, s, c: Command(update={"x": 1}))
    with pytest.raises(InvalidUpdateError, match=r"before-call hook of 'b' returned Command"):
        graph.compile().invoke({})
