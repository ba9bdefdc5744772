"""Helpers of the chaos tests (``tests/chaos/``): the stack of one test module (settings, the app
as the test process builds it, its prefork workers), a reaper running in the test process, and
the exact-state check every trial ends with.
"""

from __future__ import annotations

import itertools
import logging
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app_kit import app_env
from celery_support import BundleAccess, ServiceProcess, launch_worker
from langgraph_celery.beat.reaper import ReapReport, reap
from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.worker import names

APPS_DIR = Path(__file__).parent / "apps"
APP_MODULE = "chaos_app"
READY_TIMEOUT = 60.0

if str(APPS_DIR) not in sys.path:
    sys.path.insert(0, str(APPS_DIR))

log = logging.getLogger("chaos")


def chaos_env(
    settings: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a subprocess that imports ``chaos_app`` with ``settings``."""
    return app_env(APPS_DIR, settings, extra)


def start_worker(
    settings: Mapping[str, str], log_dir: Path, name: str, concurrency: int = 2
) -> ServiceProcess:
    """``celery -A chaos_app worker`` (prefork) on the chaos queue, once it logs ``ready``."""
    stamp = uuid.uuid4().hex[:6]
    return launch_worker(
        APP_MODULE,
        [settings["CHAOS_QUEUE"]],
        f"{name}-{uuid.uuid4().hex[:6]}",
        chaos_env(settings, {"WORKER_NAME": name}),
        log_dir / f"worker-{name}-{stamp}.log",
        concurrency,
        label=name,
        ready_timeout=READY_TIMEOUT,
    )


@dataclass
class ChaosStack(BundleAccess):
    """One test module's world: settings, the app as the test process builds it, workers."""

    settings: dict[str, str]
    log_dir: Path
    side: Any  # redis client on the side-channel db
    bundle: Any = None
    workers: list[ServiceProcess] = field(default_factory=list)

    def build(self) -> None:
        import chaos_app

        self.bundle = chaos_app.build(self.settings)
        self.bundle.saver.setup()

    def start_worker(self, name: str = "main", concurrency: int = 2) -> ServiceProcess:
        worker = start_worker(self.settings, self.log_dir, name, concurrency)
        self.workers.append(worker)
        return worker

    def logs(self, tail: int = 6000) -> str:
        text = "\n".join(f"--- {w.name} ---\n{w.log()[-tail:]}" for w in self.workers)
        return text

    def close(self) -> None:
        for worker in self.workers:  # the module is over: nothing to drain (see kill())
            worker.kill()
        self.workers.clear()
        if self.bundle is not None:
            self.bundle.close()


#: ``make_stack(broker_url=None, workers=1, concurrency=2, **settings)`` (the conftest fixture).
StackFactory = Callable[..., "ChaosStack"]


class ReaperThread:
    """``reap(executor)`` every ``interval`` seconds in a thread of the test process (as the
    beat job does); a pass that fails (the store unreachable) is counted and the next one runs."""

    def __init__(self, executor: Any, interval: float = 0.25) -> None:
        self.executor = executor
        self.interval = interval
        self.reports: list[ReapReport] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-reaper", daemon=True)

    def start(self) -> ReaperThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.reports.append(reap(self.executor))
            except Exception as error:  # the store or broker is down: try again next pass
                self.failures += 1
                log.info("reaper pass failed: %r", error)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def threads(self, outcome: str) -> set[str]:
        """Thread ids some pass reported under ``outcome`` (``redispatched``, ``finished``...)."""
        return {t for report in self.reports for t in getattr(report, outcome)}


def history(saver: Any, thread: str) -> list[Checkpoint]:
    """The thread's checkpoints, oldest first."""
    return list(reversed(saver.list(thread)))


def assert_exact(saver: Any, thread: str, expected_log: Iterable[str]) -> list[Checkpoint]:
    """The thread's run completed with exactly ``expected_log`` in its appender channel, and its
    history is one line: unique (run, step) and checkpoint ids, each checkpoint the child of the
    one before, steps contiguous, and every step's writes recorded exactly once."""
    expected = list(expected_log)
    checkpoints = history(saver, thread)
    where = f"thread {thread!r}: " + "; ".join(
        f"{c.step}:{c.run_id[:6]}:{c.metadata.get('source')}:{c.next}" for c in checkpoints
    )
    assert checkpoints, f"thread {thread!r} has no checkpoints"
    ids = [c.checkpoint_id for c in checkpoints]
    assert len(set(ids)) == len(ids), f"duplicate checkpoint ids: {where}"
    keys = [(c.run_id, c.step) for c in checkpoints]
    assert len(set(keys)) == len(keys), f"a (run, step) stored twice: {where}"
    assert checkpoints[0].parent_id is None, where
    for before, after in itertools.pairwise(checkpoints):
        assert after.parent_id == before.checkpoint_id, f"history is not one line: {where}"
        assert after.step == before.step + 1, f"steps are not contiguous: {where}"
        if after.metadata.get("source") == "loop":
            written = set(after.metadata.get("writes") or {})
            assert written == {t.id for t in before.tasks}, f"step writes differ: {where}"
    latest = checkpoints[-1]
    assert not latest.tasks, f"the run did not complete: {where}"
    assert latest.values.get("log") == expected, f"state {latest.values}: {where}"
    view = saver.get_with_writes(thread)
    stray = {names.ERROR, names.CANCEL, names.INTERRUPT} & set(view.writes)
    assert not stray, f"markers {stray} on the final checkpoint: {where}"
    return checkpoints


def parent_of(pid: int) -> int:
    """The parent pid of ``pid`` (``/proc``); 0 if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def started(side: Any, thread: str) -> list[tuple[str, int]]:
    """``(node, pid)`` of every node execution that started on ``thread``, in order."""
    out = []
    for raw in side.lrange(f"started:{thread}", 0, -1):
        node, _, pid = raw.decode().partition(":")
        out.append((node, int(pid)))
    return out


def wait_started(side: Any, thread: str, node: str, timeout: float = 20.0) -> int:
    """The pid of the pool process that started ``node`` on ``thread`` (the first time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, pid in started(side, thread):
            if name == node:
                return pid
        time.sleep(0.01)
    raise AssertionError(f"node {node!r} of thread {thread!r} did not start in {timeout} s")


def race_client(
    settings: Mapping[str, str], name: str, inbox: Any, outbox: Any, barrier: Any
) -> None:
    """A process that resumes (or starts) the threads it is given, in step with its rival
    (``barrier``): for each ``(action, thread)`` from ``inbox``, ``action`` being ``"resume"`` or
    ``"start"``, it puts ``(name, thread, outcome, detail)`` in ``outbox``, ``outcome`` being
    ``won`` (detail: the log where the run ended), ``GraphStateError`` (detail: the message) or
    ``error`` (anything else, repr)."""
    import chaos_app

    from langgraph_celery import GraphInput, GraphStateError, RunnableConfig

    bundle = chaos_app.build(settings)
    graph = bundle.graphs["gate"]
    bundle.saver.setup()
    outbox.put((name, None, "ready", None))
    try:
        while True:
            item = inbox.get()
            if item is None:
                return
            action, thread = item
            barrier.wait(30)
            # (a jitter of a few ms: on a loaded machine the same process would else wake first
            # every time, and the race would not show that either can win)
            time.sleep(random.uniform(0, 0.005))
            if action == "resume":
                call: Any = GraphInput.resume({"log": [f"resumed-by-{name}"]})
            else:
                # (node a takes a while: a rival that comes late finds the run still running)
                call = {"log": [f"started-by-{name}"], "sleep": {"a": 0.3}}
            try:
                state = graph.invoke(call, RunnableConfig(thread_id=thread))
                outbox.put((name, thread, "won", list(state.value("log"))))
            except GraphStateError as error:
                outbox.put((name, thread, "GraphStateError", str(error)))
            except Exception as error:
                outbox.put((name, thread, "error", repr(error)))
    finally:
        bundle.close()


def describe(stack: ChaosStack, thread: str) -> str:
    """What a stuck or wrong run looks like: its history, markers, node starts, worker logs."""
    lines = [f"thread {thread!r}:"]
    for checkpoint in history(stack.saver, thread):
        writes = stack.saver.get_writes(thread, checkpoint.checkpoint_id)
        lines.append(
            f"  step {checkpoint.step} run {checkpoint.run_id[:8]} "
            f"{checkpoint.metadata.get('source')} id {checkpoint.checkpoint_id[:8]} "
            f"next {checkpoint.next} created {checkpoint.created_at.time()} "
            f"writes {[w.task_id for w in writes]} log {checkpoint.values.get('log')}"
        )
    lines.append(f"  started: {started(stack.side, thread)}")
    lines.append(stack.logs())
    return "\n".join(lines)


#: The final log of each graph of the mixed runs (``chain`` and ``fan`` of ``chaos_app``).
EXPECTED = {"chain": ["a", "b", "c"], "fan": ["a", "b", "c", "d"]}


def start_mixed_runs(
    stack: ChaosStack, prefix: str, count: int, sleep: float
) -> list[tuple[str, str, Any]]:
    """Start ``count`` runs, alternately ``chain`` and ``fan``, each node sleeping ``sleep`` s,
    on threads ``<prefix>-<index>-<hex>``; ``(graph_id, thread, handle)`` each."""
    from langgraph_celery import RunnableConfig

    runs = []
    for index in range(count):
        graph_id = ("chain", "fan")[index % 2]
        thread = f"{prefix}-{index}-{uuid.uuid4().hex[:8]}"
        sleeps = {node: sleep for node in EXPECTED[graph_id]}
        handle = stack.graph(graph_id).start({"sleep": sleeps}, RunnableConfig(thread_id=thread))
        runs.append((graph_id, thread, handle))
    return runs


def assert_runs_exact(
    stack: ChaosStack, runs: Sequence[tuple[str, str, Any]], lost: str, timeout: float = 45
) -> None:
    """Every run completes (else the test fails with ``run ... <lost>`` and the thread's story)
    with its expected log, each update applied once."""
    for graph_id, thread, handle in runs:
        try:
            result = handle.wait(timeout=timeout)
        except TimeoutError:
            pytest.fail(f"run {thread} {lost}\n{describe(stack, thread)}")
        assert result.as_state_data()["log"] == EXPECTED[graph_id]
        assert_exact(stack.saver, thread, EXPECTED[graph_id])
