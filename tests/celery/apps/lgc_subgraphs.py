"""Graphs with compiled subgraphs for the Celery tests (``test_celery_subgraphs.py``): the
graphs of LangGraph4j's ``CompiledSubGraphTest`` (see ``tests/test_subgraph_compiled.py``), the
children compiled without a saver or an executor (the parent's serve them)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompiledGraph,
    GraphInterrupt,
    NodeError,
    NodeOutput,
    RetryPolicy,
    RunnableConfig,
    StateGraph,
)

SCHEMA = {"messages": Channels.appender()}


def _redis() -> Any:
    import redis

    return redis.Redis.from_url(os.environ["LGC_REDIS_URL"])


def _count_call(state: AgentState, node_id: str) -> int:
    """Count a call of ``node_id`` on the state's thread (Redis ``calls:<thread>:<node>``)."""
    client = _redis()
    try:
        return int(client.incr(f"calls:{state.value('thread')}:{node_id}"))
    finally:
        client.close()


def node(node_id: str, attribute: str | None = None) -> Callable[..., Any]:
    """Appends ``[id<attribute value>]``; records its ``node_path`` and ``graph_id``, and the
    state's ``before`` (set by a hook) if any."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == node_id
        value = state.value(attribute, "") if attribute is not None else ""
        update = {
            "messages": f"[{node_id}{value}]",
            f"path_{node_id}": [*config.node_path, str(config.graph_id)],
        }
        if state.value("before"):
            update[f"before_{node_id}"] = state.value("before")
        return update

    return action


def asking(node_id: str) -> Callable[..., Any]:
    """Interrupts while ``ask`` is set and ``resume_subgraph`` is not."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if state.value("ask") and not state.value("resume_subgraph"):
            raise GraphInterrupt("approve?", {"path": list(config.node_path)})
        return {"messages": f"[{node_id}]"}

    return action


def dying_once(node_id: str) -> Callable[..., Any]:
    """With ``die_once``, kills its worker process (SIGKILL) on its first call (counted in
    Redis under ``calls:<thread>:<node>``)."""

    def action(state: AgentState) -> dict[str, Any]:
        calls = _count_call(state, node_id)
        if state.value("die_once") and calls == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"messages": f"[{node_id}]"}

    return action


def holding(node_id: str) -> Callable[..., Any]:
    """Counts its starts (``started:<thread>:<node>``), then waits while the Redis key
    ``hold:<thread>:<node>`` exists (at most 60 s)."""

    def action(state: AgentState) -> dict[str, Any]:
        thread = state.value("thread")
        client = _redis()
        try:
            client.incr(f"started:{thread}:{node_id}")
            deadline = time.monotonic() + 60
            while client.exists(f"hold:{thread}:{node_id}") and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            client.close()
        return {"messages": f"[{node_id}]"}

    return action


def flaky(node_id: str) -> Callable[..., Any]:
    """Raises the state's ``raise`` (``ValueError`` or ``ConnectionError``) on its first
    ``failures`` calls on the thread (counted in Redis under ``calls:<thread>:<node>``), then
    appends ``[id<call>]``."""

    def action(state: AgentState) -> dict[str, Any]:
        calls = _count_call(state, node_id)
        if calls <= int(state.value("failures", 0)):
            kind = {"ConnectionError": ConnectionError}.get(state.value("raise"), ValueError)
            raise kind(f"{node_id} failed on call {calls}")
        return {"messages": f"[{node_id}{calls}]"}

    return action


def _chain(names: list[tuple[str, Any]]) -> StateGraph:
    graph = StateGraph(SCHEMA)
    previous = START
    for name, action in names:
        graph.add_node(name, action).add_edge(previous, name)
        previous = name
    return graph.add_edge(previous, END)


def approval_child() -> CompiledGraph:
    return _chain(
        [
            ("NODE3.1", node("NODE3.1")),
            ("NODE3.2", asking("NODE3.2")),
            ("NODE3.3", dying_once("NODE3.3")),
            ("NODE3.4", node("NODE3.4", "newAttribute")),
        ]
    ).compile()


def sub_approval() -> StateGraph:
    """NODE1 -> NODE2 -> NODE3 (the compiled child) -> NODE4 -> NODE5<newAttribute>."""
    return _chain(
        [
            ("NODE1", node("NODE1")),
            ("NODE2", node("NODE2")),
            ("NODE3", approval_child()),
            ("NODE4", node("NODE4")),
            ("NODE5", node("NODE5", "newAttribute")),
        ]
    )


