"""Every name the Celery side of langgraph-celery puts on the wire or in a store, in one place.

Task names
    ``langgraph_celery.node.<graph_id>.<node_id>``  one task per node of each registered graph;
    its keyword arguments are a :class:`~langgraph_celery.worker.envelope.TaskEnvelope` (graph,
    node, thread, run, step, checkpoint, task), so Flower shows what ran where.
    ``langgraph_celery.resume``  continues a parked run (sent by earlier clients; served still).
    ``langgraph_celery.reap``  the beat job that re-dispatches stalled runs and expires
    parked runs whose interrupt deadline passed.
    ``langgraph_celery.start``  starts a run from a beat schedule (``schedule_run``).

Celery task ids
    ``lgc:<run_id>:<checkpoint_id>:<task_id>``  deterministic, so a re-dispatch of the same
    step's task is recognisable and its write is applied once.

Marks (pending writes of a kind other than ``update`` (``WriteKind``), under these reserved task
ids so that the first of each wins; defined with the run loop's step records as
:class:`langgraph_celery.graph._marks.Mark`)
    ``__interrupt__``  the run is parked at this checkpoint (value: the interruption).
    ``__error__``  a node of this checkpoint failed for good (value: node, type, message).
    ``__claim__``  a transition out of this checkpoint (new run, resume, update, fork) was
    claimed (value: the claimant's token and when).
    ``__cancel__``  the run was cancelled at this checkpoint.

Checkpoint ``extra`` keys: :class:`langgraph_celery.graph._marks.Extra`.

Timers (one per thread, in the checkpoint store's timers table)
    ``stall``  the thread has an active run: the reaper checks it progresses.
    ``deadline``  the thread's run is parked with an interrupt timeout.

Redis channels (wake-ups, when the app uses Redis)
    ``langgraph_celery:thread:<thread_id>``  published when a step or marker of the thread is
    committed (unless the result backend publishes the step's task result: see
    ``worker/notify.py``); clients following a run's steps wait on it.
    ``langgraph_celery:thread:<thread_id>:final``  published when a run of the thread stops
    (completed, parked, failed, cancelled); clients waiting for the end wait on it only,
    clients following the steps on it too.
    ``langgraph_celery:run:<run_id>:outputs``  what the run's nodes stream while they run
    (``StreamingOutput`` items, ``config.emit``), one message per output, in the order each node
    produced them (see ``worker/streaming.py``).  Never stored: a client that subscribes late
    misses what was published before, and reads the steps from the store.

Result backend keys (``durability="exit"`` and ``"async"``: see ``worker/carry.py``; they
expire with the app's ``result_expires``)
    ``lgc:carried:<checkpoint_id>``  a checkpoint carried to its step's task before (async) or
    instead of (exit) the checkpoint store (JSON); removed when the next one is put, or (exit)
    when it is stored.
    ``lgc:stored:<checkpoint_id>``  (async) the carried checkpoint is in the store now: the task
    that carried it stored it behind its step; removed by that step's task as it reads it.
    ``lgc:cancelled:<run_id>``  the id of the stored checkpoint at which a client cancelled the
    run: its carried steps stop there.
    ``lgc:sending:<checkpoint_id>``  the task that carries a checkpoint and sends its step's tasks
    (of the tasks of a step of several that may all commit it, the first); expires after the
    executor's ``stalled_after``, when the reaper may send the step again.

Message headers
    ``lgc_carried``  (true) on a node task whose step's checkpoint is carried in the result
    backend.

Beat schedule entries
    ``langgraph_celery.reap``  the reaper, every ``reap_interval`` seconds.

Queues
    Node, resume and maintenance tasks go to the app's default queue (``task_default_queue``,
    ``celery`` unless changed), so a plain ``celery -A module worker`` serves them; a node routed
    with ``CeleryExecutor(app, routes={"node": "queue"})`` (or ``{"graph_id:node": "queue"}``)
    goes to that queue instead, through the router the executor puts first in the app's
    ``task_routes`` (``worker/routing.py``); the app's own ``task_routes`` route the rest.
"""

from __future__ import annotations

from langgraph_celery.graph._marks import Mark

__all__ = [
    "CANCEL",
    "CANCELLED_KEY",
    "CARRIED_HEADER",
    "CARRIED_KEY",
    "CLAIM",
    "DEADLINE_TIMER",
    "ERROR",
    "INTERRUPT",
    "REAP_TASK",
    "RESUME_TASK",
    "SENDING_KEY",
    "STALL_TIMER",
    "START_TASK",
    "STEP_TASK_ID_PREFIX",
    "STORED_KEY",
    "celery_task_id",
    "is_node_task",
    "node_task_name",
    "run_outputs_channel",
    "thread_channel",
]

RESUME_TASK = "langgraph_celery.resume"
REAP_TASK = "langgraph_celery.reap"
START_TASK = "langgraph_celery.start"
STALL_TIMER = "stall"
CARRIED_HEADER = "lgc_carried"
CARRIED_KEY = "lgc:carried:"
CANCELLED_KEY = "lgc:cancelled:"
STORED_KEY = "lgc:stored:"
SENDING_KEY = "lgc:sending:"
DEADLINE_TIMER = "deadline"
_NODE_PREFIX = "langgraph_celery.node."

INTERRUPT, ERROR, CLAIM, CANCEL = Mark.INTERRUPT, Mark.ERROR, Mark.CLAIM, Mark.CANCEL


def node_task_name(graph_id: str, node: str) -> str:
    return f"{_NODE_PREFIX}{graph_id}.{node}"


def is_node_task(name: str) -> bool:
    return name.startswith(_NODE_PREFIX)


#: How every step's Celery task id starts (:func:`celery_task_id`).
STEP_TASK_ID_PREFIX = "lgc:"


def celery_task_id(run_id: str, checkpoint_id: str, task_id: str) -> str:
    return f"{STEP_TASK_ID_PREFIX}{run_id}:{checkpoint_id}:{task_id}"


def thread_channel(thread_id: str, final: bool = False) -> str:
    """The Redis channel of a thread's wake-ups: every committed step, or (``final``) only the
    events that stop a run (completed, parked, failed, cancelled)."""
    channel = f"langgraph_celery:thread:{thread_id}"
    return f"{channel}:final" if final else channel


def run_outputs_channel(run_id: str) -> str:
    """The Redis channel on which the nodes of run ``run_id`` publish what they stream."""
    return f"langgraph_celery:run:{run_id}:outputs"
