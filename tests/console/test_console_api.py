"""The console's JSON API and form posts, through FastAPI's test client, on graphs that run on
Celery's in-memory broker (a worker thread of this process) and in process."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import console_graphs
import pytest
from console_graphs import Graphs
from console_support import park, status_of, thread_id, wait_for, wait_status
from fastapi.testclient import TestClient

from langgraph_celery import RunnableConfig
from langgraph_celery.checkpoint import RunStatus
from langgraph_celery.console import Catalog, ConsoleSettings, create_app

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def client(catalog: Catalog, settings: ConsoleSettings) -> Iterator[TestClient]:
    with TestClient(create_app(catalog, settings), base_url=BASE) as client:
        client.headers["x-csrf-token"] = client.get("/api/session").json()["csrf_token"]
        yield client


def state(graphs: Graphs, thread: str) -> dict:
    return dict(graphs.saver.get(thread).values)


# -- reading --------------------------------------------------------------------------------------


def test_runs_are_listed_by_graph_and_status_newest_first_a_page_at_a_time(
    client: TestClient, graphs: Graphs
) -> None:
    first, _ = park(graphs.letters, {"name": "Ada"})
    second, _ = park(graphs.letters, {"name": "Bob"})
    console_graphs.BROKEN.set()
    try:
        failed, _ = park(graphs.flaky, {"name": "Cy"})
    finally:
        console_graphs.BROKEN.clear()

    letters = client.get("/api/runs", params={"graph": "letters"}).json()["runs"]
    ids = [run["run_id"] for run in letters]
    assert ids.index(second) < ids.index(first)
    assert {run["graph_id"] for run in letters} == {"letters"}
    assert all(run["status"] == "parked" for run in letters if run["run_id"] in (first, second))

    failing = client.get("/api/runs", params={"graph": "flaky", "status": "failed"}).json()
    assert [run["run_id"] for run in failing["runs"]] == [failed]
    newest_failed = client.get("/api/runs", params={"status": "failed"}).json()["runs"][0]
    assert newest_failed["run_id"] == failed

    page = client.get("/api/runs", params={"graph": "letters", "limit": 1}).json()
    assert [run["run_id"] for run in page["runs"]] == [ids[0]]
    following = client.get(
        "/api/runs", params={"graph": "letters", "limit": 1, "before": page["next_before"]}
    ).json()
    assert [run["run_id"] for run in following["runs"]] == [ids[1]]


def test_an_unknown_status_filter_is_refused_as_an_unknown_graph_is(client: TestClient) -> None:
    page = {"accept": "text/html"}
    bogus = client.get("/runs?status=bogus", headers=page)
    assert bogus.status_code == 404
    assert "no run status &#39;bogus&#39;" in bogus.text or "no run status 'bogus'" in bogus.text
    assert "parked" in bogus.text  # (the statuses there are)
    assert client.get("/runs?graph=nope", headers=page).status_code == 404
    assert client.get("/runs?status=", headers=page).status_code == 200  # (all statuses)
    assert client.get("/runs?status=parked", headers=page).status_code == 200


def test_a_later_page_of_runs_links_back_to_the_newest(client: TestClient, graphs: Graphs) -> None:
    first, _ = park(graphs.letters, {"name": "Pag"})
    park(graphs.letters, {"name": "Ina"})
    page = {"accept": "text/html"}
    newest = client.get("/runs?graph=letters&status=parked", headers=page).text
    assert "data-newest" not in newest
    older = client.get(f"/runs?graph=letters&status=parked&before={first}", headers=page).text
    assert 'href="/runs?graph=letters&amp;status=parked" data-newest' in older


def test_the_inbox_gives_reason_metadata_deadline_and_the_form_of_the_named_model(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, _ = park(graphs.refunds, {"name": "Dee"})
    inbox = {run["run_id"]: run for run in client.get("/api/inbox").json()}
    interruption = inbox[run_id]["interruption"]
    assert interruption["node"] == "check_refund"
    assert interruption["reason"] == "refund the customer?"
    assert interruption["deadline"] is not None  # the interruption's timeout: 3600 s
    assert interruption["form_model"] == "console_graphs:Refund"
    fields = {f["name"]: f for f in interruption["form_fields"]}
    assert list(fields) == ["approved", "amount", "channel", "note"]
    assert fields["amount"]["value"] == "1250"  # resume_with pre-fills it
    assert fields["amount"]["required"] is True
    assert fields["channel"]["kind"] == "select"
    assert fields["channel"]["choices"] == ["card", "bank"]


def test_the_thread_shows_each_step_with_its_changes_and_links_to_flower(
    catalog: Catalog, graphs: Graphs
) -> None:
    settings = ConsoleSettings(flower_url="http://127.0.0.1:5555/")
    run_id, thread = park(graphs.letters, {"name": "Eve"})
    with TestClient(create_app(catalog, settings), base_url=BASE) as client:
        view = client.get(f"/api/threads/{quote(thread)}").json()
    assert view["graph_id"] == "letters"
    assert view["highlight"] == "approve"
    by_node = {c["node"]: c for c in view["checkpoints"]}
    assert [c["key"] for c in by_node["draft"]["changes"]] == ["draft"]
    assert by_node["draft"]["changes"][0]["kind"] == "added"
    assert by_node["draft"]["updates"] == [["draft", {"draft": "Dear Eve"}]]
    task = by_node["draft"]["tasks"][0]
    assert task["node"] == "approve"
    assert task["celery_task_id"].startswith(f"lgc:{run_id}:")
    assert task["flower_url"] == "http://127.0.0.1:5555/task/" + quote(
        task["celery_task_id"], safe=""
    )


# -- steering -------------------------------------------------------------------------------------


def test_approve_merges_the_update_and_the_run_goes_on(client: TestClient, graphs: Graphs) -> None:
    run_id, thread = park(graphs.letters, {"name": "Fay"})
    reply = client.post(
        f"/api/runs/{run_id}/approve", json={"update": {"approved": True, "note": "ok"}}
    )
    assert reply.status_code == 200, reply.text
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert state(graphs, thread)["sent"] is True
    assert state(graphs, thread)["note_seen"] == "ok"
    again = client.post(f"/api/runs/{run_id}/approve", json={"update": {}})
    assert again.status_code == 409
    assert "completed" in again.json()["detail"]


def test_an_update_that_does_not_fit_the_form_model_is_refused(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, thread = park(graphs.refunds, {"name": "Gus"})
    refused = client.post(f"/api/runs/{run_id}/approve", json={"update": {"amount": "lots"}})
    assert refused.status_code == 409
    assert "amount" in refused.json()["detail"]
    assert status_of(graphs, run_id) is RunStatus.PARKED
    reply = client.post(
        f"/api/runs/{run_id}/approve", json={"update": {"amount": 500, "approved": True}}
    )
    assert reply.status_code == 200, reply.text
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert state(graphs, thread)["refunded"] == 500


def test_reject_resumes_with_the_approval_inverted(client: TestClient, graphs: Graphs) -> None:
    run_id, thread = park(graphs.letters, {"name": "Hal"})
    assert client.post(f"/api/runs/{run_id}/reject", json={}).status_code == 200
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert state(graphs, thread)["decision"] == "rejected"
    assert "sent" not in state(graphs, thread)


def test_a_cancelled_parked_run_leaves_the_inbox_and_stays_resumable(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, _ = park(graphs.letters, {"name": "Ida"})
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 200
    assert status_of(graphs, run_id) is RunStatus.CANCELLED
    assert run_id not in {run["run_id"] for run in client.get("/api/inbox").json()}
    assert client.get(f"/api/runs/{run_id}").json()["status"] == "cancelled"
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 409
    resumed = client.post(f"/api/runs/{run_id}/retry", json={"update": {"approved": True}})
    assert resumed.status_code == 200, resumed.text
    wait_status(graphs, run_id, RunStatus.COMPLETED)


def test_a_failed_run_shows_its_error_without_secrets_and_retry_runs_it_again(
    client: TestClient, graphs: Graphs
) -> None:
    console_graphs.BROKEN.set()
    try:
        run_id, thread = park(graphs.flaky, {"name": "Jo"})
        wait_status(graphs, run_id, RunStatus.FAILED)
        failure = client.get(f"/api/runs/{run_id}").json()["failure"]
        assert failure["node"] == "work" and failure["error_type"] == "RuntimeError"
        assert "hunter2" not in failure["message"]
        assert "postgresql://app:**@db/prod" in failure["message"]
        page = client.get(f"/threads/{quote(thread)}")
        assert "is down" in page.text and "hunter2" not in page.text
    finally:
        console_graphs.BROKEN.clear()
    assert client.post(f"/api/runs/{run_id}/retry", json={}).status_code == 200
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert state(graphs, thread)["worked"] is True


def test_fork_starts_a_new_run_from_a_checkpoint(client: TestClient, graphs: Graphs) -> None:
    run_id, thread = park(graphs.letters, {"name": "Kim"})
    client.post(f"/api/runs/{run_id}/approve", json={"update": {"approved": True}})
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    after_draft = next(  # (the step's checkpoint, not the resume's, which holds the approval)
        c for c in graphs.saver.list(thread) if c.node == "draft" and c.kind.value == "loop"
    )
    reply = client.post(
        "/api/fork", json={"thread_id": thread, "checkpoint_id": after_draft.checkpoint_id}
    )
    assert reply.status_code == 200, reply.text
    forked = reply.json()["run_id"]
    assert forked and forked != run_id
    # the fork runs `approve` again from the state after `draft`, which has no decision
    wait_status(graphs, forked, RunStatus.PARKED)
    assert graphs.saver.get(thread).run_id == forked
    missing = client.post("/api/fork", json={"thread_id": thread, "checkpoint_id": "nope"})
    assert missing.status_code == 409


def test_cancel_stops_a_running_run_before_its_next_step(
    client: TestClient, graphs: Graphs
) -> None:
    console_graphs.HOLDING.clear()
    console_graphs.RELEASE.clear()
    thread = thread_id("slow")
    handle = graphs.slow.start({}, RunnableConfig(thread_id=thread))
    try:
        assert console_graphs.HOLDING.wait(30)
        run = client.get(f"/api/runs/{handle.run_id}").json()
        assert run["status"] == "running"
        # where it is now, not where it started (the index writes no record a step)
        assert run["node"] == "wait" and run["updated_at"] > run["created_at"], run
        listed = client.get("/api/runs", params={"graph": "slow", "status": "running"}).json()
        assert [r["node"] for r in listed["runs"] if r["run_id"] == handle.run_id] == ["wait"]
        shown = client.get(f"/api/threads/{thread}").json()
        assert shown["highlight"] == "wait", shown["highlight"]
        reply = client.post(f"/api/runs/{handle.run_id}/cancel")
        assert reply.status_code == 200, reply.text
    finally:
        console_graphs.RELEASE.set()
    wait_status(graphs, handle.run_id, RunStatus.CANCELLED)
    wait_for(lambda: "waited" in state(graphs, thread), "the held node's update")
    assert "after" not in state(graphs, thread)
    console_graphs.RELEASE.clear()


def test_a_run_of_an_in_process_graph_is_approved_in_the_consoles_process(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, thread = park(graphs.local, {"name": "Lu"})
    assert status_of(graphs, run_id) is RunStatus.PARKED
    inbox = {run["run_id"]: run for run in client.get("/api/inbox").json()}
    assert inbox[run_id]["interruption"]["node"] == "send"
    reply = client.post(f"/api/runs/{run_id}/approve", json={"update": {"approved": True}})
    assert reply.status_code == 200, reply.text
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert state(graphs, thread)["sent"] is True
    assert "the run completed" in str(reply.json()), reply.json()


def test_unknown_runs_and_bad_bodies_are_answered_with_what_is_wrong(client: TestClient) -> None:
    missing = client.get("/api/runs/no-such-run")
    assert missing.status_code == 404 and "no run 'no-such-run'" in missing.json()["detail"]
    bad = client.post("/api/runs/no-such-run/approve", json={"update": [1, 2]})
    assert bad.status_code == 422 and "update" in bad.json()["detail"]
    assert client.get("/api/runs", params={"status": "lost"}).status_code == 422
    assert client.get("/api/graphs/whatever").status_code == 404


def test_the_api_is_described_by_its_openapi_document(client: TestClient) -> None:
    document = client.get("/api/openapi.json").json()
    assert {"/api/runs", "/api/inbox", "/api/runs/{run_id}/approve", "/api/fork"} <= set(
        document["paths"]
    )
    schemas = set(document["components"]["schemas"])
    assert {"RunOut", "ThreadOut", "ResumeIn", "ActionOut"} <= schemas
    assert client.get("/docs").status_code == 404  # (it would load its scripts from a CDN)


# -- pages and forms ------------------------------------------------------------------------------


def test_a_form_post_approves_with_the_edited_json_and_redirects_back(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, thread = park(graphs.letters, {"name": "Mo"})
    token = client.headers["x-csrf-token"]
    del client.headers["x-csrf-token"]
    invalid = client.post(
        "/actions/approve",
        data={"csrf_token": token, "run_id": run_id, "update": '{"approved": tru'},
    )
    assert invalid.status_code == 400
    assert "not valid JSON" in invalid.text and "{&#34;approved&#34;: tru" in invalid.text
    reply = client.post(
        "/actions/approve",
        data={"csrf_token": token, "run_id": run_id, "update": '{"approved": true, "note": "x"}'},
        follow_redirects=False,
    )
    assert reply.status_code == 303 and reply.headers["location"] == "/inbox"
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert state(graphs, thread)["note_seen"] == "x"
    assert f"run {run_id} approved" in client.get("/inbox").text


def test_a_model_form_post_is_validated_field_by_field(client: TestClient, graphs: Graphs) -> None:
    run_id, thread = park(graphs.refunds, {"name": "Ned"})
    token = client.headers["x-csrf-token"]
    fields = {"csrf_token": token, "run_id": run_id, "mode": "model", "field.channel": "bank"}
    invalid = client.post("/actions/approve", data={**fields, "field.amount": "a lot"})
    assert invalid.status_code == 400
    assert "valid integer" in invalid.text and 'value="a lot"' in invalid.text
    client.post(
        "/actions/approve",
        data={**fields, "field.amount": "700", "field.approved": "true"},
        follow_redirects=False,
    )
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert state(graphs, thread)["refunded"] == 700
    assert state(graphs, thread)["channel"] == "bank"


def test_every_page_renders(client: TestClient, graphs: Graphs) -> None:
    _, thread = park(graphs.letters, {"name": "Oz"})
    for path in ("/inbox", "/runs", "/runs?status=parked&graph=letters", "/graphs"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert "<svg" in page.text or path.startswith("/runs")
    thread_page = client.get(f"/threads/{quote(thread)}")
    assert 'class="node current status-parked" data-node="approve"' in thread_page.text
    assert client.get("/").headers.get("location") is None  # followed to the inbox
    assert client.get("/threads/no-such-thread").status_code == 404


def test_a_parked_run_whose_state_was_updated_keeps_its_interruption(
    client: TestClient, graphs: Graphs
) -> None:
    """``update_state`` on a parked run (a person edits the state before deciding) leaves it
    parked for the same reason, metadata and Approve form; the resume then completes it."""
    run_id, thread = park(graphs.letters, {"name": "Upd"})
    before = client.get(f"/api/runs/{run_id}").json()["interruption"]
    assert before["reason"] == "approve the letter?"
    config = RunnableConfig(thread_id=thread)
    graphs.letters.update_state(config, {"note": "edited"})
    graphs.letters.update_state(config, {"note": "edited again"})
    run = client.get(f"/api/runs/{run_id}").json()
    assert run["status"] == "parked"
    assert run["interruption"] == before
    inbox = client.get("/inbox").text
    assert "approve the letter?" in inbox and "send to Upd?" in inbox
    reply = client.post(f"/api/runs/{run_id}/approve", json={"update": {"approved": True}})
    assert reply.status_code == 200, reply.text
    wait_status(graphs, run_id, RunStatus.COMPLETED)
    assert state(graphs, thread)["note_seen"] == "edited again"