def sub_nested() -> StateGraph:
    """testCompiledSubGraphTracking: main1 -> subgraph1 (bar1 -> subgraph2 (foo1..3) -> bar2)
    -> main2, three levels; hooks of the parent around ``subgraph1``."""
    sub_sub_graph = _chain([(f"foo{i}", node(f"foo{i}")) for i in (1, 2, 3)]).compile()
    sub_graph = _chain(
        [("bar1", node("bar1")), ("subgraph2", sub_sub_graph), ("bar2", node("bar2"))]
    ).compile()
    graph = _chain([("main1", node("main1")), ("subgraph1", sub_graph), ("main2", node("main2"))])
    # the parent's hooks around the subgraph node: the before hook's change reaches the child,
    # the after hook sees the child's changes
    graph.add_before_call_node_hook("subgraph1", lambda n, s, c: {"before": n})
    graph.add_after_call_node_hook(
        "subgraph1", lambda n, s, c, result: {**result, "after_saw": result.get("messages")}
    )
    return graph


def sub_fanout() -> StateGraph:
    """a -> (sub | sibling) -> z: the child's changes and a sibling's in one step."""
    child = _chain([("c1", node("c1")), ("c2", node("c2"))]).compile()
    return (
        StateGraph(SCHEMA)
        .add_node("a", node("a"))
        .add_node("sub", child)
        .add_node("sibling", node("sibling"))
        .add_node("z", node("z"))
        .add_edge(START, "a")
        .add_edge("a", "sub")
        .add_edge("a", "sibling")
        .add_edge(["sub", "sibling"], "z")
        .add_edge("z", END)
    )


def _value_errors(error: BaseException) -> bool:
    return isinstance(error, NodeError) and error.error_type == "ValueError"


#: The RetryPolicy of ``sub_retry``'s subgraph node: a child run that failed with a ValueError.
SUB_RETRY_POLICY = RetryPolicy(_value_errors, max_attempts=3, retry_delay=0.05, jitter=False)


def sub_retry() -> StateGraph:
    """a -> sub (x -> y, :func:`flaky`) -> z, with :data:`SUB_RETRY_POLICY` on ``sub``: a
    failed child run is resumed at its failed step, as in process."""
    child = _chain([("x", dying_once("x")), ("y", flaky("y"))]).compile()
    graph = _chain([("a", node("a")), ("sub", child), ("z", node("z"))])
    return graph.add_wrap_call_node_hook("sub", SUB_RETRY_POLICY.as_hook())


#: The same for a merged subgraph (its nodes raise their own errors).
MERGED_RETRY_POLICY = RetryPolicy(ValueError, max_attempts=3, retry_delay=0.05, jitter=False)


def sub_retry_merged() -> StateGraph:
    """:func:`sub_retry` with the child merged: the policy naming ``sub`` is each merged
    node's (``sub-y`` retries in place, as Celery retries of its task)."""
    child = _chain([("x", dying_once("x")), ("y", flaky("y"))])
    graph = _chain([("a", node("a")), ("sub", child), ("z", node("z"))])
    return graph.add_wrap_call_node_hook("sub", MERGED_RETRY_POLICY.as_hook())


def sub_slow() -> StateGraph:
    """sub (s1 -> s2, both :func:`holding`) -> after."""
    child = _chain([("s1", holding("s1")), ("s2", holding("s2"))]).compile()
    return _chain([("sub", child), ("after", node("after"))])


def streaming_node(node_id: str) -> Callable[..., Any]:
    """Streams two chunks (``<id>-0``, ``<id>-1``), then appends ``[id]``; emits its path."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        config.emit(NodeOutput(node_id, state))

        def chunks() -> Any:
            yield f"{node_id}-0"
            yield f"{node_id}-1"
            return {"messages": f"[{node_id}]"}

        return {"out": chunks()}

    return action


def sub_streaming() -> StateGraph:
    """top -> outer (o1 (streams) -> inner (i1 (streams) -> i2) -> o2) -> tail (streams): the
    child's and grandchild's outputs reach the root run's stream."""
    inner = _chain([("i1", streaming_node("i1")), ("i2", node("i2"))]).compile()
    outer = _chain([("o1", streaming_node("o1")), ("inner", inner), ("o2", node("o2"))]).compile()
    return _chain([("top", node("top")), ("outer", outer), ("tail", streaming_node("tail"))])


#: graph_id -> (builder, compile options), merged into ``lgc_graphs.GRAPHS``.
SUBGRAPH_GRAPHS: Mapping[str, tuple[Callable[[], StateGraph], Mapping[str, Any]]] = {
    "sub-approval": (sub_approval, {}),
    "sub-nested": (sub_nested, {}),
    "sub-fanout": (sub_fanout, {}),
    "sub-slow": (sub_slow, {}),
    "sub-retry": (sub_retry, {}),
    "sub-retry-merged": (sub_retry_merged, {}),
    "sub-streaming": (sub_streaming, {}),
}
