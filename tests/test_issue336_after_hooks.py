"""LangGraph4j's ``hook/Issue336Test``: an after-call hook of a streaming node runs once, after
the stream has ended, and sees the node's final update, never the generator.

Ported with its graphs and asserted values; names through SPEC's tables: a node returning
``Map.of("content", generator)`` is a node whose update holds a generator under ``content``,
``AsyncGenerator.Data.done(map)`` a sync generator's ``return map`` (``SYNC``) or ``Done(map)``
yielded last by an async generator (``ASYNC``, whose producer sleeps 10 ms a token as the
original's thread does), ``GraphResult.from(stream)`` the stream's ``result``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    Done,
    GraphInput,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
)

SCHEMA = {"VALUE": Channels.appender()}


class AuditHook:
    """Records when it was called and what result it received; adds ``AuditHook: called``."""

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


def sync_streaming_node(tokens: list[str]) -> Callable[..., Any]:
    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        def generator() -> Iterator[str]:
            yield from tokens
            return {"VALUE": "streaming_completed"}

        return {"content": generator()}

    return action


def async_streaming_node(tokens: list[str]) -> Callable[..., Any]:
    async def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        async def generator() -> AsyncIterator[Any]:
            for token in tokens:
                yield token
                await asyncio.sleep(0.01)
            yield Done({"VALUE": "streaming_completed"})

        return {"content": generator()}

    return action


STREAM_NODES = {"SYNC": sync_streaming_node, "ASYNC": async_streaming_node}


def blocking_node(value: str) -> Callable[..., Any]:
    return lambda state, config: {"VALUE": value}


def test_blocking_node_after_hook_called_immediately() -> None:
    audit = AuditHook()
    workflow = (
        StateGraph(SCHEMA)
        .add_after_call_node_hook(audit)
        .add_node("blocking_node", blocking_node("test_value"))
        .add_edge(START, "blocking_node")
        .add_edge("blocking_node", END)
        .compile()
    )
    result = workflow.invoke(GraphInput.no_args(), RunnableConfig())
    assert result.value("AuditHook") == "called"
    assert audit.call_count == 1
    assert audit.called_at_node == "blocking_node"
    assert audit.captured_result is not None
    # the VALUE in the hook's result is the raw value, before the channel merged it
    assert audit.captured_result["VALUE"] == "test_value"
    assert result.value("VALUE") == ["test_value"]


@pytest.mark.parametrize("kind", list(STREAM_NODES))
def test_streaming_node_after_hook_called_after_completion(kind: str) -> None:
    audit = AuditHook()
    workflow = (
        StateGraph(SCHEMA)
        .add_after_call_node_hook(audit)
        .add_node("streaming_node", STREAM_NODES[kind](["Hello", " ", "World"]))
        .add_edge(START, "streaming_node")
        .add_edge("streaming_node", END)
        .compile()
    )
    stream = workflow.stream(GraphInput.no_args(), RunnableConfig())
    chunks = [output.chunk for output in stream if isinstance(output, StreamingOutput)]

    result = stream.result
    assert not result.is_empty()
    assert result.is_state_data()
    assert result.as_state_data()["AuditHook"] == "called"

    assert chunks == ["Hello", " ", "World"]
    assert audit.call_count == 1
    assert audit.called_at_node == "streaming_node"
    assert audit.captured_result is not None
    # the hook received the final update, not the generator
    assert audit.captured_result.get("VALUE") == "streaming_completed"
    content = audit.captured_result.get("content")
    assert not (inspect.isgenerator(content) or inspect.isasyncgen(content))


@pytest.mark.parametrize("kind", list(STREAM_NODES))
def test_mixed_blocking_and_streaming_nodes(kind: str) -> None:
    audit = AuditHook()
    workflow = (
        StateGraph(SCHEMA)
        .add_after_call_node_hook(audit)
        .add_node("blocking_node", blocking_node("blocking_result"))
        .add_node("streaming_node", STREAM_NODES[kind](["A", "B", "C"]))
        .add_edge(START, "blocking_node")
        .add_edge("blocking_node", "streaming_node")
        .add_edge("streaming_node", END)
        .compile()
    )
    stream = workflow.stream(GraphInput.no_args(), RunnableConfig())
    chunks: list[Any] = []
    last_node = None
    for output in stream:
        if isinstance(output, StreamingOutput):
            chunks.append(output.chunk)
        last_node = output.node

    result = stream.result
    assert not result.is_empty()
    assert result.is_state_data()
    assert result.as_state_data()["AuditHook"] == "called"

    assert last_node == END
    assert chunks == ["A", "B", "C"]
    assert audit.call_count == 2  # both nodes' hooks
    # the last call is the streaming node's, with its final update
    assert audit.called_at_node == "streaming_node"
    assert audit.captured_result.get("VALUE") == "streaming_completed"
    assert result.as_state_data()["VALUE"] == ["blocking_result", "streaming_completed"]
