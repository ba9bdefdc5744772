"""Run handles: a run started with ``CompiledGraph.start``, watched and controlled from any
process through the checkpoint store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.checkpoint.index import RunIndex
from langgraph_celery.errors import GraphStateError
from langgraph_celery.graph import _sync
from langgraph_celery.graph._local import Outcome
from langgraph_celery.graph._loop import Status
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import GraphResult, NodeOutput
from langgraph_celery.worker._following import (
    POLL_MAX,
    POLL_MIN,
    WAKE_FALLBACK,
    read_status,
    status_of,
)
from langgraph_celery.worker._store_calls import store as _store
from langgraph_celery.worker.client import CelerySource

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = ["RunHandle"]


class RunHandle:
    """A run started with ``CompiledGraph.start``; rebuild it anywhere with
    ``RunHandle.from_run_id(graph, run_id)`` or ``RunHandle(run_id, thread_id, graph)``."""

    def __init__(self, run_id: str, thread_id: str, graph: CompiledGraph) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.graph = graph

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r}, thread_id={self.thread_id!r})"

    @classmethod
    def from_run_id(cls, graph: CompiledGraph, run_id: str) -> RunHandle:
        saver = graph._saver()
        thread_id = saver.thread_of_run(run_id)
        if thread_id is None and isinstance(saver, RunIndex):  # (pruned away: its record)
            record = saver.get_run(run_id)
            thread_id = record.thread_id if record is not None else None
        if thread_id is None:
            raise GraphStateError(f"no run {run_id!r} in {type(saver).__name__}")
        return cls(run_id, thread_id, graph)

    def _source(self) -> CelerySource:
        source = self.graph._source
        if not isinstance(source, CelerySource):
            raise GraphStateError("run handles need a graph compiled with a CeleryExecutor")
        return source

    def _latest_of_run(self) -> Checkpoint | None:
        return self._source().latest_of_run(self.thread_id, self.run_id)

    def _status(self) -> Status:
        """Where the run stands: one read when it is the thread's latest run (the usual case);
        the run index's record when ``prune`` removed all of the run's checkpoints."""
        runtime = self._source().runtime
        view = _store(lambda: runtime.saver.get_with_writes(self.thread_id))
        latest = view.checkpoint
        if latest is None:
            raise GraphStateError(f"thread {self.thread_id!r} was released or deleted")
        if latest.run_id == self.run_id:
            return status_of(view)
        mine = _store(self._latest_of_run)
        if mine is not None:
            return read_status(runtime, mine)
        saver = runtime.saver
        record = _store(lambda: saver.get_run(self.run_id)) if isinstance(saver, RunIndex) else None
        if record is None or record.thread_id != self.thread_id:
            raise GraphStateError(
                f"thread {self.thread_id!r} has no checkpoint of run {self.run_id} and no record "
                "of it: check the run id (RunHandle.from_run_id finds a run's thread)"
            )
        return Status(record.status, None)

    def status(self) -> str:
        """``running``, ``parked``, ``completed``, ``failed`` or ``cancelled``."""
        return self._status().status.value

    def _first_checkpoint(self) -> Checkpoint:
        saver = self.graph._saver()
        mine = [c for c in saver.list(self.thread_id) if c.run_id == self.run_id]
        if not mine:
            raise GraphStateError(
                f"thread {self.thread_id!r} has no checkpoint of run {self.run_id}"
            )
        return mine[-1]

    def stream(self, config: RunnableConfig | None = None) -> Iterator[NodeOutput]:
        """The run's outputs from its first step on, then live until it stops."""
        from langgraph_celery.graph.compiled import GraphStream

        config = (config or RunnableConfig()).with_changes(thread_id=self.thread_id)
        outcome = Outcome()
        return GraphStream(
            self._source().follow(self._first_checkpoint(), config, outcome), outcome
        )

    def wait(self, timeout: float | None = None) -> GraphResult:
        """Block until the run stops (completed, interrupted or failed); its result."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = POLL_MIN
        runtime = self._source().runtime
        # subscribed before the first read, so that a stop between the two is not missed
        subscription = runtime.executor.notifier.subscribe(self.thread_id, final=True)
        try:
            while True:
                status = self._status()
                if status.checkpoint is None:  # (pruned away: its record tells how it ended)
                    raise GraphStateError(
                        f"run {self.run_id} {status.status.value}; its checkpoints were pruned, "
                        "so its result is gone (prune(keep_last=N) keeps a thread's last N "
                        "checkpoints)"
                    )
                if status.terminal:
                    outcome = Outcome()
                    config = RunnableConfig(thread_id=self.thread_id)
                    _sync.run_sync(self._source()._settle(status, config, outcome))
                    return GraphResult.of(outcome.value)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    assert timeout is not None and status.checkpoint is not None
                    raise self._source().timed_out(status.checkpoint, timeout)
                if subscription is not None:
                    subscription.wait(min(WAKE_FALLBACK, left or WAKE_FALLBACK))
                else:
                    time.sleep(min(delay, left or delay))
                    delay = min(delay * 2, POLL_MAX)
        finally:
            if subscription is not None:
                subscription.close()

    def cancel(self) -> bool:
        """Stop the run at its current step (or where it is parked); True if this call
        cancelled it.

        Nodes already running finish, but no further step is dispatched: the next node task
        sees the mark on its parent checkpoint and stops.
        """
        return self._source().cancel(self.thread_id, self.run_id)
