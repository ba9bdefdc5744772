"""What travels where without Redis (docs/streaming.md, "On Celery"): on the embedded worker of
a ``memory://`` broker the nodes' chunks are dropped on the worker, and a client streaming the
run gets every step and the final update the generator returned."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    Done,
    NodeOutput,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
)
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import MemorySaver
from langgraph_celery.worker.embedded import embedded_worker_for


def talk(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    config.emit("hello")

    async def tokens() -> Any:
        yield "t1"
        yield Done({"log": ["talk"]})

    return {"tokens": tokens()}


def talking(app: Celery, graph_id: str) -> Any:
    """START -> talk -> END, compiled to run on ``app``."""
    return (
        StateGraph({"log": Channels.appender()})
        .add_node("talk", talk)
        .add_edge(START, "talk")
        .add_edge("talk", END)
        .compile(
            CompileConfig(
                checkpoint_saver=MemorySaver(), executor=CeleryExecutor(app), graph_id=graph_id
            )
        )
    )


@pytest.fixture
def graph() -> Iterator[Any]:
    app = Celery(f"transports-{uuid.uuid4().hex[:8]}", broker="memory://", set_as_current=False)
    app.conf.task_default_queue = f"transports-{uuid.uuid4().hex[:8]}"
    compiled = talking(app, f"transports-{uuid.uuid4().hex[:8]}")
    worker = embedded_worker_for(compiled)
    assert worker is not None
    worker.start()
    try:
        yield compiled
    finally:
        worker.stop()


def test_without_redis_a_follower_gets_the_steps_and_no_chunk(graph: Any) -> None:
    outputs: list[NodeOutput] = list(graph.stream({}, RunnableConfig(thread_id="t")))
    assert not any(isinstance(o, StreamingOutput) for o in outputs)
    assert [o.node for o in outputs] == [START, "talk", END]
    assert outputs[-1].state.data == {"log": ["talk"]}


def test_an_embedded_worker_leaves_this_process_free_to_wait_on_results() -> None:
    """A worker's pool marks its process as one whose tasks must not wait on results; the
    process running an embedded worker is a client too: ``result.get()`` still works in it
    while the worker runs (Celery's in-memory result backend, the embedded worker's tasks)."""
    name = f"joins-{uuid.uuid4().hex[:8]}"
    app = Celery(name, broker="memory://", backend="cache+memory://", set_as_current=False)
    app.conf.task_default_queue = name

    @app.task(name=f"{name}.echo", shared=False)
    def echo(value: int) -> int:
        return value

    compiled = talking(app, name)
    worker = embedded_worker_for(compiled)
    assert worker is not None
    with worker:
        assert echo.delay(7).get(timeout=10) == 7
        assert compiled.invoke({}, RunnableConfig(thread_id="t")).data == {"log": ["talk"]}
