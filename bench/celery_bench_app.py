"""The Celery app of the Celery benchmark (``bench/celery_bench.py``).

One module, imported both by the benchmark's client and by the worker it starts with
``celery -A bench.celery_bench_app worker -P prefork -c 1``, so that the *same* worker process
serves the bare Celery tasks and the langgraph_celery node tasks.

Configured by environment variables (the benchmark sets them before importing this module and
passes them to the worker):

* ``LGC_BENCH_REDIS_URL``: broker and result backend (default ``redis://127.0.0.1:6379/14``);
* ``LGC_BENCH_PG_URL``: PostgreSQL database of the ``*_pg`` graphs (default: none, no such graphs);
* ``LGC_BENCH_SQLITE_URL``: SQLite database of the ``*_sqlite`` graphs (default: none);
* ``LGC_BENCH_TABLE_PREFIX``: table prefix of both savers (default ``lgc_bench_``);
* ``LGC_BENCH_PROFILE=1``: the worker times the phases of every task body (saver calls, sends;
  wall and CPU time), counts SQL statements and PostgreSQL round trips and, with
  ``LGC_BENCH_CPROFILE=wall`` or ``cpu``, runs node task bodies under cProfile (wall-clock or
  CPU timer); the task ``bench.stats`` returns (and resets) what was collected.

Graphs (``<kind>`` is ``pg`` or ``sqlite``): ``chain_<kind>`` is a chain of :data:`CHAIN_LENGTH`
nodes each adding 1 to ``count``; ``pair_<kind>`` is ``a -> b``; ``resume_<kind>`` is ``a -> b``
with ``interrupt_before=("b",)``, where ``b`` records ``time.time()`` at its start into
``b_started``.

Bare tasks: ``bench.noop`` (takes and returns a small dict; the app's options, which the
executor set), ``bench.noop_default`` (the same with Celery's default task options),
``bench.stamp`` (returns ``time.time()`` at its start), ``bench.ping``.

The *floor of "exit"*: :func:`floor_exit_start` stores the run's input from the client (one
conditional insert), ``bench.floor_carry`` passes the state on in the next message and
``bench.floor_end`` stores the run's end: the least an executor does that stores a run where it
starts and ends and nowhere between.  :func:`floor_end_start` is the same with nothing stored
from the client (a Redis ``SET NX`` of the run's key in the result backend refuses a second
start): the floor of ``"exit"`` as SPEC §10 words it, one durable commit a run, at its end.

The *floor* (with ``LGC_BENCH_PG_URL``): ``bench.floor_step``, a bare task that reads its
step's stored row from PostgreSQL (table ``<prefix>floor``, primary key ``(run_id, step)``) and
stores the next one (autocommit: a durable commit) before it returns, after :func:`floor_start`
checked from the client that the run has no row yet and stored its first.  A chain of them is
the least an executor does that keeps every step's state in PostgreSQL as the source of truth
(the message names the step, never carries its state), refuses a second start, and applies each
step once (the primary key is the compare-and-set): no graph, no timers, no wake-ups.
"""

from __future__ import annotations

import cProfile
import io
import json
import operator
import os
import pstats
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from celery.app.base import Celery
from celery.signals import task_postrun, task_prerun

from langgraph_celery import END, START, Channel, CompileConfig, CompiledGraph, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

__all__ = [
    "CHAIN_LENGTH",
    "GRAPHS",
    "SAVERS",
    "SAVER_CALLS",
    "app",
    "executor",
    "floor_carry",
    "floor_close",
    "floor_end",
    "floor_end_start",
    "floor_exit_start",
    "floor_setup",
    "floor_start",
    "floor_step",
    "noop",
    "noop_default",
    "ping",
    "stamp",
    "stats",
]

