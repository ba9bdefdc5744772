"""Soak benchmark: many runs through two Celery workers while chaos actions fire at random.

Set-up (see ``bench/soak_app.py`` for the app and graphs):

* Redis db 8 is the broker and the result backend (flushed before and after, and by the chaos);
  db 7 is the nodes' side channel (execution counts, which pool process runs which node),
  flushed before and after.
* PostgreSQL database ``lgc_soak`` (created if missing) holds the checkpoints, in tables under a
  unique prefix dropped at the end.
* Two workers: ``celery -A bench.soak_app worker -P prefork -c 2 -n w1@%h`` and ``w2@%h``.
* The driver (this process) keeps ``--inflight`` runs going with ``graph.start(...)``, of five
  kinds, each with the ending it must reach (``soak_app.intended``), chaos or not:

  ``fan`` (45 %)     ``a -> b1, b2 -> c``: completed;
  ``park`` (25 %)    the same, parked before ``c``; the driver resumes it after a random delay
                     with ``GraphInput.resume``: completed;
  ``poison`` (10 %)  a node (``a``, alone in its step, or ``b1``, beside ``b2``) returns an
                     update the JSON serializer refuses or a reducer raises on: failed, with
                     ``SerializationError`` / ``InvalidUpdateError``;
  ``dying`` (8 %)    a node ends its pool process on every delivery (``sys.exit``,
                     ``os._exit``): failed, ``NodeError`` ``WorkerLostError`` (after 3
                     deliveries);
  ``hang`` (12 %)    a node with a 1 s timeout sleeps past it: on every attempt (failed,
                     ``TimeoutError``), on its first only (its RetryPolicy retries it: completed),
                     or ignoring the soft limit until the hard one kills it (failed,
                     ``TimeoutError`` "ran past its hard time limit").

  It polls each run with ``RunHandle.status()`` (and, for a failed one, takes the error from
  ``RunHandle.wait``), and calls the reaper, ``reap(executor)``, every second
  (``stalled_after`` = 3 s), standing in for ``celery beat``.
* A chaos thread fires one action every 0.5-1 s, picked at random:

  ``kill9``          ``kill -9`` of a worker pool process that is running a node;
  ``flushdb``        ``FLUSHDB`` of the broker's Redis db (queued and unacked messages lost);
  ``duplicate``      a node message sent again with the same task id and kwargs (taken from
                     the unacked messages, the queue, or a finished task's extended result);
  ``double_resume``  two concurrent resumes of the same parked thread (one must win);
  ``pg_kill``        ``pg_terminate_backend`` of every other backend of the soak database;
  ``revoke``         what Flower's *Terminate* does: ``app.control.revoke(task_id,
                     terminate=True)`` of a node task of a ``fan`` or ``park`` run that a worker
                     reports active (``inspect().active()``), the one with the most time left.
                     The run must then be ``cancelled`` (``RunHandle.status()`` and the run
                     index agree); the driver resumes it with ``GraphInput.resume()``, after
                     which it must complete like any run of its kind.  If the node finished
                     before the revoke reached it, the run goes on and completes.

At the end, with the chaos stopped and the runs drained, each thread's final state is read.  A
node appends ``<thread>:<node>`` to the ``log`` appender, so every run's final state must hold
each token of its intended ending exactly once and no other: a missing one is an *update lost*,
an extra copy an *update doubled*, any other token (an update of a failed step, another
thread's) *foreign*.  Each run must have ended as intended (status, and for a failed run the
error), ``RunHandle.status()`` must agree with the run index (``saver.get_run``), and the index
must list no run of the soak's graphs as running or parked.  Also shown: the endings by kind and
fault, worker RSS (main + pool processes, ``/proc/<pid>/status`` VmRSS) before and after, wall
time, runs/s (runs ended as intended per second), the chaos actions by kind, what the reaper
did, the client errors, and node executions (a node may run more than once, e.g. after ``kill
-9``; its update must still land once).

Any run that did not end as intended, or a lost/doubled/foreign update, is diagnosed: the
driver's events for the thread, its checkpoints (oldest first) with their writes and markers,
its timer, its node executions and the worker log lines naming it.

Run from the repository root: ``python -m bench.soak`` (2,000 runs), ``--quick`` (100 runs),
``--runs N``, ``--json PATH``, ``--time-limit S`` (stop starting runs after S seconds).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import gc
import importlib
import json
import logging
import os
import platform
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from types import ModuleType
from typing import Any

import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from bench._worker import (
    ROOT,
    WorkerProcess,
    bench_database,
    drop_tables,
    flush_redis,
    source_state,
)

REDIS_SERVER = os.environ.get("LGC_SOAK_REDIS_SERVER", "redis://127.0.0.1:6379")
BROKER_DB = 8
AUX_DB = 7
PG_ADMIN_URL = os.environ.get(
    "LGC_SOAK_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
PG_DATABASE = "lgc_soak"
STALLED_AFTER = 3.0
REAP_EVERY = 1.0
CHAOS_KINDS = ("kill9", "flushdb", "duplicate", "double_resume", "pg_kill", "revoke")
#: The run kinds a chaos ``revoke`` picks a node of (their intended ending is completed).
REVOKABLE = ("fan", "park")
#: A revoke aims at a node with at least this long (seconds) still to run.
REVOKE_MIN_LEFT = 0.05
POLL_EVERY = 0.4
#: A run still going after this many seconds stops counting against --inflight.
SLOW_AFTER = 45.0
#: Once only such runs are left (and every run was started), how long to wait for them still.
SLOW_GRACE = 30.0
RESUME_ATTEMPTS = 30
START_ATTEMPTS = 8
NODE_TASK_PREFIX = "langgraph_celery.node."

log = logging.getLogger("bench.soak")


def _version(dist: str) -> str:
    try:
        return dist_version(dist)
    except PackageNotFoundError:
        return "?"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _short(error: BaseException) -> str:
    """The error's type and first line, and for a database error the statement that failed."""
    message = str(error).strip()
    first = message.splitlines()[0] if message else ""
    where = ""
    statement = re.search(r"\[SQL: ((?:INSERT INTO|DELETE FROM|UPDATE)\s+[^\s(]+)", message)
    if statement:
        where = f" [SQL: {statement.group(1)} ...]"
    elif select := re.search(r"\[SQL: (?:WITH|SELECT)\b.*?\bFROM\s+([^\s(,]+)", message, re.S):
        where = f" [SQL: SELECT ... FROM {select.group(1)} ...]"
    return f"{type(error).__name__}: {first[:160]}{where}"


def _names(kwargs: Any) -> tuple[str, str]:
    """The thread and node a node task's keyword arguments name."""
    if not isinstance(kwargs, dict):
        return "", ""
    return str(kwargs.get("thread_id", "")), str(kwargs.get("node", ""))


# -- services -------------------------------------------------------------------------------------


@dataclass
class Services:
    broker_url: str
    aux_url: str
    pg_url: str
    table_prefix: str
    tmpdir: Path
    pg_version: str = ""

    def env(self) -> dict[str, str]:
        return {
            "LGC_SOAK_REDIS_URL": self.broker_url,
            "LGC_SOAK_AUX_URL": self.aux_url,
            "LGC_SOAK_PG_URL": self.pg_url,
            "LGC_SOAK_TABLE_PREFIX": self.table_prefix,
            "LGC_SOAK_STALLED_AFTER": str(STALLED_AFTER),
        }


