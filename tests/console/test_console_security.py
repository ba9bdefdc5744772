"""The console's guard: addresses, authentication, CSRF, escaping and credentials (API level;
``test_console_browser.py`` proves the same in a browser)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from celery.app import Celery
from console_graphs import XSS, Graphs
from console_support import park
from fastapi.testclient import TestClient

from langgraph_celery import END, START, CompileConfig, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver
from langgraph_celery.console import Catalog, ConsoleSettings, SettingsError, create_app
from langgraph_celery.console.redact import redact

LOCAL = "http://127.0.0.1:8765"


def client_for(catalog: Catalog, settings: ConsoleSettings, base: str = LOCAL) -> TestClient:
    return TestClient(create_app(catalog, settings), base_url=base)


@pytest.fixture
def client(catalog: Catalog) -> Iterator[TestClient]:
    with client_for(catalog, ConsoleSettings()) as client:
        yield client


# -- where it listens -----------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "console.example"])
def test_an_address_other_than_loopback_needs_authentication(host: str) -> None:
    with pytest.raises(SettingsError, match="without authentication"):
        ConsoleSettings(host=host)
    assert ConsoleSettings(host=host, basic_auth="admin:secret").authenticated
    assert ConsoleSettings(host=host, token="0123456789abcdef").authenticated


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_authentication(host: str) -> None:
    assert ConsoleSettings(host=host).loopback


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"basic_auth": "admin"}, "USER:PASS"),
        ({"basic_auth": "admin:"}, "USER:PASS"),
        ({"token": "short"}, "shorter than 8"),
        ({"basic_auth": "a:b", "token": "0123456789"}, "not both"),
        ({"flower_url": "ftp://flower"}, "http"),
        ({"flower_url": "http://admin:pw@127.0.0.1:5555"}, "credentials"),
    ],
)
def test_unusable_settings_say_what_to_do(options: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        ConsoleSettings(**options)


def test_a_loopback_console_answers_loopback_host_names_only(catalog: Catalog) -> None:
    with client_for(catalog, ConsoleSettings(), base="http://rebound.example:8765") as client:
        reply = client.get("/api/graphs")
    assert reply.status_code == 421
    assert "127.0.0.1" in reply.json()["detail"]
    with client_for(catalog, ConsoleSettings(), base="http://localhost:8765") as client:
        assert client.get("/api/graphs").status_code == 200


# -- who may use it -------------------------------------------------------------------------------


def test_basic_auth_is_required_when_configured(catalog: Catalog) -> None:
    settings = ConsoleSettings(host="0.0.0.0", basic_auth="admin:s3cret-pass")
    with client_for(catalog, settings, base="http://192.0.2.1:8765") as client:
        refused = client.get("/inbox")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Basic")
        assert client.get("/inbox", auth=("admin", "wrong")).status_code == 401
        assert client.get("/static/console.css").status_code == 401
        page = client.get("/inbox", auth=("admin", "s3cret-pass"))
        assert page.status_code == 200
        assert "s3cret-pass" not in page.text


def test_a_token_is_taken_once_from_the_address_then_from_a_cookie(catalog: Catalog) -> None:
    settings = ConsoleSettings(host="0.0.0.0", token="tok-0123456789")
    with client_for(catalog, settings, base="http://192.0.2.1:8765") as client:
        assert client.get("/runs").status_code == 401
        assert client.get("/runs?token=wrong-token").status_code == 401
        entry = client.get("/runs?token=tok-0123456789&status=parked", follow_redirects=False)
        assert entry.status_code == 303
        assert entry.headers["location"] == "/runs?status=parked"  # the token leaves the address
        assert "HttpOnly" in entry.headers["set-cookie"]
        page = client.get("/runs")
        assert page.status_code == 200 and "tok-0123456789" not in page.text


def test_a_bearer_token_needs_no_csrf_token(catalog: Catalog, graphs: Graphs) -> None:
    run_id, _ = park(graphs.letters, {"name": "Pat"})
    settings = ConsoleSettings(host="0.0.0.0", token="tok-0123456789")
    with client_for(catalog, settings, base="http://192.0.2.1:8765") as client:
        headers = {"authorization": "Bearer tok-0123456789"}
        assert client.post(f"/api/runs/{run_id}/cancel", headers=headers).status_code == 200
        wrong = {"authorization": "Bearer nope-nope-nope"}
        assert client.post(f"/api/runs/{run_id}/cancel", headers=wrong).status_code == 401


# -- CSRF -----------------------------------------------------------------------------------------


def test_state_changing_requests_need_the_sessions_csrf_token(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, _ = park(graphs.letters, {"name": "Quin"})
    url = f"/api/runs/{run_id}/cancel"
    missing = client.post(url)
    assert missing.status_code == 403 and "CSRF" in missing.json()["detail"]
    assert client.post(url, headers={"x-csrf-token": "0" * 64}).status_code == 403
    token = client.get("/api/session").json()["csrf_token"]
    form = client.post("/actions/cancel", data={"run_id": run_id, "csrf_token": "forged"})
    assert form.status_code == 403
    foreign = client.post(url, headers={"x-csrf-token": token, "origin": "http://evil.example"})
    assert foreign.status_code == 403 and "cross-origin" in foreign.json()["detail"]
    opaque = client.post(  # a sandboxed frame or data: URL: an opaque origin is a foreign one
        "/actions/cancel",
        data={"run_id": run_id, "csrf_token": token, "back": "/inbox"},
        headers={"origin": "null"},
    )
    assert opaque.status_code == 403 and "cross-origin" in opaque.text
    multipart = client.post(url, headers={"x-csrf-token": token}, files={"f": b"x"})
    assert multipart.status_code == 403
    large = client.post(
        f"/api/runs/{run_id}/approve",
        headers={"x-csrf-token": token, "content-type": "application/json"},
        content=b'{"update": {"x": "' + b"y" * (1024 * 1024) + b'"}}',
    )
    assert large.status_code == 413 and "over 1048576 bytes" in large.json()["detail"]
    assert graphs.saver.get_run(run_id).status.value == "parked"  # nothing went through
    assert client.post(url, headers={"x-csrf-token": token}).status_code == 200


def test_a_refused_form_post_gets_a_page_not_json(client: TestClient, graphs: Graphs) -> None:
    """A browser's form post with a stale token (the console restarted under an open page) is
    refused with a page that says what to do, not bare JSON; the API still answers JSON."""
    run_id, _ = park(graphs.letters, {"name": "Sid"})
    html_accept = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    page = client.post(
        "/actions/approve", data={"run_id": run_id, "csrf_token": "stale"}, headers=html_accept
    )
    assert page.status_code == 403
    assert page.headers["content-type"].startswith("text/html")
    assert "CSRF token" in page.text and "reload the page" in page.text
    assert 'href="/inbox"' in page.text
    api = client.post(f"/api/runs/{run_id}/cancel", headers=html_accept)
    assert api.status_code == 403 and "CSRF" in api.json()["detail"]
    assert graphs.saver.get_run(run_id).status.value == "parked"


def test_a_csrf_token_belongs_to_its_session(catalog: Catalog, graphs: Graphs) -> None:
    run_id, _ = park(graphs.letters, {"name": "Rae"})
    with (
        client_for(catalog, ConsoleSettings()) as mine,
        client_for(catalog, ConsoleSettings()) as other,
    ):
        token = mine.get("/api/session").json()["csrf_token"]
        other.get("/api/session")
        stolen = other.post(f"/api/runs/{run_id}/cancel", headers={"x-csrf-token": token})
        assert stolen.status_code == 403


def test_pages_forbid_inline_scripts_and_framing(client: TestClient) -> None:
    page = client.get("/inbox")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in page.text  # (only <script src=...>)


# -- escaping and credentials ---------------------------------------------------------------------


def test_state_metadata_and_names_are_escaped_in_every_page(
    client: TestClient, graphs: Graphs
) -> None:
    run_id, thread = park(graphs.xss, {"note": XSS}, thread=f"t-{XSS}")
    pages = [
        client.get("/inbox").text,
        client.get("/runs").text,
        client.get("/graphs").text,
        client.get(f"/threads/{quote(thread, safe='')}").text,
    ]
    for text in pages:
        assert "<img src=x" not in text
    assert pages[0].count("&lt;img src=x onerror=") >= 3  # reason, metadata key and value
    assert "&lt;img src=x onerror=" in pages[3]  # thread id and state
    assert client.get(f"/api/runs/{run_id}").json()["interruption"]["reason"] == XSS


def test_no_page_shows_the_credentials_of_the_broker_or_the_database(tmp_path) -> None:
    app = Celery("secretive", broker="redis://:br0ker-pass@127.0.0.1:6390/3")
    saver = SqlSaver(f"sqlite:///{tmp_path / 'db.sqlite'}")
    graph = (
        StateGraph()
        .add_node("a", lambda state: {})
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile(CompileConfig(checkpoint_saver=saver, executor=CeleryExecutor(app), graph_id="s"))
    )
    with client_for(Catalog.from_graphs({"secretive:graph": graph}), ConsoleSettings()) as client:
        for path in ("/inbox", "/runs", "/graphs", "/api/graphs", "/api/runs", "/api/inbox"):
            reply = client.get(path)
            assert reply.status_code == 200, path
            assert "br0ker-pass" not in reply.text and "6390" not in reply.text
    saver.dispose()


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("redis://:pw@host:6379/0", "redis://:**@host:6379/0"),
        ("postgresql+psycopg://app:p%40ss@db/x down", "postgresql+psycopg://app:**@db/x down"),
        ("amqp://guest:guest@rabbit//", "amqp://guest:**@rabbit//"),
        ("host=db password=hunter2 user=x", "host=db password=** user=x"),
        ("no secret in https://example.com/a:b", "no secret in https://example.com/a:b"),
    ],
)
def test_redact_hides_passwords(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_basic_auth_header_is_checked_in_constant_shape(catalog: Catalog) -> None:
    settings = ConsoleSettings(host="0.0.0.0", basic_auth="admin:s3cret-pass")
    with client_for(catalog, settings, base="http://192.0.2.1:8765") as client:
        garbage = {"authorization": "Basic " + base64.b64encode(b"\xff\xfe").decode()}
        assert client.get("/runs", headers=garbage).status_code == 401
        assert client.get("/runs", headers={"authorization": "Basic !!!"}).status_code == 401
