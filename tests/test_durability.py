"""SPEC §10: durability modes in process -- ``RunnableConfig(durability="sync"|"async"|"exit")``
gives the same results in every mode; only which checkpoints are stored, and when, differs."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from langgraph_celery import (
    END,
    MARK_FOR_REMOVAL,
    START,
    AgentState,
    Channels,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    NodeError,
    RunnableConfig,
    SerializationError,
    StateGraph,
    StreamMode,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, Checkpoint, RunStatus
from langgraph_celery.checkpoint.memory import MemorySaver
from langgraph_celery.checkpoint.sql import SqlSaver

MODES = ("sync", "async", "exit")


def chain(
    saver: BaseCheckpointSaver,
    nodes: tuple[str, ...] = ("a", "b", "c"),
    fail: dict[str, bool] | None = None,
    **compile_config: Any,
) -> CompiledGraph:
    """START -> a -> b -> c -> END, each node appending its name to ``log``; a node named in
    ``fail`` raises while ``fail[node]`` is true."""
    graph = StateGraph({"log": Channels.appender()})

    def action_of(name: str) -> Any:
        def action(state: AgentState) -> dict[str, Any]:
            if fail is not None and fail.get(name):
                raise RuntimeError(f"{name} is down")
            return {"log": name}

        return action

    previous = START
    for node in nodes:
        graph.add_node(node, action_of(node))
        graph.add_edge(previous, node)
        previous = node
    graph.add_edge(previous, END)
    return graph.compile(CompileConfig(checkpoint_saver=saver, **compile_config))


def config(thread: str, mode: str, **fields: Any) -> RunnableConfig:
    return RunnableConfig(thread_id=thread, durability=mode, **fields)  # type: ignore[arg-type]


def stored(saver: BaseCheckpointSaver, thread: str) -> list[Checkpoint]:
    return list(saver.list(thread))


def record_status(saver: BaseCheckpointSaver, run_id: str) -> RunStatus | None:
    record = saver.get_run(run_id)  # type: ignore[attr-defined]
    return record.status if record is not None else None


def test_a_bad_mode_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match="'sync', 'async', 'exit'") as raised:
        RunnableConfig(durability="always")  # type: ignore[arg-type]
    assert "'always'" in str(raised.value)
    assert RunnableConfig().durability == "sync"


@pytest.mark.parametrize("mode", MODES)
def test_same_results_in_every_mode(saver: BaseCheckpointSaver, mode: str) -> None:
    graph = chain(saver)
    reference = chain(MemorySaver())
    for stream_mode in (StreamMode.VALUES, StreamMode.UPDATES):
        expected = [
            (o.node, dict(o.state.data), getattr(o, "update", None))
            for o in reference.stream(
                {"x": 1}, config(f"ref-{stream_mode}", "sync", stream_mode=stream_mode)
            )
        ]
        outputs = [
            (o.node, dict(o.state.data), getattr(o, "update", None))
            for o in graph.stream(
                {"x": 1}, config(f"t-{stream_mode}", mode, stream_mode=stream_mode)
            )
        ]
        assert outputs == expected
        assert [node for node, _, _ in outputs] == [START, "a", "b", "c", END]
        if stream_mode is StreamMode.UPDATES:
            assert [update for _, _, update in outputs][1:4] == [
                {"log": "a"},
                {"log": "b"},
                {"log": "c"},
            ]
    result = graph.invoke({"x": 1}, config("t-invoke", mode))
    assert dict(result.data) == {"x": 1, "log": ["a", "b", "c"]}
    assert dict(graph.get_state(config("t-invoke", mode)).state.data) == dict(result.data)


@pytest.mark.parametrize("mode", MODES)
def test_which_checkpoints_are_stored(saver: BaseCheckpointSaver, mode: str) -> None:
    graph = chain(saver)
    graph.invoke({"x": 1}, config("t", mode))
    history = graph.get_state_history(config("t", mode))
    if mode == "exit":
        # the run's start and where it ended; the last names the start as its parent
        assert [s.step for s in history] == [2, -1]
        assert history[0].parent_config is not None
        assert history[0].parent_config.checkpoint_id == history[1].config.checkpoint_id
    else:
        assert [s.step for s in history] == [2, 1, 0, -1]
    assert history[0].next == ()
    assert list(history[0].state.data["log"]) == ["a", "b", "c"]
    latest = saver.get("t")
    assert latest is not None
    assert record_status(saver, latest.run_id) is RunStatus.COMPLETED
    # every stored checkpoint's parent is stored
    ids = {c.checkpoint_id for c in stored(saver, "t")}
    assert all(c.parent_id is None or c.parent_id in ids for c in stored(saver, "t"))


@pytest.mark.parametrize("mode", MODES)
def test_a_parked_run_is_stored_where_it_parks(saver: BaseCheckpointSaver, mode: str) -> None:
    graph = chain(saver, interrupt_before=("c",))
    cfg = config("t", mode)
    stream = graph.stream({"x": 1}, cfg)
    assert [output.node for output in stream] == [START, "a", "b"]
    assert stream.result.as_interruption_metadata().node_id == "c"
    snapshot = graph.get_state(cfg)
    assert snapshot.next == ("c",)
    assert list(snapshot.state.data["log"]) == ["a", "b"]
    latest = saver.get("t")
    assert latest is not None
    assert record_status(saver, latest.run_id) is RunStatus.PARKED
    steps = [s.step for s in graph.get_state_history(cfg)]
    assert steps == ([1, -1] if mode == "exit" else [1, 0, -1])
    result = graph.invoke(GraphInput.resume(), cfg)
    assert list(result.data["log"]) == ["a", "b", "c"]
    assert record_status(saver, latest.run_id) is RunStatus.COMPLETED


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_run_is_stored_where_it_failed(saver: BaseCheckpointSaver, mode: str) -> None:
    fail = {"c": True}
    graph = chain(saver, fail=fail)
    cfg = config("t", mode)
    with pytest.raises(NodeError, match="c is down"):
        graph.invoke({"x": 1}, cfg)
    snapshot = graph.get_state(cfg)
    assert snapshot.next == ("c",)
    assert list(snapshot.state.data["log"]) == ["a", "b"]
    latest = saver.get("t")
    assert latest is not None
    assert record_status(saver, latest.run_id) is RunStatus.FAILED
    fail["c"] = False
    result = graph.invoke(GraphInput.resume(), cfg)
    assert list(result.data["log"]) == ["a", "b", "c"]


class _NotJson:
    """A value no serializer stores."""


@pytest.mark.parametrize("transient", [False, True], ids=["kept", "removed-later"])
@pytest.mark.parametrize("mode", MODES)
def test_a_value_the_serializer_refuses_fails_the_run_at_its_step_in_every_mode(
    saver: BaseCheckpointSaver, mode: str, transient: bool
) -> None:
    """The step whose update cannot be stored fails, with the step before it stored, in every
    mode: "exit" does not run the nodes after it, nor complete because a later step removed the
    value before the end (SPEC §8: an update the serializer refuses fails the run)."""
    ran: list[str] = []
    refused = {"b": {"log": "b", "bad": _NotJson()}}
    later = {"c": {"log": "c", "bad": MARK_FOR_REMOVAL}} if transient else {}

    def action_of(name: str) -> Any:
        def action(state: AgentState) -> dict[str, Any]:
            ran.append(name)
            return {**refused, **later}.get(name, {"log": name})

        return action

    graph = StateGraph({"log": Channels.appender()})
    for name in ("a", "b", "c", "d"):
        graph.add_node(name, action_of(name))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", "d")
    compiled = graph.add_edge("d", END).compile(CompileConfig(checkpoint_saver=saver))
    cfg = config("t", mode)
    with pytest.raises(SerializationError, match="state key 'bad'"):
        compiled.invoke({"log": "x"}, cfg)
    assert ran == ["a", "b"]
    snapshot = compiled.get_state(cfg)
    assert snapshot.next == ("b",)
    assert list(snapshot.state.data["log"]) == ["x", "a"]


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_run_is_stored_where_it_stopped(saver: BaseCheckpointSaver, mode: str) -> None:
    graph = chain(saver, ("a", "b", "c", "d"))
    cfg = config("t", mode)
    stream = graph.stream({"x": 1}, cfg)
    seen = []
    for output in stream:
        seen.append(output.node)
        if output.node == "b":
            stream.cancel()
    assert seen == [START, "a", "b"]
    snapshot = graph.get_state(cfg)
    assert snapshot.next == ("c",)
    assert list(snapshot.state.data["log"]) == ["a", "b"]
    latest = saver.get("t")
    assert latest is not None
    assert record_status(saver, latest.run_id) is RunStatus.CANCELLED
    result = graph.invoke(GraphInput.resume(), cfg)
    assert list(result.data["log"]) == ["a", "b", "c", "d"]


def test_async_stores_a_step_while_the_next_runs(sql_saver: SqlSaver) -> None:
    """The store of the checkpoint after ``a`` waits until ``b`` has started: with "async" the
    run goes on (b starts, the store finishes); "sync" would wait for the store first."""
    b_started = threading.Event()
    overlapped: list[bool] = []
    put = sql_saver.put

    def slow_put(checkpoint: Checkpoint) -> Checkpoint:
        if checkpoint.node == "a":
            overlapped.append(b_started.wait(timeout=10))
        return put(checkpoint)

    sql_saver.put = slow_put  # type: ignore[method-assign]
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", lambda state: {"log": "a"})

    def b(state: AgentState) -> dict[str, Any]:
        b_started.set()
        return {"log": "b"}

    graph.add_node("b", b)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=sql_saver))
    result = compiled.invoke({}, config("t", "async"))
    assert list(result.data["log"]) == ["a", "b"]
    assert overlapped == [True]
    assert [s.step for s in compiled.get_state_history(config("t", "async"))] == [1, 0, -1]


class _FailingPut(MemorySaver):
    """A MemorySaver whose store refuses the checkpoint stored after ``node``."""

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        if checkpoint.node == self.node:
            raise OSError(f"disk full storing the step of {self.node}")
        return super().put(checkpoint)


def test_async_a_background_store_that_fails_fails_the_run() -> None:
    saver = _FailingPut("a")
    graph = chain(saver)
    with pytest.raises(OSError, match="disk full"):
        graph.invoke({"x": 1}, config("t", "async"))
    # nothing after the failed store was stored: no checkpoint without its parent
    assert [c.step for c in stored(saver, "t")] == [-1]


def test_exit_a_store_that_fails_at_the_end_fails_the_run() -> None:
    saver = _FailingPut("c")
    graph = chain(saver)
    with pytest.raises(OSError, match="disk full"):
        graph.invoke({"x": 1}, config("t", "exit"))
    assert [c.step for c in stored(saver, "t")] == [-1]


@pytest.mark.parametrize("mode", MODES)
def test_parallel_branches_give_the_same_state(saver: BaseCheckpointSaver, mode: str) -> None:
    """START -> a -> (b, c) -> d -> END: the fan-out step's updates merge alike."""
    graph = StateGraph({"log": Channels.appender()})
    for node in ("a", "b", "c", "d"):
        graph.add_node(node, lambda state, node=node: {"log": node})
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("a", "c")
    graph.add_edge(["b", "c"], "d")
    graph.add_edge("d", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    result = compiled.invoke({}, config("t", mode))
    assert sorted(result.data["log"][1:3]) == ["b", "c"]
    assert [result.data["log"][0], result.data["log"][3]] == ["a", "d"]
    steps = [s.step for s in compiled.get_state_history(config("t", mode))]
    assert steps == ([2, -1] if mode == "exit" else [2, 1, 0, -1])
