"""SPEC §9: command nodes, ``add_node(id, action, destinations)`` whose action returns a
``Command``, in process (the Celery runs are in ``tests/celery/test_celery_parity.py``).

The first tests port LangGraph4j's ``GraphTest.testCommandNode_Issue163`` and
``AsyncNodeTest.testAsyncNode``, keeping their graphs and asserted values.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    Command,
    CompileConfig,
    GraphDefinitionError,
    GraphInput,
    InvalidUpdateError,
    NodeError,
    RunnableConfig,
    Send,
    StateGraph,
    StreamMode,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver

Action = Callable[..., Any]


def messages_graph() -> StateGraph:
    """LangGraph4j's ``MessagesState``: an appender under ``messages``."""
    return StateGraph({"messages": Channels.appender()})


def make_node(name: str) -> Action:
    def action(state: AgentState) -> dict[str, Any]:
        return {"messages": name}

    return action


def issue163(command_action: Action) -> StateGraph:
    """A -> B (a command node going to C2 with an update) -> C1 | C2 | END."""
    return (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", command_action, [END, "C1", "C2"])
        .add_node("C1", make_node("C1"))
        .add_node("C2", make_node("C2"))
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("C1", END)
        .add_edge("C2", END)
    )


# -- LangGraph4j's tests --------------------------------------------------------------------------


def test_command_node_issue163() -> None:
    """GraphTest.testCommandNode_Issue163."""

    def command_action(state: AgentState, config: RunnableConfig) -> Command:
        return Command("C2", {"messages": "B", "next_node": "C2"})

    steps = list(issue163(command_action).compile().stream(GraphInput.no_args()))

    assert len(steps) == 5
    assert steps[2].node == "B"
    assert steps[2].state.value("next_node") == "C2"
    # (and beyond the port: C2 ran, C1 did not)
    assert [step.node for step in steps] == [START, "A", "B", "C2", END]
    assert steps[-1].state.value("messages") == ["A", "B", "C2"]


def executor_node(name: str, pool: concurrent.futures.Executor) -> Action:
    """AsyncNodeTest's ``node_async``: an async node whose action runs on ``pool``."""

    async def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, lambda: {"messages": name})

    return action


def test_async_command_node() -> None:
    """AsyncNodeTest.testAsyncNode: the command action is async, the other nodes async ones
    running on an executor."""

    async def command_action(state: AgentState, config: RunnableConfig) -> Command:
        return Command("C2", {"messages": "B", "next_node": "C2"})

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        graph = (
            messages_graph()
            .add_node("A", executor_node("A", pool))
            .add_node("B", command_action, [END, "C1", "C2"])
            .add_node("C1", executor_node("C1", pool))
            .add_node("C2", executor_node("C2", pool))
            .add_edge(START, "A")
            .add_edge("A", "B")
            .add_edge("C1", END)
            .add_edge("C2", END)
        )
        steps = list(graph.compile().stream(GraphInput.no_args()))

    assert len(steps) == 5
    assert steps[2].node == "B"
    assert steps[2].state.value("next_node") == "C2"
    assert steps[-1].state.value("messages") == ["A", "B", "C2"]


# -- where a Command goes -------------------------------------------------------------------------


def labelled(goto: Any, update: dict[str, Any] | None = None) -> StateGraph:
    graph = messages_graph()
    graph.add_node(
        "route",
        lambda state: Command(goto=goto, update=update),
        {"left": "L", "right": "R", "stop": END},
    )
    graph.add_node("L", make_node("L")).add_node("R", make_node("R"))
    return graph.add_edge(START, "route").add_edge("L", END).add_edge("R", END)


@pytest.mark.parametrize("mode", [StreamMode.UPDATES, StreamMode.SNAPSHOTS])
def test_a_label_goes_to_its_node_and_the_update_is_the_nodes(
    saver: BaseCheckpointSaver, mode: StreamMode
) -> None:
    compiled = labelled("right", {"messages": "routed"}).compile(
        CompileConfig(checkpoint_saver=saver)
    )
    outputs = list(compiled.stream({}, RunnableConfig(thread_id="t", stream_mode=mode)))
    assert [o.node for o in outputs] == [START, "route", "R", END]
    # the node's update as streamed: the Command's update, nothing of where it goes
    assert outputs[1].update == {"messages": "routed"}
    assert outputs[-1].state.value("messages") == ["routed", "R"]