def prepare_services() -> Services:
    broker_url, aux_url = f"{REDIS_SERVER}/{BROKER_DB}", f"{REDIS_SERVER}/{AUX_DB}"
    flush_redis(broker_url)
    flush_redis(aux_url)
    pg_url, pg_version = bench_database(PG_ADMIN_URL, PG_DATABASE)
    return Services(
        broker_url=broker_url,
        aux_url=aux_url,
        pg_url=pg_url,
        table_prefix=f"lgcs_{uuid.uuid4().hex[:8]}_",
        tmpdir=Path(tempfile.mkdtemp(prefix="lgc-soak-")),
        pg_version=pg_version,
    )


def cleanup_services(services: Services) -> None:
    for attempt in range(5):
        try:
            drop_tables(services.pg_url, services.table_prefix)
            break
        except Exception as error:  # a connection killed by the last chaos action
            log.warning("dropping the soak tables failed (%s), again", _short(error))
            time.sleep(0.5 * (attempt + 1))
    flush_redis(services.broker_url)
    flush_redis(services.aux_url)


# -- processes ------------------------------------------------------------------------------------


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command may hold spaces and parentheses: the fields after the last ')' are fixed
    return int(stat.rsplit(")", 1)[1].split()[1])


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _ppid(int(entry.name)) == pid:
            found.append(int(entry.name))
    return sorted(found)


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Worker(WorkerProcess):
    """One ``celery -A bench.soak_app worker -P prefork -c 2 -n <name>@%h`` subprocess."""

    def __init__(self, services: Services, name: str) -> None:
        self.name = name
        super().__init__(
            "bench.soak_app",
            concurrency=2,
            node_name=f"{name}@%h",
            env=services.env(),
            log_path=services.tmpdir / f"worker-{name}.log",
        )

    def pool(self) -> list[int]:
        return children_of(self.pid)

    def rss(self) -> dict[str, int]:
        pool = self.pool()
        return {
            "main_kib": rss_kib(self.pid),
            "pool_kib": sum(rss_kib(p) for p in pool),
            "pool_processes": len(pool),
        }


def wait_workers(app_module: ModuleType, workers: Sequence[Worker], timeout: float = 90.0) -> None:
    """Until each worker (by node name) has answered a ping and has its 2 pool processes."""
    deadline = time.monotonic() + timeout
    wanted = {w.name for w in workers}
    seen: set[str] = set()
    while time.monotonic() < deadline:
        for worker in workers:
            if not worker.alive():
                raise RuntimeError(f"worker {worker.name} exited:\n{worker.tail()}")
        pending = [app_module.ping.apply_async() for _ in range(8)]
        for result in pending:
            with contextlib.suppress(Exception):
                seen.add(str(result.get(timeout=2)["hostname"]).split("@", 1)[0])
        if wanted <= seen and all(len(w.pool()) == 2 for w in workers):
            # drop the unanswered pings now: collected at exit, they log a traceback
            pending.clear()
            gc.collect()
            return
    tails = "\n".join(f"--- {w.name}\n{w.tail()}" for w in workers)
    raise RuntimeError(f"workers not ready after {timeout} s (seen {sorted(seen)}):\n{tails}")


def worker_memory(workers: Sequence[Worker]) -> dict[str, dict[str, int]]:
    return {w.name: w.rss() for w in workers}


# -- runs -----------------------------------------------------------------------------------------


@dataclass
class RunRecord:
    index: int
    kind: str  # a key of soak_app.KINDS
    thread_id: str
    fault: Any = None  # a soak_app.Fault for the faulty kinds
    intended: Any = None  # the soak_app.Ending the run must reach
    run_id: str = ""
    started_at: float = 0.0  # monotonic, 0 until started
    done_at: float = 0.0
    status: str = "pending"  # pending, running, parked, completed, failed, cancelled, stuck
    done: bool = False  # the driver stopped following the run (it ended, or it gave up)
    error: str = ""  # a failed run's error: class name (NodeError/<error_type>)
    error_message: str = ""
    resumed: bool = False  # (park) the resume that adds the "resume" token was accepted
    resume_busy: bool = False  # a resume is being attempted (main loop or chaos)
    resume_at: float = 0.0
    resume_attempts: int = 0
    last_resume: str = ""  # what the last resume attempt was: "token" or "plain"
    revoked_task: str = ""  # the task id a chaos revoke terminated
    revoke_pending: bool = False  # revoked, and not yet seen cancelled or completed
    cancels_seen: int = 0  # times the driver found it cancelled after a revoke
    cancel_index: list[str] = field(default_factory=list)  # the run index's status then
    cancel_resumes: int = 0  # resumes of it accepted after a cancel
    slow: bool = False
    next_poll: float = 0.0
    events: list[str] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.started_at > 0 and not self.done

    @property
    def label(self) -> str:
        """The kind, and for a faulty kind its mode."""
        return self.kind if self.fault is None else f"{self.kind}/{self.fault.mode}"


