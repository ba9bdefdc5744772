"""Port of LangGraph4j's ``CancellationTest`` (``langgraph4j-core``): what
``tests/test_cancellation.py`` (which takes the plain file name) leaves out.

``graphCancelTest``, ``compiledSubGraphCancelTest`` and ``graphWithParallelNodesCancelTest``
are ported in ``tests/test_cancellation.py`` (async waiting nodes, whose sleep
``cancel(interrupt=True)`` cancels, as Java's ``cancel(true)`` interrupts ``Thread.sleep``) and
on Celery in ``tests/celery/``.  Here two run as LangGraph4j's do, with blocking nodes:
``graphCancelTest``'s chain of three, cancelled 50 ms in, stops before its second node; in
``graphWithParallelNodesCancelTest`` the fan-out's branches run one after the other on a
single-thread parallel executor given for its source (``addParallelNodeExecutor("node_start",
executor)`` is ``parallel_executors={"node_start": executor}``).  Python cannot interrupt a
running thread: the node running when the cancel comes finishes (Java interrupts it, then
``shutdownNow`` drops what is queued); a branch still queued never starts, so, as in
LangGraph4j, two of the three complete (``taskExecuted == 2``).  Java's assertions on the
exception chain (``GraphRunException``, ``InterruptedException``) are about
``CompletableFuture`` alone: here the stream ends and its result is empty.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest
from lg4j_support import MESSAGES_SCHEMA, nodes

import test_cancellation as cancellation_graphs
from langgraph_celery import END, START, CompiledGraph, GraphInput, RunnableConfig, StateGraph


def waiting_node(name: str, delay: float, started: threading.Event | None = None) -> Any:
    """``_makeWaitingNode``: sleeps (blocking), then counts itself in the ``node_completed``
    metadata and appends its name to ``messages`` (and, beyond the port, records its start in
    ``node_started`` when the metadata has it)."""

    def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        if started is not None:
            started.set()
        config.metadata.get("node_started", []).append(name)
        time.sleep(delay)
        config.metadata["node_completed"].append(name)
        return {"messages": name}

    return node


def three_agents() -> CompiledGraph:
    """``graphCancelTest``'s graph: agent_1 -> agent_2 -> agent_3, each waiting 0.3 s."""
    return (
        StateGraph(MESSAGES_SCHEMA)
        .add_node("agent_1", waiting_node("agent_1", 0.3))
        .add_node("agent_2", waiting_node("agent_2", 0.3))
        .add_node("agent_3", waiting_node("agent_3", 0.3))
        .add_edge("agent_1", "agent_2")
        .add_edge("agent_2", "agent_3")
        .add_edge(START, "agent_1")
        .add_edge("agent_3", END)
        .compile()
    )


@pytest.mark.parametrize("iterate_async", [False, True], ids=["iterator", "for_each_async"])
def test_graph_cancel_with_blocking_nodes(iterate_async: bool) -> None:
    """``graphCancelTest``: cancelled with interrupt 50 ms in, while agent_1 sleeps; the stream
    ends before ``END`` with an empty result, and no node after agent_1 starts."""
    started: list[str] = []
    completed: list[str] = []
    config = RunnableConfig(metadata={"node_started": started, "node_completed": completed})
    if iterate_async:

        async def main() -> tuple[list[str], Any]:
            stream = three_agents().astream(GraphInput.no_args(), config)
            asyncio.get_running_loop().call_later(0.05, stream.cancel, True)
            return nodes([output async for output in stream]), stream

        seen, stream = asyncio.run(main())
    else:
        stream = three_agents().stream(GraphInput.no_args(), config)
        threading.Timer(0.05, stream.cancel, (True,)).start()
        seen = nodes(stream)
    assert seen and seen[-1] != END  # currentOutput is not null, not END
    assert stream.is_cancelled()
    assert stream.result.is_empty()
    deadline = time.monotonic() + 5  # agent_1's thread cannot be interrupted: it finishes
    while "agent_1" not in completed and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert started == completed == ["agent_1"]


def parallel_agents(agent_2_started: threading.Event) -> CompiledGraph:
    """``graphWithParallelNodesCancelTest``'s graph, as in ``tests/test_cancellation.py``, of
    blocking nodes; the cancel comes while agent_2, the second on the executor, runs."""

    def node(name: str, delay: float) -> Any:
        return waiting_node(name, delay, agent_2_started if name == "agent_2" else None)

    return cast(CompiledGraph, cancellation_graphs.parallel_agents(node, (0.05, 0.3, 0.05)))


def run(interrupt: bool, iterate_async: bool) -> tuple[list[str], list[str], Any]:
    """(the nodes streamed, the nodes completed once the executor is idle, the stream)."""
    completed: list[str] = []
    agent_2_started = threading.Event()
    graph = parallel_agents(agent_2_started)
    executor = ThreadPoolExecutor(1, thread_name_prefix="parallel-node-executor")
    config = RunnableConfig(
        metadata={"node_completed": completed}, parallel_executors={"node_start": executor}
    )

    def cancel(stream: Any) -> None:
        assert agent_2_started.wait(10)
        assert stream.cancel(interrupt) is True

    try:
        if iterate_async:

            async def main() -> tuple[list[str], Any]:
                stream = graph.astream(GraphInput.no_args(), config)
                canceller = asyncio.create_task(asyncio.to_thread(cancel, stream))
                seen = nodes([output async for output in stream])
                await asyncio.wait_for(canceller, 10)
                return seen, stream

            seen, stream = asyncio.run(main())
        else:
            stream = graph.stream(GraphInput.no_args(), config)
            canceller = threading.Thread(target=cancel, args=(stream,))
            canceller.start()
            seen = nodes(stream)
            canceller.join(10)
    finally:
        executor.shutdown(wait=True)  # (what ran on it has finished)
    return seen, completed, stream


@pytest.mark.parametrize("iterate_async", [False, True], ids=["iterator", "for_each_async"])
def test_graph_with_parallel_nodes_cancel_on_a_single_thread_executor(
    iterate_async: bool,
) -> None:
    """``graphWithParallelNodesCancelTest``: cancelled with interrupt while the second branch
    runs; the stream ends before ``node_end`` and the third branch never starts."""
    seen, completed, stream = run(interrupt=True, iterate_async=iterate_async)
    assert stream.is_cancelled()
    assert stream.result.is_empty()
    assert seen[-1] != END and seen == [START, "node_start"]
    assert completed == ["agent_1", "agent_2"]  # taskExecuted == 2


@pytest.mark.parametrize("iterate_async", [False, True], ids=["iterator", "for_each_async"])
def test_graph_with_parallel_nodes_cancel_without_interrupt_finishes_the_step(
    iterate_async: bool,
) -> None:
    """(Beyond the port) the same cancel without interrupt: the step's three branches all
    run, then the run stops before ``node_end``."""
    seen, completed, stream = run(interrupt=False, iterate_async=iterate_async)
    assert stream.is_cancelled()
    assert stream.result.is_empty()
    assert seen == [START, "node_start", "agent_1", "agent_2", "agent_3"]
    assert completed == ["agent_1", "agent_2", "agent_3"]
