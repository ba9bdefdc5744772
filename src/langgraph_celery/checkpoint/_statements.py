"""The statements :class:`~langgraph_celery.checkpoint.sql.SqlSaver` runs, built once per saver.

Building a SQLAlchemy Core statement (and its cache key) costs more CPU than the round trip it
makes on a loopback database: a node task's one-statement read took about three times as long to
build as to run.  Every statement here takes its values as bound parameters, so a saver builds
each one once and executes it with a parameter dictionary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Executable,
    Integer,
    String,
    Text,
    bindparam,
    cast,
    delete,
    insert,
    null,
    or_,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Select

from langgraph_celery.checkpoint._schema import Tables
from langgraph_celery.checkpoint._statements_runs import (
    recording_run,
    retention_statements,
    run_statements,
)
from langgraph_celery.checkpoint.base import WriteKind

__all__ = ["Statements", "build_statements"]

_TIMER_COLUMNS = ("thread_id", "run_id", "graph_id", "kind", "due_at")


@dataclass(frozen=True)
class Statements:
    """Parameters: ``thread_id``, ``checkpoint_id``, ``run_id``, ``task_id``, ``node``, ``due_at``,
    ``now``, ``limit`` and the columns of the row an insert stores (a checkpoint's inserts,
    ``put`` and the ``put_*_timer*`` ones, take every column of ``<prefix>checkpoints`` but
    ``seq`` and ``pruned_at``, ``successor_of`` among them: see ``SqlSaver._checkpoint_row``)."""

    latest: Select[Any]
    by_id: Select[Any]
    history: Select[Any]
    #: ``history``'s first ``limit`` rows; and those stored before checkpoint ``checkpoint_id``
    recent: Select[Any]
    recent_before: Select[Any]
    view_latest: Select[Any]
    view_by_id: Select[Any]
    writes_of: Select[Any]
    #: Insert a checkpoint's row, unless it is a delta whose parent is pruned or not stored
    #: (row count 0; the ``put_*`` below too): see :func:`_checkpoint_insert`.
    put: Executable
    #: PostgreSQL: ``put`` that also removes the thread's timer of the run (parameters
    #: ``t_thread_id``, ``t_run_id``), and ``put`` that also sets the thread's timer (``t_*``: its
    #: columns), each one statement (``None`` elsewhere: a transaction of two statements).
    put_clearing_timer: Executable | None
    put_arming_timer: Executable | None
    #: PostgreSQL: those two that also store the run's record as ``upsert_run`` does (``r_*``:
    #: its columns), one statement each (``None`` elsewhere: a transaction).
    put_clearing_timer_recording: Executable | None
    put_arming_timer_recording: Executable | None
    #: Insert a write unless one is there (``None``: the dialect has no such insert).
    put_write_ignoring: Executable | None
    put_write: Executable
    delete_write: Executable
    #: Insert or replace the thread's timer (``None``: the dialect has no upsert).
    upsert_timer: Executable | None
    update_timer: Executable
    insert_timer: Executable
    clear_timer: Executable
    clear_timer_at: Executable
    due_timers: Select[Any]
    thread_of_run: Select[Any]
    #: A checkpoint's place in its chain of deltas (``base_id``, ``budget``, ``depth``).
    chain_of: Select[Any]
    #: One checkpoint's ``checkpoint_id``, ``parent_id`` and ``body``; and those of a chain:
    #: the whole value ``base_id`` and the deltas read from it.
    body_of: Select[Any]
    bodies_of_chain: Select[Any]
    #: Store checkpoint ``b_checkpoint_id`` of ``b_thread_id`` whole: ``body``, ``budget``,
    #: ``depth`` (its ``base_id`` cleared).
    make_whole: Executable
    #: The thread's checkpoints a refused one may collide with: the same ``checkpoint_id``, the
    #: same ``run_id`` and ``step``, no parent, or the same parent as successors
    #: (``successor_of``; see ``checkpoint/_conflicts.py``).
    colliding: Select[Any]
    #: The node of the write of ``task_id`` at ``checkpoint_id`` (no row: none).
    write_of_task: Select[Any]
    #: Insert a run's record or update it (``status``, ``node``, ``updated_at``) unless the
    #: stored one is newer or of another thread or graph: row count 0 (``None``: the dialect has
    #: no upsert; then ``insert_run`` and ``update_run``, whose parameters are ``b_*``).
    upsert_run: Executable | None
    insert_run: Executable
    update_run: Executable
    run_by_id: Select[Any]
    #: ``list_runs`` by which filters it has: (graph_id, status, before) -> its query.
    #: Parameters ``graph_id``, ``status``, ``b_created_at`` and ``b_run_id``, ``limit``.
    runs_page: dict[tuple[bool, bool, bool], Select[Any]]
    # -- retention ---------------------------------------------------------------------------
    #: The thread's checkpoints (not pruned) as ids, newest first.
    refs: Select[Any]
    #: Lock the thread's checkpoints ``ids`` (expanding) not pruned, for a prune that then
    #: reads what is read from them (PostgreSQL: ``FOR UPDATE``; SQLite locks the database).
    lock_live: Select[Any]
    #: Prune the checkpoints ``ids`` (expanding) of thread ``b_thread_id``: empty body,
    #: ``pruned_at`` set to ``now``; and delete their writes (of thread ``thread_id``).
    prune: Executable
    prune_writes: Executable
    #: The thread's runs recorded as completed.
    completed_of_thread: Select[Any]
    #: Delete the thread's writes, checkpoints not pruned (its row count), pruned ones, timer
    #: and run records.
    child_threads: Executable
    delete_thread: tuple[Executable, ...]
    #: Completed runs of ``graph_id`` not superseded, updated before ``before``, oldest first,
    #: at most ``limit``, each with ``newer``: whether its thread has a run recorded after it.
    completed_runs: Select[Any]
    #: Set aside the runs ``ids`` (expanding); one run ``b_run_id`` if its record is still the
    #: one updated at ``b_updated_at``.
    supersede_runs: Executable
    supersede_run: Executable


def build_statements(tables: Tables, dialect: str) -> Statements:
    checkpoints, writes, timers = tables.checkpoints, tables.writes, tables.timers
    thread_id = bindparam("thread_id", type_=String)
    checkpoint_id = bindparam("checkpoint_id", type_=String)
    c = checkpoints.c
    columns = (
        *(c.seq, c.checkpoint_id, c.run_id, c.step, c.parent_id, c.created_at, c.body, c.kind),
        *(c.base_id, c.budget, c.depth),
    )
    of_thread = select(*columns).where(c.thread_id == thread_id, c.pruned_at.is_(None))
    latest = of_thread.order_by(c.seq.desc()).limit(1)
    by_id = of_thread.where(c.checkpoint_id == checkpoint_id)
    limit = bindparam("limit", type_=Integer)
    mark = checkpoints.alias("anchor")
    anchor = (
        select(mark.c.seq)
        .where(mark.c.thread_id == thread_id, mark.c.checkpoint_id == checkpoint_id)
        .scalar_subquery()
    )

    module: Any = {"postgresql": postgresql, "sqlite": sqlite}.get(dialect)
    put_write_ignoring = upsert_timer = None
    if module is not None:
        put_write_ignoring = module.insert(writes).on_conflict_do_nothing()
        upsert = module.insert(timers)
        upsert_timer = upsert.on_conflict_do_update(
            index_elements=["thread_id"],
            set_={name: getattr(upsert.excluded, name) for name in _TIMER_COLUMNS[1:]},
        )
    t = timers.c
    clear_timer = delete(timers).where(
        t.thread_id == thread_id, t.run_id == bindparam("run_id", type_=String)
    )
    w = writes.c
    put = _checkpoint_insert(tables, dialect)
    put_clearing_timer = put_arming_timer = None
    put_clearing_timer_recording = put_arming_timer_recording = None
    if dialect == "postgresql":
        timer_of_run = (t.thread_id == bindparam("t_thread_id", type_=String)) & (
            t.run_id == bindparam("t_run_id", type_=String)
        )
        put_clearing_timer = put.add_cte(delete(timers).where(timer_of_run).cte("cleared"))
        arm = postgresql.insert(timers).values(
            {name: bindparam(f"t_{name}", type_=t[name].type) for name in _TIMER_COLUMNS}
        )
        arm = arm.on_conflict_do_update(
            index_elements=["thread_id"],
            set_={name: getattr(arm.excluded, name) for name in _TIMER_COLUMNS[1:]},
        )
        put_arming_timer = put.add_cte(arm.cte("armed"))
        recorded = recording_run(tables)
        put_clearing_timer_recording = put.add_cte(
            delete(timers).where(timer_of_run).cte("cleared"), recorded.cte("recorded")
        )
        put_arming_timer_recording = put.add_cte(arm.cte("armed"), recorded.cte("recorded"))
    return Statements(
        latest=latest,
        by_id=by_id,
        history=of_thread.order_by(c.seq.desc()),
        recent=of_thread.order_by(c.seq.desc()).limit(limit),
        recent_before=of_thread.where(c.seq < anchor).order_by(c.seq.desc()).limit(limit),
        view_latest=_view(tables, latest, thread_id),
        view_by_id=_view(tables, by_id, thread_id),
        writes_of=select(w.task_id, w.node, w.body, w.kind)
        .where(w.thread_id == thread_id, w.checkpoint_id == checkpoint_id)
        .order_by(w.seq, w.task_id),
        put=put,
        put_clearing_timer=put_clearing_timer,
        put_arming_timer=put_arming_timer,
        put_clearing_timer_recording=put_clearing_timer_recording,
        put_arming_timer_recording=put_arming_timer_recording,
        put_write_ignoring=put_write_ignoring,
        put_write=insert(writes),
        delete_write=delete(writes).where(
            w.thread_id == thread_id,
            w.checkpoint_id == checkpoint_id,
            w.task_id == bindparam("task_id", type_=String),
            w.node == bindparam("node", type_=String),
        ),
        upsert_timer=upsert_timer,
        update_timer=timers.update().where(t.thread_id == bindparam("b_thread_id", type_=String)),
        insert_timer=insert(timers),
        clear_timer=clear_timer,
        clear_timer_at=clear_timer.where(t.due_at == bindparam("due_at", type_=t.due_at.type)),
        due_timers=select(t.thread_id, t.run_id, t.graph_id, t.kind, t.due_at)
        .where(t.due_at <= bindparam("now", type_=t.due_at.type))
        .order_by(t.due_at)
        .limit(bindparam("limit", type_=Integer)),
        chain_of=select(c.base_id, c.budget, c.depth).where(
            c.thread_id == thread_id, c.checkpoint_id == checkpoint_id, c.pruned_at.is_(None)
        ),
        body_of=select(c.checkpoint_id, c.parent_id, c.body).where(
            c.thread_id == thread_id, c.checkpoint_id == checkpoint_id, c.pruned_at.is_(None)
        ),
        bodies_of_chain=select(c.checkpoint_id, c.parent_id, c.body).where(
            c.thread_id == thread_id,
            or_(
                c.checkpoint_id == bindparam("base_id", type_=String),
                c.base_id == bindparam("base_id", type_=String),
            ),
            c.pruned_at.is_(None),
        ),
        make_whole=checkpoints.update()
        .where(
            c.thread_id == bindparam("b_thread_id", type_=String),
            c.checkpoint_id == bindparam("b_checkpoint_id", type_=String),
            c.pruned_at.is_(None),
        )
        .values(
            body=bindparam("body", type_=c.body.type),
            base_id=null(),
            budget=bindparam("budget", type_=c.budget.type),
            depth=bindparam("depth", type_=c.depth.type),
        ),
        thread_of_run=select(c.thread_id)
        .where(c.run_id == bindparam("run_id", type_=String), c.pruned_at.is_(None))
        .limit(1),
        colliding=select(c.checkpoint_id, c.run_id, c.step, c.parent_id, c.successor_of)
        .where(
            c.thread_id == thread_id,
            or_(
                c.checkpoint_id == checkpoint_id,
                (c.run_id == bindparam("run_id", type_=String))
                & (c.step == bindparam("step", type_=Integer)),
                c.parent_id.is_(None),
                c.successor_of == bindparam("successor_of", type_=String),
            ),
        )
        .limit(8),
        write_of_task=select(w.node).where(
            w.thread_id == thread_id,
            w.checkpoint_id == checkpoint_id,
            w.task_id == bindparam("task_id", type_=String),
        ),
        **run_statements(tables, module),
        **retention_statements(tables),
    )


def _checkpoint_insert(tables: Tables, dialect: str) -> Any:
    """Insert a checkpoint's row (its columns as parameters, but ``seq`` and ``pruned_at``)
    unless it is a delta (``base_id`` set) of a parent that is pruned or not stored: then
    nothing (row count 0), and the saver stores it whole.  A prune of the parent that commits
    first is seen; on PostgreSQL the check locks the parent's row (``FOR KEY SHARE``) until
    the insert commits, so a prune that locked it first is waited for and seen, and one that
    locks it after waits and then finds the delta (see ``SqlRetention._remove_unneeded``)."""
    checkpoints = tables.checkpoints
    c = checkpoints.c
    names = [col.name for col in checkpoints.columns if col.name not in ("seq", "pruned_at")]

    def value(name: str) -> Any:
        param = bindparam(name, type_=c[name].type)
        if dialect != "postgresql":
            return param
        # (PostgreSQL deduces no type for a parameter in a SELECT list; a string as TEXT:
        # cast to VARCHAR(255), a longer one would be cut, where storing it refuses it)
        return cast(param, Text if isinstance(c[name].type, String) else c[name].type)

    parent = checkpoints.alias("parent")
    stored_parent = (
        select(parent.c.seq)
        .where(
            parent.c.thread_id == value("thread_id"),
            parent.c.checkpoint_id == value("parent_id"),
            parent.c.pruned_at.is_(None),
        )
        .with_for_update(read=True, key_share=True)
        .exists()
    )
    row = select(*(value(name) for name in names)).where(
        or_(value("base_id").is_(None), stored_parent)
    )
    return insert(checkpoints).from_select(names, row)


def _view(tables: Tables, chosen: Select[Any], thread_id: Any) -> Select[Any]:
    """One statement: the chosen checkpoint, whether its run has stored the next step, its
    writes, and its parent's marks (writes of another kind than ``update``)."""
    checkpoints, writes = tables.checkpoints, tables.writes
    found = chosen.cte("chosen")
    successor = checkpoints.alias("successor")
    committed = (
        select(successor.c.seq)
        .where(
            successor.c.thread_id == thread_id,
            successor.c.run_id == found.c.run_id,
            successor.c.step == found.c.step + 1,
        )
        .exists()
    )
    return (
        select(
            found,
            committed.label("w_committed"),
            writes.c.checkpoint_id.label("w_checkpoint_id"),
            writes.c.task_id.label("w_task_id"),
            writes.c.node.label("w_node"),
            writes.c.body.label("w_body"),
            writes.c.kind.label("w_kind"),
        )
        .select_from(
            found.outerjoin(
                writes,
                (writes.c.thread_id == thread_id)
                & or_(
                    writes.c.checkpoint_id == found.c.checkpoint_id,
                    (writes.c.checkpoint_id == found.c.parent_id)
                    & (writes.c.kind != WriteKind.UPDATE.value),
                ),
            )
        )
        .order_by(writes.c.seq, writes.c.task_id)
    )
