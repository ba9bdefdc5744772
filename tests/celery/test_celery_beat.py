"""SPEC §8, beat maintenance, on real worker and ``celery beat`` processes (Redis db 10 as broker
and result backend, PostgreSQL checkpoints):

- the reaper re-dispatches a run whose pending step has no live task (the broker restarted
  empty, a message was lost), finishes a step whose writes were all committed, leaves a
  progressing run alone, clears the timers of finished runs, and concurrent passes apply each
  update once;
- an interrupt deadline (``GraphInterrupt(metadata={"timeout": s})`` or the executor's
  ``interrupt_timeout``) resumes the parked run with a timeout marker under ``TIMEOUT_KEY``; a run
  resumed by a human before its deadline is left alone;
- ``executor.schedule_run`` starts runs from ``celery beat`` on new threads, and skips (and logs)
  a start on a fixed thread that is still busy.

The app is ``apps/lgc_beat_app.py`` (``stalled_after`` 2 s, ``reap_interval`` 0.5 s).
"""

from __future__ import annotations

import ast
import base64
import json
import os
import re
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from lgc_beat_app import INTERRUPT_TIMEOUT, REAP_INTERVAL, STALLED_AFTER, chain

from celery_support import CeleryStack, ServiceProcess, subprocess_env, wait_until
from langgraph_celery import (
    CompileConfig,
    GraphDefinitionError,
    GraphInput,
    NodeError,
    RunnableConfig,
)
from langgraph_celery.beat.reaper import TIMEOUT_KEY, ReapReport, reap
from langgraph_celery.celery import RunHandle
from langgraph_celery.checkpoint import MemorySaver
from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint, Timer
from langgraph_celery.graph._marks import Extra
from langgraph_celery.worker import names
from langgraph_celery.worker.names import celery_task_id
from services import flushed_redis_db, unique_table_prefix

#: The Redis db of this module (broker, result backend, counters): flushed before and after, and
#: by the broker-loss test.  The other Celery modules use db 11.
BEAT_REDIS_DB = 10
APP_MODULE = "lgc_beat_app"


# -- processes ------------------------------------------------------------------------------------


class BeatStack(CeleryStack):
    """A :class:`CeleryStack` of ``lgc_beat_app``: its workers, and ``celery beat``."""

    @property
    def held_queue(self) -> str:
        return self.settings["LGC_HELD_QUEUE"]

    def build(self) -> None:
        import lgc_beat_app

        self.bundle = lgc_beat_app.build(self.settings)
        self.bundle.saver.setup()

    def _start(self, name: str, argv: list[str], ready: str, **env: str) -> ServiceProcess:
        log_path = self.log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        full = [sys.executable, "-m", "celery", "-A", APP_MODULE, *argv]
        process = ServiceProcess(name, full, subprocess_env(self.settings, env), log_path)
        try:
            process.wait_for_log(ready)
        except BaseException:
            process.stop()
            raise
        return process

    def worker(self, worker_name: str, queues: Any = None, **options: Any) -> ServiceProcess:
        if worker_name not in self.workers:
            argv = ["worker", "-P", "prefork", "-c", "3", "-l", "info"]
            argv += ["-Q", ",".join(queues or [self.queue])]
            argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
            argv += ["-n", f"{worker_name}-{uuid.uuid4().hex[:8]}@%h"]
            self.workers[worker_name] = self._start(
                worker_name, argv, " ready.", WORKER_NAME=worker_name
            )
        return self.workers[worker_name]

    def kill_worker(self, worker_name: str) -> None:
        """``kill -9`` the worker and its pool processes."""
        worker = self.workers.pop(worker_name)
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait(10)
        worker.stop()

    def beat(self, schedules: list[Mapping[str, Any]] | None = None) -> ServiceProcess:
        """``celery -A lgc_beat_app beat`` with its schedule and pid files in the log dir."""
        tag = uuid.uuid4().hex[:6]
        argv = ["beat", "-l", "info", "--max-interval", "1"]
        argv += ["-s", str(self.log_dir / f"beat-{tag}-schedule")]
        argv += ["--pidfile", str(self.log_dir / f"beat-{tag}.pid")]
        env = {"LGC_BEAT_SCHEDULES": json.dumps(schedules or [])}
        beat = self._start("beat", argv, "beat: Starting...", **env)
        self.others.append(beat)
        return beat

    def stop_beat(self, beat: ServiceProcess) -> None:
        beat.stop()
        self.others.remove(beat)


