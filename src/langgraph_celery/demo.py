"""The example agent: it drafts a message, waits for a human to approve it, then sends it.

``draft -> approve -> send``: ``approve`` raises :class:`GraphInterrupt` until the state holds a
decision (``approved``), so the run parks there with nothing queued and no worker held; resuming
with ``GraphInput.resume({"approved": True})`` (or ``langgraph-celery resume ... --update``) runs
``approve`` again, then ``send``.  ``{"approved": false}`` ends the run without sending.

Every node runs as a Celery task.  The module builds its app and graph at import from environment
variables, so the CLI, ``celery -A langgraph_celery.demo worker`` and any client share them:

``LGC_BROKER_URL``       broker, default ``memory://`` (in-process: the CLI starts a worker thread)
``LGC_RESULT_BACKEND``   result backend, default ``cache+memory://`` with ``memory://``, the
                         broker URL with ``redis://``, none otherwise
``LGC_DATABASE_URL``     checkpoints (SqlSaver), default ``sqlite:///langgraph-celery-demo.sqlite``

Importing it connects to nothing: Celery apps connect lazily and ``SqlSaver`` on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from celery.app import Celery

from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver
from langgraph_celery.graph.builder import StateGraph
from langgraph_celery.graph.compiled import CompiledGraph
from langgraph_celery.graph.config import CompileConfig
from langgraph_celery.graph.state import AgentState
from langgraph_celery.graph.types import END, START, GraphInterrupt

__all__ = [
    "BROKER_ENV",
    "DATABASE_ENV",
    "DEFAULT_BROKER_URL",
    "DEFAULT_DATABASE_URL",
    "GRAPH_ID",
    "RESULT_BACKEND_ENV",
    "app",
    "build_graph",
    "compile_graph",
    "default_result_backend",
    "graph",
    "make_app",
]

BROKER_ENV = "LGC_BROKER_URL"
RESULT_BACKEND_ENV = "LGC_RESULT_BACKEND"
DATABASE_ENV = "LGC_DATABASE_URL"
DEFAULT_BROKER_URL = "memory://"
DEFAULT_DATABASE_URL = "sqlite:///langgraph-celery-demo.sqlite"
GRAPH_ID = "langgraph-celery-demo"

# -- the agent's nodes ----------------------------------------------------------------------------


def draft(state: AgentState) -> dict[str, Any]:
    """Write the message (a real agent would call a model here)."""
    topic = str(state.value("topic", "the quarterly report"))
    recipient = str(state.value("recipient", "team@example.com"))
    body = (
        f"Hello,\n\nHere is an update on {topic}: the work is on track and the details are "
        "attached.\n\nBest regards"
    )
    return {"draft": {"to": recipient, "subject": f"Update: {topic}", "body": body}}


def approve(state: AgentState) -> dict[str, Any]:
    """Stop until a human decides; runs again on resume and records the decision."""
    decision = state.value("approved")
    if decision is None:
        message: Mapping[str, Any] = state.value("draft") or {}
        raise GraphInterrupt(
            "a human approves the draft before it is sent",
            {
                "question": f"send {message.get('subject')!r} to {message.get('to')}?",
                "resume_with": {"approved": True},
            },
        )
    return {"status": "approved" if decision else "rejected"}


def after_approval(state: AgentState) -> str:
    return "send" if state.value("approved") else END


def send(state: AgentState) -> dict[str, Any]:
    """Deliver the approved draft (here: a receipt instead of an email)."""
    message: Mapping[str, Any] = state.value("draft") or {}
    return {"status": "sent", "receipt": f"sent {message.get('subject')!r} to {message.get('to')}"}


# -- building -------------------------------------------------------------------------------------


def build_graph() -> StateGraph:
    """The agent's graph, not compiled: ``draft -> approve -> send`` (or END if rejected)."""
    return (
        StateGraph()
        .add_node("draft", draft)
        .add_node("approve", approve)
        .add_node("send", send)
        .add_edge(START, "draft")
        .add_edge("draft", "approve")
        .add_conditional_edges("approve", after_approval, {"send": "send", END: END})
        .add_edge("send", END)
    )


def default_result_backend(broker_url: str) -> str | None:
    """``cache+memory://`` for ``memory://``, the broker itself for Redis, else none."""
    if broker_url.startswith("memory://"):
        return "cache+memory://"
    if broker_url.startswith(("redis://", "rediss://")):
        return broker_url
    return None


def make_app(
    broker_url: str, result_backend: str | None = None, name: str = "langgraph_celery.demo"
) -> Celery:
    """A Celery app for the demo graph; connects to nothing until used."""
    backend = result_backend or default_result_backend(broker_url)
    return Celery(name, broker=broker_url, backend=backend, set_as_current=False)


def compile_graph(celery_app: Celery, database_url: str, graph_id: str = GRAPH_ID) -> CompiledGraph:
    """The agent compiled on ``celery_app`` with checkpoints in ``database_url`` (SqlSaver)."""
    return build_graph().compile(
        CompileConfig(
            checkpoint_saver=SqlSaver(database_url),
            executor=CeleryExecutor(celery_app),
            graph_id=graph_id,
        )
    )


app = make_app(
    os.environ.get(BROKER_ENV) or DEFAULT_BROKER_URL, os.environ.get(RESULT_BACKEND_ENV) or None
)
graph = compile_graph(app, os.environ.get(DATABASE_ENV) or DEFAULT_DATABASE_URL)
