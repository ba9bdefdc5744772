"""SPEC §8: only JSON travels on the broker; a message naming an unknown graph or node, or not
shaped like an envelope, is rejected and logged, never executed; and what compile refuses."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from lgc_graphs import chain

from celery_support import CeleryStack, wait_until
from langgraph_celery import CompileConfig, GraphDefinitionError, GraphInput, RunnableConfig
from langgraph_celery.celery import CeleryExecutor, RunHandle
from langgraph_celery.checkpoint import Checkpoint, MemorySaver, SqlSaver
from langgraph_celery.worker.names import RESUME_TASK, celery_task_id, node_task_name
from services import REDIS_TEST_DB

CHAIN = "parity-chain"


class Evil:
    """Unpickling this creates a directory: proof that a pickle was (not) loaded."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (self.path,))


def records(stack: CeleryStack, text: str, level: str) -> list[str]:
    """The worker's log records at ``level`` that contain ``text``."""
    return [
        line
        for line in stack.worker_logs().splitlines()
        if line.startswith("[") and f": {level}/" in line and text in line
    ]


def logged_once(stack: CeleryStack, text: str, level: str = "ERROR") -> None:
    """``text`` is logged once at ``level`` (Celery may add its own WARNING for a Reject), and
    the message is gone: once nothing is left on the broker or the worker, a message put back
    on the queue would have run, and logged, again."""
    wait_until(lambda: records(stack, text, level), 15, 0.05, f"{text!r} in the worker log")
    stack.wait_until_quiet()
    assert len(records(stack, text, level)) == 1, stack.worker_logs()[-3000:]


def publish_pickle(stack: CeleryStack, name: str, body: Any) -> None:
    """A task message serialized with pickle, published with kombu on the default queue."""
    task_id = str(uuid.uuid4())
    queue = stack.app.amqp.queues[stack.queue]
    with stack.app.producer_or_acquire() as producer:
        producer.publish(
            body,
            exchange=queue.exchange,
            routing_key=queue.routing_key,
            declare=[queue],
            serializer="pickle",
            headers={"lang": "py", "task": name, "id": task_id, "root_id": task_id},
        )


def test_bad_messages_are_rejected_logged_and_never_executed(
    celery_stack: CeleryStack, thread: str, redis_client: Any, tmp_path: Path
) -> None:
    app = celery_stack.app
    graph = celery_stack.graph(CHAIN)
    config = RunnableConfig(thread_id=thread)
    state = graph.invoke({"topic": "t"}, config)
    history = [
        (s.config.checkpoint_id, dict(s.state.data)) for s in graph.get_state_history(config)
    ]
    first = celery_stack.saver.list(thread)[-1]
    a_task = app.AsyncResult(celery_task_id(first.run_id, first.checkpoint_id, "a"))
    wait_until(lambda: a_task.state == "SUCCESS", 10, 0.02, "a's task")
    good: dict[str, Any] = dict(a_task.kwargs)  # a real envelope, as the client sent it
    a_name = node_task_name(CHAIN, "a")

    # a graph no worker knows (a valid-looking task name)
    app.send_task(node_task_name("nosuch", "a"), kwargs={**good, "graph_id": "nosuch"})
    logged_once(celery_stack, "Received unregistered task of type 'langgraph_celery.node.nosuch.a'")
    # a registered task whose message names another node, or another graph
    app.send_task(node_task_name(CHAIN, "b"), kwargs=good)
    logged_once(
        celery_stack,
        f"rejected message for {node_task_name(CHAIN, 'b')}: it names graph '{CHAIN}' node 'a'",
    )
    app.send_task(a_name, kwargs={**good, "graph_id": "parity-command"})
    logged_once(
        celery_stack, f"rejected message for {a_name}: it names graph 'parity-command' node 'a'"
    )
    # a task id the checkpoint does not have, and a checkpoint that does not exist
    app.send_task(a_name, kwargs={**good, "task_id": "zzz"})
    logged_once(
        celery_stack, f"checkpoint {first.checkpoint_id} of thread '{thread}' has no task 'zzz'"
    )
    app.send_task(a_name, kwargs={**good, "checkpoint_id": "nope"})
    logged_once(celery_stack, f"dropping task a of thread '{thread}': checkpoint nope", "WARNING")
    # malformed envelopes: missing fields, wrong types, unknown fields, not a mapping at all
    app.send_task(a_name, kwargs={"graph_id": CHAIN, "node": "a"})
    logged_once(celery_stack, f"rejected malformed message for {a_name}: field 'thread_id'")
    app.send_task(a_name, kwargs={**good, "step": "0"})
    logged_once(celery_stack, "field 'step' must be an integer, got '0'")
    app.send_task(a_name, kwargs={**good, "thread_id": 42})
    logged_once(celery_stack, "field 'thread_id' must be a non-empty string, got 42")
    app.send_task(a_name, kwargs={**good, "config": {"recursion_limit": 1}})
    logged_once(celery_stack, "envelope has unknown fields ['config']")
    app.send_task(a_name, kwargs={**good, "evil": 1})
    logged_once(celery_stack, "envelope has unknown fields ['evil']")
    app.send_task(RESUME_TASK, kwargs={**good, "graph_id": "nosuch", "node": None})
    logged_once(celery_stack, "rejected resume: unknown graph 'nosuch'")
    # a pickle: refused before anything is unpickled
    marker = tmp_path / "unpickled"
    publish_pickle(celery_stack, a_name, ((), {"x": Evil(marker)}, {}))
    logged_once(
        celery_stack,
        "Received invalid task message: Refusing to deserialize untrusted content of type pickle",
    )
    assert str(marker) in celery_stack.worker_logs()  # (the raw body is shown, as bytes)
    assert not marker.exists()

    # the worker keeps serving: a normal run completes
    other = RunnableConfig(thread_id=f"{thread}-after")
    assert graph.invoke({"topic": "u"}, other).data["log"] == ["a", "b", "c"]
    assert celery_stack.workers["main"].alive()
    # no run's state changed, nothing was requeued
    after = [(s.config.checkpoint_id, dict(s.state.data)) for s in graph.get_state_history(config)]
    assert after == history
    assert graph.get_state(config).state.data == state.data
    assert redis_client.llen(celery_stack.queue) == 0
    # nothing was executed and crashed, nothing brought the worker down
    assert "raised unexpected" not in celery_stack.worker_logs()
    assert ": CRITICAL/" not in celery_stack.worker_logs()


