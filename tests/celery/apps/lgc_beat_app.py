"""The Celery app of the beat tests (``tests/celery/test_celery_beat.py``): the reaper, interrupt
deadlines and scheduled runs.  ``celery -A lgc_beat_app worker`` and ``celery -A lgc_beat_app
beat`` import it; the test process calls :func:`build` with the same settings.

Short maintenance intervals (:data:`STALLED_AFTER`, :data:`REAP_INTERVAL`,
:data:`INTERRUPT_TIMEOUT`) keep the tests fast.  Executors on the one app:

- ``executor``: graphs ``chain`` (a -> b -> c), ``fan`` (a -> b | c -> d), ``gate`` (a -> gate ->
  b; ``gate`` raises ``GraphInterrupt`` with ``{"timeout": state["timeout"]}`` until approved or
  expired) and ``boom`` (its node fails);
- ``held``: ``held-chain`` and ``held-fan``, whose node ``b`` goes to ``LGC_HELD_QUEUE``, a queue
  no worker consumes unless a test says so (``add_consumer``): a message a test can lose;
- ``timed``: ``timed-review`` (the chain with ``interrupt_before=("b",)``) with
  ``interrupt_timeout``.

``LGC_BEAT_SCHEDULES`` (optional, JSON list of ``{"name", "graph", "every", "input",
"thread_id"}``) adds ``schedule_run`` entries, for the beat process.

Every node appends its name to ``log`` and counts its starts and completed calls in Redis
(``started:<thread>:<node>``, ``calls:<thread>:<node>``, ``<thread>`` from the state), sleeping
``state["sleep_<node>"]`` seconds in between.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app_kit import AppBundle, compile_graphs, make_app
from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    GraphInterrupt,
    StateGraph,
)
from langgraph_celery.beat.reaper import TIMEOUT_KEY
from langgraph_celery.celery import CeleryExecutor

ENV_KEYS = (
    "LGC_BROKER_URL",  # the broker (Redis db 10)
    "LGC_BACKEND_URL",  # the result backend (Redis db 10)
    "LGC_DB_URL",  # the PostgreSQL database of the checkpoints
    "LGC_TABLE_PREFIX",  # the SqlSaver table prefix
    "LGC_QUEUE",  # the default queue
    "LGC_HELD_QUEUE",  # where node ``b`` of the ``held-*`` graphs goes
    "LGC_REDIS_URL",  # Redis db 10, for the nodes' counters
)

STALLED_AFTER = 2.0
REAP_INTERVAL = 0.5
INTERRUPT_TIMEOUT = 1.0

Action = Callable[[AgentState], dict[str, Any]]


def _redis() -> Any:
    import redis

    return redis.Redis.from_url(os.environ["LGC_REDIS_URL"])


def counted(name: str, result: Callable[[AgentState], dict[str, Any]] | None = None) -> Action:
    def action(state: AgentState) -> dict[str, Any]:
        thread = state.value("thread")
        client = _redis()
        try:
            client.incr(f"started:{thread}:{name}")
            time.sleep(float(state.value(f"sleep_{name}", 0) or 0))
            update = result(state) if result is not None else {"log": [name]}
            client.incr(f"calls:{thread}:{name}")
        finally:
            client.close()
        return update

    return action


def log_graph() -> StateGraph:
    return StateGraph({"log": Channels.appender()})


def chain() -> StateGraph:
    """START -> a -> b -> c -> END."""
    graph = log_graph()
    for node in ("a", "b", "c"):
        graph.add_node(node, counted(node))
    return graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)


def fan() -> StateGraph:
    """START -> a -> (b | c) -> d -> END; b and c are one step."""
    graph = log_graph()
    for node in ("a", "b", "c", "d"):
        graph.add_node(node, counted(node))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    return graph.add_edge(["b", "c"], "d").add_edge("d", END)


def _gate(state: AgentState) -> dict[str, Any]:
    if state.value(TIMEOUT_KEY):
        return {"log": ["expired"]}
    if state.value("approved"):
        return {"log": ["approved"]}
    timeout = state.value("timeout")
    raise GraphInterrupt("needs approval", {"timeout": timeout} if timeout else {})


def gate() -> StateGraph:
    """START -> a -> gate (parks until approved, or until its deadline expired) -> b -> END."""
    graph = log_graph()
    graph.add_node("a", counted("a")).add_node("gate", counted("gate", _gate))
    graph.add_node("b", counted("b"))
    return graph.add_edge(START, "a").add_edge("a", "gate").add_edge("gate", "b").add_edge("b", END)


def _fail(state: AgentState) -> dict[str, Any]:
    raise ValueError("boom")


def boom() -> StateGraph:
    """START -> a (fails) -> END."""
    graph = log_graph()
    graph.add_node("a", counted("a", _fail))
    return graph.add_edge(START, "a").add_edge("a", END)


@dataclass
class Bundle(AppBundle):
    held: CeleryExecutor  # routes node ``b`` to the held queue
    timed: CeleryExecutor  # with an interrupt timeout


def build(settings: Mapping[str, str]) -> Bundle:
    app, saver = make_app("lgc_beat_app", settings, "LGC")
    timing = {"reap_interval": REAP_INTERVAL, "stalled_after": STALLED_AFTER}
    executor = CeleryExecutor(app, **timing)
    held = CeleryExecutor(app, routes={"b": settings["LGC_HELD_QUEUE"]}, **timing)
    timed = CeleryExecutor(app, interrupt_timeout=INTERRUPT_TIMEOUT, **timing)
    graphs = compile_graphs(
        saver,
        [
            ("chain", chain, executor, {}),
            ("fan", fan, executor, {}),
            ("gate", gate, executor, {}),
            ("boom", boom, executor, {}),
            ("held-chain", chain, held, {}),
            ("held-fan", fan, held, {}),
            ("timed-review", chain, timed, {"interrupt_before": ("b",)}),
        ],
    )
    for entry in json.loads(settings.get("LGC_BEAT_SCHEDULES") or "[]"):
        executor.schedule_run(
            graphs[entry["graph"]],
            entry["name"],
            float(entry["every"]),
            input=entry.get("input"),
            thread_id=entry.get("thread_id"),
        )
    return Bundle(app, saver, executor, graphs, held, timed)


def settings_from_env() -> dict[str, str]:
    settings = {key: os.environ[key] for key in ENV_KEYS}
    if os.environ.get("LGC_BEAT_SCHEDULES"):
        settings["LGC_BEAT_SCHEDULES"] = os.environ["LGC_BEAT_SCHEDULES"]
    return settings


bundle: Any = build(settings_from_env()) if "LGC_HELD_QUEUE" in os.environ else None
app: Any = bundle.app if bundle is not None else None