CHAIN_LENGTH = 30
#: The saver calls the profiling times (worker) and counts (client).
SAVER_CALLS = (
    "get",
    "get_with_writes",
    "get_writes",
    "put_writes",
    "put",
    "put_with_timer",
    "list",
)
REDIS_URL = os.environ.get("LGC_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
PG_URL = os.environ.get("LGC_BENCH_PG_URL", "")
SQLITE_URL = os.environ.get("LGC_BENCH_SQLITE_URL", "")
TABLE_PREFIX = os.environ.get("LGC_BENCH_TABLE_PREFIX", "lgc_bench_")
PROFILE = os.environ.get("LGC_BENCH_PROFILE") == "1"
#: ``wall`` (or ``1``): cProfile with its default (wall-clock) timer; ``cpu``: with
#: ``time.process_time``, so that waiting on PostgreSQL or Redis counts for nothing.
CPROFILE = os.environ.get("LGC_BENCH_CPROFILE", "") if PROFILE else ""

app = Celery("lgc_bench", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(worker_hijack_root_logger=False, result_expires=3600)
#: One executor for every graph; it applies its SAFE_SETTINGS to ``app``, which the bare tasks
#: share (acks_late, prefetch 1, task_track_started, result_extended, JSON).
executor = CeleryExecutor(app)


# -- bare tasks ---------------------------------------------------------------------------------


@app.task(name="bench.noop")
def noop(data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A no-op link of a bare chain: a small dict in, a small dict out."""
    return {"count": int((data or {}).get("count", 0)) + 1}


@app.task(name="bench.noop_default", track_started=False, acks_late=False)
def noop_default(data: dict[str, Any] | None = None) -> dict[str, Any]:
    """``noop`` with Celery's default task options instead of the executor's (no STARTED state,
    early ack): what a bare chain costs on an app the executor did not configure."""
    return {"count": int((data or {}).get("count", 0)) + 1}


@app.task(name="bench.stamp")
def stamp() -> float:
    """``time.time()`` when the body starts (a bare send-to-start latency probe)."""
    return time.time()


@app.task(name="bench.ping")
def ping() -> str:
    return "pong"


# -- the floor: a bare chain that reads and durably stores a PostgreSQL row per step -----------

FLOOR_TABLE = f"{TABLE_PREFIX}floor"
_floor_connections: dict[int, Any] = {}


def _floor_connection() -> Any:
    """This process's autocommit psycopg connection to ``LGC_BENCH_PG_URL``."""
    import psycopg
    from sqlalchemy.engine import make_url

    pid = os.getpid()
    if pid not in _floor_connections:
        url = make_url(PG_URL).set(drivername="postgresql").render_as_string(False)
        _floor_connections[pid] = psycopg.connect(url, autocommit=True)
    return _floor_connections[pid]


def floor_setup() -> None:
    _floor_connection().execute(
        f"CREATE TABLE IF NOT EXISTS {FLOOR_TABLE} "
        "(run_id text, step integer, body text NOT NULL, PRIMARY KEY (run_id, step))"
    )


def floor_close() -> None:
    for connection in _floor_connections.values():
        connection.close()
    _floor_connections.clear()


def _floor_insert(run_id: str, step: int, state: dict[str, Any]) -> None:
    _floor_connection().execute(
        f"INSERT INTO {FLOOR_TABLE} (run_id, step, body) VALUES (%s, %s, %s)",
        (run_id, step, json.dumps(state)),
    )


def _floor_read(run_id: str, step: int | None = None) -> dict[str, Any] | None:
    """The state stored for ``run_id`` at ``step`` (its latest with ``None``)."""
    if step is None:
        sql = f"SELECT body FROM {FLOOR_TABLE} WHERE run_id = %s ORDER BY step DESC LIMIT 1"
        row = _floor_connection().execute(sql, (run_id,)).fetchone()
    else:
        sql = f"SELECT body FROM {FLOOR_TABLE} WHERE run_id = %s AND step = %s"
        row = _floor_connection().execute(sql, (run_id, step)).fetchone()
    return None if row is None else dict(json.loads(row[0]))


def floor_start(run_id: str) -> dict[str, Any]:
    """From the client: check that run ``run_id`` has no row, store its first; the first
    task's argument (which names the step, not its state)."""
    if _floor_read(run_id) is not None:
        raise RuntimeError(f"floor run {run_id} already started")
    _floor_insert(run_id, 0, {"count": 0})
    return {"run_id": run_id, "step": 0}


@app.task(name="bench.floor_step")
def floor_step(data: dict[str, Any]) -> dict[str, Any]:
    """A bare chain link: read the step's stored state, store the next step's durably."""
    run_id, step = str(data["run_id"]), int(data["step"])
    state = _floor_read(run_id, step)
    if state is None:
        raise RuntimeError(f"floor run {run_id} has no step {step}")
    count = int(state["count"]) + 1
    _floor_insert(run_id, step + 1, {"count": count})
    return {"run_id": run_id, "step": step + 1, "count": count}


def floor_exit_start(run_id: str) -> dict[str, Any]:
    """The floor of ``durability="exit"``, from the client: store run ``run_id``'s input unless
    the run has a row (one conditional insert, durable); the first task's argument carries the
    state from there."""
    insert = f"INSERT INTO {FLOOR_TABLE} (run_id, step, body) VALUES (%s, 0, %s)"
    cursor = _floor_connection().execute(
        insert + " ON CONFLICT DO NOTHING", (run_id, json.dumps({"count": 0}))
    )
    if cursor.rowcount != 1:
        raise RuntimeError(f"floor run {run_id} already started")
    return {"run_id": run_id, "step": 0, "count": 0}


def floor_end_start(run_id: str) -> dict[str, Any]:
    """The floor of ``durability="exit"`` that stores only the run's end, from the client: no
    row, a ``SET NX`` of the run's key in the result backend (one Redis round trip, expiring
    with the results) refuses a second start; the first task's argument carries the state."""
    claimed = app.backend.client.set(f"bench:floor-claim:{run_id}", "1", nx=True, ex=3600)
    if not claimed:
        raise RuntimeError(f"floor run {run_id} already started")
    return {"run_id": run_id, "step": 0, "count": 0}


@app.task(name="bench.floor_carry")
def floor_carry(data: dict[str, Any]) -> dict[str, Any]:
    """A link of an "exit" floor chain: the state comes in the message, goes on in the next."""
    return {**data, "step": int(data["step"]) + 1, "count": int(data["count"]) + 1}


@app.task(name="bench.floor_end")
def floor_end(data: dict[str, Any]) -> dict[str, Any]:
    """The last link of an "exit" floor chain: store the run's end durably."""
    ended = floor_carry(data)
    _floor_insert(str(ended["run_id"]), int(ended["step"]), {"count": ended["count"]})
    return ended


# -- graphs -------------------------------------------------------------------------------------


def _add_one(state: Any) -> dict[str, Any]:
    return {"count": 1}


def _record_start(state: Any) -> dict[str, Any]:
    return {"b_started": time.time(), "count": 1}


def _chain_graph(saver: SqlSaver, graph_id: str) -> CompiledGraph:
    graph = StateGraph({"count": Channel(operator.add, default=0)})
    previous = START
    for index in range(CHAIN_LENGTH):
        name = f"n{index}"
        graph.add_node(name, _add_one)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph.compile(
        CompileConfig(
            checkpoint_saver=saver,
            executor=executor,
            graph_id=graph_id,
            recursion_limit=CHAIN_LENGTH * 4,
        )
    )


def _pair_graph(saver: SqlSaver, graph_id: str, interrupt: bool, b: Any) -> CompiledGraph:
    graph = StateGraph({"count": Channel(operator.add, default=0)})
    graph.add_node("a", _add_one)
    graph.add_node("b", b)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    return graph.compile(
        CompileConfig(
            checkpoint_saver=saver,
            executor=executor,
            graph_id=graph_id,
            interrupt_before=("b",) if interrupt else (),
        )
    )


#: Savers by kind (``pg``, ``sqlite``), for the kinds configured.
SAVERS: dict[str, SqlSaver] = {}
#: Compiled graphs by name (``chain_pg``, ``pair_sqlite``, ``resume_pg``, ...).
GRAPHS: dict[str, CompiledGraph] = {}

for _kind, _url in (("pg", PG_URL), ("sqlite", SQLITE_URL)):
    if not _url:
        continue
    _saver = SqlSaver(_url, table_prefix=TABLE_PREFIX)
    SAVERS[_kind] = _saver
    GRAPHS[f"chain_{_kind}"] = _chain_graph(_saver, f"bench_chain_{_kind}")
    GRAPHS[f"pair_{_kind}"] = _pair_graph(_saver, f"bench_pair_{_kind}", False, _add_one)
    GRAPHS[f"resume_{_kind}"] = _pair_graph(_saver, f"bench_resume_{_kind}", True, _record_start)


# -- worker-side profiling (LGC_BENCH_PROFILE=1) --------------------------------------------------


class _Collector:
    """Per task kind: bodies timed, phases timed, SQL statements counted (one worker process)."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.started = 0.0
        self.started_cpu = 0.0
        self.tasks: dict[str, int] = defaultdict(int)
        self.body_s: dict[str, float] = defaultdict(float)
        self.body_cpu_s: dict[str, float] = defaultdict(float)
        self.phase_calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.phase_s: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.phase_cpu_s: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.sql: dict[str, int] = defaultdict(int)
        self.pg_statements: dict[str, int] = defaultdict(int)
        self.pg_commands: dict[str, int] = defaultdict(int)
        self.profiler: cProfile.Profile | None = None
        if CPROFILE == "cpu":
            self.profiler = cProfile.Profile(time.process_time)
        elif CPROFILE:
            self.profiler = cProfile.Profile()

    def kind(self, task_name: str) -> str | None:
        if task_name.startswith("langgraph_celery.node."):
            return "node:" + task_name.split(".")[2]
        if task_name in (
            "bench.noop",
            "bench.noop_default",
            "bench.floor_step",
            "bench.floor_carry",
            "bench.floor_end",
            "langgraph_celery.resume",
        ):
            return task_name
        return None

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started, started_cpu = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                kind = self.current
                if kind is not None:
                    self.phase_calls[kind][phase] += 1
                    self.phase_s[kind][phase] += time.perf_counter() - started
                    self.phase_cpu_s[kind][phase] += time.process_time() - started_cpu

        return wrapper

    def report(self) -> dict[str, Any]:
        kinds: dict[str, Any] = {}
        for kind, count in self.tasks.items():
            kinds[kind] = {
                "tasks": count,
                "body_ms": 1000 * self.body_s[kind] / count,
                "body_cpu_ms": 1000 * self.body_cpu_s[kind] / count,
                "sql_statements": self.sql[kind] / count,
                "pg_round_trips": (self.pg_statements[kind] + self.pg_commands[kind]) / count,
                "phases": {
                    phase: {
                        "calls": calls / count,
                        "ms": 1000 * self.phase_s[kind][phase] / count,
                        "cpu_ms": 1000 * self.phase_cpu_s[kind][phase] / count,
                    }
                    for phase, calls in sorted(self.phase_calls[kind].items())
                },
            }
        profile = ""
        if self.profiler is not None:
            out = io.StringIO()
            stats = pstats.Stats(self.profiler, stream=out)
            stats.strip_dirs().sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(90)
            profile = out.getvalue()
        return {"kinds": kinds, "cprofile": profile, "pid": os.getpid()}


_collector = _Collector()


def _count_psycopg_commands() -> None:
    """Count the commands psycopg sends on its own (``BEGIN``, ``COMMIT``, ``ROLLBACK``; one
    round trip each when sent), to add to the statements SQLAlchemy executes."""
    try:
        from psycopg import _connection_base
    except ImportError:  # pragma: no cover - no PostgreSQL driver, nothing to count
        return
    base: Any = _connection_base.BaseConnection
    original = base._exec_command

    def exec_command(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        if _collector.current is not None:
            _collector.pg_commands[_collector.current] += 1
        return original(self, command, *args, **kwargs)

    base._exec_command = exec_command


def _install_profiling() -> None:
    for saver in SAVERS.values():
        for phase in (*SAVER_CALLS, "release"):
            setattr(saver, phase, _collector.timed(f"saver.{phase}", getattr(saver, phase)))

        postgres = saver.engine.dialect.name == "postgresql"
        execute = saver._execute

        def counted(
            statement: Any, params: Any, execute: Any = execute, postgres: bool = postgres
        ) -> Any:
            # every saver statement goes through here (one statement, autocommit)
            if _collector.current is not None:
                _collector.sql[_collector.current] += 1
                if postgres:
                    _collector.pg_statements[_collector.current] += 1
            return execute(statement, params)

        setattr(saver, "_execute", counted)  # noqa: B010 - shadows the method on purpose
    _count_psycopg_commands()
    module = globals()  # (floor_step looks these up when it runs)
    for function, phase in (("_floor_read", "floor.read"), ("_floor_insert", "floor.insert")):
        module[function] = _collector.timed(phase, module[function])
    setattr(  # noqa: B010 - instance attribute shadows the method on purpose
        executor, "_send_node", _collector.timed("send_node", executor._send_node)
    )


@task_prerun.connect
def _on_prerun(task: Any = None, **_: Any) -> None:
    if not PROFILE or task is None:
        return
    kind = _collector.kind(str(task.name))
    _collector.current = kind
    _collector.started = time.perf_counter()
    _collector.started_cpu = time.process_time()
    bare = kind is None or kind.startswith("bench.")
    if not bare and _collector.profiler is not None:
        _collector.profiler.enable()


@task_postrun.connect
def _on_postrun(task: Any = None, **_: Any) -> None:
    if not PROFILE or task is None:
        return
    kind = _collector.current
    if kind is None:
        return
    if _collector.profiler is not None:
        _collector.profiler.disable()
    _collector.tasks[kind] += 1
    _collector.body_s[kind] += time.perf_counter() - _collector.started
    _collector.body_cpu_s[kind] += time.process_time() - _collector.started_cpu
    _collector.current = None


@app.task(name="bench.stats")
def stats(reset: bool = True) -> dict[str, Any]:
    """What the profiling collected in this worker process (then forget it if ``reset``)."""
    global _collector
    report = _collector.report() if PROFILE else {"kinds": {}, "cprofile": "", "pid": os.getpid()}
    if reset and PROFILE:
        fresh = _Collector()
        _collector.__dict__.update(fresh.__dict__)
    return report


if PROFILE:
    _install_profiling()
