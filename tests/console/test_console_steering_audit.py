"""What an audit of the console's steering flows found: two clicks on one parked run (a double
submit, two tabs) both resumed an in-process run, so its next node ran more than once and the
losers were told of a checkpoint conflict instead of what became of the run."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from console_graphs import Graphs
from console_support import park, status_of, wait_for
from fastapi.testclient import TestClient

from langgraph_celery.checkpoint import RunStatus
from langgraph_celery.console import Catalog, ConsoleSettings, create_app
from langgraph_celery.console.server import Server

BASE = "http://127.0.0.1:8765"
CLICKS = 6


@pytest.fixture
def client(catalog: Catalog) -> Iterator[TestClient]:
    with TestClient(create_app(catalog, ConsoleSettings()), base_url=BASE) as client:
        client.headers["x-csrf-token"] = client.get("/api/session").json()["csrf_token"]
        yield client


def notice(response: Any) -> str:
    raw = response.cookies.get("lgc_console_notice") or ""
    return base64.urlsafe_b64decode(raw.encode()).decode()


def approve_at_once(client: TestClient, run_id: str) -> list[str]:
    """``CLICKS`` approvals of ``run_id`` sent together; the notices they answer with."""
    token = client.headers["x-csrf-token"]
    notices: list[str] = []
    ready = threading.Barrier(CLICKS)

    def click(n: int) -> None:
        data = {
            "csrf_token": token,
            "back": "/inbox",
            "run_id": run_id,
            "update": f'{{"approved": true, "click": {n}}}',
        }
        ready.wait()
        response = client.post("/actions/approve", data=data, follow_redirects=False)
        assert response.status_code == 303, response.text
        notices.append(notice(response))

    clicks = [threading.Thread(target=click, args=(n,)) for n in range(CLICKS)]
    for thread in clicks:
        thread.start()
    for thread in clicks:
        thread.join(60)
    return notices


@pytest.mark.parametrize("name", ["local", "letters"])
def test_two_clicks_on_one_parked_run_resume_it_once(
    client: TestClient, graphs: Graphs, name: str
) -> None:
    graph = getattr(graphs, name)
    run_id, thread = park(graph, {"name": "Ann"})

    notices = approve_at_once(client, run_id)

    won = [text for text in notices if text.startswith("ok:")]
    lost = [text for text in notices if text.startswith("error:")]
    assert len(won) == 1 and len(lost) == CLICKS - 1, notices
    for text in lost:  # each loser is told what became of the run, not of a store conflict
        assert f"cannot approve run {run_id}: it " in text, text
        assert "another writer" not in text and "busy" not in text, text
    wait_for(lambda: status_of(graphs, run_id) is RunStatus.COMPLETED, "the run to complete")
    history = [(c.step, c.node) for c in graphs.saver.list(thread)]
    # the resume stored its steps once: no node ran again for a second click
    assert [node for _, node in history].count("send") == 1, history
    assert len({step for step, _ in history}) == len(history), history
    assert dict(graphs.saver.get(thread).values)["sent"] is True


@pytest.fixture(scope="module")
def server(catalog: Catalog) -> Iterator[Server]:
    with Server(create_app(catalog, ConsoleSettings())) as s:
        yield s


def test_two_tabs_approving_one_run_one_wins_the_other_is_told(
    browser: Any, server: Server, graphs: Graphs
) -> None:
    run_id, _ = park(graphs.local, {"name": "Bo"})
    context = browser.new_context(viewport={"width": 400, "height": 900})
    errors: list[str] = []
    try:
        tabs = [context.new_page(), context.new_page()]
        for tab in tabs:
            tab.on("pageerror", lambda error: errors.append(str(error)))
            tab.goto(f"{server.url}/inbox#run-{run_id}")
        first, second = (tab.locator(f"#run-{run_id}") for tab in tabs)
        first.get_by_role("button", name="Approve").click()
        tabs[0].wait_for_url("**/inbox*")
        assert "approved" in tabs[0].locator("[data-notice]").inner_text()
        second.get_by_role("button", name="Approve").click()  # (a stale page: the run moved on)
        text = tabs[1].locator("[data-notice]").inner_text()
        assert f"cannot approve run {run_id}: it completed" in text, text
        assert tabs[1].locator(f"#run-{run_id}").count() == 0
    finally:
        context.close()
    assert errors == []
