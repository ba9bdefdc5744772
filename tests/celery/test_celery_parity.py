"""SPEC §8: a graph on Celery workers behaves as in process (the scenario table of
``apps/lgc_graphs.py``), on Redis and on RabbitMQ as broker."""

from __future__ import annotations

from typing import Any

import pytest
from lgc_graphs import SCENARIOS, Scenario

from celery_support import CeleryStack, wait_until
from langgraph_celery import CompileConfig, CompiledGraph, GraphError, RunnableConfig, StreamMode
from langgraph_celery.checkpoint import MemorySaver
from langgraph_celery.worker.names import celery_task_id


@pytest.fixture(scope="module", params=["redis", "amqp"])
def broker_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def run_scenario(graph: CompiledGraph, scenario: Scenario, thread: str) -> dict[str, Any]:
    """Make the scenario's calls on ``thread``; what each streamed and how it ended, and the
    thread's final state and history."""
    config = RunnableConfig(thread_id=thread, stream_mode=StreamMode.SNAPSHOTS)
    calls = []
    for graph_input, _expected in scenario.calls:
        stream = graph.stream(graph_input, config)
        streamed: list[tuple[int, str]] = []
        try:
            for output in stream:
                streamed.append((output.step, output.node))
        except GraphError as error:
            outcome: Any = type(error).__name__
        else:
            result = stream.result
            if result.is_interruption_metadata():
                interruption = result.as_interruption_metadata()
                outcome = ("interrupted", interruption.node_id, interruption.reason)
            else:
                outcome = ("completed", result.as_state_data())
        # node order within a step aside: sort by (step, node)
        calls.append({"streamed": sorted(streamed), "outcome": outcome})
    history = graph.get_state_history(config)
    return {
        "calls": calls,
        "state": dict(graph.get_state(config).state.data),
        "history": [(s.step, s.node, s.next, dict(s.state.data)) for s in history],
    }


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_same_result_in_process_and_on_workers(
    celery_stack: CeleryStack, name: str, thread: str
) -> None:
    scenario = SCENARIOS[name]
    local = scenario.build().compile(
        CompileConfig(checkpoint_saver=MemorySaver(), **scenario.compile)
    )
    expected = run_scenario(local, scenario, thread)
    # the scenario table says how each call ends: check the in-process reference first
    assert [
        c["outcome"] if isinstance(c["outcome"], str) else c["outcome"][0]
        for c in expected["calls"]
    ] == [want for _, want in scenario.calls]

    remote = run_scenario(celery_stack.graph(f"parity-{name}"), scenario, thread)
    # (and it really ran on the worker)
    first = celery_stack.saver.list(thread)[-1]
    task = celery_stack.app.AsyncResult(
        celery_task_id(first.run_id, first.checkpoint_id, first.tasks[0].id)
    )
    wait_until(lambda: task.state == "SUCCESS", 10, 0.02, "the first node task")
    assert task.name == f"langgraph_celery.node.parity-{name}.{first.tasks[0].node}"
    assert task.worker.startswith("main-")

    assert remote["calls"] == expected["calls"]
    assert remote["state"] == expected["state"]
    assert len(remote["history"]) == len(expected["history"])
    assert remote["history"] == expected["history"]


def test_a_command_nodes_updates_stream_alike(celery_stack: CeleryStack, thread: str) -> None:
    """A command node's streamed update is its Command's update (where it goes is carried with
    it, never shown), in process and on workers."""
    scenario = SCENARIOS["command_nodes"]
    local = scenario.build().compile(CompileConfig(checkpoint_saver=MemorySaver()))
    config = RunnableConfig(thread_id=thread, stream_mode=StreamMode.UPDATES)
    graph_input = scenario.calls[0][0]

    def updates(graph: CompiledGraph) -> list[str]:
        return sorted(repr((o.node, o.update)) for o in graph.stream(graph_input, config))

    expected = updates(local)
    assert repr(("triage", {"log": ["triage"], "round": 1})) in expected
    assert not any("__goto__" in line for line in expected)
    assert updates(celery_stack.graph("parity-command_nodes")) == expected
