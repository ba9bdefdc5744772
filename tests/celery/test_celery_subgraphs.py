"""Compiled subgraphs on Celery workers (SPEC §9): the child's nodes are tasks of their own,
the child's end commits the parent's step once, an interruption inside the child parks the
parent and a resume from another process resumes the child; graphs in
``apps/lgc_subgraphs.py`` (those of ``tests/test_subgraph_compiled.py``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from celery.result import AsyncResult
from lgc_subgraphs import sub_nested, sub_streaming

from celery_support import CeleryStack, run_client, wait_until
from langgraph_celery import (
    END,
    CompileConfig,
    GraphInput,
    NodeOutput,
    RunnableConfig,
    StreamingOutput,
    StreamMode,
)
from langgraph_celery.checkpoint import CheckpointKind, MemorySaver, RunStatus
from langgraph_celery.worker.names import celery_task_id, node_task_name, run_outputs_channel

FINAL = [
    "[NODE1]",
    "[NODE2]",
    "[NODE3.1]",
    "[NODE3.2]",
    "[NODE3.3]",
    "[NODE3.4<myNewValue>]",
    "[NODE4]",
    "[NODE5<myNewValue>]",
]


def task_result(stack: CeleryStack, thread: str, node: str) -> Any:
    """The Celery result of ``node``'s task on ``thread`` (its step's checkpoint found in the
    thread's history)."""
    for checkpoint in stack.saver.list(thread):
        for task in checkpoint.tasks:
            if task.node == node:
                task_id = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, task.id)
                return AsyncResult(task_id, app=stack.app).get(timeout=10)
    raise AssertionError(f"no task of {node!r} on thread {thread!r}")


def test_nested_subgraphs_run_their_nodes_as_tasks(celery_stack: CeleryStack, thread: str) -> None:
    graph = celery_stack.graph("sub-nested")
    state = graph.invoke({"thread": thread}, RunnableConfig(thread_id=thread), timeout=60)
    assert state.value("messages") == [
        "[main1]",
        "[bar1]",
        "[foo1]",
        "[foo2]",
        "[foo3]",
        "[bar2]",
        "[main2]",
    ]
    # node_path: the root graph's id, the subgraph nodes, the node; each child its graph id
    assert state.value("path_main1") == ["sub-nested", "main1", "sub-nested"]
    assert state.value("path_bar1") == [
        "sub-nested",
        "subgraph1",
        "bar1",
        "sub-nested/subgraph1",
    ]
    assert state.value("path_foo2") == [
        "sub-nested",
        "subgraph1",
        "subgraph2",
        "foo2",
        "sub-nested/subgraph1/subgraph2",
    ]
    # the parent's hooks around subgraph1: the child saw the before hook's change, the after
    # hook saw the child's changes
    assert state.value("before_bar1") == "subgraph1"
    assert state.value("after_saw") == ["[bar1]", "[foo1]", "[foo2]", "[foo3]", "[bar2]"]
    # as in process
    local = sub_nested().compile(
        CompileConfig(checkpoint_saver=MemorySaver(), graph_id="sub-nested")
    )
    expected = local.invoke({"thread": thread}, RunnableConfig(thread_id=thread))
    for key in ("messages", "before_bar1", "before_foo1", "after_saw", "path_foo2"):
        assert state.value(key) == expected.value(key), key
    # the subgraph nodes' tasks only started their child runs; the child's nodes ran as
    # tasks of their own, on the child threads named after the parent's thread and path
    assert task_result(celery_stack, thread, "subgraph1")["status"] == "child-started"
    inner = f"{thread}/subgraph1/subgraph2"
    assert task_result(celery_stack, inner, "foo2")["status"] == "merged"
    assert task_result(celery_stack, f"{thread}/subgraph1", "subgraph2")["status"] == (
        "child-started"
    )
    assert celery_stack.saver.get(inner).values["messages"][-1] == "[foo3]"
    # what Flower shows of a child's node task: its graph (the subgraph's path) and its thread
    # (the parent's thread and the subgraph's path)
    foo2 = next(c for c in celery_stack.saver.list(inner) if c.next == ("foo2",))
    shown = AsyncResult(
        celery_task_id(foo2.run_id, foo2.checkpoint_id, "foo2"), app=celery_stack.app
    )
    assert shown.name == node_task_name("sub-nested/subgraph1/subgraph2", "foo2")
    assert shown.kwargs["thread_id"] == inner
    assert shown.kwargs["graph_id"] == "sub-nested/subgraph1/subgraph2"
    assert node_task_name("sub-nested/subgraph1/subgraph2", "foo2") in celery_stack.app.tasks
    # every run (the parent's and both children's) completed
    runs = celery_stack.saver.list_runs(status=RunStatus.RUNNING, limit=500)
    assert not [run for run in runs if run.thread_id.startswith(thread)]


