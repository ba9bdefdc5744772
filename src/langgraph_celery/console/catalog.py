"""The graphs a console serves, found in the modules named on its command line.

``langgraph-celery console MODULE`` serves every :class:`CompiledGraph` that is an attribute of
``MODULE`` (``MODULE:ATTRIBUTE`` serves that one only).  A graph is known by its ``graph_id``,
which is how the run index files its runs; graphs compiled without one are filed under ``""``
by the executors, so the console can tell only one of them apart (the first found).

The same modules provide the pydantic models of approval forms (see :mod:`.forms`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from langgraph_celery.checkpoint.base import BaseCheckpointSaver
from langgraph_celery.checkpoint.index import RunIndex
from langgraph_celery.graph.compiled import CompiledGraph

__all__ = ["Catalog", "CatalogError", "GraphEntry", "graphs_of"]

log = logging.getLogger("langgraph_celery.console")


class CatalogError(LookupError):
    """A graph or thread the console does not serve; the message says what it does serve."""


@dataclass(frozen=True)
class GraphEntry:
    """One graph the console serves."""

    #: the graph's ``graph_id`` (``""`` for a graph compiled without one)
    key: str
    #: ``module:attribute`` it was found as
    name: str
    graph: CompiledGraph
    module: ModuleType

    @property
    def saver(self) -> BaseCheckpointSaver | None:
        return self.graph.checkpoint_saver

    @property
    def index(self) -> RunIndex | None:
        """The saver's run index, if it keeps one."""
        saver = self.saver
        return saver if isinstance(saver, RunIndex) else None

    @property
    def on_celery(self) -> bool:
        return getattr(self.graph.config.executor, "app", None) is not None

    @property
    def shared(self) -> bool:
        """Whether other processes' runs are visible (the saver is shared across processes)."""
        saver = self.saver
        return saver is not None and saver.shared_across_processes

    @property
    def label(self) -> str:
        return self.key or f"{self.name} (no graph_id)"


def graphs_of(module: ModuleType, attribute: str | None = None) -> list[tuple[str, CompiledGraph]]:
    """``(name, graph)`` for the compiled graphs of ``module`` (``attribute`` only, if given)."""
    if attribute is not None:
        value: Any = module
        for part in attribute.split("."):
            value = getattr(value, part, None)
        if not isinstance(value, CompiledGraph):
            raise CatalogError(
                f"{module.__name__}:{attribute} is not a CompiledGraph; name one, or give the "
                "module alone to serve all of its compiled graphs"
            )
        return [(f"{module.__name__}:{attribute}", value)]
    found = [
        (f"{module.__name__}:{name}", value)
        for name, value in sorted(vars(module).items())
        if isinstance(value, CompiledGraph) and not name.startswith("_")
    ]
    if not found:
        raise CatalogError(
            f"module {module.__name__!r} has no CompiledGraph attribute; compile a graph there "
            "(builder.compile(CompileConfig(...))) or name it as MODULE:ATTRIBUTE"
        )
    return found


@dataclass
class Catalog:
    """The graphs served, by ``graph_id``, and the modules they came from."""

    entries: dict[str, GraphEntry] = field(default_factory=dict)
    modules: list[ModuleType] = field(default_factory=list)

    @classmethod
    def of(cls, found: Iterable[tuple[ModuleType, str, CompiledGraph]]) -> Catalog:
        catalog = cls()
        seen: set[int] = set()
        for module, name, graph in found:
            if module not in catalog.modules:
                catalog.modules.append(module)
            if id(graph) in seen:
                continue  # the same graph under two names
            seen.add(id(graph))
            key = graph.config.graph_id or ""
            if key in catalog.entries:
                log.warning(
                    "%s: graph id %r is served already (as %s); the console shows the first",
                    name,
                    key,
                    catalog.entries[key].name,
                )
                continue
            catalog.entries[key] = GraphEntry(key, name, graph, module)
        return catalog

    @classmethod
    def from_graphs(cls, graphs: Mapping[str, CompiledGraph]) -> Catalog:
        """A catalog of ``graphs`` by name (for tests and programs that build graphs in code)."""
        import sys

        found = []
        for name, graph in graphs.items():
            module = sys.modules.get(type(graph).__module__) or ModuleType(name)
            found.append((module, name, graph))
        return cls.of(found)

    def __iter__(self) -> Iterator[GraphEntry]:
        return iter(self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> GraphEntry:
        entry = self.entries.get(key)
        if entry is None:
            served = ", ".join(repr(k) for k in self.entries) or "none"
            raise CatalogError(f"no graph {key!r} is served here (graphs: {served})")
        return entry

    def indexed(self, key: str | None = None) -> Sequence[GraphEntry]:
        """The graphs whose saver keeps a run index (``key``'s only, if given)."""
        entries = [self.get(key)] if key is not None else list(self)
        return [entry for entry in entries if entry.index is not None]

    def savers(self) -> list[BaseCheckpointSaver]:
        """Each distinct saver of the graphs, once."""
        savers: list[BaseCheckpointSaver] = []
        for entry in self:
            saver = entry.saver
            if saver is not None and all(saver is not s for s in savers):
                savers.append(saver)
        return savers

    def entry_for_run(self, graph_id: str) -> GraphEntry | None:
        return self.entries.get(graph_id)
