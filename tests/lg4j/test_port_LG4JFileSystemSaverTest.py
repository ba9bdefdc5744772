"""Port of LangGraph4j's ``LG4JFileSystemSaverTest`` (``langgraph4j-core``).

We have no ``FileSystemSaver``: our durable saver is ``SqlSaver``, here on a SQLite file in
``tmp_path`` (LangGraph4j's ``target/checkpoint/<test>`` directory); LangGraph4j runs each test
with a binary and a JSON serializer, ours is ``JsonSerializer`` only.  A saver's ``release``
takes the thread id (``saver.release(runnableConfig)`` in LangGraph4j) and returns the
released checkpoints, newest first (LangGraph4j's ``Tag.checkpoints()``); ``get_state`` on a
thread without checkpoints is a ``GraphStateError`` naming it (LangGraph4j: an
``IllegalStateException`` "Missing Checkpoint!").  ``testCheckpointSaverWithAutoRelease``
relies on LangGraph4j's default ``releaseThread`` (true in its current releases); SPEC's
default is ``release_thread=False``, so it passes ``release_thread=True``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lg4j_support import MESSAGES_SCHEMA, messages

from langgraph_celery import (
    END,
    START,
    AgentState,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    GraphStateError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import SqlSaver

EXPECTED_STEPS = 5


def steps(state: AgentState) -> int:
    """``State.steps()``"""
    return int(state.value("steps", 0))


def workflow() -> StateGraph:
    """agent_1 loops until ``steps`` reaches 5, one message a step."""

    def agent_1(state: AgentState) -> dict[str, Any]:
        count = steps(state) + 1
        return {"steps": count, "messages": f"agent_1:step {count}"}

    def route(state: AgentState) -> str:
        return "exit" if steps(state) >= EXPECTED_STEPS else "next"

    return (
        StateGraph(MESSAGES_SCHEMA)
        .add_edge(START, "agent_1")
        .add_node("agent_1", agent_1)
        .add_conditional_edges("agent_1", route, {"next": "agent_1", "exit": END})
    )


def compile_on(path: Path, release_thread: bool) -> tuple[CompiledGraph, SqlSaver]:
    saver = SqlSaver(f"sqlite:///{path / 'checkpoints.db'}")
    return workflow().compile(
        CompileConfig(checkpoint_saver=saver, release_thread=release_thread)
    ), saver


CONFIG_1 = RunnableConfig(thread_id="thread_1")
CONFIG_2 = RunnableConfig(thread_id="thread_2")


def check_resubmit(tmp_path: Path, new_input: Any) -> None:
    """``testCheckpointSaverResubmit``; ``new_input`` is the input of each run."""
    app, saver = compile_on(tmp_path, release_thread=False)
    try:
        for execution in range(2):
            state = app.invoke(new_input, CONFIG_1)
            assert steps(state) == EXPECTED_STEPS + execution * 2
            values = messages(state)
            assert values
            assert len(values) == EXPECTED_STEPS + execution * 2
            assert values == [f"agent_1:step {i + 1}" for i in range(len(values))]

            assert app.get_state(CONFIG_1) is not None

            # SUBMIT NEW THREAD 2
            state = app.invoke(new_input, CONFIG_2)
            assert steps(state) == EXPECTED_STEPS + execution
            assert len(messages(state)) == EXPECTED_STEPS + execution

            # RE-SUBMIT THREAD 1
            state = app.invoke(new_input, CONFIG_1)
            assert steps(state) == EXPECTED_STEPS + 1 + execution * 2
            assert len(messages(state)) == EXPECTED_STEPS + 1 + execution * 2
    finally:
        saver.release("thread_1")
        saver.release("thread_2")
    assert saver.list("thread_1") == [] and saver.list("thread_2") == []


def check_manual_release(tmp_path: Path, new_input: Any) -> None:
    """``testCheckpointSaverWithManualRelease``."""
    app, saver = compile_on(tmp_path, release_thread=False)

    state = app.invoke(new_input, CONFIG_1)
    assert steps(state) == EXPECTED_STEPS

    released = saver.release("thread_1")
    assert released
    assert {checkpoint.thread_id for checkpoint in released} == {"thread_1"}
    assert dict(released[0].values) == dict(state.data)  # tag.checkpoints() first's state

    assert messages(state) == [f"agent_1:step {i + 1}" for i in range(EXPECTED_STEPS)]

    with pytest.raises(GraphStateError, match="thread_1"):
        app.get_state(CONFIG_1)  # ("Missing Checkpoint!")

    # SUBMIT NEW THREAD 2
    state = app.invoke(new_input, CONFIG_2)
    assert steps(state) == EXPECTED_STEPS
    released = saver.release("thread_2")
    assert released
    assert dict(released[0].values) == dict(state.data)
    assert len(messages(state)) == EXPECTED_STEPS

    # RE-SUBMIT THREAD 1: released, it starts afresh
    state = app.invoke(new_input, CONFIG_1)
    assert steps(state) == EXPECTED_STEPS
    released = saver.release("thread_1")
    assert released
    assert dict(released[0].values) == dict(state.data)


def check_auto_release(tmp_path: Path, new_input: Any) -> None:
    """``testCheckpointSaverWithAutoRelease``."""
    app, saver = compile_on(tmp_path, release_thread=True)

    state_1 = app.invoke(new_input, CONFIG_1)
    assert steps(state_1) == EXPECTED_STEPS

    assert list(saver.release("thread_1")) == []  # (the run released it already)
    assert messages(state_1) == [f"agent_1:step {i + 1}" for i in range(EXPECTED_STEPS)]

    with pytest.raises(GraphStateError, match="thread_1"):
        app.get_state(CONFIG_1)  # ("Missing Checkpoint!")

    # SUBMIT NEW THREAD 2
    state_2 = app.invoke(new_input, CONFIG_2)
    assert steps(state_2) == EXPECTED_STEPS
    assert list(saver.release("thread_2")) == []
    assert len(messages(state_2)) == EXPECTED_STEPS

    # RE-SUBMIT THREAD 1
    stream = app.stream(new_input, CONFIG_1)
    outputs = list(stream)
    assert outputs
    last_state = outputs[-1].state
    result = stream.result
    assert not result.is_empty()
    assert result.is_checkpoint_saver_tag()
    tag = result.as_checkpoint_saver_tag()
    assert tag.thread_id == "thread_1"
    assert tag.checkpoints
    assert dict(tag.checkpoints[0].values) == dict(last_state.data)


def test_checkpoint_saver_resubmit(tmp_path: Path) -> None:
    """``LG4JFileSystemSaverTest.testCheckpointSaverResubmit``."""
    check_resubmit(tmp_path, GraphInput.no_args())


def test_checkpoint_saver_with_manual_release(tmp_path: Path) -> None:
    """``LG4JFileSystemSaverTest.testCheckpointSaverWithManualRelease``."""
    check_manual_release(tmp_path, GraphInput.no_args())


def test_checkpoint_saver_with_auto_release(tmp_path: Path) -> None:
    """``LG4JFileSystemSaverTest.testCheckpointSaverWithAutoRelease``."""
    check_auto_release(tmp_path, GraphInput.no_args())
