"""The run loop on Celery workers (a Redis and a RabbitMQ broker, PostgreSQL checkpoints): every
state change of a thread goes through the executor and is refused while a run of the thread is
running (no node's update is lost or overwritten); a node that fails for good is a failed Celery
task; and every run ends (completed, parked, failed or cancelled): refused updates, dying and
overrunning nodes, revoked tasks and cancels racing completion."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from celery_support import CeleryStack, start_worker, wait_until
from langgraph_celery import (
    END,
    START,
    CompileConfig,
    GraphInput,
    GraphStateError,
    InvalidUpdateError,
    NodeError,
    RunnableConfig,
    SerializationError,
    StateGraph,
)
from langgraph_celery.celery import RunHandle
from langgraph_celery.checkpoint import RunStatus
from langgraph_celery.worker.envelope import TaskEnvelope
from langgraph_celery.worker.names import celery_task_id, node_task_name
from loop_check import blocked_callbacks, slow_down


@pytest.fixture(scope="module", params=["redis", "amqp"])
def broker_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def started(redis_client: Any, thread: str, node: str) -> int:
    return int(redis_client.get(f"started:{thread}:{node}") or 0)


def test_update_state_and_fork_while_a_node_runs_are_refused_and_nothing_is_lost(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    handle = graph.start({"thread": thread, "sleep": 1.5}, config)
    first = graph.get_state_history(config)[-1].config
    assert wait_until(lambda: started(redis_client, thread, "a") == 1, 10, 0.01, "node a to start")

    with pytest.raises(GraphStateError, match="busy"):
        graph.update_state(config, {"log": ["edited"]})
    with pytest.raises(GraphStateError, match="busy"):
        graph.update_state(config, {"log": ["edited"]}, as_node="a")
    with pytest.raises(GraphStateError, match="busy"):
        graph.invoke(None, first)  # a fork of the run's first checkpoint

    result = handle.wait(timeout=30)
    assert result.as_state_data()["log"] == ["a", "b", "c"]  # every node's update, once
    history = graph.get_state_history(config)
    assert [s.node_id for s in history] == ["c", "b", "a", "__START__"]
    assert all("edited" not in s.state.data["log"] for s in history)
    assert handle.status() == "completed"

    # once the run has ended, the thread takes updates again
    updated = graph.update_state(config, {"log": ["edited"]})
    assert graph.get_state(updated).state.data["log"] == ["a", "b", "c", "edited"]


def test_update_state_of_a_parked_thread_is_what_the_resume_continues(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("gate")
    config = RunnableConfig(thread_id=thread)
    interruption = graph.invoke_final({"topic": "t"}, config)
    assert interruption is not None and interruption.node_id == "gate"

    # a parked thread takes an update (it claims the parked checkpoint, as a resume would);
    # the update is what the resume continues
    updated = graph.update_state(config, {"approved": True})
    assert graph.get_state(config).config.checkpoint_id == updated.checkpoint_id
    state = graph.invoke(GraphInput.resume(), config)
    assert state.data["approved"] is True
    assert state.data["log"] == ["a", "gate", "b"]


@pytest.mark.parametrize("mode", ["sync", "exit"])
def test_a_node_that_fails_for_good_is_a_failed_celery_task_with_its_traceback(
    celery_stack: CeleryStack, thread: str, redis_client: Any, mode: str
) -> None:
    """Also with "exit", whose carried steps' tasks store no result unless they fail."""
    graph = celery_stack.graph("flaky")
    config = RunnableConfig(thread_id=thread, durability=mode)  # type: ignore[arg-type]
    with pytest.raises(NodeError, match="attempt 3 failed"):
        graph.invoke({"thread": thread, "fail_times": 100}, config)

    failed = celery_stack.saver.get(thread)
    assert failed is not None and failed.next == ("flaky",)
    task_id = celery_task_id(failed.run_id, failed.checkpoint_id, "flaky")
    result = celery_stack.app.AsyncResult(task_id)
    assert wait_until(lambda: result.state == "FAILURE", 10, 0.02, "the task's FAILURE")
    assert isinstance(result.result, NodeError)
    assert (result.result.node_id, result.result.error_type) == ("flaky", "Transient")
    line = f"[{task_id}] raised unexpected: NodeError"
    wait_until(lambda: line in celery_stack.worker_logs(), 10, 0.05, "the failure's log record")
    logs = celery_stack.worker_logs()
    # the node's own traceback: its frame and its exception, as the cause of the NodeError
    assert "in flaky_node" in logs and "Transient: attempt 3 failed" in logs, logs[-3000:]

    # the run stays resumable: fixed, the failed step runs again and the run completes
    redis_client.set(f"fixed:{thread}", 1)
    state = graph.invoke(GraphInput.resume(), config)
    assert state.data["log"] == ["a", "flaky", "b"]


