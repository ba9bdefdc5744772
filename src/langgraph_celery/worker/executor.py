"""CeleryExecutor: registers compiled graphs and their node tasks on a Celery app."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from celery.app.defaults import DEFAULTS
from celery.exceptions import Reject

from langgraph_celery.checkpoint.base import PendingTask
from langgraph_celery.errors import GraphDefinitionError
from langgraph_celery.worker import names
from langgraph_celery.worker.envelope import MalformedMessage, TaskEnvelope
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


def _envelope_or_reject(task_name: str, message: Mapping[str, Any]) -> TaskEnvelope:
    try:
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
    ) -> None:
        if app is None or not hasattr(app, "send_task"):
            raise TypeError("CeleryExecutor takes a Celery app")
        for node, queue in (routes or {}).items():
            if not isinstance(node, str) or not isinstance(queue, str) or not queue:
                raise TypeError(f"routes map node ids to queue names, got {node!r}: {queue!r}")
        if reap_interval <= 0 or stalled_after <= 0:
            raise ValueError("reap_interval and stalled_after must be positive seconds")
        self.app = app
        self.routes = dict(routes or {})
        self.reap_interval = float(reap_interval)
        self.stalled_after = float(stalled_after)
        _apply_safe_settings(app)
        self._register_common_tasks()

    @property
    def in_process(self) -> bool:
        """Whether workers share this process (in-memory broker or eager mode)."""
        broker = str(self.app.conf.broker_url or "")
        return broker.startswith("memory://") or bool(self.app.conf.task_always_eager)

    def runtime(self, graph_id: str) -> GraphRuntime | None:
        return _registry(self.app).get(graph_id)

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

        def run_node(task: Any, **message: Any) -> dict[str, Any]:
            envelope = _envelope_or_reject(name, message)
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

            return runtime.run_node(envelope, int(task.request.retries or 0), retry)

        run_node.__name__ = f"node_{node}"
        app.task(name=name, bind=True, acks_late=True, reject_on_worker_lost=True)(run_node)

    def _register_common_tasks(self) -> None:
        app = self.app
        if names.RESUME_TASK in app.tasks:
            return

        def resume(task: Any, **message: Any) -> dict[str, Any]:
            envelope = _envelope_or_reject(names.RESUME_TASK, message)
            runtime = _registry(app).get(envelope.graph_id)
            if runtime is None:
                log.error("rejected resume: unknown graph %r", envelope.graph_id)
                raise Reject(f"unknown graph {envelope.graph_id!r}", requeue=False)
            return runtime.resume(envelope)

        app.task(name=names.RESUME_TASK, bind=True, acks_late=True)(resume)

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
            **options,
        )

    def _send_resume(self, envelope: TaskEnvelope) -> None:
        self.app.send_task(names.RESUME_TASK, kwargs=envelope.to_message())
