"""Graphs that ``test_cli_prune.py`` prunes through the CLI as ``cli_retention_graphs:<name>``,
with ``tests/`` as the working directory: checkpoints in ``LGC_DATABASE_URL`` (the CLI's
``--db``), so that the test stores the threads and a CLI process prunes them."""

from __future__ import annotations

import os
from typing import Any

from langgraph_celery import END, START, AgentState, Channels, CompileConfig, StateGraph
from langgraph_celery.checkpoint import SqlSaver

DATABASE_URL = os.environ.get("LGC_DATABASE_URL") or "sqlite://"


def _appending(name: str) -> Any:
    def action(state: AgentState) -> dict[str, Any]:
        return {"log": name}

    return action


def build(url: str, graph_id: str | None = "retention-agent") -> Any:
    """``a -> b -> c``, parking before ``c``."""
    graph = StateGraph({"log": Channels.appender()})
    for node in "abc":
        graph.add_node(node, _appending(node))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    saver = SqlSaver(url)
    return graph.compile(
        CompileConfig(checkpoint_saver=saver, interrupt_before=("c",), graph_id=graph_id)
    )


#: With a graph id: its runs are in the run index under it (``prune --all``).
agent = build(DATABASE_URL)
#: Without one (``prune --all`` is refused).
anonymous = build(DATABASE_URL, graph_id=None)
#: No checkpoint saver.
stateless = (
    StateGraph().add_node("a", _appending("a")).add_edge(START, "a").add_edge("a", END).compile()
)
