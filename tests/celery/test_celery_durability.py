"""SPEC §10 on Celery workers: ``durability="exit"`` carries each step's checkpoint to the next
step's task in the result backend and stores only where the run stops (and before a step of
several tasks); ``"async"`` carries it likewise and stores every step behind its next step's
send; the outcome and the stored states are those of ``"sync"``; duplicated messages apply
nothing twice; task results stay small and expire."""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any

import pytest
from lgc_graphs import SCENARIOS

from celery_support import CeleryStack, wait_until
from langgraph_celery import (
    START,
    CompileConfig,
    CompiledGraph,
    GraphError,
    GraphInput,
    RunnableConfig,
)
from langgraph_celery.checkpoint import MemorySaver, RunStatus
from langgraph_celery.worker.carry import Carried, Carrier, carried_id
from langgraph_celery.worker.envelope import TaskEnvelope
from langgraph_celery.worker.names import celery_task_id, node_task_name


def run_calls(graph: CompiledGraph, name: str, thread: str, mode: str) -> dict[str, Any]:
    """The scenario's calls on ``thread`` in ``mode``: how each ended, the final state, the
    stored history (step, node, next, state), oldest first."""
    config = RunnableConfig(thread_id=thread, durability=mode)  # type: ignore[arg-type]
    outcomes: list[Any] = []
    outputs: list[Any] = []
    for graph_input, _ in SCENARIOS[name].calls:
        stream = graph.stream(graph_input, config)
        try:
            for output in stream:
                outputs.append((output.node, dict(output.state.data)))
        except GraphError as error:
            outcomes.append(type(error).__name__)
            continue
        result = stream.result
        if result.is_interruption_metadata():
            outcomes.append(("interrupted", result.as_interruption_metadata().node_id))
        else:
            outcomes.append(("completed", result.as_state_data()))
    history = graph.get_state_history(config)
    return {
        "outcomes": outcomes,
        "outputs": outputs,
        "state": dict(graph.get_state(config).state.data),
        "history": [(s.step, s.node, s.next, dict(s.state.data)) for s in reversed(history)],
        "parents": [
            (s.config.checkpoint_id, s.parent_config.checkpoint_id if s.parent_config else None)
            for s in history
        ],
    }


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_exit_ends_alike_and_stores_a_part_of_what_sync_stores(
    celery_stack: CeleryStack, name: str, thread: str
) -> None:
    scenario = SCENARIOS[name]
    local = scenario.build().compile(
        CompileConfig(checkpoint_saver=MemorySaver(), **scenario.compile)
    )
    expected = run_calls(local, name, thread, "sync")
    remote = run_calls(celery_stack.graph(f"parity-{name}"), name, thread, "exit")

    assert remote["outcomes"] == expected["outcomes"]
    # every step streamed, the carried ones too (published by the worker as it carries them)
    assert remote["outputs"] == expected["outputs"]
    assert remote["state"] == expected["state"]
    # every checkpoint stored is one "sync" stores too (same step, node, next and state), in
    # the same order, the first and the last among them; each one's parent is stored
    stored = remote["history"]
    assert stored[0] == expected["history"][0]
    assert stored[-1] == expected["history"][-1]
    rest = iter(expected["history"])
    assert all(any(entry == other for other in rest) for entry in stored)
    ids = {checkpoint_id for checkpoint_id, _ in remote["parents"]}
    assert all(parent is None or parent in ids for _, parent in remote["parents"])


