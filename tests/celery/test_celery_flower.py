"""SPEC §8: node tasks are visible in Flower, named after their graph and node, with the
envelope (thread, run, step) as arguments."""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from celery_support import CeleryStack, free_port, http_get_json, start_flower, wait_until
from langgraph_celery import RunnableConfig
from langgraph_celery.worker.names import celery_task_id

AUTH = ("user", "pass")


@pytest.fixture(scope="module")
def main_worker_options() -> dict[str, Any]:
    return {"events": True}


@pytest.fixture(scope="module")
def flower(celery_stack: CeleryStack) -> Iterator[str]:
    """Flower on the stack's broker; its base URL once it sees the (events-enabled) worker."""
    port = free_port()
    process = start_flower(celery_stack.settings, celery_stack.log_dir, port, ":".join(AUTH))
    celery_stack.others.append(process)
    base = f"http://127.0.0.1:{port}"
    # Flower captures events: wait until the worker's heartbeats reach it
    wait_until(
        lambda: any(http_get_json(f"{base}/api/workers?status=1", AUTH).values()),
        30,
        0.2,
        "Flower to see the worker online",
    )
    yield base


def test_flower_requires_its_credentials(flower: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        http_get_json(f"{flower}/api/tasks")
    assert caught.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as caught:
        http_get_json(f"{flower}/api/tasks", ("user", "wrong"))
    assert caught.value.code == 401


def test_node_tasks_show_in_flower_with_graph_node_and_envelope(
    celery_stack: CeleryStack, flower: str, thread: str
) -> None:
    graph = celery_stack.graph("parity-fanout_join")
    state = graph.invoke({"topic": "flower"}, RunnableConfig(thread_id=thread))
    assert state.data["log"] == ["a", "b", "c", "d"]
    run_id = celery_stack.saver.get(thread).run_id

    def tasks_of_run() -> dict[str, Any]:
        tasks = http_get_json(f"{flower}/api/tasks", AUTH)
        mine = {tid: t for tid, t in tasks.items() if run_id in tid}
        done = [t for t in mine.values() if t.get("state") == "SUCCESS"]
        return mine if len(done) == 4 else {}

    tasks = wait_until(tasks_of_run, 30, 0.2, "the run's node tasks in Flower")
    by_node = {task["name"].rsplit(".", 1)[1]: task for task in tasks.values()}
    assert sorted(by_node) == ["a", "b", "c", "d"]
    for node, task in by_node.items():
        assert task["name"] == f"langgraph_celery.node.parity-fanout_join.{node}"
        # Flower shows the arguments as the executor summarizes them (kwargsrepr)
        checkpoint = celery_stack.saver.get(thread, task["uuid"].split(":")[2])
        assert task["kwargs"] == (
            f"{{graph=parity-fanout_join node={node} thread={thread} run={run_id} "
            f"step={checkpoint.step} checkpoint={checkpoint.checkpoint_id}}}"
        )
        assert task["worker"].startswith("main-")
    # the task types Flower has seen include every node of the graph
    types = http_get_json(f"{flower}/api/task/types", AUTH)["task-types"]
    for node in "abcd":
        assert f"langgraph_celery.node.parity-fanout_join.{node}" in types


def test_a_retried_node_shows_its_retries_in_flower(
    celery_stack: CeleryStack, flower: str, thread: str
) -> None:
    graph = celery_stack.graph("flaky")
    config = RunnableConfig(thread_id=thread)
    assert graph.invoke({"thread": thread, "fail_times": 1}, config).data["log"][-1] == "b"
    checkpoint = next(c for c in celery_stack.saver.list(thread) if c.next == ("flaky",))
    task_id = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, "flaky")

    def info() -> dict[str, Any]:
        try:
            task = http_get_json(f"{flower}/api/task/info/{quote(task_id)}", AUTH)
        except urllib.error.HTTPError:
            return {}
        return task if task.get("state") == "SUCCESS" else {}

    task = wait_until(info, 30, 0.2, "the flaky task in Flower")
    assert task["name"] == "langgraph_celery.node.flaky.flaky"
    assert task["retried"] is not None  # Flower saw the task-retried event (state RETRY)
    assert task["retries"] == 1


def test_a_child_runs_node_tasks_show_the_parents_thread_and_the_subgraph_path(
    celery_stack: CeleryStack, flower: str, thread: str
) -> None:
    """A compiled subgraph's child run: its node tasks show, in Flower, the subgraph's graph
    (named after its path), the child thread, the parent's thread and the subgraph's path."""
    graph = celery_stack.graph("sub-nested")
    graph.invoke({"thread": thread}, RunnableConfig(thread_id=thread), timeout=60)
    inner = f"{thread}/subgraph1/subgraph2"
    foo2 = next(c for c in celery_stack.saver.list(inner) if c.next == ("foo2",))
    task_id = celery_task_id(foo2.run_id, foo2.checkpoint_id, "foo2")

    def shown() -> dict[str, Any]:
        task: dict[str, Any] = http_get_json(f"{flower}/api/task/info/{quote(task_id)}", AUTH)
        return task if task.get("state") == "SUCCESS" else {}

    task = wait_until(shown, 30, 0.2, "the child's node task in Flower")
    assert task["name"] == "langgraph_celery.node.sub-nested/subgraph1/subgraph2.foo2"
    assert task["kwargs"] == (
        f"{{graph=sub-nested/subgraph1/subgraph2 node=foo2 thread={inner} run={foo2.run_id} "
        f"step={foo2.step} checkpoint={foo2.checkpoint_id} "
        f"parent_thread={thread}/subgraph1 subgraph=sub-nested/subgraph1/subgraph2}}"
    )
