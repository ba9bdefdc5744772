"""Step cost on Celery workers as the state grows (issue 12): 10 vs 10,000 messages.

A real worker process (``-P prefork -c 1``) runs ``bench/celery_step_cost_app.py``'s graph, a
chain of 20 nodes each appending one ~100-byte message, with Redis db 14 as broker and result
backend and checkpoints in a SQLite file.  Two threads hold 10 and 10,000 messages; each round
invokes the chain and the same graph cut to one node (``short``) on each thread.  A step's own
cost is the difference of their fastest rounds over 19 (what an invoke costs besides its steps,
such as handing the final state back to the client, cancels out); bytes per step are what the
chain's invokes added to the store's bodies.  Target: the 10,000-message step at most 2x the
10-message one.  Run it alone on the machine's Redis db 14:

    flock /tmp/lgc-bench.lock python -m bench.celery_step_cost [--rounds N]
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench._worker import WorkerProcess, flush_redis

REDIS_URL = "redis://127.0.0.1:6379/14"
SIZES = {"small": 10, "large": 10_000}
TARGET_GROWTH = 2.0


def _bytes(saver: Any) -> int:
    from sqlalchemy import text

    prefix = saver.table_prefix
    with saver.engine.connect() as conn:
        return sum(
            int(
                conn.execute(
                    text(f"SELECT coalesce(sum(length(body)), 0) FROM {prefix}{name}")
                ).scalar_one()
            )
            for name in ("checkpoints", "writes")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (default 7)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="lgc-celery-step-"))
    env = {
        "LGC_BENCH_REDIS_URL": REDIS_URL,
        "LGC_BENCH_SQLITE_URL": f"sqlite:///{directory / 'store.sqlite'}",
    }
    os.environ.update(env)
    flush_redis(REDIS_URL)
    from bench import celery_step_cost_app as bench_app
    from langgraph_celery import RunnableConfig

    worker = WorkerProcess(
        "bench.celery_step_cost_app",
        concurrency=1,
        node_name=f"step-cost-{uuid.uuid4().hex[:6]}@%h",
        env=env,
        log_path=directory / "worker.log",
    )
    graph, saver, message = bench_app.graph, bench_app.saver, bench_app.message
    try:
        bench_app.app.control.ping(timeout=5)

        def invoke(thread: str, short: bool) -> None:
            config = RunnableConfig(thread_id=thread)
            graph.invoke({"messages": [message(-1)], "short": short}, config, timeout=300)

        figures: dict[str, tuple[float, float, float]] = {}
        for name, size in SIZES.items():
            thread = f"{name}-{uuid.uuid4().hex[:6]}"
            first = {"messages": [message(i) for i in range(size - 20)], "short": True}
            graph.invoke(first, RunnableConfig(thread_id=thread), timeout=300)
            invoke(thread, False)  # (warm: the worker's caches, the client's connections)
            chain: list[float] = []
            one: list[float] = []
            written = 0
            for index in range(args.rounds):
                for short in (False, True) if index % 2 else (True, False):
                    before = _bytes(saver)
                    gc.collect()
                    start = time.perf_counter()
                    invoke(thread, short)
                    (one if short else chain).append(time.perf_counter() - start)
                    if not short:
                        written += _bytes(saver) - before
            step = (min(chain) - min(one)) / (bench_app.CHAIN - 1)
            figures[name] = (step * 1e6, (min(one) - step) * 1e6, written / (args.rounds * 20))
    finally:
        worker.stop()
        flush_redis(REDIS_URL)
        saver.dispose()
    print(f"Celery, one worker (-c 1), SQLite; {args.rounds} rounds, fastest")
    print(f"{'messages':>10} {'µs/step':>10} {'µs/invoke':>10} {'B/step':>8}")
    for name, size in SIZES.items():
        step, alone, per = figures[name]
        print(f"{size:>10} {step:>10.0f} {alone:>10.0f} {per:>8.0f}")
    growth = figures["large"][0] / figures["small"][0]
    verdict = "MET" if growth <= TARGET_GROWTH else "NOT MET"
    print(f"growth 10,000 / 10 messages: {growth:.2f} (target <= {TARGET_GROWTH}: {verdict})")
    print(f"bytes per step, 10,000 / 10: {figures['large'][2] / figures['small'][2]:.2f}")


if __name__ == "__main__":
    main()
