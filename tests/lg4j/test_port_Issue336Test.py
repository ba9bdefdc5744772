"""Port of LangGraph4j's ``hook/Issue336Test`` (issue #336): what
``tests/test_issue336_after_hooks.py`` leaves out.

That file's streaming nodes yield plain tokens.  LangGraph4j's yield ``StreamingOutput`` objects
(``new StreamingOutput<>(token, nodeId, state, null)``), and its ``ASYNC`` node is an
``AsyncGeneratorQueue.Generator`` that a separate thread fills (a token every 10 ms, then
``Data.done(Map.of("VALUE", "streaming_completed"))``).  Here both are as in LangGraph4j: a
generator yielding ``StreamingOutput(node, token, state)`` (SPEC §9: a ``NodeOutput`` item is
streamed as it is), and for ``ASYNC`` a plain generator reading a ``queue.Queue`` that a thread
fills, returning the final update.  ``blocking_node`` is ``createBlockingNode``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    GraphInput,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
)

SCHEMA = {"VALUE": Channels.appender()}


class AuditHook:
    """``Issue336Test.AuditHook``: records its calls, adds ``AuditHook: called``."""

    def __init__(self) -> None:
        self.called_at_node: str | None = None
        self.captured_result: Any = None
        self.call_count = 0

    def __call__(
        self, node: str, state: AgentState, config: RunnableConfig, result: Any
    ) -> dict[str, Any]:
        self.called_at_node = node
        self.captured_result = result
        self.call_count += 1
        return {**(result or {}), "AuditHook": "called"}


def create_sync_streaming_node(node_id: str, tokens: list[str]) -> Callable[..., Any]:
    """``createSyncStreamingNode``: an ``AsyncGenerator.Base`` over the tokens."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        def generator() -> Iterator[StreamingOutput]:
            for token in tokens:
                yield StreamingOutput(node_id, token, state)
            return {"VALUE": "streaming_completed"}

        return {"content": generator()}

    return action


def create_async_streaming_node(node_id: str, tokens: list[str]) -> Callable[..., Any]:
    """``createAsyncStreamingNode``: a queue filled by another thread."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        items: queue.Queue[tuple[bool, Any]] = queue.Queue()

        def produce() -> None:
            for token in tokens:
                items.put((False, StreamingOutput(node_id, token, state)))
                time.sleep(0.01)
            items.put((True, {"VALUE": "streaming_completed"}))

        threading.Thread(target=produce, daemon=True).start()

        def generator() -> Iterator[StreamingOutput]:
            while True:
                done, item = items.get(timeout=10)
                if done:
                    return item  # type: ignore[no-any-return]
                yield item

        return {"content": generator()}

    return action


STREAM_NODES = {"SYNC": create_sync_streaming_node, "ASYNC": create_async_streaming_node}


def create_blocking_node(value: str) -> Callable[..., Any]:
    return lambda state, config: {"VALUE": value}


def streamed(stream: Any) -> tuple[list[Any], str | None]:
    """(the chunks of the stream's ``StreamingOutput``s, the last output's node)."""
    chunks: list[Any] = []
    last_node = None
    for output in stream:
        if isinstance(output, StreamingOutput):
            assert output.node == "streaming_node"
            chunks.append(output.chunk)
        last_node = output.node
    return chunks, last_node


@pytest.mark.parametrize("kind", list(STREAM_NODES))
def test_streaming_node_after_hook_called_after_completion(kind: str) -> None:
    """``testStreamingNodeAfterHookCalledAfterCompletion``."""
    audit = AuditHook()
    workflow = (
        StateGraph(SCHEMA)
        .add_after_call_node_hook(audit)
        .add_node("streaming_node", STREAM_NODES[kind]("streaming_node", ["Hello", " ", "World"]))
        .add_edge(START, "streaming_node")
        .add_edge("streaming_node", END)
        .compile()
    )
    stream = workflow.stream(GraphInput.no_args(), RunnableConfig())
    chunks, _ = streamed(stream)

    result = stream.result
    assert not result.is_empty()
    assert result.is_state_data()
    assert result.as_state_data()["AuditHook"] == "called"
    assert chunks == ["Hello", " ", "World"]
    assert audit.call_count == 1
    assert audit.called_at_node == "streaming_node"
    assert audit.captured_result is not None
    assert audit.captured_result.get("VALUE") == "streaming_completed"
    assert not isinstance(audit.captured_result.get("content"), Iterator)


@pytest.mark.parametrize("kind", list(STREAM_NODES))
def test_mixed_blocking_and_streaming_nodes(kind: str) -> None:
    """``testMixedBlockingAndStreamingNodes``."""
    audit = AuditHook()
    workflow = (
        StateGraph(SCHEMA)
        .add_after_call_node_hook(audit)
        .add_node("blocking_node", create_blocking_node("blocking_result"))
        .add_node("streaming_node", STREAM_NODES[kind]("streaming_node", ["A", "B", "C"]))
        .add_edge(START, "blocking_node")
        .add_edge("blocking_node", "streaming_node")
        .add_edge("streaming_node", END)
        .compile()
    )
    stream = workflow.stream(GraphInput.no_args(), RunnableConfig())
    chunks, last_node = streamed(stream)

    result = stream.result
    assert not result.is_empty()
    assert result.is_state_data()
    assert result.as_state_data()["AuditHook"] == "called"
    assert last_node == END
    assert chunks == ["A", "B", "C"]
    assert audit.call_count == 2
    assert audit.called_at_node == "streaming_node"
    assert audit.captured_result.get("VALUE") == "streaming_completed"
