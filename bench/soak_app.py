"""The Celery app of the soak benchmark (``bench/soak.py``).

Imported by the soak driver (which starts runs, resumes parked ones and runs the reaper) and by
the two workers it starts with ``celery -A bench.soak_app worker -P prefork -c 2``.

Configured by environment variables, which the driver sets before importing this module and
passes to the workers:

* ``LGC_SOAK_REDIS_URL``: broker and result backend (default ``redis://127.0.0.1:6379/8``); the
  chaos ``FLUSHDB`` empties this db;
* ``LGC_SOAK_AUX_URL``: a second Redis db (default ``redis://127.0.0.1:6379/7``) where nodes
  count their executions and say which node a pool process is running and until when (the chaos
  ``kill -9`` picks a process that is mid-node, the chaos ``revoke`` a node with time left);
  never flushed by the chaos;
* ``LGC_SOAK_PG_URL``: the PostgreSQL database of the checkpoints;
* ``LGC_SOAK_TABLE_PREFIX``: the saver's table prefix;
* ``LGC_SOAK_STALLED_AFTER``: the executor's ``stalled_after`` (seconds, default 3).

Every graph is ``START -> a -> (b1, b2 in parallel) -> c (joins both) -> END``; each node appends
the token ``"<thread_id>:<node>"`` to the ``log`` appender (the input adds ``"<thread>:input"``),
so the final state of a thread shows exactly which updates were applied, and how many times.
One graph per run kind:

* ``soak_fan`` runs through;
* ``soak_park`` has ``interrupt_before=("c",)``: it parks before ``c`` until the driver resumes it
  with ``GraphInput.resume({"log": ["<thread>:resume"]})``;
* ``soak_poison``, ``soak_dying`` and ``soak_hang`` run a :class:`Fault` given in the input
  (``{"fault": {...}}``) at node ``a`` (a step of one task) or ``b1`` (a step of two):

  - poison, ``unserializable``: the node's update holds an ``object()``, which the JSON
    serializer refuses; ``refused``: it sets ``checked`` to ``"poison"``, on which that key's
    reducer raises;
  - dying, ``sys_exit`` / ``os_exit``: the node ends its pool process (``sys.exit(3)``,
    ``os._exit(1)``) on every delivery;
  - hang: ``a`` and ``b1`` have ``timeout=HANG_TIMEOUT`` (Celery's soft time limit; the hard
    one is 2 s above) and a RetryPolicy that retries a ``TimeoutError`` once.  ``soft``: the node
    sleeps past its timeout on every attempt; ``retry``: on its first execution only (the retry
    is quick); ``stubborn``: it catches the soft limit and sleeps on, until the hard limit kills
    its process.

:func:`intended` says how each run must end (:class:`Ending`): its status, the error
``RunHandle.wait`` raises for a failed run, and the tokens of its final state.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import redis
from celery.app.base import Celery
from celery.exceptions import SoftTimeLimitExceeded

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    Channels,
    CompileConfig,
    RetryPolicy,
    StateGraph,
)
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver
from langgraph_celery.graph.compiled import CompiledGraph
from langgraph_celery.graph.config import RunnableConfig

__all__ = [
    "EXPECTED",
    "FAULT_MODES",
    "GRAPHS",
    "HANG_TIMEOUT",
    "KINDS",
    "NODES",
    "Ending",
    "Fault",
    "app",
    "executor",
    "intended",
    "ping",
    "saver",
]

REDIS_URL = os.environ.get("LGC_SOAK_REDIS_URL", "redis://127.0.0.1:6379/8")
AUX_URL = os.environ.get("LGC_SOAK_AUX_URL", "redis://127.0.0.1:6379/7")
PG_URL = os.environ.get("LGC_SOAK_PG_URL", "postgresql://postgres@127.0.0.1:5432/lgc_soak")
TABLE_PREFIX = os.environ.get("LGC_SOAK_TABLE_PREFIX", "lgc_soak_")
STALLED_AFTER = float(os.environ.get("LGC_SOAK_STALLED_AFTER", "3"))
REAP_INTERVAL = 1.0

#: Aux-db keys: ``busy:<pid>`` -> ``"<token>|<until>"`` (the token a pool process is running and
#: the wall-clock time its node means to return at); hash of executions by token.
BUSY_PREFIX = "busy:"
EXECUTIONS_KEY = "executions"

NODES = ("a", "b1", "b2", "c")
#: The tokens a completed run of each graph must hold exactly once (suffixes of ``<thread>:``).
EXPECTED: dict[str, tuple[str, ...]] = {
    "fan": ("input", "a", "b1", "b2", "c"),
    "park": ("input", "a", "b1", "b2", "resume", "c"),
}
#: Run kinds and their shares of the runs.
KINDS: dict[str, float] = {"fan": 0.45, "park": 0.25, "poison": 0.10, "dying": 0.08, "hang": 0.12}
#: The modes of each faulty kind, and the nodes a fault is put at.
FAULT_MODES: dict[str, tuple[str, ...]] = {
    "poison": ("unserializable", "refused"),
    "dying": ("sys_exit", "os_exit"),
    "hang": ("soft", "retry", "stubborn"),
}
FAULT_NODES = ("a", "b1")
#: The time limit of the nodes that may hang (seconds); far above a good node's 0.4 s at most.
HANG_TIMEOUT = 1.0
#: How long a hanging node means to sleep (the time limits stop it long before).
HANG_SLEEP = 30.0
HANG_RETRY = RetryPolicy(retry_on=TimeoutError, max_attempts=2, retry_delay=0.05, jitter=False)


@dataclass(frozen=True)
class Fault:
    """What goes wrong in a run of a faulty kind: ``mode`` (see the module's docstring) at
    ``node``."""

    kind: str
    mode: str
    node: str

    def to_input(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def of(cls, value: Any) -> Fault | None:
        if not isinstance(value, Mapping):
            return None
        return cls(str(value["kind"]), str(value["mode"]), str(value["node"]))

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.mode} at {self.node}"


@dataclass(frozen=True)
class Ending:
    """How a run must end: ``status``; for a failed run the ``error`` ``RunHandle.wait`` raises
    (the class name, ``NodeError/<error_type>`` for a ``NodeError``) and a phrase its message
    holds; and the tokens its final state holds, each once, and no other."""

    status: str
    tokens: tuple[str, ...]
    error: str = ""
    says: str = ""


def intended(kind: str, fault: Fault | None) -> Ending:
    """How a run of ``kind`` with ``fault`` must end (chaos or not)."""
    if fault is None:
        return Ending("completed", EXPECTED[kind])
    before = ("input",) if fault.node == "a" else ("input", "a")
    if fault.kind == "poison" and fault.mode == "unserializable":
        return Ending("failed", before, "SerializationError", "'blob'")
    if fault.kind == "poison":
        return Ending("failed", before, "InvalidUpdateError", "no poison here")
    if fault.kind == "dying":
        return Ending("failed", before, "NodeError/WorkerLostError", "died on each of its")
    if fault.mode == "retry":
        return Ending("completed", EXPECTED["fan"])
    if fault.mode == "soft":
        return Ending("failed", before, "NodeError/TimeoutError", "did not finish within")
    return Ending("failed", before, "NodeError/TimeoutError", "ran past its hard time limit")


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


def _picky(old: Any, new: Any) -> Any:
    """The reducer of ``checked``: refuses ``"poison"``."""
    if new == "poison":
        raise ValueError("no poison here")
    return new


def _misbehave(fault: Fault, token: str, execution: int) -> dict[str, Any]:
    """What the node at ``fault`` does instead of its work (returns its update, if any)."""
    if fault.kind == "poison":
        time.sleep(_duration())
        if fault.mode == "unserializable":
            return {"log": [token], "blob": object()}
        return {"log": [token], "checked": "poison"}
    if fault.kind == "dying":
        time.sleep(_duration())
        if fault.mode == "os_exit":
            with contextlib.suppress(redis.RedisError):
                aux().delete(f"{BUSY_PREFIX}{os.getpid()}")
            os._exit(1)
        sys.exit(3)
    if fault.mode == "retry" and execution > 1:
        time.sleep(_duration())
        return {"log": [token]}
    try:
        time.sleep(HANG_SLEEP)
    except SoftTimeLimitExceeded:
        if fault.mode != "stubborn":
            raise
        time.sleep(HANG_SLEEP)  # ignores the soft limit: the hard one kills the process
    return {"log": [token]}


def _node(name: str) -> Callable[[AgentState, RunnableConfig], dict[str, Any]]:
    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        token = f"{config.thread_id}:{name}"
        fault = Fault.of(state.value("fault"))
        at_fault = fault is not None and fault.node == name
        duration = _duration()
        planned = HANG_SLEEP if at_fault else duration
        busy = f"{BUSY_PREFIX}{os.getpid()}"
        client = aux()
        execution = 0
        with contextlib.suppress(redis.RedisError):
            pipe = client.pipeline()
            pipe.set(busy, f"{token}|{time.time() + planned:.3f}", px=10_000)
            pipe.hincrby(EXECUTIONS_KEY, token, 1)
            execution = int(pipe.execute()[1])
        try:
            if at_fault:
                assert fault is not None
                return _misbehave(fault, token, execution)
            time.sleep(duration)
        finally:
            with contextlib.suppress(redis.RedisError):
                client.delete(busy)
        return {"log": [token]}

    action.__name__ = f"node_{name}"
    return action


def _graph(
    graph_id: str, park: bool = False, faults: bool = False, hang: bool = False
) -> CompiledGraph:
    schema: dict[str, Channel] = {"log": Channels.appender()}
    if faults:
        schema.update(fault=Channel(), checked=Channel(reducer=_picky), blob=Channel())
    graph = StateGraph(schema)
    for name in NODES:
        timeout = HANG_TIMEOUT if hang and name in FAULT_NODES else None
        graph.add_node(name, _node(name), timeout=timeout)
        if timeout is not None:
            graph.add_wrap_call_node_hook(name, HANG_RETRY.as_hook())
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
    "fan": _graph("soak_fan"),
    "park": _graph("soak_park", park=True),
    "poison": _graph("soak_poison", faults=True),
    "dying": _graph("soak_dying", faults=True),
    "hang": _graph("soak_hang", faults=True, hang=True),
}


@app.task(name="soak.ping", bind=True)  # type: ignore[untyped-decorator]
def ping(self: Any) -> dict[str, Any]:
    """Which worker (node name) and pool process answered."""
    return {"hostname": str(self.request.hostname), "pid": os.getpid()}
