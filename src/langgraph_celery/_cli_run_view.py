"""What the command line knows of a run: :class:`RunView`, read from a graph's checkpoint saver.

A run is known from two places.  The saver's run index (:class:`RunIndex`) has one record per
run: thread, graph, status, node, times.  The checkpoint store has the rest, on the run's latest
checkpoint: the interruption (reason, metadata, deadline) of a parked run and the error of a
failed one, as Celery workers record them.  Where the two disagree the store wins when it shows
the run stopped (its marks are the run loop's truth), the record otherwise: the in-process
executor keeps no marks in the store, so for its runs the record tells parked, failed or
cancelled, and the reason and the error are not known.

A run id alone does not say where the run is stored: the module does (its graphs' savers), as
``celery -A MODULE`` names the app.  :func:`find_run` looks in the stores of the graphs
``MODULE`` holds (the run's graph is the one whose ``graph_id`` its record names) or of the one
``MODULE:GRAPH`` names.

Texts the store holds about what went wrong (an error's message, an interruption's reason) have
URL passwords masked, and the passwords of this command's URLs removed, before anyone prints
them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph_celery._cli_input import UsageError
from langgraph_celery._cli_load import load_graphs, missing_store
from langgraph_celery._cli_output import ENV_VARIABLES
from langgraph_celery._cli_secrets import Secrets, mask_urls
from langgraph_celery.checkpoint.index import RunIndex, RunRecord, RunStatus
from langgraph_celery.graph._loop import run_node

if TYPE_CHECKING:
    from langgraph_celery.checkpoint import SqlSaver
    from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointView
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = [
    "FoundRun",
    "RunView",
    "find_run",
    "find_run_in_store",
    "graph_key",
    "latest_of_run",
    "on_celery",
    "run_index",
    "run_view",
    "store_of_environment",
    "thread_run",
]


@dataclass(frozen=True)
class RunView:
    """A run as the command shows it: its record, with the interruption or the error the store
    holds on the run's latest checkpoint."""

    run_id: str
    thread_id: str
    graph_id: str
    status: RunStatus
    node: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: parked: the interruption's reason, deadline (ISO 8601, as stored) and metadata
    reason: str | None = None
    deadline: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    #: failed: the error's node, type and message
    error_node: str | None = None
    error_type: str | None = None
    error_message: str | None = None

    def to_json(self) -> dict[str, Any]:
        interruption = error = None
        if self.status is RunStatus.PARKED:
            interruption = {
                "node": self.node,
                "reason": self.reason,
                "deadline": self.deadline,
                "metadata": dict(self.metadata),
            }
        if self.error_type is not None:
            error = {
                "node": self.error_node,
                "type": self.error_type,
                "message": self.error_message,
            }
        return {
            "run_id": self.run_id,
            "graph_id": self.graph_id,
            "thread_id": self.thread_id,
            "status": self.status.value,
            "node": self.node,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "interruption": interruption,
            "error": error,
        }


def scrubbed(text: str | None) -> str | None:
    """``text`` with the passwords of the URLs in it masked, and those of this command's URLs
    (``--db``, ``--broker``... and the ``LGC_*`` variables) removed wherever they appear."""
    if text is None:
        return None
    secrets = Secrets(os.environ.get(variable, "") for variable in ENV_VARIABLES.values())
    return secrets.redact(mask_urls(text))


def run_view(view: CheckpointView | None, record: RunRecord | None) -> RunView:
    """The run of ``record`` (or, without one, of ``view``'s checkpoint), as the store's
    ``view`` of its latest checkpoint (if read) explains it."""
    from langgraph_celery.worker.client import status_of

    checkpoint = view.checkpoint if view is not None else None
    stored = status_of(view) if view is not None and checkpoint is not None else None
    if record is not None:
        run = RunView(
            record.run_id,
            record.thread_id,
            record.graph_id,
            record.status,
            record.node,
            record.created_at,
            record.updated_at,
        )
    elif checkpoint is not None and stored is not None:
        when = checkpoint.created_at
        run = RunView(checkpoint.run_id, checkpoint.thread_id, _graph_of(checkpoint), stored.status)
        run = replace(run, created_at=when, updated_at=when)
    else:
        raise ValueError("a run is known by its record or by a checkpoint of it")
    if stored is not None and (stored.terminal or record is None):
        run = replace(run, status=stored.status)  # (else the record knows better: see above)
    run = replace(run, node=run_node(run.status, run.node, checkpoint))
    if stored is None or stored.status is not run.status:
        return run
    if stored.parking is not None:
        metadata = dict(stored.parking.metadata)
        expires = metadata.get("expires_at")
        run = replace(
            run,
            node=stored.parking.node_id,
            reason=scrubbed(stored.parking.reason),
            deadline=str(expires) if expires is not None else None,
            metadata=metadata,
        )
    if stored.failure is not None:
        run = replace(
            run,
            node=stored.failure.node_id,
            error_node=stored.failure.node_id,
            error_type=stored.failure.error_type,
            error_message=scrubbed(stored.failure.message),
        )
    return run


