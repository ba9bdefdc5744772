"""Rules every executor applies before it stores anything: ids fit the store, and a thread's
runs belong to the graph that started them (SPEC §8), checked in process over every saver."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    Channel,
    CompileConfig,
    GraphDefinitionError,
    GraphInput,
    GraphInterrupt,
    GraphStateError,
    InvalidUpdateError,
    NodeError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, RunIndex, RunStatus
from langgraph_celery.checkpoint.base import WriteKind
from langgraph_celery.graph._marks import Mark, StepMarks


def two_steps(saver: BaseCheckpointSaver, graph_id: str | None, **options: Any) -> Any:
    return (
        StateGraph()
        .add_node("a", lambda state: {"log": [*state.value("log", []), "a"]})
        .add_node("b", lambda state: {"log": [*state.value("log", []), "b"]})
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile(CompileConfig(checkpoint_saver=saver, graph_id=graph_id, **options))
    )


def test_ids_longer_than_the_store_keeps_are_refused_where_they_are_given() -> None:
    with pytest.raises(ValueError, match="thread_id is 256 characters long; ids have at most 255"):
        RunnableConfig(thread_id="t" * 256)
    with pytest.raises(ValueError, match="graph_id is 300 characters long"):
        CompileConfig(graph_id="g" * 300)
    graph = StateGraph().add_node("n" * 256, lambda state: None)
    with pytest.raises(GraphDefinitionError, match="node id is 256 characters long"):
        graph.add_edge(START, "n" * 256).add_edge("n" * 256, END).compile()


def test_ids_of_255_characters_are_stored_and_read_back(saver: BaseCheckpointSaver) -> None:
    graph = two_steps(saver, "g" * 255)
    config = RunnableConfig(thread_id="t" * 255)
    assert graph.invoke({"log": []}, config).data["log"] == ["a", "b"]
    assert graph.get_state(config).state.data["log"] == ["a", "b"]
    assert len(graph.get_state_history(config)) == 3  # input, after a, after b


def test_a_delivery_mark_of_a_255_character_node_fits_the_store(
    saver: BaseCheckpointSaver,
) -> None:
    """The mark a redelivered task leaves (``__delivery__:<task id>#<n>``) stays within the
    store's 255 characters for the longest node id, and reads back under its key (a mark past
    it made the count fail, and the run come back for ever)."""
    graph = two_steps(saver, None)
    graph.invoke({}, RunnableConfig(thread_id="marks"))
    latest = saver.get("marks")
    assert latest is not None
    for task_id in ("a", "n" * 255, f"{'n' * 249}#send0"):
        mark = Mark.delivery(task_id, 2)
        assert len(mark) <= 255
        saver.put_writes("marks", latest.checkpoint_id, mark, "n", {}, WriteKind.DELIVERY)
        marks = StepMarks.of(saver.get_writes("marks", latest.checkpoint_id))
        assert marks.deliveries[Mark.delivery_key(task_id)] == 2
    assert Mark.delivery_key("a") == "a"


def test_a_threads_runs_belong_to_the_graph_that_started_them(saver: BaseCheckpointSaver) -> None:
    mine = two_steps(saver, "mine", interrupt_before=["b"])
    other = two_steps(saver, "other")
    config = RunnableConfig(thread_id="shared")
    assert mine.invoke({"log": []}, config).data["log"] == ["a"]  # parked before b
    history = len(mine.get_state_history(config))

    for call in (
        lambda: other.invoke(GraphInput.resume(), config),
        lambda: other.invoke({"log": ["x"]}, config),
        lambda: other.update_state(config, {"log": ["x"]}),
    ):
        with pytest.raises(GraphStateError) as caught:
            call()
        assert "graph 'mine'" in str(caught.value) and "graph 'other'" in str(caught.value)
    assert len(mine.get_state_history(config)) == history  # nothing was stored

    # the owner still resumes its own thread, and another thread is free for the other graph
    assert mine.invoke(GraphInput.resume(), config).data["log"] == ["a", "b"]
    assert other.invoke({"log": []}, RunnableConfig(thread_id="its-own")).data["log"] == ["a", "b"]


def test_graphs_compiled_without_a_graph_id_share_threads(saver: BaseCheckpointSaver) -> None:
    first, second = two_steps(saver, None), two_steps(saver, None)
    config = RunnableConfig(thread_id="anyone")
    assert first.invoke({"log": []}, config).data["log"] == ["a", "b"]
    assert second.invoke({"log": ["again"]}, config).data["log"] == ["again", "a", "b"]


def test_a_reducer_that_raises_fails_the_run_naming_the_key_and_the_node(
    saver: BaseCheckpointSaver,
) -> None:
    def picky(old: Any, new: Any) -> Any:
        if new == "poison":
            raise ValueError("no poison here")
        return new

    graph = (
        StateGraph({"checked": Channel(reducer=picky)})
        .add_node("p", lambda state: {"checked": "poison"})
        .add_edge(START, "p")
        .add_edge("p", END)
        .compile(CompileConfig(checkpoint_saver=saver))
    )
    config = RunnableConfig(thread_id="t")
    with pytest.raises(InvalidUpdateError) as caught:
        graph.invoke({}, config)
    assert "the reducer of key 'checked' refused node 'p''s update" in str(caught.value)
    assert "ValueError: no poison here" in str(caught.value)
    assert isinstance(caught.value.__cause__, ValueError)
    assert graph.get_state(config).next == ("p",)  # the failed step stays for a resume
    with pytest.raises(InvalidUpdateError, match="refused the input"):
        graph.invoke({"checked": "poison"}, RunnableConfig(thread_id="other"))


def test_the_run_index_follows_each_run_to_its_end(saver: BaseCheckpointSaver) -> None:
    assert isinstance(saver, RunIndex)
    graph = two_steps(saver, "indexed", interrupt_before=["b"])
    config = RunnableConfig(thread_id="t")
    graph.invoke({"log": []}, config)
    first = saver.get("t")
    assert first is not None
    parked = saver.get_run(first.run_id)
    assert parked is not None
    assert (parked.status, parked.node, parked.graph_id) == (RunStatus.PARKED, "b", "indexed")
    graph.invoke(GraphInput.resume(), config)
    done = saver.get_run(first.run_id)
    assert done is not None and done.status is RunStatus.COMPLETED

    def boom(state: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    failing = (
        StateGraph()
        .add_node("boom", boom)
        .add_edge(START, "boom")
        .add_edge("boom", END)
        .compile(CompileConfig(checkpoint_saver=saver, graph_id="failing"))
    )
    with pytest.raises(NodeError):
        failing.invoke({}, RunnableConfig(thread_id="f"))
    [failed] = saver.list_runs(graph_id="failing")
    assert (failed.status, failed.node) == (RunStatus.FAILED, "boom")
    assert [r.status for r in saver.list_runs(graph_id="indexed")] == [RunStatus.COMPLETED]


def test_the_store_tells_how_an_in_process_run_stopped_as_it_does_for_celery(
    saver: BaseCheckpointSaver,
) -> None:
    """Parked and failed runs leave the same marks in process as on workers, so any reader
    (the CLI, the console) gets the interruption's reason or the failure from the store."""
    from langgraph_celery.worker.client import status_of

    def gate(state: Any) -> dict[str, Any]:
        if not state.value("approved"):
            raise GraphInterrupt("approve?", {"asked": "you"})
        if state.value("explode"):
            raise RuntimeError("boom")
        return {"done": True}

    graph = (
        StateGraph()
        .add_node("gate", gate)
        .add_edge(START, "gate")
        .add_edge("gate", END)
        .compile(CompileConfig(checkpoint_saver=saver, graph_id="gated"))
    )
    config = RunnableConfig(thread_id="marks")
    graph.invoke({}, config)
    parked = status_of(saver.get_with_writes("marks"))
    assert parked.status is RunStatus.PARKED and parked.parking is not None
    assert (parked.parking.node_id, parked.parking.reason) == ("gate", "approve?")
    assert parked.parking.metadata == {"asked": "you"}

    with pytest.raises(NodeError):
        graph.invoke(GraphInput.resume({"approved": True, "explode": True}), config)
    failed = status_of(saver.get_with_writes("marks"))
    assert failed.status is RunStatus.FAILED and failed.failure is not None
    assert (failed.failure.node_id, failed.failure.error_type) == ("gate", "RuntimeError")

    assert graph.invoke(GraphInput.resume({"explode": False}), config).data["done"] is True
    assert status_of(saver.get_with_writes("marks")).status is RunStatus.COMPLETED
