"""The Celery app of ``bench/celery_step_cost.py``: imported by the benchmark's client and by
the worker it starts (``celery -A bench.celery_step_cost_app worker -P prefork -c 1``).

``LGC_BENCH_REDIS_URL`` is the broker and result backend (default ``redis://127.0.0.1:6379/14``),
``LGC_BENCH_SQLITE_URL`` the checkpoint store.  The graph ``step-cost`` is a chain of
:data:`CHAIN` nodes, each appending one ~100-byte message to ``messages``; with ``short`` in the
state it ends after its first node (the same graph cut to one node, on the same thread).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

from langgraph_celery import END, START, Channels, CompileConfig, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

CHAIN = 20
REDIS_URL = os.environ.get("LGC_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
SQLITE_URL = os.environ.get("LGC_BENCH_SQLITE_URL", "sqlite:///celery-step-cost.sqlite")

app = Celery("lgc_step_cost", broker=REDIS_URL, backend=REDIS_URL)
saver = SqlSaver(SQLITE_URL)


def message(index: int, size: int = 100) -> dict[str, str]:
    content = f"message {index} "
    return {"role": "ai", "content": content + "x" * max(0, size - len(content) - 30)}


def _node(index: int) -> Any:
    def node(state: Any) -> dict[str, Any]:
        return {"messages": [message(index)]}

    node.__name__ = f"n{index}"
    return node


def _after_first(state: Any) -> str:
    return END if state.value("short") else "n1"


def _build() -> Any:
    graph = StateGraph({"messages": Channels.appender()})
    for index in range(CHAIN):
        graph.add_node(f"n{index}", _node(index))
    graph.add_edge(START, "n0")
    graph.add_conditional_edges("n0", _after_first, {END: END, "n1": "n1"})
    for index in range(1, CHAIN - 1):
        graph.add_edge(f"n{index}", f"n{index + 1}")
    graph.add_edge(f"n{CHAIN - 1}", END)
    return graph.compile(
        CompileConfig(
            checkpoint_saver=saver,
            graph_id="step-cost",
            executor=CeleryExecutor(app),
            recursion_limit=1_000,
        )
    )


graph = _build()