class Soak:
    """The driver: starts, follows and resumes runs; the reaper and chaos threads."""

    def __init__(
        self,
        services: Services,
        app_module: ModuleType,
        workers: Sequence[Worker],
        runs: int,
        inflight: int,
        seed: int,
        durability: str = "sync",
    ) -> None:
        self.services = services
        self.app_module = app_module
        #: every run's ``RunnableConfig(durability=...)``
        self.durability = durability
        self.workers = list(workers)
        self.inflight = inflight
        self.rng = random.Random(seed)
        self.chaos_rng = random.Random(seed + 1)
        self.lock = threading.RLock()
        self.t0 = time.monotonic()
        self.records: list[RunRecord] = []
        kinds, shares = list(app_module.KINDS), list(app_module.KINDS.values())
        for index in range(runs):
            kind = self.rng.choices(kinds, shares)[0]
            fault = None
            if kind in app_module.FAULT_MODES:
                fault = app_module.Fault(
                    kind,
                    self.rng.choice(app_module.FAULT_MODES[kind]),
                    self.rng.choice(app_module.FAULT_NODES),
                )
            thread = f"soak-{index:05d}-{kind}-{uuid.uuid4().hex[:6]}"
            ending = app_module.intended(kind, fault)
            self.records.append(RunRecord(index, kind, thread, fault, ending))
        self.by_thread = {r.thread_id: r for r in self.records}
        self.client_errors: Counter[str] = Counter()
        self.reaper_counts: Counter[str] = Counter()
        self.reaper_errors: Counter[str] = Counter()
        self.chaos_counts: Counter[str] = Counter()
        self.chaos_detail: Counter[str] = Counter()
        self.chaos_errors: Counter[str] = Counter()
        self.double_resume_outcomes: Counter[str] = Counter()
        #: times the chaos kill -9'd a process running a token (``<thread>:<node>``)
        self.kill9_hits: Counter[str] = Counter()
        self.stop_chaos = threading.Event()
        self.stop_reaper = threading.Event()
        self.broker = redis.Redis.from_url(services.broker_url, socket_timeout=5)
        self.aux = redis.Redis.from_url(services.aux_url, socket_timeout=5)
        self.admin: Engine = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")

    # -- helpers ------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.t0

    def event(self, record: RunRecord, what: str) -> None:
        with self.lock:
            record.events.append(f"{self.now():8.3f}s {what}")

    def graph(self, record: RunRecord) -> Any:
        return self.app_module.GRAPHS[record.kind]

    def config(self, record: RunRecord) -> Any:
        from langgraph_celery import RunnableConfig

        return RunnableConfig(thread_id=record.thread_id, durability=self.durability)

    def _retrying(self, what: str, fn: Callable[[], Any], attempts: int = 10) -> Any:
        """Call ``fn`` again after a store error (a chaos pg_kill), a few times."""
        for attempt in range(attempts):
            try:
                return fn()
            except Exception as error:
                self.client_errors[f"{what}: {type(error).__name__}"] += 1
                if attempt == attempts - 1:
                    raise
                time.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    # -- starting, polling, resuming ----------------------------------------------------------

    def start(self, record: RunRecord) -> None:
        graph, cfg = self.graph(record), self.config(record)
        token: dict[str, Any] = {"log": [f"{record.thread_id}:input"]}
        if record.fault is not None:
            token["fault"] = record.fault.to_input()
        record.started_at = time.monotonic()
        record.status = "running"
        record.next_poll = record.started_at + POLL_EVERY
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                handle = graph.start(token, cfg)
            except Exception as error:
                self.client_errors[f"start: {type(error).__name__}"] += 1
                self.event(record, f"start attempt {attempt} raised {_short(error)}")
                latest = self._retrying(
                    "start check", lambda: self.app_module.saver.get(record.thread_id)
                )
                if latest is not None:
                    # the input checkpoint was stored before the error: the run exists
                    record.run_id = latest.run_id
                    self.event(
                        record,
                        f"adopted run {latest.run_id[:8]} (its checkpoint "
                        f"{latest.checkpoint_id[:8]} step {latest.step} was stored before the "
                        "error)",
                    )
                    return
                time.sleep(0.1 * attempt)
                continue
            record.run_id = handle.run_id
            self.event(record, f"started run {handle.run_id[:8]}")
            return
        record.status = "failed"
        record.done = True
        record.error = "could not start"
        record.done_at = time.monotonic()
        self.event(record, "could not start")

    def poll(self, record: RunRecord) -> None:
        from langgraph_celery.celery import RunHandle

        now = time.monotonic()
        record.next_poll = now + (2.0 if record.slow else POLL_EVERY)
        if not record.run_id:
            latest = self._retrying("adopt", lambda: self.app_module.saver.get(record.thread_id))
            if latest is None:
                return
            record.run_id = latest.run_id
        handle = RunHandle(record.run_id, record.thread_id, self.graph(record))
        try:
            status = handle.status()
        except Exception as error:
            self.client_errors[f"status: {type(error).__name__}"] += 1
            return
        if status == "failed" and not record.error:
            record.error, record.error_message = self.failure_of(handle)
            if not record.error:
                return  # (the error could not be read: at the next poll)
        index = ""
        if status == "cancelled" and record.revoke_pending and record.resume_at == 0:
            index = self.index_status(record)
        with self.lock:
            previous = record.status
            if status != previous:
                record.events.append(f"{self.now():8.3f}s status {previous} -> {status}")
            record.status = status
            if status in ("completed", "failed"):
                if status == "failed":
                    record.events.append(
                        f"{self.now():8.3f}s error {record.error}: {record.error_message[:200]}"
                    )
                if record.revoke_pending:
                    record.events.append(f"{self.now():8.3f}s the revoke did not cancel it")
                    record.revoke_pending = False
                record.done = True
                record.done_at = now
                return
            if status == "cancelled":
                if not record.revoke_pending:
                    record.events.append(f"{self.now():8.3f}s UNEXPECTED cancel")
                    record.done = True
                    record.done_at = now
                elif record.resume_at == 0 and not record.resume_busy:
                    # cancelled by the chaos revoke, as intended: resume it after a while
                    record.cancels_seen += 1
                    record.cancel_index.append(index)
                    record.events.append(f"{self.now():8.3f}s run index says {index}")
                    record.resume_at = now + self.rng.uniform(0.1, 1.0)
                return
            if status == "parked":
                if record.kind != "park" or record.resumed:
                    record.events.append(f"{self.now():8.3f}s UNEXPECTED interruption")
                if record.kind == "park" and not record.resume_busy and record.resume_at == 0:
                    record.resume_at = now + self.rng.uniform(0.1, 1.0)
            if not record.slow and now - record.started_at > SLOW_AFTER:
                record.slow = True
                record.events.append(f"{self.now():8.3f}s still {status} after {SLOW_AFTER:g} s")

    def failure_of(self, handle: Any) -> tuple[str, str]:
        """The error ``RunHandle.wait`` raises for a failed run: its class name
        (``NodeError/<error_type>``) and message; ``("", "")`` if it could not be read."""
        from langgraph_celery import GraphError, NodeError

        try:
            handle.wait(timeout=10)
        except NodeError as error:
            return f"NodeError/{error.error_type}", str(error)
        except GraphError as error:
            return type(error).__name__, str(error)
        except Exception as error:
            self.client_errors[f"wait: {type(error).__name__}"] += 1
            return "", ""
        return "none", "RunHandle.wait returned a result"

    def index_status(self, record: RunRecord) -> str:
        """The run's status in the run index (``saver.get_run``), ``"none"`` without a record."""
        found = self._retrying("get_run", lambda: self.app_module.saver.get_run(record.run_id))
        return "none" if found is None else str(found.status.value)

    def resume_once(self, record: RunRecord, who: str, token: bool = True) -> bool:
        """One resume attempt (with the park's ``resume`` token, or ``token=False`` a plain
        ``GraphInput.resume()``); True if this call resumed the thread."""
        from langgraph_celery import GraphInput

        update = GraphInput.resume({"log": [f"{record.thread_id}:resume"]} if token else None)
        try:
            handle = self.graph(record).start(update, self.config(record))
        except Exception as error:
            self.client_errors[f"resume: {type(error).__name__}"] += 1
            self.event(record, f"resume ({who}) raised {_short(error)}")
            return False
        what = "" if token else " (plain)"
        self.event(record, f"resume{what} ({who}) accepted: run {handle.run_id[:8]}")
        return True

    def _resumed(self, record: RunRecord, what: str) -> None:
        """Record an accepted resume (lock held)."""
        if what == "token":
            record.resumed = True
        else:
            record.cancel_resumes += 1
            record.revoke_pending = False
        record.status = "running"

    def resume(self, record: RunRecord) -> None:
        """Resume a parked park run (with its token) or a run cancelled by a revoke (plain)."""
        with self.lock:
            if record.resume_busy:
                return
            if record.status == "parked" and record.kind == "park" and not record.resumed:
                what = "token"
            elif record.status == "cancelled" and record.revoke_pending:
                what = "plain"
            else:
                record.resume_at = 0.0
                return
            record.resume_busy = True
            record.last_resume = what
        accepted = False
        try:
            record.resume_attempts += 1
            accepted = self.resume_once(record, "driver", token=what == "token")
            with self.lock:
                if accepted:
                    self._resumed(record, what)
                elif record.resume_attempts < RESUME_ATTEMPTS:
                    record.resume_at = time.monotonic() + 0.5
                else:
                    record.events.append(
                        f"{self.now():8.3f}s gave up resuming after {RESUME_ATTEMPTS} attempts"
                    )
                    record.resume_at = float("inf")
                    record.status = "stuck"
                    record.done = True
                    record.done_at = time.monotonic()
        finally:
            with self.lock:
                record.resume_busy = False
                if accepted:
                    record.resume_at = 0.0

    def drive(self, start_deadline: float, drain_deadline: float) -> None:
        """Start every run (until ``start_deadline``), then wait for them (``drain_deadline``)."""
        pending = list(self.records)
        pending.reverse()
        last_report = time.monotonic()
        slow_since = 0.0
        while True:
            now = time.monotonic()
            live = [r for r in self.records if r.live]
            if not pending and not live:
                break
            if pending and now >= start_deadline:
                log.warning("time limit: %d runs not started", len(pending))
                pending.clear()
                self.stop_chaos.set()
            if not pending and not self.stop_chaos.is_set():
                self.stop_chaos.set()
                print(f"[{self.now():7.1f}s] all runs started; chaos stopped", file=sys.stderr)
            if now >= drain_deadline:
                break
            counted = sum(1 for r in live if not r.slow)
            while pending and counted < self.inflight:
                self.start(pending.pop())
                counted += 1
            for record in live:
                if record.resume_at and now >= record.resume_at and not record.resume_busy:
                    self.poll(record)
                    if record.status in ("parked", "cancelled"):
                        self.resume(record)
                    elif record.live:
                        # a resume attempt raised, yet the thread moved on: it was resumed
                        with self.lock:
                            self._resumed(record, record.last_resume or "token")
                            record.resume_at = 0.0
                            record.events.append(
                                f"{self.now():8.3f}s {record.status} after a failed resume"
                            )
                elif now >= record.next_poll:
                    self.poll(record)
            if not pending and live and all(r.slow for r in live):
                slow_since = slow_since or now
                if now - slow_since > SLOW_GRACE:
                    log.warning("only slow runs left for %g s: stop waiting", SLOW_GRACE)
                    break
            else:
                slow_since = 0.0
            if now - last_report >= 10:
                last_report = now
                done = sum(1 for r in self.records if r.done)
                print(
                    f"[{self.now():7.1f}s] ended {done}/{len(self.records)}, live "
                    f"{len(live)} (slow {sum(1 for r in live if r.slow)}), chaos "
                    f"{sum(self.chaos_counts.values())}",
                    file=sys.stderr,
                )
            time.sleep(0.01)

    # -- the reaper ---------------------------------------------------------------------------

    def reaper_loop(self) -> None:
        from langgraph_celery.beat.reaper import reap

        executor = self.app_module.executor
        while not self.stop_reaper.wait(REAP_EVERY):
            try:
                report = reap(executor)
            except Exception as error:
                self.reaper_errors[_short(error)[:80]] += 1
                continue
            for outcome, threads in report.to_data().items():
                self.reaper_counts[outcome] += len(threads)
                if outcome in ("progressing",):
                    continue
                for thread in threads:
                    record = self.by_thread.get(thread)
                    if record is not None:
                        self.event(record, f"reaper: {outcome}")

    # -- chaos --------------------------------------------------------------------------------

    def chaos_loop(self) -> None:
        bag: list[str] = []
        while not self.stop_chaos.wait(self.chaos_rng.uniform(0.5, 1.0)):
            # a shuffled bag: every kind fires as often, in a random order
            if not bag:
                bag = list(CHAOS_KINDS)
                self.chaos_rng.shuffle(bag)
            kind = bag.pop()
            if kind == "double_resume":
                waited = time.monotonic() + 3.0
                while not self._parked() and time.monotonic() < waited:
                    time.sleep(0.02)
            try:
                getattr(self, f"chaos_{kind}")()
                self.chaos_counts[kind] += 1
            except Exception as error:
                self.chaos_errors[f"{kind}: {_short(error)[:100]}"] += 1

    def _parked(self) -> list[RunRecord]:
        with self.lock:
            return [
                r
                for r in self.records
                if r.status == "parked"
                and r.kind == "park"
                and not r.resumed
                and not r.resume_busy
                and r.resume_at not in (0.0, float("inf"))
            ]

    def _pool_pids(self) -> dict[int, str]:
        return {pid: w.name for w in self.workers for pid in w.pool()}

    def _busy(self) -> dict[int, tuple[str, float]]:
        """Pool processes running a node (by the nodes' own word in the aux db): pid -> (token,
        the wall-clock time the node means to return at)."""
        busy: dict[int, tuple[str, float]] = {}
        for key in self.aux.scan_iter(match=f"{self.app_module.BUSY_PREFIX}*", count=100):
            value = self.aux.get(key)
            if value is not None:
                token, _, until = _text(value).partition("|")
                busy[int(_text(key).split(":", 1)[1])] = (token, float(until or 0))
        return busy

    def chaos_kill9(self) -> None:
        deadline = time.monotonic() + 1.0
        while True:
            pool = self._pool_pids()
            busy = [(pid, token) for pid, (token, _) in self._busy().items() if pid in pool]
            if busy or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        if busy:
            pid, token = self.chaos_rng.choice(busy)
            os.kill(pid, signal.SIGKILL)
            self.chaos_detail["kill9: mid-node"] += 1
            self.kill9_hits[token] += 1
            thread, node = token.rsplit(":", 1)
            record = self.by_thread.get(thread)
            if record is not None:
                self.event(record, f"chaos: kill -9 pool pid {pid} ({pool[pid]}) mid-node {node}")
        elif pool:
            pid = self.chaos_rng.choice(sorted(pool))
            os.kill(pid, signal.SIGKILL)
            self.chaos_detail["kill9: idle pool process (no node running)"] += 1
        else:
            raise RuntimeError("no pool process to kill")

    def chaos_flushdb(self) -> None:
        queued = int(self.broker.llen("celery"))
        unacked = int(self.broker.hlen("unacked"))
        self.broker.flushdb()
        self.chaos_detail["flushdb: queued messages dropped"] += queued
        self.chaos_detail["flushdb: unacked messages dropped"] += unacked

    def _node_messages(self) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
        """Node messages (task name, task id, kwargs) by source: unacked, queued, done."""
        found: dict[str, list[tuple[str, str, dict[str, Any]]]] = {
            "unacked": [],
            "queued": [],
            "done": [],
        }

        def from_raw(raw: bytes | str) -> tuple[str, str, dict[str, Any]] | None:
            message = json.loads(raw)
            headers = message.get("headers") or {}
            name = str(headers.get("task", ""))
            if not name.startswith(NODE_TASK_PREFIX):
                return None
            body = message["body"]
            if message.get("properties", {}).get("body_encoding") == "base64":
                body = base64.b64decode(body)
            _args, kwargs, _embed = json.loads(body)
            return name, str(headers["id"]), dict(kwargs)

        for raw in self.broker.hvals("unacked"):
            with contextlib.suppress(Exception):
                item = from_raw(json.dumps(json.loads(raw)[0]))
                if item is not None:
                    found["unacked"].append(item)
        for raw in self.broker.lrange("celery", 0, 200):
            with contextlib.suppress(Exception):
                item = from_raw(raw)
                if item is not None:
                    found["queued"].append(item)
        keys = list(self.broker.scan_iter(match="celery-task-meta-lgc:*", count=200))
        for key in self.chaos_rng.sample(keys, min(len(keys), 20)):
            with contextlib.suppress(Exception):
                meta = json.loads(self.broker.get(key) or b"{}")
                name, kwargs = str(meta.get("name") or ""), meta.get("kwargs")
                if isinstance(kwargs, str):
                    kwargs = json.loads(kwargs)
                if name.startswith(NODE_TASK_PREFIX) and isinstance(kwargs, dict):
                    found["done"].append((name, str(meta["task_id"]), kwargs))
        return found

    def chaos_duplicate(self) -> None:
        found = self._node_messages()
        sources = [s for s in ("unacked", "queued", "done") if found[s]]
        if not sources:
            raise RuntimeError("no node message to duplicate")
        source = self.chaos_rng.choice(sources)
        name, task_id, kwargs = self.chaos_rng.choice(found[source])
        self.app_module.app.send_task(name, kwargs=kwargs, task_id=task_id)
        self.chaos_detail[f"duplicate: of a {source} message"] += 1
        record = self.by_thread.get(str(kwargs.get("thread_id")))
        if record is not None:
            self.event(
                record,
                f"chaos: duplicate ({source}) of node {kwargs.get('node')} step "
                f"{kwargs.get('step')} checkpoint {str(kwargs.get('checkpoint_id'))[:8]}",
            )

    def chaos_double_resume(self) -> None:
        parked = self._parked()
        if not parked:
            raise RuntimeError("no parked run")
        record = self.chaos_rng.choice(parked)
        with self.lock:
            if record.resume_busy or record.resumed:
                raise RuntimeError("the parked run was taken meanwhile")
            record.resume_busy = True
            record.last_resume = "token"
        self.event(record, "chaos: two concurrent resumes")
        barrier = threading.Barrier(2)
        results: list[bool] = []

        def one(who: str) -> None:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=5)
            results.append(self.resume_once(record, who))

        threads = [threading.Thread(target=one, args=(f"chaos#{i}",)) for i in (1, 2)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
        finally:
            won = sum(results)
            self.double_resume_outcomes[
                {0: "neither accepted", 1: "one accepted (correct)", 2: "BOTH accepted"}[won]
            ] += 1
            with self.lock:
                record.resume_busy = False
                if won:
                    self._resumed(record, "token")
                    record.resume_at = 0.0
                else:
                    record.resume_at = time.monotonic() + 0.5

    def chaos_pg_kill(self) -> None:
        with self.admin.connect() as conn:
            killed = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = :db AND pid <> pg_backend_pid()"
                ),
                {"db": PG_DATABASE},
            ).scalar()
        self.chaos_detail["pg_kill: backends terminated"] += int(killed or 0)

    def _targets(self, min_left: float) -> dict[int, tuple[RunRecord, str, float]]:
        """Pool processes running a node of a fan or park run not revoked yet, with at least
        ``min_left`` s to go: pid -> (run, node, seconds left)."""
        now = time.time()
        found = {}
        for pid, (token, until) in self._busy().items():
            thread, _, node = token.rpartition(":")
            record = self.by_thread.get(thread)
            if (
                record is not None
                and record.kind in REVOKABLE
                and not record.revoked_task
                and record.live
                and until - now >= min_left
            ):
                found[pid] = (record, node, until - now)
        return found

    def chaos_revoke(self) -> None:
        """Flower's *Terminate* on a running node task of a fan or park run: among the node
        tasks the workers report active (``inspect().active()``, the list Flower shows), the
        one with the most time left."""
        deadline = time.monotonic() + 3.0
        candidates: list[tuple[float, str, RunRecord, str, str]] = []
        while not candidates:
            if time.monotonic() >= deadline:
                raise RuntimeError("no node of a fan or park run running with time left")
            if not self._targets(REVOKE_MIN_LEFT * 3):
                time.sleep(0.02)  # (asking the workers only once there is one to find)
                continue
            inspect = self.app_module.app.control.inspect(timeout=1.0, limit=len(self.workers))
            active = inspect.active() or {}
            targets = self._targets(REVOKE_MIN_LEFT)
            for worker, tasks in active.items():
                for task in tasks or ():
                    target = targets.get(int(task.get("worker_pid") or 0))
                    if target is None or not str(task.get("name", "")).startswith(NODE_TASK_PREFIX):
                        continue
                    record, node, left = target
                    # (the task listed is the one running that node of that thread)
                    if _names(task.get("kwargs")) == (record.thread_id, node):
                        candidates.append((left, str(task["id"]), record, node, str(worker)))
        left, task_id, record, node, worker = max(candidates, key=lambda c: c[0])
        with self.lock:
            record.revoked_task = task_id
            record.revoke_pending = True
        self.app_module.app.control.revoke(task_id, terminate=True)
        self.event(
            record,
            f"chaos: revoke (terminate) of node {node}'s task {task_id} on {worker}, "
            f"{left:.2f} s left",
        )

    def close(self) -> None:
        self.broker.close()
        self.aux.close()
        self.admin.dispose()


