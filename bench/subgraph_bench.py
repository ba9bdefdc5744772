"""Benchmark: a compiled subgraph's per-node cost on Celery against a top-level node's.

One Redis (db 14, flushed before and after: run under ``flock /tmp/lgc-bench.lock``), one worker
(``celery -A bench.subgraph_bench_app worker -P prefork -c 1``), checkpoints in a SQLite file.
Side by side, interleaved per round: ``top``, a chain of 20 nodes, and ``sub``, the same 20
nodes inside a compiled subgraph node (``START -> sub -> END``), each run ``invoke``-d from the
client on a fresh thread, timed end to end.  Per node: the run's time over its 20 nodes (the
subgraph node's own task, which starts the child run, and the child's commit of the parent's
step are counted in ``sub``'s).  Target (issue 13): ``sub`` per node at most 1.2 of ``top``.

``python -m bench.subgraph_bench [--rounds N]`` from the repository root.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench._worker import WorkerProcess, flush_redis, source_state

REDIS_URL = "redis://127.0.0.1:6379/14"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lgc-subbench-"))
    env = {"LGC_BENCH_REDIS_URL": REDIS_URL, "LGC_BENCH_SQLITE_URL": f"sqlite:///{tmp / 'b.db'}"}
    os.environ.update(env)
    flush_redis(REDIS_URL)
    bench_app = importlib.import_module("bench.subgraph_bench_app")
    worker = WorkerProcess(
        "bench.subgraph_bench_app",
        concurrency=1,
        node_name=f"subbench-{uuid.uuid4().hex[:6]}@%h",
        env=env,
        log_path=tmp / "worker.log",
    )
    try:
        from langgraph_celery import RunnableConfig

        graphs = bench_app.GRAPHS
        length = bench_app.LENGTH
        for name in ("top", "sub"):  # warm up (worker started, tables made)
            state = graphs[name].invoke({}, RunnableConfig(thread_id=f"warm-{name}"), timeout=120)
            assert state.value("count") == length, (name, dict(state.data))
        times: dict[str, list[float]] = {"top": [], "sub": []}
        for index in range(args.rounds):
            order = ("top", "sub") if index % 2 == 0 else ("sub", "top")
            for name in order:
                config = RunnableConfig(thread_id=f"{name}-{uuid.uuid4().hex[:8]}")
                started = time.perf_counter()
                state = graphs[name].invoke({}, config, timeout=120)
                times[name].append(time.perf_counter() - started)
                assert state.value("count") == length
        top = statistics.median(times["top"]) * 1000
        sub = statistics.median(times["sub"]) * 1000
        print(f"subgraph bench ({source_state()}), {args.rounds} rounds, {length} nodes")
        print(f"  top-level chain   {top:8.1f} ms/run  {top / length:6.2f} ms/node")
        print(f"  compiled subgraph {sub:8.1f} ms/run  {sub / length:6.2f} ms/node")
        print(f"  ratio sub/top per node {sub / top:.2f} (target <= 1.2)")
    finally:
        worker.stop()
        flush_redis(REDIS_URL)


if __name__ == "__main__":
    main()