def test_exit_stores_only_the_start_and_the_end_of_a_chain(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("parity-chain")
    config = RunnableConfig(thread_id=thread, durability="exit")
    carried_before = set(redis_client.scan_iter("lgc:carried:*"))
    handle = graph.start({"topic": "x"}, config)
    result = handle.wait(timeout=30)
    assert result.as_state_data()["log"] == ["a", "b", "c"]
    history = graph.get_state_history(config)
    assert [(s.step, s.node) for s in history] == [(2, "c"), (-1, START)]
    assert handle.status() == "completed"
    record = celery_stack.saver.get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.COMPLETED

    # every step was carried (b's and c's checkpoints, at the ids a carried step computes),
    # and a carried step's task stores no result of its own (no STARTED, no SUCCESS)
    celery_stack.wait_until_quiet()
    first = history[-1].config.checkpoint_id or ""
    steps = [(first, -1)]
    for _ in ("b", "c"):
        steps.append(_carried_after(*steps[-1]))
    for (checkpoint_id, _), node in zip(steps, "abc", strict=True):
        task_id = celery_task_id(handle.run_id, checkpoint_id, node)
        assert not redis_client.exists(f"celery-task-meta-{task_id}"), node
        assert celery_stack.app.AsyncResult(task_id).state == "PENDING"
    assert history[0].config.checkpoint_id == carried_id(steps[-1][0])  # (c's, stored)
    # only one carried state per run at a time, and none once the run has ended
    assert set(redis_client.scan_iter("lgc:carried:*")) == carried_before


def test_task_results_hold_the_state_only_at_the_end_and_expire(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("parity-chain")
    config = RunnableConfig(thread_id=thread)
    final = graph.invoke({"topic": "x"}, config)
    history = list(reversed(graph.get_state_history(config)))
    run_id = _run_of(celery_stack, thread)
    results = []
    for snapshot in history[:-1]:
        task_id = celery_task_id(run_id, snapshot.config.checkpoint_id or "", snapshot.next[0])
        result = celery_stack.app.AsyncResult(task_id)
        wait_until(lambda r=result: r.state == "SUCCESS", 10, 0.02, "a node task")
        results.append(result.result)
        ttl = redis_client.ttl(f"celery-task-meta-{task_id}")
        assert 0 < ttl <= 3600  # the executor's result_expires
    assert [r["status"] for r in results] == ["merged", "merged", "merged"]
    assert ["state" in r for r in results] == [False, False, True]
    assert results[-1]["state"] == dict(final.data)


def _send_again(
    celery_stack: CeleryStack,
    graph_id: str,
    at: tuple[str, int],
    node: str,
    thread: str,
    carried: bool = True,
) -> None:
    """Send the message of ``node``'s task at checkpoint ``at`` (its id and step) of the
    thread's run again, as the executor sent it (its task id; the header of a carried step)."""
    run_id = _run_of(celery_stack, thread)
    checkpoint_id, step = at
    envelope = TaskEnvelope(
        graph_id=graph_id,
        thread_id=thread,
        run_id=run_id,
        step=step,
        checkpoint_id=checkpoint_id,
        node=node,
        task_id=node,
    )
    celery_stack.app.send_task(
        node_task_name(graph_id, node),
        kwargs=envelope.to_message(),
        task_id=celery_task_id(run_id, checkpoint_id, node),
        headers={"lgc_carried": True} if carried else None,
    )


def _carried_after(checkpoint_id: str, step: int) -> tuple[str, int]:
    """The checkpoint a carried step computes after ``checkpoint_id`` (at ``step``)."""
    return carried_id(checkpoint_id), step + 1


def _run_of(celery_stack: CeleryStack, thread: str) -> str:
    latest = celery_stack.saver.get(thread)
    assert latest is not None
    return latest.run_id


def test_exit_duplicated_messages_apply_nothing_twice(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """Every message of a run with durability "exit" delivered again (the carried ones with
    their header) once it ended: the stored state and history do not change."""
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread, durability="exit")
    state = graph.invoke({"thread": thread}, config)
    assert state.data["log"] == ["a", "b", "c"]
    history = [s.config.checkpoint_id for s in graph.get_state_history(config)]
    assert len(history) == 2
    first = celery_stack.saver.list(thread)[-1]
    start = (first.checkpoint_id, first.step)
    _send_again(celery_stack, "slow", start, "a", thread, False)
    _send_again(celery_stack, "slow", _carried_after(*start), "b", thread)
    wait_until(lambda: int(redis_client.get(f"calls:{thread}:a")) == 2, 10, 0.05, "a again")
    celery_stack.wait_until_quiet()  # and whatever the duplicates sent has run
    assert graph.get_state(config).state.data == state.data
    assert [s.config.checkpoint_id for s in graph.get_state_history(config)] == history


@pytest.mark.parametrize("mode", ["exit", "async"])
def test_a_duplicate_that_routes_elsewhere_stores_no_second_line(
    celery_stack: CeleryStack, thread: str, redis_client: Any, mode: str
) -> None:
    """a's message delivered again once the run ended and the sign of its step's send expired,
    and a routes to c -> d this time (it is not deterministic): with "exit" the duplicate's
    line ends one step later than the run's, at another checkpoint id, but it is a second
    successor of the run's stored start, so the store refuses it; the thread keeps its one
    line of checkpoints (before the successor rule it went on to ``["a", "c", "d"]``)."""
    graph = celery_stack.graph("fickle")
    config = RunnableConfig(thread_id=thread, durability=mode)  # type: ignore[arg-type]
    assert graph.invoke({"thread": thread}, config).data["log"] == ["a", "b"]
    history = [s.config.checkpoint_id for s in graph.get_state_history(config)]
    first = celery_stack.saver.list(thread)[-1]
    celery_stack.wait_until_quiet()
    # (the sign that a copy of a's step sent the next one expires after stalled_after: gone)
    redis_client.delete(*redis_client.keys("lgc:sending:*") or ["-"])
    _send_again(celery_stack, "fickle", (first.checkpoint_id, first.step), "a", thread)
    if mode == "exit":  # ("async" stored a's step: the duplicate finds it done, runs nothing)
        wait_until(lambda: int(redis_client.get(f"calls:{thread}:a")) == 2, 10, 0.05, "a again")
    celery_stack.wait_until_quiet()  # and whatever the duplicate sent has run
    assert graph.get_state(config).state.data["log"] == ["a", "b"]
    assert [s.config.checkpoint_id for s in graph.get_state_history(config)] == history
    assert all("c" not in c.values.get("log", []) for c in celery_stack.saver.list(thread))


def test_a_forged_carried_header_injects_no_state(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """A node message whose ``lgc_carried`` header holds a checkpoint (a state of the
    publisher's choosing, as the carrier would write it) runs on the stored state: a message
    carries ids, never state (docs/security.md)."""
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread, durability="exit")
    redis_client.set(f"hold:{thread}:a", 1)
    handle = graph.start({"thread": thread}, config)
    wait_until(lambda: redis_client.get(f"started:{thread}:a"), 10, 0.01, "node a to start")
    first = celery_stack.saver.list(thread)[-1]
    forged = dataclasses.replace(first, values={**first.values, "log": ["forged"]})
    header = Carrier(celery_stack.app, celery_stack.saver.serializer)._dumps(
        Carried(forged, first.checkpoint_id, first.created_at)
    )
    task_id = celery_task_id(handle.run_id, first.checkpoint_id, "a")
    runtime = celery_stack.executor.runtime("slow")
    envelope = runtime.envelope(first, first.tasks[0])
    celery_stack.app.send_task(
        node_task_name("slow", "a"),
        kwargs=envelope.to_message(),
        task_id=task_id,
        headers={"lgc_carried": header},
    )
    redis_client.delete(f"hold:{thread}:a")
    assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b", "c"]
    celery_stack.wait_until_quiet()
    assert graph.get_state(config).state.data["log"] == ["a", "b", "c"]
    assert all("forged" not in s.state.data["log"] for s in graph.get_state_history(config))


@pytest.mark.parametrize("mode", ["exit", "async"])
def test_carried_two_copies_of_a_message_send_the_next_step_once(
    celery_stack: CeleryStack, thread: str, redis_client: Any, mode: str
) -> None:
    """a's message sent again (same task id, same header) while a runs: both copies run a and
    commit its step, and one of them sends b: b and c run once."""
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread, durability=mode)  # type: ignore[arg-type]
    redis_client.set(f"hold:{thread}:a", 1)
    handle = graph.start({"thread": thread}, config)
    wait_until(lambda: redis_client.get(f"started:{thread}:a"), 10, 0.01, "node a to start")
    first = celery_stack.saver.list(thread)[-1]
    envelope = celery_stack.executor.runtime("slow").envelope(first, first.tasks[0])
    celery_stack.app.send_task(
        node_task_name("slow", "a"),
        kwargs=envelope.to_message(),
        task_id=celery_task_id(handle.run_id, first.checkpoint_id, "a"),
        headers={"lgc_carried": True},
    )
    redis_client.delete(f"hold:{thread}:a")
    assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b", "c"]
    wait_until(lambda: int(redis_client.get(f"calls:{thread}:a") or 0) == 2, 10, 0.02, "a twice")
    celery_stack.wait_until_quiet()
    assert [int(redis_client.get(f"calls:{thread}:{n}") or 0) for n in "bc"] == [1, 1]
    assert graph.get_state(config).state.data["log"] == ["a", "b", "c"]


@pytest.mark.parametrize("mode", ["exit", "async"])
def test_carried_two_copies_of_a_later_step_send_the_next_step_once(
    celery_stack: CeleryStack, thread: str, redis_client: Any, mode: str
) -> None:
    """b's message (a step carried from a, not read from the store) sent again while b runs:
    one of the two copies sends c, which runs once ("async" sent it twice: each copy found the
    step's own checkpoint stored and went on)."""
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread, durability=mode)  # type: ignore[arg-type]
    redis_client.set(f"hold:{thread}:b", 1)
    # (c takes a while: a second message of c, were one sent, would find it running)
    handle = graph.start({"thread": thread, "sleep_c": 1.0}, config)
    wait_until(lambda: redis_client.get(f"started:{thread}:b"), 10, 0.01, "node b to start")
    first = celery_stack.saver.list(thread)[-1]
    _send_again(celery_stack, "slow", _carried_after(first.checkpoint_id, first.step), "b", thread)
    time.sleep(0.5)  # (the copy reaches a worker, and waits at b too)
    redis_client.delete(f"hold:{thread}:b")
    assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b", "c"]
    wait_until(lambda: int(redis_client.get(f"calls:{thread}:b") or 0) == 2, 10, 0.02, "b twice")
    celery_stack.wait_until_quiet()
    assert int(redis_client.get(f"started:{thread}:c") or 0) == 1
    assert graph.get_state(config).state.data["log"] == ["a", "b", "c"]


