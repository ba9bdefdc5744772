"""The Celery app of the soak benchmark (``bench/soak.py``).

Imported by the soak driver (which starts runs, resumes parked ones and runs the reaper) and by
the two workers it starts with ``celery -A bench.soak_app worker -P prefork -c 2``.

Configured by environment variables, which the driver sets before importing this module and
passes to the workers:

* ``LGC_SOAK_REDIS_URL``: broker and result backend (default ``redis://127.0.0.1:6379/8``); the
  chaos ``FLUSHDB`` empties this db;
* ``LGC_SOAK_AUX_URL``: a second Redis db (default ``redis://127.0.0.1:6379/7``) where nodes
  count their executions and say which node a pool process is running (the chaos ``kill -9``
  picks a process that is mid-node); never flushed by the chaos;
* ``LGC_SOAK_PG_URL``: the PostgreSQL database of the checkpoints;
* ``LGC_SOAK_TABLE_PREFIX``: the saver's table prefix;
* ``LGC_SOAK_STALLED_AFTER``: the executor's ``stalled_after`` (seconds, default 3).

Two graphs, each ``START -> a -> (b1, b2 in parallel) -> c (joins both) -> END``: ``soak_fan``
runs through; ``soak_park`` has ``interrupt_before=("c",)``, so it parks before ``c`` until the
driver resumes it with ``GraphInput.resume({"log": ["<thread>:resume"]})``.  Every node appends
the token ``"<thread_id>:<node>"`` to the ``log`` appender (the input adds ``"<thread>:input"``),
so the final state of a thread shows exactly which updates were applied, and how many times.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from typing import Any

import redis
from celery.app.base import Celery

from langgraph_celery import END, START, AgentState, Channels, CompileConfig, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver
from langgraph_celery.graph.compiled import CompiledGraph
from langgraph_celery.graph.config import RunnableConfig

__all__ = [
    "EXPECTED",
    "GRAPHS",
    "NODES",
    "app",
    "executor",
    "ping",
    "saver",
]

REDIS_URL = os.environ.get("LGC_SOAK_REDIS_URL", "redis://127.0.0.1:6379/8")
AUX_URL = os.environ.get("LGC_SOAK_AUX_URL", "redis://127.0.0.1:6379/7")
PG_URL = os.environ.get("LGC_SOAK_PG_URL", "postgresql://postgres@127.0.0.1:5432/lgc_soak")
TABLE_PREFIX = os.environ.get("LGC_SOAK_TABLE_PREFIX", "lgc_soak_")
STALLED_AFTER = float(os.environ.get("LGC_SOAK_STALLED_AFTER", "3"))
REAP_INTERVAL = 1.0

#: Aux-db keys: ``busy:<pid>`` -> the token a pool process is running; hash of executions.
BUSY_PREFIX = "busy:"
EXECUTIONS_KEY = "executions"

NODES = ("a", "b1", "b2", "c")
#: The tokens a completed run of each graph must hold exactly once (suffixes of ``<thread>:``).
EXPECTED: dict[str, tuple[str, ...]] = {
    "fan": ("input", "a", "b1", "b2", "c"),
    "park": ("input", "a", "b1", "b2", "resume", "c"),
}

app = Celery("lgc_soak", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(result_expires=900)
executor = CeleryExecutor(app, reap_interval=REAP_INTERVAL, stalled_after=STALLED_AFTER)
saver = SqlSaver(PG_URL, table_prefix=TABLE_PREFIX)

_aux_client: redis.Redis | None = None
_aux_pid = 0


def aux() -> redis.Redis:
    """This process's client of the aux db (a new one after a fork)."""
    global _aux_client, _aux_pid
    if _aux_client is None or _aux_pid != os.getpid():
        _aux_client = redis.Redis.from_url(AUX_URL, socket_timeout=5)
        _aux_pid = os.getpid()
    return _aux_client


def _duration() -> float:
    """How long a node works: mostly short, sometimes long enough to be killed mid-node."""
    if random.random() < 0.15:
        return random.uniform(0.1, 0.4)
    return random.uniform(0.005, 0.04)


def _node(name: str) -> Callable[[AgentState, RunnableConfig], dict[str, Any]]:
    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        token = f"{config.thread_id}:{name}"
        busy = f"{BUSY_PREFIX}{os.getpid()}"
        client = aux()
        with contextlib.suppress(redis.RedisError):
            pipe = client.pipeline()
            pipe.set(busy, token, px=10_000)
            pipe.hincrby(EXECUTIONS_KEY, token, 1)
            pipe.execute()
        try:
            time.sleep(_duration())
        finally:
            with contextlib.suppress(redis.RedisError):
                client.delete(busy)
        return {"log": [token]}

    action.__name__ = f"node_{name}"
    return action


def _graph(graph_id: str, park: bool) -> CompiledGraph:
    graph = StateGraph({"log": Channels.appender()})
    for name in NODES:
        graph.add_node(name, _node(name))
    graph.add_edge(START, "a")
    graph.add_edge("a", "b1")
    graph.add_edge("a", "b2")
    graph.add_edge(["b1", "b2"], "c")
    graph.add_edge("c", END)
    return graph.compile(
        CompileConfig(
            checkpoint_saver=saver,
            executor=executor,
            graph_id=graph_id,
            interrupt_before=("c",) if park else (),
        )
    )


#: Compiled graphs by run kind.
GRAPHS: dict[str, CompiledGraph] = {
    "fan": _graph("soak_fan", False),
    "park": _graph("soak_park", True),
}


@app.task(name="soak.ping", bind=True)  # type: ignore[untyped-decorator]
def ping(self: Any) -> dict[str, Any]:
    """Which worker (node name) and pool process answered."""
    return {"hostname": str(self.request.hostname), "pid": os.getpid()}
