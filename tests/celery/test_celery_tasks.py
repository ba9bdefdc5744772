"""SPEC §8: what a node task looks like (name, arguments, result) and exactly-once updates
whatever the broker redelivers."""

from __future__ import annotations

from typing import Any

from celery_support import CeleryStack, wait_until
from langgraph_celery import RunnableConfig
from langgraph_celery.checkpoint import Checkpoint
from langgraph_celery.worker.names import celery_task_id


def node_tasks(stack: CeleryStack, thread: str) -> list[tuple[Checkpoint, str, Any]]:
    """(checkpoint, node, AsyncResult) of every node task the thread's checkpoints dispatched,
    oldest first, once each has ended."""
    found = []
    for checkpoint in reversed(stack.saver.list(thread)):
        for task in checkpoint.tasks:
            task_id = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, task.id)
            result = stack.app.AsyncResult(task_id)
            wait_until(lambda r=result: r.state == "SUCCESS", 10, 0.02, f"task {task_id}")
            found.append((checkpoint, task.node, result))
    return found


def succeeded(stack: CeleryStack, task_id: str) -> int:
    return stack.worker_logs().count(f"[{task_id}] succeeded")


def test_task_names_show_graph_and_node_and_arguments_thread_run_step(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("parity-fanout_join")
    final = graph.invoke({"topic": "t"}, RunnableConfig(thread_id=thread))
    assert final.data["log"] == ["a", "b", "c", "d"]

    tasks = node_tasks(celery_stack, thread)
    assert sorted(node for _, node, _ in tasks) == ["a", "b", "c", "d"]
    run_ids = {checkpoint.run_id for checkpoint, _, _ in tasks}
    assert len(run_ids) == 1
    for checkpoint, node, result in tasks:
        assert result.name == f"langgraph_celery.node.parity-fanout_join.{node}"
        kwargs = result.kwargs
        assert kwargs["graph_id"] == "parity-fanout_join"
        assert kwargs["node"] == node
        assert kwargs["thread_id"] == thread
        assert kwargs["run_id"] == checkpoint.run_id
        assert kwargs["step"] == checkpoint.step
        assert kwargs["checkpoint_id"] == checkpoint.checkpoint_id
        assert result.args == []
        assert result.worker.startswith("main-")
        # the worker log names the task too
        assert f"langgraph_celery.node.parity-fanout_join.{node}[{result.id}] received" in (
            celery_stack.worker_logs()
        )

    # the step of b and c is merged by exactly one of them: its result carries the reduced state
    by_step: dict[int, list[dict[str, Any]]] = {}
    for checkpoint, _, result in tasks:
        by_step.setdefault(checkpoint.step, []).append(result.result)
    assert [len(results) for _, results in sorted(by_step.items())] == [1, 2, 1]
    for results in by_step.values():
        merged = [r for r in results if r["status"] == "merged"]
        assert len(merged) == 1
    last = by_step[max(by_step)][0]
    assert last["state"] == dict(final.data)
    assert last["next"] == []


def test_redelivered_node_messages_apply_each_update_once(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    state = graph.invoke({"thread": thread}, config)
    assert state.data["log"] == ["a", "b", "c"]
    history = [s.config.checkpoint_id for s in graph.get_state_history(config)]
    tasks = node_tasks(celery_stack, thread)
    assert [node for _, node, _ in tasks] == ["a", "b", "c"]

    # the broker delivers every message of the run once more (same task id, same arguments)
    for _, _, result in tasks:
        assert succeeded(celery_stack, result.id) == 1
        celery_stack.app.send_task(result.name, kwargs=result.kwargs, task_id=result.id)
    for _, _, result in tasks:
        wait_until(lambda r=result: succeeded(celery_stack, r.id) == 2, 10, 0.05, "redelivery")
    celery_stack.wait_until_quiet()  # and whatever the duplicates sent has run

    assert graph.get_state(config).state.data == state.data
    assert [s.config.checkpoint_id for s in graph.get_state_history(config)] == history
    # a redelivery of a step already committed is recognised before the node runs again
    assert all(int(redis_client.get(f"calls:{thread}:{n}")) == 1 for n in "abc")
    # (the result backend keeps the first SUCCESS; the worker log shows the duplicate's result)
    for _, _, result in tasks:
        assert f"[{result.id}] succeeded in " in celery_stack.worker_logs()
        duplicate = [
            line
            for line in celery_stack.worker_logs().splitlines()
            if f"[{result.id}] succeeded" in line and "'duplicate'" in line
        ]
        assert len(duplicate) == 1


def test_duplicates_while_the_run_runs_apply_each_update_once(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    handle = graph.start({"thread": thread, "sleep_b": 0.8}, config)
    # b is running: deliver a's message again, and b's (a second b runs beside the first)
    wait_until(lambda: redis_client.get(f"started:{thread}:b"), 10, 0.01, "node b to start")
    checkpoints = list(reversed(celery_stack.saver.list(thread)))
    assert [c.next for c in checkpoints] == [("a",), ("b",)]
    a_checkpoint, b_checkpoint = checkpoints
    a_id = celery_task_id(a_checkpoint.run_id, a_checkpoint.checkpoint_id, "a")
    a_result = celery_stack.app.AsyncResult(a_id)
    wait_until(lambda: a_result.state == "SUCCESS", 10, 0.01, "a's task")
    celery_stack.app.send_task(a_result.name, kwargs=a_result.kwargs, task_id=a_result.id)
    b_id = celery_task_id(b_checkpoint.run_id, b_checkpoint.checkpoint_id, "b")
    b_kwargs = {**a_result.kwargs, "node": "b", "task_id": "b"}
    b_kwargs.update(step=b_checkpoint.step, checkpoint_id=b_checkpoint.checkpoint_id)
    celery_stack.app.send_task(a_result.name.replace(".a", ".b"), kwargs=b_kwargs, task_id=b_id)

    result = handle.wait(timeout=20)
    wait_until(lambda: succeeded(celery_stack, a_result.id) == 2, 10, 0.05, "a's duplicate")
    wait_until(lambda: succeeded(celery_stack, b_id) == 2, 10, 0.05, "b's duplicate")
    celery_stack.wait_until_quiet()  # whatever the duplicates sent has run by now

    assert result.as_state_data()["log"] == ["a", "b", "c"]
    assert graph.get_state(config).state.data["log"] == ["a", "b", "c"]
    assert len(graph.get_state_history(config)) == 4
    assert a_checkpoint.step == -1
    assert int(redis_client.get(f"calls:{thread}:a")) in (1, 2)
    # the second b ran (its first was still running), but its update was not applied twice
    assert int(redis_client.get(f"started:{thread}:b")) == 2
    assert int(redis_client.get(f"calls:{thread}:c")) == 1
