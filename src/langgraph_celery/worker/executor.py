"""CeleryExecutor: registers compiled graphs and their node tasks on a Celery app."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from celery.app.defaults import DEFAULTS

from langgraph_celery.checkpoint.base import PendingTask
from langgraph_celery.checkpoint.index import missing_for_celery
from langgraph_celery.errors import GraphDefinitionError
from langgraph_celery.graph.retry import seconds_of
from langgraph_celery.worker import carry, names, routing, subgraphs, tasks
from langgraph_celery.worker.envelope import TaskEnvelope
from langgraph_celery.worker.guard import GuardTaskMessages, longest_countdown
from langgraph_celery.worker.lost import NodeRequest
from langgraph_celery.worker.notify import Notifier
from langgraph_celery.worker.reconnect import SurviveBrokerLoss, SurvivingRequest
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
    # every task result (and a carried checkpoint: worker/carry.py) expires after an hour, so
    # long or many runs cannot fill the result backend (Celery's default keeps them a day)
    "result_expires": 3600,
}


def _apply_safe_settings(app: Any) -> None:
    conf = app.conf
    for key, value in SAFE_SETTINGS.items():
        current = conf.get(key)
        default = DEFAULTS.get(key)
        if key in conf.changes or (current != default and current is not None):
            continue
        conf[key] = value


#: What each of the executor's durations is, and what ``None`` means where it is allowed.
_DURATIONS = {
    "reap_interval": ("the seconds between the beat reaper's passes", None),
    "stalled_after": ("the seconds after which a run's pending step counts as stalled", None),
    "interrupt_timeout": ("the seconds a parked run waits", "None: no deadline"),
    "node_timeout": ("the seconds a node may run", "None: no time limit"),
    "checkpoint_ttl": (
        "the seconds a completed thread is kept after its last checkpoint",
        "None to keep threads",
    ),
}


#: The longest duration taken (a hundred years): a deadline or an age further away than that
#: would overflow the dates the reaper computes from it.
_MOST_SECONDS = 100 * 365.25 * 86400


def _seconds(option: str, value: object) -> float | None:
    """The executor's duration ``option`` in seconds: positive seconds (a number or a
    ``timedelta``, as ``RetryPolicy``'s), or ``None`` where that is allowed; anything else is
    refused, naming the option."""
    what, none = _DURATIONS[option]
    if value is None and none is not None:
        return None
    seconds = seconds_of(value)
    if seconds is None or not 0 < seconds <= _MOST_SECONDS:
        alternative = f", or {none}" if none else ""
        raise ValueError(
            f"{option}={value!r}: give {what} (a positive number or a timedelta, of at most "
            f"a hundred years){alternative}"
        )
    return seconds


def _required(seconds: float | None) -> float:
    assert seconds is not None  # (refused by _seconds: the option does not take None)
    return seconds


class CeleryExecutor:
    """Runs every node of the graphs compiled with it as a Celery task on ``app``'s workers.

    ``routes`` maps node ids (every graph's node of that id) or ``"graph_id:node"`` keys (that
    graph's node; it wins over a plain key) to queues, through ``app.conf.task_routes``: the
    executor's routes win for the nodes they name, the app's own ``task_routes`` route every
    other task (see ``worker/routing.py``). ``reap_interval`` and ``stalled_after`` (seconds)
    drive the beat job that re-dispatches runs whose pending step has no live task;
    ``interrupt_timeout`` gives parked runs a deadline, ``node_timeout`` every node a time limit
    (``add_node(..., timeout=)`` overrides it).  With ``checkpoint_ttl`` (seconds, or a
    ``timedelta``), the same beat job deletes each thread of the executor's graphs whose run
    completed and whose last checkpoint is older than that (``saver.delete_thread``; see
    ``beat/reaper.py``).

    Two steps are added to the consumer of ``app``'s workers, each of which a keyword turns off
    (for an app whose consumer is patched otherwise, or to see Celery's own behaviour):

    * ``guard_task_messages`` (:class:`~langgraph_celery.worker.guard.GuardTaskMessages`): a
      message Celery's consumer cannot turn into a request (a body that is not ``[args, kwargs,
      embed]``, no task id, a malformed ``timelimit``) is rejected and logged.  Off, such a
      message stops the worker ("Unrecoverable error"), then the next one it is redelivered to.
    * ``survive_broker_loss`` (:class:`~langgraph_celery.worker.reconnect.SurviveBrokerLoss`): a
      failure to close the lost connection when the broker goes away is logged and the worker
      reconnects.  Off, Kombu's Redis transport can stop the worker there.

    The steps belong to the app: a worker runs one if any executor of its app added it.
    """

    #: How many deliveries of a node task's message may end with its worker process dead
    #: (killed, ``sys.exit``, the hard time limit) before the run fails instead of running the
    #: node again.
    max_deliveries: int = 3

    def __init__(
        self,
        app: Any,
        routes: Mapping[str, str] | None = None,
        reap_interval: float | timedelta = 30.0,
        stalled_after: float | timedelta = 120.0,
        interrupt_timeout: float | timedelta | None = None,
        node_timeout: float | timedelta | None = None,
        *,
        checkpoint_ttl: float | timedelta | None = None,
        guard_task_messages: bool = True,
        survive_broker_loss: bool = True,
    ) -> None:
        if app is None or not hasattr(app, "send_task"):
            raise TypeError("CeleryExecutor takes a Celery app")
        for node, queue in (routes or {}).items():
            if not isinstance(node, str) or not isinstance(queue, str) or not queue:
                raise TypeError(f"routes map node ids to queue names, got {node!r}: {queue!r}")
        given = {
            "reap_interval": reap_interval,
            "stalled_after": stalled_after,
            "interrupt_timeout": interrupt_timeout,
            "node_timeout": node_timeout,
            "checkpoint_ttl": checkpoint_ttl,
        }
        seconds = {option: _seconds(option, value) for option, value in given.items()}
        self.app = app
        self.routes = dict(routes or {})
        self._graph_nodes: dict[str, tuple[str, ...]] = {}  # the graphs compiled with it
        self.reap_interval = _required(seconds["reap_interval"])
        self.stalled_after = _required(seconds["stalled_after"])
        self.interrupt_timeout = seconds["interrupt_timeout"]
        self.node_timeout = seconds["node_timeout"]
        self.checkpoint_ttl = seconds["checkpoint_ttl"]
        self.notifier = Notifier(app)
        _apply_safe_settings(app)
        if guard_task_messages:  # malformed messages never stop a worker
            app.steps["consumer"].add(GuardTaskMessages)
        # ... nor does a failed close of a lost broker connection, or a task's acknowledgement
        # on a connection lost while it ran (the node and resume tasks' request class, which
        # also reports a task whose process died before its hard time limit as lost)
        self._request_class: Any = SurvivingRequest if survive_broker_loss else NodeRequest
        if survive_broker_loss:
            app.steps["consumer"].add(SurviveBrokerLoss)
        if self.routes:
            routing.router_of(app).executors.add(self)
            app.steps["worker"].add(routing.CheckRoutes)  # a key naming no node stops a worker
        tasks.register_common_tasks(self)
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
        return tasks.registry(self.app).get(graph_id)

    def runtimes(self) -> list[GraphRuntime]:
        """Every graph registered on the app."""
        return list(tasks.registry(self.app).values())

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
        return CelerySource(self.register(compiled))

    def register(self, compiled: CompiledGraph) -> GraphRuntime:
        """Register ``compiled`` (checked by :meth:`attach`), its node tasks and its compiled
        subgraphs (``worker/subgraphs.py``) on the app."""
        nodes = tuple(compiled.spec.nodes)
        routing.check_graph_keys(self.routes, compiled.graph_id, nodes)
        runtime = GraphRuntime(self, compiled)
        tasks.registry(self.app)[compiled.graph_id] = runtime
        for node in compiled.spec.nodes:
            limit = compiled.spec.timeouts.get(node, self.node_timeout)
            tasks.register_node_task(self, compiled.graph_id, node, limit)
        routing.assign(
            self.app, compiled.graph_id, routing.queues_for(self.routes, compiled.graph_id, nodes)
        )
        self._graph_nodes[compiled.graph_id] = nodes
        subgraphs.register_children(self, runtime)
        return runtime

    def check_routes(self) -> None:
        """Raise :class:`GraphDefinitionError` if a ``routes`` key names no node of the graphs
        compiled with this executor so far (a worker checks this when it starts)."""
        unmatched = routing.unmatched_keys(self.routes, self._graph_nodes)
        if unmatched:
            raise GraphDefinitionError(routing.unmatched_message(unmatched, self._graph_nodes))

    # -- sending ----------------------------------------------------------------------------------

    def _send_node(
        self,
        envelope: TaskEnvelope,
        task: PendingTask,
        carried: bool = False,
        parent: str | None = None,
        countdown: float | None = None,
    ) -> None:
        """``carried``: the step's checkpoint is in the result backend (the header says so:
        ``worker/carry.py``), and the task stores no result of its own there unless it fails
        (``ignore_result``: its step is the carried checkpoint, its progress the store's and
        Celery's events); ``parent``: of a child run's task, the parent's thread and the
        subgraph's path, shown with its arguments (in Flower); ``countdown``: seconds before
        a worker runs it (a compiled subgraph node's retry), at most :func:`longest_countdown`
        (a worker refuses a node task message due later)."""
        if countdown is not None:
            countdown = min(countdown, longest_countdown(self.app))
        # the queue comes from app.conf.task_routes (the executor's routes first)
        self.app.send_task(
            names.node_task_name(envelope.graph_id, task.node),
            kwargs=envelope.to_message(),
            task_id=names.celery_task_id(envelope.run_id, envelope.checkpoint_id, task.id),
            argsrepr="()",
            kwargsrepr=_summary(envelope, parent),
            headers={carry.HEADER: True} if carried else None,
            ignore_result=carried,
            countdown=countdown,
        )


def _summary(envelope: TaskEnvelope, parent: str | None = None) -> str:
    """What Flower and the logs show for a task's arguments (without building a repr)."""
    node = f" node={envelope.node}" if envelope.node else ""
    return (
        f"{{graph={envelope.graph_id}{node} thread={envelope.thread_id} run={envelope.run_id} "
        f"step={envelope.step} checkpoint={envelope.checkpoint_id}{parent or ''}}}"
    )