@pytest.fixture(scope="module")
def beat_redis_url(_redis_server: str) -> Iterator[str]:
    with flushed_redis_db(_redis_server, BEAT_REDIS_DB) as url:
        yield url


@pytest.fixture(scope="module")
def stack(
    beat_redis_url: str, postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BeatStack]:
    suffix = uuid.uuid4().hex[:8]
    settings = {
        "LGC_BROKER_URL": beat_redis_url,
        "LGC_BACKEND_URL": beat_redis_url,
        "LGC_DB_URL": postgres_url,
        "LGC_TABLE_PREFIX": unique_table_prefix(),
        "LGC_QUEUE": f"lgc-beat-{suffix}",
        "LGC_HELD_QUEUE": f"lgc-held-{suffix}",
        "LGC_REDIS_URL": beat_redis_url,
    }
    beat_stack = BeatStack("redis", settings, tmp_path_factory.mktemp("celery-beat"))
    try:
        beat_stack.build()
        beat_stack.worker("main")
        yield beat_stack
    finally:
        beat_stack.close()


@pytest.fixture
def r(beat_redis_url: str) -> Iterator[Any]:
    """A client on this module's Redis db."""
    import redis

    client = redis.Redis.from_url(beat_redis_url, decode_responses=True)
    try:
        yield client
    finally:
        client.close()


# -- helpers --------------------------------------------------------------------------------------


def cfg(thread: str) -> RunnableConfig:
    return RunnableConfig(thread_id=thread)


def count(r: Any, kind: str, thread: str, node: str) -> int:
    return int(r.get(f"{kind}:{thread}:{node}") or 0)


def now() -> datetime:
    return datetime.now(UTC)


def later(seconds: float = STALLED_AFTER + 1) -> datetime:
    """A reaper clock ``seconds`` ahead: every run started before now looks stalled."""
    return now() + timedelta(seconds=seconds)


def timers_of(saver: BaseCheckpointSaver, thread: str) -> list[Timer]:
    return [t for t in saver.due_timers(later(86400), 10_000) if t.thread_id == thread]


def outcomes(report: ReapReport, thread: str) -> list[str]:
    return [outcome for outcome, threads in report.to_data().items() if thread in threads]


def concurrently(n: int, call: Callable[[], ReapReport]) -> list[ReapReport]:
    """``call`` in ``n`` threads released together."""
    barrier = threading.Barrier(n)

    def run(_: int) -> ReapReport:
        barrier.wait(10)
        return call()

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def reaper_passes(log: str) -> list[dict[str, list[str]]]:
    """The reports a worker logged (``reaper pass: {...}``)."""
    return [
        ast.literal_eval(line.split("reaper pass: ", 1)[1])
        for line in log.splitlines()
        if "reaper pass: " in line
    ]


def held_ids(r: Any, queue: str) -> list[str]:
    """The Celery task ids of the messages waiting in ``queue``."""
    return [json.loads(body)["headers"]["id"] for body in r.lrange(queue, 0, -1)]


def task_statuses(log: str, task_id: str) -> list[str]:
    """The ``status`` of each run of the Celery task ``task_id`` that succeeded, from a log."""
    pattern = re.compile(re.escape(f"[{task_id}] succeeded in ") + r".*?'status': '([\w-]+)'")
    return pattern.findall(log)


class Consuming:
    """The ``main`` worker consumes the held queue while the block runs."""

    def __init__(self, stack: BeatStack) -> None:
        self.stack = stack

    # (``limit``: the broadcast returns once every worker replied, not after its 1 s timeout)

    def __enter__(self) -> None:
        control, workers = self.stack.app.control, len(self.stack.workers)
        replies = control.add_consumer(self.stack.held_queue, reply=True, limit=workers)
        assert replies, "no worker answered add_consumer"

    def __exit__(self, *exc: object) -> None:
        workers = len(self.stack.workers)
        self.stack.app.control.cancel_consumer(self.stack.held_queue, reply=True, limit=workers)


def wait_parked_at(saver: BaseCheckpointSaver, thread: str, next_: tuple[str, ...]) -> Checkpoint:
    def parked() -> Checkpoint | None:
        latest = saver.get(thread)
        return latest if latest is not None and tuple(sorted(latest.next)) == next_ else None

    found: Checkpoint = wait_until(parked, 15, 0.02, f"thread {thread} at {next_}")
    return found


