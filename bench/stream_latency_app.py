"""The Celery app of the streaming latency benchmark (``bench/stream_latency.py``), imported by
its client and by the worker it starts (``celery -A bench.stream_latency_app worker``).

Configured by ``LGC_BENCH_REDIS_URL`` (broker and result backend, default
``redis://127.0.0.1:6379/14``) and ``LGC_BENCH_SQLITE_URL`` (the checkpoints; default a file in
the temporary directory).

- ``graph`` (``stream-latency``): START -> talk -> END; ``talk`` streams ``chunks`` chunks from a
  generator, each the ``time.time()`` of its ``yield``, ``gap`` seconds apart.
- ``bench.publish``: the reference, a bare task that publishes ``chunks`` messages on a Redis
  channel with a plain ``PUBLISH``, each the ``time.time()`` when it is sent, as far apart.
- ``bench.ping``: answers ``"pong"`` (the worker is ready).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import redis
from celery import Celery

from langgraph_celery import END, START, AgentState, CompileConfig, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

REDIS_URL = os.environ.get("LGC_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
SQLITE_URL = os.environ.get(
    "LGC_BENCH_SQLITE_URL", f"sqlite:///{tempfile.gettempdir()}/lgc-stream-latency.db"
)
GRAPH_ID = "stream-latency"

app = Celery("stream_latency", broker=REDIS_URL, backend=REDIS_URL, set_as_current=False)
_redis = redis.Redis.from_url(REDIS_URL)


def talk(state: AgentState) -> dict[str, Any]:
    count, gap = int(state.value("chunks")), float(state.value("gap"))

    def stamps() -> Iterator[float]:
        for index in range(count):
            if index:
                time.sleep(gap)
            yield time.time()
        return {"done": count}

    return {"stamps": stamps()}


graph = (
    StateGraph()
    .add_node("talk", talk)
    .add_edge(START, "talk")
    .add_edge("talk", END)
    .compile(
        CompileConfig(
            checkpoint_saver=SqlSaver(SQLITE_URL),
            executor=CeleryExecutor(app),
            graph_id=GRAPH_ID,
        )
    )
)


@app.task(name="bench.publish")
def publish(channel: str, count: int, gap: float) -> int:
    for index in range(count):
        if index:
            time.sleep(gap)
        _redis.publish(channel, repr(time.time()))
    return count


@app.task(name="bench.ping")
def ping() -> str:
    return "pong"
