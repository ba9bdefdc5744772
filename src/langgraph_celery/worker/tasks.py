"""The Celery tasks a :class:`~langgraph_celery.worker.executor.CeleryExecutor` registers on its
app: one node task per graph node (its body is ``worker/node_task.py``'s), the resume task, the
reaper's and the scheduled runs' start task; their options (acks late, store retries, time
limits), failure and revoke hooks, and the registry of the app's graphs that they look runs up
in.  Task names: ``worker/names.py``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from celery import signals
from celery.exceptions import Reject, TimeLimitExceeded
from celery.utils.functional import maybe_list
from celery.worker import control
from celery.worker import state as worker_state
from sqlalchemy.exc import InterfaceError, OperationalError

from langgraph_celery.worker import carry, endings, names
from langgraph_celery.worker.envelope import MalformedMessage, TaskEnvelope
from langgraph_celery.worker.guard import longest_countdown

if TYPE_CHECKING:
    from langgraph_celery.worker.executor import CeleryExecutor
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = ["register_common_tasks", "register_node_task", "registry"]

log = logging.getLogger("langgraph_celery.worker")

_REGISTRY_ATTR = "_langgraph_celery_runtimes"
#: A task whose checkpoint store is unreachable (a connection killed, a failover) runs again:
#: nothing it applied would be applied twice.  Celery's own retries do it, with exponential
#: backoff and jitter (up to 10 s apart, 20 times); the client's calls have their policy in
#: ``worker/_store_calls.py``.
_STORE_RETRY: dict[str, Any] = {
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 1,
    "retry_backoff_max": 10,
    "retry_jitter": True,
    "max_retries": 20,
}


def registry(app: Any) -> dict[str, GraphRuntime]:
    registry: dict[str, GraphRuntime] | None = getattr(app, _REGISTRY_ATTR, None)
    if registry is None:
        registry = {}
        setattr(app, _REGISTRY_ATTR, registry)
    return registry


def _envelope_or_reject(
    task_name: str, args: tuple[Any, ...], message: Mapping[str, Any]
) -> TaskEnvelope:
    try:
        if args:
            raise MalformedMessage(
                f"{len(args)} positional argument(s); an envelope comes as keyword arguments"
            )
        return TaskEnvelope.from_message(message)
    except MalformedMessage as error:
        log.error("rejected malformed message for %s: %s", task_name, error)
        raise Reject(f"malformed message: {error}", requeue=False) from None


def register_node_task(
    executor: CeleryExecutor, graph_id: str, node: str, timeout: float | None
) -> None:
    """Register the node's task; with ``timeout``, as Celery's soft time limit (the node
    gets ``TimeoutError``) and a hard limit a little above it (the process is killed, the
    message comes back and counts as a delivery: see ``max_deliveries``)."""
    name = names.node_task_name(graph_id, node)
    if name in executor.app.tasks:
        return
    app = executor.app

    def run_node(task: Any, /, *args: Any, **message: Any) -> dict[str, Any]:
        envelope = _envelope_or_reject(name, args, message)
        runtime = registry(app).get(envelope.graph_id)
        if runtime is None or envelope.graph_id != graph_id or envelope.node != node:
            log.error(
                "rejected message for %s: it names graph %r node %r",
                name,
                envelope.graph_id,
                envelope.node,
            )
            raise Reject("message names another graph or node", requeue=False)

        def retry(countdown: float, error: BaseException) -> None:
            longest = longest_countdown(app)
            raise task.retry(countdown=min(countdown, longest), exc=error, max_retries=None)

        request = task.request
        redelivered = bool((request.delivery_info or {}).get("redelivered"))
        carried = getattr(request, carry.HEADER, None) is True
        retries = int(request.retries or 0)
        soft_limit = _soft_limit(task)
        return runtime.run_node(envelope, retries, retry, redelivered, carried, soft_limit)

    # Celery compiles a signature check named after the function: an identifier, whatever
    # the node id ("review-check", "step 1"); the task's name is ``name``.
    run_node.__name__ = "node_" + re.sub(r"[^0-9A-Za-z_]", "_", node)
    # shared=False: a shared task would be added to every other app of the process too,
    # running this app's graphs (registry, saver) on the other app's workers.
    app.task(
        name=name,
        bind=True,
        acks_late=True,
        reject_on_worker_lost=True,
        # a carried step's message ignores its result (worker/executor.py): its failure and
        # retries are still stored, as every node task's are
        store_errors_even_if_ignored=True,
        shared=False,
        Request=executor._request_class,  # (worker/reconnect.py, worker/lost.py)
        on_failure=_on_node_failure,
        **_STORE_RETRY,
        **_time_limits(timeout),
    )(run_node)


def register_common_tasks(executor: CeleryExecutor) -> None:
    """Register the resume task, the reaper's and the scheduled runs' start task (once per app)."""
    app = executor.app
    if names.RESUME_TASK in app.tasks:
        return

    def resume(task: Any, /, *args: Any, **message: Any) -> dict[str, Any]:
        envelope = _envelope_or_reject(names.RESUME_TASK, args, message)
        runtime = registry(app).get(envelope.graph_id)
        if runtime is None:
            log.error("rejected resume: unknown graph %r", envelope.graph_id)
            raise Reject(f"unknown graph {envelope.graph_id!r}", requeue=False)
        return runtime.resume(envelope)

    app.task(
        name=names.RESUME_TASK,
        bind=True,
        acks_late=True,
        shared=False,
        Request=executor._request_class,
        **_STORE_RETRY,
    )(resume)

    def reap_task(task: Any) -> dict[str, Any]:
        from langgraph_celery.beat.reaper import reap

        return reap(executor).to_data()

    app.task(name=names.REAP_TASK, bind=True, shared=False)(reap_task)

    def start(
        task: Any, graph_id: str, name: str, input: Any = None, thread_id: str | None = None
    ) -> dict[str, Any]:
        from langgraph_celery.beat.schedules import start_scheduled

        runtime = registry(app).get(graph_id)
        if runtime is None:
            log.error("rejected scheduled start: unknown graph %r", graph_id)
            raise Reject(f"unknown graph {graph_id!r}", requeue=False)
        return start_scheduled(runtime, name, input, thread_id)

    app.task(name=names.START_TASK, bind=True, shared=False)(start)


def _on_node_failure(
    task: Any, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
) -> None:
    """A node task's failure hook.  Past its hard time limit the worker's main process kills
    the task's process and calls this (the message is acknowledged, nothing would run it
    again): the run fails here, with the node's timeout as the reason."""
    if not isinstance(exc, TimeLimitExceeded):
        return  # (any other failure was recorded by the task itself)
    try:
        envelope = TaskEnvelope.from_message(kwargs)
    except MalformedMessage:
        return
    runtime = registry(task.app).get(envelope.graph_id)
    if runtime is not None:
        endings.fail_past_hard_limit(runtime, envelope)