# -- verification ---------------------------------------------------------------------------------


@dataclass
class Problem:
    thread_id: str
    kind: str
    status: str
    intended: str
    ended: str
    index: str
    lost: list[str]
    doubled: dict[str, int]
    foreign: list[str]
    log: list[str]
    events: list[str]
    checkpoints: list[str]
    timer: str
    executions: dict[str, int]
    worker_lines: list[str]
    hint: str = ""


@dataclass
class Verdict:
    runs_requested: int
    runs_started: int
    runs_as_intended: int
    #: of those, runs that failed with WorkerLostError because the chaos kill -9'd one of their
    #: nodes on each of its deliveries (an ending the library promises for that)
    runs_excused: int
    status_counts: dict[str, int]
    #: run kind (and fault mode) -> "<ending>" -> runs; an ending not intended is marked
    endings: dict[str, dict[str, int]]
    #: runs whose RunHandle.status() and run index record disagree at the end, or (revoked
    #: runs) when the driver found them cancelled
    index_disagreements: int
    #: runs of the soak's graphs the run index lists as running or parked at the end
    index_unended: int
    #: runs of the soak's graphs in the run index that the driver never started
    index_unknown: int
    revokes: dict[str, int]
    updates_expected: int
    updates_lost: int
    updates_doubled: int
    foreign_tokens: int
    node_executions: int
    node_re_executions: int
    problems: list[Problem]


