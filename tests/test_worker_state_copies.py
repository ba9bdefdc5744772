"""Issue 12 item 2 on Celery: a node task gives its node the saver's cached state without a
deep copy of it (a step costs what it changes, not the size of the state), and a node that
changes what it reads still never changes the stored state.

In process: a worker thread of this process (``memory://`` broker) serves the node tasks, with a
:class:`SqlSaver` on a SQLite file, the store a worker process reads."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery._state import _set_task_join_will_block

from langgraph_celery import (
    END,
    START,
    Channel,
    Channels,
    CompileConfig,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery._clone import clone_value
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver, _incremental
from langgraph_celery.graph.compiled import CompiledGraph
from langgraph_celery.worker.embedded import embedded_worker_for

CHAIN = 4


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqlSaver]:
    found = SqlSaver(f"sqlite:///{tmp_path / 'worker.db'}")
    found.setup()
    yield found
    found.dispose()


def _mutating(index: int) -> Any:
    def node(state: Any, *_: Any) -> dict[str, Any]:
        messages = state["messages"]
        assert len(messages) == 100 + index  # what the previous steps stored, nothing else
        messages.append({"role": "intruder"})  # changes of what a node read stay its own
        messages[0]["content"] = "changed"
        state["profile"]["name"] = "changed"
        return {"messages": [{"role": "ai", "content": f"n{index}"}]}

    return node


def chain(
    saver: SqlSaver, messages: Channel | None = None, nodes: Any = _mutating
) -> CompiledGraph:
    """A chain of ``CHAIN`` nodes (``nodes(index)``) on Celery (a ``memory://`` broker), its
    ``messages`` an appender unless given."""
    graph = StateGraph({"messages": messages or Channels.appender(), "profile": Channel()})
    previous = START
    for index in range(CHAIN):
        graph.add_node(f"n{index}", nodes(index))
        graph.add_edge(previous, f"n{index}")
        previous = f"n{index}"
    graph.add_edge(previous, END)
    app = Celery(f"copies-{uuid.uuid4().hex[:8]}", broker="memory://", set_as_current=False)
    app.conf.task_default_queue = f"copies-{uuid.uuid4().hex[:8]}"
    config = CompileConfig(
        checkpoint_saver=saver,
        executor=CeleryExecutor(app),
        graph_id=f"copies-{uuid.uuid4().hex[:8]}",
    )
    return graph.compile(config)


@pytest.fixture
def clones(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads in which the saver deep-copied a state it read (its ``clone_value``)."""
    seen: list[str] = []

    def counted(value: Any) -> Any:
        seen.append(threading.current_thread().name)
        return clone_value(value)

    monkeypatch.setattr(_incremental, "clone_value", counted)
    return seen


def _run(graph: CompiledGraph, thread: str, config: RunnableConfig) -> Any:
    worker = embedded_worker_for(graph)
    assert worker is not None
    worker.start()
    try:
        return graph.invoke(
            {
                "messages": [{"role": "user", "content": f"m{i}"} for i in range(100)],
                "profile": {"name": "kept"},
            },
            config,
        )
    finally:
        worker.stop()
        # (a worker in this process marks it as inside a task: later tests' result.get() would
        # refuse to block)
        _set_task_join_will_block(False)


def test_a_node_task_reads_the_state_without_a_deep_copy(
    saver: SqlSaver, clones: list[str]
) -> None:
    graph = chain(saver)
    thread = f"copies-{uuid.uuid4().hex[:8]}"
    _run(graph, thread, RunnableConfig(thread_id=thread))
    main = threading.main_thread().name
    assert [name for name in clones if name != main] == []  # the worker copied no state
    assert clones  # (the client's reads do copy: what it hands out is the caller's)


@pytest.mark.parametrize("clone_state", [True, False])
def test_what_a_node_changes_of_its_state_never_reaches_the_store(
    saver: SqlSaver, clone_state: bool
) -> None:
    graph = chain(saver)
    thread = f"copies-{uuid.uuid4().hex[:8]}"
    config = RunnableConfig(thread_id=thread, clone_state=clone_state)
    final = _run(graph, thread, config)
    expected = [{"role": "user", "content": f"m{i}"} for i in range(100)]
    expected += [{"role": "ai", "content": f"n{i}"} for i in range(CHAIN)]
    assert final.data["messages"] == expected
    assert final.data["profile"] == {"name": "kept"}
    for snapshot in graph.get_state_history(RunnableConfig(thread_id=thread)):
        messages = snapshot.values["messages"]
        assert messages == expected[: len(messages)]
        assert snapshot.values.get("profile", {"name": "kept"}) == {"name": "kept"}


def _extend_in_place(old: list[Any], new: list[Any]) -> list[Any]:
    old.extend(new)
    return old


def _replying(index: int) -> Any:
    return lambda state: {"messages": [{"role": "ai", "n": index}]}


def test_a_reducer_that_extends_its_list_in_place_changes_no_cached_state(
    saver: SqlSaver,
) -> None:
    """The worker merges a step into the saver's cached state of its parent: a reducer that
    extends the list it is given used to extend that cached list, so history read each earlier
    checkpoint with the later steps' messages.  It gets a copy of the list."""
    compiled = chain(saver, Channel(_extend_in_place, list), _replying)
    thread = f"copies-{uuid.uuid4().hex[:8]}"
    final = _run(compiled, thread, RunnableConfig(thread_id=thread))
    assert len(final.data["messages"]) == 100 + CHAIN
    history = compiled.get_state_history(RunnableConfig(thread_id=thread))
    assert [len(s.values["messages"]) for s in history] == [100 + i for i in range(CHAIN, -1, -1)]
