"""Graphs on Celery that ``test_cli_runs.py`` lists, inspects and cancels through the CLI as
``cli_runs_graphs:<name>``, with ``tests/`` as the working directory.

The broker is ``LGC_BROKER_URL`` (default ``memory://``: the CLI starts a worker thread), the
checkpoints ``LGC_DATABASE_URL``; a ``celery -A cli_runs_graphs worker`` serves all three graphs.

- ``approval``: ``draft -> approve``; ``approve`` parks with a reason (:data:`REASON`, then the
  input's ``note``), metadata, a deadline (its ``timeout``) and a suggested resume update until
  the state holds ``approved``.
- ``broken``: ``check`` fails with an error whose message holds a database URL and its password.
- ``slow``: ``tick`` loops (0.3 s a step) until ``ticks`` reaches ``until``: a run to cancel;
  ``slow_here`` is the same graph run in process (no executor).
"""

from __future__ import annotations

import os
import time
from typing import Any

from celery.app import Celery

from langgraph_celery import END, START, AgentState, CompileConfig, GraphInterrupt, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

BROKER_URL = os.environ.get("LGC_BROKER_URL") or "memory://"
DATABASE_URL = os.environ.get("LGC_DATABASE_URL") or "sqlite://"
#: What ``broken`` fails with: a URL whose password the CLI must never print.
LEAKY_URL = "postgresql://app:hunter2-Secret@db.internal:5432/orders"
REASON = "a human approves the refund"
#: Seconds ``approve`` parks for before its deadline.
APPROVAL_TIMEOUT = 3600

backend = "cache+memory://" if BROKER_URL.startswith("memory://") else BROKER_URL
app = Celery("cli_runs_graphs", broker=BROKER_URL, backend=backend, set_as_current=False)
executor = CeleryExecutor(app)


def draft(state: AgentState) -> dict[str, Any]:
    return {"amount": int(state.value("amount", 10))}


def approve(state: AgentState) -> dict[str, Any]:
    if state.value("approved") is None:
        raise GraphInterrupt(
            REASON + str(state.value("note", "")),
            {
                "amount": state.value("amount"),
                "timeout": APPROVAL_TIMEOUT,
                "resume_with": {"approved": True},
            },
        )
    return {"status": "approved" if state.value("approved") else "rejected"}


def check(state: AgentState) -> dict[str, Any]:
    raise ConnectionError(f"cannot reach {LEAKY_URL}: connection refused")


def tick(state: AgentState) -> dict[str, Any]:
    time.sleep(0.3)
    return {"ticks": int(state.value("ticks", 0)) + 1}


def again(state: AgentState) -> str:
    return "tick" if int(state.value("ticks", 0)) < int(state.value("until", 1000)) else END


def _compiled(builder: StateGraph, graph_id: str, on_celery: bool = True) -> Any:
    return builder.compile(
        CompileConfig(
            checkpoint_saver=SqlSaver(DATABASE_URL),
            executor=executor if on_celery else None,
            graph_id=graph_id,
            recursion_limit=10_000,
        )
    )


approval = _compiled(
    StateGraph()
    .add_node("draft", draft)
    .add_node("approve", approve)
    .add_edge(START, "draft")
    .add_edge("draft", "approve")
    .add_edge("approve", END),
    "cli-runs-approval",
)

broken = _compiled(
    StateGraph().add_node("check", check).add_edge(START, "check").add_edge("check", END),
    "cli-runs-broken",
)


def _ticking() -> StateGraph:
    return (
        StateGraph()
        .add_node("tick", tick)
        .add_edge(START, "tick")
        .add_conditional_edges("tick", again, {"tick": "tick", END: END})
    )


slow = _compiled(_ticking(), "cli-runs-slow")
slow_here = _compiled(_ticking(), "cli-runs-slow-here", on_celery=False)