def _checkpoint_lines(app_module: ModuleType, thread: str, t0_wall: float) -> list[str]:
    saver = app_module.saver
    lines = []
    for checkpoint in reversed(list(saver.list(thread))):
        writes = saver.get_writes(thread, checkpoint.checkpoint_id)
        shown = ", ".join(
            w.task_id if w.task_id.startswith("__") else f"{w.node}#{w.task_id[:6]}" for w in writes
        )
        tokens = [t.rsplit(":", 1)[1] for t in checkpoint.values.get("log", [])]
        lines.append(
            f"+{checkpoint.created_at.timestamp() - t0_wall:8.3f}s step {checkpoint.step:>2} "
            f"cp {checkpoint.checkpoint_id[:8]} parent {str(checkpoint.parent_id)[:8]} run "
            f"{checkpoint.run_id[:8]} source {checkpoint.metadata.get('source')} node "
            f"{checkpoint.node} next {list(checkpoint.next)} extra {sorted(checkpoint.extra)} "
            f"log {tokens} writes [{shown}]"
        )
    return lines


def _timer(services: Services, thread: str) -> str:
    engine = create_engine(services.pg_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text(
                    f'SELECT run_id, kind, due_at FROM "{services.table_prefix}timers" '
                    "WHERE thread_id = :t"
                ),
                {"t": thread},
            ).first()
    except Exception as error:
        return f"? ({_short(error)})"
    finally:
        engine.dispose()
    return "none" if row is None else f"run {row.run_id[:8]} kind {row.kind} due {row.due_at}"


