"""A run parked inside a compiled subgraph, in the console: its pages draw the subgraph as a
block around the child's graph and highlight the node it parked at, not the parent's node of
the same id."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from console_support import thread_id
from fastapi.testclient import TestClient

from langgraph_celery import (
    END,
    START,
    CompileConfig,
    GraphInterrupt,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import RunStatus, SqlSaver
from langgraph_celery.console import Catalog, ConsoleSettings, create_app

BASE = "http://127.0.0.1:8765"
PAGE = {"accept": "text/html"}


def review(state: Any) -> dict[str, Any]:
    return {"reviews": 1}


def ask(state: Any) -> dict[str, Any]:
    if state.value("decision") is None:
        raise GraphInterrupt("approve?", {"choices": ["yes", "no"]})
    return {}


def build(saver: SqlSaver) -> Any:
    """``review`` (the parent's own), then ``approval``: a compiled subgraph whose own
    ``review`` parks the run until the state holds a decision."""
    child = StateGraph().add_node("review", ask).add_edge(START, "review")
    approval = child.add_edge("review", END).compile()
    parent = StateGraph().add_node("review", review).add_node("approval", approval)
    parent.add_edge(START, "review").add_edge("review", "approval").add_edge("approval", END)
    return parent.compile(CompileConfig(checkpoint_saver=saver, graph_id="nested"))


@pytest.fixture
def nested(tmp_path: Path) -> Iterator[Any]:
    saver = SqlSaver(f"sqlite:///{tmp_path / 'nested.sqlite'}")
    try:
        yield build(saver)
    finally:
        saver.dispose()


@pytest.fixture
def client(nested: Any) -> Iterator[TestClient]:
    catalog = Catalog.of([(sys.modules[__name__], f"{__name__}:nested", nested)])
    with TestClient(create_app(catalog, ConsoleSettings()), base_url=BASE) as client:
        yield client


def _drawn(svg: str, node: str) -> str:
    """The classes of the diagram's element that carries ``data-node="node"``."""
    found = re.findall(rf'<g class="([^"]+)" data-node="{node}"', svg)
    assert found, f"{node} is not drawn"
    return " / ".join(found)


def test_a_run_parked_in_a_compiled_subgraph_is_shown_inside_its_block(
    client: TestClient, nested: Any
) -> None:
    thread = thread_id("nested")
    nested.invoke({}, RunnableConfig(thread_id=thread))
    latest = nested.checkpoint_saver.get(thread)
    assert nested.checkpoint_saver.get_run(latest.run_id).status is RunStatus.PARKED

    page = client.get(f"/threads/{quote(thread)}", headers=PAGE)
    assert page.status_code == 200
    assert _drawn(page.text, "approval") == "block compiled holds-current status-parked"
    # the parent's review ran (visited); the child's is where the run parked
    assert _drawn(page.text, "review") == "node visited / node current status-parked"

    inbox = client.get("/inbox", headers=PAGE).text
    assert _drawn(inbox, "approval") == "block compiled holds-current status-parked"
    assert _drawn(inbox, "review") == "node / node current status-parked"
    # (the pages name it by its path: the parent's review is not where it parked)
    assert 'parked at <code class="node">approval \u203a review</code>' in inbox
    assert 'Parked at <code class="node">approval \u203a review</code>' in page.text

    graphs = client.get("/graphs", headers=PAGE).text
    assert _drawn(graphs, "approval") == "block compiled"
    svg = client.get("/api/diagram.svg", params={"graph": "nested", "highlight": "approval"})
    assert _drawn(svg.text, "approval") == "block compiled current status-running"