def _graph_of(checkpoint: Checkpoint | None) -> str:
    """The id of the graph that owns ``checkpoint``'s thread ("" for a graph without one)."""
    from langgraph_celery.graph._marks import Extra

    owner = checkpoint.extra.get(Extra.GRAPH_ID) if checkpoint is not None else None
    return owner if isinstance(owner, str) else ""


def latest_of_run(
    saver: BaseCheckpointSaver, thread_id: str, run_id: str, *, history: bool
) -> CheckpointView | None:
    """The store's view of the run's latest checkpoint: one read when it is the thread's latest
    checkpoint; else, with ``history``, found in the thread's checkpoints (``None`` if none)."""
    view = saver.get_with_writes(thread_id)
    if view.checkpoint is None or view.checkpoint.run_id == run_id:
        return view if view.checkpoint is not None else None
    if not history:
        return None
    from langgraph_celery.worker.cancelling import run_in_history

    mine = run_in_history(saver, thread_id, run_id, view.checkpoint.checkpoint_id)
    return saver.get_with_writes(thread_id, mine.checkpoint_id) if mine is not None else None


def graph_key(graph: CompiledGraph) -> str:
    """The id the run index files ``graph``'s runs under ("" without a ``graph_id``)."""
    return graph.config.graph_id or ""


def on_celery(graph: CompiledGraph) -> bool:
    return getattr(graph.config.executor, "app", None) is not None


def run_index(graph: CompiledGraph, target: str) -> BaseCheckpointSaver:
    """``graph``'s checkpoint saver, which must keep a run index."""
    saver = graph.checkpoint_saver
    if saver is None:
        raise UsageError(
            f"{target} has no checkpoint saver, so its runs are not recorded; compile it with "
            "one (CompileConfig(checkpoint_saver=SqlSaver(...)))"
        )
    if not isinstance(saver, RunIndex):
        raise UsageError(
            f"the checkpoint saver of {target} ({type(saver).__name__}) keeps no run index; "
            "use a saver that implements RunIndex (SqlSaver, MemorySaver)"
        )
    return saver


def thread_run(
    graph: CompiledGraph, thread_id: str, checkpoint_id: str | None = None
) -> RunView | None:
    """The run of the thread's latest checkpoint (or of the one named), ``None`` without one
    (or without a saver)."""
    saver = graph.checkpoint_saver
    if saver is None:
        return None
    checkpoint = saver.get(thread_id, checkpoint_id)
    if checkpoint is None:
        return None
    record = saver.get_run(checkpoint.run_id) if isinstance(saver, RunIndex) else None
    view = latest_of_run(saver, thread_id, checkpoint.run_id, history=True)
    return run_view(view, record)


@dataclass(frozen=True)
class FoundRun:
    target: str
    graph: CompiledGraph
    run: RunView


