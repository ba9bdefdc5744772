"""PostgreSQL connections killed while runs are in flight.

A thread of the test process terminates every backend of the checkpoint database (workers',
the clients' and the reaper's alike) every few hundred milliseconds while waves of runs go
through.  A node whose store call fails is retried by Celery (``OperationalError`` ->
``task.retry``); a step that was committed but not dispatched is picked up by the reaper; the
clients waiting for the runs (and resuming the parked ones) read through the dropped
connections.  Every run completes with its exact state and a history of contiguous steps, each
(run, step) stored once.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from chaos_support import ChaosStack, ReaperThread, StackFactory, assert_exact, describe
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from langgraph_celery import GraphInput, RunnableConfig

pytestmark = pytest.mark.timeout(150)

WAVES = 3
RUNS_PER_WAVE = 9
EXPECTED = {
    "chain": ["a", "b", "c"],
    "fan": ["a", "b", "c", "d"],
    "gate": ["a", "approved", "b", "c"],  # parks before b, resumed with {"log": ["approved"]}
}


class Killer:
    """Terminates every other backend of the database every 0.1-0.4 s, in a thread."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        self.rounds = 0
        self.terminated = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-killer", daemon=True)

    def _run(self) -> None:
        rng = random.Random(7)
        while not self._stop.wait(rng.uniform(0.1, 0.4)):
            try:
                with self.engine.connect() as conn:
                    killed = conn.execute(
                        text(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        )
                    ).scalar_one()
                self.rounds += 1
                self.terminated += int(killed)
            except Exception:  # our own connection may be the one a round just killed
                continue

    def __enter__(self) -> Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.engine.dispose()


@pytest.fixture(scope="module")
def stack(make_stack: StackFactory) -> ChaosStack:
    return make_stack(concurrency=3)


def test_connections_killed_mid_run(stack: ChaosStack, reaper: ReaperThread) -> None:
    runs = []
    with Killer(stack.settings["CHAOS_DB_URL"]) as killer:
        for wave in range(WAVES):
            handles = []
            for index in range(RUNS_PER_WAVE):
                graph_id = ("chain", "fan", "gate")[index % 3]
                thread = f"pg-{wave}-{index}-{uuid.uuid4().hex[:8]}"
                sleeps = {node: 0.05 for node in EXPECTED[graph_id]}
                handle = stack.graph(graph_id).start(
                    {"sleep": sleeps}, RunnableConfig(thread_id=thread)
                )
                handles.append((graph_id, thread, handle))
            for graph_id, thread, handle in handles:
                try:
                    result = handle.wait(timeout=45)
                    if graph_id == "gate":
                        assert result.is_interruption_metadata(), result
                        resume = GraphInput.resume({"log": ["approved"]})
                        config = RunnableConfig(thread_id=thread)
                        result = stack.graph(graph_id).start(resume, config).wait(timeout=45)
                except TimeoutError:
                    pytest.fail(f"run {thread} stuck\n{describe(stack, thread)}")
                assert result.as_state_data()["log"] == EXPECTED[graph_id]
            runs.extend(handles)
            time.sleep(0.2)
        assert killer.terminated > 0, "no connection was killed"
    stack.saver.dispose()  # the test's own reads below: no connection killed earlier
    for graph_id, thread, _ in runs:
        assert_exact(stack.saver, thread, EXPECTED[graph_id])
    logs = stack.logs(tail=10**7)
    print(
        f"postgres chaos: {killer.rounds} kill rounds, {killer.terminated} backends terminated, "
        f"{logs.count('OperationalError')} store errors retried, "
        f"{len(reaper.threads('redispatched'))} runs re-dispatched, "
        f"{len(reaper.threads('finished'))} steps finished by the reaper"
    )


# -- the client's connection dropping at each of its store calls, deterministically ----------------

_CALLS = ("get", "get_with_writes", "get_writes", "put", "put_writes", "set_timer", "clear_timer")


class DroppingStore:
    """Patches the saver so that its ``fail_at``-th call (counting from 1) raises the error a
    dropped connection raises: ``before`` the statement runs, or ``after`` it ran (its answer
    lost).  ``calls`` counts every call made while installed."""

    def __init__(self, saver: Any, fail_at: int, when: str) -> None:
        self.saver, self.fail_at, self.when = saver, fail_at, when
        self.calls: list[str] = []

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            drop = len(self.calls) == self.fail_at
            if drop and self.when == "before":
                raise OperationalError(f"{name} (injected)", {}, ConnectionError("dropped"))
            result = method(*args, **kwargs)
            if drop:
                raise OperationalError(f"{name} (injected)", {}, ConnectionError("answer lost"))
            return result

        return call

    def __enter__(self) -> DroppingStore:
        for name in _CALLS:
            setattr(self.saver, name, self._wrap(name, getattr(self.saver, name)))
        return self

    def __exit__(self, *exc: object) -> None:
        for name in _CALLS:
            delattr(self.saver, name)


def _start(stack: ChaosStack, graph_id: str, graph_input: Any, thread: str, **drop: Any) -> Any:
    with DroppingStore(stack.saver, **drop) as store:
        handle = stack.graph(graph_id).start(graph_input, RunnableConfig(thread_id=thread))
    return handle, store.calls


def test_client_store_call_dropped(stack: ChaosStack) -> None:
    """Every store call of ``start()`` (a new run, then a resume) fails once, before or after
    its statement ran: the start goes through, the run completes exactly once."""
    resume = GraphInput.resume({"log": ["approved"]})
    # how many store calls each start makes
    _, new_calls = _start(stack, "gate", {}, f"count-{uuid.uuid4().hex[:8]}", fail_at=0, when="")
    parked = f"count-{uuid.uuid4().hex[:8]}"
    stack.graph("gate").start({}, RunnableConfig(thread_id=parked)).wait(timeout=20)
    _, resume_calls = _start(stack, "gate", resume, parked, fail_at=0, when="")
    trials = 0
    for when in ("before", "after"):
        for fail_at in range(1, len(new_calls) + 1):
            thread = f"drop-new-{when}-{fail_at}-{uuid.uuid4().hex[:8]}"
            handle, calls = _start(stack, "gate", {}, thread, fail_at=fail_at, when=when)
            assert handle.wait(timeout=20).is_interruption_metadata(), describe(stack, thread)
            trials += 1
        for fail_at in range(1, len(resume_calls) + 1):
            thread = f"drop-resume-{when}-{fail_at}-{uuid.uuid4().hex[:8]}"
            stack.graph("gate").start({}, RunnableConfig(thread_id=thread)).wait(timeout=20)
            handle, calls = _start(stack, "gate", resume, thread, fail_at=fail_at, when=when)
            what = f"{when} {calls[fail_at - 1]} (call {fail_at} of {calls})"
            try:
                result = handle.wait(timeout=20)
            except TimeoutError:
                pytest.fail(f"resume stuck, connection dropped {what}\n{describe(stack, thread)}")
            assert result.as_state_data()["log"] == EXPECTED["gate"], what
            assert_exact(stack.saver, thread, EXPECTED["gate"])
            trials += 1
    print(f"client store drops: {trials} trials ({new_calls} / {resume_calls})")
