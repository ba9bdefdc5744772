"""The Celery app of the subgraph benchmark (``bench/subgraph_bench.py``), imported by its
client and by the worker it starts (``celery -A bench.subgraph_bench_app worker``).

Environment: ``LGC_BENCH_REDIS_URL`` (broker and result backend, default Redis db 14) and
``LGC_BENCH_SQLITE_URL`` (the checkpoints, a SQLite file the benchmark makes).

Graphs: ``top`` is a chain of :data:`LENGTH` nodes each adding 1 to ``count``; ``sub`` is
``START -> sub -> END`` where ``sub`` is the same chain compiled on its own (no saver, no
executor: the parent's serve it), so its nodes run as the tasks of a child run.
"""

from __future__ import annotations

import operator
import os
from typing import Any

from celery import Celery

from langgraph_celery import END, START, Channel, CompileConfig, CompiledGraph, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

__all__ = ["GRAPHS", "LENGTH", "app"]

#: The nodes of the chain (top level, or inside the subgraph).
LENGTH = 20

REDIS_URL = os.environ.get("LGC_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")

app = Celery("subgraph_bench", broker=REDIS_URL, backend=REDIS_URL)
app.conf.broker_connection_retry_on_startup = True


def add_one(state: Any) -> dict[str, Any]:
    return {"count": 1}


def chain() -> StateGraph:
    graph = StateGraph({"count": Channel(operator.add, 0)})
    previous = START
    for index in range(LENGTH):
        name = f"n{index}"
        graph.add_node(name, add_one).add_edge(previous, name)
        previous = name
    return graph.add_edge(previous, END)


def _graphs() -> dict[str, CompiledGraph]:
    url = os.environ.get("LGC_BENCH_SQLITE_URL")
    if not url:
        return {}
    saver = SqlSaver(url, table_prefix="lgc_subbench_")
    executor = CeleryExecutor(app)

    def config(graph_id: str) -> CompileConfig:
        return CompileConfig(checkpoint_saver=saver, graph_id=graph_id, executor=executor)

    top = chain().compile(config("top"))
    sub = (
        StateGraph({"count": Channel(operator.add, 0)})
        .add_node("sub", chain().compile())
        .add_edge(START, "sub")
        .add_edge("sub", END)
        .compile(config("sub"))
    )
    return {"top": top, "sub": sub}


GRAPHS = _graphs()
