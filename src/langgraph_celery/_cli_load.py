"""What ``langgraph-celery`` loads from the names on its command line: a module (``MODULE``), the
compiled graph ``MODULE:GRAPH`` names, or every compiled graph of a module.

A module that cannot be found is a :class:`UsageError` (exit code 2); a module that raises while
it is imported is an :class:`ImportFailure` (exit code 1: its code, not the command line, is at
fault).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from langgraph_celery._cli_input import UsageError

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = [
    "DEMO_TARGET",
    "ImportFailure",
    "import_module",
    "load_graph",
    "load_graphs",
    "missing_sqlite_file",
    "no_database",
    "other_owner",
]

DEMO_TARGET = "langgraph_celery.demo:graph"


class ImportFailure(Exception):
    """The module named on the command line raised while being imported (exit code 1)."""


def missing_sqlite_file(saver: object) -> str | None:
    """The absolute path of the SQLite file ``saver`` (a ``SqlSaver``) would open, when no such
    file exists; ``None`` for any other store.  The commands that only read the store (``state``,
    ``history``, ``runs``, ``status``, ``cancel``, ``prune``) then read nothing: opening it would
    create an empty database there, for a mistyped path as for any other."""
    url = getattr(getattr(saver, "engine", None), "url", None)
    if url is None or url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None  # (in memory, or a URI filename whose open mode SQLite decides)
    return None if os.path.exists(database) else os.path.abspath(database)


def no_database(path: str) -> str:
    """What a read of a missing SQLite store says (see :func:`missing_sqlite_file`)."""
    return (
        f"no SQLite database at {path}: nothing is stored there, and reading creates none; "
        "check the path given with --db (or LGC_DATABASE_URL, or in the graph's module)"
    )


def import_module(module_name: str) -> Any:
    """The module ``module_name``, found as ``celery -A`` finds it (the working directory
    first)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `celery -A` does: modules next to you are found
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise UsageError(f"cannot import module {module_name!r}: {error}") from None
        raise ImportFailure(f"importing {module_name!r} failed: {error!r}") from error
    except Exception as error:
        raise ImportFailure(f"importing {module_name!r} failed: {error!r}") from error


def load_graph(target: str) -> CompiledGraph:
    """The :class:`CompiledGraph` that ``MODULE:ATTRIBUTE`` names."""
    from langgraph_celery.graph.builder import StateGraph
    from langgraph_celery.graph.compiled import CompiledGraph

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"expected MODULE:GRAPH (e.g. {DEMO_TARGET}), got {target!r}")
    module = import_module(module_name)
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise UsageError(f"module {module_name!r} has no attribute {attribute!r}")
        value = getattr(value, part)
    if isinstance(value, CompiledGraph):
        return value
    hint = (
        " (compile it: builder.compile(CompileConfig(...)))"
        if isinstance(value, StateGraph)
        else ""
    )
    kind = type(value).__name__
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    raise UsageError(f"{target} is {article} {kind}, not a CompiledGraph{hint}")


def load_graphs(target: str) -> dict[str, CompiledGraph]:
    """The graphs ``target`` names, by their ``MODULE:GRAPH``: the one graph of ``MODULE:GRAPH``,
    or each :class:`CompiledGraph` a module holds at its top level (``MODULE``) under its first
    public name, in the order the module defines them."""
    from langgraph_celery.graph.compiled import CompiledGraph

    if ":" in target:
        return {target: load_graph(target)}
    if not target:
        raise UsageError(f"expected MODULE or MODULE:GRAPH (e.g. {DEMO_TARGET}), got ''")
    module = import_module(target)
    graphs: dict[str, CompiledGraph] = {}
    for name, value in vars(module).items():
        public = not name.startswith("_")
        alias = any(value is known for known in graphs.values())
        if isinstance(value, CompiledGraph) and public and not alias:
            graphs[f"{target}:{name}"] = value
    if not graphs:
        raise UsageError(
            f"module {target!r} holds no compiled graph at its top level; name one as "
            f"MODULE:GRAPH (e.g. {DEMO_TARGET})"
        )
    return graphs


def other_owner(graph: CompiledGraph, thread_id: str) -> str | None:
    """The ``graph_id`` of the other graph whose runs ``thread_id`` holds, or ``None`` (the
    thread is ``graph``'s, new, or either has no graph id)."""
    from langgraph_celery.graph._marks import Extra

    saver = graph.checkpoint_saver
    latest = saver.get(thread_id) if saver is not None else None
    owner = latest.extra.get(Extra.GRAPH_ID) if latest is not None else None
    graph_id = graph.config.graph_id
    return owner if owner is not None and graph_id is not None and owner != graph_id else None
