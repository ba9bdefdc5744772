"""Console benchmark: a thread's page costs the same for a short and a long thread.

A 1-node graph whose node appends one 100-byte message to ``messages`` (``Channels.appender()``)
runs on one thread with ``SqlSaver`` on SQLite (a temporary file): a first run whose input holds
``--messages`` messages (10,000), then ``--steps`` more runs (each stores two checkpoints).  The
console (``create_app``, through Starlette's test client, no network) is asked for the thread's
page (``/threads/<id>``) and its API view (``/api/threads/<id>``) after 20 runs and again after
``--steps`` (1,000): reported, the median of 5 requests of each, their size, and the ratio
long / short (a page that reads only its own checkpoints stays near 1).

The release before the console read a page at a time read every checkpoint of the thread and
every run's history again; its figures, measured with the same script on the same machine, are
in ``bench/README.md``.

Run from the repository root: ``python -m bench.console_thread`` (``--messages N --steps N``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from langgraph_celery import END, START, Channels, CompileConfig, RunnableConfig, StateGraph
from langgraph_celery.checkpoint import SqlSaver
from langgraph_celery.console import Catalog, ConsoleSettings, create_app

URLS = {"page": "/threads/t?graph=big", "api": "/api/threads/t?graph=big"}


def _reply(state: Any) -> dict[str, Any]:
    return {"messages": [{"role": "ai", "text": "x" * 100}]}


def _timed(client: TestClient, url: str, rounds: int = 5) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        reply = client.get(url, headers={"accept": "text/html"} if url == URLS["page"] else {})
        times.append(time.perf_counter() - started)
        assert reply.status_code == 200, reply.text[:200]
        size = len(reply.content)
    return statistics.median(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        saver = SqlSaver(f"sqlite:///{Path(directory) / 'console.db'}")
        builder = StateGraph({"messages": Channels.appender()})
        builder.add_node("reply", _reply)
        builder.add_edge(START, "reply").add_edge("reply", END)
        graph = builder.compile(CompileConfig(checkpoint_saver=saver, graph_id="big"))
        config = RunnableConfig(thread_id="t")
        first = [{"role": "user", "text": "y" * 100} for _ in range(args.messages)]
        graph.invoke({"messages": first}, config)
        app = create_app(Catalog.from_graphs({"big": graph}), ConsoleSettings())
        figures: dict[int, dict[str, tuple[float, int]]] = {}
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            done = 1
            for runs in (20, args.steps):
                for _ in range(runs - done):
                    graph.invoke({"messages": []}, config)
                done = runs
                figures[runs] = {name: _timed(client, url) for name, url in URLS.items()}
        saver.dispose()
    short, long = figures[20], figures[args.steps]
    print(f"thread of {args.messages:,} messages; checkpoints: 2 a run")
    print(f"{'':6} {'20 runs':>18} {f'{args.steps:,} runs':>18} {'long / short':>13}")
    for name in URLS:
        (a, a_size), (b, b_size) = short[name], long[name]
        print(
            f"{name:6} {a * 1000:9.0f} ms {a_size / 1e6:4.2f} MB "
            f"{b * 1000:9.0f} ms {b_size / 1e6:4.2f} MB {b / a:13.2f}"
        )


if __name__ == "__main__":
    main()
