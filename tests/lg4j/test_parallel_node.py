"""Port of LangGraph4j's ``ParallelNodeTest`` (``langgraph4j-core``), in process.

LangGraph4j's test builds its internal ``ParallelNode`` (the branches of a fan-out, run as one
node) and calls its action directly.  The public form of a parallel node is a fan-out: here
``START`` fans out to one node per action, each writing ``task`` (an appender), and the run's
final state is what the parallel node's action returned.  A parallel executor given for the
fan-out's source (``addParallelNodeExecutor("parallelNodeTest", ...)``) is
``parallel_executors={START: ...}``.  The simulated work is short (LangGraph4j's sleeps are up
to ten seconds), and where LangGraph4j measures the elapsed time, a barrier that every branch
must reach shows that they run at once.

Not ported, being about Java alone: ``parallelNodeWithCancelledStreamingResultTest`` (a
generator whose result is ``AsyncGenerator.IsCancellable.CANCELLED``) and
``parallelNodeWithCheckpointStreamingResultTest`` (a generator whose result is a checkpoint
saver's ``Tag``), results a Python generator has no equivalent of.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    Channels,
    CompiledGraph,
    Done,
    InterruptionMetadata,
    InvalidUpdateError,
    NodeError,
    NodeOutput,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
)

SCHEMA: dict[str, Channel] = {"task": Channels.appender()}


def completed_tasks(state: AgentState) -> list[Any]:
    """``ParallelNodeTest.State.completedTasks()``"""
    return list(state.value("task", []))


def fan_out(
    actions: Iterable[Callable[..., Any]], schema: dict[str, Channel] | None = None
) -> CompiledGraph:
    """``new ParallelNode<>(id, actions, SCHEMA)``, as ``START`` fanning out to the actions."""
    graph = StateGraph(SCHEMA if schema is None else schema)
    for index, action in enumerate(actions):
        graph.add_node(f"task_{index}", action)
        graph.add_edge(START, f"task_{index}").add_edge(f"task_{index}", END)
    return graph.compile()


def test_parallel_node_with_sync_action() -> None:
    """``ParallelNodeTest.parallelNodeTestWithSyncAction``: ten plain actions on the parallel
    executor given for the fan-out, all running at once; the state keeps its other keys."""
    count = 10
    barrier = threading.Barrier(count, timeout=10)

    def sync_action(task_id: int) -> Callable[..., Any]:
        def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            barrier.wait()  # (a branch run after another would break the barrier)
            thread = threading.current_thread().name
            return {"task": f"TASK [{task_id}] COMPLETED BY [{thread}]"}

        return action

    graph = fan_out(sync_action(task_id) for task_id in range(count))
    with ThreadPoolExecutor(count, thread_name_prefix="parallel-sync") as pool:
        state = graph.invoke(
            {"item1": "test1", "task-2": "test2"}, RunnableConfig(parallel_executors={START: pool})
        )
    tasks = completed_tasks(state)
    assert len(tasks) == count
    assert all("BY [parallel-sync" in task for task in tasks)
    # merged in the order the nodes were added (SPEC §3)
    assert [task.split("]")[0] for task in tasks] == [f"TASK [{i}" for i in range(count)]
    assert state.value("item1") == "test1"
    assert state.value("task-2") == "test2"


def async_action(task_id: int, delay: float, started: list[int] | None = None) -> Any:
    async def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if started is not None:
            started.append(task_id)
        await asyncio.sleep(delay)
        return {"task": f"TASK [{task_id}] COMPLETED"}

    return action


def test_parallel_node_with_async_action() -> None:
    """``ParallelNodeTest.parallelNodeWithAsyncActionTest``: ten async actions, all running at
    once."""
    count = 10
    reached: list[int] = []
    all_in = asyncio.Event()

    def waiting_action(task_id: int) -> Callable[..., Any]:
        async def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            reached.append(task_id)
            if len(reached) == count:
                all_in.set()
            await asyncio.wait_for(all_in.wait(), timeout=10)
            return {"task": f"TASK [{task_id}] COMPLETED"}

        return action

    state = fan_out(waiting_action(task_id) for task_id in range(count)).invoke({"item1": "test1"})
    assert len(completed_tasks(state)) == count
    assert state.value("item1") == "test1"


def test_parallel_node_issue294() -> None:
    """``ParallelNodeTest.parallelNodeIssue294Test``: a branch that fails fails the parallel
    node (here the run, with a ``NodeError`` naming the branch and the original as its
    cause)."""

    async def failing(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        await asyncio.sleep(0.03)
        raise RuntimeError("TASK [3] raise exception")

    graph = fan_out(
        [
            async_action(1, 0.05),
            async_action(2, 0.02),
            failing,
            async_action(4, 0.01),
            async_action(5, 0.1),
        ]
    )
    with pytest.raises(NodeError) as caught:
        graph.invoke({"item1": "test1", "task-2": "test2"})
    assert caught.value.node_id == "task_2"
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert str(caught.value.__cause__) == "TASK [3] raise exception"


def sync_streaming_action(key: str, value: Any) -> Callable[..., Any]:
    """``createSyncStreamingAction``: streams two chunks under ``content``, ends with
    ``{key: value}`` (nothing when ``value`` is ``None``)."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        def generator() -> Any:
            yield "chunk-1"
            yield "chunk-2"
            return None if value is None else {key: value}

        return {"content": generator()}

    return action


def async_streaming_action(key: str, value: Any) -> Callable[..., Any]:
    """``createAsyncStreamingAction``: the same with an async generator ending with ``Done``."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        async def generator() -> Any:
            for chunk in ("chunk-1", "chunk-2"):
                yield chunk
            yield Done({key: value})

        return {"content": generator()}

    return action


def streaming_action_with_result(result: Any) -> Callable[..., Any]:
    """``createStreamingActionWithResult``: a generator that streams nothing and returns
    ``result``."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        def generator() -> Any:
            return result
            yield  # (a generator)

        return {"content": generator()}

    return action