def held_fan_at_b(stack: BeatStack, config: RunnableConfig) -> tuple[Any, Checkpoint]:
    """Start ``held-fan`` (a -> (b | c) -> d, b's message waiting in the held queue) and wait
    for its (b, c) step with c's write in: the run's handle and that step."""
    saver, thread = stack.saver, str(config.thread_id)
    handle = stack.graph("held-fan").start({"thread": thread}, config)
    step = wait_parked_at(saver, thread, ("b", "c"))
    wait_until(
        lambda: any(w.node == "c" for w in saver.get_writes(thread, step.checkpoint_id)),
        15,
        0.02,
        "c's write",
    )
    return handle, step


# -- the reaper: stalled runs -------------------------------------------------------------------


def test_a_run_lost_with_the_broker_is_redispatched_by_beat(
    stack: BeatStack, thread: str, r: Any
) -> None:
    graph = stack.graph("chain")
    handle = graph.start({"thread": thread, "sleep_a": 1.5}, cfg(thread))
    wait_until(lambda: count(r, "started", thread, "a") == 1, 15, 0.02, "node a to start")

    # the worker dies mid-node and the broker restarts empty (messages, unacked, results)
    stack.kill_worker("main")
    r.flushdb()
    stack.worker("main")
    assert handle.status() == "running"
    assert graph.get_state(cfg(thread)).next == ("a",)
    assert r.llen(stack.queue) == 0  # nothing will ever run it again by itself

    beat = stack.beat()
    try:
        result = handle.wait(timeout=30)
    finally:
        stack.stop_beat(beat)
    data = result.as_state_data()
    assert data["log"] == ["a", "b", "c"]  # every update applied once
    assert count(r, "calls", thread, "a") >= 1  # a ran again after the loss
    assert "Sending due task langgraph_celery.reap" in beat.log()
    passes = reaper_passes(stack.workers["main"].log())
    assert any(thread in report.get("redispatched", []) for report in passes), passes
    wait_until(lambda: not timers_of(stack.saver, thread), 10, 0.05, "the timer to be cleared")


def test_reap_finishes_a_step_whose_writes_were_all_committed(
    stack: BeatStack, thread: str, r: Any
) -> None:
    saver = stack.saver
    handle, step = held_fan_at_b(stack, cfg(thread))
    by_node = {task.node: task for task in step.tasks}
    assert held_ids(r, stack.held_queue) == [
        celery_task_id(step.run_id, step.checkpoint_id, by_node["b"].id)
    ]
    # b's worker took the message, committed b's write and died before finishing the step
    r.delete(stack.held_queue)
    assert saver.put_writes(thread, step.checkpoint_id, by_node["b"].id, "b", {"log": ["b"]})
    assert handle.status() == "running"

    future = later()
    reports = concurrently(2, lambda: reap(stack.executor, now=future))
    assert any(outcomes(report, thread) == ["finished"] for report in reports), reports
    data = handle.wait(timeout=20).as_state_data()
    assert data["log"][0] == "a" and sorted(data["log"][1:3]) == ["b", "c"]
    assert data["log"][3:] == ["d"]
    assert count(r, "started", thread, "b") == 0  # b's update came from its committed write
    assert count(r, "calls", thread, "c") == 1
    assert r.llen(stack.held_queue) == 0  # the finished step's tasks were not sent again


def test_a_redispatched_run_keeps_the_config_it_was_started_with(
    stack: BeatStack, thread: str, r: Any
) -> None:
    """Each checkpoint of an invocation carries its config and step count: a run the reaper
    sends again keeps its recursion limit, its metadata and its step count, and its messages
    name the step only."""
    config = RunnableConfig(thread_id=thread, recursion_limit=7, metadata={"tenant": "acme"})
    handle, step = held_fan_at_b(stack, config)
    r.delete(stack.held_queue)  # b's message lost with the broker
    assert outcomes(reap(stack.executor, now=later()), thread) == ["redispatched"]
    [body] = r.lrange(stack.held_queue, 0, -1)
    _args, kwargs, _embed = json.loads(base64.b64decode(json.loads(body)["body"]))
    assert kwargs == {
        "graph_id": "held-fan",
        "thread_id": thread,
        "run_id": step.run_id,
        "step": step.step,
        "checkpoint_id": step.checkpoint_id,
        "node": "b",
        "task_id": "b",
    }
    recorded = step.extra[Extra.RUN_CONFIG]
    assert (recorded["recursion_limit"], recorded["metadata"]) == (7, {"tenant": "acme"})
    assert step.extra[Extra.STEPS] == 1  # the step after the first
    assert stack.executor.runtime("held-fan").config_of(step).recursion_limit == 7
    with Consuming(stack):
        data = handle.wait(timeout=20).as_state_data()
    assert data["log"][0] == "a" and sorted(data["log"][1:3]) == ["b", "c"]
    assert data["log"][3:] == ["d"]


