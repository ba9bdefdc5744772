"""The Celery app of the fuzz tests: ``celery -A fuzz_app worker`` imports it.

Everything comes from environment variables (:data:`ENV_KEYS`), so the test process and the
worker subprocesses build the same app, saver and graphs: the generated graphs of seeds
``0..FUZZ_GRAPHS-1`` (``fuzz_graphs.spec_from_seed``, graph ids ``fuzz-<seed>``) and the fixed
graphs of :data:`FIXED` that the bad-input and security tests park threads on.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

from fuzz_graphs import build as build_spec
from fuzz_graphs import compile_options, graph_id, spec_from_seed

from app_kit import AppBundle, compile_graphs, make_app
from langgraph_celery import END, START, AgentState, StateGraph
from langgraph_celery.celery import CeleryExecutor

ENV_KEYS = (
    "FUZZ_BROKER_URL",  # the broker (Redis)
    "FUZZ_BACKEND_URL",  # the result backend, also the side-effect counters of FIXED graphs
    "FUZZ_DB_URL",  # the checkpoints (PostgreSQL)
    "FUZZ_TABLE_PREFIX",  # the SqlSaver table prefix
    "FUZZ_QUEUE",  # the default queue
    "FUZZ_GRAPHS",  # how many generated graphs (seeds 0..N-1)
)


def _counted(name: str) -> Any:
    """A node that counts its executions in Redis (``ran:<thread>:<name>``) and logs itself."""

    def action(state: AgentState) -> dict[str, Any]:
        import redis

        client = redis.Redis.from_url(os.environ["FUZZ_BACKEND_URL"])
        try:
            client.incr(f"ran:{state.value('thread')}:{name}")
        finally:
            client.close()
        return {"log": [name]}

    return action


def gate_graph() -> StateGraph:
    """START -> a -> gate (GraphInterrupt until ``approved``) -> b -> END, every node counted."""
    from fuzz_graphs import schema

    from langgraph_celery import GraphInterrupt

    graph = StateGraph(schema())
    counted_gate = _counted("gate")

    def gate(state: AgentState) -> dict[str, Any]:
        if not state.value("approved"):
            raise GraphInterrupt("approve?", {"asked": True})
        return counted_gate(state)  # type: ignore[no-any-return]

    graph.add_node("a", _counted("a")).add_node("gate", gate).add_node("b", _counted("b"))
    return graph.add_edge(START, "a").add_edge("a", "gate").add_edge("gate", "b").add_edge("b", END)


def before_graph() -> StateGraph:
    """START -> a -> b -> END, compiled with ``interrupt_before=("b",)``."""
    from fuzz_graphs import schema

    graph = StateGraph(schema())
    graph.add_node("a", _counted("a")).add_node("b", _counted("b"))
    return graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)


def entry_graph() -> StateGraph:
    """START -(a conditional entry point that raises while ``fail`` is set)-> a -> END."""
    from fuzz_graphs import schema

    def entry(state: AgentState) -> str:
        if state.value("fail"):
            raise ValueError("the entry point fails")
        return "a"

    graph = StateGraph(schema()).add_node("a", lambda state: {"log": ["a"]})
    return graph.add_conditional_edges(START, entry, {"a": "a"}).add_edge("a", END)


#: graph id -> (builder, compile options)
FIXED: dict[str, tuple[Any, Mapping[str, Any]]] = {
    "fixed-gate": (gate_graph, {}),
    "fixed-before": (before_graph, {"interrupt_before": ("b",)}),
    "fixed-entry": (entry_graph, {}),
}


def build(settings: Mapping[str, str]) -> AppBundle:
    app, saver = make_app("fuzz_app", settings, "FUZZ")
    executor = CeleryExecutor(app)
    fixed = [(gid, builder, executor, options) for gid, (builder, options) in FIXED.items()]
    specs = [spec_from_seed(seed) for seed in range(int(settings["FUZZ_GRAPHS"]))]
    generated = [
        (graph_id(seed), functools.partial(build_spec, spec), executor, compile_options(spec))
        for seed, spec in enumerate(specs)
    ]
    return AppBundle(app, saver, executor, compile_graphs(saver, [*fixed, *generated]))


def settings_from_env() -> dict[str, str]:
    return {key: os.environ[key] for key in ENV_KEYS}


bundle: Any = build(settings_from_env()) if "FUZZ_BROKER_URL" in os.environ else None
app: Any = bundle.app if bundle is not None else None
gate: Any = bundle.graphs["fixed-gate"] if bundle is not None else None  # for the CLI
