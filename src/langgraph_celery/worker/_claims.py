"""The claim on a thread's latest checkpoint: who may move a thread out of it.

A start, a resume, a fork or an update of a thread (and the reaper's expiry of a completed one)
first claims the transition out of the thread's latest checkpoint, as a write of kind
``CLAIM`` at it (the first claim wins), and releases the claim if it stores nothing.  A thread
whose run is running, or that another process just claimed, is busy (:class:`GraphStateError`).
:class:`~langgraph_celery.worker.client.CelerySource` and ``beat/reaper.py`` use these.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import Checkpoint, CheckpointView, WriteKind
from langgraph_celery.errors import GraphStateError
from langgraph_celery.graph import _loop
from langgraph_celery.graph._loop import RunStatus, Status
from langgraph_celery.graph._marks import Mark
from langgraph_celery.worker._following import status_of
from langgraph_celery.worker._store_calls import store as _store

if TYPE_CHECKING:
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = ["busy", "claim", "claim_thread", "overtaken", "release", "stale"]

log = logging.getLogger("langgraph_celery.client")


def busy(thread_id: str, status: Status) -> GraphStateError:
    run = status.checkpoint.run_id if status.checkpoint is not None else "?"
    return GraphStateError(
        f"thread {thread_id!r} is busy: run {run} is still running; wait for it "
        "(RunHandle.wait) or cancel it (RunHandle.cancel) before starting, resuming, forking "
        "or updating the thread"
    )


def claim_thread(runtime: GraphRuntime, thread_id: str) -> tuple[CheckpointView, str | None]:
    """Read the thread's latest checkpoint and claim the transition out of it: a start, a
    resume, a fork or an update.  A thread whose run is running is busy
    (:class:`GraphStateError`), as is one that another process just claimed.  ``None`` as
    the claim for a new thread (of two first runs the saver stores one)."""
    view = _store(lambda: runtime.saver.get_with_writes(thread_id))
    latest = view.checkpoint
    if latest is None:
        return view, None
    runtime.engine.check_owner(latest)
    status = status_of(view)
    if status.status is RunStatus.RUNNING:
        raise busy(thread_id, status)
    token = claim(runtime, latest)
    if token is None:
        raise GraphStateError(
            f"thread {thread_id!r} is busy: another process just started, resumed or "
            "updated a run on it; wait for that run or try again"
        )
    return view, token


def claim(runtime: GraphRuntime, latest: Checkpoint) -> str | None:
    """Claim the transition out of ``latest`` (the first claim wins); the claim's token, or
    ``None`` if another process holds it.

    A claim records its holder's token (as the write's node) and when it was taken.  One
    stored by a call whose answer was lost with the connection is recognised as ours by its
    token.  One older than ``stalled_after`` with no checkpoint after it belongs to a client
    that died between claiming and storing (storing takes milliseconds): it is taken over,
    by a compare-and-delete on its token, so a thread is never refused as busy for good.
    """
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
        found = next((w for w in held if w.kind is WriteKind.CLAIM), None)
        if found is None:
            continue  # released meanwhile: claim again
        if found.node == token:
            return token
        if not stale(runtime, found.update):
            return None
        log.warning(
            "thread %r: taking over a claim left by a client that stopped before storing "
            "its run (claimed at %s)",
            latest.thread_id,
            found.update.get("claimed_at"),
        )
        release(runtime, latest, found.node)
    return None


def stale(runtime: GraphRuntime, claimed: Mapping[str, Any]) -> bool:
    """Whether a claim (its write's data) is older than the executor's ``stalled_after``."""
    try:
        claimed_at = datetime.fromisoformat(str(claimed.get("claimed_at")))
    except ValueError:
        return True  # (a claim stored by an earlier version, which recorded no time)
    age = datetime.now(UTC) - claimed_at
    return age > timedelta(seconds=runtime.executor.stalled_after)


def release(runtime: GraphRuntime, latest: Checkpoint | None, token: str | None) -> None:
    """Remove the claim on ``latest`` held by ``token`` (kept if someone else holds it)."""
    if latest is None or token is None:
        return
    saver = runtime.saver
    _store(saver.delete_write, latest.thread_id, latest.checkpoint_id, Mark.CLAIM, token)


def overtaken(runtime: GraphRuntime, latest: Checkpoint | None) -> bool:
    """Whether a later step of ``latest``'s run was stored after a start, resume or
    ``update_state`` read ``latest`` as the thread's latest: a step that was finishing when
    the run was cancelled stores its checkpoint (marked cancelled too), and the change,
    refused as a second successor of ``latest`` (or the second writer of that step), starts
    again from it (the rule is :func:`_loop.overtaken`)."""
    if latest is None:
        return False
    return _loop.overtaken(latest, _store(runtime.saver.get, latest.thread_id))
