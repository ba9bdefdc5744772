"""Cancelling a stream (SPEC §9), in process; LangGraph4j's ``CancellationTest`` is the
reference (graphCancelTest: sync and async iteration; graphWithParallelNodesCancelTest: without
and with interrupt, its ``node_completed`` count), with shorter delays.  Its
compiledSubGraphCancelTest: cancelled inside the compiled subgraph; the Celery runs are in
``tests/celery/test_celery_run_loop.py`` and ``tests/celery/test_celery_streaming.py``."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    Channels,
    CompileConfig,
    GraphInput,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, RunStatus


def waiting_node(
    name: str, delay: float, done: list[str], started: threading.Event | None = None
) -> Any:
    async def node(state: Any) -> dict[str, Any]:
        if started is not None:
            started.set()
        await asyncio.sleep(delay)
        done.append(name)
        return {"messages": name}

    return node


def three_agents(
    done: list[str],
    delay: float = 0.3,
    saver: Any = None,
    started: threading.Event | None = None,
) -> Any:
    return (
        StateGraph({"messages": Channels.appender()})
        .add_node("agent_1", waiting_node("agent_1", delay, done, started))
        .add_node("agent_2", waiting_node("agent_2", delay, done))
        .add_node("agent_3", waiting_node("agent_3", delay, done))
        .add_edge(START, "agent_1")
        .add_edge("agent_1", "agent_2")
        .add_edge("agent_2", "agent_3")
        .add_edge("agent_3", END)
        .compile(CompileConfig(checkpoint_saver=saver, graph_id="agents" if saver else None))
    )


def cancel_when(event: threading.Event, stream: Any, interrupt: bool) -> threading.Thread:
    def cancel() -> None:
        event.wait(10)
        stream.cancel(interrupt)

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


def test_an_interrupted_stream_ends_at_once_with_an_empty_result() -> None:
    done: list[str] = []
    started = threading.Event()
    stream = three_agents(done, delay=5.0, started=started).stream(GraphInput.no_args())
    canceller = cancel_when(started, stream, interrupt=True)  # once agent_1 runs
    outputs = [output.node for output in stream]
    canceller.join()
    assert outputs == [START]  # agent_1 was cancelled in its sleep: nothing after START
    assert done == []
    assert stream.is_cancelled()
    assert stream.result.is_empty()
    assert stream.result.is_cancelled()  # (LangGraph4j's isCancelled())
    assert stream.cancel() is False  # (ended)


def test_a_cancel_without_interrupt_lets_the_running_step_finish_then_stops() -> None:
    done: list[str] = []
    started = threading.Event()
    stream = three_agents(done, delay=0.2, started=started).stream(GraphInput.no_args())
    canceller = cancel_when(started, stream, interrupt=False)  # while agent_1 runs
    outputs = [output.node for output in stream]
    canceller.join()
    assert outputs == [START, "agent_1"]
    assert done == ["agent_1"]
    assert stream.is_cancelled() and stream.result.is_empty()
    assert stream.result.is_cancelled()
    finished = three_agents([], delay=0.0).stream(GraphInput.no_args())
    list(finished)
    assert finished.result.is_state_data() and not finished.result.is_cancelled()


def test_a_cancel_between_steps_stops_before_the_next() -> None:
    done: list[str] = []
    stream = three_agents(done, delay=0.01).stream(GraphInput.no_args())
    outputs = []
    for output in stream:
        outputs.append(output.node)
        if output.node == START:
            assert stream.cancel() is True
    assert outputs == [START]
    assert done == []


def test_parallel_nodes_finish_their_step_and_the_join_never_runs() -> None:
    done: list[str] = []
    started = threading.Event()
    graph = (
        StateGraph({"messages": Channels.appender()})
        .add_node("node_start", lambda state: {})
        .add_node("agent_1", waiting_node("agent_1", 0.2, done))
        .add_node("agent_2", waiting_node("agent_2", 0.3, done, started))
        .add_node("agent_3", waiting_node("agent_3", 0.2, done))
        .add_node("node_end", lambda state: {"messages": "end"})
        .add_edge(START, "node_start")
        .add_edge("node_start", "agent_1")
        .add_edge("node_start", "agent_2")
        .add_edge("node_start", "agent_3")
        .add_edge(["agent_1", "agent_2", "agent_3"], "node_end")
        .add_edge("node_end", END)
        .compile()
    )
    stream = graph.stream(GraphInput.no_args())
    canceller = cancel_when(started, stream, interrupt=False)  # while the three run
    outputs = [output.node for output in stream]
    canceller.join()
    assert outputs == [START, "node_start", "agent_1", "agent_2", "agent_3"]
    assert sorted(done) == ["agent_1", "agent_2", "agent_3"]
    assert stream.result.is_empty()


def test_an_async_stream_is_cancelled_too() -> None:
    done: list[str] = []

    async def main() -> list[str]:
        stream = three_agents(done, delay=5.0).astream(GraphInput.no_args())
        seen = []
        async for output in stream:
            seen.append(output.node)
            loop = asyncio.get_running_loop()
            loop.call_later(0.05, stream.cancel, True)  # while agent_1 sleeps
        assert stream.is_cancelled() and stream.result.is_empty()
        return seen

    assert asyncio.run(main()) == [START]
    assert done == []


def test_a_cancelled_run_keeps_its_checkpoints_and_resumes(saver: BaseCheckpointSaver) -> None:
    done: list[str] = []
    graph = three_agents(done, delay=0.01, saver=saver)
    config = RunnableConfig(thread_id="cancelled")
    stream = graph.stream({"messages": []}, config)
    for output in stream:
        if output.node == "agent_1":
            stream.cancel()
    assert graph.get_state(config).next == ("agent_2",)
    run = saver.get_run(saver.get("cancelled").run_id)  # type: ignore[attr-defined]
    assert run is not None and run.status is RunStatus.CANCELLED
    state = graph.invoke(GraphInput.resume(), config)
    assert state.data["messages"] == ["agent_1", "agent_2", "agent_3"]


def interrupted_chain(saver: BaseCheckpointSaver, interrupt_at: int | None) -> Any:
    """``tick`` loops until ``ticks`` is 5; raises KeyboardInterrupt (Ctrl-C in the node)
    on the step ``interrupt_at``, once."""

    def tick(state: Any) -> dict[str, Any]:
        ticks = int(state.value("ticks", 0))
        if ticks == interrupt_at:
            raise KeyboardInterrupt
        return {"ticks": ticks + 1}

    def again(state: Any) -> str:
        return "tick" if int(state.value("ticks", 0)) < 5 else END

    builder = StateGraph().add_node("tick", tick).add_edge(START, "tick")
    builder.add_conditional_edges("tick", again, {"tick": "tick", END: END})
    return builder.compile(CompileConfig(checkpoint_saver=saver, graph_id="ticking"))


@pytest.mark.parametrize("how", ["invoke", "stream"])
def test_a_ctrl_c_in_a_node_records_the_run_cancelled_and_resumable(
    saver: BaseCheckpointSaver, how: str
) -> None:
    """A KeyboardInterrupt raised in a node (the node runs inline, or in the task that runs a
    streamed run's step): it reaches the caller, and the run is recorded cancelled, never left
    running, with the thread resumable from its last checkpoint."""
    config = RunnableConfig(thread_id=f"ctrl-c-{how}")
    graph = interrupted_chain(saver, interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        if how == "invoke":
            graph.invoke({}, config)
        else:
            list(graph.stream({}, config))
    run = saver.get_run(saver.get(config.thread_id).run_id)  # type: ignore[attr-defined]
    assert run is not None and run.status is RunStatus.CANCELLED
    assert graph.get_state(config).values["ticks"] == 2
    resumed = interrupted_chain(saver, interrupt_at=None).invoke(GraphInput.resume(), config)
    assert resumed.data["ticks"] == 5


def test_closing_a_stream_between_two_outputs_records_the_run_cancelled(
    saver: BaseCheckpointSaver,
) -> None:
    """``GraphStream.close()`` (a Ctrl-C in the caller's loop body, a ``break``): the run
    stops where it is, recorded cancelled, resumable."""
    config = RunnableConfig(thread_id="closed")
    graph = interrupted_chain(saver, interrupt_at=None)
    stream = graph.stream({}, config)
    for output in stream:
        if output.node == "tick":
            break
    stream.close()
    stream.close()  # (once is enough)
    run = saver.get_run(saver.get("closed").run_id)  # type: ignore[attr-defined]
    assert run is not None and run.status is RunStatus.CANCELLED
    assert graph.invoke(GraphInput.resume(), config).data["ticks"] == 5


# -- CancellationTest.graphWithParallelNodesCancelTest: cancelled with interrupt -------------------


def counting_node(name: str, delay: float) -> Any:
    """CancellationTest's waiting node: sleeps, then counts itself in the ``node_completed``
    metadata counter and appends its name to ``messages`` (and, beyond the port, records its
    sleep being cancelled in ``node_cancelled``)."""

    async def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            config.metadata["node_cancelled"].append(name)
            raise
        config.metadata["node_completed"].append(name)
        return {"messages": name}

    return node


def parallel_agents(
    node: Callable[[str, float], Any] = counting_node, delays: tuple[float, ...] = (0.05, 5.0, 0.05)
) -> Any:
    """node_start -> (agent_1, agent_2, agent_3) -> node_end, each agent ``node(id, delay)``
    waiting its ``delays``: by default agent_2 takes longest."""
    return (
        StateGraph({"messages": Channels.appender()})
        .add_node("node_start", lambda state: {})
        .add_node("node_end", lambda state: {})
        .add_node("agent_1", node("agent_1", delays[0]))
        .add_node("agent_2", node("agent_2", delays[1]))
        .add_node("agent_3", node("agent_3", delays[2]))
        .add_edge("node_start", "agent_1")
        .add_edge("node_start", "agent_2")
        .add_edge("node_start", "agent_3")
        .add_edge("agent_1", "node_end")
        .add_edge("agent_2", "node_end")
        .add_edge("agent_3", "node_end")
        .add_edge(START, "node_start")
        .add_edge("node_end", END)
        .compile()
    )


def test_lg4j_parallel_nodes_cancelled_with_interrupt_sync_iteration() -> None:
    """The iterator case: cancelled (interrupting) once two of the three nodes completed."""
    completed: list[str] = []
    cancelled: list[str] = []
    metadata = {"node_completed": completed, "node_cancelled": cancelled}
    stream = parallel_agents().stream(GraphInput.no_args(), RunnableConfig(metadata=metadata))

    def cancel_after_two() -> None:
        deadline = time.monotonic() + 10
        while len(completed) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        stream.cancel(True)

    canceller = threading.Thread(target=cancel_after_two)
    canceller.start()
    outputs = [output.node for output in stream]
    canceller.join()
    assert stream.is_cancelled()
    assert outputs[-1] != END and outputs == [START, "node_start"]
    assert sorted(completed) == ["agent_1", "agent_3"]  # taskExecuted == 2
    assert cancelled == ["agent_2"]
    assert stream.result.is_empty()


def test_lg4j_parallel_nodes_cancelled_with_interrupt_async_iteration() -> None:
    """The forEachAsync case."""
    completed: list[str] = []
    cancelled: list[str] = []
    metadata = {"node_completed": completed, "node_cancelled": cancelled}

    async def main() -> list[str]:
        stream = parallel_agents().astream(GraphInput.no_args(), RunnableConfig(metadata=metadata))

        async def cancel_after_two() -> None:
            while len(completed) < 2:
                await asyncio.sleep(0.005)
            stream.cancel(True)

        canceller = asyncio.ensure_future(cancel_after_two())
        seen = [output.node async for output in stream]
        await asyncio.wait_for(canceller, 10)
        assert stream.is_cancelled() and stream.result.is_empty()
        return seen

    assert asyncio.run(main()) == [START, "node_start"]
    assert sorted(completed) == ["agent_1", "agent_3"]
    assert cancelled == ["agent_2"]  # in its 5 s sleep


# -- CancellationTest.compiledSubGraphCancelTest ---------------------------------------------------


def lg4j_subgraph_parent(
    completed: list[str], cancel_at: threading.Event, hold: float = 5.0
) -> Any:
    """NODE1 -> NODE2 -> NODE3 (the compiled NODE3.1 -> .. -> NODE3.4) -> NODE4 -> NODE5, each a
    counting waiting node (``completed``; beyond the port, a cancelled wait is recorded as
    ``"cancelled:<id>"``); the cancel comes while NODE3.2 waits ``hold`` seconds (``cancel_at``
    is set when it starts; LangGraph4j cancels after three of its one-second nodes)."""

    def waiting(name: str) -> Any:
        delay = hold if name == "NODE3.2" else 0.02

        async def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
            if name == "NODE3.2":
                cancel_at.set()
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                config.metadata["node_completed"].append(f"cancelled:{name}")
                raise
            config.metadata["node_completed"].append(name)
            return {"messages": name}

        return node

    def chain(names: list[str], sub: Any = None) -> StateGraph:
        graph = StateGraph({"messages": Channels.appender()})
        previous = START
        for name in names:
            graph.add_node(name, sub if name == "NODE3" else waiting(name))
            graph.add_edge(previous, name)
            previous = name
        return graph.add_edge(previous, END)

    child = chain(["NODE3.1", "NODE3.2", "NODE3.3", "NODE3.4"]).compile()
    return chain(["NODE1", "NODE2", "NODE3", "NODE4", "NODE5"], child).compile()


def test_lg4j_compiled_subgraph_not_cancelled_runs_to_end() -> None:
    completed: list[str] = []
    cancel_at = threading.Event()
    parent = lg4j_subgraph_parent(completed, cancel_at, hold=0.02)
    config = RunnableConfig(metadata={"node_completed": completed})
    stream = parent.stream(GraphInput.no_args(), config)
    outputs = [output.node for output in stream]
    assert not stream.is_cancelled()
    assert outputs[-1] == END
    assert outputs == [
        START,
        "NODE1",
        "NODE2",
        "NODE3.1",
        "NODE3.2",
        "NODE3.3",
        "NODE3.4",
        "NODE3",
        "NODE4",
        "NODE5",
        END,
    ]
    assert stream.result.as_state_data()["messages"] == [
        "NODE1",
        "NODE2",
        "NODE3.1",
        "NODE3.2",
        "NODE3.3",
        "NODE3.4",
        "NODE4",
        "NODE5",
    ]


def test_lg4j_compiled_subgraph_cancelled_with_interrupt_sync_iteration() -> None:
    """The iterator case: cancelled (interrupting) inside the subgraph; the stream ends before
    END with an empty result, the child's waiting node is cancelled, nothing after it runs."""
    completed: list[str] = []
    cancel_at = threading.Event()
    parent = lg4j_subgraph_parent(completed, cancel_at)
    stream = parent.stream(
        GraphInput.no_args(), RunnableConfig(metadata={"node_completed": completed})
    )
    canceller = cancel_when(cancel_at, stream, True)
    outputs = [output.node for output in stream]
    canceller.join()
    assert outputs[-1] != END
    assert outputs == [START, "NODE1", "NODE2", "NODE3.1"]
    assert stream.is_cancelled() and stream.result.is_empty()
    assert completed == ["NODE1", "NODE2", "NODE3.1", "cancelled:NODE3.2"]


def test_lg4j_compiled_subgraph_cancelled_with_interrupt_async_iteration() -> None:
    """The forEachAsync case."""
    completed: list[str] = []
    cancel_at = threading.Event()
    parent = lg4j_subgraph_parent(completed, cancel_at)

    async def main() -> list[str]:
        config = RunnableConfig(metadata={"node_completed": completed})
        stream = parent.astream(GraphInput.no_args(), config)

        async def cancel() -> None:
            while not cancel_at.is_set():
                await asyncio.sleep(0.005)
            stream.cancel(True)

        canceller = asyncio.ensure_future(cancel())
        seen = [output.node async for output in stream]
        await asyncio.wait_for(canceller, 10)
        assert stream.is_cancelled() and stream.result.is_empty()
        return seen

    assert asyncio.run(main()) == [START, "NODE1", "NODE2", "NODE3.1"]
    assert completed == ["NODE1", "NODE2", "NODE3.1", "cancelled:NODE3.2"]