def test_a_far_future_copy_of_a_lost_steps_message_is_refused_and_the_step_sent_again(
    stack: BeatStack, thread: str, r: Any
) -> None:
    """A copy of a lost step's message due in a year (sent by someone with broker access) is
    refused by the worker: held as scheduled, it would have the reaper, which asks the workers
    whether the step's task is alive, wait for it, and the run would never go on."""
    handle, _ = held_fan_at_b(stack, cfg(thread))
    [raw] = r.lrange(stack.held_queue, 0, -1)
    r.delete(stack.held_queue)  # b's message lost with the broker
    copy = json.loads(raw)
    copy["headers"]["eta"] = (now() + timedelta(days=365)).isoformat()
    copy["properties"]["delivery_info"]["routing_key"] = stack.queue
    r.lpush(stack.queue, json.dumps(copy))
    wait_until(lambda: r.llen(stack.queue) == 0, 15, 0.02, "a worker to take the copy")

    assert outcomes(reap(stack.executor, now=later()), thread) == ["redispatched"]
    assert "node task message eta" in stack.workers["main"].log()
    assert "more than 3600 s ahead" in stack.workers["main"].log()
    assert held_ids(r, stack.held_queue) == [copy["headers"]["id"]]
    with Consuming(stack):
        data = handle.wait(timeout=20).as_state_data()
    assert data["log"][0] == "a" and sorted(data["log"][1:3]) == ["b", "c"]
    assert data["log"][3:] == ["d"]


def test_a_progressing_run_is_not_redispatched(stack: BeatStack, thread: str, r: Any) -> None:
    saver = stack.saver
    handle = stack.graph("chain").start({"thread": thread, "sleep_a": 1.0}, cfg(thread))
    wait_until(lambda: count(r, "started", thread, "a") == 1, 15, 0.02, "node a to start")
    first = saver.get(thread)
    assert first is not None and first.next == ("a",)
    # the stall timer is due (as if the run had started long ago), its checkpoint is young
    saver.set_timer(thread, first.run_id, "chain", names.STALL_TIMER, now() - timedelta(seconds=1))

    report = reap(stack.executor)
    assert outcomes(report, thread) == ["progressing"]
    [timer] = timers_of(saver, thread)
    assert timer.kind == names.STALL_TIMER
    pushed_to = first.created_at + timedelta(seconds=STALLED_AFTER)
    assert abs((timer.due_at - pushed_to).total_seconds()) < 0.01
    assert thread not in [t.thread_id for t in saver.due_timers(now())]

    assert handle.wait(timeout=20).as_state_data()["log"] == ["a", "b", "c"]
    assert count(r, "started", thread, "a") == 1  # never sent again
    wait_until(lambda: not timers_of(saver, thread), 10, 0.05, "the timer to be cleared")


def test_an_exit_run_longer_than_stalled_after_is_not_taken_for_stalled(
    stack: BeatStack, thread: str, r: Any
) -> None:
    """With ``"exit"`` only the run's start is stored until it ends, so the store shows no
    progress; the tasks that carry its steps push the stall timer back, and beat's reaper
    (every 0.5 s) leaves the run alone although it takes twice ``stalled_after``."""
    sleeps = {f"sleep_{node}": STALLED_AFTER * 0.6 for node in ("a", "b", "c")}
    config = RunnableConfig(thread_id=thread, durability="exit")
    beat = stack.beat()
    try:
        handle = stack.graph("chain").start({"thread": thread, **sleeps}, config)
        data = handle.wait(timeout=30).as_state_data()
    finally:
        stack.stop_beat(beat)
    assert data["log"] == ["a", "b", "c"]
    for node in ("a", "b", "c"):
        assert count(r, "started", thread, node) == 1, node  # never sent again
    assert beat.log().count("Sending due task langgraph_celery.reap") >= 4  # passes ran meanwhile
    passes = reaper_passes(stack.workers["main"].log())  # (a pass that did something logs it)
    assert not [p for p in passes if any(thread in threads for threads in p.values())], passes


