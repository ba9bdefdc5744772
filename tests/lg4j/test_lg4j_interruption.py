"""Port of LangGraph4j's ``LG4JInterruptionTest`` (``langgraph4j-core``), in process.

LangGraph4j runs each case over a ``MemorySaver`` and a ``FileSystemSaver`` with its JSON
serializer; here over every saver of the ``saver`` fixture (memory, SQLite, PostgreSQL), each
with the default ``JsonSerializer``.  The nodes are ``LG4JTestUtil.CustomNodeAction``s
(``lg4j_support``).  SPEC §4 needs a ``thread_id`` (LangGraph4j's ``RunnableConfig.empty()``
uses a default thread); the ``finally: saver.release(config)`` clean-up is left to the fixture.
"""

from __future__ import annotations

from typing import Any

from lg4j_support import RESUME, CustomNodeAction, InterruptableNodeAction, last_message, nodes

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
from langgraph_celery.checkpoint import BaseCheckpointSaver

CONFIG = RunnableConfig(thread_id="lg4j-interruption")


def state_graph() -> StateGraph:
    """``new StateGraph<>(State.SCHEMA, serializer)``: ``State`` is a ``MessagesState``."""
    return StateGraph({"messages": Channels.appender()})


def streamed(graph: CompiledGraph, graph_input: Any, config: RunnableConfig) -> list[str]:
    return nodes(graph.stream(graph_input, config))


def a_b_c(c_node: Any, saver: BaseCheckpointSaver) -> CompiledGraph:
    return (
        state_graph()
        .add_node("A", CustomNodeAction("A"))
        .add_node("B", CustomNodeAction("B"))
        .add_node("C", c_node)
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("B", "C")
        .add_edge("C", END)
        .compile(CompileConfig(checkpoint_saver=saver))
    )


def test_interrupt_after_edge_evaluation(saver: BaseCheckpointSaver) -> None:
    """``LG4JInterruptionTest.interruptAfterEdgeEvaluation``."""

    def route(state: AgentState) -> str:
        message = last_message(state) or END
        return "D" if message == "B" else str(message)

    workflow = state_graph()
    for node in ("A", "B", "C", "D"):
        workflow.add_node(node, CustomNodeAction(node))
    workflow.add_conditional_edges("B", route, ["A", "C", "D", END])
    workflow.add_edge(START, "A").add_edge("A", "B").add_edge("C", END).add_edge("D", END)
    graph = workflow.compile(
        CompileConfig(checkpoint_saver=saver, interrupt_after=["B"], release_thread=False)
    )
    config = CONFIG

    assert streamed(graph, GraphInput.no_args(), config) == [START, "A", "B"]
    assert streamed(graph, GraphInput.resume(), config) == ["D", END]

    snapshot_for_node_b = next(s for s in graph.get_state_history(config) if s.node == "B")
    assert snapshot_for_node_b.config is not None
    config = graph.update_state(snapshot_for_node_b.config, {"messages": "C"})
    assert streamed(graph, GraphInput.resume(), config) == ["D", END]


def test_interrupt_before_edge_evaluation(saver: BaseCheckpointSaver) -> None:
    """``LG4JInterruptionTest.interruptBeforeEdgeEvaluation``."""
    workflow = state_graph()
    for node in ("A", "B", "C"):
        workflow.add_node(node, CustomNodeAction(node))
    workflow.add_conditional_edges("B", lambda state: last_message(state) or END, ["A", "C", END])
    workflow.add_edge(START, "A").add_edge("A", "B").add_edge("C", END)
    graph = workflow.compile(
        CompileConfig(checkpoint_saver=saver, interrupt_after=["B"], interrupt_before_edge=True)
    )

    assert streamed(graph, GraphInput.no_args(), CONFIG) == [START, "A", "B"]
    assert streamed(graph, GraphInput.resume({"messages": "C"}), CONFIG) == ["C", END]


def test_dynamic_interruption(saver: BaseCheckpointSaver) -> None:
    """``LG4JInterruptionTest.dynamicInterruption``: the resume's update sets the state's
    ``LG4J_RESUME``, which the ``InterruptibleAction`` reads."""
    graph = a_b_c(InterruptableNodeAction("C"), saver)

    stream = graph.stream(GraphInput.no_args(), CONFIG)
    assert nodes(stream) == [START, "A", "B"]
    assert stream.result.as_interruption_metadata().node_id == "C"

    resumed = graph.stream(GraphInput.resume({RESUME: True}), CONFIG)
    assert nodes(resumed) == ["C", END]
    assert resumed.result.as_state_data()["messages"] == ["A", "B", "C"]


def test_interrupt_with_exception(saver: BaseCheckpointSaver) -> None:
    """``LG4JInterruptionTest.interruptWithException``: a node raising ``GraphInterrupt``
    (``GraphInterruptException``) stops the run at itself, the exception's message as the
    reason; the resume runs it again."""
    graph = a_b_c(
        CustomNodeAction("raise exception in node C", interrupt_with_exception=True), saver
    )

    stream = graph.stream(GraphInput.no_args(), CONFIG)
    assert nodes(stream) == [START, "A", "B"]
    interruption = stream.result.as_interruption_metadata()
    assert interruption.node_id == "C"
    assert interruption.reason == "raise exception in node C"
    assert graph.get_state(CONFIG).next == ("C",)

    resumed = graph.stream(GraphInput.resume({RESUME: True}), CONFIG)
    assert nodes(resumed) == ["C", END]
    assert resumed.result.as_state_data()["messages"] == ["A", "B", "raise exception in node C"]


def test_node_output_after_streaming(saver: BaseCheckpointSaver) -> None:
    """``LG4JInterruptionTest.nodeOutputAfterStreaming`` (issue #309)."""
    graph = (
        state_graph()
        .add_node("A", CustomNodeAction("A", streaming=True))
        .add_node("B", CustomNodeAction("B"))
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("B", END)
        .compile(CompileConfig(checkpoint_saver=saver, interrupt_before=["A", "B"]))
    )

    assert streamed(graph, GraphInput.no_args(), CONFIG) == [START]

    outputs = list(graph.stream(GraphInput.resume(), CONFIG))
    assert nodes(outputs) == ["A", "A", "A"]
    assert [isinstance(output, StreamingOutput) for output in outputs] == [True, True, False]
    assert outputs[2].state.value("messages") == ["Test1Test2"]

    assert streamed(graph, GraphInput.resume(), CONFIG) == ["B", END]
