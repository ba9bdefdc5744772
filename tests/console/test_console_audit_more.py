"""What a user's walk through the console (SPEC §11) found: nesting that broke the pages, input
the editor refuses but the server took, runs lost between pages, thread ids with escapes, buttons
that could not work, and a node the CLI shows but the console did not."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from console_graphs import Graphs
from console_support import park, status_of, thread_id, wait_for
from fastapi.testclient import TestClient

from langgraph_celery import GraphInput, RunnableConfig
from langgraph_celery._cli_run_view import latest_of_run, run_view
from langgraph_celery.checkpoint import RunStatus
from langgraph_celery.console import Catalog, ConsoleSettings, create_app
from langgraph_celery.console.server import Server

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def client(catalog: Catalog) -> Iterator[TestClient]:
    with TestClient(create_app(catalog, ConsoleSettings()), base_url=BASE) as client:
        client.headers["x-csrf-token"] = client.get("/api/session").json()["csrf_token"]
        yield client


@pytest.fixture(scope="module")
def server(catalog: Catalog) -> Iterator[Server]:
    with Server(create_app(catalog, ConsoleSettings())) as s:
        yield s


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.on("dialog", lambda dialog: dialog.accept())
    yield tab
    context.close()


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def form_post(client: TestClient, action: str, **fields: str) -> Any:
    data = {"csrf_token": client.headers["x-csrf-token"], "back": "/inbox", **fields}
    return client.post(f"/actions/{action}", data=data, follow_redirects=False)


# -- values the store keeps but the pages cannot show ---------------------------------------------


def test_a_deeply_nested_state_leaves_the_inbox_and_the_thread_readable(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, thread = park(graphs.letters, {"name": "Deep", "tree": nested(300)})
    try:
        assert status_of(graphs, run_id) is RunStatus.PARKED
        page = {"accept": "text/html"}
        assert client.get("/inbox", headers=page).status_code == 200
        assert client.get(f"/threads/{thread}?graph=letters", headers=page).status_code == 200
        assert client.get(f"/api/threads/{thread}?graph=letters").status_code == 200
    finally:  # (the run would break the inbox of the other tests)
        client.post(f"/api/runs/{run_id}/cancel")


def test_a_deeply_nested_update_is_refused_with_a_message(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, _ = park(graphs.letters, {"name": "Nest"})
    update = '{"a":' * 5000 + "1" + "}" * 5000
    reply = form_post(client, "approve", run_id=run_id, update=update)
    assert reply.status_code == 400, reply.status_code
    assert "data-form-error" in reply.text
    assert status_of(graphs, run_id) is RunStatus.PARKED


def test_an_update_the_editor_calls_invalid_json_is_not_sent_on(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, _ = park(graphs.letters, {"name": "Nan"})
    reply = form_post(client, "approve", run_id=run_id, update='{"approved": NaN}')
    assert reply.status_code == 400, reply.status_code
    assert "not valid JSON" in reply.text
    assert status_of(graphs, run_id) is RunStatus.PARKED


# -- runs and threads ----------------------------------------------------------------------------


def test_runs_pushed_off_the_first_page_live_are_on_the_next(
    page: Any, server: Server, graphs: Graphs
) -> None:
    graph = graphs.local
    older = [_completed_local_run(graph, f"old{n}") for n in range(51)]
    page.goto(server.url + "/runs?graph=local&status=completed")
    page.wait_for_selector(".live.on")
    newer = [_completed_local_run(graph, f"new{n}") for n in range(3)]
    page.wait_for_selector(f'tr[data-run="{newer[-1]}"]', timeout=15000)
    shown = set(page.locator("tr[data-run]").evaluate_all("rows => rows.map(r => r.dataset.run)"))
    page.click("[data-older]")
    page.wait_for_load_state("load")
    shown |= set(page.locator("tr[data-run]").evaluate_all("rows => rows.map(r => r.dataset.run)"))
    assert [run for run in older + newer if run not in shown] == []


def _completed_local_run(graph: Any, name: str) -> str:
    """A run of the in-process graph, parked before ``send`` then resumed to its end."""
    config = RunnableConfig(thread_id=thread_id("page"))
    graph.invoke({"name": name}, config)
    run_id = graph.checkpoint_saver.get(config.thread_id).run_id
    graph.invoke(GraphInput.resume({}), config)
    return str(run_id)


def test_a_button_on_a_thread_whose_id_holds_an_escape_comes_back_to_it(
    page: Any, server: Server, graphs: Graphs
) -> None:
    run_id, thread = park(graphs.letters, {"name": "Esc"}, thread=f"%41bc-{time.time_ns()}")
    page.goto(server.url + f"/runs/{run_id}")
    assert thread in page.locator("h1").inner_text()
    page.locator("button[data-action=cancel]").click()
    page.wait_for_load_state("load")
    wait_for(lambda: status_of(graphs, run_id) is RunStatus.CANCELLED, "the cancel")
    assert thread in page.locator("h1").inner_text(), page.locator("main").inner_text()[:200]


def test_a_superseded_parked_run_offers_no_approval_that_must_fail(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, thread = park(graphs.letters, {"name": "Old"})
    first = list(graphs.saver.list(thread))[-1]
    forked = client.post(
        "/api/fork",
        json={"thread_id": thread, "checkpoint_id": first.checkpoint_id, "graph_id": "letters"},
    ).json()["run_id"]
    wait_for(lambda: status_of(graphs, forked) is RunStatus.PARKED, "the fork to park")
    assert client.get(f"/api/runs/{run_id}").json()["resumable"] is False
    html = client.get("/inbox", headers={"accept": "text/html"}).text
    card = re.search(rf'<article[^>]*id="run-{run_id}".*?</article>', html, re.S)
    assert card is None or 'data-action="approve"' not in card.group(0)


def test_a_cancelled_run_shows_the_node_the_cli_shows(client: TestClient, graphs: Graphs) -> None:
    run_id, thread = park(graphs.letters, {"name": "Can"})
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 200
    wait_for(lambda: status_of(graphs, run_id) is RunStatus.CANCELLED, "the cancel")
    record = graphs.saver.get_run(run_id)
    cli = run_view(latest_of_run(graphs.saver, thread, run_id, history=True), record)
    assert cli.node == "approve"
    assert client.get(f"/api/runs/{run_id}").json()["node"] == cli.node


def test_a_deadline_the_reaper_has_not_acted_on_reads_as_passed() -> None:
    from datetime import UTC, datetime, timedelta

    from langgraph_celery.console.pages import templates

    line = templates.env.from_string(
        "{% if d is past %}deadline passed{% else %}expires{% endif %} ({{ d|ago }})"
    )
    now = datetime.now(UTC)
    assert line.render(d=now - timedelta(minutes=5)) == "deadline passed (5 min ago)"
    assert line.render(d=now + timedelta(hours=2, seconds=5)) == "expires (in 2 h)"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('{"update": {"approved": NaN}}', "holds NaN, which JSON does not have"),
        ('{"update": {"approved": -Infinity}}', "holds Infinity"),
        ('{"update": ' + '{"a":' * 300 + "1" + "}" * 300 + "}", "more than 100 levels deep"),
    ],
)
def test_the_api_takes_strict_json_as_the_editor_does(
    client: TestClient, graphs: Graphs, body: str, says: str
) -> None:
    run_id, _ = park(graphs.letters, {"name": "Strict"})
    reply = client.post(
        f"/api/runs/{run_id}/approve", content=body, headers={"content-type": "application/json"}
    )
    assert reply.status_code == 422, reply.text
    assert "not valid JSON" in reply.text and says in reply.text
    assert status_of(graphs, run_id) is RunStatus.PARKED


def test_on_a_phone_the_runs_and_thread_pages_do_not_scroll_sideways(
    browser: Any, server: Server, client: TestClient, graphs: Graphs
) -> None:
    run_id, thread = park(graphs.letters, {"name": "Narrow " * 40})
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        tab = context.new_page()
        for path in ("/runs", f"/threads/{thread}?graph=letters", "/inbox"):
            tab.goto(server.url + path)
            width = tab.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (path, width)
    finally:
        context.close()
        client.post(f"/api/runs/{run_id}/cancel")  # (a parked run would change the inbox)