@pytest.mark.parametrize("mode", ["exit", "async"])
def test_carried_a_cancelled_run_stops_at_its_next_step_stored_and_resumable(
    celery_stack: CeleryStack, thread: str, redis_client: Any, mode: str
) -> None:
    """Cancelled while b runs: b's step is stored (exit: where the run stopped; async: it is
    stored after the cancel's mark, as in "sync"), c never starts, and a resume runs c."""
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread, durability=mode)  # type: ignore[arg-type]
    redis_client.set(f"hold:{thread}:b", 1)  # b waits until the run is cancelled
    handle = graph.start({"thread": thread}, config)
    wait_until(lambda: redis_client.get(f"started:{thread}:b"), 10, 0.01, "node b to start")
    assert handle.cancel() is True
    redis_client.delete(f"hold:{thread}:b")
    celery_stack.wait_until_quiet()

    assert redis_client.get(f"started:{thread}:c") is None  # stopped before c
    assert handle.status() == "cancelled"
    snapshot = graph.get_state(config)
    assert snapshot.next == ("c",)  # b's step, carried, was stored where the run stopped
    assert snapshot.state.data["log"] == ["a", "b"]
    record = celery_stack.saver.get_run(handle.run_id)
    assert record is not None and record.status is RunStatus.CANCELLED

    result = graph.invoke(GraphInput.resume(), config)
    assert result.data["log"] == ["a", "b", "c"]
    assert int(redis_client.get(f"calls:{thread}:b")) == 1


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_async_ends_alike_and_stores_every_step_sync_stores(
    celery_stack: CeleryStack, name: str, thread: str
) -> None:
    scenario = SCENARIOS[name]
    local = scenario.build().compile(
        CompileConfig(checkpoint_saver=MemorySaver(), **scenario.compile)
    )
    expected = run_calls(local, name, thread, "sync")
    remote = run_calls(celery_stack.graph(f"parity-{name}"), name, thread, "async")
    assert remote["outcomes"] == expected["outcomes"]
    assert remote["outputs"] == expected["outputs"]
    assert remote["state"] == expected["state"]
    assert remote["history"] == expected["history"]
    # stored in order: each checkpoint's parent is the one stored before it
    parents = list(reversed(remote["parents"]))
    assert all(parent == before[0] for before, (_, parent) in itertools.pairwise(parents))


