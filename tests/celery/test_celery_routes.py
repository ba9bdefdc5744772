"""SPEC §8: ``routes={"node": "queue"}`` sends a node's tasks to a queue served by its own
workers."""

from __future__ import annotations

from celery_support import CeleryStack, wait_until
from langgraph_celery import RunnableConfig
from langgraph_celery.worker.names import celery_task_id


def test_a_routed_node_runs_only_on_the_workers_of_its_queue(
    celery_stack: CeleryStack, thread: str
) -> None:
    special = celery_stack.worker("special", queues=[celery_stack.special_queue])
    graph = celery_stack.graph("where")
    config = RunnableConfig(thread_id=thread)

    for round_ in range(3):
        state = graph.invoke({"round": round_}, config)
    ran_on = state.data["ran_on"]
    assert ran_on == [["a", "main"], ["n", "special"], ["b", "main"]] * 3

    # the result backend and the worker logs agree
    dispatched = [
        (checkpoint, task)
        for checkpoint in celery_stack.saver.list(thread)
        for task in checkpoint.tasks
    ]
    assert sorted(task.node for _, task in dispatched) == sorted(["a", "b", "n"] * 3)
    for checkpoint, task in dispatched:
        task_id = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, task.id)
        result = celery_stack.app.AsyncResult(task_id)
        wait_until(lambda r=result: r.state == "SUCCESS", 10, 0.02, f"task {task_id}")
        expected = "special-" if task.node == "n" else "main-"
        assert result.worker.startswith(expected), (task.node, result.worker)
        assert result.queue == (
            celery_stack.special_queue if task.node == "n" else celery_stack.queue
        )
        main_log, special_log = celery_stack.workers["main"].log(), special.log()
        here, there = (special_log, main_log) if task.node == "n" else (main_log, special_log)
        assert f"[{task_id}] received" in here
        assert f"[{task_id}] received" not in there
    assert "langgraph_celery.node.where.n[" not in main_log
    assert "langgraph_celery.node.where.a[" not in special_log
