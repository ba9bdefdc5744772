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
from langgraph_celery._cli_secrets import masked

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = [
    "DEMO_TARGET",
    "ImportFailure",
    "import_module",
    "load_graph",
    "load_graphs",
    "missing_store",
    "other_owner",
]

DEMO_TARGET = "langgraph_celery.demo:graph"


class ImportFailure(Exception):
    """The module named on the command line raised while being imported (exit code 1)."""


def missing_store(saver: object) -> str | None:
    """What a read of ``saver`` (a ``SqlSaver``) would find missing, as a sentence, when it
    holds nothing of ours: the SQLite file, or the saver's tables in its database; ``None`` when
    it may hold something, and for any other saver.  The commands that only read the store
    (``state``, ``history``, ``runs``, ``status``, ``cancel``, ``prune``) then read nothing:
    reading would create an empty database, or the tables, for a mistyped path or URL as for
    any other."""
    database = sys.modules.get("langgraph_celery.checkpoint._database")
    if database is None or not isinstance(saver, database.SqlDatabase):
        return None  # (no SQL saver was even imported)
    url = saver.engine.url
    where = "(or LGC_DATABASE_URL, or in the graph's module)"
    if url.get_backend_name() == "sqlite":
        path = url.database or ""
        if path in ("", ":memory:") or path.startswith("file:"):
            return None  # (in memory, or a URI filename whose open mode SQLite decides)
        if not os.path.exists(path):
            return (
                f"no SQLite database at {os.path.abspath(path)}: nothing is stored there, and "
                f"reading creates none; check the path given with --db {where}"
            )
    if saver._holds_tables():
        return None
    return (
        f"no tables {saver.table_prefix}* in {masked(url.render_as_string(hide_password=False))}: "
        f"nothing is stored there, and reading creates none; check the URL given with --db "
        f"{where} and the saver's table_prefix"
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
