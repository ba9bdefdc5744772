"""The client side of Celery runs: start or resume a run, then follow it in the checkpoint store
(the source of truth) until it completes, parks or fails.  Any process can do this for any run."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph_celery import errors
from langgraph_celery.checkpoint.base import (
    Checkpoint,
    CheckpointKind,
    CheckpointView,
    WriteKind,
)
from langgraph_celery.errors import CheckpointConflictError, GraphStateError
from langgraph_celery.graph import _loop, _sync
from langgraph_celery.graph._engine import new_id
from langgraph_celery.graph._local import Outcome
from langgraph_celery.graph._loop import Extra, Failure, Mark, RunStatus, Status, StepMarks
from langgraph_celery.graph._sync import SHARED_POOL
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import START, GraphInput, NodeOutput
from langgraph_celery.worker import cancelling, names, subgraphs
from langgraph_celery.worker._store_calls import STORE_ERRORS, pauses
from langgraph_celery.worker._store_calls import astore as _astore
from langgraph_celery.worker._store_calls import store as _store
from langgraph_celery.worker.carry import check_backend
from langgraph_celery.worker.notify import Subscription
from langgraph_celery.worker.runtime import jsonable_config
from langgraph_celery.worker.streaming import STEP, Published, Relay

if TYPE_CHECKING:
    from langgraph_celery.worker.handle import RunHandle
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = ["CelerySource", "read_status", "status_of"]

_POLL_MIN, _POLL_MAX = 0.0005, 0.02
#: With wake-ups, how long a client waits for one before reading the store anyway.
_WAKE_FALLBACK = 0.25
#: How long a follower waits at most for what nodes streamed before a step it read was stored
#: (a round trip to Redis: see ``Subscription.sync``).
_SYNC_LIMIT = 2.0
#: How many late steps of a cancelled run a resume starts again after (see ``_overtaken``).
_LATE_STEPS = 3

T = TypeVar("T")

log = logging.getLogger("langgraph_celery.client")


def status_of(view: CheckpointView) -> Status:
    """Where the run at ``view``'s checkpoint stands (the run loop's rule, on what was read)."""
    return _loop.status_of(view.checkpoint, StepMarks.of_view(view))


def read_status(runtime: GraphRuntime, checkpoint: Checkpoint | None) -> Status:
    if checkpoint is None:
        return Status(RunStatus.COMPLETED, None)
    thread_id, checkpoint_id = checkpoint.thread_id, checkpoint.checkpoint_id
    return status_of(_store(lambda: runtime.saver.get_with_writes(thread_id, checkpoint_id)))


def _error_from(failure: Failure) -> errors.GraphError:
    known = getattr(errors, failure.error_type, None)
    if (
        isinstance(known, type)
        and issubclass(known, errors.GraphError)
        and known is not errors.NodeError
    ):
        return known(failure.message)
    return errors.NodeError(failure.node_id, failure.error_type, failure.message)


def _busy(thread_id: str, status: Status) -> GraphStateError:
    run = status.checkpoint.run_id if status.checkpoint is not None else "?"
    return GraphStateError(
        f"thread {thread_id!r} is busy: run {run} is still running; wait for it "
        "(RunHandle.wait) or cancel it (RunHandle.cancel) before starting, resuming, forking "
        "or updating the thread"
    )


class CelerySource:
    """Runs of one graph on Celery, as ``CompiledGraph`` drives them."""

    def __init__(self, runtime: GraphRuntime) -> None:
        self.runtime = runtime

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
        for attempt in range(_LATE_STEPS + 1):
            view, claim = self._claim_thread(thread_id)
            latest = view.checkpoint
            if (
                graph_input.is_resume
                and latest is not None
                and config.checkpoint_id is None
                and not _loop.has_pending(latest)
            ):
                self._release(latest, claim)
                raise GraphStateError(
                    f"thread {thread_id!r} has nothing pending to resume (its last run "
                    "completed); start a new run with GraphInput.args(...)"
                )
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
                self._release(latest, claim)
                if not continues or attempt == _LATE_STEPS or not self._overtaken(latest):
                    raise
                continue  # resume from the late step's checkpoint instead
            except BaseException:
                # Nothing was stored (a failing entry route, a value the reducers refuse, the
                # other of two first runs): the thread stays as it was (timer included) and usable.
                self._release(latest, claim)
                raise
            break
        # (the run's record, running, was stored with its first checkpoint: see store_first)
        subscription = None
        if follow:
            notifier = runtime.executor.notifier
            subscription = notifier.subscribe(thread_id, False, checkpoint.run_id, outputs=True)
        try:
            if graph_input.is_resume:
                runtime.executor._send_resume(runtime.envelope(checkpoint))
            else:
                # marks and timers are idempotent, a task sent twice is applied once
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

    def _overtaken(self, resumed: Checkpoint | None) -> bool:
        """Whether a later step of ``resumed``'s run was stored after a resume read it: a step
        that was finishing when the run was cancelled stores its checkpoint (marked cancelled
        too), and the resume (or ``update_state``), refused as the second writer of that step,
        starts again from it."""
        if resumed is None:
            return False
        now = _store(self.runtime.saver.get, resumed.thread_id)
        return (
            now is not None
            and now.checkpoint_id != resumed.checkpoint_id
            and now.run_id == resumed.run_id
            and now.step > resumed.step
        )

    def why_waiting(self, checkpoint: Checkpoint | None) -> str:
        """What this process can tell about a run that makes no progress: whether live workers
        have registered the graph's tasks, and if so that the step's task is queued or running,
        or waits for the reaper to send it again."""
        runtime = self.runtime
        graph_id = runtime.graph_id
        executor = runtime.executor
        wanted = {names.node_task_name(graph_id, node) for node in runtime.compiled.spec.nodes}
        try:
            replies = executor.app.control.inspect(timeout=1.0).registered() or {}
        except Exception as error:  # (the broker itself is unreachable)
            return f"the broker did not answer ({type(error).__name__}: {error})"
        if not replies:
            return (
                "no live worker answered on the broker; start one with "
                "`celery -A <the module that compiles the graph> worker`"
            )
        serving = sorted(w for w, tasks in replies.items() if wanted & set(tasks or ()))
        if not serving:
            return (
                f"{len(replies)} live worker(s) answered ({', '.join(sorted(replies))}) but none "
                f"has registered graph {graph_id!r}'s tasks; start workers with the module that "
                "compiles it"
            )
        queues = (
            sorted({executor.routes[n] for n in checkpoint.next if n in executor.routes})
            if (checkpoint is not None)
            else []
        )
        where = f" (its nodes are routed to queue(s) {', '.join(queues)})" if queues else ""
        return (
            f"worker(s) {', '.join(serving)} serve graph {graph_id!r}; the step's task is queued "
            f"or running{where}, or its message was lost and the reaper (celery beat) sends it "
            f"again once the run has made no progress for {executor.stalled_after:g} s"
        )

    def timed_out(self, checkpoint: Checkpoint, timeout: float) -> TimeoutError:
        return TimeoutError(
            f"run {checkpoint.run_id} on thread {checkpoint.thread_id!r} has not stopped after "
            f"{timeout:g} s: {self.why_waiting(checkpoint)}. The run stays queued: wait for it "
            f"with RunHandle.from_run_id(graph, {checkpoint.run_id!r}).wait(), or cancel it"
        )

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
        for attempt in range(_LATE_STEPS + 1):
            view, claim = self._claim_thread(thread_id)
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
                self._release(latest, claim)
                latest_named = config.checkpoint_id is None
                if not latest_named or attempt == _LATE_STEPS or not self._overtaken(latest):
                    raise
                # (a late step of the cancelled run was stored: update after it instead)
            except BaseException:
                self._release(latest, claim)
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _claim_thread(self, thread_id: str) -> tuple[CheckpointView, str | None]:
        """Read the thread's latest checkpoint and claim the transition out of it: a start, a
        resume, a fork or an update.  A thread whose run is running is busy
        (:class:`GraphStateError`), as is one that another process just claimed.  ``None`` as
        the claim for a new thread (of two first runs the saver stores one)."""
        view = _store(lambda: self.runtime.saver.get_with_writes(thread_id))
        latest = view.checkpoint
        if latest is None:
            return view, None
        self.runtime.engine.check_owner(latest)
        status = status_of(view)
        if status.status is RunStatus.RUNNING:
            raise _busy(thread_id, status)
        claim = self._claim(latest)
        if claim is None:
            raise GraphStateError(
                f"thread {thread_id!r} is busy: another process just started, resumed or "
                "updated a run on it; wait for that run or try again"
            )
        return view, claim

    def _claim(self, latest: Checkpoint) -> str | None:
        """Claim the transition out of ``latest`` (the first claim wins); the claim's token, or
        ``None`` if another process holds it.

        A claim records its holder's token (as the write's node) and when it was taken.  One
        stored by a call whose answer was lost with the connection is recognised as ours by its
        token.  One older than ``stalled_after`` with no checkpoint after it belongs to a client
        that died between claiming and storing (storing takes milliseconds): it is taken over,
        by a compare-and-delete on its token, so a thread is never refused as busy for good.
        """
        runtime = self.runtime
        token = uuid.uuid4().hex
        data = {"token": token, "claimed_at": datetime.now(UTC).isoformat()}

        def put_claim() -> bool:  # (nobody waits on a claim: no wake-up is published)
            return runtime.saver.put_writes(
                latest.thread_id, latest.checkpoint_id, Mark.CLAIM, token, data, WriteKind.CLAIM
            )

        for _ in range(2):
            if _store(put_claim):
                return token
            held = _store(lambda: runtime.saver.get_writes(latest.thread_id, latest.checkpoint_id))
            claim = next((w for w in held if w.kind is WriteKind.CLAIM), None)
            if claim is None:
                continue  # released meanwhile: claim again
            if claim.node == token:
                return token
            if not self._stale(claim.update):
                return None
            log.warning(
                "thread %r: taking over a claim left by a client that stopped before storing "
                "its run (claimed at %s)",
                latest.thread_id,
                claim.update.get("claimed_at"),
            )
            self._release(latest, claim.node)
        return None

    def _stale(self, claim: Mapping[str, Any]) -> bool:
        try:
            claimed_at = datetime.fromisoformat(str(claim.get("claimed_at")))
        except ValueError:
            return True  # (a claim stored by an earlier version, which recorded no time)
        age = datetime.now(UTC) - claimed_at
        return age > timedelta(seconds=self.runtime.executor.stalled_after)

    def _release(self, latest: Checkpoint | None, token: str | None) -> None:
        """Remove the claim on ``latest`` held by ``token`` (kept if someone else holds it)."""
        if latest is None or token is None:
            return
        saver = self.runtime.saver
        _store(saver.delete_write, latest.thread_id, latest.checkpoint_id, Mark.CLAIM, token)

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

    # -- following --------------------------------------------------------------------------------

    def _outputs(
        self, checkpoint: Checkpoint, config: RunnableConfig, runtime: GraphRuntime | None = None
    ) -> list[NodeOutput]:
        if checkpoint.kind is not CheckpointKind.LOOP:
            return []
        engine = (runtime or self.runtime).engine
        state = engine.state(checkpoint.values)
        writes: dict[str, Any] = checkpoint.metadata.get("writes") or {}
        return [
            engine.output(task_id.split("#", 1)[0], checkpoint, config, state, update)
            for task_id, update in writes.items()
        ]

    def _child_outputs(
        self, published: Published, config: RunnableConfig, read: dict[tuple[str, str], Any]
    ) -> list[NodeOutput]:
        """The outputs of a message a compiled subgraph's child run published (its source's
        checkpoint, read from the child's store once: ``read`` keeps the last ones)."""
        source = published.source
        assert source is not None
        child = self.runtime.executor.runtime(source.graph_id)
        if child is None:
            return []
        key = (source.thread_id, source.checkpoint_id)
        if key not in read:
            if len(read) > 8:
                read.clear()
            read[key] = _store(child.saver.get, source.thread_id, source.checkpoint_id)
        checkpoint: Checkpoint | None = read[key]
        if checkpoint is None:
            return []  # (the child's thread was released)
        if published.kind == STEP:
            return self._outputs(checkpoint, config, child)
        task = next((t for t in checkpoint.tasks if t.id == source.task_id), None)
        values = task.arg if task is not None and task.has_arg else checkpoint.values
        return [published.output(child.engine.runner.make_state(values, clone=False))]

    @staticmethod
    def _no_outputs(checkpoint: Checkpoint) -> list[NodeOutput]:
        return []

    def _since(self, latest: Checkpoint, seen: str) -> list[Checkpoint]:
        """Checkpoints after ``seen`` up to ``latest``, oldest first."""
        chain = [latest]
        saver = self.runtime.saver
        while chain[-1].parent_id and chain[-1].parent_id != seen:
            parent = saver.get(latest.thread_id, chain[-1].parent_id)
            if parent is None:
                break
            chain.append(parent)
        return list(reversed(chain))

    async def follow(
        self,
        checkpoint: Checkpoint,
        config: RunnableConfig,
        outcome: Outcome,
        steps: bool = True,
        timeout: float | None = None,
        subscription: Subscription | None = None,
    ) -> AsyncIterator[NodeOutput]:
        """Yield the outputs of the run from ``checkpoint`` on, then settle ``outcome``; without
        ``steps``, only the outputs of where the run stops.  Past ``timeout`` seconds a
        :class:`TimeoutError` says why the run has not stopped (it goes on).  Following the
        steps, what the run's nodes stream while they run is yielded as it comes (from the
        run's outputs channel: see ``worker/streaming.py``); ``subscription``: one taken
        before the run's tasks were sent, else one is taken now.

        Woken by the thread's Redis channel when the app uses Redis (with a slow read as a
        fallback), else polling the store with a growing interval.  Without ``steps`` the
        client listens to the thread's final channel only: it reads the store when the run
        stops, not at every step.
        """
        runtime = self.runtime
        if subscription is None:
            subscription = await _sync.blocking(
                runtime.executor.notifier.subscribe,
                checkpoint.thread_id,
                not steps,
                checkpoint.run_id,
                steps,
            )
        loop = asyncio.get_running_loop()
        seen = checkpoint
        delay = _POLL_MIN
        deadline = None if timeout is None else time.monotonic() + timeout
        relay = None
        if steps and subscription is not None and subscription.relays_outputs:
            runner = runtime.engine.runner
            read: dict[tuple[str, str], Any] = {}
            relay = Relay(
                runtime.serializer,
                lambda v: runner.make_state(v, clone=False),
                lambda published: self._child_outputs(published, config, read),
            )
        try:
            while True:
                view = await _sync.blocking(
                    _store, runtime.saver.get_with_writes, checkpoint.thread_id
                )
                latest = view.checkpoint
                if latest is None:
                    raise GraphStateError(
                        f"thread {checkpoint.thread_id!r} was released or deleted"
                    )
                synced = False  # (everything published before this read is in)
                if latest.checkpoint_id != seen.checkpoint_id:
                    if steps:
                        since = await _sync.blocking(
                            _store, self._since, latest, seen.checkpoint_id
                        )
                        if relay is not None and subscription is not None:
                            # what the steps' nodes streamed was published before the steps
                            # were stored: have all of it, then yield it step by step
                            await loop.run_in_executor(SHARED_POOL, subscription.sync, _SYNC_LIMIT)
                            synced = True
                            messages, _ = subscription.take_outputs()
                            outputs = await _sync.blocking(
                                relay.stepped,
                                messages,
                                seen,
                                since,
                                lambda step: self._outputs(step, config),
                            )
                        else:
                            outputs = [o for step in since for o in self._outputs(step, config)]
                        for output in outputs:
                            yield output
                    seen = latest
                    delay = _POLL_MIN
                status = status_of(view)
                if status.terminal and relay is not None and subscription is not None:
                    # the run stopped in this step (parked, failed): what its nodes streamed
                    # before that comes first
                    if not synced:
                        await loop.run_in_executor(SHARED_POOL, subscription.sync, _SYNC_LIMIT)
                    messages, _ = subscription.take_outputs()
                    stopped = await _sync.blocking(
                        relay.stepped, messages, seen, (), self._no_outputs
                    )
                    for output in stopped:
                        yield output
                if outcome.cancelled and not status.terminal:  # the stream's cancel()
                    await _sync.blocking(self.cancel, checkpoint.thread_id, checkpoint.run_id)
                    outcome.value, outcome.done = None, True
                    return
                if status.terminal:
                    for output in await self._settle(status, config, outcome):
                        yield output
                    return
                pause = _WAKE_FALLBACK if subscription is not None else delay
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        assert timeout is not None
                        raise await loop.run_in_executor(
                            SHARED_POOL, self.timed_out, latest, timeout
                        )
                    pause = min(pause, left)
                if subscription is not None:
                    # woken by what nodes stream, yield it and wait on: the store is read again
                    # on a step's wake-up, an output of a later step, a cancel, or when the
                    # pause is over
                    until = time.monotonic() + pause
                    while True:
                        left = max(until - time.monotonic(), 0.0)
                        await loop.run_in_executor(SHARED_POOL, subscription.wait, left)
                        messages, stepped = subscription.take_outputs()
                        later = False
                        if relay is not None:
                            outputs, later = await _sync.blocking(relay.running, messages, seen)
                            for output in outputs:
                                yield output
                        if stepped or later or not messages or outcome.cancelled:
                            break
                        if time.monotonic() >= until:
                            break
                else:
                    await asyncio.sleep(pause)
                    delay = min(delay * 2, _POLL_MAX)
        finally:
            if subscription is not None:
                subscription.close()  # (returns the connection to the notifier: no round trip)

    async def _settle(
        self, status: Status, config: RunnableConfig, outcome: Outcome
    ) -> list[NodeOutput]:
        engine = self.runtime.engine
        checkpoint = status.checkpoint
        assert checkpoint is not None
        if status.status is RunStatus.PARKED:
            assert status.parking is not None
            outcome.value, outcome.done = engine.interruption(checkpoint, status.parking), True
            return []
        if status.status is RunStatus.FAILED:
            assert status.failure is not None
            raise _error_from(status.failure)
        if status.status is RunStatus.CANCELLED:
            raise GraphStateError(f"run {checkpoint.run_id} was cancelled")
        end, value = await engine.complete(checkpoint, config)
        outcome.value, outcome.done = value, True
        return [end]

    # -- steering ---------------------------------------------------------------------------------

    def latest_of_run(self, thread_id: str, run_id: str) -> Checkpoint | None:
        """The latest checkpoint of run ``run_id`` of the thread (usually the thread's latest)."""
        return cancelling.latest_of_run(self.runtime.saver, thread_id, run_id)

    def cancel(self, thread_id: str, run_id: str) -> bool:
        """Stop run ``run_id`` at its current step, or cancel it where it is parked (see
        :func:`~langgraph_celery.worker.cancelling.cancel_run`); True if this call cancelled it."""
        runtime = self.runtime

        def then(marked: Checkpoint) -> None:
            if runtime.config_of(marked).durability != "sync":
                # its steps since are carried (not stored, or stored behind): they read the
                # cancel in the result backend
                runtime.carrier.cancel(marked)
            if runtime.children:  # the child runs of its compiled subgraphs stop with it
                subgraphs.cancel_children(runtime, marked)

        return cancelling.cancel_run(
            runtime.saver,
            thread_id,
            run_id,
            wake=runtime.executor.notifier.publish,
            record=runtime.record,
            then=then,
        )
