"""Live updates: server-sent events (``GET /api/events``).

The console reads the store every ``poll_interval`` seconds for each open page and sends an
event when what it read changed: ``runs`` (a page of runs, as ``GET /api/runs`` returns it) or,
with ``?thread=``, ``thread`` (the thread's latest checkpoint id, its run id and status).  Pages
re-render their table, or reload when nothing is being edited.  A comment line every
:data:`KEEP_ALIVE` seconds keeps proxies from closing a quiet stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.console.api import ConsoleDep
from langgraph_celery.console.models import RunOut, RunPageOut
from langgraph_celery.console.redact import redact
from langgraph_celery.console.runs import list_runs
from langgraph_celery.console.threads import thread_fingerprint

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["console"])

KEEP_ALIVE = 15.0


@router.get(
    "/events",
    summary="server-sent events: 'runs' (a page of runs) or, with ?thread=, 'thread'",
    response_class=StreamingResponse,
)
async def events(
    request: Request,
    console: ConsoleDep,
    graph: str | None = None,
    status: RunStatus | None = None,
    thread: str | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> StreamingResponse:
    interval = console.settings.poll_interval
    catalog = console.catalog

    def read() -> tuple[str, Any]:
        if thread is not None:
            return "thread", {"fingerprint": thread_fingerprint(catalog, thread, graph)}
        page = list_runs(catalog, graph, status, limit=limit, detail=False)
        out = RunPageOut(runs=[RunOut.of(run) for run in page.runs], next_before=page.next_before)
        return "runs", out.model_dump(mode="json")

    async def stream() -> AsyncIterator[str]:
        last = None
        quiet = 0.0
        yield "retry: 3000\n\n"
        while not await request.is_disconnected():
            try:
                name, payload = await console.call(read)
            except Exception as error:  # the store is down, the thread was deleted...
                name, payload = "error", {"detail": redact(f"{type(error).__name__}: {error}")}
            text = json.dumps(payload, separators=(",", ":"))
            if text != last:
                last, quiet = text, 0.0
                yield f"event: {name}\ndata: {text}\n\n"
            elif quiet >= KEEP_ALIVE:
                quiet = 0.0
                yield ": keep-alive\n\n"
            await asyncio.sleep(interval)
            quiet += interval

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
