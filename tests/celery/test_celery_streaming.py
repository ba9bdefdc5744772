"""SPEC §9 on Celery: what a node running on a worker streams reaches every client following the
run while the node runs, in order, each once; a client that attaches late gets the steps from
the store (see ``lgc_graphs.streaming``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from lgc_stream_graphs import chunk_names

from celery_support import CeleryStack, wait_until
from langgraph_celery import END, START, NodeError, NodeOutput, RunnableConfig, StreamingOutput
from langgraph_celery.celery import RunHandle
from langgraph_celery.worker.names import run_outputs_channel

TOKENS = ["a", "b", "c"]


@pytest.fixture(scope="module", params=["redis", "amqp"])
def broker_kind(request: pytest.FixtureRequest) -> str:
    """Redis as broker and result backend, then RabbitMQ as broker with the Redis result
    backend: the chunks travel on Redis either way (docs/streaming.md)."""
    kind: str = request.param
    return kind


def trace(outputs: list[NodeOutput]) -> list[tuple[str, Any]]:
    return [(o.node, o.chunk if isinstance(o, StreamingOutput) else None) for o in outputs]


@pytest.mark.parametrize("durability", ["sync", "exit", "async"])
def test_stream_yields_chunks_while_the_node_runs_on_a_worker(
    celery_stack: CeleryStack, thread: str, redis_client: Any, durability: Any
) -> None:
    """In every durability mode: with "exit" the steps carried in the result backend (not
    stored) reach the client too, as the worker publishes them."""
    graph = celery_stack.graph("streaming")
    outputs: list[NodeOutput] = []
    config = RunnableConfig(thread_id=thread, durability=durability)
    stream = graph.stream({"thread": thread, "tokens": TOKENS}, config)
    for output in stream:
        if isinstance(output, StreamingOutput) and output.chunk == "a":
            redis_client.set(f"ack:{thread}", 1)  # the node waits for this after its first token
        outputs.append(output)
    assert trace(outputs) == [
        (START, None),
        ("llm", "start"),
        ("llm", "a"),
        ("llm", "b"),
        ("llm", "c"),
        ("llm", None),
        ("tail", "t1"),
        ("tail", "t2"),
        ("tail", None),
        (END, None),
    ]
    chunk = outputs[2]
    assert chunk.state.data["tokens"] == TOKENS  # the state the node was called with
    assert outputs[5].state.data["log"] == ["llm"]  # llm's step (carried with "exit")
    assert outputs[6].state.data["log"] == ["llm"]  # the state tail was called with
    final = stream.result.as_state_data()
    assert final["live"] is True  # the client had the first token while the node ran
    assert final["log"] == ["llm", "tail"]
    # nothing streamed is stored
    stored = repr([s.metadata for s in graph.get_state_history(RunnableConfig(thread_id=thread))])
    assert "'t1'" not in stored and "'start'" not in stored


@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_every_follower_of_a_run_gets_its_chunks_once_in_order(
    celery_stack: CeleryStack, thread: str, redis_client: Any, durability: Any
) -> None:
    graph = celery_stack.graph("streaming")
    # llm waits at its gate: chunks are not stored (SPEC §9), so a follower gets those published
    # after it attached; both attach before llm streams anything, then the gate opens
    redis_client.set(f"hold:{thread}:llm", 1)
    try:
        config = RunnableConfig(thread_id=thread, durability=durability)
        handle = graph.start({"thread": thread, "tokens": TOKENS}, config)
        channel = run_outputs_channel(handle.run_id)
        followers: list[list[NodeOutput]] = [[], []]
        errors: list[BaseException] = []

        def follow(into: list[NodeOutput]) -> None:
            try:
                for output in RunHandle(handle.run_id, thread, graph).stream():
                    if isinstance(output, StreamingOutput) and output.chunk == "a":
                        redis_client.set(f"ack:{thread}", 1)  # llm waits for it after "a"
                    into.append(output)
            except BaseException as error:  # (reported by the test)
                errors.append(error)

        threads = [threading.Thread(target=follow, args=(outputs,)) for outputs in followers]
        for follower in threads:
            follower.start()
        assert wait_until(
            lambda: dict(redis_client.pubsub_numsub(channel)).get(channel.encode(), 0) >= 2,
            20,
            0.02,
            "both followers to subscribe",
        )
    finally:
        redis_client.delete(f"hold:{thread}:llm")
    for follower in threads:
        follower.join(60)
    assert not errors
    for outputs in followers:
        # every output of the run after its input, once, in order, each step's chunks before
        # the step's output (a handle follows the run's steps: its input is not one)
        assert trace(outputs) == [
            ("llm", "start"),
            ("llm", "a"),
            ("llm", "b"),
            ("llm", "c"),
            ("llm", None),
            ("tail", "t1"),
            ("tail", "t2"),
            ("tail", None),
            (END, None),
        ]
    assert handle.wait(30).as_state_data()["live"] is True


def test_a_client_attaching_after_the_run_gets_the_steps_from_the_store(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("streaming")
    redis_client.set(f"ack:{thread}", 1)
    state = graph.invoke({"thread": thread, "tokens": TOKENS}, RunnableConfig(thread_id=thread))
    assert state.data["live"] is True and state.data["log"] == ["llm", "tail"]
    run_id = graph.checkpoint_saver.get(thread).run_id
    outputs = list(RunHandle(run_id, thread, graph).stream())
    assert not any(isinstance(o, StreamingOutput) for o in outputs)
    assert [o.node for o in outputs][-3:] == ["llm", "tail", END]
    assert outputs[-1].state.data["log"] == ["llm", "tail"]


def check_last_step_streamed(outputs: list[NodeOutput], count: int) -> None:
    """``outputs`` of a run of ``streaming-last`` with ``n == count``: every chunk once, each
    node's in order, each step's before the step's outputs."""
    seen = trace(outputs)
    assert seen[:5] == [
        (START, None),
        *(("plan", c) for c in chunk_names("plan", 3)),
        ("plan", None),
    ]
    last_step, end = seen[5:-3], seen[-3:]
    assert sorted(end[:2]) == [("left", None), ("right", None)] and end[2] == (END, None)
    for node in ("left", "right"):
        assert [c for n, c in last_step if n == node] == chunk_names(node, count)
    assert len(last_step) == 2 * count


