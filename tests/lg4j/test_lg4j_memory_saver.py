"""Port of LangGraph4j's ``LG4JMemorySaverTest`` (``langgraph4j-core``), in process over a
``MemorySaver``.

Where SPEC makes it differ, each test says so: a ``thread_id`` is required (SPEC §4), a
completed thread has nothing to resume (SPEC §5: a ``GraphStateError``, where LangGraph4j
streams its last output again), and a completed thread's latest snapshot has no ``next``
node (``()``; LangGraph4j says ``END``).  LangGraph4j's ``testCheckpointInitialState`` stores
hand-made checkpoints with ``saver.put`` and reads the run's initial state with the internal
``initialState``; here the checkpoints are made by runs and the initial state is the ``START``
output.  Not ported: ``testMemoryWithVersionsSaver``, about LangGraph4j's thread versions
(``Tag.version()``, ``VersionedMemorySaver``), which SPEC has no equivalent of.
"""

from __future__ import annotations

from typing import Any

import pytest
from lg4j_support import last_message, messages

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    Channels,
    CompileConfig,
    GraphInput,
    GraphStateError,
    NodeOutput,
    RunnableConfig,
    StateGraph,
    StateSnapshot,
    StreamMode,
)
from langgraph_celery.checkpoint import MemorySaver

SCHEMA: dict[str, Channel] = {"messages": Channels.appender()}


def steps(state: AgentState) -> int:
    return int(state.value("steps", 0))


def agent_whether(state: AgentState) -> dict[str, Any]:
    """``LG4JMemorySaverTest.agent_whether``"""
    message = last_message(state)
    if message is None:
        raise RuntimeError("No last message!")
    if "temperature" in message:
        return {"messages": "whether in Naples is sunny"}
    if "whether" in message:
        return {"messages": "tool_calls"}
    if "bartolo" in message:
        return {"messages": "Hi bartolo, nice to meet you too! How can I assist you today?"}
    if any("bartolo" in m for m in messages(state)):
        return {"messages": "Hi, bartolo welcome back?"}
    raise RuntimeError("unknown message!")


def tool_whether(state: AgentState) -> dict[str, Any]:
    return {"messages": "temperature in Napoli is 30 degree"}


def should_continue_whether(state: AgentState) -> str:
    return "tools" if last_message(state) == "tool_calls" else END


def whether_workflow() -> StateGraph:
    return (
        StateGraph(SCHEMA)
        .add_node("agent", agent_whether)
        .add_node("tools", tool_whether)
        .add_edge(START, "agent")
        .add_conditional_edges("agent", should_continue_whether, {"tools": "tools", END: END})
        .add_edge("tools", "agent")
    )


def test_checkpoint_initial_state() -> None:
    """``LG4JMemorySaverTest.testCheckpointInitialState``: a new run's initial state is its
    input on a new thread, and on a thread with checkpoints the thread's latest state with the
    input merged over it (the input wins); the saver lists the thread's checkpoints, its latest
    names the last node, and releasing the thread returns them and leaves none."""
    workflow = (
        StateGraph()
        .add_node("agent_1", lambda state: {"agent_1:prop1": "agent_1:test"})
        .add_edge(START, "agent_1")
        .add_edge("agent_1", END)
    )
    saver = MemorySaver()
    app = workflow.compile(CompileConfig(checkpoint_saver=saver))
    config = RunnableConfig(thread_id="initial-state")

    outputs = list(app.stream({"input": "test2"}, config))  # (the whole run)
    first = outputs[0]
    assert [output.node for output in outputs] == [START, "agent_1", END]
    assert first.node == START
    assert dict(first.state.data) == {"input": "test2"}

    app = workflow.compile(CompileConfig(checkpoint_saver=saver))
    outputs = list(app.stream({"input": "test1"}, config))
    initial = outputs[0]
    assert initial.node == START
    assert dict(initial.state.data) == {"input": "test1", "agent_1:prop1": "agent_1:test"}

    checkpoints = saver.list("initial-state")
    assert len(checkpoints) == 4  # each run: its input, then agent_1's step
    last = saver.get("initial-state")
    assert last is not None
    assert last.node == "agent_1"
    assert last.values["agent_1:prop1"] == "agent_1:test"
    assert last.values["input"] == "test1"

    released = saver.release("initial-state")
    assert [c.checkpoint_id for c in released] == [c.checkpoint_id for c in checkpoints]
    assert list(saver.list("initial-state")) == []


