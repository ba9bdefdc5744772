"""The statements of :class:`~langgraph_celery.checkpoint.sql.SqlSaver`'s run index (the runs'
records, their pages) and of retention (``prune``, ``delete_thread``, the reaper's expiry of
completed runs), as :func:`~langgraph_celery.checkpoint._statements.build_statements` gathers
them: built once per saver, every value a bound parameter."""

from __future__ import annotations

import itertools
from typing import Any

from sqlalchemy import Integer, String, bindparam, delete, false, insert, or_, select
from sqlalchemy.dialects import postgresql

from langgraph_celery.checkpoint._retention import CHILD_ESCAPE
from langgraph_celery.checkpoint._schema import Tables

__all__ = ["recording_run", "retention_statements", "run_statements"]

_RUN_COLUMNS = ("run_id", "thread_id", "graph_id", "status", "node", "created_at", "updated_at")


def _upserting_run(upsert: Any, r: Any) -> Any:
    """``upsert`` (an insert of a run's record) updating the stored record unless it is newer
    or of another thread or graph."""
    new = upsert.excluded
    return upsert.on_conflict_do_update(
        index_elements=["run_id"],
        set_={
            "status": new.status,
            "node": new.node,
            "updated_at": new.updated_at,
            "superseded": False,
        },
        where=(r.updated_at <= new.updated_at)
        & (r.thread_id == new.thread_id)
        & (r.graph_id == new.graph_id),
    )


def recording_run(tables: Tables) -> Any:
    """PostgreSQL: ``upsert_run`` with its columns as ``r_*`` parameters (for a CTE)."""
    r = tables.runs.c
    values = {name: bindparam(f"r_{name}", type_=r[name].type) for name in _RUN_COLUMNS}
    return _upserting_run(postgresql.insert(tables.runs).values(values), r)


def run_statements(tables: Tables, module: Any) -> dict[str, Any]:
    runs = tables.runs
    r = runs.c
    upsert_run = None
    if module is not None:
        upsert_run = _upserting_run(module.insert(runs), r)
    pages = {}
    for by_graph, by_status, paged in itertools.product((False, True), repeat=3):
        page = select(*runs.c)
        if by_graph:
            page = page.where(r.graph_id == bindparam("graph_id", type_=String))
        if by_status:
            page = page.where(r.status == bindparam("status", type_=r.status.type))
        if paged:
            created = bindparam("b_created_at", type_=r.created_at.type)
            older = (r.created_at == created) & (r.run_id < bindparam("b_run_id", type_=String))
            page = page.where(or_(r.created_at < created, older))
        pages[(by_graph, by_status, paged)] = page.order_by(
            r.created_at.desc(), r.run_id.desc()
        ).limit(bindparam("limit", type_=Integer))
    return {
        "upsert_run": upsert_run,
        "insert_run": insert(runs),
        "update_run": runs.update()
        .where(
            r.run_id == bindparam("b_run_id", type_=String),
            r.thread_id == bindparam("b_thread_id", type_=String),
            r.graph_id == bindparam("b_graph_id", type_=String),
            r.updated_at <= bindparam("b_updated_at", type_=r.updated_at.type),
        )
        .values(
            status=bindparam("b_status", type_=r.status.type),
            node=bindparam("b_node", type_=String),
            updated_at=bindparam("b_updated_at", type_=r.updated_at.type),
            superseded=False,
        ),
        "run_by_id": select(*runs.c).where(r.run_id == bindparam("run_id", type_=String)),
        "runs_page": pages,
    }


def retention_statements(tables: Tables) -> dict[str, Any]:
    checkpoints, writes, runs = tables.checkpoints, tables.writes, tables.runs
    c, w, r = checkpoints.c, writes.c, runs.c
    thread_id = bindparam("thread_id", type_=String)
    ids = bindparam("ids", type_=String, expanding=True)
    newer_run = runs.alias("newer_run")
    newer = (
        select(newer_run.c.run_id)
        .where(
            newer_run.c.thread_id == r.thread_id,
            or_(
                newer_run.c.created_at > r.created_at,
                (newer_run.c.created_at == r.created_at) & (newer_run.c.run_id > r.run_id),
            ),
        )
        .exists()
    )
    completed = r.status == bindparam("completed", type_=r.status.type)
    return {
        "refs": select(c.checkpoint_id, c.run_id, c.parent_id, c.base_id)
        .where(c.thread_id == thread_id, c.pruned_at.is_(None))
        .order_by(c.seq.desc()),
        "lock_live": select(c.seq)
        .where(c.thread_id == thread_id, c.checkpoint_id.in_(ids), c.pruned_at.is_(None))
        .order_by(c.seq)
        .with_for_update(),
        "prune": checkpoints.update()
        .where(
            c.thread_id == bindparam("b_thread_id", type_=String),
            c.checkpoint_id.in_(ids),
            c.pruned_at.is_(None),
        )
        .values(body="", pruned_at=bindparam("now", type_=c.pruned_at.type)),
        "prune_writes": delete(writes).where(w.thread_id == thread_id, w.checkpoint_id.in_(ids)),
        "completed_of_thread": select(r.run_id).where(r.thread_id == thread_id, completed),
        "child_threads": select(c.thread_id)
        .distinct()
        .where(c.thread_id.like(bindparam("pattern", type_=String), escape=CHILD_ESCAPE)),
        "delete_thread": (
            delete(writes).where(w.thread_id == thread_id),
            delete(checkpoints).where(c.thread_id == thread_id, c.pruned_at.is_(None)),
            delete(checkpoints).where(c.thread_id == thread_id),
            delete(tables.timers).where(tables.timers.c.thread_id == thread_id),
            delete(runs).where(r.thread_id == thread_id),
        ),
        "completed_runs": select(*runs.c, newer.label("newer"))
        .where(
            r.graph_id == bindparam("graph_id", type_=String),
            completed,
            r.superseded == false(),
            r.updated_at < bindparam("before", type_=r.updated_at.type),
        )
        .order_by(r.updated_at, r.run_id)
        .limit(bindparam("limit", type_=Integer)),
        "supersede_runs": runs.update().where(r.run_id.in_(ids)).values(superseded=True),
        "supersede_run": runs.update()
        .where(
            r.run_id == bindparam("b_run_id", type_=String),
            r.updated_at == bindparam("b_updated_at", type_=r.updated_at.type),
        )
        .values(superseded=True),
    }