@pytest.mark.parametrize("attempt", range(6))
def test_the_last_steps_chunks_all_reach_the_client_before_the_run_ends(
    celery_stack: CeleryStack, thread: str, attempt: int
) -> None:
    graph = celery_stack.graph("streaming-last")
    config = RunnableConfig(thread_id=thread)
    stream = graph.stream({"n": 25}, config)
    check_last_step_streamed(list(stream), 25)
    assert sorted(stream.result.as_state_data()["log"]) == ["left", "plan", "right"]


def test_an_async_client_gets_the_last_steps_chunks_too(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("streaming-last")

    async def follow() -> list[NodeOutput]:
        return [o async for o in graph.astream({"n": 10}, RunnableConfig(thread_id=thread))]

    check_last_step_streamed(asyncio.run(follow()), 10)


@pytest.mark.parametrize("fail", [False, True])
def test_what_a_node_streamed_before_it_parked_or_failed_reaches_the_client(
    celery_stack: CeleryStack, thread: str, fail: bool
) -> None:
    graph = celery_stack.graph("streams-then-stops")
    outputs: list[NodeOutput] = []
    stream = graph.stream({"fail": fail}, RunnableConfig(thread_id=thread))
    with pytest.raises(NodeError) if fail else contextlib.nullcontext():
        for output in stream:
            outputs.append(output)
    assert [(o.node, o.chunk) for o in outputs if isinstance(o, StreamingOutput)] == [
        ("talk", "e1"),
        ("talk", "e2"),
    ]
    if not fail:
        assert stream.result.as_interruption_metadata().node_id == "talk"
