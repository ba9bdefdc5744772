"""What the run loop's decisions need besides pure functions: calling user code (routes,
``InterruptibleAction``) and storing checkpoints.  :class:`Engine` starts or resumes a run,
answers :meth:`Engine.next_decision` from a stored checkpoint (the rules are
:mod:`~langgraph_celery.graph._loop`'s), commits a step (merge, route, store) and completes.
Every executor drives runs through it; only *how the tasks of a step are executed* differs.

This module holds how a run starts (a new run, a resume, a fork) and ``update_state``; the
steps (decide, commit, complete) are in ``graph/_engine_steps.py``, and what every path uses
(saving, outputs, routes) in ``graph/_engine_base.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint, CheckpointKind, PendingWrite
from langgraph_celery.errors import CheckpointConflictError, GraphStateError
from langgraph_celery.graph import _loop, _marks
from langgraph_celery.graph._engine_base import Store, new_id
from langgraph_celery.graph._engine_steps import Stepping, StepResult
from langgraph_celery.graph._marks import Extra
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.state import Ops, apply_update, initial_values
from langgraph_celery.graph.types import START, GraphInput, NodeOutput

__all__ = ["Engine", "StepResult", "Store", "new_id"]


class Engine(Stepping):
    """Run logic shared by the executors, for one compiled graph: starting, resuming, forking and
    updating here; the steps and what every path uses in its bases."""

    # -- starting -----------------------------------------------------------------------------

    async def begin(
        self, graph_input: GraphInput, config: RunnableConfig, store: Store | None = None
    ) -> tuple[Checkpoint, NodeOutput | None]:
        """The checkpoint a run starts from, saved (with ``store`` if given), and the START
        output (none on resume).  Started from the thread's latest checkpoint, it starts again
        from a later step of that checkpoint's run stored meanwhile (a cancelled run's step
        that was finishing: see :func:`_loop.overtaken`), at most ``_loop.LATE_STEPS`` times."""
        thread_id = self.require_thread(config) if self.saver is not None else config.thread_id
        if self.saver is None or thread_id is None:
            return await self.begin_from(None, graph_input, config, store=store)
        for attempt in range(_loop.LATE_STEPS + 1):
            base = await self.io(self.saver.get, thread_id, config.checkpoint_id)
            if base is None and config.checkpoint_id is not None:
                raise GraphStateError(
                    f"thread {thread_id!r} has no checkpoint {config.checkpoint_id!r}"
                )
            try:
                return await self.begin_from(base, graph_input, config, store=store)
            except CheckpointConflictError:
                # A step of the thread's cancelled run, finishing, went on from the latest
                # checkpoint first (one successor per checkpoint): start again from it.
                if config.checkpoint_id is not None or attempt == _loop.LATE_STEPS:
                    raise
                if not _loop.overtaken(base, await self.io(self.saver.get, thread_id)):
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def begin_from(
        self,
        base: Checkpoint | None,
        graph_input: GraphInput,
        config: RunnableConfig,
        *,
        run_id: str | None = None,
        base_writes: Sequence[PendingWrite] | None = None,
        extra: Mapping[str, Any] | None = None,
        store: Store | None = None,
        fresh: bool = False,
    ) -> tuple[Checkpoint, NodeOutput | None]:
        """:meth:`begin` from ``base``, the checkpoint the caller read (and claimed): the one
        ``config.checkpoint_id`` names, else the thread's latest; ``None`` for a new thread,
        whose first checkpoint then has no parent (of two first runs racing on a new thread the
        saver stores one).  A new run gets ``run_id`` if given; ``base_writes`` are ``base``'s
        pending writes if the caller has read them; ``extra`` goes into the stored checkpoint's
        ``extra`` (what an executor records about the invocation); ``store`` stores it.  With
        ``fresh``, ``base``'s values are not the stored ones (a compiled subgraph's new child run
        starts from its initial state): the first checkpoint is stored whole, not as a delta."""
        thread_id = config.thread_id
        self.check_owner(base)
        added = dict(extra or {})
        graph_input = _loop.given_input(graph_input, base, config.checkpoint_id)
        if graph_input.is_resume:
            stored = await self._resume(
                base, graph_input.value, config, run_id, base_writes, added, store
            )
            return stored, None
        forking = base is not None and config.checkpoint_id is not None
        if forking and graph_input.value is None and _marks.has_pending(base):
            assert base is not None
            resumed = False
            forked = await self._continue(
                base, config, "fork", resumed, run_id=run_id, added=added, store=store
            )
            return forked, None
        branch = False
        if forking:  # (a new run from the checkpoint named: a branch unless it is the latest)
            assert base is not None and self.saver is not None
            latest = await self.io(self.saver.get, base.thread_id)
            branch = not _loop.same_run(base, latest, config.checkpoint_id)
        values = dict(base.values) if base is not None else initial_values(self.spec.schema)
        ops: Ops = {}
        if graph_input.value:
            written = self.checked(graph_input.value, "the input")
            apply_update(self.spec.schema, values, written, "the input", ops)
        run_id = run_id or new_id()
        run_config = config._for_runtime(graph_id=self.graph_id, run_id=run_id)
        tasks, barriers, values = await self.route_from([START], values, {}, run_config, ops=ops)
        checkpoint = await self.save(
            Checkpoint(
                thread_id=thread_id or "",
                checkpoint_id=new_id(),
                run_id=run_id,
                step=base.step + 1 if base is not None else -1,
                values=values,
                tasks=tuple(tasks),
                parent_id=base.checkpoint_id if base is not None else None,
                node=START,
                extra={Extra.BARRIERS: barriers, **added} if barriers else added,
                metadata={"source": "input", "update": graph_input.value or {}},
                kind=CheckpointKind.INPUT,
                delta=ops if base is not None and not fresh else None,
                branch=branch,
            ),
            store,
        )
        return checkpoint, self.output(
            START, checkpoint, run_config, self.state(values), graph_input.value or {}
        )

    async def _resume(
        self,
        base: Checkpoint | None,
        update: Mapping[str, Any] | None,
        config: RunnableConfig,
        run_id: str | None,
        base_writes: Sequence[PendingWrite] | None,
        added: dict[str, Any],
        store: Store | None = None,
    ) -> Checkpoint:
        if self.saver is None:
            raise GraphStateError("resume needs a checkpoint saver; compile with one")
        thread_id = self.require_thread(config)
        if base is None:
            raise GraphStateError(f"thread {thread_id!r} has no checkpoint to resume")
        if not _marks.has_pending(base):
            raise _loop.nothing_to_resume(thread_id)
        if config.checkpoint_id is not None:
            latest = await self.io(self.saver.get, thread_id)
            if latest is not None and latest.checkpoint_id != base.checkpoint_id:
                # resumed (or superseded) already: resuming it again would run its nodes twice
                raise GraphStateError(
                    f"thread {thread_id!r} has nothing pending to resume at checkpoint "
                    f"{base.checkpoint_id!r}: it was already resumed or superseded (the thread's "
                    f"latest is {latest.checkpoint_id!r}); resume without a checkpoint_id, or "
                    "fork from it with invoke(None, config)"
                )
        return await self._continue(
            base,
            config,
            "resume",
            True,
            update=update,
            run_id=run_id,
            base_writes=base_writes,
            added=added,
            store=store,
        )

    async def _continue(
        self,
        base: Checkpoint,
        config: RunnableConfig,
        source: str,
        resumed: bool,
        *,
        update: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        base_writes: Sequence[PendingWrite] | None = None,
        added: Mapping[str, Any] | None = None,
        store: Store | None = None,
    ) -> Checkpoint:
        """The checkpoint after ``base`` that runs its pending tasks again (a resume, a fork):
        the same run if ``base`` is the thread's latest (``base``'s successor), else a new run
        (``run_id`` if given) on a branch."""
        assert self.saver is not None
        values = dict(base.values)
        ops: Ops = {}
        if update:
            update = self.checked(update, "the resume's update")
            apply_update(self.spec.schema, values, update, "the resume's update", ops)
        latest = None
        if config.checkpoint_id is not None:
            latest = await self.io(self.saver.get, base.thread_id)
        same_run = _loop.same_run(base, latest, config.checkpoint_id)
        extra = dict(base.extra)
        extra.pop(Extra.PARKED, None)  # (resumed: no longer parked)
        extra.pop(Extra.COMPLETION_PENDING, None)
        extra.pop(Extra.STEPS, None)  # a new invocation
        extra[Extra.RESUMED] = resumed
        extra.update(added or {})
        checkpoint = await self.save_child(
            base,
            run_id=None if same_run else (run_id or new_id()),
            values=values,
            tasks=base.tasks,
            node=base.node,
            extra=extra,
            metadata={"source": source, "update": dict(update or {})},
            kind=CheckpointKind(source),
            delta=ops,
            branch=not same_run,
            store=store,
        )
        if base_writes is None:
            base_writes = await self.io(self.saver.get_writes, base.thread_id, base.checkpoint_id)
        await self.io(self.carry_writes, base_writes, checkpoint)
        return checkpoint

    async def parked_at(self, checkpoint: Checkpoint) -> dict[str, Any] | None:
        """The interruption of the run parked at ``checkpoint`` (its ``INTERRUPT`` mark, or
        what an ``update_state`` checkpoint carries of it), for an ``update_state`` checkpoint
        written on it to carry on; ``None`` if the run is not parked there."""
        if checkpoint.kind is CheckpointKind.UPDATE:
            parked = checkpoint.extra.get(Extra.PARKED) if checkpoint.extra else None
            return dict(parked) if isinstance(parked, Mapping) else None
        assert self.saver is not None
        writes = await self.io(
            self.saver.get_writes, checkpoint.thread_id, checkpoint.checkpoint_id
        )
        marks = _marks.StepMarks.of(writes)
        if marks.parking is None or marks.cancelled:
            return None
        return marks.parking.shown()

    def checked(self, values: Mapping[str, Any], writer: str) -> Mapping[str, Any]:
        """``values`` a run's input, a resume or ``update_state`` writes, checked against a
        typed schema as a node's update is (SPEC §9): a bad field is an
        :class:`InvalidUpdateError` before anything is stored."""
        typed = self.spec.typed
        return typed.check_write(writer, values, self.spec.schema) if typed else values

    def carry_writes(self, writes: Sequence[PendingWrite], checkpoint: Checkpoint) -> None:
        """Record on ``checkpoint`` (a resume or fork) the node updates its base recorded: the
        tasks that succeeded in a stopped step do not run again (the first write wins, so
        carrying twice is harmless)."""
        assert self.saver is not None
        for write in _loop.carried_writes(writes):
            self.saver.put_writes(
                checkpoint.thread_id,
                checkpoint.checkpoint_id,
                write.task_id,
                write.node,
                write.update,
            )

    async def update(
        self,
        base: Checkpoint | None,
        latest: Checkpoint | None,
        values: Mapping[str, Any] | None,
        as_node: str | None,
        config: RunnableConfig,
        store: Store | None = None,
    ) -> Checkpoint:
        """Store what ``update_state`` writes after ``base`` (the checkpoint the call names, else
        the thread's latest ``latest``; ``None`` on a new thread): ``values`` merged through the
        reducers; ``next`` what ``as_node``'s edges pick, else ``base``'s.  It continues
        ``base``'s run when ``base`` is the latest (a parked run is resumed after it), as its
        successor; from an older checkpoint it is a branch, of a new run."""
        thread_id = self.require_thread(config)
        self.check_owner(latest or base)
        merged = dict(base.values) if base is not None else initial_values(self.spec.schema)
        ops: Ops = {}
        written = self.checked(values or {}, "update_state's values")
        apply_update(self.spec.schema, merged, written, "update_state's values", ops)
        tasks = base.tasks if base is not None else ()
        dropped = (Extra.RESUMED, Extra.PARKED)
        extra = {k: v for k, v in (base.extra if base else {}).items() if k not in dropped}
        if as_node is not None:
            routed = config._for_runtime(graph_id=self.graph_id)
            barriers = extra.get(Extra.BARRIERS, {})
            next_tasks, barriers, merged = await self.route_from(
                [as_node], merged, barriers, routed, ops=ops
            )
            tasks = tuple(next_tasks)
            extra = {Extra.BARRIERS: barriers} if barriers else {}
        same_run = base is not None and _loop.same_run(base, latest, config.checkpoint_id)
        if base is not None and same_run:
            parked = await self.parked_at(base)
            if parked is not None:
                extra[Extra.PARKED] = parked
        return await self.save(
            Checkpoint(
                thread_id=thread_id,
                checkpoint_id=new_id(),
                run_id=base.run_id if base is not None and same_run else new_id(),
                step=base.step + 1 if base is not None else -1,
                values=merged,
                tasks=tasks,
                parent_id=base.checkpoint_id if base is not None else None,
                node=as_node or (base.node if base is not None else None),
                extra=extra,
                metadata={"source": "update", "update": dict(values or {}), "as_node": as_node},
                kind=CheckpointKind.UPDATE,
                delta=ops if base is not None else None,
                branch=base is not None and not same_run,
            ),
            store,
        )
