"""Port of LangGraph4j's ``checkpoint/AbstractCheckpointSaverTest`` (``langgraph4j-core``).

``buildCheckpointSaver(serializer, threadId)`` is a new handle on the same store: for
``SqlSaver`` a new saver on the same SQLite file (in ``tmp_path``), as another process would
build; for ``MemorySaver`` the one instance.  LangGraph4j runs each test with a JSON and a
binary serializer; ours is ``JsonSerializer`` only (nothing is pickled), so once per saver.

Where SPEC makes the port differ:

- LangGraph4j's ``CompileConfig`` releases the thread by default (``releaseThread`` is true in
  its current releases); SPEC fixes ``release_thread=False`` as the default, so the tests that
  rely on the release pass ``release_thread=True``.
- ``testCheckpointWithReleasedThread`` runs on ``RunnableConfig.empty()`` (LangGraph4j's default
  thread); SPEC §4 requires a ``thread_id``.
- ``testCheckpointWithNotReleasedThread``: LangGraph4j's ``updateState`` on a checkpoint's
  config replaces that checkpoint (the history stays at 2); SPEC §4 has ``update_state`` write
  a new checkpoint (3), whose config reads back the update.  A completed thread's ``next`` is
  ``()`` (choices.md), where LangGraph4j says ``END``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from lg4j_support import MESSAGES_SCHEMA, CustomNodeAction, last_message, messages

from langgraph_celery import (
    END,
    START,
    AgentState,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver, SqlSaver

SaverFactory = Callable[[], BaseCheckpointSaver]


@pytest.fixture(params=["memory", "sqlite"])
def build_checkpoint_saver(request: pytest.FixtureRequest, tmp_path: Path) -> SaverFactory:
    """``buildCheckpointSaver``: each call a new handle on one store."""
    if request.param == "memory":
        saver = MemorySaver()
        return lambda: saver
    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    return lambda: SqlSaver(url)


def two_agents() -> StateGraph:
    return (
        StateGraph(MESSAGES_SCHEMA)
        .add_node("agent_1", CustomNodeAction("agent_1"))
        .add_node("agent_2", CustomNodeAction("agent_2"))
        .add_edge(START, "agent_1")
        .add_edge("agent_1", "agent_2")
        .add_edge("agent_2", END)
    )


def one_agent() -> StateGraph:
    return (
        StateGraph(MESSAGES_SCHEMA)
        .add_node("agent_1", CustomNodeAction("agent_1"))
        .add_edge(START, "agent_1")
        .add_edge("agent_1", END)
    )


def test_checkpoint_with_interruption(build_checkpoint_saver: SaverFactory) -> None:
    """``AbstractCheckpointSaverTest.testCheckpointWithInterruption``: stop before agent_2 with
    one saver handle, resume with another; the resume's result is the released thread's tag,
    whose newest checkpoint holds both messages."""
    graph = two_agents()
    config = RunnableConfig(thread_id="json-thread-testCheckpointWithInterruption")

    def compiled() -> CompiledGraph:
        return graph.compile(
            CompileConfig(
                checkpoint_saver=build_checkpoint_saver(),
                interrupt_before=["agent_2"],
                release_thread=True,
            )
        )

    workflow = compiled()  # STEP 1
    stream = workflow.stream(GraphInput.no_args(), config)
    list(stream)
    result = stream.result
    assert result.is_interruption_metadata()
    im = result.as_interruption_metadata()
    assert len(messages(im.state)) == 1
    assert last_message(im.state) == "agent_1"

    workflow = compiled()  # STEP 2
    stream = workflow.stream(GraphInput.resume(), config)
    list(stream)
    result = stream.result
    assert result.is_checkpoint_saver_tag()
    checkpoints = result.as_checkpoint_saver_tag().checkpoints
    assert checkpoints
    state = AgentState(checkpoints[0].values)
    assert messages(state) == ["agent_1", "agent_2"]  # lastMinus(1), lastMessage()


def test_checkpoint_with_released_thread(build_checkpoint_saver: SaverFactory) -> None:
    """``AbstractCheckpointSaverTest.testCheckpointWithReleasedThread``."""
    saver = build_checkpoint_saver()
    workflow = one_agent().compile(CompileConfig(checkpoint_saver=saver, release_thread=True))
    config = RunnableConfig(thread_id="released-thread")

    result = workflow.invoke(GraphInput.args({"input": "test1"}), config)

    assert result is not None
    assert dict(result.data) == {"input": "test1", "messages": ["agent_1"]}
    assert list(workflow.get_state_history(config)) == []


def test_checkpoint_with_not_released_thread(build_checkpoint_saver: SaverFactory) -> None:
    """``AbstractCheckpointSaverTest.testCheckpointWithNotReleasedThread``."""
    thread_id = "json-thread-testCheckpointWithNotReleasedThread"
    saver = build_checkpoint_saver()
    graph = one_agent()
    workflow = graph.compile(CompileConfig(checkpoint_saver=saver, release_thread=False))
    config = RunnableConfig(thread_id=thread_id)

    result = workflow.invoke(GraphInput.args({"input": "test1"}), config)
    assert result is not None

    history = workflow.get_state_history(config)
    assert len(history) == 2

    last_snapshot = workflow.get_state(config)
    assert last_snapshot.node == "agent_1"
    assert last_snapshot.next == ()  # (LangGraph4j: END)

    updated_config = workflow.update_state(last_snapshot.config, {"update": "update test"})

    updated_snapshot = workflow.get_state(updated_config)
    assert updated_snapshot.node == "agent_1"
    assert updated_snapshot.state.value("update") == "update test"
    assert updated_snapshot.next == ()

    saver = build_checkpoint_saver()
    workflow = graph.compile(CompileConfig(checkpoint_saver=saver, release_thread=False))

    history = workflow.get_state_history(config)
    assert history, "State history should not be empty after reloading the workflow"
    assert len(history) == 3  # (LangGraph4j: 2, its updateState replaces the checkpoint)

    updated_snapshot = workflow.get_state(updated_config)
    assert updated_snapshot.node == "agent_1"
    assert updated_snapshot.state.value("update") == "update test"
    assert updated_snapshot.next == ()

    saver.release(thread_id)
    assert list(workflow.get_state_history(config)) == []


def test_issue333(tmp_path: Path) -> None:
    """``AbstractCheckpointSaverTest.testIssue333``: building the saver twice on one store is
    idempotent (its tables are created once), and the store works after."""
    url = f"sqlite:///{tmp_path / 'checkpoints.db'}"
    SqlSaver(url).setup()
    saver = SqlSaver(url)
    saver.setup()
    workflow = one_agent().compile(CompileConfig(checkpoint_saver=saver))
    config = RunnableConfig(thread_id="idempotent-thread-1")
    assert workflow.invoke({}, config).value("messages") == ["agent_1"]
    assert len(SqlSaver(url).list("idempotent-thread-1")) == 2
