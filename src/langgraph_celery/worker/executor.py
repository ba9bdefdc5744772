"""CeleryExecutor: registers compiled graphs and their node tasks on a Celery app."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from celery.app.defaults import DEFAULTS
from celery.exceptions import Reject
from sqlalchemy.exc import InterfaceError, OperationalError

from langgraph_celery.checkpoint.base import PendingTask
from langgraph_celery.checkpoint.index import missing_for_celery
from langgraph_celery.errors import GraphDefinitionError
from langgraph_celery.worker import names
from langgraph_celery.worker.envelope import MalformedMessage, TaskEnvelope
from langgraph_celery.worker.guard import GuardTaskMessages
from langgraph_celery.worker.notify import Notifier
from langgraph_celery.worker.reconnect import SurviveBrokerLoss
from langgraph_celery.worker.runtime import GraphRuntime

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph
    from langgraph_celery.worker.client import CelerySource

__all__ = ["SAFE_SETTINGS", "CeleryExecutor"]

log = logging.getLogger("langgraph_celery.worker")

#: Celery settings the executor applies unless the app already sets them (see the README).
SAFE_SETTINGS: dict[str, Any] = {
    "accept_content": ["json"],
    "task_serializer": "json",
    "result_serializer": "json",
    "result_accept_content": ["json"],
    "event_serializer": "json",
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,
    "task_track_started": True,
    "broker_connection_retry_on_startup": True,
    "result_extended": True,
}

_REGISTRY_ATTR = "_langgraph_celery_runtimes"
_STORE_RETRIES = 20


def _apply_safe_settings(app: Any) -> None:
    conf = app.conf
    for key, value in SAFE_SETTINGS.items():
        current = conf.get(key)
        default = DEFAULTS.get(key)
        if key in conf.changes or (current != default and current is not None):
            continue
        conf[key] = value


def _registry(app: Any) -> dict[str, GraphRuntime]:
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


class CeleryExecutor:
    """Runs every node of the graphs compiled with it as a Celery task on ``app``'s workers.

    ``routes`` maps node ids to queues; ``reap_interval`` and ``stalled_after`` (seconds) drive
    the beat job that re-dispatches runs whose pending step has no live task.
    """

    def __init__(
        self,
        app: Any,
        routes: Mapping[str, str] | None = None,
        reap_interval: float = 30.0,
        stalled_after: float = 120.0,
        interrupt_timeout: float | None = None,
    ) -> None:
        if app is None or not hasattr(app, "send_task"):
            raise TypeError("CeleryExecutor takes a Celery app")
        for node, queue in (routes or {}).items():
            if not isinstance(node, str) or not isinstance(queue, str) or not queue:
                raise TypeError(f"routes map node ids to queue names, got {node!r}: {queue!r}")
        if reap_interval <= 0 or stalled_after <= 0:
            raise ValueError("reap_interval and stalled_after must be positive seconds")
        if interrupt_timeout is not None and interrupt_timeout <= 0:
            raise ValueError("interrupt_timeout must be positive seconds (or None: no deadline)")
        self.app = app
        self.routes = dict(routes or {})
        self.reap_interval = float(reap_interval)
        self.stalled_after = float(stalled_after)
        self.interrupt_timeout = interrupt_timeout
        self.notifier = Notifier(app)
        _apply_safe_settings(app)
        app.steps["consumer"].add(GuardTaskMessages)  # malformed messages never stop a worker
        app.steps["consumer"].add(SurviveBrokerLoss)  # nor does a failed close of a lost broker
        self._register_common_tasks()
        schedule = dict(app.conf.beat_schedule or {})
        schedule.setdefault(
            names.REAP_TASK, {"task": names.REAP_TASK, "schedule": self.reap_interval}
        )
        app.conf.beat_schedule = schedule

    @property
    def in_process(self) -> bool:
        """Whether workers share this process (in-memory broker or eager mode)."""
        broker = str(self.app.conf.broker_url or "")
        return broker.startswith("memory://") or bool(self.app.conf.task_always_eager)

    def runtime(self, graph_id: str) -> GraphRuntime | None:
        return _registry(self.app).get(graph_id)

    def runtimes(self) -> list[GraphRuntime]:
        """Every graph registered on the app."""
        return list(_registry(self.app).values())

    def schedule_run(
        self,
        graph: CompiledGraph,
        name: str,
        schedule: Any,
        input: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
    ) -> None:
        """Start ``graph`` from ``celery beat`` on ``schedule`` (seconds, a ``timedelta``, a
        ``celery.schedules.crontab`` or ``schedule``); each run gets a new thread
        ``<name>-<timestamp>`` unless ``thread_id`` names one."""
        runtime = self.runtime(graph.graph_id)
        if runtime is None or runtime.compiled is not graph:
            raise GraphDefinitionError(
                f"graph {graph.graph_id!r} is not compiled with this executor; compile it with "
                "CompileConfig(executor=this executor) first"
            )
        entries = dict(self.app.conf.beat_schedule or {})
        entries[name] = {
            "task": names.START_TASK,
            "schedule": schedule,
            "kwargs": {
                "graph_id": graph.graph_id,
                "name": name,
                "input": runtime.serializer.to_jsonable(dict(input or {})),
                "thread_id": thread_id,
            },
        }
        self.app.conf.beat_schedule = entries

    # -- compile-time -----------------------------------------------------------------------------

    def attach(self, compiled: CompiledGraph) -> CelerySource:
        """Register ``compiled`` and its node tasks on the app (called by ``compile()``)."""
        from langgraph_celery.worker.client import CelerySource

        config = compiled.config
        if config.graph_id is None:
            raise GraphDefinitionError(
                "a graph run on Celery needs CompileConfig(graph_id='...'): workers find the graph "
                "by that id"
            )
        saver = config.checkpoint_saver
        if saver is None:
            raise GraphDefinitionError(
                f"graph {config.graph_id!r} runs on Celery and needs a checkpoint saver shared by "
                "all processes, e.g. SqlSaver('postgresql://...')"
            )
        missing = missing_for_celery(saver)
        if missing:
            name = type(saver).__name__
            raise GraphDefinitionError(
                f"graph {config.graph_id!r} runs on Celery, whose executor needs a saver that "
                "also indexes runs (langgraph_celery.checkpoint.RunIndex: claims, timers, the "
                f"run lookup), but {name} lacks {', '.join(missing)}: implement RunIndex in "
                f"{name}, as MemorySaver and SqlSaver do, or use SqlSaver"
            )
        if not saver.shared_across_processes and not self.in_process:
            raise GraphDefinitionError(
                f"graph {config.graph_id!r}: {type(saver).__name__} keeps checkpoints in this "
                "process, but the broker sends tasks to other processes; use SqlSaver with a "
                "database every worker reaches"
            )
        for node in self.routes:
            if node not in compiled.spec.nodes:
                raise GraphDefinitionError(f"routes names unknown node {node!r}")
        runtime = GraphRuntime(self, compiled)
        _registry(self.app)[compiled.graph_id] = runtime
        for node in compiled.spec.nodes:
            self._register_node_task(compiled.graph_id, node)
        return CelerySource(runtime)

    def _register_node_task(self, graph_id: str, node: str) -> None:
        name = names.node_task_name(graph_id, node)
        if name in self.app.tasks:
            return
        app = self.app

        def run_node(task: Any, /, *args: Any, **message: Any) -> dict[str, Any]:
            envelope = _envelope_or_reject(name, args, message)
            runtime = _registry(app).get(envelope.graph_id)
            if runtime is None or envelope.graph_id != graph_id or envelope.node != node:
                log.error(
                    "rejected message for %s: it names graph %r node %r",
                    name,
                    envelope.graph_id,
                    envelope.node,
                )
                raise Reject("message names another graph or node", requeue=False)

            def retry(countdown: float, error: BaseException) -> None:
                limit = float(app.conf.broker_transport_options.get("visibility_timeout", 3600))
                raise task.retry(countdown=min(countdown, limit * 0.9), exc=error, max_retries=None)

            try:
                return runtime.run_node(envelope, int(task.request.retries or 0), retry)
            except (OperationalError, InterfaceError) as error:
                # The checkpoint store is unreachable (connection killed, failover): nothing was
                # applied that a retry would apply twice, so run the task again shortly.
                log.warning("checkpoint store error in %s, retrying: %s", name, error)
                raise task.retry(countdown=0.5, exc=error, max_retries=_STORE_RETRIES) from error

        run_node.__name__ = f"node_{node}"
        # shared=False: a shared task would be added to every other app of the process too,
        # running this app's graphs (registry, saver) on the other app's workers.
        app.task(name=name, bind=True, acks_late=True, reject_on_worker_lost=True, shared=False)(
            run_node
        )

    def _register_common_tasks(self) -> None:
        app = self.app
        if names.RESUME_TASK in app.tasks:
            return

        def resume(task: Any, /, *args: Any, **message: Any) -> dict[str, Any]:
            envelope = _envelope_or_reject(names.RESUME_TASK, args, message)
            runtime = _registry(app).get(envelope.graph_id)
            if runtime is None:
                log.error("rejected resume: unknown graph %r", envelope.graph_id)
                raise Reject(f"unknown graph {envelope.graph_id!r}", requeue=False)
            try:
                return runtime.resume(envelope)
            except (OperationalError, InterfaceError) as error:
                # as for a node: sending the resumed step again is applied once
                log.warning("checkpoint store error in %s, retrying: %s", names.RESUME_TASK, error)
                raise task.retry(countdown=0.5, exc=error, max_retries=_STORE_RETRIES) from error

        app.task(name=names.RESUME_TASK, bind=True, acks_late=True, shared=False)(resume)

        def reap_task(task: Any) -> dict[str, Any]:
            from langgraph_celery.beat.reaper import reap

            return reap(self).to_data()

        app.task(name=names.REAP_TASK, bind=True, shared=False)(reap_task)

        def start(
            task: Any, graph_id: str, name: str, input: Any = None, thread_id: str | None = None
        ) -> dict[str, Any]:
            from langgraph_celery.beat.schedules import start_scheduled

            runtime = _registry(app).get(graph_id)
            if runtime is None:
                log.error("rejected scheduled start: unknown graph %r", graph_id)
                raise Reject(f"unknown graph {graph_id!r}", requeue=False)
            return start_scheduled(runtime, name, input, thread_id)

        app.task(name=names.START_TASK, bind=True, shared=False)(start)

    # -- sending ----------------------------------------------------------------------------------

    def _send_node(self, envelope: TaskEnvelope, task: PendingTask) -> None:
        options: dict[str, Any] = {
            "task_id": names.celery_task_id(envelope.run_id, envelope.checkpoint_id, task.id)
        }
        queue = self.routes.get(task.node)
        if queue is not None:
            options["queue"] = queue
        self.app.send_task(
            names.node_task_name(envelope.graph_id, task.node),
            kwargs=envelope.to_message(),
            argsrepr="()",
            kwargsrepr=_summary(envelope),
            **options,
        )

    def _send_resume(self, envelope: TaskEnvelope) -> None:
        self.app.send_task(
            names.RESUME_TASK,
            kwargs=envelope.to_message(),
            argsrepr="()",
            kwargsrepr=_summary(envelope),
        )


def _summary(envelope: TaskEnvelope) -> str:
    """What Flower and the logs show for a task's arguments (without building a repr)."""
    node = f" node={envelope.node}" if envelope.node else ""
    return (
        f"{{graph={envelope.graph_id}{node} thread={envelope.thread_id} run={envelope.run_id} "
        f"step={envelope.step} checkpoint={envelope.checkpoint_id}}}"
    )
