"""In process: a new run (not a resume) started on a thread right after a cancel, while the
cancelled run's step is still running.  A checkpoint has one successor, so of the late step and
the new run's first checkpoint, both going on from the cancelled run's checkpoint, the second
is refused: a late step stored first is where the new run starts (its node's update kept), and
a late step that comes second is dropped (its update left as a pending write of its own
checkpoint), so the thread's latest checkpoint and state are always the new run's.  The same
on Celery: ``tests/celery/test_celery_run_loop.py``."""

from __future__ import annotations

import threading
from typing import Any, Literal

import pytest

from langgraph_celery import (
    END,
    START,
    Channels,
    CompileConfig,
    GraphInput,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, Checkpoint, CheckpointKind, RunStatus
from langgraph_celery.errors import CheckpointConflictError
from langgraph_celery.graph.compiled import CompiledGraph

Durability = Literal["sync", "async", "exit"]
DURABILITIES: tuple[Durability, ...] = ("sync", "async", "exit")


class _Held:
    """``agent_1`` whose first call waits for :attr:`release` (it has :attr:`started`)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, state: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            assert self.release.wait(20), "agent_1 was never released"
        return {"messages": "agent_1"}


def _graph(saver: BaseCheckpointSaver, held: _Held) -> CompiledGraph:
    return (
        StateGraph({"messages": Channels.appender()})
        .add_node("agent_1", held)
        .add_node("agent_2", lambda state: {"messages": "agent_2"})
        .add_edge(START, "agent_1")
        .add_edge("agent_1", "agent_2")
        .add_edge("agent_2", END)
        .compile(CompileConfig(checkpoint_saver=saver, graph_id="late"))
    )


def _cancelled_while_agent_1_runs(
    graph: CompiledGraph, held: _Held, config: RunnableConfig
) -> tuple[Any, threading.Thread, list[Any]]:
    """Start a run on another thread, and cancel it once ``agent_1`` runs (held); what its
    stream yields (node ids), and what it raised, if it did, at the end."""
    stream = graph.stream({"messages": ["hi"]}, config)
    outputs: list[Any] = []

    def consume() -> None:
        try:
            outputs.extend(output.node for output in stream)
        except Exception as error:  # (the test says so)
            outputs.append(error)

    consumer = threading.Thread(target=consume)
    consumer.start()
    assert held.started.wait(20)
    assert stream.cancel() is True
    return stream, consumer, outputs


def _after(history: list[Checkpoint], first: Checkpoint) -> list[Checkpoint]:
    """The checkpoints stored after ``first`` (history is newest first)."""
    ids = [c.checkpoint_id for c in history]
    return history[: ids.index(first.checkpoint_id)]


@pytest.mark.parametrize("durability", DURABILITIES)
def test_a_late_step_stored_first_is_where_the_new_run_starts(
    saver: BaseCheckpointSaver, durability: Durability
) -> None:
    held = _Held()
    graph = _graph(saver, held)
    config = RunnableConfig(thread_id="late-first", durability=durability)
    stream, consumer, outputs = _cancelled_while_agent_1_runs(graph, held, config)
    cancelled = saver.get("late-first")
    assert cancelled is not None
    put, tried = saver.put, []

    def late_step_first(checkpoint: Checkpoint) -> Checkpoint:
        # the new run read the cancelled run's checkpoint as the latest; before it stores
        # its first checkpoint, the held step finishes and stores its own
        if checkpoint.kind is CheckpointKind.INPUT and not tried:
            tried.append(checkpoint)
            held.release.set()
            consumer.join(20)
        return put(checkpoint)

    saver.put = late_step_first  # type: ignore[method-assign]
    state = graph.invoke({"messages": ["again"]}, config)

    assert tried and tried[0].parent_id == cancelled.checkpoint_id  # (refused: it went on)
    assert outputs == [START, "agent_1"]  # the cancelled run stored its step, and stopped
    assert stream.is_cancelled() and stream.result.is_empty()
    # the new run started from the late step: agent_1's update is kept, and ran once there
    assert state.data["messages"] == ["hi", "agent_1", "again", "agent_1", "agent_2"]
    history = list(saver.list("late-first"))
    first = next(
        c for c in history if c.kind is CheckpointKind.INPUT and c.run_id != cancelled.run_id
    )
    late = saver.get("late-first", first.parent_id)
    assert late is not None and late.run_id == cancelled.run_id
    assert late.parent_id == cancelled.checkpoint_id
    assert all(c.run_id == first.run_id for c in _after(history, first))
    assert history[0].values == state.data and history[0].run_id == first.run_id
    record = saver.get_run(cancelled.run_id)  # type: ignore[attr-defined]
    assert record is not None and record.status is RunStatus.CANCELLED


@pytest.mark.parametrize("durability", DURABILITIES)
def test_a_late_step_that_comes_second_is_dropped_and_its_update_kept(
    saver: BaseCheckpointSaver, durability: Durability
) -> None:
    held = _Held()
    graph = _graph(saver, held)
    config = RunnableConfig(thread_id="late-second", durability=durability)
    stream, consumer, outputs = _cancelled_while_agent_1_runs(graph, held, config)
    cancelled = saver.get("late-second")
    assert cancelled is not None

    state = graph.invoke({"messages": ["again"]}, config)  # (agent_1 of the first still held)
    held.release.set()
    consumer.join(20)

    assert not consumer.is_alive()
    # the late step was refused: nothing more of the cancelled run ("async" and "exit" stream
    # a step as it is computed, and store it later: its store is what was refused)
    assert outputs == ([START] if durability == "sync" else [START, "agent_1"])
    assert stream.is_cancelled() and stream.result.is_empty()
    assert state.data["messages"] == ["hi", "again", "agent_1", "agent_2"]
    history = list(saver.list("late-second"))
    assert history[0].values == state.data
    first = next(
        c for c in history if c.kind is CheckpointKind.INPUT and c.run_id != cancelled.run_id
    )
    assert first.parent_id == cancelled.checkpoint_id
    assert all(c.run_id == first.run_id for c in _after(history, first))
    assert [c.checkpoint_id for c in history if c.run_id == cancelled.run_id] == [
        cancelled.checkpoint_id
    ]
    record = saver.get_run(cancelled.run_id)  # type: ignore[attr-defined]
    assert record is not None and record.status is RunStatus.CANCELLED
    if durability != "sync":
        return  # (the step's checkpoint was held or in flight: its update goes with it)
    # the late step's update stays at its checkpoint, for a fork of it
    kept = saver.get_writes("late-second", cancelled.checkpoint_id)
    assert [(w.node, w.update) for w in kept] == [("agent_1", {"messages": "agent_1"})]
    # a fork of the cancelled run's checkpoint runs on from that update (agent_1 not again)
    forked = graph.invoke(None, config.with_changes(checkpoint_id=cancelled.checkpoint_id))
    assert forked.data["messages"] == ["hi", "agent_1", "agent_2"]
    assert held.calls == 2


def test_a_resume_that_read_the_parked_checkpoint_after_another_resume_ran_nothing(
    saver: BaseCheckpointSaver,
) -> None:
    """Two resumes of one parked run that both read its parked checkpoint: the one that stores
    second is refused (``CheckpointConflictError``) and runs nothing.  It used to take the
    other's resume checkpoint for a cancelled run's late step and go on from it, running the
    parked node a second time (the first resume's commit then failing)."""
    held = _Held()
    graph = (
        StateGraph({"messages": Channels.appender()})
        .add_node("draft", lambda state: {"messages": "draft"})
        .add_node("agent_1", held)
        .add_edge(START, "draft")
        .add_edge("draft", "agent_1")
        .add_edge("agent_1", END)
        .compile(CompileConfig(checkpoint_saver=saver, interrupt_before=("agent_1",)))
    )
    config = RunnableConfig(thread_id="two-resumes")
    graph.invoke({"messages": []}, config)
    parked = saver.get("two-resumes")
    assert parked is not None and parked.next == ("agent_1",)
    first: list[Any] = []
    resuming = threading.Thread(
        target=lambda: first.append(graph.invoke(GraphInput.resume(), config))
    )
    resuming.start()
    assert held.started.wait(20)  # the first resume stored its checkpoint; agent_1 runs
    read = saver.get
    stale = threading.local()

    def as_read_before(thread_id: str, checkpoint_id: str | None = None) -> Any:
        if checkpoint_id is None and not getattr(stale, "done", False):
            stale.done = True  # (this resume read the thread when it was still parked)
            return parked
        return read(thread_id, checkpoint_id)

    saver.get = as_read_before  # type: ignore[method-assign]
    try:
        with pytest.raises(CheckpointConflictError):
            graph.invoke(GraphInput.resume(), config)
    finally:
        saver.get = read  # type: ignore[method-assign]
        held.release.set()
        resuming.join(20)
    assert held.calls == 1
    assert first and first[0].value("messages") == ["draft", "agent_1"]
