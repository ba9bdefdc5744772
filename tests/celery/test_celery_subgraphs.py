"""Compiled subgraphs on Celery workers (SPEC §9): the child's nodes are tasks of their own,
the child's end commits the parent's step once, an interruption inside the child parks the
parent and a resume from another process resumes the child; graphs in
``apps/lgc_subgraphs.py`` (those of ``tests/test_subgraph_compiled.py``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from celery.result import AsyncResult
from lgc_subgraphs import (
    MERGED_RETRY_POLICY,
    SUB_RETRY_POLICY,
    sub_approval,
    sub_nested,
    sub_retry,
    sub_retry_merged,
    sub_streaming,
)

from celery_support import CeleryStack, run_client, wait_until
from langgraph_celery import (
    END,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    NodeError,
    NodeOutput,
    ReplaceAllWith,
    RunnableConfig,
    StreamingOutput,
    StreamMode,
)
from langgraph_celery.celery import RunHandle
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


def _retry_run(
    graph: CompiledGraph, thread: str, failures: int, raise_: str, durability: str
) -> Any:
    """``sub-retry``'s run on ``thread`` (its child's ``y`` failing ``failures`` times with
    ``raise_``): the final state, or the error's type and text."""
    inputs = {"thread": thread, "failures": failures, "raise": raise_}
    config = RunnableConfig(thread_id=thread, durability=durability)  # type: ignore[arg-type]
    try:
        return dict(graph.invoke(inputs, config, timeout=60).data)
    except NodeError as error:
        return type(error).__name__, error.node_id, error.error_type


@pytest.mark.parametrize(
    ("failures", "raise_", "durability"),
    [
        (2, "ValueError", "sync"),
        (3, "ValueError", "sync"),
        (1, "ConnectionError", "sync"),
        (2, "ValueError", "exit"),
        (3, "ValueError", "async"),
    ],
)
def test_a_subgraph_nodes_retry_policy_resumes_its_failed_child_as_in_process(
    celery_stack: CeleryStack,
    thread: str,
    redis_client: Any,
    monkeypatch: pytest.MonkeyPatch,
    failures: int,
    raise_: str,
    durability: str,
) -> None:
    """RetryPolicy on a compiled subgraph node (a wrap hook in process): the child run that
    failed is resumed at its failed step (``x`` runs once), up to ``max_attempts`` calls of the
    node, for the errors the policy retries; the same outcome in process and on the workers."""
    monkeypatch.setenv("LGC_REDIS_URL", celery_stack.settings["LGC_REDIS_URL"])
    local = sub_retry().compile(CompileConfig(checkpoint_saver=MemorySaver()))
    expected = _retry_run(local, f"{thread}-local", failures, raise_, durability)
    outcome = _retry_run(celery_stack.graph("sub-retry"), thread, failures, raise_, durability)

    def calls(on: str, node: str) -> int:
        return int(redis_client.get(f"calls:{on}:{node}"))

    if isinstance(expected, dict):  # (the nodes record their path: the graph id differs)
        expected = {k: v for k, v in expected.items() if not k.startswith("path_")}
        outcome = {k: v for k, v in outcome.items() if not k.startswith("path_")}
        expected["thread"] = thread
    assert outcome == expected
    retried = raise_ == "ValueError"
    attempts = min(failures + 1, SUB_RETRY_POLICY.max_attempts) if retried else 1
    for on in (f"{thread}-local", thread):
        assert (calls(on, "x"), calls(on, "y")) == (1, attempts)
    if failures < SUB_RETRY_POLICY.max_attempts and retried:
        assert outcome["messages"] == ["[a]", "[x]", f"[y{attempts}]", "[z]"]
        return
    assert outcome == ("NodeError", "y", raise_)
    # the failed step's task sent again (a redelivery, the reaper): no further attempt
    runtime = celery_stack.executor.runtime("sub-retry")
    assert runtime is not None
    step = next(c for c in celery_stack.saver.list(thread) if c.next == ("sub",))
    sent = celery_stack.app.send_task(
        node_task_name("sub-retry", "sub"),
        kwargs=runtime.envelope(step, step.tasks[0]).to_message(),
    )
    assert sent.get(timeout=20)["status"] == "stopped"
    assert calls(thread, "y") == attempts
    assert celery_stack.graph("sub-retry").get_state(RunnableConfig(thread_id=thread)).next == (
        "sub",
    )


