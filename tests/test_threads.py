"""SPEC §4: checkpoints, threads, time travel -- on every checkpoint saver."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CheckpointSaverTag,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    GraphStateError,
    RunnableConfig,
    SerializationError,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, Checkpoint
from langgraph_celery.serde import JsonSerializer

# -- helpers ----------------------------------------------------------------------------------


def _appending(name: str) -> Any:
    def action(state: AgentState) -> dict[str, Any]:
        return {"log": name}

    return action


def linear(saver: BaseCheckpointSaver, nodes: tuple[str, ...] = ("a", "b"), **config: Any) -> Any:
    """START -> nodes[0] -> ... -> END, each node appending its name to ``log``."""
    graph = StateGraph({"log": Channels.appender()})
    for node in nodes:
        graph.add_node(node, _appending(node))
    graph.add_edge(START, nodes[0])
    for source, target in itertools.pairwise(nodes):
        graph.add_edge(source, target)
    graph.add_edge(nodes[-1], END)
    return graph.compile(CompileConfig(checkpoint_saver=saver, **config))


def routed(saver: BaseCheckpointSaver, **config: Any) -> CompiledGraph:
    """START -> a -(route on "go", default "b")-> b | c -> END."""
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", _appending("a"))
    graph.add_node("b", _appending("b"))
    graph.add_node("c", _appending("c"))
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: s.value("go", "b"), {"b": "b", "c": "c", "end": END})
    graph.add_edge("b", END)
    graph.add_edge("c", END)
    return graph.compile(CompileConfig(checkpoint_saver=saver, **config))


CFG = RunnableConfig(thread_id="thread-1")


# -- a checkpoint after every superstep ------------------------------------------------------


def test_checkpoint_after_input_and_every_superstep(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, ("a", "b", "c"))
    final = graph.invoke({"x": 1}, CFG)
    assert dict(final.data) == {"log": ["a", "b", "c"], "x": 1}

    history = graph.get_state_history(CFG)
    assert [s.step for s in history] == [2, 1, 0, -1]
    assert [s.node for s in history] == ["c", "b", "a", START]
    assert [s.next for s in history] == [(), ("c",), ("b",), ("a",)]
    assert [s.metadata["source"] for s in history] == ["loop", "loop", "loop", "input"]
    assert [s.values["log"] for s in history] == [["a", "b", "c"], ["a", "b"], ["a"], []]
    assert all(s.values["x"] == 1 for s in history)
    # every checkpoint of the saver is one of these, and they are distinct
    ids = [s.checkpoint_id for s in history]
    assert len(set(ids)) == 4
    assert [c.checkpoint_id for c in saver.list("thread-1")] == ids


def test_fan_out_step_is_one_checkpoint(saver: BaseCheckpointSaver) -> None:
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", _appending("a")).add_node("b", _appending("b"))
    graph.add_node("c", _appending("c"))
    graph.add_edge(START, "a").add_edge(START, "b").add_edge(["a", "b"], "c").add_edge("c", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    assert compiled.invoke({}, CFG).value("log") == ["a", "b", "c"]
    history = compiled.get_state_history(CFG)
    assert [s.step for s in history] == [1, 0, -1]
    assert [s.next for s in history] == [(), ("c",), ("a", "b")]


@pytest.mark.parametrize(
    "call",
    [
        lambda g: g.invoke({"x": 1}, RunnableConfig()),
        lambda g: g.invoke({"x": 1}),
        lambda g: list(g.stream({"x": 1}, RunnableConfig())),
        lambda g: g.get_state(RunnableConfig()),
        lambda g: g.get_state_history(RunnableConfig()),
        lambda g: g.update_state(RunnableConfig(), {"x": 2}),
        lambda g: g.invoke(GraphInput.resume(), RunnableConfig()),
    ],
    ids=["invoke", "invoke-no-config", "stream", "get_state", "history", "update", "resume"],
)
def test_missing_thread_id_is_graph_state_error(saver: BaseCheckpointSaver, call: Any) -> None:
    graph = linear(saver)
    with pytest.raises(GraphStateError, match="thread"):
        call(graph)
    assert saver.list("thread-1") == []


# -- threads are conversations ----------------------------------------------------------------


def test_second_invoke_on_thread_continues_the_conversation(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver)
    first = graph.invoke({"question": "q1"}, CFG)
    assert dict(first.data) == {"log": ["a", "b"], "question": "q1"}

    outputs = list(graph.stream({"question": "q2", "extra": True}, CFG))
    # a new run from START, whose state is the thread's latest merged with the input
    assert [o.node for o in outputs] == [START, "a", "b", END]
    assert dict(outputs[0].state.data) == {"log": ["a", "b"], "question": "q2", "extra": True}
    assert dict(outputs[-1].state.data) == {
        "log": ["a", "b", "a", "b"],
        "question": "q2",
        "extra": True,
    }

    history = graph.get_state_history(CFG)
    assert [s.step for s in history] == [4, 3, 2, 1, 0, -1]
    assert [s.metadata["source"] for s in history] == ["loop", "loop", "input"] * 2
    # the second run's input checkpoint follows the first run's last one
    assert history[2].parent_config is not None
    assert history[2].parent_config.checkpoint_id == history[3].checkpoint_id

    # and a third time, with no input at all
    third = graph.invoke(None, CFG)
    assert third.value("log") == ["a", "b"] * 3
    assert len(graph.get_state_history(CFG)) == 9


def test_threads_are_independent(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver)
    graph.invoke({"who": "one"}, RunnableConfig(thread_id="one"))
    graph.invoke({"who": "one"}, RunnableConfig(thread_id="one"))
    graph.invoke({"who": "two"}, RunnableConfig(thread_id="two"))
    assert graph.get_state(RunnableConfig(thread_id="one")).values == {
        "log": ["a", "b", "a", "b"],
        "who": "one",
    }
    assert graph.get_state(RunnableConfig(thread_id="two")).values == {
        "log": ["a", "b"],
        "who": "two",
    }
    assert len(graph.get_state_history(RunnableConfig(thread_id="two"))) == 3


def test_async_conversation(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver)

    async def main() -> AgentState:
        await graph.ainvoke({"n": 1}, CFG)
        return await graph.ainvoke({"n": 2}, CFG)

    state = asyncio.run(main())
    assert dict(state.data) == {"log": ["a", "b", "a", "b"], "n": 2}


# -- get_state / get_state_history ------------------------------------------------------------


def test_get_state_latest_and_by_checkpoint_id(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, ("a", "b", "c"))
    graph.invoke({"x": 1}, CFG)
    latest = graph.get_state(CFG)
    assert latest.values == {"log": ["a", "b", "c"], "x": 1}
    assert latest.next == ()
    assert latest.step == 2
    assert latest.config is not None
    assert latest.config.thread_id == "thread-1"
    assert latest.checkpoint_id == saver.list("thread-1")[0].checkpoint_id
    assert isinstance(latest.created_at, datetime)

    history = graph.get_state_history(CFG)
    after_a = history[2]
    assert after_a.next == ("b",)
    by_id = graph.get_state(CFG.with_changes(checkpoint_id=after_a.checkpoint_id))
    assert by_id.checkpoint_id == after_a.checkpoint_id
    assert by_id.values == {"log": ["a"], "x": 1}
    assert by_id.next == ("b",)
    assert by_id.step == 0
    assert by_id.parent_config is not None
    assert by_id.parent_config.checkpoint_id == history[3].checkpoint_id

    with pytest.raises(GraphStateError, match="nope"):
        graph.get_state(CFG.with_changes(checkpoint_id="nope"))
    # a checkpoint id of another thread is not found through this thread
    graph.invoke({}, RunnableConfig(thread_id="other"))
    with pytest.raises(GraphStateError):
        graph.get_state(RunnableConfig(thread_id="other", checkpoint_id=after_a.checkpoint_id))
    with pytest.raises(GraphStateError):
        graph.get_state(RunnableConfig(thread_id="empty"))
    assert graph.get_state_history(RunnableConfig(thread_id="empty")) == []


def test_get_state_history_is_newest_first_and_chained(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, ("a", "b", "c"))
    graph.invoke({}, CFG)
    graph.invoke({}, CFG)
    history = graph.get_state_history(CFG)
    assert len(history) == 8
    assert [s.step for s in history] == [6, 5, 4, 3, 2, 1, 0, -1]
    created = [s.created_at for s in history]
    assert all(c is not None for c in created)
    assert created == sorted(created, reverse=True)  # type: ignore[type-var]
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config is not None
        assert newer.parent_config.checkpoint_id == older.checkpoint_id
    assert history[-1].parent_config is None
    assert [len(s.values["log"]) for s in history] == [6, 5, 4, 3, 3, 2, 1, 0]


# -- update_state -------------------------------------------------------------------------------


def test_update_state_applies_reducers_and_returns_new_config(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver)
    graph.invoke({"x": 1}, CFG)
    before = graph.get_state(CFG)

    new_config = graph.update_state(CFG, {"log": ["h1", "h2"], "x": 2})
    assert isinstance(new_config, RunnableConfig)
    assert new_config.thread_id == "thread-1"
    assert new_config.checkpoint_id is not None
    assert new_config.checkpoint_id != before.checkpoint_id

    latest = graph.get_state(CFG)
    assert latest.checkpoint_id == new_config.checkpoint_id
    assert latest.values == {"log": ["a", "b", "h1", "h2"], "x": 2}
    assert latest.next == ()  # without as_node, next stays that of the base (completed)
    assert latest.metadata["source"] == "update"
    assert latest.parent_config is not None
    assert latest.parent_config.checkpoint_id == before.checkpoint_id
    assert graph.get_state(new_config).values == latest.values
    # the checkpoint it started from is unchanged
    assert graph.get_state(before.config).values == {"log": ["a", "b"], "x": 1}  # type: ignore[arg-type]
    assert len(graph.get_state_history(CFG)) == 4


def test_update_state_without_as_node_keeps_next(saver: BaseCheckpointSaver) -> None:
    graph = routed(saver, interrupt_before=("b",))
    graph.invoke({}, CFG)
    assert graph.get_state(CFG).next == ("b",)
    graph.update_state(CFG, {"go": "c", "log": "h"})
    snapshot = graph.get_state(CFG)
    assert snapshot.next == ("b",)
    assert snapshot.values == {"log": ["a", "h"], "go": "c"}
    # resuming runs the pending node, with the updated state
    final = graph.invoke(GraphInput.resume(), CFG)
    assert final.value("log") == ["a", "h", "b"]


def test_update_state_as_node_routes_with_that_nodes_edges(saver: BaseCheckpointSaver) -> None:
    graph = routed(saver)
    graph.invoke({}, CFG)
    assert graph.get_state(CFG).next == ()

    graph.update_state(CFG, {"go": "c"}, as_node="a")
    snapshot = graph.get_state(CFG)
    assert snapshot.next == ("c",)
    assert snapshot.metadata["source"] == "update"
    assert snapshot.values["log"] == ["a", "b"]

    final = graph.invoke(GraphInput.resume(), CFG)
    assert final.value("log") == ["a", "b", "c"]
    assert graph.get_state(CFG).next == ()

    # a plain edge: as_node="b" picks b's successor, END -> nothing next
    graph.update_state(CFG, {"go": "b"}, as_node="b")
    assert graph.get_state(CFG).next == ()
    # as_node on the route's "end" label
    graph.update_state(CFG, {"go": "end"}, as_node="a")
    assert graph.get_state(CFG).next == ()
    graph.update_state(CFG, {"go": "b"}, as_node="a")
    assert graph.get_state(CFG).next == ("b",)


def test_next_node_is_the_snapshot_s_one_next_node(saver: BaseCheckpointSaver) -> None:
    """As in LangGraph4j, a snapshot's config and update_state's carry ``next_node``; a fan-out
    (several next nodes) and the end have none."""
    graph = routed(saver, interrupt_before=("b",))
    graph.invoke({}, CFG)
    assert graph.get_state(CFG).config.next_node == "b"
    assert [s.config.next_node for s in graph.get_state_history(CFG)] == ["b", "a"]
    assert graph.update_state(CFG, {"go": "c"}, as_node="a").next_node == "c"
    assert graph.update_state(CFG, {"go": "end"}, as_node="a").next_node is None
    fan = StateGraph({"log": Channels.appender()})
    for node in ("a", "b", "c"):
        fan.add_node(node, _appending(node))
    fan.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    fan.add_edge("b", END).add_edge("c", END)
    fanned = fan.compile(CompileConfig(checkpoint_saver=saver, interrupt_after=("a",)))
    config = RunnableConfig(thread_id="fan-next")
    fanned.invoke({}, config)
    assert fanned.get_state(config).next == ("b", "c")
    assert fanned.get_state(config).config.next_node is None


def test_update_state_on_empty_thread_and_unknown_node(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver)
    config = graph.update_state(RunnableConfig(thread_id="fresh"), {"log": "seed", "x": 1})
    snapshot = graph.get_state(config)
    assert snapshot.values == {"log": ["seed"], "x": 1}
    # a first run on that thread starts from that state
    assert graph.invoke({}, RunnableConfig(thread_id="fresh")).value("log") == ["seed", "a", "b"]
    with pytest.raises(GraphStateError, match="zzz"):
        graph.update_state(RunnableConfig(thread_id="fresh"), {"x": 2}, as_node="zzz")


# -- forking ----------------------------------------------------------------------------------


def test_invoke_with_checkpoint_id_forks(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, ("a", "b", "c"))
    graph.invoke({"x": 1}, CFG)
    original = graph.get_state_history(CFG)
    original_by_id = {s.checkpoint_id: dict(s.values) for s in original}
    fork_point = original[2]  # after a, next == ("b",)
    assert fork_point.next == ("b",)

    forked = graph.invoke(None, CFG.with_changes(checkpoint_id=fork_point.checkpoint_id))
    assert dict(forked.data) == {"log": ["a", "b", "c"], "x": 1}

    history = graph.get_state_history(CFG)
    assert len(history) > len(original)
    # original checkpoints are all still there, unchanged
    for checkpoint_id, values in original_by_id.items():
        assert graph.get_state(CFG.with_changes(checkpoint_id=checkpoint_id)).values == values
    # the history branches at the fork point: two checkpoints have it as their parent
    children = [
        s
        for s in history
        if s.parent_config is not None and s.parent_config.checkpoint_id == fork_point.checkpoint_id
    ]
    assert len(children) == 2
    # the latest checkpoint descends from the fork point through new checkpoints only
    by_id = {s.checkpoint_id: s for s in history}
    chain = []
    current = history[0]
    while current.parent_config is not None:
        chain.append(current.checkpoint_id)
        current = by_id[current.parent_config.checkpoint_id]
        if current.checkpoint_id == fork_point.checkpoint_id:
            break
    assert current.checkpoint_id == fork_point.checkpoint_id
    assert all(cid not in original_by_id for cid in chain)
    assert graph.get_state(CFG).values == {"log": ["a", "b", "c"], "x": 1}


def test_fork_with_input_starts_from_that_checkpoints_state(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, ("a", "b", "c"))
    graph.invoke({"x": 1}, CFG)
    history = graph.get_state_history(CFG)
    fork_point = history[2]  # log == ["a"]
    final = graph.invoke({"x": 2}, CFG.with_changes(checkpoint_id=fork_point.checkpoint_id))
    assert dict(final.data) == {"log": ["a", "a", "b", "c"], "x": 2}
    # the original last checkpoint is untouched
    assert graph.get_state(history[0].config).values == {  # type: ignore[arg-type]
        "log": ["a", "b", "c"],
        "x": 1,
    }
    with pytest.raises(GraphStateError):
        graph.invoke({}, CFG.with_changes(checkpoint_id="missing"))


def test_fork_from_an_interrupted_checkpoint_with_update(saver: BaseCheckpointSaver) -> None:
    graph = routed(saver, interrupt_before=("b",))
    graph.invoke({}, CFG)
    parked = graph.get_state(CFG)
    assert parked.next == ("b",)
    new_config = graph.update_state(
        CFG.with_changes(checkpoint_id=parked.checkpoint_id), {"go": "c"}, as_node="a"
    )
    assert graph.get_state(new_config).next == ("c",)
    final = graph.invoke(GraphInput.resume(), CFG)
    assert final.value("log") == ["a", "c"]
    # the parked checkpoint still says b is next
    assert graph.get_state(parked.config).next == ("b",)  # type: ignore[arg-type]


# -- release_thread ------------------------------------------------------------------------------


def test_release_thread_returns_tag_and_frees_the_thread(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, ("a", "b"), release_thread=True)
    stream = graph.stream({"x": 1}, CFG)
    outputs = list(stream)
    assert [o.node for o in outputs] == [START, "a", "b", END]
    result = stream.result
    assert result.is_checkpoint_saver_tag()
    assert result.is_state_data_or_checkpoint_saver_tag()
    assert not result.is_state_data()
    tag = result.as_checkpoint_saver_tag()
    assert isinstance(tag, CheckpointSaverTag)
    assert tag.thread_id == "thread-1"
    assert len(tag.checkpoints) == 3
    assert all(isinstance(c, Checkpoint) for c in tag.checkpoints)
    assert [c.step for c in tag.checkpoints] == [1, 0, -1]  # newest first
    assert result.as_state_data_or_last_checkpoint_state_data() == {"log": ["a", "b"], "x": 1}

    assert list(saver.list("thread-1")) == []
    assert saver.get("thread-1") is None
    assert graph.get_state_history(CFG) == []
    with pytest.raises(GraphStateError):
        graph.get_state(CFG)

    # the thread can be used again: a fresh conversation
    again = graph.stream({"x": 2}, CFG)
    list(again)
    assert again.result.as_state_data_or_last_checkpoint_state_data() == {
        "log": ["a", "b"],
        "x": 2,
    }
    assert list(saver.list("thread-1")) == []


def test_without_release_thread_result_is_state_data(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver)
    stream = graph.stream({"x": 1}, CFG)
    list(stream)
    assert stream.result.is_state_data()
    assert stream.result.as_state_data() == {"log": ["a", "b"], "x": 1}
    assert stream.result.as_state_data_or_last_checkpoint_state_data() == {
        "log": ["a", "b"],
        "x": 1,
    }
    assert len(saver.list("thread-1")) == 3


def test_release_thread_keeps_an_interrupted_thread(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, ("a", "b"), release_thread=True, interrupt_before=("b",))
    stream = graph.stream({}, CFG)
    list(stream)
    assert stream.result.is_interruption_metadata()
    assert len(saver.list("thread-1")) == 2
    resumed = graph.stream(GraphInput.resume(), CFG)
    list(resumed)
    assert resumed.result.is_checkpoint_saver_tag()
    assert resumed.result.as_state_data_or_last_checkpoint_state_data()["log"] == ["a", "b"]
    assert list(saver.list("thread-1")) == []


# -- serialization of state -----------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


WHEN = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def test_state_types_survive_the_saver(saver: BaseCheckpointSaver) -> None:
    assert isinstance(saver.serializer, JsonSerializer)
    saver.serializer.register(Color)
    saver.serializer.register(Point)
    seen: list[dict[str, Any]] = []

    def produce(state: AgentState) -> dict[str, Any]:
        return {
            "pair": (1, "two"),
            "when": WHEN,
            "span": timedelta(minutes=3),
            "color": Color.BLUE,
            "point": Point(3, 4),
            "raw": b"\x00\xff",
            "tags": {"x", "y"},
        }

    def inspect_types(state: AgentState) -> None:
        seen.append({k: state.value(k) for k in ("pair", "when", "color", "point", "raw", "tags")})

    graph = StateGraph()
    graph.add_node("produce", produce).add_node("inspect", inspect_types)
    graph.add_edge(START, "produce").add_edge("produce", "inspect").add_edge("inspect", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    compiled.invoke({}, CFG)

    snapshot = compiled.get_state(CFG)
    values = snapshot.values
    assert values["pair"] == (1, "two") and type(values["pair"]) is tuple
    assert values["when"] == WHEN and type(values["when"]) is datetime
    assert values["when"].tzinfo is not None
    assert values["span"] == timedelta(minutes=3)
    assert values["color"] is Color.BLUE
    assert values["point"] == Point(3, 4) and type(values["point"]) is Point
    assert values["raw"] == b"\x00\xff"
    assert values["tags"] == {"x", "y"} and type(values["tags"]) is set

    # a second run loads the state from the saver: nodes see the same types
    seen.clear()
    compiled.invoke({}, CFG)
    assert seen[0]["pair"] == (1, "two") and type(seen[0]["pair"]) is tuple
    assert type(seen[0]["when"]) is datetime and seen[0]["when"] == WHEN
    assert seen[0]["color"] is Color.BLUE
    assert seen[0]["point"] == Point(3, 4)
    assert seen[0]["tags"] == {"x", "y"}


def test_non_serializable_value_is_serialization_error(saver: BaseCheckpointSaver) -> None:
    class Opaque:
        pass

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("good", _appending("good"))
    graph.add_node("bad", lambda s: {"log": "bad", "blob": Opaque()})
    graph.add_edge(START, "good").add_edge("good", "bad").add_edge("bad", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))

    with pytest.raises(SerializationError) as info:
        compiled.invoke({"x": 1}, CFG)
    message = str(info.value)
    assert "blob" in message
    assert "Opaque" in message

    # the last good checkpoint is intact and is the thread's latest
    latest = compiled.get_state(CFG)
    assert latest.values == {"log": ["good"], "x": 1}
    assert latest.next == ("bad",)
    assert len(compiled.get_state_history(CFG)) == 2


def test_non_serializable_input_is_serialization_error(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver)
    graph.invoke({"x": 1}, CFG)
    with pytest.raises(SerializationError, match="handle"):
        graph.invoke({"handle": object()}, CFG)
    assert graph.get_state(CFG).values == {"log": ["a", "b"], "x": 1}
    assert len(graph.get_state_history(CFG)) == 3