def _on_task_revoked(
    sender: Any = None, request: Any = None, expired: bool = False, **_: Any
) -> None:
    """A node task revoked (from Flower, ``app.control.revoke``, with or without terminate):
    its run is cancelled, as ``RunHandle.cancel`` would (a re-dispatch under the same task id
    would be discarded by every worker for ``worker_revoke_expires``).  Only the step's own
    task counts, under its id (``names.celery_task_id``): a copy of its message under another
    id, or a message discarded because it expired (Celery reports it revoked, ``expired``),
    cancels nothing."""
    name = str(getattr(sender, "name", "") or "")
    if not names.is_node_task(name) or request is None or expired:
        return
    try:
        envelope = TaskEnvelope.from_message(dict(request.kwargs or {}))
    except MalformedMessage:
        return
    own_id = names.celery_task_id(envelope.run_id, envelope.checkpoint_id, envelope.task_id or "")
    if getattr(request, "id", None) != own_id:
        log.warning(
            "revoked task %s[%s] is not the task of step %s of thread %r: its run goes on",
            name,
            getattr(request, "id", None),
            envelope.checkpoint_id,
            envelope.thread_id,
        )
        return
    app = getattr(sender, "app", None)
    runtime = registry(app).get(envelope.graph_id) if app is not None else None
    if runtime is not None:
        endings.cancel_revoked(runtime, envelope)


signals.task_revoked.connect(_on_task_revoked, weak=False, dispatch_uid="langgraph_celery")


def _revoke_running(state: Any, task_id: Any, terminate: bool = False, **kwargs: Any) -> Any:
    """Celery's ``revoke`` control command, and then, for a plain revoke (not ``terminate``,
    whose kill Celery reports as revoked itself), the revoke hook for each node task this
    worker is running under one of the ids: Celery only keeps a running task's id, to discard
    later deliveries, and lets the task finish, so its run went on with the next step.  Now the
    run is cancelled at once and, as with ``RunHandle.cancel``, the running node finishes and no
    further step is sent."""
    reply = _CELERY_REVOKE(state, task_id, terminate=terminate, **kwargs)
    if not terminate:
        ids = set(maybe_list(task_id) or ())
        for request in list(worker_state.active_requests):
            if request.id in ids:
                _on_task_revoked(request.task, request)
    return reply


#: Celery's own (kept once, so that registering again does not wrap the wrapper)
_CELERY_REVOKE = getattr(
    control.Panel.data["revoke"], "_celery_revoke", control.Panel.data["revoke"]
)
_revoke_running._celery_revoke = _CELERY_REVOKE  # type: ignore[attr-defined]
# (a worker control command registered under the built-in's name replaces it: Celery's way to
# extend its remote control, https://docs.celeryq.dev/en/stable/userguide/workers.html)
control.Panel.register(_revoke_running, name="revoke", **control.Panel.meta["revoke"]._asdict())


def _soft_limit(task: Any) -> float | None:
    """The soft time limit Celery's pool applies to ``task``'s running request: its message's
    (``timelimit``, which the worker's guard allows only as the task's own), else the task's
    (the node's timeout, else the app's ``task_soft_time_limit``)."""
    limits = task.request.timelimit
    soft = limits[1] if isinstance(limits, list | tuple) and len(limits) == 2 else None
    return soft or task.soft_time_limit or None


def _time_limits(timeout: float | None) -> dict[str, float]:
    """Celery's task options for a node limited to ``timeout`` seconds."""
    if timeout is None:
        return {}
    return {"soft_time_limit": timeout, "time_limit": timeout + max(2.0, timeout * 0.1)}
