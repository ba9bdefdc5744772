"""Starting graphs from ``celery beat`` on an interval or a crontab.

``executor.schedule_run(graph, "nightly-report", crontab(hour=3, minute=0), input={...})`` adds a
beat entry that sends the ``langgraph_celery.start`` task; the worker that receives it starts a
run of the graph on a new thread (``<name>-<timestamp>``), or on ``thread_id`` when one is given
(a thread that is still busy with the previous run is skipped, and the skip is logged).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langgraph_celery.errors import GraphStateError
from langgraph_celery.graph._sync import run_sync
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import GraphInput
from langgraph_celery.worker.client import CelerySource

if TYPE_CHECKING:
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = ["start_scheduled"]

log = logging.getLogger("langgraph_celery.beat")


def start_scheduled(
    runtime: GraphRuntime, name: str, input_data: Any, thread_id: str | None
) -> dict[str, Any]:
    """The body of the start task: start one run; returns its ids (or why it was skipped)."""
    thread = thread_id or f"{name}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}"
    values = runtime.serializer.from_jsonable(input_data)
    # (a new run, even on a thread whose last run is parked)
    graph_input = GraphInput.no_args() if values is None else GraphInput.of(values)
    try:
        checkpoint, _ = run_sync(
            CelerySource(runtime).begin(graph_input, RunnableConfig(thread_id=thread))
        )
    except GraphStateError as error:
        log.warning("scheduled run %r skipped: %s", name, error)
        return {"status": "skipped", "thread_id": thread, "reason": str(error)}
    return {"status": "started", "thread_id": thread, "run_id": checkpoint.run_id}