def streamed(graph: CompiledGraph, data: dict[str, Any]) -> tuple[list[NodeOutput], AgentState]:
    outputs = list(graph.stream(data))
    return outputs, outputs[-1].state


def test_parallel_node_with_sync_streaming_action() -> None:
    """``ParallelNodeTest.parallelNodeWithSyncStreamingActionTest``: each branch's generator
    streams its chunks and its final update reaches the state."""
    graph = fan_out([sync_streaming_action("task", "LEFT"), sync_streaming_action("task", "RIGHT")])
    outputs, state = streamed(graph, {"item1": "test1"})
    assert sorted(completed_tasks(state)) == ["LEFT", "RIGHT"]
    assert state.value("item1") == "test1"
    assert "content" not in state.data
    chunks = [(o.node, o.chunk) for o in outputs if isinstance(o, StreamingOutput)]
    assert sorted(chunks) == [
        ("task_0", "chunk-1"), ("task_0", "chunk-2"), ("task_1", "chunk-1"), ("task_1", "chunk-2"),
    ]  # fmt: skip


def test_parallel_node_with_async_streaming_action() -> None:
    """``ParallelNodeTest.parallelNodeWithAsyncStreamingActionTest``."""
    graph = fan_out(
        [async_streaming_action("task", "LEFT"), async_streaming_action("task", "RIGHT")]
    )
    outputs, state = streamed(graph, {"item1": "test1"})
    assert sorted(completed_tasks(state)) == ["LEFT", "RIGHT"]
    assert state.value("item1") == "test1"
    assert len([o for o in outputs if isinstance(o, StreamingOutput)]) == 4


def test_parallel_node_with_streaming_action_without_result_value() -> None:
    """``ParallelNodeTest.parallelNodeWithStreamingActionWithoutResultValueTest``: a generator
    that ends with nothing adds nothing."""
    graph = fan_out([sync_streaming_action("task", "LEFT"), sync_streaming_action("task", None)])
    _, state = streamed(graph, {"item1": "test1"})
    assert completed_tasks(state) == ["LEFT"]
    assert state.value("item1") == "test1"


def test_parallel_branch_with_streaming_nodes_end_to_end() -> None:
    """``ParallelNodeTest.parallelBranchWithStreamingNodesEndToEndTest`` (no schema)."""
    workflow = (
        StateGraph()
        .add_node("left", sync_streaming_action("left", "L"))
        .add_node("right", sync_streaming_action("right", "R"))
        .add_edge(START, "left")
        .add_edge(START, "right")
        .add_edge("left", END)
        .add_edge("right", END)
        .compile()
    )
    result = workflow.invoke({}, RunnableConfig())
    assert result.data.get("left") == "L"
    assert result.data.get("right") == "R"


def test_parallel_node_with_empty_streaming_result() -> None:
    """``ParallelNodeTest.parallelNodeWithEmptyStreamingResultTest``."""
    _, state = streamed(fan_out([streaming_action_with_result({})]), {"item1": "test1"})
    assert state.value("item1") == "test1"
    assert "content" not in state.data


@pytest.mark.parametrize(
    ("result", "java_test"),
    [
        ("not-state-data", "parallelNodeRejectsInvalidStreamingResultValueTest"),
        (
            NodeOutput("streaming", AgentState({})),
            "parallelNodeRejectsNodeOutputStreamingResultTest",
        ),
        (
            InterruptionMetadata("streaming", AgentState({})),
            "parallelNodeRejectsInterruptionStreamingResultTest",
        ),
    ],
    ids=["string", "node-output", "interruption-metadata"],
)
def test_parallel_node_rejects_a_streaming_result_that_is_no_update(
    result: Any, java_test: str
) -> None:
    """``ParallelNodeTest.parallelNodeRejectsInvalidStreamingResultValueTest``,
    ``parallelNodeRejectsNodeOutputStreamingResultTest`` and
    ``parallelNodeRejectsInterruptionStreamingResultTest``: a generator ending with something
    other than a mapping of updates is refused.  LangGraph4j raises
    ``IllegalArgumentException`` or ``UnsupportedOperationException`` with its own texts;
    SPEC §3 makes it an ``InvalidUpdateError`` naming the node (an interruption is asked for by
    raising ``GraphInterrupt``, SPEC §5, never by returning its metadata)."""
    with pytest.raises(InvalidUpdateError, match="'task_0'"):
        fan_out([streaming_action_with_result(result)]).invoke({})


@pytest.mark.parametrize("key", ["source", "node"])
def test_parallel_node_with_async_streaming_action_and_executor(key: str) -> None:
    """``ParallelNodeTest.parallelNodeWithAsyncStreamingActionAndExecutorTest``: the branches
    run on the executor given for the fan-out's source (LangGraph4j's
    ``addParallelNodeExecutor(id, executor)``), or for each node (``key="node"``, this
    library's own form), and their streamed updates reach the state."""
    threads: list[str] = []

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        threads.append(threading.current_thread().name)
        return async_streaming_action("task", "EXECUTOR")(state, config)

    graph = fan_out([action, action])
    with ThreadPoolExecutor(1, thread_name_prefix="parallel-streaming-test") as executor:
        executors = (
            {START: executor} if key == "source" else {"task_0": executor, "task_1": executor}
        )
        state = graph.invoke({}, RunnableConfig(parallel_executors=executors))
    assert len(threads) == 2
    assert all(name.startswith("parallel-streaming-test") for name in threads)
    assert completed_tasks(state) == ["EXECUTOR", "EXECUTOR"]
