"""A thread is shown a page of checkpoints at a time (the page and the API alike), reading only
that page: a thread of many steps over a large state stays quick to open."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from console_graphs import Graphs
from console_support import thread_id
from fastapi.testclient import TestClient

from langgraph_celery import GraphInput, RunnableConfig
from langgraph_celery.console import Catalog, ConsoleSettings, create_app

BASE = "http://127.0.0.1:8765"
PAGE = {"accept": "text/html"}


@pytest.fixture
def client(catalog: Catalog) -> Iterator[TestClient]:
    with TestClient(create_app(catalog, ConsoleSettings()), base_url=BASE) as client:
        client.headers["x-csrf-token"] = client.get("/api/session").json()["csrf_token"]
        yield client


def three_runs(graph: Any) -> str:
    """A thread of the in-process graph with three runs, each parked then resumed to its end."""
    thread = thread_id("paged")
    config = RunnableConfig(thread_id=thread)
    for n in range(3):
        graph.invoke({"name": f"n{n}"}, config)
        graph.invoke(GraphInput.resume({}), config)
    return thread


def test_the_pages_of_a_thread_hold_each_checkpoint_once(
    client: TestClient, graphs: Graphs
) -> None:
    thread = three_runs(graphs.local)
    every = [c.checkpoint_id for c in graphs.saver.list(thread)]
    assert len(every) > 4
    seen: list[str] = []
    before = None
    pages = 0
    while True:
        url = f"/api/threads/{thread}?graph=local&limit=2" + (f"&before={before}" if before else "")
        view = client.get(url).json()
        seen += [c["checkpoint_id"] for c in view["checkpoints"]]
        # every page tells the thread's current state and run, not its own newest
        assert view["state"]["name"] == "n2"
        assert view["highlight"] is None
        pages += 1
        before = view["next_before"]
        if before is None:
            break
    assert seen == every
    assert pages == (len(every) + 1) // 2


def test_a_page_diffs_its_oldest_checkpoint_against_its_parent_on_the_next_page(
    client: TestClient, graphs: Graphs
) -> None:
    thread = three_runs(graphs.local)
    full = client.get(f"/api/threads/{thread}?graph=local").json()["checkpoints"]
    first = client.get(f"/api/threads/{thread}?graph=local&limit=3").json()["checkpoints"]
    assert first == full[:3]  # (the third's parent is on the next page: read for its diff)


def test_the_runs_of_a_later_page_are_explained_as_on_the_first(
    client: TestClient, graphs: Graphs
) -> None:
    thread = three_runs(graphs.local)
    full = client.get(f"/api/threads/{thread}?graph=local").json()
    runs = {run["run_id"]: run for run in full["runs"]}
    assert len(runs) == 3
    before = full["checkpoints"][2]["checkpoint_id"]
    later = client.get(f"/api/threads/{thread}?graph=local&limit=200&before={before}").json()
    for run in later["runs"]:
        assert run == runs[run["run_id"]]
    assert sum(run["resumable"] for run in later["runs"]) == 1  # the current run only


def test_the_thread_page_links_its_older_and_newest_checkpoints(
    client: TestClient, graphs: Graphs
) -> None:
    thread = three_runs(graphs.local)
    first = client.get(f"/threads/{thread}?graph=local&limit=2", headers=PAGE).text
    assert "data-newest" not in first
    older = re.search(r'href="([^"]+)" data-older', first)
    assert older is not None
    second = client.get(html.unescape(older.group(1)), headers=PAGE)
    assert second.status_code == 200
    assert "data-newest" in second.text and "2 checkpoints on this page" in second.text
    ids = [c.checkpoint_id for c in graphs.saver.list(thread)]
    assert f'data-checkpoint="{ids[2]}"' in second.text
    assert f'data-checkpoint="{ids[1]}"' not in second.text
    whole = client.get(f"/threads/{thread}?graph=local", headers=PAGE).text
    assert "data-older" not in whole and "data-newest" not in whole


def test_an_unknown_before_is_a_404_that_names_it(client: TestClient, graphs: Graphs) -> None:
    thread = three_runs(graphs.local)
    reply = client.get(f"/api/threads/{thread}?graph=local&before=ck-nope")
    assert reply.status_code == 404
    assert "ck-nope" in reply.text


def test_a_thread_page_never_reads_the_whole_thread(
    client: TestClient, graphs: Graphs, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = three_runs(graphs.local)
    expected = client.get(f"/api/threads/{thread}?graph=local&limit=3").json()

    def whole_thread(*args: Any) -> Any:
        raise AssertionError("the console read a whole thread")

    monkeypatch.setattr(graphs.saver, "list", whole_thread)
    assert client.get(f"/api/threads/{thread}?graph=local&limit=3").json() == expected
    assert client.get(f"/threads/{thread}?graph=local", headers=PAGE).status_code == 200
    before = expected["next_before"]
    assert client.get(f"/api/threads/{thread}?graph=local&before={before}").status_code == 200


def test_a_large_state_is_shown_cut_and_the_api_gives_all_of_it(
    client: TestClient, graphs: Graphs
) -> None:
    from console_support import park

    notes = [f"note {n} " + "x" * 100 for n in range(3000)]  # about 330 KB of JSON
    run_id, thread = park(graphs.letters, {"name": "Big", "notes": notes})
    try:
        for url in ("/inbox", f"/threads/{thread}?graph=letters"):
            page = client.get(url, headers=PAGE).text
            assert "characters (the API gives them all)" in page
            assert "note 2999" not in page
            assert len(page) < 200_000 + 50_000 * page.count("(the API gives them all)")
        assert "cut after 10,000 characters" in client.get("/inbox", headers=PAGE).text
        state = client.get(f"/api/threads/{thread}?graph=letters").json()["state"]
        assert state["notes"] == notes
    finally:  # (a parked run would stay in the inbox of the other tests)
        client.post(f"/api/runs/{run_id}/cancel")


def test_an_inbox_with_more_parked_runs_than_it_shows_says_so(
    client: TestClient, graphs: Graphs, monkeypatch: pytest.MonkeyPatch
) -> None:
    from console_support import park

    from langgraph_celery.console import pages

    for name in ("One", "Two"):
        park(graphs.local, {"name": name})
    assert "data-more" not in client.get("/inbox", headers=PAGE).text
    monkeypatch.setattr(pages, "INBOX_LIMIT", 1)
    inbox = client.get("/inbox?graph=local", headers=PAGE).text
    assert inbox.count('<article class="card parked"') == 1
    assert "data-more>More runs are parked than the 1 newest shown here" in inbox
    assert '<a href="/runs?status=parked&amp;graph=local">all parked runs</a>' in inbox


def test_the_inbox_reads_each_parked_run_s_checkpoint_once(
    client: TestClient, graphs: Graphs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once for its interruption and its state: a second read of each (as before) doubled the
    time an inbox of runs over large states takes to show."""
    from console_support import park

    for name in ("Uno", "Dos", "Tres"):
        park(graphs.local, {"name": name})
    reads: list[str] = []
    for method in ("get", "get_with_writes"):
        real = getattr(graphs.saver, method)

        def counted(*args: Any, _real: Any = real, _name: str = method, **kwargs: Any) -> Any:
            reads.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(graphs.saver, method, counted)
    inbox = client.get("/inbox?graph=local", headers=PAGE).text
    cards = inbox.count('<article class="card parked"')
    assert cards >= 3
    assert len(reads) == cards, reads