def held_in_a(
    stack: CeleryStack, thread: str, redis_client: Any
) -> tuple[RunHandle, Checkpoint, dict[str, Any]]:
    """A run of ``slow`` on ``thread``, held in its node ``a`` (until the test deletes
    ``hold:<thread>:a``): its handle, the step's checkpoint and ``a``'s message."""
    redis_client.set(f"hold:{thread}:a", 1)
    handle = stack.graph("slow").start({"thread": thread}, RunnableConfig(thread_id=thread))
    wait_until(lambda: redis_client.get(f"started:{thread}:a"), 20, 0.02, "a to start")
    checkpoint = stack.saver.get(thread)
    runtime = stack.executor.runtime("slow")
    assert checkpoint is not None and runtime is not None
    return handle, checkpoint, runtime.envelope(checkpoint, checkpoint.tasks[0]).to_message()


def test_a_node_message_sets_neither_the_nodes_time_limit_nor_its_attempts(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """SPEC §8: a worker takes a node's limits from its task (the node's timeout, none here),
    never from the message.  A copy of a running step's message whose Celery ``timelimit``
    would stop the node after 1 s (failing the run past its "hard time limit"), or whose
    ``retries`` is negative (retries with no delay and no end), is refused and logged by the
    worker's guard; the run completes, its node started once."""
    handle, _, envelope = held_in_a(celery_stack, thread, redis_client)
    name = node_task_name("slow", "a")
    refusals = (
        ({"time_limit": 1, "soft_time_limit": 0.5}, "timelimit [1, 0.5] is not its task's own"),
        ({"soft_time_limit": 3600}, "timelimit [None, 3600] is not its task's own [None, None]"),
        ({"retries": -1}, "task message retries must be a count from 0, got -1"),
    )
    for options, reason in refusals:
        celery_stack.app.send_task(name, kwargs=envelope, **options)
        wait_until(lambda r=reason: records(celery_stack, r, "ERROR"), 15, 0.05, reason)
    redis_client.delete(f"hold:{thread}:a")
    assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b", "c"]
    for _, reason in refusals:
        logged_once(celery_stack, reason)
    assert int(redis_client.get(f"started:{thread}:a")) == 1
    assert handle.status() == "completed"


def test_an_expired_copy_of_a_running_steps_message_is_refused_and_cancels_nothing(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """Celery discards an expired message as revoked and keeps its id among the worker's
    revoked ids: an expired copy of a running step's message under the step's own task id
    would have the step's next delivery (a retry after its countdown, a redelivery: a copy
    here) discarded as revoked, cancelling the run.  The guard refuses the expired copy; the
    next delivery runs (its update lands once) and the run completes."""
    handle, checkpoint, envelope = held_in_a(celery_stack, thread, redis_client)
    name = node_task_name("slow", "a")
    own = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, "a")
    past = datetime.now(UTC) - timedelta(hours=1)
    celery_stack.app.send_task(name, kwargs=envelope, task_id=own, expires=past)
    reason = "node task message has an expires: a node task never expires"
    wait_until(lambda: records(celery_stack, reason, "ERROR"), 15, 0.05, reason)
    celery_stack.app.send_task(name, kwargs=envelope, task_id=own)  # the step's next delivery
    wait_until(lambda: int(redis_client.get(f"started:{thread}:a") or 0) == 2, 15, 0.02, "a again")
    redis_client.delete(f"hold:{thread}:a")
    assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b", "c"]
    assert handle.status() == "completed"
    assert "Discarding revoked task" not in celery_stack.worker_logs()


def test_a_copy_of_the_message_of_the_node_that_parked_its_step_runs_nothing(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """In a step of two nodes, ``b`` parks the run while ``c`` records its update.  A copy of
    ``b``'s message sent while the run is parked (with what ``b`` decides on changed meanwhile)
    does not run ``b`` nor record an update for it, which the resume would have kept without
    running ``b``: ``b`` runs again only when the resume asks."""
    handle = celery_stack.graph("outside_gate").start(
        {"thread": thread}, RunnableConfig(thread_id=thread)
    )
    assert handle.wait(timeout=30).is_interruption_metadata()
    checkpoint = celery_stack.saver.get(thread)
    runtime = celery_stack.executor.runtime("outside_gate")
    assert checkpoint is not None and runtime is not None
    task_b = next(task for task in checkpoint.tasks if task.node == "b")
    redis_client.set(f"allow:{thread}", 1)  # b would now go through
    envelope = runtime.envelope(checkpoint, task_b).to_message()
    reply = celery_stack.app.send_task(node_task_name("outside_gate", "b"), kwargs=envelope)
    assert reply.get(timeout=30)["status"] == "stopped"
    writes = celery_stack.saver.get_writes(thread, checkpoint.checkpoint_id)
    assert task_b.id not in {write.task_id for write in writes}
    assert int(redis_client.get(f"calls:{thread}:b")) == 1
    resumed = celery_stack.graph("outside_gate").start(
        GraphInput.resume({"approved": True}), RunnableConfig(thread_id=thread)
    )
    final = resumed.wait(timeout=30).as_state_data()
    assert sorted(final["log"]) == ["a", "b", "c", "d"]
    assert int(redis_client.get(f"calls:{thread}:b")) == 2  # the first call, and the resume's


def test_compile_refuses_a_celery_graph_without_id_or_with_a_process_local_saver(
    tmp_path: Path,
) -> None:
    app = Celery(
        "refuse",
        broker=f"redis://127.0.0.1:6379/{REDIS_TEST_DB}",
        backend=f"redis://127.0.0.1:6379/{REDIS_TEST_DB}",
    )
    executor = CeleryExecutor(app)
    saver = SqlSaver(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        with pytest.raises(GraphDefinitionError, match="graph_id"):
            chain().compile(CompileConfig(checkpoint_saver=saver, executor=executor))
        with pytest.raises(GraphDefinitionError, match="MemorySaver"):
            chain().compile(
                CompileConfig(checkpoint_saver=MemorySaver(), graph_id="g", executor=executor)
            )
        with pytest.raises(GraphDefinitionError, match="checkpoint saver"):
            chain().compile(CompileConfig(graph_id="g", executor=executor))
        # a route key for graph g naming a node g lacks (a plain key may name another
        # graph's node: test_celery_routes.py checks how its typos are reported)
        with pytest.raises(GraphDefinitionError, match="'g:nope' names node 'nope' of graph 'g'"):
            chain().compile(
                CompileConfig(
                    checkpoint_saver=saver,
                    graph_id="g",
                    executor=CeleryExecutor(app, routes={"g:nope": "q"}),
                )
            )
        # nothing of the refused graphs was registered for workers
        assert node_task_name("g", "a") not in app.tasks
    finally:
        saver.dispose()


def test_two_apps_in_one_process_keep_their_own_tasks(tmp_path: Path) -> None:
    """A worker of one app must never run another app's graphs (or with its saver)."""
    first = Celery("first", broker=f"redis://127.0.0.1:6379/{REDIS_TEST_DB}")
    saver = SqlSaver(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        chain().compile(
            CompileConfig(
                checkpoint_saver=saver, graph_id="only-first", executor=CeleryExecutor(first)
            )
        )
        assert node_task_name("only-first", "a") in first.tasks
        second = Celery("second", broker=f"redis://127.0.0.1:6379/{REDIS_TEST_DB}")
        CeleryExecutor(second)
        assert node_task_name("only-first", "a") not in second.tasks
        assert RESUME_TASK in second.tasks
        assert second.tasks[RESUME_TASK] is not first.tasks[RESUME_TASK]
    finally:
        saver.dispose()
