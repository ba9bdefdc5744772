"""SPEC §9 streaming nodes and custom output, in process: generators in a node's update and
``config.emit`` stream while the node runs; the node's update is the final one.

The first tests port LangGraph4j's ``LG4JCustomOutputTest`` (its graph and expected outputs);
the rest pin the behaviour SPEC §9 adds (generators, ``Done``, hooks, stream modes)."""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    CompileConfig,
    Done,
    GraphStateError,
    InvalidUpdateError,
    NodeOutput,
    RunnableConfig,
    StateGraph,
    StateSnapshot,
    StreamingOutput,
    StreamMode,
)
from langgraph_celery.checkpoint import MemorySaver

SCHEMA = {"messages": Channel(reducer=operator.add, default=list)}


class CustomOutput(NodeOutput):
    """A user's own output type, emitted as it is (LG4JCustomOutputTest's ``CustomOutput``)."""


class ElapsedOutput(NodeOutput):
    """What LG4JCustomOutputTest's wrap hook emits after the action."""


def elapsed_hook(node: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
    result = action(state, config)
    config.emit(ElapsedOutput(node, state))
    return result


def one_node_graph(action: Any, with_hook: bool) -> Any:
    graph = StateGraph(SCHEMA)
    if with_hook:
        graph.add_wrap_call_node_hook(elapsed_hook)
    graph.add_node("A", action)
    graph.add_edge(START, "A")
    graph.add_edge("A", END)
    return graph.compile(CompileConfig())


def plain_custom(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    config.emit(CustomOutput("A.START", state))
    time.sleep(0.2)
    return {"messages": ["A"]}


async def async_custom(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    config.emit(CustomOutput("A.START", state))
    await asyncio.sleep(0.2)
    return {"messages": ["A"]}


@pytest.mark.parametrize("with_hook", [False, True])
@pytest.mark.parametrize("action", [plain_custom, async_custom])
def test_lg4j_custom_output_sync_and_async_iteration(action: Any, with_hook: bool) -> None:
    """LG4JCustomOutputTest.testOneNodeWithDispatchAsyncCustomOutput and
    testOneNodeWithDispatchSyncCustomOutput (``dispatchAsync`` and ``dispatchSync`` are both
    ``config.emit``), each iterated with ``forEachAsync`` (``astream``) and in a loop."""
    app = one_node_graph(action, with_hook)
    expected = [START, "A.START", "A", END]

    outputs = list(app.stream(None, RunnableConfig()))
    assert [o.node for o in outputs if not isinstance(o, ElapsedOutput)] == expected
    assert isinstance(outputs[1], CustomOutput)

    async def collect() -> list[NodeOutput]:
        return [o async for o in app.astream(None, RunnableConfig())]

    outputs = asyncio.run(collect())
    assert [o.node for o in outputs if not isinstance(o, ElapsedOutput)] == expected
    elapsed = [o for o in outputs if isinstance(o, ElapsedOutput)]
    assert len(elapsed) == (1 if with_hook else 0)
    if with_hook:  # the hook emits after the action, before the node's step output
        step = next(i for i, o in enumerate(outputs) if o.node == "A" and type(o) is NodeOutput)
        assert outputs.index(elapsed[0]) < step
    assert outputs[-1].state.data == {"messages": ["A"]}


def test_emit_of_a_plain_value_is_a_streaming_output_with_the_node_and_its_state() -> None:
    def node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        config.emit({"progress": 1})
        return {"messages": ["n"]}

    graph = StateGraph(SCHEMA).add_node("n", node).add_edge(START, "n").add_edge("n", END)
    outputs = list(graph.compile().stream({"messages": ["in"]}))
    chunk = outputs[1]
    assert isinstance(chunk, StreamingOutput)
    assert (chunk.node, chunk.chunk) == ("n", {"progress": 1})
    assert chunk.state.data == {"messages": ["in"]}  # the state the node was called with


def test_emit_outside_a_run_is_a_graph_state_error() -> None:
    with pytest.raises(GraphStateError, match="inside a running node"):
        RunnableConfig().emit("x")


# -- streaming nodes ---------------------------------------------------------------------------


def sync_streamer(state: AgentState) -> dict[str, Any]:
    def tokens() -> Iterator[str]:
        yield "Hel"
        yield "lo"
        return {"answer": "Hello", "done": True}

    return {"messages": ["before"], "stream": tokens()}


async def async_streamer(state: AgentState) -> dict[str, Any]:
    async def tokens() -> AsyncIterator[Any]:
        yield "Hel"
        yield "lo"
        yield Done({"answer": "Hello", "done": True})

    return {"messages": ["before"], "stream": tokens()}


def sync_done_streamer(state: AgentState) -> dict[str, Any]:
    def tokens() -> Iterator[Any]:
        yield "Hel"
        yield "lo"
        yield Done({"answer": "Hello", "done": True})

    return {"messages": ["before"], "stream": tokens()}


def streaming_graph(action: Any, saver: MemorySaver | None = None) -> Any:
    graph = StateGraph(SCHEMA)
    graph.add_node("llm", action)
    graph.add_node("next", lambda state: {"messages": ["next"]})
    graph.add_edge(START, "llm")
    graph.add_edge("llm", "next")
    graph.add_edge("next", END)
    return graph.compile(CompileConfig(checkpoint_saver=saver))


STREAMERS = [sync_streamer, async_streamer, sync_done_streamer]
FINAL = {"messages": ["before", "next"], "answer": "Hello", "done": True}
STEP_UPDATE = {"messages": ["before"], "answer": "Hello", "done": True}


@pytest.mark.parametrize("action", STREAMERS)
def test_generator_items_are_streamed_then_the_final_update_is_merged(action: Any) -> None:
    outputs = list(streaming_graph(action).stream(None))
    assert [(o.node, getattr(o, "chunk", None)) for o in outputs] == [
        (START, None),
        ("llm", "Hel"),
        ("llm", "lo"),
        ("llm", None),
        ("next", None),
        (END, None),
    ]
    assert all(isinstance(o, StreamingOutput) for o in outputs[1:3])
    assert not isinstance(outputs[3], StreamingOutput)
    # the rest of the mapping merged with the generator's final update
    assert outputs[3].state.data == STEP_UPDATE
    assert outputs[-1].state.data == FINAL


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_key_written_by_the_rest_and_the_final_update_merges_through_its_reducer(
    kind: str,
) -> None:
    def node(state: AgentState) -> dict[str, Any]:
        def sync_tokens() -> Iterator[str]:
            yield "x"
            return {"messages": ["final"], "plain": "final"}

        async def async_tokens() -> AsyncIterator[Any]:
            yield "x"
            yield Done({"messages": ["final"], "plain": "final"})

        tokens = sync_tokens() if kind == "sync" else async_tokens()
        return {"messages": ["rest"], "plain": "rest", "s": tokens}

    graph = StateGraph(SCHEMA).add_node("n", node).add_edge(START, "n").add_edge("n", END)
    assert graph.compile().invoke(None).data == {"messages": ["rest", "final"], "plain": "final"}


@pytest.mark.parametrize("action", STREAMERS)
def test_invoke_ignores_chunks_and_returns_the_final_state(action: Any) -> None:
    assert streaming_graph(action).invoke(None).data == FINAL


@pytest.mark.parametrize("action", STREAMERS)
def test_updates_mode_gives_the_final_update_and_chunks_pass_through(action: Any) -> None:
    config = RunnableConfig(stream_mode=StreamMode.UPDATES)
    outputs = list(streaming_graph(action).stream(None, config))
    assert [o.chunk for o in outputs if isinstance(o, StreamingOutput)] == ["Hel", "lo"]
    steps = [o for o in outputs if not isinstance(o, StreamingOutput)]
    assert [(o.node, o.update) for o in steps] == [
        (START, {}),
        ("llm", STEP_UPDATE),
        ("next", {"messages": ["next"]}),
        (END, {}),
    ]


@pytest.mark.parametrize("action", STREAMERS)
def test_snapshots_mode_and_checkpoints_hold_no_chunk(action: Any) -> None:
    saver = MemorySaver()
    app = streaming_graph(action, saver)
    config = RunnableConfig(thread_id="t", stream_mode=StreamMode.SNAPSHOTS)
    outputs = list(app.stream(None, config))
    chunks = [o for o in outputs if isinstance(o, StreamingOutput)]
    assert [c.chunk for c in chunks] == ["Hel", "lo"]
    assert not any(isinstance(c, StateSnapshot) for c in chunks)
    snapshots = [o for o in outputs if not isinstance(o, StreamingOutput)]
    assert all(isinstance(o, StateSnapshot) for o in snapshots)
    assert [o.node for o in snapshots] == [START, "llm", "next", END]
    history = app.get_state_history(config)
    stored = repr([snapshot.metadata for snapshot in history])
    assert "'Hel'" not in stored and "'lo'" not in stored and "generator" not in stored
    assert history[0].values == FINAL


def test_a_streaming_graph_stores_as_many_checkpoints_as_a_plain_one() -> None:
    def plain(state: AgentState) -> dict[str, Any]:
        return STEP_UPDATE

    counts = []
    for action in (plain, sync_streamer, async_streamer):
        saver = MemorySaver()
        app = streaming_graph(action, saver)
        config = RunnableConfig(thread_id="t")
        list(app.stream(None, config))
        history = app.get_state_history(config)
        assert history[0].values == FINAL
        counts.append(len(history))
    assert counts[0] == counts[1] == counts[2]


@pytest.mark.parametrize("action", STREAMERS)
def test_after_hooks_see_the_final_update_once(action: Any) -> None:
    seen: list[Any] = []

    def after(node: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
        seen.append((node, result))
        return result

    graph = StateGraph(SCHEMA)
    graph.add_after_call_node_hook("llm", after)
    graph.add_node("llm", action)
    graph.add_edge(START, "llm")
    graph.add_edge("llm", END)
    list(graph.compile().stream(None))
    assert seen == [("llm", STEP_UPDATE)]


def test_generator_yielding_node_outputs_streams_them_as_they_are() -> None:
    def node(state: AgentState) -> dict[str, Any]:
        def items() -> Iterator[Any]:
            yield CustomOutput("custom", state)
            yield "plain"

        return {"s": items()}

    graph = StateGraph(SCHEMA).add_node("n", node).add_edge(START, "n").add_edge("n", END)
    outputs = list(graph.compile().stream(None))
    assert isinstance(outputs[1], CustomOutput) and outputs[1].node == "custom"
    assert isinstance(outputs[2], StreamingOutput) and outputs[2].chunk == "plain"


# -- chunks reach the consumer while the node runs ---------------------------------------------


def test_async_generator_chunks_arrive_while_the_node_runs() -> None:
    """The node waits, after its first chunk, for the consumer to have received it: if chunks
    were held until the node ended, it would time out and say so in its update."""

    async def node(state: AgentState) -> dict[str, Any]:
        async def tokens() -> AsyncIterator[Any]:
            yield "first"
            try:
                await asyncio.wait_for(received.wait(), 5)
                yield Done({"live": True})
            except TimeoutError:
                yield Done({"live": False})

        return {"s": tokens()}

    received = asyncio.Event()
    graph = StateGraph().add_node("n", node).add_edge(START, "n").add_edge("n", END)
    app = graph.compile()

    async def consume() -> list[NodeOutput]:
        outputs = []
        async for output in app.astream(None):
            if isinstance(output, StreamingOutput):
                received.set()
            outputs.append(output)
        return outputs

    outputs = asyncio.run(consume())
    assert outputs[-1].state.data == {"live": True}


@pytest.mark.parametrize(
    "how", ["generator", "emit_in_parallel_step", "emit_alone", "emit_in_a_wrap_hook"]
)
def test_plain_code_in_threads_streams_while_it_runs(how: str) -> None:
    """SPEC section 9: ``config.emit(value)`` streams at once, also from a plain node alone in
    its step (run inline by ``invoke``, in a thread when someone streams the run)."""
    received = threading.Event()

    def generator_node(state: AgentState) -> dict[str, Any]:
        def tokens() -> Iterator[str]:
            yield "first"
            return {"live": received.wait(5)}

        return {"s": tokens()}

    def emitting_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        config.emit("first")
        return {"live": received.wait(5)}

    def emitting_hook(node: str, state: Any, config: RunnableConfig, action: Any) -> Any:
        config.emit("first")
        return {**action(state, config), "live": received.wait(5)}

    graph = StateGraph()
    if how == "generator":
        graph.add_node("n", generator_node).add_edge(START, "n").add_edge("n", END)
    elif how == "emit_alone":
        graph.add_node("n", emitting_node).add_edge(START, "n").add_edge("n", END)
    elif how == "emit_in_a_wrap_hook":
        graph.add_node("n", lambda s: {}).add_edge(START, "n").add_edge("n", END)
        graph.add_wrap_call_node_hook("n", emitting_hook)
    else:  # two plain nodes in one step run in threads
        graph.add_node("n", emitting_node).add_node("other", lambda s: {"other": 1})
        graph.add_edge(START, "n").add_edge(START, "other")
        graph.add_edge("n", END).add_edge("other", END)
    outputs = []
    for output in graph.compile().stream(None):
        if isinstance(output, StreamingOutput):
            received.set()
        outputs.append(output)
    assert outputs[-1].state.data["live"] is True


def test_parallel_nodes_chunks_each_once_in_order() -> None:
    def streamer(name: str) -> Any:
        def node(state: AgentState) -> dict[str, Any]:
            def tokens() -> Iterator[str]:
                for index in range(20):
                    yield f"{name}{index}"
                return {"messages": [name]}

            return {"s": tokens()}

        return node

    async def async_streamer_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        for index in range(20):
            config.emit(f"c{index}")
            await asyncio.sleep(0)
        return {"messages": ["c"]}

    graph = StateGraph(SCHEMA)
    graph.add_node("a", streamer("a")).add_node("b", streamer("b"))
    graph.add_node("c", async_streamer_node)
    for node in "abc":
        graph.add_edge(START, node).add_edge(node, END)
    outputs = list(graph.compile().stream(None))
    for name in "abc":
        chunks = [o.chunk for o in outputs if isinstance(o, StreamingOutput) and o.node == name]
        assert chunks == [f"{name}{index}" for index in range(20)]
    assert sorted(outputs[-1].state.data["messages"]) == ["a", "b", "c"]


def test_emit_from_an_edge_hook_and_a_route() -> None:
    def route(state: AgentState, config: RunnableConfig) -> str:
        config.emit("routing")
        return "b"

    graph = StateGraph(SCHEMA)
    graph.add_node("a", lambda s: {"messages": ["a"]}).add_node("b", lambda s: {"messages": ["b"]})
    graph.add_edge(START, "a").add_conditional_edges("a", route, {"b": "b"}).add_edge("b", END)
    outputs = list(graph.compile().stream(None))
    assert [(o.node, getattr(o, "chunk", None)) for o in outputs] == [
        (START, None),
        ("a", "routing"),
        ("a", None),
        ("b", None),
        (END, None),
    ]


# -- wrong generators --------------------------------------------------------------------------


def test_two_generators_in_one_update_are_refused() -> None:
    def node(state: AgentState) -> dict[str, Any]:
        return {"x": iter_gen(), "y": iter_gen()}

    def iter_gen() -> Iterator[int]:
        yield 1

    graph = StateGraph().add_node("n", node).add_edge(START, "n").add_edge("n", END)
    with pytest.raises(InvalidUpdateError, match=r"'n'.*'x' and 'y'"):
        graph.compile().invoke(None)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_items_after_done_are_refused(kind: str) -> None:
    def sync_gen() -> Iterator[Any]:
        yield Done({"a": 1})
        yield "late"

    async def async_gen() -> AsyncIterator[Any]:
        yield Done({"a": 1})
        yield "late"

    def node(state: AgentState) -> dict[str, Any]:
        return {"s": sync_gen() if kind == "sync" else async_gen()}

    graph = StateGraph().add_node("n", node).add_edge(START, "n").add_edge("n", END)
    with pytest.raises(InvalidUpdateError, match=r"'n'.*Done must be the last"):
        list(graph.compile().stream(None))


def test_a_final_value_that_is_not_a_mapping_is_refused() -> None:
    def node(state: AgentState) -> dict[str, Any]:
        def tokens() -> Iterator[str]:
            yield "a"
            return "not a mapping"  # type: ignore[return-value]

        return {"s": tokens()}

    graph = StateGraph().add_node("n", node).add_edge(START, "n").add_edge("n", END)
    with pytest.raises(InvalidUpdateError, match=r"'n'.*must end with a mapping"):
        graph.compile().invoke(None)


def test_a_failing_generator_fails_its_node_with_the_chunks_before_it_streamed() -> None:
    def node(state: AgentState) -> dict[str, Any]:
        def tokens() -> Iterator[str]:
            yield "a"
            raise ValueError("model went away")

        return {"s": tokens()}

    graph = StateGraph().add_node("n", node).add_edge(START, "n").add_edge("n", END)
    outputs: list[NodeOutput] = []
    with pytest.raises(Exception, match="model went away"):
        for output in graph.compile().stream(None):
            outputs.append(output)
    assert [getattr(o, "chunk", None) for o in outputs] == [None, "a"]


def test_cancel_with_interrupt_stops_an_async_streaming_node() -> None:
    async def node(state: AgentState) -> dict[str, Any]:
        async def tokens() -> AsyncIterator[str]:
            for index in range(1000):
                yield f"t{index}"
                await asyncio.sleep(0.01)

        return {"s": tokens()}

    graph = StateGraph().add_node("n", node).add_edge(START, "n").add_edge("n", END)
    stream = graph.compile().stream(None)
    seen = []
    for output in stream:
        seen.append(output)
        if len(seen) == 3:
            stream.cancel(interrupt=True)
    assert stream.is_cancelled() and stream.result.is_empty()
    assert len(seen) < 50
