"""The Celery app of the chaos tests: ``celery -A chaos_app worker`` imports it.

Everything comes from environment variables (:data:`ENV_KEYS`), so the test process and the
worker subprocesses build the same app, saver and graphs: the workers at import (module
attribute ``app``), the test process (and the resume-race children) by calling :func:`build`.

Graphs (every node appends its name to the ``log`` appender channel, so an update applied twice
shows as a repeated name):

- ``chain``: START -> a -> b -> c -> END (one task per step: the compare-and-set path);
- ``fan``: START -> a -> (b | c) -> d -> END (b and c in one step: the pending-writes path);
- ``gate``: ``chain`` with ``interrupt_before=("b",)`` (parks after ``a``).

Each node reports to the side-channel Redis db (``CHAOS_SIDE_URL``): ``RPUSH started:<thread>
"<node>:<pid>"`` when it starts (so a test knows which pool process to kill), then it sleeps
``state["sleep"][node]`` seconds, then ``INCR finished:<thread>:<node>``.

Chaos hook: a node message of a thread whose id starts with ``dup-`` is published twice (same
kwargs, same Celery task id), wherever it is sent from (client, worker or reaper).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from app_kit import AppBundle, compile_graphs, make_app
from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.celery import CeleryExecutor

#: Environment variables the app reads.
ENV_KEYS = (
    "CHAOS_BROKER_URL",  # broker and result backend (Redis db 9)
    "CHAOS_SIDE_URL",  # Redis db the nodes report their pid and progress to
    "CHAOS_DB_URL",  # the PostgreSQL database of the checkpoints (fresh for the chaos tests)
    "CHAOS_TABLE_PREFIX",  # the SqlSaver table prefix (one per test module)
    "CHAOS_QUEUE",  # the default queue
    "CHAOS_STALLED_AFTER",  # seconds without a checkpoint before the reaper re-dispatches
)

#: Thread ids with this prefix get every node message published twice.
DUPLICATE_PREFIX = "dup-"

Action = Callable[..., Any]

_side_client: Any = None


def side() -> Any:
    """The side-channel Redis client of this process (redis-py pools are fork-safe)."""
    global _side_client
    if _side_client is None:
        import redis

        _side_client = redis.Redis.from_url(os.environ["CHAOS_SIDE_URL"], socket_timeout=10)
    return _side_client


def node(name: str) -> Action:
    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        client = side()
        thread = config.thread_id
        client.rpush(f"started:{thread}", f"{name}:{os.getpid()}")
        delay = float((state.value("sleep") or {}).get(name, 0))
        if delay:
            time.sleep(delay)
        client.incr(f"finished:{thread}:{name}")
        return {"log": [name]}

    return action


def _graph(nodes: tuple[str, ...]) -> StateGraph:
    graph = StateGraph({"log": Channels.appender()})
    for name in nodes:
        graph.add_node(name, node(name))
    return graph


def chain() -> StateGraph:
    graph = _graph(("a", "b", "c"))
    return graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)


def fan() -> StateGraph:
    graph = _graph(("a", "b", "c", "d"))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    return graph.add_edge(["b", "c"], "d").add_edge("d", END)


#: graph_id -> (builder, compile options)
GRAPHS: dict[str, tuple[Callable[[], StateGraph], Mapping[str, Any]]] = {
    "chain": (chain, {}),
    "fan": (fan, {}),
    "gate": (chain, {"interrupt_before": ("b",)}),
}


def _duplicate_node_messages(executor: CeleryExecutor) -> None:
    """Chaos: publish every node message of a ``dup-`` thread twice (same kwargs, same id)."""
    send = executor._send_node

    def send_twice(envelope: Any, task: Any, carried: bool = False, parent: Any = None) -> None:
        send(envelope, task, carried, parent)
        if envelope.thread_id.startswith(DUPLICATE_PREFIX):
            send(envelope, task, carried, parent)

    executor._send_node = send_twice  # type: ignore[method-assign]


def build(settings: Mapping[str, str]) -> AppBundle:
    app, saver = make_app("chaos_app", settings, "CHAOS")  # (its broker is its backend)
    stalled_after = float(settings.get("CHAOS_STALLED_AFTER") or 2.0)
    executor = CeleryExecutor(app, stalled_after=stalled_after, reap_interval=stalled_after / 2)
    _duplicate_node_messages(executor)
    graphs = compile_graphs(
        saver, [(gid, builder, executor, options) for gid, (builder, options) in GRAPHS.items()]
    )
    return AppBundle(app, saver, executor, graphs)


def settings_from_env() -> dict[str, str]:
    return {key: os.environ[key] for key in ENV_KEYS if key in os.environ}


bundle: Any = build(settings_from_env()) if "CHAOS_BROKER_URL" in os.environ else None
app: Any = bundle.app if bundle is not None else None
