"""Helpers of the console tests: park runs, wait for statuses."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any

from console_graphs import Graphs

from langgraph_celery import RunnableConfig
from langgraph_celery.checkpoint import RunStatus

WAIT = 30.0


def thread_id(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def park(graph: Any, values: dict[str, Any], thread: str | None = None) -> tuple[str, str]:
    """Start a run of ``graph`` on a new thread and wait until it stops; (run id, thread id)."""
    thread = thread or thread_id()
    config = RunnableConfig(thread_id=thread)
    if getattr(graph.config.executor, "app", None) is None:
        graph.invoke(values, config)
        latest = graph.checkpoint_saver.get(thread)
        return latest.run_id, thread
    handle = graph.start(values, config)
    with contextlib.suppress(Exception):  # a failing run raises its error: its status says it
        handle.wait(timeout=WAIT)
    return handle.run_id, thread


def wait_for(
    check: Callable[[], Any], what: str, timeout: float = WAIT, interval: float = 0.05
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def status_of(graphs: Graphs, run_id: str) -> RunStatus | None:
    record = graphs.saver.get_run(run_id)
    return record.status if record is not None else None


def wait_status(graphs: Graphs, run_id: str, status: RunStatus) -> None:
    """Wait until the run index says ``status``; for ``COMPLETED`` also until the run's last
    checkpoint is stored (executors record a status before the store shows it)."""
    wait_for(lambda: status_of(graphs, run_id) is status, f"run {run_id} to be {status.value}")
    if status is RunStatus.COMPLETED:
        thread = graphs.saver.get_run(run_id).thread_id

        def stored() -> bool:
            latest = graphs.saver.get(thread)
            return latest is not None and latest.run_id == run_id and not latest.tasks

        wait_for(stored, f"the last checkpoint of run {run_id}")