@pytest.mark.parametrize("failures", [2, 3])
def test_a_merged_subgraphs_retry_policy_retries_its_nodes_as_in_process(
    celery_stack: CeleryStack,
    thread: str,
    redis_client: Any,
    monkeypatch: pytest.MonkeyPatch,
    failures: int,
) -> None:
    """The same policy naming a merged subgraph's id: each merged node's, in process and as
    Celery retries of its task."""
    monkeypatch.setenv("LGC_REDIS_URL", celery_stack.settings["LGC_REDIS_URL"])
    local = sub_retry_merged().compile(CompileConfig(checkpoint_saver=MemorySaver()))
    expected = _retry_run(local, f"{thread}-local", failures, "ValueError", "sync")
    graph = celery_stack.graph("sub-retry-merged")
    outcome = _retry_run(graph, thread, failures, "ValueError", "sync")
    if failures < MERGED_RETRY_POLICY.max_attempts:
        assert outcome["messages"] == expected["messages"] == ["[a]", "[x]", "[y3]", "[z]"]
    else:
        assert outcome == expected == ("NodeError", "sub-y", "ValueError")
    attempts = min(failures + 1, MERGED_RETRY_POLICY.max_attempts)
    for on in (f"{thread}-local", thread):
        calls = [int(redis_client.get(f"calls:{on}:{node}")) for node in ("x", "y")]
        assert calls == [1, attempts]


def test_a_resume_update_reaches_the_parked_childs_own_state_as_in_process(
    celery_stack: CeleryStack, thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resume's update is merged into the parked child's state (which holds what NODE3.1
    appended): a list it replaces with the parent's own loses the child's items, as in process
    (the parent's state does not change, so its changes would say nothing)."""
    monkeypatch.setenv("LGC_REDIS_URL", celery_stack.settings["LGC_REDIS_URL"])

    def run(graph: CompiledGraph, on: str) -> dict[str, Any]:
        config = RunnableConfig(thread_id=on)
        graph.invoke({"thread": on, "ask": True}, config, timeout=60)
        reset = ReplaceAllWith(["[NODE1]", "[NODE2]"])  # (the parent's list as it is)
        update = {"resume_subgraph": True, "messages": reset}
        state = graph.invoke(GraphInput.resume(update), config, timeout=60)
        return {k: v for k, v in state.data.items() if not k.startswith("path_")}

    local = sub_approval().compile(CompileConfig(checkpoint_saver=MemorySaver()))
    expected = run(local, f"{thread}-local")
    assert expected["messages"] == [
        "[NODE1]",
        "[NODE2]",
        "[NODE3.2]",
        "[NODE3.3]",
        "[NODE3.4]",
        "[NODE4]",
        "[NODE5]",
    ]
    assert run(celery_stack.graph("sub-approval"), thread) == {**expected, "thread": thread}


def test_a_child_thread_id_past_255_characters_fails_the_run(
    celery_stack: CeleryStack, thread: str
) -> None:
    """The child's thread id (the parent's plus "/sub") past 255 characters: the subgraph node
    fails with the ValueError that names it, once, as in process (it used to fail its task
    every time the reaper sent it again, the run running for ever)."""
    long_thread = thread.ljust(252, "t")  # (+ "/sub": 256)
    graph = celery_stack.graph("sub-fanout")
    config = RunnableConfig(thread_id=long_thread)
    with pytest.raises(NodeError) as caught:
        graph.invoke({"thread": long_thread}, config, timeout=30)
    assert (caught.value.node_id, caught.value.error_type) == ("sub", "ValueError")
    assert "thread_id is 256 characters long" in str(caught.value)
    latest = celery_stack.saver.get(long_thread)
    assert latest is not None and latest.next == ("sub", "sibling")
    assert RunHandle.from_run_id(graph, latest.run_id).status() == "failed"


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
