"""The client side of Celery runs: start or resume a run (claiming the thread: see
``worker/_claims.py``), then follow it in the checkpoint store (the source of truth) until it
completes, parks or fails (see ``worker/_following.py``).  Any process can do this for any run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import (
    Checkpoint,
    CheckpointKind,
    CheckpointView,
    WriteKind,
)
from langgraph_celery.errors import CheckpointConflictError, GraphStateError
from langgraph_celery.graph import _loop, _marks, _sync
from langgraph_celery.graph._engine import new_id
from langgraph_celery.graph._local import Outcome
from langgraph_celery.graph._marks import Extra, Failure
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import START, GraphInput, NodeOutput
from langgraph_celery.worker import _claims
from langgraph_celery.worker._following import Follower, read_status, status_of
from langgraph_celery.worker._store_calls import STORE_ERRORS, pauses
from langgraph_celery.worker._store_calls import astore as _astore
from langgraph_celery.worker._store_calls import store as _store
from langgraph_celery.worker.carry import check_backend
from langgraph_celery.worker.notify import Subscription
from langgraph_celery.worker.runtime import jsonable_config

if TYPE_CHECKING:
    from langgraph_celery.worker.handle import RunHandle

__all__ = ["CelerySource", "read_status", "status_of"]


class CelerySource(Follower):
    """Runs of one graph on Celery, as ``CompiledGraph`` drives them: started, resumed and
    updated here; followed, waited for and cancelled as its base :class:`Follower` does."""

    # -- starting ---------------------------------------------------------------------------------

    async def begin(
        self, graph_input: GraphInput, config: RunnableConfig
    ) -> tuple[Checkpoint, NodeOutput | None]:
        """Store the run's first checkpoint and send its first tasks; returns at once.  It is
        made of blocking calls (the store, the broker): on a caller's event loop it runs on one
        of the library's own."""
        checkpoint, start, _ = await _sync.off_loop(self._begin(graph_input, config))
        return checkpoint, start

    async def _begin(
        self, graph_input: GraphInput, config: RunnableConfig, follow: bool = False
    ) -> tuple[Checkpoint, NodeOutput | None, Subscription | None]:
        """:meth:`begin`; with ``follow``, also subscribed to the run's wake-ups and outputs
        before its first tasks are sent, so that none of what they stream is missed."""
        runtime = self.runtime
        thread_id = runtime.engine.require_thread(config)
        if config.durability != "sync":  # (its steps are carried in the result backend)
            check_backend(runtime.executor.app)
        if graph_input.value:  # a value that cannot be stored fails before the claim
            runtime.saver.serializer.dumps(dict(graph_input.value))
        for attempt in range(_loop.LATE_STEPS + 1):
            view, claim = _claims.claim_thread(runtime, thread_id)
            latest = view.checkpoint
            if config.checkpoint_id is None:  # (None continues the latest's pending run)
                graph_input = _loop.given_input(graph_input, latest, None)
            if (
                graph_input.is_resume
                and latest is not None
                and config.checkpoint_id is None
                and not _marks.has_pending(latest)
            ):
                _claims.release(runtime, latest, claim)
                raise _loop.nothing_to_resume(thread_id)
            # The run's first checkpoint is stored with the reaper's stall timer of its run, both
            # or neither: a run is never stored unwatched.
            continues = (
                graph_input.is_resume and latest is not None and config.checkpoint_id is None
            )
            run_id = latest.run_id if continues and latest is not None else new_id()
            try:
                checkpoint, start = await self._store_first(
                    graph_input, config, latest, run_id, view
                )
            except CheckpointConflictError:
                _claims.release(runtime, latest, claim)
                if (
                    config.checkpoint_id is not None
                    or attempt == _loop.LATE_STEPS
                    or not _claims.overtaken(runtime, latest)
                ):
                    raise
                # a late step of the thread's cancelled run went on from the latest first:
                # start (or resume) from that step's checkpoint instead
                continue
            except BaseException:
                # Nothing was stored (a failing entry route, a value the reducers refuse, the
                # other of two first runs): the thread stays as it was (timer included) and usable.
                _claims.release(runtime, latest, claim)
                raise
            break
        # (the run's record, running, was stored with its first checkpoint: see store_first)
        subscription = None
        if follow:
            notifier = runtime.executor.notifier
            subscription = notifier.subscribe(thread_id, False, checkpoint.run_id, outputs=True)
        try:
            # The first step's tasks are sent from here, a start's or a resume's alike (no hop
            # through a task of its own); marks and timers are idempotent, and a task sent twice
            # is applied once.
            await _astore(lambda: runtime.advance(checkpoint))
        except Exception as error:
            # The broker refused the run's first message: the run is stored, so record why it
            # did not start; the thread is not left busy, and GraphInput.resume() sends it again.
            node = checkpoint.next[0] if checkpoint.next else START
            failure = Failure(
                node, type(error).__name__, f"the run's tasks could not be sent: {error}"
            )
            _store(runtime.mark_failed, checkpoint, failure)
            if subscription is not None:
                subscription.close()
            raise
        return checkpoint, start, subscription

    async def update_state(
        self, config: RunnableConfig, values: Mapping[str, Any] | None, as_node: str | None
    ) -> Checkpoint:
        """``update_state`` on Celery: refused while a run of the thread is running (a node's
        update is never overwritten), and claimed as a start or resume is.  Off a caller's
        event loop, as :meth:`begin`."""
        return await _sync.off_loop(self._update_state(config, values, as_node))

    async def _update_state(
        self, config: RunnableConfig, values: Mapping[str, Any] | None, as_node: str | None
    ) -> Checkpoint:
        runtime = self.runtime
        thread_id = runtime.engine.require_thread(config)
        for attempt in range(_loop.LATE_STEPS + 1):
            view, claim = _claims.claim_thread(runtime, thread_id)
            latest = view.checkpoint
            try:
                base = latest
                if config.checkpoint_id is not None:
                    base = _store(runtime.saver.get, thread_id, config.checkpoint_id)
                    if base is None:
                        raise GraphStateError(
                            f"thread {thread_id!r} has no checkpoint {config.checkpoint_id!r}"
                        )
                return await runtime.engine.update(base, latest, values, as_node, config)
            except CheckpointConflictError:
                _claims.release(runtime, latest, claim)
                latest_named = config.checkpoint_id is None
                if (
                    not latest_named
                    or attempt == _loop.LATE_STEPS
                    or not _claims.overtaken(runtime, latest)
                ):
                    raise
                # (a late step of the cancelled run was stored: update after it instead)
            except BaseException:
                _claims.release(runtime, latest, claim)
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _store_first(
        self,
        graph_input: GraphInput,
        config: RunnableConfig,
        latest: Checkpoint | None,
        run_id: str,
        view: CheckpointView,
    ) -> tuple[Checkpoint, NodeOutput | None]:
        """``engine.begin``, made again if the connection dropped before it stored anything
        (the thread's latest checkpoint is still ``latest``); if it dropped after the run's
        first checkpoint was stored, that checkpoint is taken up (see :meth:`_take_up`)."""
        runtime = self.runtime
        before = latest.checkpoint_id if latest is not None else None

        recorded: dict[str, Any] = {Extra.RUN_CONFIG: jsonable_config(config)}

        async def begin() -> tuple[Checkpoint, NodeOutput | None]:
            if config.checkpoint_id is not None:
                return await runtime.engine.begin(graph_input, config, runtime.store_first)
            writes = [w for w in view.writes.values() if w.kind is not WriteKind.CLAIM]
            return await runtime.engine.begin_from(
                latest,
                graph_input,
                config,
                run_id=run_id,
                base_writes=writes,
                extra=recorded,
                store=runtime.store_first,
            )

        for pause in pauses():
            try:
                return await begin()
            except STORE_ERRORS:
                now = _store(runtime.saver.get, config.thread_id or "")
                if (now.checkpoint_id if now is not None else None) == before:
                    await asyncio.sleep(pause)
                    continue
                if now is None or now.parent_id != before:
                    raise  # not ours to take up (another run, watched by its own timer)
                return self._take_up(now, graph_input, config, latest)
        return await begin()

    def _take_up(
        self,
        checkpoint: Checkpoint,
        graph_input: GraphInput,
        config: RunnableConfig,
        latest: Checkpoint | None,
    ) -> tuple[Checkpoint, NodeOutput | None]:
        """The run's first checkpoint, stored by ``engine.begin`` before the connection dropped
        (this client holds the claim on ``latest``, its parent): finish what ``begin`` did after
        storing it.  A resume copies the parked step's writes (the first write wins, so copying
        again is harmless; a write never copied only makes its node run again)."""
        runtime, engine = self.runtime, self.runtime.engine
        if checkpoint.kind is not CheckpointKind.INPUT:
            assert latest is not None
            writes = _store(runtime.saver.get_writes, latest.thread_id, latest.checkpoint_id)
            _store(engine.carry_writes, writes, checkpoint)
            return checkpoint, None
        run_config = config._for_runtime(graph_id=runtime.graph_id, run_id=checkpoint.run_id)
        state = engine.state(checkpoint.values)
        return checkpoint, engine.output(
            START, checkpoint, run_config, state, graph_input.value or {}
        )

    def astream(
        self,
        graph_input: GraphInput,
        config: RunnableConfig,
        outcome: Outcome,
        steps: bool = True,
        timeout: float | None = None,
    ) -> AsyncIterator[NodeOutput]:
        return self._stream(graph_input, config, outcome, steps, timeout)

    async def _stream(
        self,
        graph_input: GraphInput,
        config: RunnableConfig,
        outcome: Outcome,
        steps: bool,
        timeout: float | None,
    ) -> AsyncIterator[NodeOutput]:
        if not steps:  # (only where the run stops: nothing streamed is wanted)
            checkpoint, start = await self.begin(graph_input, config)
            subscription = None
        else:
            begun = await _sync.off_loop(self._begin(graph_input, config, follow=True))
            checkpoint, start, subscription = begun
        if start is not None:
            yield start
        following = self.follow(checkpoint, config, outcome, steps, timeout, subscription)
        async for output in following:
            yield output

    def start(self, graph_input: GraphInput, config: RunnableConfig) -> RunHandle:
        from langgraph_celery.worker.handle import RunHandle

        checkpoint, _ = _sync.run_sync(self.begin(graph_input, config))
        return RunHandle(checkpoint.run_id, checkpoint.thread_id, self.runtime.compiled)
