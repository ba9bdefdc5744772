"""How soon a chunk a node streams on a worker reaches a client in another process.

A worker process (``celery -A bench.stream_latency_app worker -P prefork -c 1``, Redis db 14 as
broker and result backend, checkpoints in SQLite) runs ``talk``, a node that streams ``CHUNKS``
chunks ``GAP`` seconds apart, each the ``time.time()`` of its ``yield``; this process streams the
run (``graph.stream``) and records, for each chunk, the time from its ``yield`` to its arrival
as a ``StreamingOutput``.  The reference, in the same run and on the same worker and Redis: a
bare task that ``PUBLISH``-es as many timestamps on a channel this process listens to (plain
redis-py pub/sub), so the difference is what the library adds (the sink's JSON message, the
follower's decoding and ordering).  Runs of the two alternate.

Prints p50 and p95 of the first chunk of each run and of every chunk, in milliseconds, for
both, and the ratios.  Target (issue 13): the first chunk within 20 ms p50 of its ``yield``.

    flock /tmp/lgc-bench.lock python -m bench.stream_latency [--runs 40]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import redis

from bench._worker import WorkerProcess, flush_redis, source_state

REDIS_URL = "redis://127.0.0.1:6379/14"
CHUNKS = 10
GAP = 0.01


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@contextlib.contextmanager
def worker_and_app(tmpdir: Path) -> Iterator[ModuleType]:
    env = {
        "LGC_BENCH_REDIS_URL": REDIS_URL,
        "LGC_BENCH_SQLITE_URL": f"sqlite:///{tmpdir / 'stream.db'}",
    }
    os.environ.update(env)  # (the app module reads them at import, in this process too)
    from bench import stream_latency_app as bench_app

    worker = WorkerProcess(
        "bench.stream_latency_app",
        concurrency=1,
        node_name=f"lgc-stream-{uuid.uuid4().hex[:6]}@%h",
        env=env,
        log_path=tmpdir / "worker.log",
    )
    try:
        pending = bench_app.ping.apply_async()
        deadline = time.monotonic() + 60
        while True:
            if not worker.alive():
                raise RuntimeError(f"the worker exited:\n{worker.tail()}")
            with contextlib.suppress(Exception):
                if pending.get(timeout=0.5) == "pong":
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the worker was not ready:\n{worker.tail()}")
        yield bench_app
    finally:
        worker.stop()


def ours(bench_app: ModuleType) -> list[float]:
    """Delays (s) of one streamed run's chunks, in order."""
    from langgraph_celery import RunnableConfig, StreamingOutput

    delays = []
    config = RunnableConfig(thread_id=f"lat-{uuid.uuid4().hex[:10]}")
    for output in bench_app.graph.stream({"chunks": CHUNKS, "gap": GAP}, config):
        if isinstance(output, StreamingOutput):
            delays.append(time.time() - float(output.chunk))
    if len(delays) != CHUNKS:
        raise RuntimeError(f"got {len(delays)} chunks of {CHUNKS}")
    return delays


def reference(bench_app: ModuleType, client: Any) -> list[float]:
    """Delays (s) of one bare task's published timestamps, in order."""
    channel = f"lat-ref-{uuid.uuid4().hex[:10]}"
    pubsub = client.pubsub()
    pubsub.subscribe(channel)
    try:
        pubsub.get_message(timeout=1.0)  # (the subscription's confirmation)
        result = bench_app.publish.delay(channel, CHUNKS, GAP)
        delays = []
        while len(delays) < CHUNKS:
            message = pubsub.get_message(ignore_subscribe_messages=True, timeout=10)
            if message is None:
                raise RuntimeError("the reference's messages stopped coming")
            delays.append(time.time() - float(message["data"]))
        result.get(timeout=10)
        return delays
    finally:
        pubsub.close()


def report(name: str, runs: list[list[float]]) -> tuple[float, float]:
    first = [run[0] * 1000 for run in runs]
    every = [delay * 1000 for run in runs for delay in run]
    p50, p95 = statistics.median(first), percentile(first, 0.95)
    print(
        f"{name:<28} first chunk p50 {p50:6.2f} ms  p95 {p95:6.2f} ms   "
        f"every chunk p50 {statistics.median(every):6.2f} ms  p95 {percentile(every, 0.95):6.2f} ms"
    )
    return p50, statistics.median(every)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=40, help="runs of each (default 40)")
    args = parser.parse_args(argv)
    flush_redis(REDIS_URL)
    tmpdir = Path(tempfile.mkdtemp(prefix="lgc-stream-latency-"))
    client = redis.Redis.from_url(REDIS_URL)
    try:
        with worker_and_app(tmpdir) as bench_app:
            for _ in range(3):  # warm-up: connections, the saver's tables, imports
                ours(bench_app)
                reference(bench_app, client)
            mine: list[list[float]] = []
            bare: list[list[float]] = []
            for _ in range(args.runs):
                mine.append(ours(bench_app))
                bare.append(reference(bench_app, client))
    finally:
        client.close()
        flush_redis(REDIS_URL)
        shutil.rmtree(tmpdir, ignore_errors=True)
    print(f"source: {source_state()}; {args.runs} runs of {CHUNKS} chunks {GAP * 1000:g} ms apart")
    ours_first, ours_every = report("ours (StreamingOutput)", mine)
    ref_first, ref_every = report("reference (bare PUBLISH)", bare)
    print(
        f"ratios ours/reference: first chunk p50 {ours_first / ref_first:.2f}, "
        f"every chunk p50 {ours_every / ref_every:.2f}; target: first chunk p50 <= 20 ms: "
        f"{'met' if ours_first <= 20 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