def test_checkpoint_saver_resubmit() -> None:
    """``LG4JMemorySaverTest.testCheckpointSaverResubmit``: a loop of five steps on a thread,
    the same on a second thread, then a new run on that second thread goes on from its state
    (one step more).  LangGraph4j's ``saver.tag(config, null)``, empty without
    ``release_thread``, is the thread's checkpoints still being there."""
    expected_steps = 5

    def agent_1(state: AgentState) -> dict[str, Any]:
        count = steps(state) + 1
        return {"steps": count, "messages": f"agent_1:step {count}"}

    def should_continue(state: AgentState) -> str:
        return "exit" if steps(state) >= expected_steps else "next"

    saver = MemorySaver()
    app = (
        StateGraph(SCHEMA)
        .add_edge(START, "agent_1")
        .add_node("agent_1", agent_1)
        .add_conditional_edges("agent_1", should_continue, {"next": "agent_1", "exit": END})
        .compile(CompileConfig(checkpoint_saver=saver, release_thread=False))
    )

    config = RunnableConfig(thread_id="thread_1")
    state = app.invoke(GraphInput.args({"steps": 0}), config)
    assert steps(state) == expected_steps
    assert messages(state) == [f"agent_1:step {i + 1}" for i in range(expected_steps)]
    assert saver.list("thread_1")  # (not released)
    assert isinstance(app.get_state(config), StateSnapshot)

    config = RunnableConfig(thread_id="thread_2")
    state = app.invoke(GraphInput.no_args(), config)
    assert steps(state) == expected_steps
    assert messages(state) == [f"agent_1:step {i + 1}" for i in range(expected_steps)]

    # "RE-SUBMIT THREAD 1" (LangGraph4j's test resubmits thread_2, whose config it holds)
    state = app.invoke(GraphInput.no_args(), config)
    assert steps(state) == expected_steps + 1
    assert len(messages(state)) == expected_steps + 1


def test_view_and_update_past_graph_state() -> None:
    """``LG4JMemorySaverTest.testViewAndUpdatePastGraphState``: stream snapshots, read the
    thread's history, then update its first checkpoint and resume from there (time travel).
    LangGraph4j resumes the completed thread once first and gets its last output again; SPEC §5
    makes that a ``GraphStateError``."""
    app = whether_workflow().compile(
        CompileConfig(checkpoint_saver=MemorySaver(), release_thread=False)
    )
    config = RunnableConfig(thread_id="thread_1")

    results: list[NodeOutput] = list(
        app.stream(
            GraphInput.args({"messages": "whether in Naples?"}),
            RunnableConfig(thread_id="thread_1", stream_mode=StreamMode.SNAPSHOTS),
        )
    )
    assert [r.node for r in results] == [START, "agent", "tools", "agent", END]
    assert all(isinstance(r, NodeOutput) for r in results)
    assert all(isinstance(r, StateSnapshot) for r in results[1:4])

    snapshot = app.get_state(config)
    assert snapshot.next == ()  # (LangGraph4j: END)
    assert last_message(snapshot.state) == "whether in Naples is sunny"

    history = app.get_state_history(config)
    assert len(history) == 4

    with pytest.raises(GraphStateError, match="thread_1"):
        list(app.stream(GraphInput.resume(), config))

    first_snapshot = history[-1]  # (the oldest)
    assert last_message(first_snapshot.state) == "whether in Naples?"
    assert first_snapshot.next == ("agent",)
    assert first_snapshot.config is not None

    to_replay = app.update_state(first_snapshot.config, {"messages": "i'm bartolo"})
    results = list(app.stream(GraphInput.resume(), to_replay))
    assert len(results) == 2
    assert results[1].node == END
    assert last_message(results[0].state) == (
        "Hi bartolo, nice to meet you too! How can I assist you today?"
    )
    assert last_message(results[1].state) is not None


def test_pause_and_update_past_graph_state() -> None:
    """``LG4JMemorySaverTest.testPauseAndUpdatePastGraphState``: ``interrupt_before`` tools,
    then resume from the snapshot's config."""
    app = whether_workflow().compile(
        CompileConfig(checkpoint_saver=MemorySaver(), interrupt_before=["tools"])
    )
    config = RunnableConfig(thread_id="thread_1")

    results = list(app.stream(GraphInput.args({"messages": "whether in Naples?"}), config))
    assert [r.node for r in results] == [START, "agent"]
    assert last_message(results[1].state) is not None

    state = app.get_state(config)
    assert state.next == ("tools",)
    assert state.config is not None

    results = list(app.stream(GraphInput.resume(), state.config))
    assert [r.node for r in results] == ["tools", "agent", END]
    assert last_message(results[2].state) == "whether in Naples is sunny"