def _worker_lines(workers: Sequence[Worker], thread: str, limit: int = 30) -> list[str]:
    """Worker log lines naming ``thread``, each after the header line of its log record."""
    lines = []
    for worker in workers:
        header = ""
        with contextlib.suppress(OSError):
            for line in worker.log_path.read_text(errors="replace").splitlines():
                is_header = line.startswith("[20")
                if is_header:
                    header = line
                if thread in line:
                    if not is_header and header:
                        lines.append(f"[{worker.name}] {header[:300]}")
                        header = ""
                    lines.append(f"[{worker.name}]   {line[:300]}")
    return lines[:limit]


def _describe(status: str, error: str, says: str = "") -> str:
    return status if status != "failed" else f"failed {error}" + (f" ({says!r})" if says else "")


def _index(app_module: ModuleType) -> dict[str, Any]:
    """Every run record of the soak's graphs in the run index, by run id (all pages)."""
    found: dict[str, Any] = {}
    for graph in app_module.GRAPHS.values():
        before = None
        while True:
            page = list(app_module.saver.list_runs(graph.graph_id, limit=500, before=before))
            found.update((r.run_id, r) for r in page)
            if len(page) < 500:
                break
            before = page[-1]
    return found


def verify(soak: Soak, services: Services, workers: Sequence[Worker], t0_wall: float) -> Verdict:
    from langgraph_celery.celery import RunHandle

    app_module = soak.app_module
    max_deliveries = int(app_module.executor.max_deliveries)
    executions_raw = soak.aux.hgetall(app_module.EXECUTIONS_KEY)
    executions = {_text(k): int(v) for k, v in executions_raw.items()}
    started = [r for r in soak.records if r.started_at > 0]
    index = soak._retrying("list_runs", functools.partial(_index, app_module))
    known = {r.run_id for r in started if r.run_id}
    lost_total = doubled_total = foreign_total = expected_total = 0
    as_intended = excused = disagreements = 0
    endings: dict[str, Counter[str]] = {}
    problems: list[Problem] = []
    for record in started:
        ending = record.intended
        actual = record.status
        if record.run_id:  # the status now (the driver's last poll may be a moment old)
            handle = RunHandle(record.run_id, record.thread_id, soak.graph(record))
            actual = soak._retrying("final status", handle.status)
            if actual == "failed" and not record.error:
                record.error, record.error_message = soak.failure_of(handle)
        status = "stuck" if record.status == "stuck" else actual
        indexed = index.get(record.run_id)
        index_status = "none" if indexed is None else str(indexed.status.value)
        agree = index_status == actual and all(c == "cancelled" for c in record.cancel_index)
        disagreements += not agree
        ok = status == ending.status and (
            status != "failed"
            or (record.error == ending.error and ending.says in record.error_message)
        )
        killed = any(
            soak.kill9_hits[f"{record.thread_id}:{n}"] >= max_deliveries for n in app_module.NODES
        )
        excuse = (
            not ok
            and killed
            and status == "failed"
            and record.error == "NodeError/WorkerLostError"
            and "died on each of its" in record.error_message
        )
        ok = ok or excuse
        as_intended += ok
        excused += excuse
        ended = _describe(status, record.error)
        mark = "" if ok else "  <- NOT INTENDED"
        if excuse:
            mark = "  (chaos kill -9 on each delivery)"
        endings.setdefault(record.label, Counter())[f"{ended}{mark}"] += 1

        latest = soak._retrying("verify", functools.partial(app_module.saver.get, record.thread_id))
        log_ = list(latest.values.get("log", [])) if latest is not None else []
        counts = Counter(log_)
        expected = [f"{record.thread_id}:{s}" for s in ending.tokens]
        expected_total += len(expected)
        doubled = {t: n for t, n in counts.items() if n > 1}
        if excuse:  # (it failed at another step than intended: only doubles are checked)
            foreign, lost = [], []
        else:
            foreign = [t for t in counts if t not in expected]
            lost = [t for t in expected if counts[t] == 0]
        lost_total += len(lost)
        doubled_total += sum(n - 1 for n in doubled.values())
        foreign_total += sum(counts[t] for t in foreign)
        if not ok or not agree or lost or doubled or foreign:
            mine = {
                k.rsplit(":", 1)[1]: v
                for k, v in executions.items()
                if k.rsplit(":", 1)[0] == record.thread_id
            }
            cancels = f"; cancelled by a revoke {record.cancels_seen}x, index then said " + (
                ", ".join(record.cancel_index) or "-"
            )
            problems.append(
                Problem(
                    thread_id=record.thread_id,
                    kind=record.label if record.fault is None else record.fault.label,
                    status=status,
                    intended=_describe(ending.status, ending.error, ending.says),
                    ended=f"{ended}: {record.error_message[:300]}" if record.error else ended,
                    index=f"{index_status}{cancels if record.revoked_task else ''}",
                    lost=[t.rsplit(":", 1)[1] for t in lost],
                    doubled={t.rsplit(":", 1)[1]: n for t, n in doubled.items()},
                    foreign=foreign,
                    log=[t.rsplit(":", 1)[1] for t in log_],
                    events=list(record.events),
                    checkpoints=soak._retrying(
                        "history",
                        functools.partial(_checkpoint_lines, app_module, record.thread_id, t0_wall),
                    ),
                    timer=_timer(services, record.thread_id),
                    executions=mine,
                    worker_lines=_worker_lines(workers, record.thread_id),
                )
            )
            problem = problems[-1]
            if status == "running" and problem.timer == "none":
                problem.hint = (
                    "orphaned: the run is active (no terminal marker) but has no stall timer, so "
                    "the reaper never looks at it again"
                )
            elif status == "stuck":
                problem.hint = "the driver gave up resuming it (see the resume errors)"
            elif doubled or foreign:
                problem.hint = "an update was applied more than once (or to another thread)"
            elif not agree:
                problem.hint = "RunHandle.status() and the run index disagree"
    node_tokens = {f"{r.thread_id}:{n}" for r in started for n in app_module.NODES}
    runs_executions = {k: v for k, v in executions.items() if k in node_tokens}
    status_counts = Counter(r.status for r in started)
    revoked = [r for r in started if r.revoked_task]
    revokes = {
        "runs revoked": len(revoked),
        "cancelled, resumed, then completed": sum(
            1 for r in revoked if r.cancels_seen and r.cancel_resumes and r.status == "completed"
        ),
        "not cancelled: the node finished first, the run went on": sum(
            1 for r in revoked if not r.cancels_seen
        ),
    }
    return Verdict(
        runs_requested=len(soak.records),
        runs_started=len(started),
        runs_as_intended=as_intended,
        runs_excused=excused,
        status_counts=dict(status_counts),
        endings={label: dict(c) for label, c in sorted(endings.items())},
        index_disagreements=disagreements,
        index_unended=sum(1 for r in index.values() if r.status.value in ("running", "parked")),
        index_unknown=sum(1 for run_id in index if run_id not in known),
        revokes=revokes,
        updates_expected=expected_total,
        updates_lost=lost_total,
        updates_doubled=doubled_total,
        foreign_tokens=foreign_total,
        node_executions=sum(runs_executions.values()),
        node_re_executions=sum(max(0, v - 1) for v in runs_executions.values()),
        problems=problems,
    )


