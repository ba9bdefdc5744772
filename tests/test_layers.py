"""The shape of the code: the superstep algorithm, the run loop's decisions and the step records
they read are pure (no executor, no store, no event loop)."""

from __future__ import annotations

import ast
from pathlib import Path

import langgraph_celery

PACKAGE = Path(langgraph_celery.__file__).parent
PURE = ("graph/_algo.py", "graph/_loop.py", "graph/_marks.py", "graph/_subgraph_state.py")
FORBIDDEN = (
    "asyncio",
    "celery",
    "kombu",
    "sqlalchemy",
    "redis",
    "psycopg",
    "langgraph_celery.worker",
)


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_algorithm_and_the_run_loop_import_no_executor_store_or_event_loop() -> None:
    for module in PURE:
        bad = {
            name
            for name in imported(PACKAGE / module)
            for forbidden in FORBIDDEN
            if name == forbidden or name.startswith(f"{forbidden}.")
        }
        assert not bad, f"{module} imports {sorted(bad)}"
