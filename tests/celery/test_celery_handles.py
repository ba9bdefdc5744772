"""SPEC §8: parked interruptions, busy threads and RunHandle, on Celery workers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from lgc_graphs import gate

from celery_support import CeleryStack, run_client, wait_until
from langgraph_celery import END, CompileConfig, GraphInput, GraphStateError, RunnableConfig
from langgraph_celery.celery import RunHandle
from langgraph_celery.checkpoint import CheckpointKind, MemorySaver
from langgraph_celery.worker.names import (
    RESUME_TASK,
    celery_task_id,
    node_task_name,
    thread_channel,
)


def calls(redis_client: Any, thread: str, node: str) -> int:
    return int(redis_client.get(f"calls:{thread}:{node}") or 0)


@contextmanager
def held(redis_client: Any, thread: str, node: str) -> Iterator[None]:
    """Node ``node`` of the ``slow`` graph, started on ``thread``, cannot end before the block
    does (see ``lgc_graphs.slow``)."""
    redis_client.set(f"hold:{thread}:{node}", 1)
    try:
        yield
    finally:
        redis_client.delete(f"hold:{thread}:{node}")


def idle(stack: CeleryStack) -> bool:
    """No task active, reserved or scheduled on any worker."""
    inspect = stack.app.control.inspect(timeout=2.0, limit=len(stack.workers))
    replies = [inspect.active(), inspect.reserved(), inspect.scheduled()]
    assert all(reply for reply in replies), f"a worker did not answer: {replies}"
    return all(not tasks for reply in replies for tasks in reply.values())


# -- parked interruptions ---------------------------------------------------------------------


def test_interruption_parks_and_another_process_resumes(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("gate")
    config = RunnableConfig(thread_id=thread)

    stream = graph.stream({"topic": "t"}, config)
    assert [output.node_id for output in stream] == ["__START__", "a"]
    interruption = stream.result.as_interruption_metadata()
    assert (interruption.node_id, interruption.reason) == ("gate", "needs approval")
    assert interruption.metadata == {"asked": "approve?"}

    # parked: nothing queued, nothing held by a worker
    assert wait_until(lambda: idle(celery_stack), 10, 0.2, "workers to be idle")
    assert redis_client.llen(celery_stack.queue) == 0
    assert redis_client.hlen("unacked") == 0
    snapshot = graph.get_state(config)
    assert snapshot.next == ("gate",)
    assert snapshot.state.data["log"] == ["a"]

    # another process resumes it
    result = run_client(
        celery_stack.settings,
        "from langgraph_celery import GraphInput, RunnableConfig\n"
        f"config = RunnableConfig(thread_id={thread!r})\n"
        "state = graphs['gate'].invoke(GraphInput.resume({'approved': True}), config)\n"
        "print(json.dumps(dict(state.data)))\n",
    )
    assert result == {"topic": "t", "approved": True, "log": ["a", "gate", "b"], "results": []}
    final = graph.get_state(config)
    assert final.next == ()
    assert final.state.data == result


def test_a_resume_sends_the_resumed_node_itself_and_the_resume_task_still_serves(
    celery_stack: CeleryStack, thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = celery_stack.graph("gate")
    runtime = graph._source.runtime
    app = runtime.executor.app
    sent: list[str] = []
    send_task = app.send_task

    def recording(name: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(name)
        return send_task(name, *args, **kwargs)

    monkeypatch.setattr(app, "send_task", recording)
    config = RunnableConfig(thread_id=thread)
    graph.invoke({"topic": "t"}, config)
    assert graph.get_state(config).next == ("gate",)
    sent.clear()
    state = graph.invoke(GraphInput.resume({"approved": True}), config)
    assert state.data["log"] == ["a", "gate", "b"]
    # the client sent the parked node's task: no hop through the resume task
    assert sent == [node_task_name("gate", "gate")]

    # A resume message of an earlier client (it stored the resume checkpoint, then sent the
    # resume task) is still carried out by the workers.
    other = RunnableConfig(thread_id=f"{thread}-old")
    graph.invoke({"topic": "u"}, other)
    assert graph.get_state(other).next == ("gate",)

    async def stored_only(checkpoint: Any, **_: Any) -> Any:
        return None

    with monkeypatch.context() as patch:
        patch.setattr(runtime, "advance", stored_only)
        handle = graph.start(GraphInput.resume({"approved": True}), other)
    resumed = runtime.saver.get(other.thread_id or "")
    assert resumed is not None and resumed.kind is CheckpointKind.RESUME
    assert handle.status() == "running"
    send_task(RESUME_TASK, kwargs=runtime.envelope(resumed).to_message())
    final = handle.wait(timeout=20)
    assert final.as_state_data()["log"] == ["a", "gate", "b"]


def test_a_first_message_the_broker_refuses_fails_the_run_and_a_resume_sends_it_again(
    celery_stack: CeleryStack, thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kombu.exceptions import OperationalError

    graph = celery_stack.graph("gate")
    app = graph._source.runtime.executor.app
    send_task = app.send_task

    def refusing(name: str, *args: Any, **kwargs: Any) -> Any:
        raise OperationalError("the broker is gone")

    config = RunnableConfig(thread_id=thread)
    for attempt, graph_input in (
        ("start", GraphInput.args({"topic": "t"})),
        ("resume", GraphInput.resume({"approved": True})),
    ):
        with monkeypatch.context() as patch:
            patch.setattr(app, "send_task", refusing)
            with pytest.raises(OperationalError):
                graph.invoke(graph_input, config)
        # recorded failed where it stopped, not left busy, and sent again by a resume
        snapshot = graph.get_state(config)
        assert snapshot.next == (("a",) if attempt == "start" else ("gate",)), attempt
        latest = graph._saver().get(thread)
        assert latest is not None
        assert RunHandle.from_run_id(graph, latest.run_id).status() == "failed"
        graph.invoke(GraphInput.resume(), config)
        if attempt == "start":
            assert graph.get_state(config).next == ("gate",)  # parked at the approval
    assert app.send_task == send_task
    final = graph.get_state(config)
    assert final.next == ()
    assert final.state.data["log"] == ["a", "gate", "b"]
    assert final.state.data["approved"] is True


def test_busy_thread_refuses_a_second_run_or_resume(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    with held(redis_client, thread, "a"):  # a runs until the refusals are checked
        handle = graph.start({"thread": thread}, config)
        assert handle.status() == "running"

        with pytest.raises(GraphStateError, match="busy"):
            graph.start({"thread": thread}, config)
        with pytest.raises(GraphStateError, match="busy"):
            graph.invoke(GraphInput.resume({"extra": 1}), config)
        with pytest.raises(GraphStateError, match="busy"):
            graph.invoke({"thread": thread}, config)
        assert handle.status() == "running"

    result = handle.wait(timeout=20)
    assert result.as_state_data()["log"] == ["a", "b", "c"]
    assert "extra" not in result.as_state_data()
    assert [calls(redis_client, thread, n) for n in "abc"] == [1, 1, 1]
    assert len(graph.get_state_history(config)) == 4  # input, after a, after b, after c


def test_resume_with_nothing_pending_is_refused_and_the_thread_stays_usable(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    assert graph.invoke({"thread": thread}, config).data["log"] == ["a", "b", "c"]
    history = len(graph.get_state_history(config))

    with pytest.raises(GraphStateError, match="nothing pending"):
        graph.invoke(GraphInput.resume(), config)
    with pytest.raises(GraphStateError, match="nothing pending"):
        graph.invoke(GraphInput.resume({"x": 1}), config)
    assert len(graph.get_state_history(config)) == history

    # threads are conversations: a new run on it still works
    state = graph.invoke({"round": 2}, config)
    assert state.data["log"] == ["a", "b", "c", "a", "b", "c"]
    assert state.data["round"] == 2


def test_resume_of_a_thread_without_checkpoints_is_refused(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("gate")
    with pytest.raises(GraphStateError, match="no checkpoint"):
        graph.invoke(GraphInput.resume(), RunnableConfig(thread_id=thread))


# -- RunHandle -------------------------------------------------------------------------------------


def test_start_returns_at_once_and_wait_gives_the_result(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    with held(redis_client, thread, "a"):
        handle = graph.start({"thread": thread}, config)
        # start returned while the run's first node could not end: it did not wait for the run
        assert calls(redis_client, thread, "a") == 0
        assert isinstance(handle, RunHandle)
        assert handle.thread_id == thread
        assert handle.status() == "running"
        with pytest.raises(TimeoutError):
            handle.wait(timeout=0.2)
        assert calls(redis_client, thread, "a") == 0

    result = handle.wait(timeout=20)
    assert result.is_state_data()
    assert result.as_state_data() == {"thread": thread, "log": ["a", "b", "c"], "results": []}
    assert handle.status() == "completed"
    assert graph.get_state(config).state.data == result.as_state_data()


def test_handle_stream_yields_the_node_outputs(celery_stack: CeleryStack, thread: str) -> None:
    graph = celery_stack.graph("slow")
    handle = graph.start({"thread": thread, "sleep": 0.3}, RunnableConfig(thread_id=thread))
    outputs = list(handle.stream())
    assert [output.node_id for output in outputs] == ["a", "b", "c", END]
    assert [output.state.data["log"] for output in outputs] == [
        ["a"],
        ["a", "b"],
        ["a", "b", "c"],
        ["a", "b", "c"],
    ]
    # a finished run streams the same again
    assert [output.node_id for output in handle.stream()] == ["a", "b", "c", END]


def test_cancel_while_a_node_runs_stops_the_run_after_that_node(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    with held(redis_client, thread, "a"):  # a runs until the run is cancelled
        handle = graph.start({"thread": thread}, config)
        wait_until(lambda: redis_client.get(f"started:{thread}:a"), 10, 0.01, "node a to start")
        assert handle.cancel() is True
        assert handle.status() == "cancelled"
    first = celery_stack.saver.list(thread)[-1]
    task_a = celery_stack.app.AsyncResult(celery_task_id(first.run_id, first.checkpoint_id, "a"))
    wait_until(lambda: task_a.state == "SUCCESS", 10, 0.02, "the task of node a to end")
    assert calls(redis_client, thread, "a") == 1
    # whatever a's task sent has run by now
    celery_stack.wait_until_quiet()
    assert redis_client.get(f"started:{thread}:b") is None
    assert handle.status() == "cancelled"
    with pytest.raises(GraphStateError, match="cancelled"):
        handle.wait(timeout=5)
    assert graph.get_state(config).state.data["log"] in ([], ["a"])


def test_cancel_stops_the_run_at_its_current_step(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread)
    handle = graph.start({"thread": thread, "sleep": 1.0}, config)
    assert handle.cancel() is True
    assert handle.cancel() is False  # already cancelled
    assert handle.status() == "cancelled"
    with pytest.raises(GraphStateError, match="cancelled"):
        handle.wait(timeout=20)
    # a's task may have been running already: let it end, then check nothing went further
    first = celery_stack.saver.list(thread)[-1]
    task_a = celery_stack.app.AsyncResult(celery_task_id(first.run_id, first.checkpoint_id, "a"))
    wait_until(lambda: task_a.state == "SUCCESS", 10, 0.05, "the task of node a to end")
    # stopped before running a, or a was running already: it finished and its step was stored
    # ("merged"), but the next step sees the mark and goes no further
    assert task_a.result["status"] in ("stopped", "cancelled", "merged")
    celery_stack.wait_until_quiet()  # whatever a's task sent has run by now
    assert calls(redis_client, thread, "a") <= 1
    assert calls(redis_client, thread, "b") == 0
    assert handle.status() == "cancelled"
    assert "b" not in graph.get_state(config).state.data["log"]

    # the thread is usable again after a cancelled run
    state = graph.invoke({"thread": thread, "sleep": 0}, config)
    assert state.data["log"][-3:] == ["a", "b", "c"]


def test_cancel_of_a_finished_run_is_refused(celery_stack: CeleryStack, thread: str) -> None:
    graph = celery_stack.graph("slow")
    handle = graph.start({"thread": thread}, RunnableConfig(thread_id=thread))
    handle.wait(timeout=20)
    assert handle.cancel() is False
    assert handle.status() == "completed"


def test_handle_rebuilt_from_its_run_id_in_another_process(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("slow")
    handle = graph.start({"thread": thread, "sleep": 0.5}, RunnableConfig(thread_id=thread))
    other = run_client(
        celery_stack.settings,
        "from langgraph_celery.celery import RunHandle\n"
        f"handle = RunHandle.from_run_id(graphs['slow'], {handle.run_id!r})\n"
        "result = handle.wait(timeout=30)\n"
        "print(json.dumps({'thread': handle.thread_id, 'status': handle.status(),\n"
        "                  'state': result.as_state_data()}))\n",
    )
    mine = handle.wait(timeout=20)
    assert other == {"thread": thread, "status": "completed", "state": mine.as_state_data()}
    assert mine.as_state_data()["log"] == ["a", "b", "c"]


def test_handle_of_an_unknown_run_is_refused(celery_stack: CeleryStack) -> None:
    with pytest.raises(GraphStateError, match="no run"):
        RunHandle.from_run_id(celery_stack.graph("slow"), "no-such-run")


def test_handle_reports_an_interrupted_run(celery_stack: CeleryStack, thread: str) -> None:
    graph = celery_stack.graph("gate")
    handle = graph.start({"topic": "t"}, RunnableConfig(thread_id=thread))
    result = handle.wait(timeout=20)
    assert result.is_interruption_metadata()
    assert result.as_interruption_metadata().node_id == "gate"
    assert handle.status() == "parked"
    assert result.as_interruption_metadata().state.data["log"] == ["a"]


def test_update_state_on_a_parked_run_then_resume_as_in_process(
    celery_stack: CeleryStack, thread: str
) -> None:
    """get_state / update_state / resume behave as in process (SPEC §4, §8)."""
    local = gate().compile(CompileConfig(checkpoint_saver=MemorySaver()))
    results = []
    for graph in (local, celery_stack.graph("gate")):
        config = RunnableConfig(thread_id=thread)
        assert graph.invoke({"topic": "t"}, config).data["log"] == ["a"]
        updated = graph.update_state(config, {"approved": True, "log": ["human"]})
        snapshot = graph.get_state(updated)
        assert snapshot.next == ("gate",)
        state = graph.invoke(GraphInput.resume(), config)
        history = graph.get_state_history(config)
        results.append((dict(state.data), [(s.step, s.node, s.next) for s in history]))
    assert results[1] == results[0]
    assert results[0][0]["log"] == ["a", "human", "gate", "b"]


def test_none_as_input_continues_a_parked_run_as_in_process(
    celery_stack: CeleryStack, thread: str
) -> None:
    """``start(None, config)`` on a parked thread resumes its run (no new run), and on a
    thread whose run completed starts a new one, as ``invoke(None, config)`` in process."""
    local = gate().compile(CompileConfig(checkpoint_saver=MemorySaver()))
    results = []
    for graph in (local, celery_stack.graph("gate")):
        config = RunnableConfig(thread_id=thread)
        first = graph.invoke({"topic": "t"}, config)
        assert first.data["log"] == ["a"]
        graph.update_state(config, {"approved": True})
        state = graph.invoke(None, config)  # continues the parked run
        again = graph.invoke(None, config)  # completed: a new run from START
        history = graph.get_state_history(config)
        results.append((dict(state.data), dict(again.data), [(s.step, s.node) for s in history]))
    assert results[1] == results[0]
    assert results[0][0]["log"] == ["a", "gate", "b"]  # (a new run would have run a again)
    assert results[0][1]["log"] == ["a", "gate", "b", "a", "gate", "b"]


# -- wake-ups --------------------------------------------------------------------------------------


def test_followers_are_woken_at_each_step_by_the_result_backend(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """With a Redis result backend, each node task's stored result wakes a follower of the run,
    and the worker publishes nothing of its own until the run stops."""
    executor = celery_stack.executor
    assert executor.notifier.steps_published_by_backend
    worker_channel = redis_client.pubsub()
    worker_channel.subscribe(thread_channel(thread), thread_channel(thread, final=True))
    for _ in range(2):
        assert worker_channel.get_message(timeout=5)["type"] == "subscribe"
    graph = celery_stack.graph("slow")
    handle = graph.start(
        {"thread": thread, "sleep": 0.3, "sleep_b": 0.3, "sleep_c": 0.3},
        RunnableConfig(thread_id=thread),
    )
    follower = executor.notifier.subscribe(thread, run_id=handle.run_id)
    assert follower is not None
    steps_seen = []
    try:
        deadline = time.monotonic() + 20
        while handle.status() == "running" and time.monotonic() < deadline:
            if follower.wait(2.0):  # (far beyond a step: a wake-up, not a fallback read)
                steps_seen.append(len(graph.get_state_history(RunnableConfig(thread_id=thread))))
    finally:
        follower.close()
    assert handle.wait(timeout=20).as_state_data()["log"] == ["a", "b", "c"]
    # a wake-up per step (a and b: c's may come after the status read says completed), each
    # after its step was stored, never at a task's start
    assert len(steps_seen) >= 2, steps_seen
    assert steps_seen == sorted(set(steps_seen)), steps_seen
    # every task of the run has ended: what the worker published comes before a marker the
    # test publishes now
    celery_stack.wait_until_quiet()
    redis_client.publish(thread_channel(thread), b"marker")
    published = []
    while (message := worker_channel.get_message(timeout=10)) is not None:
        if message["data"] == b"marker":
            break
        published.append(message)
    else:
        raise AssertionError(f"the marker never came back; before it: {published}")
    worker_channel.close()
    # only the run's completion, on the final channel
    assert [m["channel"] for m in published] == [thread_channel(thread, final=True).encode()]