def worker_log_summary(workers: Sequence[Worker]) -> dict[str, int]:
    """How often some telling lines appear in the worker logs."""
    patterns = {
        "pool process exited with signal 9": "exited with 'signal 9",
        "task handler: WorkerLostError": "Task handler raised error: WorkerLostError",
        "checkpoint store error, task retried": "Retry in",
        "task dropped: checkpoint gone": "no longer exists",
        "message rejected": "rejected",
        "node failed": "raised unexpected: NodeError",
        "node past its soft time limit (Celery)": "Soft time limit",
        "node past its hard time limit (Celery)": "Hard time limit",
        "run failed: node ran past its hard time limit": "ran past its hard time limit",
        "pool process exited on its own (sys.exit, os._exit)": "exited with 'exitcode",
        "delivery counted after a process death": "(its worker process died)",
        "run failed: a process died on each delivery": "died on each of its",
        "task revoked: run cancelled": "its task was revoked",
        "task terminated (revoke)": "Terminating",
        "node task failed: update refused": "raised unexpected: SerializationError",
        "node task failed: reducer refused": "raised unexpected: InvalidUpdateError",
        "task handler: TimeLimitExceeded": "raised error: TimeLimitExceeded",
    }
    counts: Counter[str] = Counter()
    for worker in workers:
        with contextlib.suppress(OSError):
            for line in worker.log_path.read_text(errors="replace").splitlines():
                known = False
                for label, needle in patterns.items():
                    if needle in line:
                        counts[label] += 1
                        known = True
                if not known and ("ERROR/" in line or "CRITICAL/" in line):
                    counts["other ERROR/CRITICAL lines"] += 1
    return dict(counts)


# -- report ---------------------------------------------------------------------------------------


@dataclass
class Report:
    environment: dict[str, Any]
    runs_requested: int
    time_limited: bool
    wall_s: float
    runs_per_s: float
    verdict: Verdict
    memory_before: dict[str, dict[str, int]]
    memory_after: dict[str, dict[str, int]]
    chaos: dict[str, int]
    chaos_detail: dict[str, int]
    chaos_errors: dict[str, int]
    double_resume: dict[str, int]
    reaper: dict[str, int]
    reaper_errors: dict[str, int]
    client_errors: dict[str, int]
    worker_log: dict[str, int]
    logs_dir: str
    targets: dict[str, bool] = field(default_factory=dict)


def _mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def render(report: Report) -> str:
    env, v = report.environment, report.verdict
    met = report.targets
    lines = [
        "langgraph_celery soak: runs through 2 Celery workers under chaos",
        f"Python {env['python']}, Celery {env['celery']}, kombu {env['kombu']}, redis-py "
        f"{env['redis_py']}, SQLAlchemy {env['sqlalchemy']}, psycopg {env['psycopg']}; "
        f"PostgreSQL {env['postgresql']}, Redis {env['redis_server']} (broker db {BROKER_DB}); "
        f"{env['cpus']} CPUs; source {env['source']}",
        f"2 workers x prefork -c 2; {env['inflight']} runs in flight; reaper every "
        f"{REAP_EVERY:g} s, stalled_after {STALLED_AFTER:g} s; chaos every 0.5-1 s; "
        f"durability {env.get('durability', 'sync')!r}; seed {env['seed']}",
        "",
        f"{'figure':<44}{'value':>12}{'target':>10}{'met':>6}",
        "-" * 72,
    ]

    def row(label: str, value: Any, target: str = "", ok: bool | None = None) -> None:
        mark = "" if ok is None else ("yes" if ok else "NO")
        lines.append(f"{label:<44}{value!s:>12}{target:>10}{mark:>6}")

    started = f"{v.runs_started}"
    if report.time_limited:
        started += f" of {report.runs_requested}"
    row("runs started", started)
    row("runs ended as intended", v.runs_as_intended, "all", met["ended"])
    if v.runs_excused:
        row("  of which excused (kill -9 on each delivery)", v.runs_excused)
    row("  by status", ", ".join(f"{k} {n}" for k, n in sorted(v.status_counts.items())))
    row("status() and run index disagree", v.index_disagreements, "0", met["index"])
    row("runs the index lists running or parked", v.index_unended, "0", met["unended"])
    row("runs in the index the driver never started", v.index_unknown, "0", met["unknown"])
    row("updates lost", v.updates_lost, "0", met["lost"])
    row("updates doubled", v.updates_doubled, "0", met["doubled"])
    row("foreign tokens (not of the intended end)", v.foreign_tokens, "0", met["foreign"])
    row("updates expected (tokens in final states)", v.updates_expected)
    row("node executions (re-executions)", f"{v.node_executions} ({v.node_re_executions})")
    row("wall time s", f"{report.wall_s:.1f}")
    row("runs/s (ended as intended)", f"{report.runs_per_s:.2f}")
    lines.append("")
    lines.append("endings by run kind (and fault mode):")
    for label, counts in v.endings.items():
        lines.append(f"  {label:<20}{sum(counts.values()):>5}")
        for ending, count in sorted(counts.items()):
            lines.append(f"      {count:>5}  {ending}")
    lines.append("chaos revokes (Flower's Terminate):")
    for label, count in v.revokes.items():
        row(f"  {label}", count)
    lines.append("")
    lines.append("chaos actions fired:")
    for kind in CHAOS_KINDS:
        row(f"  {kind}", report.chaos.get(kind, 0))
    for label, count in sorted(report.chaos_detail.items()):
        row(f"    {label}", count)
    for label, count in sorted(report.double_resume.items()):
        row(f"    double_resume: {label}", count)
    for label, count in sorted(report.chaos_errors.items()):
        lines.append(f"    not fired: {label} x{count}")
    lines.append("")
    lines.append("reaper (driver loop) outcomes, thread-passes:")
    for label, count in sorted(report.reaper.items()):
        row(f"  {label}", count)
    for label, count in sorted(report.reaper_errors.items()):
        lines.append(f"  reap() raised: {label} x{count}")
    if report.client_errors:
        lines.append("client (driver) calls that raised, retried:")
        for label, count in sorted(report.client_errors.items()):
            row(f"  {label}", count)
    if report.worker_log:
        lines.append("worker log lines:")
        for label, count in sorted(report.worker_log.items()):
            row(f"  {label}", count)
    lines.append("")
    lines.append(
        f"{'worker RSS MiB':<20}{'main before':>12}{'main after':>11}"
        f"{'pool before':>12}{'pool after':>11}{'pool procs':>11}"
    )
    for name in sorted(report.memory_before):
        before, after = report.memory_before[name], report.memory_after.get(name, {})
        lines.append(
            f"{name:<20}{_mib(before['main_kib']):>12}{_mib(after.get('main_kib', 0)):>11}"
            f"{_mib(before['pool_kib']):>12}{_mib(after.get('pool_kib', 0)):>11}"
            f"{after.get('pool_processes', 0):>11}"
        )
    lines.append("(pool processes killed by the chaos are replaced by fresh ones)")
    lines.append(f"logs: {report.logs_dir} (kept if a target is missed, or with --keep-logs)")
    return "\n".join(lines)