def test_changes_reach_the_parent_once_beside_a_sibling(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("sub-fanout")
    state = graph.invoke({"thread": thread}, RunnableConfig(thread_id=thread), timeout=60)
    assert state.value("messages") == ["[a]", "[c1]", "[c2]", "[sibling]", "[z]"]


def test_an_interruption_in_the_child_parks_the_parent_and_another_process_resumes_it(
    celery_stack: CeleryStack, thread: str
) -> None:
    graph = celery_stack.graph("sub-approval")
    config = RunnableConfig(thread_id=thread)
    stream = graph.stream({"thread": thread, "ask": True}, config, timeout=60)
    list(stream)
    interruption = stream.result.as_interruption_metadata()
    assert interruption.node_id == "NODE3.2"
    assert interruption.reason == "approve?"
    assert interruption.metadata["subgraph_path"] == ["NODE3", "NODE3.2"]
    assert interruption.metadata["path"] == ["sub-approval", "NODE3", "NODE3.2"]
    parent_messages = graph.get_state(config).state.value("messages")
    # the interruption carries the child's state where it stopped, as in process
    assert interruption.state.value("messages") == [*parent_messages, "[NODE3.1]"]
    assert graph.get_state(config).next == ("NODE3",)
    parked = celery_stack.saver.get(f"{thread}/NODE3")
    assert parked is not None and parked.next == ("NODE3.2",)

    update = {"resume_subgraph": True, "newAttribute": "<myNewValue>"}
    code = (
        "from langgraph_celery import GraphInput, RunnableConfig\n"
        f"config = RunnableConfig(thread_id={thread!r})\n"
        f"handle = graphs['sub-approval'].start(GraphInput.resume({update!r}), config)\n"
        "print(json.dumps(handle.run_id))\n"
    )
    run_id = run_client(celery_stack.settings, code)
    assert isinstance(run_id, str)

    def done() -> bool:
        latest = celery_stack.saver.get(thread)
        return latest is not None and not latest.next and latest.kind is CheckpointKind.LOOP

    wait_until(done, timeout=60, what="the resumed run to complete")
    assert graph.get_state(config).state.value("messages") == FINAL


def test_a_child_node_killed_mid_task_runs_again_and_applies_once(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """kill -9 of the worker process running a child's node: the message comes back, the node
    runs again, the child's changes reach the parent once."""
    graph = celery_stack.graph("sub-approval")
    config = RunnableConfig(thread_id=thread)
    state = graph.invoke(
        {"thread": thread, "die_once": True, "newAttribute": "<myNewValue>"}, config, timeout=90
    )
    assert state.value("messages") == FINAL
    assert int(redis_client.get(f"calls:{thread}:NODE3.3")) == 2


def test_a_duplicated_subgraph_task_changes_nothing(celery_stack: CeleryStack, thread: str) -> None:
    graph = celery_stack.graph("sub-approval")
    config = RunnableConfig(thread_id=thread)
    state = graph.invoke({"thread": thread, "newAttribute": "<myNewValue>"}, config, timeout=60)
    assert state.value("messages") == FINAL
    history = celery_stack.saver.list(thread)
    child_history = celery_stack.saver.list(f"{thread}/NODE3")
    step = next(c for c in history if c.next == ("NODE3",))
    runtime = celery_stack.executor.runtime("sub-approval")
    assert runtime is not None
    envelope = runtime.envelope(step, step.tasks[0])
    # the same message again (a duplicate delivery, a re-dispatch): nothing new runs
    sent = celery_stack.app.send_task(
        node_task_name("sub-approval", "NODE3"), kwargs=envelope.to_message()
    )
    assert sent.get(timeout=20)["status"] == "duplicate"
    assert len(celery_stack.saver.list(thread)) == len(history)
    assert len(celery_stack.saver.list(f"{thread}/NODE3")) == len(child_history)
    assert graph.get_state(config).state.value("messages") == FINAL
    # a new run on the thread runs a fresh child run (its state is not merged twice)
    again = graph.invoke(GraphInput.args({"thread": thread}), config, timeout=60)
    assert again.value("messages") == FINAL + FINAL


def test_cancelling_the_parent_cancels_its_child_run(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    graph = celery_stack.graph("sub-slow")
    config = RunnableConfig(thread_id=thread)
    redis_client.set(f"hold:{thread}:s1", 1)
    try:
        handle = graph.start({"thread": thread}, config)
        wait_until(lambda: redis_client.get(f"started:{thread}:s1") is not None, 30, 0.01, "s1")
        assert handle.cancel() is True
    finally:
        redis_client.delete(f"hold:{thread}:s1")
    assert handle.status() == "cancelled"
    child = celery_stack.saver.list_runs(graph_id="sub-slow/sub", limit=500)
    ours = [run for run in child if run.thread_id == f"{thread}/sub"]
    assert [run.status for run in ours] == [RunStatus.CANCELLED]

    def child_stopped() -> bool:  # s1 finishes; s2's task sees the cancel and stops
        latest = celery_stack.saver.get(f"{thread}/sub")
        return latest is not None and latest.next == ("s2",)

    wait_until(child_stopped, 30, 0.05, "the child to stop before s2")
    assert redis_client.get(f"started:{thread}:s2") is None
    assert graph.get_state(config).next == ("sub",)
    # resumable: the child continues where it stopped (s1 does not run again)
    state = graph.invoke(GraphInput.resume(), config, timeout=60)
    assert state.value("messages") == ["[s1]", "[s2]", "[after]"]
    assert int(redis_client.get(f"started:{thread}:s1")) == 1


def streamed(outputs: list[NodeOutput]) -> list[tuple[str, str, Any, Any, Any]]:
    """What a client saw: each output's kind, node, chunk, the state's messages and update."""
    return [
        (
            type(o).__name__,
            o.node,
            o.chunk if isinstance(o, StreamingOutput) else None,
            o.state.value("messages") if o.state is not None else None,
            o.update,
        )
        for o in outputs
    ]


@pytest.mark.parametrize("durability", ["sync", "exit", "async"])
def test_a_child_runs_outputs_stream_to_the_parents_clients_as_in_process(
    celery_stack: CeleryStack, thread: str, durability: Any
) -> None:
    """The child's and the grandchild's node outputs and chunks reach the clients streaming the
    root run (``stream()``; ``RunHandle.stream()`` follows the same way), in order, each once,
    with the child's node ids and state: as in process, in every durability mode (with "exit"
    and "async" a step that starts a child run, and the child's steps, are stored before the
    next step is sent: not carried, not stored behind)."""
    graph = celery_stack.graph("sub-streaming")
    local = sub_streaming().compile(
        CompileConfig(checkpoint_saver=MemorySaver(), graph_id="sub-streaming")
    )
    for mode in (StreamMode.VALUES, StreamMode.UPDATES):
        run = f"{thread}-{mode.value}"
        config = RunnableConfig(thread_id=run, stream_mode=mode, durability=durability)
        expected = streamed(list(local.stream({"thread": run}, config)))
        assert ("StreamingOutput", "i1", "i1-1", ["[top]", "[o1]"], None) in expected
        assert [e[1] for e in expected if e[0] == "NodeOutput"] == [
            "__START__",
            "top",
            "o1",
            "o1",
            "i1",
            "i1",
            "i2",
            "inner",
            "o2",
            "outer",
            "tail",
            "tail",
            "__END__",
        ]
        assert streamed(list(graph.stream({"thread": run}, config, timeout=60))) == expected


def test_lg4j_compiled_subgraph_stream_cancelled_inside_the_child(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """CancellationTest.compiledSubGraphCancelTest on workers: the parent's stream cancelled
    while a node of the child runs ends before END with an empty result; the child run is
    cancelled with it (its running node finishes, the next never starts)."""
    graph = celery_stack.graph("sub-slow")
    config = RunnableConfig(thread_id=thread)
    redis_client.set(f"hold:{thread}:s1", 1)
    try:
        stream = graph.stream({"thread": thread}, config, timeout=60)
        outputs: list[str] = []

        def follow() -> None:
            outputs.extend(output.node for output in stream)

        follower = threading.Thread(target=follow)
        follower.start()
        wait_until(lambda: redis_client.get(f"started:{thread}:s1") is not None, 30, 0.01, "s1")
        stream.cancel()

        def cancelled() -> bool:  # (the follower carries the cancel out when it wakes)
            runs = celery_stack.saver.list_runs(graph_id="sub-slow", limit=500)
            return any(r.status is RunStatus.CANCELLED for r in runs if r.thread_id == thread)

        wait_until(cancelled, 30, 0.01, "the stream's cancel")
    finally:
        redis_client.delete(f"hold:{thread}:s1")
    follower.join(60)
    assert not follower.is_alive()
    assert stream.is_cancelled() and stream.result.is_empty()
    assert outputs[-1] != END and "after" not in outputs

    def child_stopped() -> bool:
        latest = celery_stack.saver.get(f"{thread}/sub")
        return latest is not None and latest.next == ("s2",)

    wait_until(child_stopped, 30, 0.05, "the child to stop before s2")
    runs = celery_stack.saver.list_runs(graph_id="sub-slow/sub", limit=500)
    assert [r.status for r in runs if r.thread_id == f"{thread}/sub"] == [RunStatus.CANCELLED]
    assert redis_client.get(f"started:{thread}:s2") is None


def test_a_run_handles_stream_gets_the_child_runs_outputs(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """``RunHandle.stream()`` attached while the child's first node runs: the child's outputs
    (``s1``, ``s2``, with the child's state) come before the subgraph node's, each once."""
    graph = celery_stack.graph("sub-slow")
    redis_client.set(f"hold:{thread}:s1", 1)
    try:
        handle = graph.start({"thread": thread}, RunnableConfig(thread_id=thread))
        wait_until(lambda: redis_client.get(f"started:{thread}:s1") is not None, 30, 0.01, "s1")
        followed: list[NodeOutput] = []
        follower = threading.Thread(target=lambda: followed.extend(handle.stream()))
        follower.start()
        channel = run_outputs_channel(handle.run_id)

        def subscribed() -> bool:  # (the follower listens to the run's outputs channel)
            return bool(dict(redis_client.pubsub_numsub(channel)).get(channel.encode()))

        wait_until(subscribed, 30, 0.01, "the follower to subscribe")
    finally:
        redis_client.delete(f"hold:{thread}:s1")
    follower.join(60)
    assert not follower.is_alive()
    assert [(o.node, o.state.value("messages")) for o in followed] == [
        ("s1", ["[s1]"]),
        ("s2", ["[s1]", "[s2]"]),
        ("sub", ["[s1]", "[s2]"]),
        ("after", ["[s1]", "[s2]", "[after]"]),
        ("__END__", ["[s1]", "[s2]", "[after]"]),
    ]
