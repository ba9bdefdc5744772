"""SPEC §9 on Celery: a merged subgraph's nodes are ordinary node tasks; an interruption before
one of its inner nodes parks the run, and the resume continues inside the subgraph, with the
same steps, states and checkpoints as in process.

The graph is ``apps/lgc_graphs.py``'s ``merged_subgraph`` (also a parity scenario, run on
RabbitMQ too by ``test_celery_parity.py``): a conditional entry (a ``-__START__`` bridge), a
nested merged subgraph, a child's before-call hook and a conditional exit (a ``-__END__``
bridge), parked before ``review-human``.
"""

from __future__ import annotations

from typing import Any

from lgc_graphs import SCENARIOS

from celery_support import CeleryStack, wait_until
from langgraph_celery import CompileConfig, CompiledGraph, GraphInput, RunnableConfig
from langgraph_celery.checkpoint import MemorySaver
from langgraph_celery.worker.names import celery_task_id

GRAPH_ID = "parity-merged_subgraph"


def run(graph: CompiledGraph, thread: str) -> dict[str, Any]:
    config = RunnableConfig(thread_id=thread)
    first = [output.node for output in graph.stream({"topic": "x"}, config)]
    parked = graph.get_state(config)
    resume = GraphInput.resume({"approved": "yes"})
    second = [output.node for output in graph.stream(resume, config)]
    history = graph.get_state_history(config)
    return {
        "first": first,
        "parked": (parked.node, parked.next, dict(parked.state.data)),
        "second": second,
        "state": dict(graph.get_state(config).state.data),
        "history": [(s.step, s.node, s.next, dict(s.state.data)) for s in history],
    }


def test_a_merged_subgraph_parks_at_an_inner_node_and_resumes_on_workers(
    celery_stack: CeleryStack, thread: str
) -> None:
    scenario = SCENARIOS["merged_subgraph"]
    local = scenario.build().compile(
        CompileConfig(checkpoint_saver=MemorySaver(), **scenario.compile)
    )
    expected = run(local, f"{thread}-local")
    assert expected["first"][-1] == "review-notes-note"
    assert expected["parked"][1] == ("review-human",)
    assert expected["second"][0] == "review-human"

    remote = celery_stack.graph(GRAPH_ID)
    got = run(remote, thread)
    assert got == expected

    # each merged node, bridges included, ran as its own node task, named after its merged id
    # (a parked step's task is dispatched from the resume's checkpoint: look at every one)
    results: dict[str, list[Any]] = {}
    for checkpoint in celery_stack.saver.list(thread):
        for task in checkpoint.tasks:
            task_id = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, task.id)
            results.setdefault(task.node, []).append(celery_stack.app.AsyncResult(task_id))
    for node in ("review-__START__", "review-check", "review-notes-note", "review-human"):

        def done(node: str = node) -> bool:
            return any(result.state == "SUCCESS" for result in results[node])

        wait_until(done, 10, 0.02, f"the task of {node}")
        result = next(result for result in results[node] if result.state == "SUCCESS")
        assert result.name == f"langgraph_celery.node.{GRAPH_ID}.{node}"
        assert result.worker.startswith("main-")
