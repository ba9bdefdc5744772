"""The console's JSON API (``/api/...``); docs/console.md describes it, ``/api/openapi.json``
is its OpenAPI document.  State-changing calls need the CSRF token (see :mod:`.security`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.console.context import Console
from langgraph_celery.console.diagram import render_svg
from langgraph_celery.console.models import (
    ActionOut,
    ForkIn,
    FormFieldOut,
    GraphOut,
    ResumeIn,
    RunOut,
    RunPageOut,
    SessionOut,
    ThreadOut,
)
from langgraph_celery.console.runs import RunView, list_runs, read_run
from langgraph_celery.console.steering import ActionResult
from langgraph_celery.console.threads import THREAD_PAGE, read_thread

__all__ = ["console_of", "router"]

router = APIRouter(prefix="/api", tags=["console"])


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


ConsoleDep = Annotated[Console, Depends(console_of)]


def _run_out(console: Console, run: RunView) -> RunOut:
    form = console.form_for(run) if run.parking is not None else None
    out = RunOut.of(run, form)
    if out.interruption is not None and form is not None and form.model is not None:
        out.interruption.form_fields = [
            FormFieldOut(
                name=f.name,
                label=f.label,
                kind=f.kind,
                required=f.required,
                value=f.value,
                choices=list(f.choices),
                description=f.description,
            )
            for f in form.fields
        ]
    return out


def _action(result: ActionResult) -> ActionOut:
    return ActionOut(
        action=result.action,
        thread_id=result.thread_id,
        run_id=result.run_id,
        message=result.message,
    )


@router.get("/session", response_model=SessionOut, summary="the CSRF token of this session")
async def session(request: Request) -> SessionOut:
    return SessionOut(csrf_token=request.state.csrf_token)


@router.get("/graphs", response_model=list[GraphOut], summary="the graphs served")
async def graphs(console: ConsoleDep) -> list[GraphOut]:
    return [GraphOut.of(entry) for entry in console.catalog]


@router.get("/diagram.svg", summary="a graph's diagram as SVG", response_class=Response)
async def diagram(
    console: ConsoleDep,
    graph: str = "",
    highlight: str | None = None,
    status: RunStatus | None = None,
) -> Response:
    entry = console.catalog.get(graph)
    svg = render_svg(
        entry.graph.spec,
        highlight=highlight,
        status=status.value if status else None,
        title=entry.label,
    )
    return Response(svg, media_type="image/svg+xml")


@router.get("/runs", response_model=RunPageOut, summary="runs, newest first, a page at a time")
async def runs(
    console: ConsoleDep,
    graph: str | None = None,
    status: RunStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: str | None = None,
) -> RunPageOut:
    page = await console.call(
        lambda: list_runs(console.catalog, graph, status, limit=limit, before=before)
    )
    return RunPageOut(runs=[RunOut.of(run) for run in page.runs], next_before=page.next_before)


@router.get("/inbox", response_model=list[RunOut], summary="parked runs, with their forms")
async def inbox(console: ConsoleDep, graph: str | None = None) -> list[RunOut]:
    page = await console.call(
        lambda: list_runs(console.catalog, graph, RunStatus.PARKED, limit=200)
    )
    return [_run_out(console, run) for run in page.runs]


@router.get("/runs/{run_id}", response_model=RunOut, summary="one run")
async def run(console: ConsoleDep, run_id: str) -> RunOut:
    view = await console.call(read_run, console.catalog, run_id)
    return _run_out(console, view)


@router.post("/runs/{run_id}/approve", response_model=ActionOut, summary="resume a parked run")
async def approve(console: ConsoleDep, run_id: str, body: ResumeIn) -> ActionOut:
    def act() -> ActionResult:
        view = read_run(console.catalog, run_id)
        return console.steering.approve(run_id, console.checked_update(view, body.update))

    return _action(await console.call(act))


@router.post(
    "/runs/{run_id}/reject",
    response_model=ActionOut,
    summary="resume a parked run with its rejection (reject_with) or the given update",
)
async def reject(console: ConsoleDep, run_id: str, body: ResumeIn) -> ActionOut:
    return _action(await console.call(console.steering.reject, run_id, body.update))


@router.post(
    "/runs/{run_id}/retry", response_model=ActionOut, summary="resume a failed or cancelled run"
)
async def retry(console: ConsoleDep, run_id: str, body: ResumeIn) -> ActionOut:
    return _action(await console.call(console.steering.retry, run_id, body.update))


@router.post("/runs/{run_id}/cancel", response_model=ActionOut, summary="cancel a run")
async def cancel(console: ConsoleDep, run_id: str) -> ActionOut:
    return _action(await console.call(console.steering.cancel, run_id))


@router.post("/fork", response_model=ActionOut, summary="run a thread again from a checkpoint")
async def fork(console: ConsoleDep, body: ForkIn) -> ActionOut:
    result = await console.call(
        console.steering.fork, body.thread_id, body.checkpoint_id, body.graph_id
    )
    return _action(result)


@router.get("/threads/{thread_id:path}", response_model=ThreadOut, summary="a thread's history")
async def thread(
    console: ConsoleDep,
    thread_id: str,
    graph: str | None = None,
    before: Annotated[
        str | None, Query(description="a checkpoint id: the page of those stored before it")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = THREAD_PAGE,
) -> ThreadOut:
    view = await console.call(
        lambda: read_thread(console.catalog, thread_id, graph, before=before, limit=limit)
    )
    return ThreadOut.of(view, console.settings.flower_url)