def test_timers_of_finished_runs_are_cleared(stack: BeatStack, r: Any) -> None:
    saver = stack.saver
    done, failed, parked = (f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("done", "fail", "park"))
    assert stack.graph("chain").invoke({"thread": done}, cfg(done)).data["log"] == ["a", "b", "c"]
    with pytest.raises(NodeError, match="boom"):
        stack.graph("boom").invoke({"thread": failed}, cfg(failed))
    result = stack.graph("gate").start({"thread": parked}, cfg(parked)).wait(timeout=20)
    assert result.as_interruption_metadata().metadata == {}  # no deadline
    # completion clears the run's timer; a failure or a parking without deadline leave their
    # stall timer to the reaper (so a resume that re-arms it meanwhile keeps it)
    wait_until(lambda: not timers_of(saver, done), 10, 0.05, f"{done}'s timer")
    for thread in (failed, parked):
        assert [t.kind for t in timers_of(saver, thread)] == [names.STALL_TIMER]

    # once due, the reaper clears them (and a completed run's, if its worker died before)
    due = now() - timedelta(seconds=1)
    graph_ids = {done: "chain", failed: "boom", parked: "gate"}
    for thread, graph_id in graph_ids.items():
        latest = saver.get(thread)
        assert latest is not None
        saver.set_timer(thread, latest.run_id, graph_id, names.STALL_TIMER, due)
    ghost = f"ghost-{uuid.uuid4().hex[:8]}"
    saver.set_timer(ghost, "r", "no-such-graph", names.STALL_TIMER, due)
    try:
        report = reap(stack.executor)
        for thread in graph_ids:
            assert outcomes(report, thread) == ["cleared"], report
            assert timers_of(saver, thread) == []
        # a graph this process does not know: left for a process that does, not an error
        assert outcomes(report, ghost) == []
        assert [t.graph_id for t in timers_of(saver, ghost)] == ["no-such-graph"]
    finally:
        saver.clear_timer(ghost, "r")

    # the parked run is untouched and still resumable
    resumed = stack.graph("gate").invoke(GraphInput.resume({"approved": True}), cfg(parked))
    assert resumed.data["log"] == ["a", "approved", "b"]


def test_timers_of_unknown_graphs_do_not_starve_the_others(stack: BeatStack) -> None:
    saver = stack.saver
    done = f"done-{uuid.uuid4().hex[:8]}"
    assert stack.graph("chain").invoke({"thread": done}, cfg(done)).data["log"] == ["a", "b", "c"]
    wait_until(lambda: not timers_of(saver, done), 10, 0.05, "the timer to be cleared")
    latest = saver.get(done)
    assert latest is not None
    t0 = now()
    # threads of graphs another process runs, due long before this one's stale timer
    ghosts = [f"ghost-{i}-{uuid.uuid4().hex[:8]}" for i in range(3)]
    for i, ghost in enumerate(ghosts):
        saver.set_timer(
            ghost, "r", "no-such-graph", names.STALL_TIMER, t0 - timedelta(seconds=9 - i)
        )
    saver.set_timer(done, latest.run_id, "chain", names.STALL_TIMER, t0 - timedelta(seconds=1))
    try:
        report = reap(stack.executor, now=t0, limit=2)
        assert outcomes(report, done) == ["cleared"], report
        for ghost in ghosts:
            assert [t.graph_id for t in timers_of(saver, ghost)] == ["no-such-graph"]
    finally:
        for ghost in ghosts:
            saver.clear_timer(ghost, "r")


def test_concurrent_reap_passes_apply_each_update_once(
    stack: BeatStack, thread: str, r: Any
) -> None:
    saver = stack.saver
    handle = stack.graph("held-chain").start({"thread": thread}, cfg(thread))  # b is held
    step = wait_parked_at(saver, thread, ("b",))
    task_id = celery_task_id(step.run_id, step.checkpoint_id, step.tasks[0].id)
    wait_until(lambda: held_ids(r, stack.held_queue) == [task_id], 10, 0.02, "b's message")
    r.delete(stack.held_queue)  # lost

    future = later()
    reports = concurrently(2, lambda: reap(stack.executor, now=future))
    sent = sum(outcomes(report, thread) == ["redispatched"] for report in reports)
    assert sent >= 1, reports
    # and again once the pushed-back timer is due: the step is still stalled
    report = reap(stack.executor, now=future + timedelta(seconds=STALLED_AFTER + 1))
    assert outcomes(report, thread) == ["redispatched"]
    sent += 1
    # every copy carries the step's deterministic task id
    assert held_ids(r, stack.held_queue) == [task_id] * sent

    worker = stack.workers["main"]
    with Consuming(stack):
        data = handle.wait(timeout=20).as_state_data()
        wait_until(
            lambda: len(task_statuses(worker.log(), task_id)) == sent,
            10,
            0.05,
            "every copy of b to be handled",
        )
    assert data["log"] == ["a", "b", "c"]  # b's update landed once
    # one copy merged the step; the others lost the race or saw the step committed
    statuses = task_statuses(worker.log(), task_id)
    assert statuses.count("merged") == 1, statuses
    assert set(statuses) <= {"merged", "merged-elsewhere", "duplicate"}, statuses
    assert 1 <= count(r, "calls", thread, "b") <= sent
    assert count(r, "calls", thread, "c") == 1
    assert stack.graph("held-chain").get_state(cfg(thread)).state.data["log"] == ["a", "b", "c"]


