"""The console in a real browser (Debian's Chromium, driven by playwright): listing, approving
with an edited update, cancelling, retrying a failed run, forking, live updates of a running
run, escaping (XSS), authentication and CSRF; and the newcomer's path from the README:
``langgraph-celery demo --park``, then ``langgraph-celery console langgraph_celery.demo``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import console_graphs
import pytest
from console_graphs import XSS, Graphs
from console_support import park, status_of, wait_for, wait_status

from langgraph_celery import RunnableConfig
from langgraph_celery.checkpoint import RunStatus, SqlSaver
from langgraph_celery.console import Catalog, ConsoleSettings, create_app
from langgraph_celery.console.server import Server

SCREENSHOTS_ENV = "LGC_CONSOLE_SCREENSHOTS"


@pytest.fixture(scope="module")
def server(catalog: Catalog) -> Iterator[Server]:
    with Server(create_app(catalog, ConsoleSettings(flower_url="http://127.0.0.1:5555"))) as s:
        yield s


class Watched:
    """A page, with what went wrong in it: script errors and dialogs other than confirms."""

    def __init__(self, context: Any, base: str) -> None:
        self.context, self.base = context, base
        self.page = context.new_page()
        self.errors: list[str] = []
        self.alerts: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

        def on_dialog(dialog: Any) -> None:
            if dialog.type != "confirm":
                self.alerts.append(dialog.message)
            dialog.accept()

        self.page.on("dialog", on_dialog)

    def go(self, path: str) -> Any:
        response = self.page.goto(self.base + path)
        return response


@pytest.fixture
def tab(browser: Any, server: Server) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    watched = Watched(context, server.url)
    yield watched
    context.close()
    assert watched.errors == [], watched.errors
    assert watched.alerts == [], watched.alerts


def values(graphs: Graphs, thread: str) -> dict[str, Any]:
    return dict(graphs.saver.get(thread).values)


def test_runs_are_listed_and_filtered(tab: Watched, graphs: Graphs) -> None:
    run_id, thread = park(graphs.letters, {"name": "Uma"})
    tab.go("/runs")
    row = tab.page.locator(f'tr[data-run="{run_id}"]')
    assert row.get_attribute("data-status") == "parked"
    assert thread in row.inner_text()
    tab.page.select_option("select[name=status]", "completed")
    tab.page.click("form.filters button")
    tab.page.wait_for_url("**/runs?*status=completed*")
    assert tab.page.locator(f'tr[data-run="{run_id}"]').count() == 0
    tab.page.select_option("select[name=status]", "parked")
    tab.page.select_option("select[name=graph]", "letters")
    tab.page.click("form.filters button")
    assert tab.page.locator(f'tr[data-run="{run_id}"]').count() == 1


def test_approve_with_an_edited_update(tab: Watched, graphs: Graphs) -> None:
    run_id, thread = park(graphs.letters, {"name": "Vic"})
    tab.go("/inbox")
    card = tab.page.locator(f"#run-{run_id}")
    assert "approve the letter?" in card.inner_text()
    assert "send to Vic?" in card.inner_text()
    editor = card.locator("textarea[name=update]")
    assert '"approved": true' in editor.input_value()  # resume_with
    editor.fill('{"approved": true, "note": "edited')
    assert "not valid JSON" in card.locator("[data-json-status]").inner_text()
    editor.fill('{"approved": true, "note": "edited in the browser"}')
    assert card.locator("[data-json-status]").inner_text() == "valid JSON object"
    card.locator("button[data-action=approve]").click()
    tab.page.wait_for_selector("[data-notice]")
    assert f"run {run_id} approved" in tab.page.locator("[data-notice]").inner_text()
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert values(graphs, thread)["note_seen"] == "edited in the browser"
    assert values(graphs, thread)["sent"] is True


def test_tab_moves_on_from_a_json_editor(tab: Watched, graphs: Graphs) -> None:
    """The keyboard is never trapped in an editor: Tab goes on to the next control (towards
    Approve) and leaves the update as it was."""
    run_id, _ = park(graphs.letters, {"name": "Tab"})
    tab.go("/inbox")
    card = tab.page.locator(f"#run-{run_id}")
    editor = card.locator("textarea[name=update]")
    before = editor.input_value()
    editor.focus()
    tab.page.keyboard.press("Tab")
    assert editor.input_value() == before
    focused = tab.page.evaluate("document.activeElement.getAttribute('name')")
    assert focused != "update"
    for _ in range(6):  # on, in page order, to the buttons
        if tab.page.evaluate("document.activeElement.dataset.action") == "approve":
            break
        tab.page.keyboard.press("Tab")
    assert tab.page.evaluate("document.activeElement.dataset.action") == "approve"


def test_a_long_value_leaves_the_history_readable(tab: Watched, graphs: Graphs) -> None:
    """A state value of tens of kilobytes does not squeeze the history's narrow columns: the
    Fork button stays on one line and the node names whole."""
    run_id, _ = park(graphs.letters, {"name": "L" * 60_000})
    tab.go(f"/runs/{run_id}")
    button = tab.page.locator("button[data-action=fork]").first
    box = button.bounding_box()
    assert box is not None and box["width"] > box["height"], box
    node = tab.page.locator("table.history code.node", has_text="draft").first
    node_box = node.bounding_box()
    assert node_box is not None and node_box["width"] > node_box["height"], node_box


def test_approve_with_the_form_of_a_pydantic_model(tab: Watched, graphs: Graphs) -> None:
    run_id, thread = park(graphs.refunds, {"name": "Wes"})
    tab.go("/inbox")
    card = tab.page.locator(f"#run-{run_id}")
    assert card.locator("input[name='field.amount']").input_value() == "1250"
    card.locator("input[name='field.amount']").fill("990")
    card.locator("input[name='field.approved']").check()
    card.locator("select[name='field.channel']").select_option("bank")
    card.locator("button[data-action=approve]").click()
    tab.page.wait_for_selector("[data-notice]")
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert values(graphs, thread)["refunded"] == 990
    assert values(graphs, thread)["channel"] == "bank"


def test_a_form_sent_back_with_errors_is_shown_and_never_sent_again(
    tab: Watched, graphs: Graphs
) -> None:
    """The page that answers a refused approval is the answer to a POST: a live change of the
    inbox flags it as stale instead of reloading it (which would send the form again), and
    the error is in view, with its field focused."""
    run_id, thread = park(graphs.refunds, {"name": "Eli"})
    posts: list[str] = []
    tab.page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    tab.go("/inbox")
    card = tab.page.locator(f"#run-{run_id}")
    card.locator("input[name='field.amount']").fill("")
    card.locator("button[data-action=approve]").click()
    tab.page.wait_for_selector("[data-form-failed]")
    assert (
        "was not resumed: the form has errors"
        in tab.page.locator("[data-form-failed]").inner_text()
    )
    failed = tab.page.locator(f"#run-{run_id} [data-form-error]")
    in_view = (
        "e => { const r = e.getBoundingClientRect(); "
        "return r.top >= 0 && r.bottom <= innerHeight; }"
    )
    assert failed.evaluate(in_view)
    assert tab.page.evaluate("document.activeElement.name") == "field.amount"
    park(graphs.letters, {"name": "Fin"})  # the inbox changes meanwhile
    tab.page.wait_for_selector("[data-stale]", state="visible", timeout=15000)
    assert len(posts) == 1
    assert tab.page.locator("[data-stale] a").get_attribute("href") == "/inbox"
    assert status_of(graphs, run_id) is RunStatus.PARKED
    assert "refunded" not in values(graphs, thread)


def test_cancel_a_parked_run(tab: Watched, graphs: Graphs) -> None:
    run_id, _ = park(graphs.letters, {"name": "Xia"})
    tab.go("/inbox")
    tab.page.locator(f"#run-{run_id} button[data-action=cancel]").click()
    tab.page.wait_for_selector("[data-notice]")
    assert "cancelled" in tab.page.locator("[data-notice]").inner_text()
    assert tab.page.locator(f"#run-{run_id}").count() == 0
    assert status_of(graphs, run_id) is RunStatus.CANCELLED
    # its thread shows the node it stopped before, in the cancelled run's colours
    tab.go(f"/runs/{run_id}")
    assert tab.page.locator('g.node.current.status-cancelled[data-node="approve"]').count() == 1
    assert tab.page.locator(".legend .swatch.current.status-cancelled").count() == 1
    assert "Cancelled before approve" in tab.page.locator(".now").inner_text()


def test_retry_a_failed_run(tab: Watched, graphs: Graphs) -> None:
    console_graphs.BROKEN.set()
    try:
        run_id, thread = park(graphs.flaky, {"name": "Yan"})
        wait_status(graphs, run_id, RunStatus.FAILED)
        tab.go(f"/runs/{run_id}")
        failure = tab.page.locator(".failure")
        assert "RuntimeError" in failure.inner_text()
        assert "postgresql://app:**@db/prod is down" in failure.inner_text()
        assert "hunter2" not in tab.page.content()
        assert tab.page.locator('g.node.current.status-failed[data-node="work"]').count() == 1
    finally:
        console_graphs.BROKEN.clear()
    tab.page.locator("button[data-action=retry]").click()
    tab.page.wait_for_selector("[data-notice]")  # (kept through the live reloads that follow)
    assert f"run {run_id} resumed" in tab.page.locator("[data-notice]").inner_text()
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert values(graphs, thread)["worked"] is True
    # the thread page follows the run: it shows the completed run without a manual reload
    tab.page.wait_for_selector(".now .badge.status-completed", timeout=15000)


def test_fork_from_a_checkpoint(tab: Watched, graphs: Graphs) -> None:
    run_id, thread = park(graphs.letters, {"name": "Zoe"})
    graphs.letters.invoke(
        console_graphs_resume({"approved": True}), RunnableConfig(thread_id=thread)
    )
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    draft = next(
        c for c in graphs.saver.list(thread) if c.node == "draft" and c.kind.value == "loop"
    )
    tab.go(f"/runs/{run_id}")
    rows_before = tab.page.locator("tr[data-checkpoint]").count()
    tab.page.locator(
        f'tr[data-checkpoint="{draft.checkpoint_id}"] button[data-action=fork]'
    ).click()
    tab.page.wait_for_selector("[data-notice]")
    assert "forked" in tab.page.locator("[data-notice]").inner_text()
    forked = graphs.saver.get(thread).run_id
    assert forked != run_id
    wait_status(graphs, forked, RunStatus.PARKED)
    tab.go(f"/runs/{forked}")
    assert tab.page.locator("tr[data-checkpoint]").count() > rows_before
    assert tab.page.locator('g.node.current.status-parked[data-node="approve"]').count() == 1
    # the fork's branch has not been through `send` (the first run's branch has)
    assert tab.page.locator('g.node.visited[data-node="draft"]').count() == 1
    assert tab.page.locator('g.node.visited[data-node="send"]').count() == 0


def console_graphs_resume(update: dict[str, Any]) -> Any:
    from langgraph_celery import GraphInput

    return GraphInput.resume(update)


def test_a_running_run_updates_live(tab: Watched, graphs: Graphs) -> None:
    console_graphs.HOLDING.clear()
    console_graphs.RELEASE.clear()
    handle = graphs.slow.start({}, RunnableConfig(thread_id=f"live-{time.time_ns()}"))
    try:
        assert console_graphs.HOLDING.wait(30)
        tab.go("/runs?graph=slow")
        row = tab.page.wait_for_selector(f'tr[data-run="{handle.run_id}"][data-status="running"]')
        assert row is not None and "wait" in row.inner_text()  # its node now, not its first
        tab.page.evaluate("window.__same_page = true")
    finally:
        console_graphs.RELEASE.set()
    tab.page.wait_for_selector(
        f'tr[data-run="{handle.run_id}"][data-status="completed"]', timeout=20000
    )
    assert tab.page.evaluate("window.__same_page") is True  # updated in place, not reloaded
    assert tab.page.locator(".live.on").count() == 1
    console_graphs.RELEASE.clear()


def test_state_with_html_never_runs_in_the_page(tab: Watched, graphs: Graphs) -> None:
    run_id, thread = park(graphs.xss, {"note": XSS}, thread=f"t-{XSS}")
    for path in ("/inbox", "/runs", "/graphs", f"/runs/{run_id}"):
        tab.go(path)
        tab.page.wait_for_load_state("load")
        assert tab.page.locator("img").count() == 0, path
        assert tab.page.evaluate("window.__xss") is None, path
    # the thread page shows the payload as text
    assert "<img src=x onerror=" in tab.page.locator("[data-state]").inner_text()
    assert thread in tab.page.locator("h1").inner_text()


def test_basic_auth_and_csrf_in_the_browser(browser: Any, catalog: Catalog, graphs: Graphs) -> None:
    run_id, _ = park(graphs.letters, {"name": "Abe"})
    settings = ConsoleSettings(basic_auth="admin:pa55-word")
    with (
        Server(create_app(catalog, settings)) as guarded,
        Server(_attacker(guarded.url, run_id)) as evil,
    ):
        anonymous = browser.new_context()
        # (the browser itself gives up on a 401 without credentials to offer)
        refused = anonymous.request.get(guarded.url + "/inbox")
        assert refused.status == 401 and "Basic" in refused.headers["www-authenticate"]
        anonymous.close()
        context = browser.new_context(
            http_credentials={"username": "admin", "password": "pa55-word"}
        )
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        assert page.goto(guarded.url + "/inbox").status == 200
        # a page of another site posts a form to the console, with the user's credentials
        page.goto(evil.url + "/")
        page.wait_for_load_state("load")
        page.wait_for_timeout(500)
        assert status_of(graphs, run_id) is RunStatus.PARKED
        page.goto(guarded.url + "/inbox")
        page.locator(f"#run-{run_id} button[data-action=cancel]").click()
        wait_status(graphs, run_id, RunStatus.CANCELLED)
        context.close()


def _attacker(target: str, run_id: str) -> Any:
    """An app serving a page that submits a cancel form to ``target`` when it loads."""
    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    html = (
        f'<form id="f" method="post" action="{target}/actions/cancel">'
        f'<input name="run_id" value="{run_id}"></form>'
        "<script>document.getElementById('f').submit()</script>"
    )

    attacker = FastAPI()

    @attacker.get("/")
    async def page() -> HTMLResponse:
        return HTMLResponse(html)

    return attacker


def test_a_token_opens_the_console_once(browser: Any, catalog: Catalog) -> None:
    with Server(create_app(catalog, ConsoleSettings(token="tok-abcdef123456"))) as guarded:
        context = browser.new_context()
        page = context.new_page()
        assert page.goto(guarded.url + "/runs").status == 401
        assert page.goto(guarded.url + "/runs?token=tok-abcdef123456").status == 200
        assert page.url == guarded.url + "/runs"  # the token left the address bar
        assert page.goto(guarded.url + "/graphs").status == 200
        context.close()


def test_screenshots_of_the_main_pages(tab: Watched, graphs: Graphs, tmp_path: Path) -> None:
    run_id, _ = park(graphs.refunds, {"name": "Bea"})
    park(graphs.letters, {"name": "Cal"})
    where = Path(os.environ.get(SCREENSHOTS_ENV) or tmp_path)
    for name, path in (
        ("console-inbox", "/inbox"),
        ("console-runs", "/runs"),
        ("console-thread", f"/runs/{run_id}"),
        ("console-graphs", "/graphs"),
    ):
        tab.go(path)
        tab.page.wait_for_load_state("load")
        shot = where / f"{name}.png"
        tab.page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


# -- the newcomer's path --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_demo_parked_by_one_process_is_approved_in_the_browser(
    browser: Any, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LGC_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    cli = [sys.executable, "-m", "langgraph_celery.cli"]
    parked = subprocess.run(
        [*cli, "demo", "--park"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert parked.returncode == 0, parked.stderr
    assert "parked at node 'approve'" in parked.stdout
    port = _free_port()
    console = subprocess.Popen(
        [*cli, "console", "langgraph_celery.demo", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    saver = SqlSaver(f"sqlite:///{tmp_path / 'langgraph-celery-demo.sqlite'}")
    try:
        assert console.stdout is not None
        banner = console.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in banner, banner
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(url), "the console to answer")
        context = browser.new_context()
        page = context.new_page()
        page.goto(url + "/")
        card = page.locator("article.parked")
        assert card.count() == 1
        assert "a human approves the draft" in card.inner_text()
        run_id = card.get_attribute("data-run")
        card.locator("button[data-action=approve]").click()
        page.wait_for_selector("[data-notice]")
        wait_for(
            lambda: saver.get_run(run_id).status is RunStatus.COMPLETED, "the demo run to complete"
        )
        thread = saver.get_run(run_id).thread_id
        assert saver.get(thread).values["status"] == "sent"
        context.close()
    finally:
        console.terminate()
        console.wait(15)
        saver.dispose()


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url + "/api/graphs", timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False