def test_a_list_of_labels_fans_out_in_one_step() -> None:
    outputs = list(labelled(["left", "right"]).compile().stream({}))
    assert [o.node for o in outputs] == [START, "route", "L", "R", END]
    assert outputs[-1].state.value("messages") == ["L", "R"]


def test_goto_end_ends_the_branch() -> None:
    state = labelled("stop", {"messages": "done"}).compile().invoke({})
    assert state.value("messages") == ["done"]


def test_a_command_node_that_returns_a_mapping_leads_nowhere() -> None:
    graph = messages_graph()
    graph.add_node("route", make_node("route"), ["L"]).add_node("L", make_node("L"))
    graph.add_edge(START, "route").add_edge("L", END)
    outputs = list(graph.compile().stream({}))
    assert [o.node for o in outputs] == [START, "route", END]
    assert outputs[-1].state.value("messages") == ["route"]


def test_a_command_can_send() -> None:
    """Command(goto=[Send(...)]): map-reduce from a command node, as LangGraph allows."""
    graph = StateGraph({"results": Channels.appender()})

    def plan(state: AgentState) -> Command:
        sends = [Send("work", {"item": item}) for item in state["items"]]
        return Command(goto=[*sends, "total"], update={"planned": len(sends)})

    graph.add_node("plan", plan, ["work", "total"])
    graph.add_node("work", lambda state: {"results": [state["item"] * 10]})
    graph.add_node("total", lambda state: {"total": sum(state.value("results", []))})
    graph.add_edge(START, "plan").add_edge("work", "total").add_edge("total", END)

    outputs = list(graph.compile().stream({"items": [1, 2, 3]}))

    # work x3 and total run in one step (total sees no result yet), then total again
    nodes = [o.node for o in outputs]
    assert nodes == [START, "plan", "work", "work", "work", "total", "total", END]
    final = outputs[-1].state
    assert sorted(final["results"]) == [10, 20, 30]
    assert final["total"] == 60
    assert final["planned"] == 3


def test_sync_and_async_command_nodes_in_one_step() -> None:
    graph = messages_graph()

    async def first(state: AgentState) -> Command:
        return Command("X", {"messages": "first"})

    graph.add_node("first", first, ["X"])
    graph.add_node("second", lambda s: Command("Y", {"messages": "second"}), ["Y"])
    graph.add_node("X", make_node("X")).add_node("Y", make_node("Y"))
    graph.add_edge(START, "first").add_edge(START, "second")
    graph.add_edge("X", END).add_edge("Y", END)

    outputs = list(graph.compile().stream({}))
    assert [o.node for o in outputs] == [START, "first", "second", "X", "Y", END]
    assert outputs[-1].state.value("messages") == ["first", "second", "X", "Y"]


def test_the_update_goes_through_the_reducers_and_the_step_rules() -> None:
    """Two nodes of one step writing a key without reducer: one through a Command."""
    graph = messages_graph()
    graph.add_node("cmd", lambda s: Command("end", {"owner": "cmd"}), {"end": END})
    graph.add_node("plain", lambda s: {"owner": "plain"})
    graph.add_edge(START, "cmd").add_edge(START, "plain").add_edge("plain", END)
    with pytest.raises(InvalidUpdateError, match="'cmd' and 'plain' both wrote key 'owner'"):
        graph.compile().invoke({})


# -- what is refused at run time -------------------------------------------------------------------


def test_a_command_from_a_node_without_destinations_names_the_node() -> None:
    graph = messages_graph()
    graph.add_node("loose", lambda s: Command("L"))
    graph.add_node("L", make_node("L"))
    graph.add_edge(START, "loose").add_edge("loose", "L").add_edge("L", END)
    with pytest.raises(InvalidUpdateError) as caught:
        graph.compile().invoke({})
    assert "node 'loose' returned a Command, but it has no destinations" in str(caught.value)
    assert "add_node('loose', action, destinations=[...])" in str(caught.value)


@pytest.mark.parametrize("goto", ["nowhere", ["left", "nowhere"], "L"])
def test_a_label_outside_the_destinations_names_the_node_and_the_label(goto: Any) -> None:
    # ("L" is a node, but the destinations' labels are left/right/stop)
    with pytest.raises(InvalidUpdateError) as caught:
        labelled(goto).compile().invoke({})
    bad = goto if isinstance(goto, str) else goto[1]
    assert f"node 'route' returned Command(goto={bad!r})" in str(caught.value)
    assert "left, right, stop" in str(caught.value)