def test_async_carries_each_step_and_stores_it_behind_the_send(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """A chain with "async": the next step's task reads its checkpoint in the result backend
    and stores no result of its own (every step is stored, as in "sync"); a follower streaming
    the run sees every step; nothing is left in the result backend once the run ended."""
    graph = celery_stack.graph("parity-chain")
    before = set(redis_client.scan_iter("lgc:carried:*")) | set(
        redis_client.scan_iter("lgc:stored:*")
    )
    streamed = {
        mode: [
            output.node
            for output in graph.stream(
                {"topic": "x"}, RunnableConfig(thread_id=f"{thread}-{mode}", durability=mode)
            )
        ]
        for mode in ("sync", "async")
    }
    assert streamed["async"] == streamed["sync"]
    assert streamed["async"][-4:-1] == ["a", "b", "c"]
    config = RunnableConfig(thread_id=f"{thread}-async", durability="async")
    history = list(reversed(graph.get_state_history(config)))
    assert [(s.step, s.node) for s in history] == [(-1, START), (0, "a"), (1, "b"), (2, "c")]
    run_id = _run_of(celery_stack, f"{thread}-async")
    celery_stack.wait_until_quiet()
    for snapshot in history[:-1]:
        task_id = celery_task_id(run_id, snapshot.config.checkpoint_id or "", snapshot.next[0])
        assert not redis_client.exists(f"celery-task-meta-{task_id}"), snapshot.next
    # (each step's checkpoint, stored behind the send, is the one its carried step computed)
    assert [s.config.checkpoint_id for s in history[1:]] == [
        carried_id(s.config.checkpoint_id or "") for s in history[:-1]
    ]
    left = set(redis_client.scan_iter("lgc:carried:*")) | set(
        redis_client.scan_iter("lgc:stored:*")
    )
    assert left == before


def test_async_duplicated_messages_apply_nothing_twice(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """Every message of a run with durability "async" delivered again (the carried ones with
    their header) once it ended: the stored state and history do not change."""
    graph = celery_stack.graph("slow")
    config = RunnableConfig(thread_id=thread, durability="async")
    state = graph.invoke({"thread": thread}, config)
    assert state.data["log"] == ["a", "b", "c"]
    history = [s.config.checkpoint_id for s in graph.get_state_history(config)]
    assert len(history) == 4
    stored = celery_stack.saver.list(thread)  # (newest first)
    first, after_a = stored[-1], stored[-2]
    _send_again(celery_stack, "slow", (first.checkpoint_id, first.step), "a", thread, False)
    _send_again(celery_stack, "slow", (after_a.checkpoint_id, after_a.step), "b", thread)
    celery_stack.wait_until_quiet()  # and whatever the duplicates sent has run
    assert graph.get_state(config).state.data == state.data
    assert [s.config.checkpoint_id for s in graph.get_state_history(config)] == history
    assert int(redis_client.get(f"calls:{thread}:c")) == 1
