"""Small graphs that ``test_cli.py`` runs through the CLI as ``cli_graphs:<name>``, with
``tests/`` as the working directory: in process (no executor), and on Celery's in-memory broker.

``checkpointed`` and ``routed`` keep their checkpoints in ``LGC_DATABASE_URL`` (the CLI's
``--db``), so a run parked by one CLI process can be resumed by another.
"""

from __future__ import annotations

import os
from typing import Any

from celery.app import Celery

from langgraph_celery import END, START, AgentState, Channels, CompileConfig, StateGraph
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

DATABASE_URL = os.environ.get("LGC_DATABASE_URL") or "sqlite://"


def double(state: AgentState) -> dict[str, Any]:
    return {"total": int(state.value("n", 0)) * 2, "steps": ["double"]}


def add(state: AgentState) -> dict[str, Any]:
    return {"total": int(state.value("total")) + int(state.value("add", 1)), "steps": ["add"]}


def boom(state: AgentState) -> dict[str, Any]:
    raise ValueError(f"cannot handle n={state.value('n')}")


#: ``double -> add``, not compiled: the CLI must refuse it.
builder = (
    StateGraph({"steps": Channels.appender()})
    .add_node("double", double)
    .add_node("add", add)
    .add_edge(START, "double")
    .add_edge("double", "add")
    .add_edge("add", END)
)

#: No checkpoint saver: runs without a thread.
arithmetic = builder.compile()

#: Checkpoints in SQLite (``LGC_DATABASE_URL``); parks before ``add``.
checkpointed = builder.compile(
    CompileConfig(
        checkpoint_saver=SqlSaver(DATABASE_URL),
        interrupt_before=("add",),
    )
)

#: Its only node raises.
failing = (
    StateGraph().add_node("boom", boom).add_edge(START, "boom").add_edge("boom", END).compile()
)

#: On Celery with the in-memory broker (the CLI starts a worker thread); ``add`` goes to its own
#: queue, which that worker must serve too.
app = Celery("cli_graphs", broker="memory://", backend="cache+memory://", set_as_current=False)
routed = builder.compile(
    CompileConfig(
        checkpoint_saver=SqlSaver(DATABASE_URL),
        executor=CeleryExecutor(app, routes={"add": "cli-graphs-add"}),
        graph_id="cli-graphs-routed",
    )
)
