"""Graphs the console tests serve: on Celery's in-memory broker (with a worker thread of the test
process) and in process, all checkpointed in one SQLite file.

``build(database_url)`` compiles them on a new Celery app whose default queue is its own, so
two test modules' workers never take each other's tasks.  Switches drive the nodes from the
tests: ``BROKEN`` makes ``flaky``'s node fail, ``HOLD``/``RELEASE`` keep ``slow``'s node running.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from celery.app import Celery
from pydantic import BaseModel, Field

from langgraph_celery import END, START, AgentState, CompileConfig, GraphInterrupt, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver
from langgraph_celery.console import schema_ref

XSS = '<img src=x onerror="window.__xss=1">'

BROKEN = threading.Event()
#: set by ``slow``'s node when it runs; it then waits for RELEASE
HOLDING = threading.Event()
RELEASE = threading.Event()


class Refund(BaseModel):
    """The approval form of the ``refunds`` graph."""

    approved: bool = False
    amount: int = Field(description="in cents")
    channel: Literal["card", "bank"] = "card"
    note: str = ""


def draft(state: AgentState) -> dict[str, Any]:
    return {"draft": f"Dear {state.value('name')}"}


def approve(state: AgentState) -> dict[str, Any]:
    if state.value("approved") is None:
        raise GraphInterrupt(
            "approve the letter?",
            {"question": f"send to {state.value('name')}?", "resume_with": {"approved": True}},
        )
    return {"decision": "approved" if state.value("approved") else "rejected"}


def send(state: AgentState) -> dict[str, Any]:
    return {"sent": bool(state.value("approved")), "note_seen": state.value("note")}


def after_approval(state: AgentState) -> str:
    return "send" if state.value("approved") else END


def check_refund(state: AgentState) -> dict[str, Any]:
    if state.value("amount") is None:
        raise GraphInterrupt(
            "refund the customer?",
            {"schema": schema_ref(Refund), "resume_with": {"amount": 1250}, "timeout": 3600},
        )
    return {"refunded": state.value("amount") if state.value("approved") else 0}


def work(state: AgentState) -> dict[str, Any]:
    if BROKEN.is_set():
        raise RuntimeError("the service at postgresql://app:hunter2@db/prod is down")
    return {"worked": True}


def start(state: AgentState) -> dict[str, Any]:
    return {"started": True}


def wait(state: AgentState) -> dict[str, Any]:
    HOLDING.set()
    RELEASE.wait(30)
    return {"waited": True}


def after(state: AgentState) -> dict[str, Any]:
    return {"after": True}


def poison(state: AgentState) -> dict[str, Any]:
    if state.value("seen") is None:
        raise GraphInterrupt(XSS, {XSS: XSS, "payload": XSS})
    return {}


def line(*nodes: Any) -> StateGraph:
    builder = StateGraph()
    previous = START
    for node in nodes:
        builder.add_node(node.__name__, node)
        builder.add_edge(previous, node.__name__)
        previous = node.__name__
    return builder.add_edge(previous, END)


@dataclass
class Graphs:
    app: Celery
    saver: SqlSaver
    letters: Any
    refunds: Any
    flaky: Any
    slow: Any
    xss: Any
    local: Any

    def all(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in ("letters", "refunds", "flaky", "slow", "xss", "local")
        }


def build(database_url: str) -> Graphs:
    tag = uuid.uuid4().hex[:8]
    app = Celery(f"console-{tag}", broker="memory://", backend="cache+memory://")
    app.conf.task_default_queue = f"console-{tag}"
    saver = SqlSaver(database_url)

    def on_celery(builder: StateGraph, graph_id: str) -> Any:
        return builder.compile(
            CompileConfig(
                checkpoint_saver=saver, executor=CeleryExecutor(app), graph_id=f"{graph_id}"
            )
        )

    letters_builder = (
        StateGraph()
        .add_node("draft", draft)
        .add_node("approve", approve)
        .add_node("send", send)
        .add_edge(START, "draft")
        .add_edge("draft", "approve")
        .add_conditional_edges("approve", after_approval, {"send": "send", END: END})
        .add_edge("send", END)
    )
    local_builder = line(draft, send)
    return Graphs(
        app=app,
        saver=saver,
        letters=on_celery(letters_builder, "letters"),
        refunds=on_celery(line(draft, check_refund), "refunds"),
        flaky=on_celery(line(draft, work), "flaky"),
        slow=on_celery(line(start, wait, after), "slow"),  # (held at its second node)
        xss=on_celery(line(poison), f"xss-{XSS}"),
        local=local_builder.compile(
            CompileConfig(checkpoint_saver=saver, interrupt_before=("send",), graph_id="local")
        ),
    )