def render_problems(problems: Sequence[Problem], limit: int = 12) -> str:
    if not problems:
        return "no problem runs"
    out = [f"{len(problems)} problem run(s); the first {min(limit, len(problems))}:"]
    for problem in problems[:limit]:
        out.append("")
        out.append(
            f"== thread {problem.thread_id} ({problem.kind}) status {problem.status}; lost "
            f"{problem.lost} doubled {problem.doubled} foreign {problem.foreign}"
        )
        if problem.hint:
            out.append(f"   diagnosis: {problem.hint}")
        out.append(f"   intended: {problem.intended}")
        out.append(f"   ended:    {problem.ended}")
        out.append(f"   run index: {problem.index}")
        out.append(f"   final log: {problem.log}")
        out.append(f"   node executions: {problem.executions}; timer: {problem.timer}")
        out.append("   driver events:")
        out.extend(f"     {e}" for e in problem.events)
        out.append("   checkpoints (oldest first; times from the soak start):")
        out.extend(f"     {c}" for c in problem.checkpoints)
        if problem.worker_lines:
            out.append("   worker log lines naming the thread:")
            out.extend(f"     {line}" for line in problem.worker_lines)
    return "\n".join(out)


# -- main -----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2000, help="runs to start (default 2000)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of 100 runs")
    parser.add_argument("--inflight", type=int, default=20, help="runs kept going at once")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="stop starting runs after this many seconds (default: 900, quick: 300)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=180.0,
        help="seconds to wait for the started runs once starting stopped (default 180)",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed")
    parser.add_argument(
        "--durability",
        choices=("sync", "async", "exit"),
        default="sync",
        help="every run's RunnableConfig(durability=...) (default sync)",
    )
    parser.add_argument("--json", type=Path, help="save the figures to this JSON file")
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the logs folder even when all targets met"
    )
    args = parser.parse_args(argv)
    runs = 100 if args.quick else args.runs
    time_limit = (
        args.time_limit if args.time_limit is not None else (300.0 if args.quick else 900.0)
    )
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)

    services = prepare_services()
    os.environ.update(services.env())
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    logging.basicConfig(
        filename=services.tmpdir / "driver.log",
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(threadName)s: %(message)s",
    )
    print(
        f"soak: {runs} runs, seed {seed}, tables {services.table_prefix}*, logs in "
        f"{services.tmpdir}",
        file=sys.stderr,
    )
    workers: list[Worker] = []
    keep_logs = True
    soak: Soak | None = None
    app_module: ModuleType | None = None
    try:
        app_module = importlib.import_module("bench.soak_app")
        app_module.saver.setup()  # tables exist before the workers race for them
        workers = [Worker(services, "w1"), Worker(services, "w2")]
        wait_workers(app_module, workers)
        soak = Soak(services, app_module, workers, runs, args.inflight, seed, args.durability)
        client = redis.Redis.from_url(services.broker_url)
        try:
            redis_server = str(client.info("server").get("redis_version", "?"))
        finally:
            client.close()
        environment = {
            "python": platform.python_version(),
            "celery": _version("celery"),
            "kombu": _version("kombu"),
            "redis_py": _version("redis"),
            "sqlalchemy": _version("SQLAlchemy"),
            "psycopg": _version("psycopg"),
            "postgresql": services.pg_version,
            "redis_server": redis_server,
            "cpus": os.cpu_count(),
            "source": source_state(),
            "inflight": args.inflight,
            "durability": args.durability,
            "seed": seed,
            "loadavg_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        }
        memory_before = worker_memory(workers)
        t0_wall = time.time()
        soak.t0 = time.monotonic()
        reaper = threading.Thread(target=soak.reaper_loop, name="reaper", daemon=True)
        chaos = threading.Thread(target=soak.chaos_loop, name="chaos", daemon=True)
        reaper.start()
        chaos.start()
        start = time.monotonic()
        try:
            soak.drive(start + time_limit, start + time_limit + args.drain_timeout)
        finally:
            soak.stop_chaos.set()
            chaos.join(timeout=90)
        wall = time.monotonic() - start
        # a last look at runs the drain loop left (they may have finished just now)
        for record in soak.records:
            if record.live:
                soak.poll(record)
        soak.stop_reaper.set()
        reaper.join(timeout=30)
        memory_after = worker_memory(workers)
        environment["loadavg_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        verdict = verify(soak, services, workers, t0_wall)
        ended = verdict.runs_as_intended
        report = Report(
            environment=environment,
            runs_requested=runs,
            time_limited=verdict.runs_started < runs,
            wall_s=wall,
            runs_per_s=ended / wall if wall > 0 else 0.0,
            verdict=verdict,
            memory_before=memory_before,
            memory_after=memory_after,
            chaos=dict(soak.chaos_counts),
            chaos_detail=dict(soak.chaos_detail),
            chaos_errors=dict(soak.chaos_errors),
            double_resume=dict(soak.double_resume_outcomes),
            reaper=dict(soak.reaper_counts),
            reaper_errors=dict(soak.reaper_errors),
            client_errors=dict(soak.client_errors),
            worker_log=worker_log_summary(workers),
            logs_dir=str(services.tmpdir),
            targets={
                "ended": ended == verdict.runs_started and ended > 0,
                "index": verdict.index_disagreements == 0,
                "unended": verdict.index_unended == 0,
                "unknown": verdict.index_unknown == 0,
                "lost": verdict.updates_lost == 0,
                "doubled": verdict.updates_doubled == 0,
                "foreign": verdict.foreign_tokens == 0,
            },
        )
        print(render(report))
        print()
        print(render_problems(verdict.problems))
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(asdict(report), indent=2) + "\n")
        ok = all(report.targets.values())
        keep_logs = args.keep_logs or not ok
        return 0 if ok else 1
    finally:
        if soak is not None:
            soak.stop_chaos.set()
            soak.stop_reaper.set()
            soak.close()
        for worker in workers:
            worker.stop()
        if app_module is not None:
            app_module.saver.dispose()
        cleanup_services(services)
        if not keep_logs:
            shutil.rmtree(services.tmpdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
