"""A graph whose state holds what JSON cannot: ``test_cli_json.py`` runs ``cli_odd_state:odd``
through the CLI, from ``tests/``, with checkpoints in ``LGC_DATABASE_URL`` (SQLite).
"""

from __future__ import annotations

import math
import os
from typing import Any

from langgraph_celery import END, START, AgentState, CompileConfig, StateGraph
from langgraph_celery.checkpoint import SqlSaver

#: What ``odd`` stores under ``odd`` for each ``kind`` of its input.
ODD_VALUES: dict[str, Any] = {
    "non_finite": {"nan": math.nan, "inf": math.inf, "ninf": -math.inf, "list": [math.nan, 1.5]},
    "keys": {(1, "a"): "tuple", 2: "int", None: "none", 1.5: "float", True: "bool"},
    "surrogate": "a\udc80b\ud800",
}


def odd_node(state: AgentState) -> dict[str, Any]:
    return {"odd": ODD_VALUES[str(state.value("kind"))]}


odd = (
    StateGraph()
    .add_node("odd", odd_node)
    .add_edge(START, "odd")
    .add_edge("odd", END)
    .compile(
        CompileConfig(checkpoint_saver=SqlSaver(os.environ.get("LGC_DATABASE_URL") or "sqlite://"))
    )
)