def test_an_interruption_is_not_a_failure(celery_stack: CeleryStack, thread: str) -> None:
    graph = celery_stack.graph("gate")
    config = RunnableConfig(thread_id=thread)
    stream = graph.stream({"topic": "t"}, config)
    list(stream)
    assert stream.result.is_interruption_metadata()
    checkpoint = celery_stack.saver.get(thread)
    assert checkpoint is not None and checkpoint.next == ("gate",)
    task_id = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, "gate")
    result = celery_stack.app.AsyncResult(task_id)
    assert wait_until(lambda: result.state == "SUCCESS", 10, 0.02, "the gate task's result")
    assert result.result["status"] == "interrupted"


def test_a_run_no_worker_serves_times_out_naming_the_run_and_stays_queued(
    celery_stack: CeleryStack, thread: str
) -> None:
    """A graph compiled in this process only: the live workers have not registered its tasks,
    and the client says so (not "is a worker running?" while some are)."""
    graph = (
        StateGraph()
        .add_node("lonely", lambda state: {"done": True})
        .add_edge(START, "lonely")
        .add_edge("lonely", END)
        .compile(
            CompileConfig(
                checkpoint_saver=celery_stack.saver,
                executor=celery_stack.executor,
                graph_id="served-by-nobody",
            )
        )
    )
    config = RunnableConfig(thread_id=thread)
    with pytest.raises(TimeoutError) as caught:
        graph.invoke({"x": 1}, config, timeout=0.5)
    message = str(caught.value)
    run_id = celery_stack.saver.get(thread).run_id
    assert f"run {run_id}" in message
    assert "none has registered graph 'served-by-nobody'" in message, message
    assert "live worker(s) answered" in message
    # the run is not lost: it stays queued, and a handle on it times out the same way
    handle = RunHandle.from_run_id(graph, run_id)
    assert handle.status() == "running"
    with pytest.raises(TimeoutError, match=f"run {run_id}"):
        handle.wait(timeout=0.3)
    assert handle.cancel() is True
    assert handle.status() == "cancelled"


