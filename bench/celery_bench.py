"""Celery benchmark: langgraph_celery runs on a real worker against bare Celery chains.

Everything runs side by side on ONE Redis (broker and result backend, db 14, flushed before and
after) and ONE worker process, started here as
``celery -A bench.celery_bench_app worker -P prefork -c 1`` (plus ``--without-gossip
--without-mingle --without-heartbeat``, which only silence cluster chatter), which serves both
the bare tasks and our node tasks; see ``bench/celery_bench_app.py`` for the app and graphs.
Checkpoints go to PostgreSQL (database ``lgc_bench``, created if missing, with tables under a
unique prefix dropped at the end) or, for comparison, to a SQLite file in a temporary folder.

1. ``chain``: a 30-node chain graph (``invoke`` from the client, a fresh thread per run) against
   a bare Celery ``chain`` of 30 no-op tasks (``chain(noop.s({}), noop.s(), ...)
   .apply_async().get()``); each run timed end to end in the client, the variants interleaved
   (order rotating per round), median over the rounds.  Also the median split of our runs into
   *head* (client call to the input checkpoint), *span* (input checkpoint to last checkpoint, the
   worker pipeline, from the checkpoints' ``created_at``) and *tail* (last checkpoint to the
   client returning: the run's final wake-up, one read, settling).
2. ``concurrent``: 40 runs of a 2-node graph started with ``graph.start(...)`` then each
   ``RunHandle.wait()``-ed, against 40 bare 2-task chains (``apply_async`` 40 then ``get`` each);
   total wall time, median over interleaved rounds.
3. ``resume``: ``a -> (interrupt_before b) -> b``; the run is parked, then the time from just
   before ``graph.invoke(GraphInput.resume(), cfg)`` (``time.time()`` in the client) to the start
   of node ``b`` in the worker (``b`` returns ``time.time()`` in its update); p50 and p95.  Split
   into client preparation (until the client sends ``b``'s task, by wrapping the executor's
   ``_send_node`` in the client) and send-to-start.  Reference: the bare send-to-start latency
   of one task (``bench.stamp`` returns ``time.time()`` at its start).

Scenario 1 also times, on the same worker, ours through ``graph.start(...)`` +
``RunHandle.wait()`` (``pg_wait``) and a bare chain of ``noop_default`` (Celery's default task
options instead of the ones the executor sets on the app).

Scenarios 1 and 2 also time the *floor*: the same bare chains, but the client first checks that
the run has no row in PostgreSQL and stores its first, and every task reads its step's row and
stores the next (``bench.floor_step``: a ``SELECT`` and an ``INSERT`` with primary key
``(run_id, step)``, autocommit, a durable commit) before returning.  That is the least an
executor does that keeps each step's state in PostgreSQL as the source of truth, refuses a
second start and applies each step once; ``ours / floor`` is what langgraph_celery costs beyond
it (its graph, reaper timers, markers and wake-ups).

Then, unless ``--no-profile``:

* CPU accounting: each scenario-1 variant runs back to back, then each scenario-2 variant (ours
  on each saver, bare), while the CPU time (``/proc``) of each process is summed: this client,
  the worker (main and pool child), the PostgreSQL backends of the bench database, Redis.
* A worker restarted with ``LGC_BENCH_PROFILE=1`` times the phases of each task body (saver
  calls, sends; wall and CPU time) and counts the saver's SQL statements and the PostgreSQL round
  trips per task, over scenario-1 runs and one scenario-2 batch per saver; the client counts its
  own statements and saver calls per run.
* Two more workers (``LGC_BENCH_CPROFILE=wall`` and ``cpu``) run the node task bodies of the
  PostgreSQL chain under cProfile; the texts go to ``--cprofile-out`` (default: beside
  ``--json``).

Run ``python -m bench.celery_bench`` from the repository root (``--quick`` for a smoke run,
``--json PATH`` to save the figures).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from types import ModuleType
from typing import Any

import redis
from sqlalchemy import create_engine, text

from bench._worker import (
    ROOT,
    WorkerProcess,
    bench_database,
    drop_tables,
    flush_redis,
    source_state,
)

REDIS_SERVER = os.environ.get("LGC_BENCH_REDIS_SERVER", "redis://127.0.0.1:6379")
REDIS_DB = 14
PG_ADMIN_URL = os.environ.get(
    "LGC_BENCH_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
PG_DATABASE = "lgc_bench"
CONCURRENT_RUNS = 40
TARGET_RATIO = 1.3
TARGET_RESUME_P50_MS = 20.0
KINDS = ("pg", "sqlite")
PROFILE_KINDS = ("pg", "sqlite")
SPLIT_PARTS = ("head", "span", "tail")


# -- small helpers --------------------------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return dist_version(dist)
    except PackageNotFoundError:
        return "?"


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _p95(values: Sequence[float]) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def _thread(tag: str) -> str:
    return f"bench-{tag}-{uuid.uuid4().hex[:12]}"


# -- services -------------------------------------------------------------------------------------


@dataclass
class Services:
    redis_url: str
    pg_url: str
    sqlite_url: str
    table_prefix: str
    tmpdir: Path
    pg_version: str = ""
    sqlite_version: str = ""

    def env(self) -> dict[str, str]:
        return {
            "LGC_BENCH_REDIS_URL": self.redis_url,
            "LGC_BENCH_PG_URL": self.pg_url,
            "LGC_BENCH_SQLITE_URL": self.sqlite_url,
            "LGC_BENCH_TABLE_PREFIX": self.table_prefix,
        }


def prepare_services() -> Services:
    redis_url = f"{REDIS_SERVER}/{REDIS_DB}"
    flush_redis(redis_url)
    pg_url, pg_version = bench_database(PG_ADMIN_URL, PG_DATABASE)
    tmpdir = Path(tempfile.mkdtemp(prefix="lgc-celery-bench-"))
    import sqlite3

    return Services(
        redis_url=redis_url,
        pg_url=pg_url,
        sqlite_url=f"sqlite:///{tmpdir / 'bench.db'}",
        table_prefix=f"lgcb_{uuid.uuid4().hex[:8]}_",
        tmpdir=tmpdir,
        pg_version=pg_version,
        sqlite_version=sqlite3.sqlite_version,
    )


def cleanup_services(services: Services) -> None:
    drop_tables(services.pg_url, services.table_prefix)
    shutil.rmtree(services.tmpdir, ignore_errors=True)
    flush_redis(services.redis_url)


# -- the worker -----------------------------------------------------------------------------------


class Worker(WorkerProcess):
    """One ``celery worker -P prefork -c 1`` subprocess on the bench app."""

    def __init__(self, services: Services, extra_env: dict[str, str], log_name: str) -> None:
        super().__init__(
            "bench.celery_bench_app",
            concurrency=1,
            node_name=f"lgc-bench-{uuid.uuid4().hex[:6]}@%h",
            env={**services.env(), **extra_env},
            log_path=services.tmpdir / log_name,
        )

    def wait_ready(self, bench_app: ModuleType, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        pending = bench_app.ping.apply_async()
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the worker exited ({self.process.returncode}):\n{self.tail()}")
            with contextlib.suppress(Exception):
                if pending.get(timeout=0.5) == "pong":
                    return
        raise RuntimeError(f"the worker was not ready after {timeout} s:\n{self.tail()}")


@contextlib.contextmanager
def running_worker(
    services: Services, bench_app: ModuleType, extra_env: dict[str, str], log_name: str
) -> Iterator[Worker]:
    worker = Worker(services, extra_env, log_name)
    try:
        worker.wait_ready(bench_app)
        yield worker
    finally:
        worker.stop()


# -- runs -----------------------------------------------------------------------------------------


def _cfg(thread_id: str, durability: str = "sync") -> Any:
    from langgraph_celery import RunnableConfig

    return RunnableConfig(thread_id=thread_id, durability=durability)  # type: ignore[arg-type]


def ours_chain_once(
    bench_app: ModuleType, kind: str, wait: bool = False, durability: str = "sync"
) -> tuple[float, dict[str, float]]:
    """One chain run: seconds end to end, and its head/span/tail split.

    With ``wait``, ``graph.start(...)`` then ``RunHandle.wait()`` instead of ``graph.invoke``;
    ``durability``: the run's mode (``"exit"``: the span ends at the run's last checkpoint).
    """
    graph = bench_app.GRAPHS[f"chain_{kind}"]
    thread_id = _thread(f"chain-{kind}")
    started = time.time()
    t0 = time.perf_counter()
    if wait:
        cfg = _cfg(thread_id, durability)
        count = graph.start({"count": 0}, cfg).wait(timeout=120).as_state_data()["count"]
    else:
        count = graph.invoke({"count": 0}, _cfg(thread_id, durability))["count"]
    elapsed = time.perf_counter() - t0
    ended = started + elapsed
    if count != bench_app.CHAIN_LENGTH:
        raise AssertionError(f"chain run ended with count {count}")
    checkpoints = bench_app.SAVERS[kind].list(thread_id)  # newest first, outside the timing
    first = checkpoints[-1].created_at.timestamp()
    last = checkpoints[0].created_at.timestamp()
    split = {"head": first - started, "span": last - first, "tail": ended - last}
    return elapsed, split


def bare_chain_once(bench_app: ModuleType, length: int, task: str = "noop") -> float:
    from celery import chain

    noop = getattr(bench_app, task)
    t0 = time.perf_counter()
    result = chain(noop.s({}), *(noop.s() for _ in range(length - 1))).apply_async()
    value = result.get(timeout=120)
    elapsed = time.perf_counter() - t0
    if value != {"count": length}:
        raise AssertionError(f"bare chain returned {value!r}")
    return elapsed


def floor_chain_once(bench_app: ModuleType, length: int) -> float:
    """The floor of scenario 1: a bare chain of ``length`` tasks that each read their step's
    row and store the next."""
    from celery import chain

    step = bench_app.floor_step
    t0 = time.perf_counter()
    first = bench_app.floor_start(uuid.uuid4().hex)
    value = chain(step.s(first), *(step.s() for _ in range(length - 1))).apply_async()
    count = value.get(timeout=120)["count"]
    elapsed = time.perf_counter() - t0
    if count != length:
        raise AssertionError(f"floor chain ended with count {count}")
    return elapsed


def ours_concurrent_once(
    bench_app: ModuleType, kind: str, runs: int, durability: str = "sync"
) -> float:
    graph = bench_app.GRAPHS[f"pair_{kind}"]
    t0 = time.perf_counter()
    handles = [
        graph.start({"count": 0}, _cfg(_thread(f"pair-{kind}"), durability)) for _ in range(runs)
    ]
    results = [handle.wait(timeout=120) for handle in handles]
    elapsed = time.perf_counter() - t0
    for result in results:
        if not result.is_state_data() or result.as_state_data()["count"] != 2:
            raise AssertionError(f"a 2-node run ended with {result!r}")
    return elapsed


def bare_concurrent_once(bench_app: ModuleType, runs: int) -> float:
    from celery import chain

    noop = bench_app.noop
    t0 = time.perf_counter()
    pending = [chain(noop.s({}), noop.s()).apply_async() for _ in range(runs)]
    values = [result.get(timeout=120) for result in pending]
    elapsed = time.perf_counter() - t0
    if any(value != {"count": 2} for value in values):
        raise AssertionError("a bare 2-task chain returned something else")
    return elapsed


def _pairs_once(runs: int, start: Callable[[str], Any], first: Any, last: Any) -> float:
    """``runs`` bare 2-task chains ``first -> last``, each from ``start(run_id)`` (called in
    the client), sent then each waited on: the total seconds."""
    from celery import chain

    t0 = time.perf_counter()
    pending = [chain(first.s(start(uuid.uuid4().hex)), last.s()).apply_async() for _ in range(runs)]
    counts = [result.get(timeout=120)["count"] for result in pending]
    elapsed = time.perf_counter() - t0
    if any(count != 2 for count in counts):
        raise AssertionError(f"a floor 2-task chain ({first.name}) ended with another count")
    return elapsed


def floor_concurrent_once(bench_app: ModuleType, runs: int) -> float:
    """The floor of scenario 2: ``runs`` bare 2-task chains whose tasks each read their step's
    row and store the next."""
    step = bench_app.floor_step
    return _pairs_once(runs, bench_app.floor_start, step, step)


def floor_exit_concurrent_once(bench_app: ModuleType, runs: int) -> float:
    """The floor of scenario 2 with ``durability="exit"``: ``runs`` bare 2-task chains, each
    with its input stored from the client and its end by its last task."""
    return _pairs_once(runs, bench_app.floor_exit_start, bench_app.floor_carry, bench_app.floor_end)


def floor_end_concurrent_once(bench_app: ModuleType, runs: int) -> float:
    """The floor of scenario 2 with ``durability="exit"`` as SPEC §10 words it (stored only
    where the run ends): ``runs`` bare 2-task chains, each claimed in Redis from the client and
    stored by its last task."""
    return _pairs_once(runs, bench_app.floor_end_start, bench_app.floor_carry, bench_app.floor_end)


@dataclass
class ResumeTrial:
    total: float  # client call -> b starts (s)
    prep: float  # client call -> b's task sent (s)
    hop: float  # b's task sent -> b starts (s)


def resume_once(bench_app: ModuleType, kind: str, sent_at: list[float]) -> ResumeTrial:
    from langgraph_celery import GraphInput

    graph = bench_app.GRAPHS[f"resume_{kind}"]
    cfg = _cfg(_thread(f"resume-{kind}"))
    parked = graph.invoke({"count": 0}, cfg)
    if parked["count"] != 1 or "b_started" in parked.data:
        raise AssertionError(f"the run did not park before b: {parked!r}")
    sent_at.clear()
    t0 = time.time()
    final = graph.invoke(GraphInput.resume(), cfg)
    b_started = float(final["b_started"])
    if final["count"] != 2 or len(sent_at) != 1:
        raise AssertionError(f"the resumed run ended with {final!r}")
    return ResumeTrial(total=b_started - t0, prep=sent_at[0] - t0, hop=b_started - sent_at[0])


def bare_hop_once(bench_app: ModuleType) -> float:
    t0 = time.time()
    started = float(bench_app.stamp.apply_async().get(timeout=30))
    return started - t0


# -- scenarios ------------------------------------------------------------------------------------


#: Ours with ``durability="exit"`` (issue 12), in scenarios 1 and 2: checkpoints carried between
#: steps in the result backend, stored at the run's start and end.
EXIT_VARIANTS = ("pg_exit", "sqlite_exit")
TARGET_EXIT_RATIO = 1.1
#: Ours with ``durability="async"``: each step carried as with "exit" and stored behind the send.
ASYNC_VARIANTS = ("pg_async", "sqlite_async")
#: (variant -> (saver kind, durability)) of the variants above
MODE_VARIANTS = {v: tuple(v.split("_")) for v in (*EXIT_VARIANTS, *ASYNC_VARIANTS)}

#: Scenario 1 variants: ours on each saver via invoke, ours on PostgreSQL via start()+wait(),
#: bare chains of ``noop`` (the app's options) and of ``noop_default`` (Celery's defaults), and
#: the floor (a bare chain reading and storing a PostgreSQL row per step).
CHAIN_VARIANTS = (
    "bare",
    "bare_default",
    "floor",
    "pg",
    "sqlite",
    "pg_wait",
    *EXIT_VARIANTS,
    *ASYNC_VARIANTS,
)


@dataclass
class ChainFigures:
    rounds: int
    median_ms: dict[str, float]  # variant -> median ms/run
    split_ms: dict[str, dict[str, float]]  # ours variant -> head/span/tail medians
    samples_ms: dict[str, list[float]] = field(default_factory=dict)


def _chain_variant(bench_app: ModuleType, variant: str) -> tuple[float, dict[str, float] | None]:
    length = bench_app.CHAIN_LENGTH
    if variant == "bare":
        return bare_chain_once(bench_app, length), None
    if variant == "bare_default":
        return bare_chain_once(bench_app, length, "noop_default"), None
    if variant == "floor":
        return floor_chain_once(bench_app, length), None
    if variant == "pg_wait":
        return ours_chain_once(bench_app, "pg", wait=True)
    if variant in MODE_VARIANTS:
        kind, mode = MODE_VARIANTS[variant]
        return ours_chain_once(bench_app, kind, durability=mode)
    return ours_chain_once(bench_app, variant)


def scenario_chain(bench_app: ModuleType, rounds: int, warmup: int) -> ChainFigures:
    for _ in range(warmup):
        for variant in CHAIN_VARIANTS:
            _chain_variant(bench_app, variant)
    samples: dict[str, list[float]] = {v: [] for v in CHAIN_VARIANTS}
    splits: dict[str, list[dict[str, float]]] = {v: [] for v in CHAIN_VARIANTS}
    for round_no in range(rounds):
        shift = round_no % len(CHAIN_VARIANTS)
        for variant in CHAIN_VARIANTS[shift:] + CHAIN_VARIANTS[:shift]:
            elapsed, split = _chain_variant(bench_app, variant)
            samples[variant].append(elapsed)
            if split is not None:
                splits[variant].append(split)
    return ChainFigures(
        rounds=rounds,
        median_ms={v: 1000 * _median(samples[v]) for v in CHAIN_VARIANTS},
        split_ms={
            v: {part: 1000 * _median([s[part] for s in splits[v]]) for part in SPLIT_PARTS}
            for v in CHAIN_VARIANTS
            if splits[v]
        },
        samples_ms={v: [1000 * s for s in samples[v]] for v in CHAIN_VARIANTS},
    )


@dataclass
class ConcurrentFigures:
    rounds: int
    runs: int
    ours_ms: dict[str, float]
    bare_ms: float
    floor_ms: float
    #: the floor of ``durability="exit"`` (the run's input and end stored, nothing between)
    floor_exit_ms: float
    #: the same with only the run's end stored (its start claimed in Redis)
    floor_end_ms: float
    samples_ms: dict[str, list[float]] = field(default_factory=dict)


def scenario_concurrent(bench_app: ModuleType, rounds: int, runs: int) -> ConcurrentFigures:
    ours_concurrent_once(bench_app, "pg", 4)
    ours_concurrent_once(bench_app, "sqlite", 4)
    bare_concurrent_once(bench_app, 4)
    floor_concurrent_once(bench_app, 4)
    floor_exit_concurrent_once(bench_app, 4)
    floor_end_concurrent_once(bench_app, 4)
    ours_concurrent_once(bench_app, "pg", 4, "exit")
    ours_concurrent_once(bench_app, "pg", 4, "async")
    variants = ["bare", "floor", "floor_exit", "floor_end", *KINDS, *MODE_VARIANTS]
    samples: dict[str, list[float]] = {v: [] for v in variants}
    for round_no in range(rounds):
        shift = round_no % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            if variant == "bare":
                samples[variant].append(bare_concurrent_once(bench_app, runs))
            elif variant == "floor":
                samples[variant].append(floor_concurrent_once(bench_app, runs))
            elif variant == "floor_exit":
                samples[variant].append(floor_exit_concurrent_once(bench_app, runs))
            elif variant == "floor_end":
                samples[variant].append(floor_end_concurrent_once(bench_app, runs))
            elif variant in MODE_VARIANTS:
                kind, mode = MODE_VARIANTS[variant]
                samples[variant].append(ours_concurrent_once(bench_app, kind, runs, mode))
            else:
                samples[variant].append(ours_concurrent_once(bench_app, variant, runs))
    return ConcurrentFigures(
        rounds=rounds,
        runs=runs,
        ours_ms={kind: 1000 * _median(samples[kind]) for kind in (*KINDS, *MODE_VARIANTS)},
        bare_ms=1000 * _median(samples["bare"]),
        floor_ms=1000 * _median(samples["floor"]),
        floor_exit_ms=1000 * _median(samples["floor_exit"]),
        floor_end_ms=1000 * _median(samples["floor_end"]),
        samples_ms={v: [1000 * s for s in samples[v]] for v in variants},
    )


@dataclass
class ResumeFigures:
    trials: int
    p50_ms: dict[str, float]
    p95_ms: dict[str, float]
    prep_p50_ms: dict[str, float]
    hop_p50_ms: dict[str, float]
    bare_hop_p50_ms: float
    bare_hop_p95_ms: float
    samples_ms: dict[str, list[float]] = field(default_factory=dict)


def scenario_resume(bench_app: ModuleType, trials: int) -> ResumeFigures:
    sent_at: list[float] = []
    executor = bench_app.executor
    send = executor._send_node

    def recording_send(*args: Any, **kwargs: Any) -> None:
        sent_at.append(time.time())
        send(*args, **kwargs)

    setattr(executor, "_send_node", recording_send)  # noqa: B010 - instance shadowing
    try:
        for kind in KINDS:
            resume_once(bench_app, kind, sent_at)
        bare_hop_once(bench_app)
        results: dict[str, list[ResumeTrial]] = {kind: [] for kind in KINDS}
        hops: list[float] = []
        for _ in range(trials):
            for kind in KINDS:
                results[kind].append(resume_once(bench_app, kind, sent_at))
            hops.append(bare_hop_once(bench_app))
    finally:
        del executor._send_node
    return ResumeFigures(
        trials=trials,
        p50_ms={k: 1000 * _median([t.total for t in results[k]]) for k in KINDS},
        p95_ms={k: 1000 * _p95([t.total for t in results[k]]) for k in KINDS},
        prep_p50_ms={k: 1000 * _median([t.prep for t in results[k]]) for k in KINDS},
        hop_p50_ms={k: 1000 * _median([t.hop for t in results[k]]) for k in KINDS},
        bare_hop_p50_ms=1000 * _median(hops),
        bare_hop_p95_ms=1000 * _p95(hops),
        samples_ms={
            **{k: [1000 * t.total for t in results[k]] for k in KINDS},
            "bare_hop": [1000 * h for h in hops],
        },
    )


# -- CPU accounting -------------------------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` in clock ticks (0 if it is gone or unreadable)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            text_ = (task / "children").read_text().split()
            found.extend(int(child) for child in text_)
    return found


class CpuMeter:
    """CPU time used by the processes of the benchmark: this client, the worker (main process
    and pool child), the PostgreSQL backends connected to the bench database, Redis."""

    def __init__(self, services: Services, worker: Worker) -> None:
        self.services = services
        self.worker = worker
        client = redis.Redis.from_url(services.redis_url)
        try:
            self.redis_pid = int(client.info("server").get("process_id", 0))
        finally:
            client.close()
        self.admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")

    def close(self) -> None:
        self.admin.dispose()

    def _pg_pids(self) -> list[int]:
        with self.admin.connect() as conn:
            rows = conn.execute(
                text("SELECT pid FROM pg_stat_activity WHERE datname = :name"),
                {"name": PG_DATABASE},
            ).all()
        return [int(row.pid) for row in rows]

    def _groups(self) -> dict[str, list[int]]:
        main = self.worker.process.pid
        return {
            "client": [os.getpid()],
            "worker": [main, *_children(main)],
            "postgres": self._pg_pids(),
            "redis": [self.redis_pid] if self.redis_pid else [],
        }

    def sample(self) -> dict[str, dict[int, int]]:
        return {
            group: {pid: _cpu_ticks(pid) for pid in pids} for group, pids in self._groups().items()
        }

    @staticmethod
    def delta_ms(
        before: dict[str, dict[int, int]], after: dict[str, dict[int, int]]
    ) -> dict[str, float]:
        """CPU ms per group between two samples (processes present in both)."""
        out: dict[str, float] = {}
        for group, ticks in after.items():
            old = before.get(group, {})
            used = sum(t - old[pid] for pid, t in ticks.items() if pid in old)
            out[group] = 1000.0 * used / _CLK_TCK
        out["total"] = sum(out.values())
        return out


@dataclass
class CpuFigures:
    runs: int
    wall_ms: dict[str, float]  # variant -> wall ms per run (mean over the batch)
    cpu_ms: dict[str, dict[str, float]]  # variant -> process group -> CPU ms per run
    #: the same for scenario 2: per batch of concurrent runs (``pg``, ``sqlite``, ``bare``)
    batch_wall_ms: dict[str, float] = field(default_factory=dict)
    batch_cpu_ms: dict[str, dict[str, float]] = field(default_factory=dict)


def _metered(
    meter: CpuMeter, variants: Mapping[str, Callable[[], object]], runs: int
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Each variant ``runs`` times back to back: wall ms and CPU ms per process group, per run."""
    wall: dict[str, float] = {}
    cpu: dict[str, dict[str, float]] = {}
    for variant, once in variants.items():
        once()  # connections of every pool are open
        before = meter.sample()
        t0 = time.perf_counter()
        for _ in range(runs):
            once()
        wall[variant] = 1000 * (time.perf_counter() - t0) / runs
        after = meter.sample()
        cpu[variant] = {group: used / runs for group, used in meter.delta_ms(before, after).items()}
    return wall, cpu