def find_run(target: str, run_id: str) -> FoundRun:
    """Run ``run_id`` among the runs of the graphs ``target`` (``MODULE[:GRAPH]``) names."""
    from langgraph_celery.errors import GraphStateError

    graphs = load_graphs(target)
    indexed = {name: graph for name, graph in graphs.items() if graph.checkpoint_saver}
    if ":" in target:
        run_index(graphs[target], target)
    elif not indexed:
        raise UsageError(f"no graph of module {target!r} has a checkpoint saver: no run is kept")
    missing: list[str] = []
    for name, graph in indexed.items():
        saver = graph.checkpoint_saver
        assert saver is not None
        gap = missing_store(saver)
        if gap is not None:  # (nothing stored there: read nothing)
            missing.append(gap)
            continue
        record = saver.get_run(run_id) if isinstance(saver, RunIndex) else None
        thread_id = record.thread_id if record is not None else _thread_of(saver, run_id)
        if thread_id is None:
            continue
        view = latest_of_run(saver, thread_id, run_id, history=True)
        if record is None and view is None:
            continue
        run = run_view(view, record)
        return FoundRun(*_owner(target, graphs, name, run), run)
    if missing and len(missing) == len(indexed):
        raise GraphStateError(
            f"no run {run_id!r} in the checkpoint store of {target}; {missing[0]}"
        )
    kinds = sorted({type(graph.checkpoint_saver).__name__ for graph in indexed.values()})
    where = (
        "a MemorySaver keeps the runs of the process that made them only"
        if kinds == ["MemorySaver"]
        else "check that --db (or LGC_DATABASE_URL) names the database the run was stored in"
    )
    raise GraphStateError(
        f"no run {run_id!r} in the checkpoint store of {target} ({' or '.join(kinds)}); check "
        f"the run id; {where}"
    )


@contextlib.contextmanager
def store_of_environment(command: str) -> Iterator[SqlSaver]:
    """The checkpoint store ``--db`` (or ``LGC_DATABASE_URL``) names, for ``command RUN_ID``."""
    from langgraph_celery.checkpoint import SqlSaver

    url = os.environ.get("LGC_DATABASE_URL")
    if not url:
        raise UsageError(
            f"{command} RUN_ID reads the run from a checkpoint store: give it with --db URL (or "
            f"LGC_DATABASE_URL), or name the module whose graphs use it: {command} MODULE RUN_ID"
        )
    saver = SqlSaver(url)
    try:
        yield saver
    finally:
        saver.dispose()


def find_run_in_store(saver: SqlSaver, run_id: str) -> RunView:
    """Run ``run_id`` in ``saver``, the store ``--db`` (or ``LGC_DATABASE_URL``) names."""
    from langgraph_celery.errors import GraphStateError

    gap = missing_store(saver)
    if gap is not None:
        where = scrubbed(os.environ.get("LGC_DATABASE_URL"))
        raise GraphStateError(f"no run {run_id!r} in the checkpoint store {where}; {gap}")
    record = saver.get_run(run_id)
    thread_id = record.thread_id if record is not None else saver.thread_of_run(run_id)
    view = None if thread_id is None else latest_of_run(saver, thread_id, run_id, history=True)
    if record is None and view is None:
        where = scrubbed(os.environ.get("LGC_DATABASE_URL"))
        raise GraphStateError(
            f"no run {run_id!r} in the checkpoint store {where}; check the run id and that "
            "--db (or LGC_DATABASE_URL) names the database the run was stored in"
        )
    return run_view(view, record)


def _thread_of(saver: BaseCheckpointSaver, run_id: str) -> str | None:
    return saver.thread_of_run(run_id) if isinstance(saver, RunIndex) else None


def _owner(
    target: str, graphs: Mapping[str, CompiledGraph], found_by: str, run: RunView
) -> tuple[str, CompiledGraph]:
    """The graph of ``run`` among ``graphs`` (the one ``target`` names, if it names one)."""
    if ":" in target:
        graph = graphs[target]
        if graph_key(graph) != run.graph_id:
            raise UsageError(
                f"run {run.run_id} is a run of {_graph_name(run.graph_id)}, not of "
                f"{target} ({_graph_name(graph_key(graph))}); name its graph, or its module "
                "alone"
            )
        return target, graph
    owners = [
        name
        for name, graph in graphs.items()
        if graph.checkpoint_saver is not None and graph_key(graph) == run.graph_id
    ]
    if not owners:
        raise UsageError(
            f"run {run.run_id} is a run of {_graph_name(run.graph_id)}, which module "
            f"{target!r} does not hold; name the module that compiles it"
        )
    name = found_by if found_by in owners else owners[0]
    return name, graphs[name]


def _graph_name(graph_id: str) -> str:
    return f"graph {graph_id!r}" if graph_id else "a graph without a graph_id"
