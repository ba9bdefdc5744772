"""Port of LangGraph4j's ``InterruptionTest`` (``langgraph4j-core``), in process.

Its graphs are ``MessagesStateGraph``s (a ``messages`` appender) over a ``MemorySaver``.  SPEC
§4 needs a ``thread_id`` wherever a saver is used (LangGraph4j falls back to a default thread),
so every config here names one.
"""

from __future__ import annotations

from typing import Any

from lg4j_support import last_message, make_node, nodes

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    InterruptionMetadata,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
)
from langgraph_celery.checkpoint import MemorySaver


def messages_state_graph() -> StateGraph:
    """``new MessagesStateGraph<String>()``"""
    return StateGraph({"messages": Channels.appender()})


def streamed(graph: CompiledGraph, graph_input: Any, config: RunnableConfig) -> list[str]:
    return nodes(graph.stream(graph_input, config))


def test_interrupt_after_edge_evaluation() -> None:
    """``InterruptionTest.interruptAfterEdgeEvaluation``: with ``interrupt_after`` the edges
    are evaluated before stopping, so changing the state of B's checkpoint afterwards does not
    change where the resume goes."""

    def route(state: AgentState) -> str:
        message = last_message(state) or END
        return "D" if message == "B" else str(message)

    workflow = messages_state_graph()
    for node in ("A", "B", "C", "D"):
        workflow.add_node(node, make_node(node))
    workflow.add_conditional_edges("B", route, ["A", "C", "D", END])
    workflow.add_edge(START, "A").add_edge("A", "B").add_edge("C", END).add_edge("D", END)
    graph = workflow.compile(CompileConfig(checkpoint_saver=MemorySaver(), interrupt_after=["B"]))
    config = RunnableConfig(thread_id="interrupt-after-edge")

    assert streamed(graph, GraphInput.no_args(), config) == [START, "A", "B"]
    assert streamed(graph, GraphInput.resume(), config) == ["D", END]

    snapshot_for_node_b = next(s for s in graph.get_state_history(config) if s.node == "B")
    assert snapshot_for_node_b.next == ("D",)
    assert snapshot_for_node_b.config is not None
    config = graph.update_state(snapshot_for_node_b.config, {"messages": "C"})
    assert streamed(graph, GraphInput.resume(), config) == ["D", END]


def test_interrupt_before_edge_evaluation() -> None:
    """``InterruptionTest.interruptBeforeEdgeEvaluation``: with ``interrupt_before_edge`` the
    edges are evaluated on resume, on the state the resume's update makes."""
    workflow = messages_state_graph()
    for node in ("A", "B", "C"):
        workflow.add_node(node, make_node(node))
    workflow.add_conditional_edges("B", lambda state: last_message(state) or END, ["A", "C", END])
    workflow.add_edge(START, "A").add_edge("A", "B").add_edge("C", END)
    graph = workflow.compile(
        CompileConfig(
            checkpoint_saver=MemorySaver(), interrupt_after=["B"], interrupt_before_edge=True
        )
    )
    config = RunnableConfig(thread_id="interrupt-before-edge")

    assert streamed(graph, GraphInput.no_args(), config) == [START, "A", "B"]
    assert streamed(graph, GraphInput.resume({"messages": "C"}), config) == ["C", END]


class CustomAction:
    """``InterruptionTest.CustomAction.Interruptable``: asks to stop before it runs unless the
    config's metadata has ``lc4j_resume``."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id

    def interrupt(
        self, node_id: str, state: AgentState, config: RunnableConfig
    ) -> InterruptionMetadata | None:
        if not config.metadata.get("lc4j_resume", False):
            assert node_id == self.node_id
            return InterruptionMetadata(node_id, state)
        return None

    def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": self.node_id}


def test_dynamic_interruption() -> None:
    """``InterruptionTest.dynamicInterruption``: an ``InterruptibleAction`` stops the run before
    its node; the resume (here with ``lc4j_resume`` in its metadata) runs it."""
    graph = (
        messages_state_graph()
        .add_node("A", make_node("A"))
        .add_node("B", make_node("B"))
        .add_node("C", CustomAction("C"))
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("B", "C")
        .add_edge("C", END)
        .compile(CompileConfig(checkpoint_saver=MemorySaver()))
    )
    config = RunnableConfig(thread_id="dynamic")

    stream = graph.stream(GraphInput.no_args(), config)
    assert nodes(stream) == [START, "A", "B"]
    assert stream.result.is_interruption_metadata()
    assert stream.result.as_interruption_metadata().node_id == "C"

    resumed = graph.stream(GraphInput.resume(), config.put_metadata("lc4j_resume", True))
    assert nodes(resumed) == ["C", END]
    assert resumed.result.as_state_data()["messages"] == ["A", "B", "C"]


def streaming_action(node_id: str) -> Any:
    """``InterruptionTest.CustomAction`` with ``streaming()``: its update holds a generator of
    two chunks that ends with ``{"messages": "Test1Test2"}``."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        def chunks() -> Any:
            yield "Test1"
            yield "Test2"
            return {"messages": "Test1Test2"}

        return {"_streaming_messages": chunks()}

    return action


def test_node_output_after_streaming() -> None:
    """``InterruptionTest.nodeOutputAfterStreaming`` (issue #309): a streaming node resumed from
    ``interrupt_before`` streams its chunks, then its own output, then stops before the next
    interrupted node."""
    graph = (
        messages_state_graph()
        .add_node("A", streaming_action("A"))
        .add_node("B", make_node("B"))
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("B", END)
        .compile(CompileConfig(checkpoint_saver=MemorySaver(), interrupt_before=["A", "B"]))
    )
    config = RunnableConfig(thread_id="streaming")

    assert streamed(graph, GraphInput.no_args(), config) == [START]

    outputs = list(graph.stream(GraphInput.resume(), config))
    assert nodes(outputs) == ["A", "A", "A"]
    assert [type(output) for output in outputs[:2]] == [StreamingOutput, StreamingOutput]
    assert [output.chunk for output in outputs[:2] if isinstance(output, StreamingOutput)] == [
        "Test1",
        "Test2",
    ]
    assert not isinstance(outputs[2], StreamingOutput)
    assert outputs[2].state.value("messages") == ["Test1Test2"]
    assert "_streaming_messages" not in outputs[2].state.data

    assert streamed(graph, GraphInput.resume(), config) == ["B", END]
    assert graph.get_state(config).state.value("messages") == ["Test1Test2", "B"]