def cpu_pass(services: Services, bench_app: ModuleType, worker: Worker, runs: int) -> CpuFigures:
    """Each scenario-1 variant ``runs`` times back to back, then each scenario-2 variant, with
    the CPU each process used."""
    meter = CpuMeter(services, worker)
    chains = {v: functools.partial(_chain_variant, bench_app, v) for v in CHAIN_VARIANTS}
    batches: dict[str, Callable[[], object]] = {
        kind: functools.partial(ours_concurrent_once, bench_app, kind, CONCURRENT_RUNS)
        for kind in KINDS
    }
    batches["bare"] = functools.partial(bare_concurrent_once, bench_app, CONCURRENT_RUNS)
    batches["floor"] = functools.partial(floor_concurrent_once, bench_app, CONCURRENT_RUNS)
    try:
        wall, cpu = _metered(meter, chains, runs)
        batch_wall, batch_cpu = _metered(meter, batches, max(1, runs // 2))
    finally:
        meter.close()
    return CpuFigures(runs, wall, cpu, batch_wall, batch_cpu)


# -- profiling ------------------------------------------------------------------------------------


class _ClientCounter:
    """Counts the client's SQL statements and saver calls (polls) while ``active``."""

    def __init__(self, saver: Any, calls: Sequence[str]) -> None:
        self.saver = saver
        self.names = tuple(calls)
        self.active = False
        self.statements = 0
        self.calls: dict[str, int] = {}
        execute = saver._execute

        def counted(statement: Any, params: Any) -> Any:
            # every saver statement goes through here (one statement, autocommit)
            if self.active:
                self.statements += 1
            return execute(statement, params)

        saver._execute = counted
        for name in self.names:
            setattr(saver, name, self._counting(name, getattr(saver, name)))

    def _counting(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*args, **kwargs)

        return wrapper

    def close(self) -> None:
        for name in ("_execute", *self.names):
            with contextlib.suppress(AttributeError):
                delattr(self.saver, name)


@dataclass
class ProfileFigures:
    runs: int
    worker: dict[str, Any]  # bench.stats report (kinds)
    client_per_run: dict[str, dict[str, float]]  # kind -> statements / saver calls per run
    cprofile_paths: list[str] = field(default_factory=list)


def profile_pass(
    services: Services, bench_app: ModuleType, runs: int, cprofile_out: Path | None
) -> ProfileFigures:
    length = bench_app.CHAIN_LENGTH
    with running_worker(services, bench_app, {"LGC_BENCH_PROFILE": "1"}, "worker-profile.log"):
        for kind in PROFILE_KINDS:
            ours_chain_once(bench_app, kind)
        bare_chain_once(bench_app, length)
        bench_app.stats.apply_async(kwargs={"reset": True}).get(timeout=30)
        client: dict[str, dict[str, float]] = {}
        for kind in PROFILE_KINDS:
            saver = bench_app.SAVERS[kind]
            counter = _ClientCounter(saver, bench_app.SAVER_CALLS)
            try:
                counter.active = True
                for _ in range(runs):
                    ours_chain_once(bench_app, kind)
                counter.active = False
            finally:
                counter.close()
            client[kind] = {"sql_statements": counter.statements / runs}
            client[kind].update({f"saver.{k}": v / runs for k, v in sorted(counter.calls.items())})
        for _ in range(runs):
            bare_chain_once(bench_app, length)
            bare_chain_once(bench_app, length, "noop_default")
            floor_chain_once(bench_app, length)
        for kind in PROFILE_KINDS:  # (their tasks show as node:bench_pair_<kind>)
            ours_concurrent_once(bench_app, kind, CONCURRENT_RUNS)
        report = bench_app.stats.apply_async(kwargs={"reset": True}).get(timeout=30)
    figures = ProfileFigures(runs=runs, worker=report["kinds"], client_per_run=client)
    if cprofile_out is not None:
        for timer in ("wall", "cpu"):
            env = {"LGC_BENCH_PROFILE": "1", "LGC_BENCH_CPROFILE": timer}
            with running_worker(services, bench_app, env, f"worker-cprofile-{timer}.log"):
                ours_chain_once(bench_app, "pg")
                bench_app.stats.apply_async(kwargs={"reset": True}).get(timeout=30)
                for _ in range(runs):
                    ours_chain_once(bench_app, "pg")
                report = bench_app.stats.apply_async(kwargs={"reset": True}).get(timeout=30)
            path = cprofile_out.with_name(f"{cprofile_out.stem}-{timer}{cprofile_out.suffix}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(report["cprofile"])
            figures.cprofile_paths.append(str(path))
    return figures


# -- report ---------------------------------------------------------------------------------------


@dataclass
class Report:
    environment: dict[str, Any]
    chain: ChainFigures
    concurrent: ConcurrentFigures
    resume: ResumeFigures
    profile: ProfileFigures | None
    cpu: CpuFigures | None
    targets: dict[str, bool]


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"


def render(report: Report) -> str:
    env = report.environment
    chain_, conc, res = report.chain, report.concurrent, report.resume
    length = env["chain_length"]
    lines = [
        "langgraph_celery on Celery vs bare Celery",
        f"Python {env['python']} ({env['implementation']}), Celery {env['celery']}, "
        f"kombu {env['kombu']}, redis-py {env['redis_py']}, SQLAlchemy {env['sqlalchemy']}, "
        f"psycopg {env['psycopg']}",
        f"PostgreSQL {env['postgresql']}, SQLite {env['sqlite']}, Redis {env['redis_server']} "
        f"(db {REDIS_DB}), {env['cpus']} CPUs, load average {env['loadavg_before']} before / "
        f"{env['loadavg_after']} after, {env['platform']}",
        f"langgraph_celery {env['langgraph_celery']} at {env['source']}; one worker: "
        "celery -A bench.celery_bench_app worker -P prefork -c 1",
        "",
        f"{'figure':<46}{'ours PG':>10}{'ours SQLite':>13}{'bare':>9}"
        f"{'PG/bare':>9}{'target':>9}{'met':>5}",
        "-" * 101,
    ]

    def row(
        label: str,
        pg: float,
        lite: float | None,
        bare: float | None,
        target: str = "",
        met: str = "",
    ) -> None:
        lite_s = f"{lite:13.2f}" if lite is not None else " " * 13
        bare_s = f"{bare:9.2f}" if bare is not None else " " * 9
        ratio = f"{pg / bare:9.2f}" if bare else " " * 9
        lines.append(f"{label:<46}{pg:10.2f}{lite_s}{bare_s}{ratio}{target:>9}{met:>5}")

    med = chain_.median_ms
    row(
        f"1. chain of {length}: ms/run (median, {chain_.rounds} rounds)",
        med["pg"],
        med["sqlite"],
        med["bare"],
        f"<={TARGET_RATIO}",
        _met(report.targets["chain_ratio"]),
    )
    row("   ms/step", med["pg"] / length, med["sqlite"] / length, med["bare"] / length)
    for part in SPLIT_PARTS:
        row(
            f"   ours split: {part} ms (median)",
            chain_.split_ms["pg"][part],
            chain_.split_ms["sqlite"][part],
            None,
        )
    row("   ours PG via start()+wait(): ms/run", med["pg_wait"], None, med["bare"])
    wait_split = " / ".join(f"{chain_.split_ms['pg_wait'][p]:.2f}" for p in SPLIT_PARTS)
    lines.append(f"{'     its head / span / tail ms (median)':<46}{wait_split:>10}")
    default = med["bare_default"]
    lines.append(
        f"{'   bare, Celery default task options: ms/run':<46}{'':23}{default:9.2f}"
        f"{med['pg'] / default:9.2f}   ({default / length:.2f} ms/step)"
    )
    lines.append(f"   SQLite/bare ratio {med['sqlite'] / med['bare']:.2f}")
    row("   floor (bare + PG read+insert/step): ms/run", med["floor"], None, med["bare"])
    lines.append(f"   ours PG / floor {med['pg'] / med['floor']:.2f}")
    row(
        f"2. {conc.runs} concurrent 2-node runs: total ms",
        conc.ours_ms["pg"],
        conc.ours_ms["sqlite"],
        conc.bare_ms,
        f"<={TARGET_RATIO}",
        _met(report.targets["concurrent_ratio"]),
    )
    lines.append(
        f"   ({conc.rounds} rounds; SQLite/bare {conc.ours_ms['sqlite'] / conc.bare_ms:.2f})"
    )
    row("   floor (bare + PG read+insert/step): ms", conc.floor_ms, None, conc.bare_ms)
    lines.append(f"   ours PG / floor {conc.ours_ms['pg'] / conc.floor_ms:.2f}")
    lines += render_exit(report)
    row(
        f"3. resume -> b starts: p50 ms ({res.trials} trials)",
        res.p50_ms["pg"],
        res.p50_ms["sqlite"],
        res.bare_hop_p50_ms,
        f"<{TARGET_RESUME_P50_MS:g}ms",
        _met(report.targets["resume_p50"]),
    )
    row("   p95 ms", res.p95_ms["pg"], res.p95_ms["sqlite"], res.bare_hop_p95_ms)
    row(
        "   client prep (call -> b sent) p50",
        res.prep_p50_ms["pg"],
        res.prep_p50_ms["sqlite"],
        None,
    )
    row("   b sent -> b starts p50", res.hop_p50_ms["pg"], res.hop_p50_ms["sqlite"], None)
    lines.append("   (bare column of 3.: one bare task, apply_async -> its body starts)")
    if report.cpu is not None:
        lines += ["", *render_cpu(report.cpu, length)]
    if report.profile is not None:
        lines += ["", *render_profile(report.profile, length)]
    return "\n".join(lines)


def render_exit(report: Report) -> list[str]:
    """Scenarios 1 and 2 with ``durability="exit"`` and ``"async"``: ratios to bare, against
    issue 12's target (for "exit")."""
    med, conc = report.chain.median_ms, report.concurrent
    lines = []
    for mode, target in (("exit", f" (target <= {TARGET_EXIT_RATIO} of bare)"), ("async", "")):
        if f"pg_{mode}" not in med:
            continue
        lines.append(f"   durability={mode!r}{target}:")
        for label, ours, bare in (
            (f"1. chain of {report.environment['chain_length']}: ms/run", med, med["bare"]),
            (f"2. {conc.runs} concurrent 2-node runs: ms", conc.ours_ms, conc.bare_ms),
        ):
            pg, lite = ours[f"pg_{mode}"], ours[f"sqlite_{mode}"]
            lines.append(
                f"   {label:<43}{pg:10.2f}{lite:13.2f}{bare:9.2f}{pg / bare:9.2f}"
                f"   SQLite/bare {lite / bare:.2f}; sync PG/bare {ours['pg'] / bare:.2f}, "
                f"SQLite/bare {ours['sqlite'] / bare:.2f}"
            )
        if mode == "exit":
            floor = conc.floor_exit_ms
            lines.append(
                f"   {'   its floor (bare + PG insert of input and end)':<43}{floor:10.2f}"
                f"{'':13}{conc.bare_ms:9.2f}{floor / conc.bare_ms:9.2f}"
                f"   ours PG / floor {conc.ours_ms['pg_exit'] / floor:.2f}, "
                f"SQLite / floor {conc.ours_ms['sqlite_exit'] / floor:.2f}"
            )
            end = conc.floor_end_ms
            lines.append(
                f"   {'   floor, end only (Redis claim, PG insert of end)':<43}{end:10.2f}"
                f"{'':13}{conc.bare_ms:9.2f}{end / conc.bare_ms:9.2f}"
                f"   ours PG / it {conc.ours_ms['pg_exit'] / end:.2f}, "
                f"SQLite / it {conc.ours_ms['sqlite_exit'] / end:.2f}"
            )
    return lines


def render_concurrent(conc: ConcurrentFigures, env: Mapping[str, Any]) -> str:
    """Scenario 2 alone (``--concurrent-only``): each variant's median and its ratio to bare
    and to the end-only floor, with the spread of the per-round ratios to bare."""
    lines = [
        f"{conc.runs} concurrent 2-node runs, {conc.rounds} interleaved rounds "
        f"(load before {env.get('loadavg_before')}, after {_loadavg()}):",
        f"  {'variant':<12}{'median ms':>11}{'/ bare':>9}{'/ floor end':>12}"
        f"{'per-round / bare: q1':>23}{'q3':>7}",
    ]
    bare = conc.samples_ms["bare"]
    for variant, samples in conc.samples_ms.items():
        median = _median(samples)
        paired = sorted(s / b for s, b in zip(samples, bare, strict=True))
        quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else [paired[0]] * 3
        lines.append(
            f"  {variant:<12}{median:11.1f}{median / conc.bare_ms:9.2f}"
            f"{median / conc.floor_end_ms:12.2f}{quartiles[0]:23.2f}{quartiles[2]:7.2f}"
        )
    return "\n".join(lines)


def render_cpu(cpu: CpuFigures, length: int) -> list[str]:
    groups = ("client", "worker", "postgres", "redis", "total")
    lines = [
        f"CPU per {length}-step run ({cpu.runs} runs of each variant back to back; ms of CPU "
        "from /proc, 10 ms ticks):",
        f"  {'variant':<14}{'wall ms':>9}" + "".join(f"{g:>10}" for g in groups),
    ]
    for variant, used in cpu.cpu_ms.items():
        lines.append(
            f"  {variant:<14}{cpu.wall_ms[variant]:9.1f}"
            + "".join(f"{used.get(g, 0.0):10.1f}" for g in groups)
        )
    if cpu.batch_cpu_ms:
        lines.append(f"  per batch of {CONCURRENT_RUNS} concurrent 2-node runs:")
        for variant, used in cpu.batch_cpu_ms.items():
            lines.append(
                f"  {variant:<14}{cpu.batch_wall_ms[variant]:9.1f}"
                + "".join(f"{used.get(g, 0.0):10.1f}" for g in groups)
            )
    return lines


def render_profile(profile: ProfileFigures, length: int) -> list[str]:
    lines = [
        f"Profile (worker with LGC_BENCH_PROFILE=1, {profile.runs} runs of each; per task, ms "
        "wall (CPU); body = prerun->postrun: STARTED store + function + result store + "
        "chain send):",
    ]
    for kind, data in sorted(profile.worker.items()):
        phases = ", ".join(
            f"{name} {p['calls']:.0f}x {p['ms']:.2f} ({p['cpu_ms']:.2f} CPU)"
            for name, p in data["phases"].items()
        )
        lines.append(
            f"  {kind:<24} {data['tasks']:5d} tasks  body {data['body_ms']:.2f} ms "
            f"({data['body_cpu_ms']:.2f} CPU)  "
            f"SQL {data['sql_statements']:.2f} stmts, "
            f"{data['pg_round_trips']:.2f} PG round trips"
        )
        if phases:
            lines.append(f"  {'':<24} {phases}")
    for kind, counts in profile.client_per_run.items():
        per_run = ", ".join(f"{k} {v:.1f}" for k, v in counts.items())
        lines.append(f"  client per {length}-node run ({kind}): {per_run}")
    for path in profile.cprofile_paths:
        lines.append(f"  cProfile of node task bodies (PG): {path}")
    return lines


# -- main -----------------------------------------------------------------------------------------


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def environment(services: Services, bench_app: ModuleType) -> dict[str, Any]:
    client = redis.Redis.from_url(services.redis_url)
    try:
        redis_server = str(client.info("server").get("redis_version", "?"))
    finally:
        client.close()
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "celery": _version("celery"),
        "kombu": _version("kombu"),
        "redis_py": _version("redis"),
        "sqlalchemy": _version("SQLAlchemy"),
        "psycopg": _version("psycopg"),
        "langgraph_celery": _version("langgraph-celery"),
        "source": source_state(),
        "postgresql": services.pg_version,
        "sqlite": services.sqlite_version,
        "redis_server": redis_server,
        "cpus": os.cpu_count(),
        "platform": platform.platform(terse=True),
        "chain_length": bench_app.CHAIN_LENGTH,
        "loadavg_before": _loadavg(),
        "loadavg_after": "",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: few repetitions")
    parser.add_argument("--json", type=Path, help="save the figures to this JSON file")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiling passes")
    parser.add_argument(
        "--cprofile-out",
        type=Path,
        default=None,
        help="where to write the worker's cProfile texts, as STEM-wall.txt and STEM-cpu.txt "
        "(default: next to --json, or skipped)",
    )
    parser.add_argument(
        "--concurrent-only",
        type=int,
        metavar="ROUNDS",
        default=0,
        help="run only scenario 2, in this many interleaved rounds, and print its ratios",
    )
    args = parser.parse_args(argv)
    quick: bool = args.quick
    rounds, warmup = (3, 1) if quick else (40, 3)
    conc_rounds = args.concurrent_only or (2 if quick else 25)
    trials = 5 if quick else 40
    profile_runs = 3 if quick else 20
    cpu_runs = 3 if quick else 15

    services = prepare_services()
    os.environ.update(services.env())
    for key in ("LGC_BENCH_PROFILE", "LGC_BENCH_CPROFILE"):
        os.environ.pop(key, None)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        bench_app = importlib.import_module("bench.celery_bench_app")
        for saver in bench_app.SAVERS.values():
            saver.setup()  # tables exist before the worker races for them
        bench_app.floor_setup()
        env = environment(services, bench_app)
        print(
            f"Celery bench: {'quick' if quick else 'full'} run; tables {services.table_prefix}*; "
            f"worker logs in {services.tmpdir}",
            file=sys.stderr,
        )
        if args.concurrent_only:
            with running_worker(services, bench_app, {}, "worker.log"):
                conc = scenario_concurrent(bench_app, conc_rounds, CONCURRENT_RUNS)
            print(render_concurrent(conc, env))
            if args.json is not None:
                args.json.write_text(json.dumps(asdict(conc), indent=2) + "\n")
            return 0
        with running_worker(services, bench_app, {}, "worker.log") as worker:
            try:
                print("1. chain ...", file=sys.stderr)
                chain_ = scenario_chain(bench_app, rounds, warmup)
                print("2. concurrent ...", file=sys.stderr)
                conc = scenario_concurrent(bench_app, conc_rounds, CONCURRENT_RUNS)
                print("3. resume ...", file=sys.stderr)
                res = scenario_resume(bench_app, trials)
                cpu = None
                if not args.no_profile:
                    print("CPU accounting ...", file=sys.stderr)
                    cpu = cpu_pass(services, bench_app, worker, cpu_runs)
            except BaseException:
                # (the log goes with the temporary folder)
                print(f"the worker's log ends:\n{worker.tail(80)}", file=sys.stderr)
                raise
        profile = None
        if not args.no_profile:
            print("profiling ...", file=sys.stderr)
            cprofile_out = args.cprofile_out
            if cprofile_out is None and args.json is not None:
                cprofile_out = args.json.with_name(args.json.stem + ".cprofile.txt")
            profile = profile_pass(services, bench_app, profile_runs, cprofile_out)
        env["loadavg_after"] = _loadavg()
        report = Report(
            environment=env,
            chain=chain_,
            concurrent=conc,
            resume=res,
            profile=profile,
            cpu=cpu,
            targets={
                "chain_ratio": chain_.median_ms["pg"] / chain_.median_ms["bare"] <= TARGET_RATIO,
                "concurrent_ratio": conc.ours_ms["pg"] / conc.bare_ms <= TARGET_RATIO,
                "resume_p50": res.p50_ms["pg"] < TARGET_RESUME_P50_MS,
                "exit_chain_ratio": max(chain_.median_ms[v] for v in EXIT_VARIANTS)
                / chain_.median_ms["bare"]
                <= TARGET_EXIT_RATIO,
                "exit_concurrent_ratio": max(conc.ours_ms[v] for v in EXIT_VARIANTS) / conc.bare_ms
                <= TARGET_EXIT_RATIO,
            },
        )
        print(render(report))
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(asdict(report), indent=2) + "\n")
        return 0
    finally:
        loaded = sys.modules.get("bench.celery_bench_app")
        for saver in getattr(loaded, "SAVERS", {}).values():
            saver.dispose()
        if loaded is not None:
            loaded.floor_close()
        cleanup_services(services)


if __name__ == "__main__":
    sys.exit(main())