def test_a_send_outside_the_destinations_is_refused() -> None:
    graph = messages_graph()
    graph.add_node("route", lambda s: Command(goto=Send("R", {})), ["L"])
    graph.add_node("L", make_node("L")).add_node("R", make_node("R"))
    graph.add_edge(START, "route").add_edge("L", END).add_edge("R", END).add_edge(START, "R")
    with pytest.raises(InvalidUpdateError, match="node 'route' returned a Command that sends to"):
        graph.compile().invoke({})


def test_the_goto_key_is_reserved() -> None:
    graph = messages_graph().add_node("n", lambda s: {"__goto__": ["n"]})
    graph.add_edge(START, "n").add_edge("n", END)
    with pytest.raises(InvalidUpdateError, match="key '__goto__', which is reserved"):
        graph.compile().invoke({})


def test_a_bad_command_update_names_the_node() -> None:
    graph = messages_graph().add_node("n", lambda s: Command(END, {1: "x"}), [END])
    graph.add_edge(START, "n")
    with pytest.raises(InvalidUpdateError, match="node 'n' returned an update with non-string"):
        graph.compile().invoke({})


# -- hooks ----------------------------------------------------------------------------------------


def test_an_after_call_hook_sees_the_command_and_may_change_it() -> None:
    seen: list[Any] = []

    def after(node: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
        seen.append(result)
        return Command("left", {"messages": "hooked"})

    graph = labelled("right", {"messages": "routed"}).add_after_call_node_hook("route", after)
    state = graph.compile().invoke({})
    assert seen == [Command("right", {"messages": "routed"})]
    assert state.value("messages") == ["hooked", "L"]


def test_a_before_call_hooks_update_joins_the_commands() -> None:
    graph = labelled("left", {"messages": "routed"})
    graph.add_before_call_node_hook("route", lambda node, state, config: {"messages": "pre"})
    config = RunnableConfig(stream_mode=StreamMode.UPDATES)
    outputs = list(graph.compile().stream({}, config))
    assert [o.node for o in outputs] == [START, "route", "L", END]
    assert outputs[1].update == {"messages": ["pre", "routed"]}


# -- the builder ----------------------------------------------------------------------------------


def test_destinations_are_the_nodes_outgoing_edges() -> None:
    # R is reachable through the destinations only; route needs no other edge
    graph = labelled("right")
    assert graph.compile() is not None


def test_destinations_is_the_third_positional_parameter() -> None:
    graph = messages_graph().add_node("n", lambda s: Command("end"), {"end": END}, timeout=3)
    compiled = graph.add_edge(START, "n").compile()
    assert compiled.invoke({}) == {"messages": []}


@pytest.mark.parametrize(
    ("destinations", "message"),
    [
        (["L", "ghost"], "node 'route' lists destination 'ghost', which is not a node"),
        ({"go": "ghost"}, "node 'route' lists destination 'go' -> 'ghost', which is not a node"),
        ([], "node 'route': destinations is empty"),
        ({}, "node 'route': destinations is empty"),
        ("L", "destinations must be a list of node ids or a mapping"),
        ({"go": 3}, "destination 'go' must be a node id, got 3"),
    ],
)
def test_bad_destinations_are_refused(destinations: Any, message: str) -> None:
    graph = messages_graph().add_node("route", lambda s: None, destinations)
    graph.add_node("L", make_node("L")).add_edge(START, "route").add_edge("L", END)
    with pytest.raises(GraphDefinitionError) as caught:
        graph.compile()
    assert message in str(caught.value)


def test_destinations_and_a_plain_edge_are_refused() -> None:
    graph = labelled("left").add_edge("route", "L")
    with pytest.raises(GraphDefinitionError, match="'route' has destinations and a plain edge"):
        graph.compile()


def test_destinations_and_a_conditional_edge_are_refused() -> None:
    graph = labelled("left").add_conditional_edges("route", lambda s: "L", ["L", "R"])
    with pytest.raises(GraphDefinitionError, match="destinations and a conditional edge"):
        graph.compile()


def test_a_node_missing_from_every_destination_is_unreachable() -> None:
    graph = labelled("left").add_node("orphan", make_node("orphan")).add_edge("orphan", END)
    with pytest.raises(GraphDefinitionError, match="node 'orphan' is unreachable"):
        graph.compile()


def test_a_command_node_may_be_a_join_source() -> None:
    graph = messages_graph()
    graph.add_node("a", lambda s: Command("b", {"messages": "a"}), ["b"])
    graph.add_node("b", make_node("b")).add_node("c", make_node("c"))
    graph.add_edge(START, "a").add_edge(["a", "b"], "c").add_edge("c", END)
    state = graph.compile().invoke({})
    assert state.value("messages") == ["a", "b", "c"]


# -- checkpoints: where a Command goes is stored with its update ----------------------------------


def test_the_next_checkpoint_names_where_the_command_goes(saver: BaseCheckpointSaver) -> None:
    compiled = labelled("right").compile(
        CompileConfig(checkpoint_saver=saver, interrupt_before=["R"])
    )
    config = RunnableConfig(thread_id="t")
    compiled.invoke({}, config)
    assert compiled.get_state(config).next == ("R",)
    assert compiled.invoke(GraphInput.resume(), config).value("messages") == ["R"]


@pytest.mark.parametrize("before_edge", [False, True])
def test_interrupt_after_a_command_node(saver: BaseCheckpointSaver, before_edge: bool) -> None:
    """With ``interrupt_before_edge`` the step is stored without routing: where the Command
    goes is kept for the resume (through the saver's serializer)."""
    graph = StateGraph({"results": Channels.appender()})
    graph.add_node(
        "plan",
        lambda s: Command([Send("work", {"item": 2}), "done"], {"planned": True}),
        ["work", "done"],
    )
    graph.add_node("work", lambda s: {"results": [s["item"]]})
    graph.add_node("done", lambda s: {"finished": True})
    graph.add_edge(START, "plan").add_edge("work", END).add_edge("done", END)
    compiled = graph.compile(
        CompileConfig(
            checkpoint_saver=saver, interrupt_after=["plan"], interrupt_before_edge=before_edge
        )
    )
    config = RunnableConfig(thread_id="t")
    stopped = compiled.stream({}, config)
    assert [o.node for o in stopped] == [START, "plan"]
    assert stopped.result.as_interruption_metadata().node_id == "plan"
    assert compiled.get_state(config).next == (() if before_edge else ("work", "done"))

    state = compiled.invoke(GraphInput.resume(), config)
    assert dict(state) == {"results": [2], "planned": True, "finished": True}


def test_a_stopped_steps_command_is_kept_for_the_resume(saver: BaseCheckpointSaver) -> None:
    """The command node's write (its goto too) is kept when its sibling fails; the resume does
    not run it again and goes where it went."""
    calls: list[str] = []
    broken = threading.Event()
    broken.set()

    def route(state: AgentState) -> Command:
        calls.append("route")
        return Command("right", {"messages": "routed"})

    def flaky(state: AgentState) -> dict[str, Any]:
        if broken.is_set():
            raise RuntimeError("down")
        return {"messages": "flaky"}

    graph = messages_graph()
    graph.add_node("route", route, {"left": "L", "right": "R"})
    graph.add_node("flaky", flaky)
    graph.add_node("L", make_node("L")).add_node("R", make_node("R"))
    graph.add_edge(START, "route").add_edge(START, "flaky")
    graph.add_edge("flaky", END).add_edge("L", END).add_edge("R", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    config = RunnableConfig(thread_id="t")

    with pytest.raises(NodeError, match="down"):
        compiled.invoke({}, config)
    broken.clear()
    state = compiled.invoke(GraphInput.resume(), config)

    assert calls == ["route"]
    assert state.value("messages") == ["routed", "flaky", "R"]


def test_update_state_as_a_command_node_has_no_next(saver: BaseCheckpointSaver) -> None:
    """A command node's next nodes are what its Command says: ``as_node`` alone picks none."""
    compiled = labelled("left").compile(CompileConfig(checkpoint_saver=saver))
    config = RunnableConfig(thread_id="t")
    compiled.invoke({}, config)
    compiled.update_state(config, {"messages": "edited"}, as_node="route")
    snapshot = compiled.get_state(config)
    assert snapshot.next == ()
    assert snapshot.state.value("messages") == ["L", "edited"]


def test_a_routes_command_may_send_too() -> None:
    """(As a command node's: Command(goto=Send(...)) from a conditional edge.)"""
    graph = StateGraph({"results": Channels.appender()})
    graph.add_node("plan", lambda s: None).add_node("work", lambda s: {"results": [s["n"]]})
    graph.add_edge(START, "plan").add_edge("work", END)
    graph.add_conditional_edges("plan", lambda s: Command(goto=Send("work", {"n": 7})), ["work"])
    assert graph.compile().invoke({})["results"] == [7]
