"""The console's HTML pages and the form posts behind their buttons.

Pages: ``/inbox`` (parked runs and their forms), ``/runs`` (by graph and status, live),
``/graphs`` (diagrams), ``/threads/<thread id>`` (history, diagram, Retry, Fork).  Buttons post
forms to ``/actions/<action>``, which redirect back with a notice (kept for one page view in a
cookie); an approval whose update does not parse shows the inbox again with the text kept.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import jinja2
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.console.api import ConsoleDep
from langgraph_celery.console.catalog import CatalogError
from langgraph_celery.console.context import Console, UpdateError, parse_update
from langgraph_celery.console.diagram import render_svg
from langgraph_celery.console.diff import compact, pretty, pretty_shown
from langgraph_celery.console.forms import ApprovalForm, parse_form
from langgraph_celery.console.models import flower_link
from langgraph_celery.console.redact import redact
from langgraph_celery.console.runs import RunView, list_runs, read_run
from langgraph_celery.console.steering import ActionResult, SteeringError, reject_update
from langgraph_celery.console.threads import THREAD_PAGE, read_thread

__all__ = ["router", "templates"]

router = APIRouter(include_in_schema=False)
NOTICE_COOKIE = "lgc_console_notice"
ACTIONS = ("approve", "reject", "cancel", "retry", "fork")
#: The most parked runs the inbox shows (the newest; the runs page lists them all).
INBOX_LIMIT = 200
#: The most characters of a parked run's state its inbox card shows (its thread page shows more,
#: the API all): two hundred cards of large states would otherwise make a page of many megabytes.
INBOX_STATE_CHARS = 10_000


def _ago(value: datetime | None) -> str:
    if value is None:
        return ""
    seconds = (datetime.now(UTC) - value).total_seconds()
    future = seconds < 0
    seconds = abs(seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            amount = f"{seconds / size:.0f} {unit}"
            break
    else:
        amount = f"{seconds:.0f} s"
    return f"in {amount}" if future else f"{amount} ago"


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,  # every value is escaped unless a template says otherwise
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        pretty=pretty_shown,
        compact=compact,
        ago=_ago,
        when=_when,
        path=lambda v: quote(str(v), safe=""),
    )
    # a deadline the beat reaper has not acted on yet
    env.tests["past"] = lambda v: v is not None and v <= datetime.now(UTC)
    return env


templates = Jinja2Templates(env=_environment())


def _page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    console: Console = request.app.state.console
    notice = _take_notice(request)
    context.setdefault("error", None)
    response = templates.TemplateResponse(
        request,
        name,
        {
            "csrf_token": request.state.csrf_token,
            "graphs": list(console.catalog),
            "flower_url": console.settings.flower_url,
            "notice": notice,
            "nav": name.split(".")[0],
            **context,
        },
        status_code=status_code,
    )
    if notice is not None:
        response.delete_cookie(NOTICE_COOKIE, path="/")
    return response


def _take_notice(request: Request) -> dict[str, str] | None:
    raw = request.cookies.get(NOTICE_COOKIE)
    if not raw:
        return None
    try:
        kind, _, text = base64.urlsafe_b64decode(raw.encode()).decode().partition(":")
    except ValueError:
        return None
    return {"kind": "error" if kind == "error" else "ok", "text": text}


def _redirect(back: str, kind: str, text: str) -> RedirectResponse:
    response = RedirectResponse(back, status_code=303)
    value = base64.urlsafe_b64encode(f"{kind}:{text[:1500]}".encode()).decode()
    response.set_cookie(NOTICE_COOKIE, value, path="/", httponly=True, samesite="strict")
    return response


def _safe_back(back: str | None) -> str:
    """A local path to go back to (never another site)."""
    if not back or not back.startswith("/") or back.startswith("//") or "\\" in back:
        return "/inbox"
    return back


@router.get("/")
async def home() -> RedirectResponse:
    return RedirectResponse("/inbox", status_code=303)


def _inbox_items(
    console: Console, runs: list[RunView], forms: dict[str, ApprovalForm] | None = None
) -> list[dict[str, Any]]:
    items = []
    for run in runs:
        form = (forms or {}).get(run.run_id) or console.form_for(run)
        suggested = run.metadata.get("resume_with")
        hidden = ("resume_with", "reject_with", "expires_at", "schema")
        shown = {k: v for k, v in run.metadata.items() if k not in hidden}
        checkpoint = run.checkpoint  # (read with the run: not again)
        items.append(
            {
                "run": run,
                "form": form,
                "metadata": shown,
                "draft": pretty(suggested if isinstance(suggested, dict) else {}),
                "reject_with": reject_update(run.metadata),
                "state": pretty_shown(
                    checkpoint.values if checkpoint is not None else {}, INBOX_STATE_CHARS
                ),
                "svg": Markup(
                    render_svg(
                        run.entry.graph.spec,
                        highlight=run.diagram_node,
                        status="parked",
                        ident=f"i{run.run_id[:12]}",
                        title=run.entry.label,
                    )
                ),
            }
        )
    return items


async def _inbox(
    request: Request,
    console: Console,
    graph: str | None,
    status_code: int = 200,
    drafts: dict[str, str] | None = None,
    forms: dict[str, ApprovalForm] | None = None,
    error: dict[str, str] | None = None,
) -> HTMLResponse:
    page = await console.call(
        lambda: list_runs(console.catalog, graph, RunStatus.PARKED, limit=INBOX_LIMIT)
    )
    items = await console.call(_inbox_items, console, page.runs, forms)
    for item in items:
        if drafts and item["run"].run_id in drafts:
            item["draft"] = drafts[item["run"].run_id]
    return _page(
        request,
        "inbox.html",
        status_code,
        items=items,
        more=page.next_before is not None,
        graph=graph,
        errors=error or {},
        indexed=bool(console.catalog.indexed()),
    )


@router.get("/inbox", response_class=HTMLResponse)
async def inbox(request: Request, console: ConsoleDep, graph: str | None = None) -> Response:
    return await _inbox(request, console, graph or None)


@router.get("/runs", response_class=HTMLResponse)
async def runs(
    request: Request,
    console: ConsoleDep,
    graph: str | None = None,
    status: str | None = None,
    before: str | None = None,
) -> Response:
    statuses = [s.value for s in RunStatus]
    if status and status not in statuses:  # (as an unknown graph: refused, not ignored)
        raise CatalogError(f"no run status {status!r} (statuses: {', '.join(statuses)})")
    chosen = RunStatus(status) if status else None
    graph = graph or None
    page = await console.call(
        lambda: list_runs(console.catalog, graph, chosen, limit=50, before=before, detail=False)
    )
    return _page(
        request,
        "runs.html",
        runs=page.runs,
        next_before=page.next_before,
        before=before,
        graph=graph,
        status=chosen.value if chosen else None,
        statuses=statuses,
    )


@router.get("/runs/{run_id}")
async def run(console: ConsoleDep, run_id: str) -> RedirectResponse:
    view = await console.call(read_run, console.catalog, run_id)
    location = f"/threads/{quote(view.thread_id, safe='')}?graph={quote(view.entry.key)}"
    return RedirectResponse(f"{location}#run-{view.run_id}", status_code=303)


@router.get("/graphs", response_class=HTMLResponse)
async def graphs(request: Request, console: ConsoleDep) -> Response:
    drawn = [
        {
            "entry": entry,
            "svg": Markup(render_svg(entry.graph.spec, ident=f"g{n}", title=entry.label)),
            "mermaid": entry.graph.get_graph("mermaid").content,
        }
        for n, entry in enumerate(console.catalog)
    ]
    return _page(request, "graphs.html", drawn=drawn)


@router.get("/threads/{thread_id:path}", response_class=HTMLResponse)
async def thread(
    request: Request,
    console: ConsoleDep,
    thread_id: str,
    graph: str | None = None,
    before: str | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = THREAD_PAGE,
) -> Response:
    view = await console.call(
        lambda: read_thread(console.catalog, thread_id, graph, before=before or None, limit=limit)
    )
    current = view.current
    svg = render_svg(
        view.entry.graph.spec,
        highlight=current.diagram_node if current else None,
        status=current.status.value if current else None,
        visited=view.visited,
        ident="thread",
        title=view.entry.label,
    )
    flower = console.settings.flower_url
    links = {
        task.celery_id: flower_link(flower, task.celery_id)
        for row in view.checkpoints
        for task in row.tasks
        if task.celery_id
    }
    return _page(
        request,
        "thread.html",
        thread=view,
        current=current,
        svg=Markup(svg),
        links=links,
        state=pretty_shown(view.latest.values) if view.latest is not None else "{}",
        fingerprint=[
            view.latest.checkpoint_id if view.latest is not None else "",
            view.latest.run_id if view.latest is not None else "",
            current.status.value if current else "",
        ],
        before=before,
        limit=limit if limit != THREAD_PAGE else None,
        # (the id quoted again: the request's path has its %XX escapes decoded)
        back=f"/threads/{quote(thread_id, safe='')}"
        + (f"?{request.url.query}" if request.url.query else ""),
    )


# -- buttons --------------------------------------------------------------------------------------


@router.post("/actions/{action}")
async def act(request: Request, console: ConsoleDep, action: str) -> Response:
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    back = _safe_back(form.get("back"))
    run_id = form.get("run_id", "")
    if action not in ACTIONS:
        return _redirect(back, "error", f"unknown action {action!r}")
    try:
        result = await console.call(_carry_out, console, action, form, run_id)
    except _FormInvalid as invalid:
        return await _inbox(
            request,
            console,
            None,
            400,
            drafts={run_id: form.get("update", "")},
            forms={run_id: invalid.form} if invalid.form is not None else None,
            error={run_id: invalid.message},
        )
    except (SteeringError, CatalogError, ValueError) as error:
        return _redirect(back, "error", redact(str(error)))
    return _redirect(back, "ok", result.message)


class _FormInvalid(Exception):
    def __init__(self, message: str, form: ApprovalForm | None = None) -> None:
        super().__init__(message)
        self.message, self.form = message, form


def _carry_out(console: Console, action: str, form: dict[str, str], run_id: str) -> ActionResult:
    steering = console.steering
    if action == "cancel":
        return steering.cancel(run_id)
    if action == "fork":
        graph = form.get("graph") or None
        return steering.fork(form.get("thread_id", ""), form.get("checkpoint_id", ""), graph)
    if action == "retry":
        return steering.retry(run_id)
    if action == "reject":
        return steering.reject(run_id)
    run = read_run(console.catalog, run_id)
    approval = console.form_for(run)
    if approval.model is not None and form.get("mode") != "json":
        update, checked = parse_form(approval, form)
        if update is None:
            raise _FormInvalid("the form has errors: see the fields marked in red", checked)
        return steering.approve(run_id, update)
    try:
        update = parse_update(form.get("update"))
    except UpdateError as error:
        raise _FormInvalid(str(error)) from None
    try:
        checked_update = console.checked_update(run, update)
    except SteeringError as error:
        raise _FormInvalid(str(error)) from None
    return steering.approve(run_id, checked_update if update is not None else None)