# -- interrupt deadlines ------------------------------------------------------------------------


def test_an_expired_deadline_resumes_the_run_with_a_timeout_marker(
    stack: BeatStack, thread: str, r: Any
) -> None:
    saver, graph = stack.saver, stack.graph("gate")
    before = now()
    handle = graph.start({"thread": thread, "timeout": 1}, cfg(thread))
    interruption = handle.wait(timeout=20).as_interruption_metadata()
    after = now()
    assert (interruption.node_id, interruption.reason) == ("gate", "needs approval")
    assert interruption.metadata["timeout"] == 1
    expires_at = datetime.fromisoformat(interruption.metadata["expires_at"])
    assert before + timedelta(seconds=1) <= expires_at <= after + timedelta(seconds=1)
    # the deadline is armed right after the park marker the client saw
    wait_until(
        lambda: [t.kind for t in timers_of(saver, thread)] == [names.DEADLINE_TIMER],
        10,
        0.02,
        "the deadline timer",
    )
    [timer] = timers_of(saver, thread)
    assert (timer.kind, timer.due_at) == (names.DEADLINE_TIMER, expires_at)

    # before the deadline: left parked
    report = reap(stack.executor, now=expires_at - timedelta(seconds=0.2))
    assert outcomes(report, thread) == []
    assert handle.status() == "parked"

    wait_until(lambda: now() > expires_at, 5, 0.02, "the deadline")
    report = reap(stack.executor)
    assert outcomes(report, thread) == ["expired"]
    wait_until(lambda: handle.status() == "completed", 20, 0.05, "the expired run to complete")

    data = graph.get_state(cfg(thread)).state.data
    assert data["log"] == ["a", "expired", "b"]
    marker = data[TIMEOUT_KEY]
    assert set(marker) == {"node_id", "deadline", "expired_at"}
    assert marker["node_id"] == "gate"
    assert datetime.fromisoformat(marker["deadline"]) == expires_at
    assert datetime.fromisoformat(marker["expired_at"]) >= expires_at
    assert count(r, "started", thread, "gate") == 2  # parked once, ran once after expiry
    wait_until(lambda: not timers_of(saver, thread), 10, 0.05, "the timer to be cleared")
    assert outcomes(reap(stack.executor, now=later()), thread) == []


def test_a_run_resumed_before_its_deadline_is_left_alone(stack: BeatStack, thread: str) -> None:
    saver, graph = stack.saver, stack.graph("gate")
    result = graph.start({"thread": thread, "timeout": 2}, cfg(thread)).wait(timeout=20)
    expires_at = datetime.fromisoformat(result.as_interruption_metadata().metadata["expires_at"])
    wait_until(
        lambda: [t.kind for t in timers_of(saver, thread)] == [names.DEADLINE_TIMER],
        10,
        0.02,
        "the deadline timer",
    )

    state = graph.invoke(GraphInput.resume({"approved": True}), cfg(thread))
    assert state.data["log"] == ["a", "approved", "b"]
    latest = saver.get(thread)
    assert latest is not None
    wait_until(lambda: not timers_of(saver, thread), 10, 0.05, "the timer to be cleared")

    report = reap(stack.executor, now=expires_at + timedelta(seconds=5))
    assert outcomes(report, thread) == []
    after = saver.get(thread)
    assert after is not None and after.checkpoint_id == latest.checkpoint_id
    assert TIMEOUT_KEY not in graph.get_state(cfg(thread)).state.data


