"""Audit port of LangGraph4j's ``SubGraphTest`` (``langgraph4j-core``): the parts that
``tests/test_subgraph_merged.py`` and ``tests/lg4j/test_port_SubGraphTest.py`` port only in part.

``SubGraphTest`` streams with ``workflow.stream(map)``: no ``RunnableConfig`` at all, and it
resumes with a ``null`` input (``_execute(app, null)``), which here is ``stream(None, config)``
(docs/choices.md: ``None`` continues the thread's pending run).  The existing ports resume its
``testMergeSubgraph03WithInterruption`` with ``None`` only after ``B1`` and before ``B``, and its
``testMergeSubgraph04WithInterruption`` only with ``GraphInput.resume()``; here every step of
both, with ``None``.

``SubGraphTest`` is the older twin of ``StateSubGraphTest``: its ``testMergeSubgraph04*`` expect
no ``B-__END__`` bridge, which the newer ``StateSubGraphTest`` adds (a conditional edge leaving
a merged subgraph leaves from its END bridge).  The newer expectation is followed, as in
``tests/test_subgraph_merged.py``.  Java runs without a thread id; SPEC §4 asks for one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    CompileConfig,
    CompiledGraph,
    GraphDefinitionError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import MemorySaver

# (the builders of StateSubGraphTest, ported once in tests/test_subgraph_merged.py)
from test_subgraph_merged import child_b1_b2, child_b1_b2_c, make_node, messages_graph


def execute(app: CompiledGraph, input: Any, config: RunnableConfig | None = None) -> list[str]:
    """``_execute(workflow, input)``: the node of every output of the stream, in order."""
    stream = app.stream(input) if config is None else app.stream(input, config)
    return [output.node for output in stream]


def parent(child: StateGraph, conditional_start: bool) -> StateGraph:
    """A -> B (the merged child) -> C -> END, entered at A plainly or by START's route."""
    graph = (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", child)
        .add_node("C", make_node("C"))
    )
    if conditional_start:
        graph.add_conditional_edges(START, lambda state: "a", {"a": "A", "b": "B"})
    else:
        graph.add_edge(START, "A")
    return graph.add_edge("A", "B").add_edge("B", "C").add_edge("C", END)


@pytest.mark.parametrize(
    ("child", "conditional_start", "expected"),
    [
        (child_b1_b2, False, [START, "A", "B-B1", "B-B2", "C", END]),
        (child_b1_b2, True, [START, "A", "B-B1", "B-B2", "C", END]),
        (child_b1_b2_c, True, [START, "A", "B-B1", "B-B2", "B-C", "C", END]),
    ],
    ids=["testMergeSubgraph01", "testMergeSubgraph02", "testMergeSubgraph03"],
)
def test_merged_subgraph_streams_its_nodes_without_a_runnable_config(
    child: Callable[[], StateGraph], conditional_start: bool, expected: list[str]
) -> None:
    """``testMergeSubgraph01``..``03``: ``workflow.stream(Map.of())``, no config given."""
    app = parent(child(), conditional_start).compile()
    assert execute(app, {}) == expected
    # (beyond the Java test) what those nodes wrote, in the order they ran
    final = app.invoke({})
    assert final.value("messages") == [
        "subgraph(C)" if node == "B-C" else node.removeprefix("B-") for node in expected[1:-1]
    ]


def test_merge_subgraph_03_with_interruption_every_resume_with_a_none_input() -> None:
    """``testMergeSubgraph03WithInterruption``: after B1, after B2, before C, before B; each
    resumed with ``_execute(app, null)``; then ``interrupt_after`` the subgraph is refused."""
    graph = parent(child_b1_b2_c(), conditional_start=True)
    saver = MemorySaver()
    thread = RunnableConfig(thread_id="audit-merge-03")

    def compiled(**interrupts: Any) -> CompiledGraph:
        return graph.compile(CompileConfig(checkpoint_saver=saver, **interrupts))

    everything = [START, "A", "B-B1", "B-B2", "B-C", "C", END]
    assert execute(compiled(), {}, thread) == everything

    after_b1 = compiled(interrupt_after=["B-B1"])
    assert execute(after_b1, {}, thread) == [START, "A", "B-B1"]
    assert after_b1.get_state(thread).next == ("B-B2",)
    assert execute(after_b1, None, thread) == ["B-B2", "B-C", "C", END]

    after_b2 = compiled(interrupt_after=["B-B2"])
    assert execute(after_b2, {}, thread) == [START, "A", "B-B1", "B-B2"]
    assert after_b2.get_state(thread).next == ("B-C",)
    assert execute(after_b2, None, thread) == ["B-C", "C", END]

    before_c = compiled(interrupt_before=["C"])
    assert execute(before_c, {}, thread) == [START, "A", "B-B1", "B-B2", "B-C"]
    assert before_c.get_state(thread).next == ("C",)
    assert execute(before_c, None, thread) == ["C", END]

    before_b = compiled(interrupt_before=["B"])
    assert execute(before_b, {}, thread) == [START, "A"]
    assert before_b.get_state(thread).next == ("B-B1",)
    assert execute(before_b, None, thread) == ["B-B1", "B-B2", "B-C", "C", END]

    # SPEC §3: a definition error naming the culprit (LangGraph4j: a GraphStateException
    # saying interruption after a subgraph is not supported, use one before 'C')
    with pytest.raises(GraphDefinitionError, match="'B'") as refused:
        compiled(interrupt_after=["B"])
    assert "'C'" in str(refused.value)


