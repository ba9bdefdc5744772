"""SPEC §6/§8: a node's RetryPolicy becomes Celery retries (RETRY state, backoff), a node that
fails for good fails the run resumably; on Redis and on RabbitMQ as broker."""

from __future__ import annotations

from typing import Any

import pytest

from celery_support import CeleryStack, wait_until
from langgraph_celery import GraphInput, NodeError, RunnableConfig
from langgraph_celery.worker.names import celery_task_id


@pytest.fixture(scope="module", params=["redis", "amqp"])
def broker_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def flaky_task_id(stack: CeleryStack, thread: str) -> str:
    """The Celery task id of the latest dispatch of node ``flaky`` on ``thread``."""
    for checkpoint in stack.saver.list(thread):
        if checkpoint.next == ("flaky",):
            return celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, "flaky")
    raise AssertionError(f"thread {thread} never dispatched node flaky")


def retry_lines(stack: CeleryStack, task_id: str) -> list[str]:
    return [
        line for line in stack.worker_logs().splitlines() if f"[{task_id}] retry: Retry in" in line
    ]


def test_transient_failures_are_retried_by_celery(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("flaky")
    config = RunnableConfig(thread_id=thread)
    state = graph.invoke({"thread": thread, "fail_times": 2}, config)

    assert state.data["log"] == ["a", "flaky", "b"]  # the update once, after 3 attempts
    assert int(redis_client.get(f"attempts:{thread}")) == 3
    assert len(graph.get_state_history(config)) == 4  # failed attempts left no checkpoint
    task_id = flaky_task_id(celery_stack, thread)
    # the task went through RETRY twice, with the policy's backoff (0.05 s, then 0.1 s)
    lines = retry_lines(celery_stack, task_id)
    assert len(lines) == 2, celery_stack.worker_logs()[-3000:]
    assert "Retry in 0.05s" in lines[0] and "Transient('attempt 1 failed')" in lines[0]
    assert "Retry in 0.1s" in lines[1] and "Transient('attempt 2 failed')" in lines[1]
    result = celery_stack.app.AsyncResult(task_id)
    wait_until(lambda: result.state == "SUCCESS", 10, 0.02, "the flaky task")
    assert result.retries == 2


def test_exhausted_retries_fail_the_run_and_a_resume_runs_the_step_again(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("flaky")
    config = RunnableConfig(thread_id=thread)
    with pytest.raises(NodeError) as caught:
        graph.invoke({"thread": thread, "fail_times": 100}, config)
    assert caught.value.node_id == "flaky"
    assert caught.value.error_type == "Transient"
    assert "attempt 3 failed" in str(caught.value)
    assert int(redis_client.get(f"attempts:{thread}")) == 3  # max_attempts counts the first
    assert len(retry_lines(celery_stack, flaky_task_id(celery_stack, thread))) == 2
    snapshot = graph.get_state(config)
    assert snapshot.next == ("flaky",)
    assert snapshot.state.data["log"] == ["a"]

    # still broken: resuming fails again the same way
    with pytest.raises(NodeError, match="attempt 6 failed"):
        graph.invoke(GraphInput.resume(), config)

    # fix the cause, resume: the failed step runs again and the run completes
    redis_client.set(f"fixed:{thread}", 1)
    state = graph.invoke(GraphInput.resume(), config)
    assert state.data["log"] == ["a", "flaky", "b"]
    assert int(redis_client.get(f"attempts:{thread}")) == 7
    assert graph.get_state(config).next == ()
