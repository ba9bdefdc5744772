"""Following a run of one graph on Celery in the checkpoint store (the source of truth) until it
completes, parks or fails; telling why it makes no progress; cancelling it.

:class:`Follower` is the base of :class:`~langgraph_celery.worker.client.CelerySource` (which
starts and resumes runs); a :class:`~langgraph_celery.worker.handle.RunHandle` follows, waits
for and cancels a run through it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import Checkpoint, CheckpointKind, CheckpointView
from langgraph_celery.errors import GraphStateError
from langgraph_celery.graph import _loop, _sync
from langgraph_celery.graph._local import Outcome
from langgraph_celery.graph._loop import RunStatus, Status
from langgraph_celery.graph._marks import StepMarks
from langgraph_celery.graph._sync import SHARED_POOL
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import NodeOutput
from langgraph_celery.worker import cancelling, names, subgraphs
from langgraph_celery.worker._store_calls import store as _store
from langgraph_celery.worker.notify import Subscription
from langgraph_celery.worker.streaming import STEP, Published, Relay

if TYPE_CHECKING:
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = [
    "POLL_MAX",
    "POLL_MIN",
    "WAKE_FALLBACK",
    "Follower",
    "RunCancelled",
    "read_status",
    "status_of",
]

POLL_MIN, POLL_MAX = 0.0005, 0.02
#: With wake-ups, how long a client waits for one before reading the store anyway.
WAKE_FALLBACK = 0.25
#: How long a follower waits at most for what nodes streamed before a step it read was stored
#: (a round trip to Redis: see ``Subscription.sync``).
_SYNC_LIMIT = 2.0


class RunCancelled(GraphStateError):
    """The run a client followed was cancelled from elsewhere (``RunHandle.cancel()``, the
    ``cancel`` command, the console): its checkpoints stay and a resume continues it."""

    def __init__(self, run_id: str, hint: str = "") -> None:
        super().__init__(f"run {run_id} was cancelled" + (f"; {hint}" if hint else ""))
        self.run_id = run_id


def status_of(view: CheckpointView) -> Status:
    """Where the run at ``view``'s checkpoint stands (the run loop's rule, on what was read)."""
    return _loop.status_of(view.checkpoint, StepMarks.of_view(view))


def read_status(runtime: GraphRuntime, checkpoint: Checkpoint | None) -> Status:
    if checkpoint is None:
        return Status(RunStatus.COMPLETED, None)
    thread_id, checkpoint_id = checkpoint.thread_id, checkpoint.checkpoint_id
    return status_of(_store(lambda: runtime.saver.get_with_writes(thread_id, checkpoint_id)))


class Follower:
    """Follows, waits for and cancels runs of one graph on Celery (the base of
    ``CelerySource``)."""

    def __init__(self, runtime: GraphRuntime) -> None:
        self.runtime = runtime

    # -- waiting ----------------------------------------------------------------------------------

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
        seen = checkpoint  # the last step yielded (with "exit", maybe one carried, not stored)
        stored = checkpoint  # the last checkpoint read from the store
        delay = POLL_MIN
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
                step_outputs = functools.partial(self._outputs, config=config)
                if latest.checkpoint_id != stored.checkpoint_id:
                    if steps:
                        since = await _sync.blocking(
                            _store, self._since, latest, stored.checkpoint_id
                        )
                        if relay is not None and subscription is not None:
                            # what the steps' nodes streamed was published before the steps
                            # were stored: have all of it, then yield it step by step
                            await loop.run_in_executor(SHARED_POOL, subscription.sync, _SYNC_LIMIT)
                            synced = True
                            messages, _ = subscription.take_outputs()
                            outputs = await _sync.blocking(
                                relay.stepped, messages, seen, since, step_outputs
                            )
                        else:
                            outputs = [o for step in since for o in self._outputs(step, config)]
                        for output in outputs:
                            yield output
                    # (a stored copy of a step carried before is not yielded again)
                    reached = relay.reached if relay is not None and steps else None
                    seen, stored = reached or latest, latest
                    delay = POLL_MIN
                elif relay is not None and subscription is not None and relay.carried_after(seen):
                    # ("exit") steps carried in the result backend, not stored: yielded as
                    # the worker published them, in order, with what their nodes streamed
                    messages, _ = subscription.take_outputs()
                    outputs = await _sync.blocking(relay.stepped, messages, seen, (), step_outputs)
                    for output in outputs:
                        yield output
                    seen = relay.reached or seen
                    delay = POLL_MIN
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
                pause = WAKE_FALLBACK if subscription is not None else delay
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
                    delay = min(delay * 2, POLL_MAX)
        finally:
            if subscription is not None:
                subscription.close()  # (returns the connection to the notifier: no round trip)

    async def _settle(
        self, status: Status, config: RunnableConfig, outcome: Outcome
    ) -> list[NodeOutput]:
        engine = self.runtime.engine
        checkpoint = status.checkpoint
        if checkpoint is None:  # (a handle's run whose thread is gone: nothing to settle)
            raise GraphStateError(f"thread {config.thread_id!r} was released or deleted")
        if status.status is RunStatus.PARKED:
            assert status.parking is not None
            outcome.value, outcome.done = engine.interruption(checkpoint, status.parking), True
            return []
        if status.status is RunStatus.FAILED:
            assert status.failure is not None
            raise status.failure.as_error()
        if status.status is RunStatus.CANCELLED:
            raise RunCancelled(checkpoint.run_id)
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
