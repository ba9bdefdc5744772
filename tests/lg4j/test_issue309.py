"""Port of LangGraph4j's ``Issue309Test`` (``langgraph4j-core``, issue #309): resuming a
completed thread after ``update_state(..., as_node=...)`` continues with what that node's edges
pick on the updated state.  Java's ``ObjectStreamStateSerializer`` is the saver's default
``JsonSerializer``."""

from __future__ import annotations

from typing import Any

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
)
from langgraph_celery.checkpoint import MemorySaver


def logging_node_hook(node_id: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
    """``Issue309Test.LoggingNodeHook``: a wrap hook that only calls the action."""
    return action(state, config)


def compiled_graph() -> CompiledGraph:
    return (
        StateGraph({"VALUE": Channels.appender()})
        .add_wrap_call_node_hook(logging_node_hook)
        .add_node("NODE_A", lambda state, config: {"VALUE": "1"})
        .add_node("NODE_B", lambda state, config: {"VALUE": "2"})
        .add_node("FEEDBACK_NODE", lambda state, config: {"VALUE": "3"})
        .add_edge(START, "NODE_A")
        .add_edge("NODE_A", "NODE_B")
        .add_conditional_edges(
            "NODE_B", lambda state: state.value("NEXT_NODE", END), ["FEEDBACK_NODE", END]
        )
        .add_edge("FEEDBACK_NODE", END)
        .compile(CompileConfig(checkpoint_saver=MemorySaver(), release_thread=False))
    )


def extracted(stream: Any) -> dict[str, Any]:
    """``Issue309Test.extracted``: run the stream out, return its result's state."""
    for output in stream:
        assert not isinstance(output, StreamingOutput)
    result: dict[str, Any] = stream.result.as_state_data()
    return result


def test_resume_as_node() -> None:
    """``Issue309Test.resumeAsNode``."""
    graph = compiled_graph()
    config = RunnableConfig(thread_id="1")

    result = extracted(graph.stream(GraphInput.no_args(), config))
    assert result["VALUE"] == ["1", "2"]

    updated = graph.update_state(config, {"NEXT_NODE": "FEEDBACK_NODE"}, as_node="NODE_B")
    assert graph.get_state(updated).next == ("FEEDBACK_NODE",)
    result = extracted(graph.stream(GraphInput.resume(), updated))
    assert result["VALUE"] == ["1", "2", "3"]