def parent_04() -> StateGraph:
    """``testMergeSubgraph04WithInterruption``'s parent: B's route picks ``c`` (C1) out of
    ``{c: C1, a: A}``; C1 -> C -> END."""
    return (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", child_b1_b2_c())
        .add_node("C", make_node("C"))
        .add_node("C1", make_node("C1"))
        .add_conditional_edges(START, lambda state: "a", {"a": "A", "b": "B"})
        .add_edge("A", "B")
        .add_conditional_edges("B", lambda state: "c", {"c": "C1", "a": "A"})
        .add_edge("C1", "C")
        .add_edge("C", END)
    )


def test_merge_subgraph_04_with_interruption_every_resume_with_a_none_input() -> None:
    """``testMergeSubgraph04WithInterruption``, resumed with ``None``.  ``SubGraphTest``
    expects no ``B-__END__`` between ``B-C`` and ``C1``; the newer ``StateSubGraphTest``
    expects the bridge, which is followed here."""
    graph = parent_04()
    saver = MemorySaver()
    thread = RunnableConfig(thread_id="audit-merge-04")

    def compiled(**interrupts: Any) -> CompiledGraph:
        return graph.compile(CompileConfig(checkpoint_saver=saver, **interrupts))

    tail = ["B-__END__", "C1", "C", END]
    assert execute(compiled(), {}, thread) == [START, "A", "B-B1", "B-B2", "B-C", *tail]

    after_b1 = compiled(interrupt_after=["B-B1"])
    assert execute(after_b1, {}, thread) == [START, "A", "B-B1"]
    assert execute(after_b1, None, thread) == ["B-B2", "B-C", *tail]

    after_b2 = compiled(interrupt_after=["B-B2"])
    assert execute(after_b2, {}, thread) == [START, "A", "B-B1", "B-B2"]
    assert execute(after_b2, None, thread) == ["B-C", *tail]

    before_c = compiled(interrupt_before=["C"])
    assert execute(before_c, {}, thread) == [
        START,
        "A",
        "B-B1",
        "B-B2",
        "B-C",
        "B-__END__",
        "C1",
    ]
    assert execute(before_c, None, thread) == ["C", END]

    before_b = compiled(interrupt_before=["B"])
    assert execute(before_b, {}, thread) == [START, "A"]
    assert execute(before_b, None, thread) == ["B-B1", "B-B2", "B-C", *tail]

    with pytest.raises(GraphDefinitionError, match="'B'"):
        compiled(interrupt_after=["B"])


def test_merge_subgraph_04_runs_one_thread_whose_state_holds_each_node_once_per_run() -> None:
    """(Beyond the Java test) the runs of ``testMergeSubgraph04WithInterruption`` on one thread:
    threads are conversations (SPEC §4), so each new run appends its nodes' messages to the
    thread's; an interrupted-then-resumed run appends them once."""
    saver = MemorySaver()
    thread = RunnableConfig(thread_id="audit-merge-04-state")
    one_run = ["A", "B1", "B2", "subgraph(C)", "C1", "C"]
    app = parent_04().compile(CompileConfig(checkpoint_saver=saver, interrupt_after=["B-B1"]))
    execute(app, {}, thread)
    assert app.get_state(thread).state.value("messages") == ["A", "B1"]
    execute(app, None, thread)
    assert app.get_state(thread).state.value("messages") == one_run
    execute(app, {}, thread)
    execute(app, None, thread)
    assert app.get_state(thread).state.value("messages") == one_run * 2