def test_a_deadline_racing_a_human_resume_leaves_the_resumed_run_watched(
    stack: BeatStack, thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import langgraph_celery.beat.reaper as reaper_module

    saver, graph = stack.saver, stack.graph("gate")
    result = graph.start({"thread": thread, "timeout": 1, "sleep_b": 1.5}, cfg(thread)).wait(20)
    # the deadline is armed right after the park marker the client saw
    wait_until(
        lambda: [t.kind for t in timers_of(saver, thread)] == [names.DEADLINE_TIMER],
        10,
        0.02,
        "the deadline timer",
    )
    expires_at = datetime.fromisoformat(result.as_interruption_metadata().metadata["expires_at"])
    real_read_status = reaper_module.read_status
    resumed: list[RunHandle] = []

    def read_then_resume(runtime: Any, checkpoint: Checkpoint | None) -> Any:
        status = real_read_status(runtime, checkpoint)
        if checkpoint is not None and checkpoint.thread_id == thread and not resumed:
            # a human resumes right after the reaper read the parked run
            resumed.append(graph.start(GraphInput.resume({"approved": True}), cfg(thread)))
        return status

    monkeypatch.setattr(reaper_module, "read_status", read_then_resume)
    report = reap(stack.executor, now=expires_at + timedelta(seconds=0.1))
    monkeypatch.undo()
    assert resumed, "the reaper did not read the thread"
    assert outcomes(report, thread) == []  # the deadline was not applied
    # the resumed run (b sleeps 1.5 s) is still watched by its stall timer
    assert [t.kind for t in timers_of(saver, thread)] == [names.STALL_TIMER]
    data = resumed[0].wait(timeout=20).as_state_data()
    assert data["log"] == ["a", "approved", "b"]
    assert TIMEOUT_KEY not in data


def test_a_resume_refused_by_the_reducers_keeps_the_deadline(
    stack: BeatStack, thread: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resume whose update fails after the client claimed the parked run stores nothing: the
    run stays parked, with its deadline timer, and a later resume goes through."""
    import langgraph_celery.graph._engine as engine_module

    saver, graph = stack.saver, stack.graph("gate")
    result = graph.start({"thread": thread, "timeout": 60}, cfg(thread)).wait(timeout=20)
    assert result.is_interruption_metadata()
    wait_until(
        lambda: [t.kind for t in timers_of(saver, thread)] == [names.DEADLINE_TIMER],
        10,
        0.02,
        "the deadline timer",
    )
    (deadline,) = timers_of(saver, thread)
    parked = saver.get(thread)
    real_apply_update = engine_module.apply_update

    def refuse(schema: Any, values: Any, update: Any, *what: Any) -> Any:
        if "approved" in update:
            raise ValueError("the reducer refuses this update")
        return real_apply_update(schema, values, update, *what)

    monkeypatch.setattr(engine_module, "apply_update", refuse)
    with pytest.raises(ValueError, match="refuses"):
        graph.invoke(GraphInput.resume({"approved": True}), cfg(thread))
    monkeypatch.undo()
    assert timers_of(saver, thread) == [deadline]
    latest = saver.get(thread)
    assert parked is not None and latest is not None
    assert latest.checkpoint_id == parked.checkpoint_id

    state = graph.invoke(GraphInput.resume({"approved": True}), cfg(thread))
    assert state.data["log"] == ["a", "approved", "b"]
    wait_until(lambda: not timers_of(saver, thread), 10, 0.05, "the timer to be cleared")


def test_the_executors_interrupt_timeout_expires_under_beat(stack: BeatStack, thread: str) -> None:
    graph = stack.graph("timed-review")  # interrupt_before b, interrupt_timeout 1 s
    handle = graph.start({"thread": thread}, cfg(thread))
    interruption = handle.wait(timeout=20).as_interruption_metadata()
    assert interruption.node_id == "b"
    expires_at = datetime.fromisoformat(interruption.metadata["expires_at"])
    assert expires_at - now() <= timedelta(seconds=INTERRUPT_TIMEOUT)

    beat = stack.beat()
    try:
        wait_until(lambda: handle.status() == "completed", 20, 0.05, "the expired run")
    finally:
        stack.stop_beat(beat)
    data = graph.get_state(cfg(thread)).state.data
    assert data["log"] == ["a", "b", "c"]
    assert data[TIMEOUT_KEY]["node_id"] == "b"
    assert datetime.fromisoformat(data[TIMEOUT_KEY]["deadline"]) == expires_at
    passes = reaper_passes(stack.workers["main"].log())
    assert any(thread in report.get("expired", []) for report in passes), passes


# -- scheduled runs -----------------------------------------------------------------------------


def start_results(r: Any) -> list[dict[str, Any]]:
    """What the ``langgraph_celery.start`` tasks returned, from the result backend."""
    found = []
    for key in r.scan_iter("celery-task-meta-*"):
        meta = json.loads(r.get(key) or "{}")
        if meta.get("name") == names.START_TASK and meta.get("status") == "SUCCESS":
            found.append({"name": meta["kwargs"]["name"], **meta["result"]})
    return found


def test_beat_starts_scheduled_runs_and_skips_a_busy_thread(stack: BeatStack, r: Any) -> None:
    graph = stack.graph("chain")
    busy = f"busy-{uuid.uuid4().hex[:8]}"
    schedules = [
        {"name": "nightly", "graph": "chain", "every": 1.0, "input": {"tag": "nightly"}},
        {
            "name": "busy",
            "graph": "chain",
            "every": 1.0,
            "input": {"thread": busy, "sleep_a": 1.6},
            "thread_id": busy,
        },
    ]

    def of(name: str, status: str) -> list[dict[str, Any]]:
        return [x for x in start_results(r) if x["name"] == name and x["status"] == status]

    beat = stack.beat(schedules)
    try:
        wait_until(
            lambda: len(of("nightly", "started")) >= 2 and of("busy", "skipped"),
            20,
            0.1,
            "two nightly runs and a skipped busy one",
        )
    finally:
        stack.stop_beat(beat)
    sent = len(re.findall(r"Sending due task (nightly|busy) ", beat.log()))
    wait_until(lambda: len(start_results(r)) == sent, 10, 0.05, "every start task to finish")

    nightly = of("nightly", "started")
    threads = [x["thread_id"] for x in nightly]
    assert len(set(threads)) == len(threads)
    for started in nightly:
        assert re.fullmatch(r"nightly-\d{8}T\d{6}\.\d{6}Z", started["thread_id"]), started
        handle = RunHandle(started["run_id"], started["thread_id"], graph)
        data = handle.wait(timeout=20).as_state_data()
        assert (data["tag"], data["log"]) == ("nightly", ["a", "b", "c"])

    runs, skipped = of("busy", "started"), of("busy", "skipped")
    assert runs and skipped
    assert all(x["thread_id"] == busy and "busy" in x["reason"] for x in skipped)
    assert "scheduled run 'busy' skipped" in stack.worker_logs()
    for started in runs:  # one after the other on the one thread
        RunHandle(started["run_id"], busy, graph).wait(timeout=20)
    wait_until(
        lambda: graph.get_state(cfg(busy)).next == () and len(runs) == len(of("busy", "started")),
        20,
        0.05,
        "the busy thread's last run",
    )
    assert graph.get_state(cfg(busy)).state.data["log"] == ["a", "b", "c"] * len(runs)


def test_schedule_run_adds_a_beat_entry(stack: BeatStack) -> None:
    app, executor, graph = stack.app, stack.executor, stack.graph("chain")
    assert app.conf.beat_schedule[names.REAP_TASK] == {
        "task": names.REAP_TASK,
        "schedule": REAP_INTERVAL,
    }
    executor.schedule_run(graph, "unit-report", 3600.0, input={"tag": "x"}, thread_id="fixed")
    try:
        assert app.conf.beat_schedule["unit-report"] == {
            "task": names.START_TASK,
            "schedule": 3600.0,
            "kwargs": {
                "graph_id": "chain",
                "name": "unit-report",
                "input": {"tag": "x"},
                "thread_id": "fixed",
            },
        }
        elsewhere = chain().compile(
            CompileConfig(checkpoint_saver=MemorySaver(), graph_id="elsewhere")
        )
        with pytest.raises(GraphDefinitionError, match="not compiled with this executor"):
            executor.schedule_run(elsewhere, "nope", 1.0)
    finally:
        schedule = dict(app.conf.beat_schedule)
        schedule.pop("unit-report", None)
        app.conf.beat_schedule = schedule


def test_the_reaper_does_not_send_again_a_step_whose_task_runs_on_a_live_worker(
    stack: BeatStack, thread: str, r: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node slower than ``stalled_after`` is not a lost one: its task is alive.  Two such
    steps in one pass: the workers are asked once for both."""
    threads = [thread, f"{thread}-2"]
    handles = [stack.graph("chain").start({"thread": t, "sleep_b": 4.0}, cfg(t)) for t in threads]
    for t in threads:  # (the main worker runs two tasks at once)
        wait_until(lambda t=t: count(r, "started", t, "b") == 1, 15, 0.02, "node b to start")

    control = stack.app.control
    asked: list[Any] = []
    broadcast = control.broadcast
    monkeypatch.setattr(
        control, "broadcast", lambda *a, **kw: asked.append(a) or broadcast(*a, **kw)
    )
    report = reap(stack.executor, now=later())  # b's steps look stalled by the clock
    assert [outcomes(report, t) for t in threads] == [["alive"], ["alive"]], report
    assert [a[0] for a in asked] == ["query_task"]  # one broadcast for both
    for t, handle in zip(threads, handles, strict=True):
        assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b", "c"]
        assert count(r, "started", t, "b") == 1  # never sent to a second pool process