def test_the_async_api_on_celery_never_blocks_the_callers_loop(
    celery_stack: CeleryStack, thread: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The client's calls to the store and the broker run off the caller's event loop (the
    store here is slowed to 150 ms a call in this process; the workers use it at full speed)."""
    graph = celery_stack.graph("gate")
    config = RunnableConfig(thread_id=thread)
    seen: dict[str, Any] = {}
    slow_down(celery_stack.saver, ("get", "get_with_writes", "get_writes", "put_writes", "list"))

    async def main() -> None:
        stream = graph.astream({"topic": "t"}, config)
        seen["outputs"] = [o.node_id async for o in stream]
        updated = await graph.aupdate_state(config, {"approved": True})
        seen["updated"] = updated.checkpoint_id
        final = await graph.ainvoke(GraphInput.resume(), config)
        seen["final"] = final.data["log"]

    try:
        assert blocked_callbacks(caplog, main) == []
    finally:
        for name in ("get", "get_with_writes", "get_writes", "put_writes", "list"):
            vars(celery_stack.saver).pop(name, None)
    assert seen["outputs"] == ["__START__", "a"]
    assert seen["updated"]
    assert seen["final"] == ["a", "gate", "b"]


def test_a_thread_parked_by_one_graph_is_refused_to_another_and_stays_resumable(
    celery_stack: CeleryStack, thread: str
) -> None:
    gate, slow = celery_stack.graph("gate"), celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    interruption = gate.invoke_final({"topic": "t"}, config)
    assert interruption is not None and interruption.node_id == "gate"

    for call in (
        lambda: slow.invoke(GraphInput.resume({"approved": True}), config, timeout=10),
        lambda: slow.invoke({"thread": thread}, config, timeout=10),
        lambda: slow.update_state(config, {"approved": True}),
    ):
        with pytest.raises(GraphStateError) as caught:
            call()
        assert "graph 'gate'" in str(caught.value) and "graph 'slow'" in str(caught.value)
    # nothing was claimed or stored: the owner resumes its thread
    state = gate.invoke(GraphInput.resume({"approved": True}), config, timeout=20)
    assert state.data["log"] == ["a", "gate", "b"]


@pytest.mark.parametrize("durability", ["sync", "exit", "async"])
@pytest.mark.parametrize(
    ("mode", "fan", "then", "error"),
    [
        ("unserializable", False, False, SerializationError),
        ("unserializable", True, False, SerializationError),
        ("unserializable", False, True, SerializationError),
        ("huge_int", False, False, SerializationError),
        ("huge_int", True, False, SerializationError),
        ("huge_int", False, True, SerializationError),
        ("refused", False, False, InvalidUpdateError),
        ("refused", True, False, InvalidUpdateError),
        ("refused", False, True, InvalidUpdateError),
    ],
)
def test_an_update_the_store_or_a_reducer_refuses_fails_the_run_at_once(
    celery_stack: CeleryStack,
    thread: str,
    redis_client: Any,
    mode: str,
    fan: bool,
    then: bool,
    error: type[Exception],
    durability: str,
) -> None:
    """One task or several in the step, the run ending there or going on (with "exit" and
    "async" the next state is then carried in the result backend, which refuses it as the
    store would): the run fails with the error, the node ran once, and nothing is left for
    the reaper to run again."""
    graph = celery_stack.graph("poison")
    config = RunnableConfig(thread_id=thread, durability=durability)
    handle = graph.start({"thread": thread, "mode": mode, "fan": fan, "then": then}, config)
    with pytest.raises(error) as caught:
        handle.wait(timeout=20)
    assert ("no poison here" if mode == "refused" else "'blob'") in str(caught.value)
    assert handle.status() == "failed"
    assert int(redis_client.get(f"calls:{thread}:p")) == 1
    assert redis_client.get(f"calls:{thread}:r") is None
    # the failed step stays for a resume, whose update fixes the cause this time
    assert celery_stack.saver.get(thread).next == (("p", "q") if fan else ("p",))


def test_a_client_value_past_the_int_to_str_limit_is_a_serialization_error(
    celery_stack: CeleryStack, thread: str
) -> None:
    """An input or an update_state the JSON text cannot hold is refused as a value outside the
    allowlist is, before anything is stored: the thread stays usable."""
    graph = celery_stack.graph("poison")
    config = RunnableConfig(thread_id=thread)
    with pytest.raises(SerializationError, match=r"state key 'blob' \(at blob\): an int of more"):
        graph.start({"thread": thread, "blob": 10**5000}, config)
    assert graph.invoke({"thread": thread}, config, timeout=20).data["log"] == ["p"]
    with pytest.raises(SerializationError, match=r"key 'blob' \(at blob\[0\]\): an int of more"):
        graph.update_state(config, {"blob": [10**5000]})
    assert graph.invoke({"thread": thread}, config, timeout=20).data["log"] == ["p", "p"]


def test_a_node_whose_process_dies_every_time_fails_the_run_after_three_deliveries(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("dying")
    config = RunnableConfig(thread_id=thread)
    with pytest.raises(NodeError) as caught:
        graph.invoke({"thread": thread}, config, timeout=60)
    assert caught.value.node_id == "die"
    assert caught.value.error_type == "WorkerLostError"
    assert "died on each of its 3 deliveries" in str(caught.value)
    assert int(redis_client.get(f"calls:{thread}:die")) == 3
    assert RunHandle.from_run_id(graph, celery_stack.saver.get(thread).run_id).status() == "failed"

    # resumable like any failed run: fixed, the step runs again and the run completes
    redis_client.set(f"fixed:{thread}", 1)
    state = graph.invoke(GraphInput.resume(), config, timeout=30)
    assert state.data["log"] == ["a", "die"]


def test_a_node_past_its_time_limit_fails_or_is_retried_when_its_policy_lists_timeouts(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("napping")
    config = RunnableConfig(thread_id=thread)
    # both attempts overrun the 0.5 s soft limit: the node fails with TimeoutError
    with pytest.raises(NodeError) as caught:
        graph.invoke({"thread": thread, "naps": [5, 5]}, config, timeout=30)
    assert caught.value.error_type == "TimeoutError"
    assert "did not finish within its timeout of 0.5 s" in str(caught.value)
    assert int(redis_client.get(f"calls:{thread}:nap")) == 2

    # a second thread: the first attempt overruns, the retry is quick and the run completes
    other = f"{thread}-retried"
    state = graph.invoke(
        {"thread": other, "naps": [5, 0]}, RunnableConfig(thread_id=other), timeout=30
    )
    assert state.data["log"] == ["nap"]
    assert int(redis_client.get(f"calls:{other}:nap")) == 2


def test_a_node_past_the_apps_own_soft_time_limit_fails_with_a_timeout_error(
    celery_stack: CeleryStack, thread: str, redis_client: Any, tmp_path: Path
) -> None:
    """A deployment's Celery ``task_soft_time_limit`` reaches a node that has no timeout of its
    own: past it the node fails with TimeoutError naming that limit, and the run fails at once
    (it is not left running, for the reaper to send the step again and again)."""
    import lgc_app

    queue = f"{celery_stack.queue}-soft"
    settings = {**celery_stack.settings, "LGC_QUEUE": queue, lgc_app.SOFT_TIME_LIMIT: "1"}
    bundle = lgc_app.build(settings)
    worker = start_worker(settings, tmp_path, queues=[queue], worker_name="soft")
    try:
        graph = bundle.graphs["slow"]
        config = RunnableConfig(thread_id=thread)
        with pytest.raises(NodeError) as caught:
            graph.invoke({"thread": thread, "sleep": 5}, config, timeout=30)
        assert caught.value.node_id == "a"
        assert caught.value.error_type == "TimeoutError"
        assert "did not finish within Celery's soft time limit of 1 s" in str(caught.value)
        assert started(redis_client, thread, "a") == 1
        run_id = bundle.saver.get(thread).run_id
        assert RunHandle.from_run_id(graph, run_id).status() == "failed"
    finally:
        worker.kill()
        with bundle.app.connection_for_write() as connection:
            connection.default_channel.queue_delete(queue)
        bundle.close()


def test_a_node_past_its_hard_time_limit_fails_the_run_at_once(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("napping")
    config = RunnableConfig(thread_id=thread)
    with pytest.raises(NodeError) as caught:
        graph.invoke({"thread": thread, "naps": [5], "stubborn": True}, config, timeout=60)
    assert caught.value.error_type == "TimeoutError"
    assert "ran past its hard time limit" in str(caught.value)
    assert int(redis_client.get(f"calls:{thread}:nap")) == 1  # not re-sent, not redelivered
    assert celery_stack.saver.get(thread).next == ("nap",)  # resumable


def test_a_forged_node_message_does_not_unpark_a_thread_edited_with_update_state(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("gate")
    config = RunnableConfig(thread_id=thread)
    assert graph.invoke_final({"topic": "t"}, config) is not None  # parked at gate
    graph.update_state(config, {"approved": True})
    edited = celery_stack.saver.get(thread)
    assert edited is not None and edited.next == ("gate",)

    forged = TaskEnvelope(
        graph_id="gate",
        thread_id=thread,
        run_id=edited.run_id,
        step=edited.step,
        checkpoint_id=edited.checkpoint_id,
        node="gate",
        task_id="gate",
    )
    result = celery_stack.app.send_task(
        node_task_name("gate", "gate"), kwargs=forged.to_message(), task_id=f"forged-{thread}"
    )
    assert result.get(timeout=20)["status"] == "rejected"
    assert celery_stack.saver.get(thread).checkpoint_id == edited.checkpoint_id  # nothing ran
    assert graph.get_state(config).state.data["log"] == ["a"]
    state = graph.invoke(GraphInput.resume(), config, timeout=20)  # the resume still does it
    assert state.data["log"] == ["a", "gate", "b"]


@pytest.mark.parametrize("terminate", [True, False], ids=["terminate", "revoke"])
def test_a_node_task_revoked_from_flower_cancels_its_run_which_stays_resumable(
    celery_stack: CeleryStack, thread: str, redis_client: Any, terminate: bool
) -> None:
    """Flower's "terminate" kills the running node; its "revoke" (no terminate) lets it finish,
    as Celery does, and the run is cancelled all the same: no further step is sent."""
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    handle = graph.start({"thread": thread, "sleep": 3.0 if terminate else 2.0}, config)
    assert wait_until(lambda: started(redis_client, thread, "a") == 1, 10, 0.01, "node a to start")
    first = celery_stack.saver.get(thread)
    assert first is not None
    task_id = celery_task_id(first.run_id, first.checkpoint_id, "a")

    celery_stack.app.control.revoke(task_id, terminate=terminate)
    assert wait_until(lambda: handle.status() == "cancelled", 15, 0.05, "the run to be cancelled")
    with pytest.raises(GraphStateError, match="cancelled"):
        handle.wait(timeout=5)
    if terminate:
        assert int(redis_client.get(f"calls:{thread}:a") or 0) == 0  # a was killed mid-node
    else:
        calls = lambda: int(redis_client.get(f"calls:{thread}:a") or 0)  # noqa: E731
        assert wait_until(lambda: calls() == 1, 15, 0.05, "a to finish")
        time.sleep(1.0)  # (time for a next step, were one sent)
        assert started(redis_client, thread, "b") == 0
        assert handle.status() == "cancelled"

    state = graph.invoke(GraphInput.resume({"sleep": 0}), config, timeout=30)
    assert state.data["log"] == ["a", "b", "c"]
    assert started(redis_client, thread, "a") == (2 if terminate else 1)


def test_only_a_revoke_of_the_steps_own_task_cancels_its_run(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """Celery reports a message it discards because it expired as revoked (``expired``), and
    one revoked under any id: neither a copy of a running step's message that expired, even
    under the step's own task id, nor a copy revoked under another id, cancels the run."""
    from types import SimpleNamespace

    from langgraph_celery.worker.tasks import _on_task_revoked

    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    handle = graph.start({"thread": thread, "sleep": 3.0}, config)
    assert wait_until(lambda: started(redis_client, thread, "a") == 1, 10, 0.01, "node a to start")
    first = celery_stack.saver.get(thread)
    assert first is not None
    own = celery_task_id(first.run_id, first.checkpoint_id, "a")
    runtime = celery_stack.executor.runtime("slow")
    assert runtime is not None
    envelope = runtime.envelope(first, first.tasks[0]).to_message()
    name = node_task_name("slow", "a")
    # (as a worker's revoke hook is called: the task, its request, whether it expired)
    task = celery_stack.app.tasks[name]
    _on_task_revoked(task, SimpleNamespace(id=own, kwargs=envelope), expired=True)
    _on_task_revoked(task, SimpleNamespace(id=f"{own}-copy", kwargs=envelope), expired=False)
    assert handle.status() == "running"

    # a copy revoked for real, under another id: the worker discards it
    other = f"copy-{thread}"
    celery_stack.app.control.revoke(other, reply=True, timeout=5)
    celery_stack.app.send_task(name, kwargs=envelope, task_id=other)
    wait_until(
        lambda: f"Discarding revoked task: {name}[{other}]" in celery_stack.worker_logs(),
        15,
        0.05,
        "the copy to be discarded",
    )
    assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b", "c"]
    assert started(redis_client, thread, "a") == 1


def test_cancel_racing_completion_never_turns_a_completed_run_into_a_cancelled_one(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("parity-chain")
    outcomes: dict[str, int] = {"completed": 0, "cancelled": 0}
    for trial in range(30):
        config = RunnableConfig(thread_id=f"{thread}-{trial}")
        handle = graph.start({}, config)
        time.sleep(0.002 * (trial % 10))  # cancel at different points of the run
        took_effect = handle.cancel()
        wait_until(lambda h=handle: h.status() != "running", 20, 0.01, "the run to stop")
        # A step that was finishing when the cancel came may still store its checkpoint (and,
        # at END, complete the run): the status is compared with the latest checkpoint read
        # around it, read again until the two reads agree.
        for _ in range(100):
            latest = celery_stack.saver.get(config.thread_id)
            status = handle.status()
            again = celery_stack.saver.get(config.thread_id)
            assert latest is not None and again is not None
            if latest.checkpoint_id == again.checkpoint_id:
                break
        else:
            pytest.fail(f"trial {trial}: the thread's latest checkpoint kept changing")
        reached_end = not latest.next
        assert status == ("completed" if reached_end else "cancelled"), (trial, status)
        if status == "completed":
            assert handle.wait(timeout=5).as_state_data()["log"] == ["a", "b", "c"]
        else:
            assert took_effect
        outcomes[status] += 1
    assert outcomes["cancelled"] > 0, outcomes  # (the race was exercised both ways)


def test_the_run_index_shows_each_run_running_parked_completed_failed_or_cancelled(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    saver = celery_stack.saver

    def record(run_id: str) -> Any:
        found = saver.get_run(run_id)
        assert found is not None, run_id
        return found

    slow = celery_stack.graph("slow")
    redis_client.set(f"hold:{thread}:a", 1)
    handle = slow.start({"thread": thread}, RunnableConfig(thread_id=thread))
    running = record(handle.run_id)
    assert (running.status, running.node, running.graph_id) == (RunStatus.RUNNING, "a", "slow")
    redis_client.delete(f"hold:{thread}:a")
    handle.wait(timeout=20)
    assert record(handle.run_id).status is RunStatus.COMPLETED

    gate = celery_stack.graph("gate")
    parked_thread = f"{thread}-gate"
    gate.invoke({"topic": "t"}, RunnableConfig(thread_id=parked_thread))
    parked = record(saver.get(parked_thread).run_id)
    assert (parked.status, parked.node) == (RunStatus.PARKED, "gate")

    flaky_thread = f"{thread}-flaky"
    with pytest.raises(NodeError):
        celery_stack.graph("flaky").invoke(
            {"thread": flaky_thread, "fail_times": 100}, RunnableConfig(thread_id=flaky_thread)
        )
    failed = record(saver.get(flaky_thread).run_id)
    assert (failed.status, failed.node) == (RunStatus.FAILED, "flaky")

    cancelled_thread = f"{thread}-cancel"
    redis_client.set(f"hold:{cancelled_thread}:a", 1)
    doomed = slow.start({"thread": cancelled_thread}, RunnableConfig(thread_id=cancelled_thread))
    assert doomed.cancel() is True
    redis_client.delete(f"hold:{cancelled_thread}:a")
    assert record(doomed.run_id).status is RunStatus.CANCELLED
    listed = {r.run_id: r.status for r in saver.list_runs(graph_id="slow", limit=100)}
    assert listed[handle.run_id] is RunStatus.COMPLETED
    assert listed[doomed.run_id] is RunStatus.CANCELLED


def test_cancelling_a_celery_stream_cancels_its_run(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    redis_client.set(f"hold:{thread}:a", 1)
    stream = graph.stream({"thread": thread}, config)
    outputs = []
    try:
        for output in stream:
            outputs.append(output.node)
            if output.node == "__START__":
                assert stream.cancel() is True
    finally:
        redis_client.delete(f"hold:{thread}:a")
    assert outputs == ["__START__"]
    assert stream.is_cancelled() and stream.result.is_empty()
    assert stream.result.is_cancelled()
    run_id = celery_stack.saver.get(thread).run_id
    assert RunHandle.from_run_id(graph, run_id).status() == "cancelled"
    state = graph.invoke(GraphInput.resume(), config, timeout=30)  # resumable
    assert state.data["log"] == ["a", "b", "c"]


def late_step_client(
    celery_stack: CeleryStack, thread: str, redis_client: Any, name: str, armed: bool = True
) -> tuple[Any, Any]:
    """The ``slow`` graph compiled in a client of its own, whose saver, while ``armed``, lets
    the held node ``a`` finish and waits for its step's checkpoint before this client stores
    its first checkpoint (once); the compiled graph and the saver."""
    from lgc_graphs import slow

    from app_kit import make_app
    from langgraph_celery.celery import CeleryExecutor
    from langgraph_celery.checkpoint import SqlSaver

    class LateStepFirst(SqlSaver):
        armed = True

        def let_the_late_step_in(self) -> None:
            if self.armed:
                self.armed = False
                read = self.get(thread)
                redis_client.delete(f"hold:{thread}:a")
                assert wait_until(
                    lambda: self.get(thread).step > read.step, 20, 0.01, "a's late step"
                )

        def put(self, checkpoint: Any) -> Any:
            self.let_the_late_step_in()
            return super().put(checkpoint)

        def put_with_timer(self, checkpoint: Any, timer: Any, run: Any = None) -> Any:
            self.let_the_late_step_in()
            return super().put_with_timer(checkpoint, timer, run)

    settings = celery_stack.settings
    app, _ = make_app(name, settings, "LGC")
    saver = LateStepFirst(settings["LGC_DB_URL"], table_prefix=settings["LGC_TABLE_PREFIX"])
    saver.armed = armed
    client = slow().compile(
        CompileConfig(checkpoint_saver=saver, executor=CeleryExecutor(app), graph_id="slow")
    )
    return client, saver


@pytest.mark.parametrize("change", ["resume", "update_state"])
def test_a_change_overtaken_by_a_late_step_of_its_cancelled_run_starts_from_that_step(
    celery_stack: CeleryStack, thread: str, redis_client: Any, change: str
) -> None:
    """A cancel marks the run while node ``a`` still runs; ``a``'s step then stores its
    checkpoint (cancelled too) between a resume (or ``update_state``) reading the thread and
    storing its own checkpoint: refused as the second writer of that step, it starts again from
    the late step's checkpoint (``a``'s update kept, ``a`` not run again) instead of failing
    with a conflict."""
    client, saver = late_step_client(celery_stack, thread, redis_client, "late-step-client")
    config = RunnableConfig(thread_id=thread)
    redis_client.set(f"hold:{thread}:a", 1)
    try:
        handle = celery_stack.graph("slow").start({"thread": thread}, config)
        assert wait_until(lambda: started(redis_client, thread, "a") == 1, 15, 0.01, "a to start")
        assert handle.cancel() is True
        if change == "update_state":
            client.update_state(config, {"log": ["edited"]})
        state = client.invoke(GraphInput.resume(), config, timeout=30)
    finally:
        redis_client.delete(f"hold:{thread}:a")
    assert not saver.armed  # the late step was stored while the change was under way
    edited = ["edited"] if change == "update_state" else []
    assert state.data["log"] == ["a", *edited, "b", "c"]
    assert started(redis_client, thread, "a") == 1  # its late update kept: a ran once


@pytest.mark.parametrize("late_step", ["first", "after"])
def test_a_new_run_racing_a_late_step_of_the_cancelled_run_is_the_threads_latest(
    celery_stack: CeleryStack, thread: str, redis_client: Any, late_step: str
) -> None:
    """A cancel marks the run while node ``a`` still runs, and a new run (an input, not a
    resume) starts on the thread at once.  ``a``'s step and the new run's first checkpoint both
    go on from the cancelled run's checkpoint, and a checkpoint has one successor: a late step
    stored first (``"first"``) is where the new run starts from instead (``a``'s update kept);
    one stored after (``"after"``) is refused, and its update stays a pending write of the
    cancelled checkpoint.  Either way the thread's latest checkpoint and final state are the
    new run's, and nothing of the cancelled run is stored after the new run's first."""
    from langgraph_celery.checkpoint import CheckpointKind

    armed = late_step == "first"
    client, saver = late_step_client(celery_stack, thread, redis_client, "late-step-new", armed)
    config = RunnableConfig(thread_id=thread)
    redis_client.set(f"hold:{thread}:a", 1)
    try:
        cancelled = celery_stack.graph("slow").start({"thread": thread}, config)
        assert wait_until(lambda: started(redis_client, thread, "a") == 1, 15, 0.01, "a to start")
        assert cancelled.cancel() is True
        handle = client.start({"thread": thread}, config)  # a new run, not a resume
        redis_client.delete(f"hold:{thread}:a")  # ("after": its first checkpoint is stored)
        state = handle.wait(timeout=30).as_state_data()
    finally:
        redis_client.delete(f"hold:{thread}:a")
    assert not saver.armed
    # the cancelled a has finished (its step stored, or refused and its update kept)
    assert wait_until(lambda: int(redis_client.get(f"calls:{thread}:a") or 0) == 2, 20)
    history = list(celery_stack.saver.list(thread))
    first = next(c for c in history if c.run_id == handle.run_id and c.kind is CheckpointKind.INPUT)
    after = history[: [c.checkpoint_id for c in history].index(first.checkpoint_id)]
    assert after and all(c.run_id == handle.run_id for c in after)
    assert history[0].run_id == handle.run_id and history[0].values["log"] == state["log"]
    assert client.get_state(config).state.data["log"] == state["log"]
    start = next(c for c in history if c.run_id == cancelled.run_id and c.parent_id is None)
    if late_step == "first":  # the new run went on from the late step: a's update, kept
        late = celery_stack.saver.get(thread, first.parent_id)
        assert late is not None and late.run_id == cancelled.run_id
        assert late.parent_id == start.checkpoint_id
        assert state["log"] == ["a", "a", "b", "c"]
    else:  # the late step was refused; its update stays at the cancelled checkpoint
        assert first.parent_id == start.checkpoint_id
        assert [c.checkpoint_id for c in history if c.run_id == cancelled.run_id] == [
            start.checkpoint_id
        ]
        assert state["log"] == ["a", "b", "c"]
        kept = wait_until(
            lambda: [
                w.update
                for w in celery_stack.saver.get_writes(thread, start.checkpoint_id)
                if w.node == "a"
            ],
            20,
            0.05,
            "a's update kept",
        )
        assert kept == [{"log": ["a"]}]
    assert started(redis_client, thread, "a") == 2  # the cancelled run's a, and the new run's
    assert cancelled.status() == "cancelled" and handle.status() == "completed"


def test_the_reaper_leaves_a_step_whose_task_a_live_worker_runs(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    from datetime import UTC, datetime, timedelta

    from langgraph_celery.beat.reaper import reap

    graph = celery_stack.graph("slow")
    redis_client.set(f"hold:{thread}:a", 1)
    try:
        handle = graph.start({"thread": thread}, RunnableConfig(thread_id=thread))
        assert wait_until(lambda: started(redis_client, thread, "a") == 1, 15, 0.01, "a to start")
        stalled_after = celery_stack.executor.stalled_after
        report = reap(
            celery_stack.executor, now=datetime.now(UTC) + timedelta(seconds=stalled_after + 1)
        )
        assert thread in report.alive and thread not in report.redispatched, report
    finally:
        redis_client.delete(f"hold:{thread}:a")
    assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b", "c"]
    assert started(redis_client, thread, "a") == 1  # never sent to a second process
