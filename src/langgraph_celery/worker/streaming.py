"""What nodes stream while they run on a worker, on its way to the clients following the run.

A node task's config carries a sink (:func:`output_sink`) that publishes each output it streams
(``StreamingOutput`` items of a generator in its update, ``config.emit``) on the run's outputs
channel (``names.run_outputs_channel``) as one JSON message, at once, in the order the node
produced them.  A client following the run (``stream()``, ``RunHandle.stream()``) subscribes to
that channel with the thread's wake-ups and yields each message as a ``StreamingOutput`` (a
``NodeOutput`` emitted as itself comes back as a plain ``NodeOutput`` of its node: its class
does not travel), with the state the node was called with, read from the store.

A follower yields them in the run's order (:class:`Relay`): the outputs of the step it knows is
running as they come; when it reads a new step in the store, it first receives every message
published before (:meth:`~langgraph_celery.worker.notify.Subscription.sync`: a node publishes
what it streams before its update is recorded, so before its step is stored), then yields, step
by step, what the step's nodes streamed and the step's outputs.  Messages of a step stored after
that read wait for the next one.  So each client that streamed a run from its start gets every
output once, in order, before its step's ``NodeOutput``.

A compiled subgraph's child run (``worker/subgraphs.py``) streams to the clients of its root
run: its node tasks publish on the root run's channel, and the worker that stores each step of
the child publishes a ``step`` message, before the child's next tasks are sent.  Each message
names the root's step the subgraph node is pending in (its checkpoint, step and task, so the
order above holds) and, as its ``source``, the child's graph, thread, checkpoint and task; the
follower reads that checkpoint to yield the child's outputs with the child's node ids and
state, as in process.

A step of a ``durability="exit"`` run carried in the result backend (``worker/carry.py``) is not
in the store: the task that carries it publishes it on the run's channel (a ``carried`` message,
the checkpoint itself, before the next step's task is sent), and the follower takes it as a step
read from the store (:meth:`Relay.carried_after`), in the same order.

Outputs are never stored: a client that attaches late gets the steps from the store, and what
was published before it subscribed is gone.  They travel on Redis only (the app's result
backend, else its broker, when it is Redis): with another transport (``memory://``, RabbitMQ
with another backend) a follower gets the steps, not what the nodes streamed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint, PendingTask
from langgraph_celery.errors import SerializationError
from langgraph_celery.graph.config import Sink
from langgraph_celery.graph.types import NodeOutput, StreamingOutput
from langgraph_celery.serde import JsonSerializer
from langgraph_celery.worker import names
from langgraph_celery.worker.carry import carried_of
from langgraph_celery.worker.notify import Notifier

__all__ = [
    "Published",
    "Relay",
    "Source",
    "carried_step",
    "decode",
    "output_sink",
    "publish_step",
]

#: the ``kind`` of a message: a StreamingOutput's chunk, another NodeOutput of the node, a
#: step a compiled subgraph's child run stored (its node outputs), or a step of a
#: ``durability="exit"`` run carried in the result backend, not stored (the checkpoint itself)
CHUNK, OUTPUT, STEP, CARRIED = "chunk", "output", "step", "carried"


@dataclass(frozen=True)
class Source:
    """Where a message of a child run comes from: the child's graph, thread, checkpoint (the
    step a chunk's node runs in, or the step the child stored) and task."""

    graph_id: str
    thread_id: str
    checkpoint_id: str
    task_id: str

    def to_data(self) -> dict[str, str]:
        return {
            "graph": self.graph_id,
            "thread": self.thread_id,
            "at": self.checkpoint_id,
            "task": self.task_id,
        }

    @classmethod
    def of(cls, data: Any) -> Source | None:
        if not isinstance(data, Mapping):
            return None
        fields = [data.get(key) for key in ("graph", "thread", "at", "task")]
        if not all(isinstance(value, str) for value in fields):
            return None
        return cls(*(str(value) for value in fields))


def _target(checkpoint: Checkpoint, task: PendingTask, root: Mapping[str, Any] | None) -> Any:
    """The run, checkpoint, step and task a message is published under: the node's own, or,
    in a child run, those of the root run's step (``root``)."""
    if root is None:
        return checkpoint.run_id, checkpoint.checkpoint_id, checkpoint.step, task.id
    return root["run_id"], root["checkpoint_id"], root["step"], root["task_id"]


def publish_step(
    notifier: Notifier, root: Mapping[str, Any], graph_id: str, checkpoint: Checkpoint
) -> None:
    """Publish that a child run (of graph ``graph_id``) stored ``checkpoint``, a step whose
    node outputs the clients of the root run (``root``: see ``worker/subgraphs.py``) yield."""
    message = {
        "checkpoint": root["checkpoint_id"],
        "step": root["step"],
        "task": root["task_id"],
        "node": "",
        "kind": STEP,
        "chunk": None,
        "source": Source(graph_id, checkpoint.thread_id, checkpoint.checkpoint_id, "").to_data(),
    }
    notifier.publish_output(str(root["run_id"]), json.dumps(message, separators=(",", ":")))


def output_sink(
    notifier: Notifier,
    serializer: JsonSerializer,
    checkpoint: Checkpoint,
    task: PendingTask,
    root: tuple[str, Mapping[str, Any]] | None = None,
) -> Sink:
    """The sink of ``task`` (of ``checkpoint``'s step) on a worker: publishes what it streams;
    in a child run (``root``: the child's graph id and the root run's step), on the root run's
    channel."""
    run_id, checkpoint_id, step, task_id = _target(checkpoint, task, root and root[1])
    source = None
    if root is not None:
        source = Source(root[0], checkpoint.thread_id, checkpoint.checkpoint_id, task.id)

    def publish(output: NodeOutput) -> None:
        streamed = isinstance(output, StreamingOutput)
        value = output.chunk if isinstance(output, StreamingOutput) else None
        try:
            chunk = serializer.to_jsonable(value)
        except SerializationError as error:
            raise SerializationError(
                f"node {task.node!r} streamed a {type(value).__name__} that cannot "
                f"travel to the clients of a Celery run ({error}); stream JSON values, or "
                "register the class on the saver's JsonSerializer"
            ) from None
        message = {
            "checkpoint": checkpoint_id,
            "step": step,
            "task": task_id,
            "node": output.node,
            "kind": CHUNK if streamed else OUTPUT,
            "chunk": chunk,
        }
        if source is not None:
            message["source"] = source.to_data()
        notifier.publish_output(run_id, json.dumps(message, separators=(",", ":")))

    return publish


def carried_step(checkpoint: Checkpoint) -> Callable[[str], tuple[str, str]]:
    """What the task that carries ``checkpoint`` (a step of a root run with durability "exit")
    publishes with it (``worker/carry.py``): the run's outputs channel, and a message holding
    what is carried (``data``, JSON already) for the clients following the run."""

    def announce(data: str) -> tuple[str, str]:
        head = json.dumps(
            {
                "checkpoint": checkpoint.checkpoint_id,
                "step": checkpoint.step,
                "task": "",
                "node": "",
                "kind": CARRIED,
                "chunk": None,
            },
            separators=(",", ":"),
        )
        return names.run_outputs_channel(checkpoint.run_id), f'{head[:-1]},"carried":{data}}}'

    return announce


@dataclass(frozen=True)
class Published:
    """One message of a run's outputs channel, decoded."""

    checkpoint_id: str
    step: int
    task_id: str
    node: str
    kind: str
    chunk: Any
    source: Source | None = None
    #: (kind ``carried``) the step's checkpoint
    carried: Checkpoint | None = None

    def output(self, state: Any) -> NodeOutput:
        if self.kind == CHUNK:
            return StreamingOutput(self.node, self.chunk, state)
        return NodeOutput(self.node, state)


def decode(serializer: JsonSerializer, data: bytes) -> Published | None:
    """A message of the outputs channel, or ``None`` if it is not one of ours."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):  # (RecursionError: nested deeper than json parses)
        return None
    if not isinstance(message, Mapping):
        return None
    fields = (message.get(key) for key in ("checkpoint", "task", "node", "kind"))
    checkpoint_id, task_id, node, kind = fields
    step = message.get("step")
    if not all(isinstance(value, str) for value in (checkpoint_id, task_id, node, kind)):
        return None
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    try:
        chunk = serializer.from_jsonable(message.get("chunk"))
    except (SerializationError, RecursionError):
        return None
    source = Source.of(message.get("source")) if "source" in message else None
    if kind == STEP and source is None:
        return None
    carried = None
    if kind == CARRIED:
        try:
            carried = carried_of(serializer.from_jsonable(message.get("carried"))).checkpoint
        except (SerializationError, KeyError, TypeError, ValueError, RecursionError):
            return None
        if carried.checkpoint_id != checkpoint_id:
            return None
    return Published(
        str(checkpoint_id), step, str(task_id), str(node), str(kind), chunk, source, carried
    )


class Relay:
    """A follower's outputs channel, relayed in the run's order (see the module's docstring).

    ``make_state(values)`` builds the state a node was called with from stored values;
    ``of_child(published)`` the outputs of a child run's message (they read the store).

    The steps of a ``durability="exit"`` run carried in the result backend come as messages
    too (kind ``carried``, the checkpoint itself): the relay keeps them, and the follower takes
    them as steps read from the store (:meth:`carried_after`, then :meth:`stepped`), so that it
    yields every step of the run, as in process, and what each step's nodes streamed.
    """

    def __init__(
        self,
        serializer: JsonSerializer,
        make_state: Callable[[Any], Any],
        of_child: Callable[[Published], list[NodeOutput]],
    ) -> None:
        self._serializer = serializer
        self._make_state = make_state
        self._of_child = of_child
        self._later: list[Published] = []  # messages of steps the follower has not read yet
        self._carried: dict[str, Checkpoint] = {}  # carried steps received, by their parent
        #: the last step :meth:`stepped` yielded the outputs of
        self.reached: Checkpoint | None = None

    def running(self, messages: list[bytes], seen: Checkpoint) -> tuple[list[NodeOutput], bool]:
        """The outputs of ``messages`` to yield now, those of ``seen``'s step (the latest the
        follower read); and whether one came from a later step, or a step was carried (the
        follower then reads the store): those wait for :meth:`stepped`.  A message of an
        earlier step is stale (one left on a reused connection, or of a node that ran again
        after its step was stored): it is dropped."""
        outputs: list[NodeOutput] = []
        later = False
        for published in self._decode(messages):
            if published.step > seen.step or self._later:
                self._later.append(published)
                later = True
            elif published.checkpoint_id == seen.checkpoint_id:
                outputs.extend(self._outputs(published, seen))
        return outputs, later or seen.checkpoint_id in self._carried

    def carried_after(self, seen: Checkpoint) -> list[Checkpoint]:
        """The carried steps received that follow ``seen``, oldest first."""
        chain: list[Checkpoint] = []
        at = seen.checkpoint_id
        while at in self._carried and len(chain) <= len(self._carried):
            chain.append(self._carried[at])
            at = chain[-1].checkpoint_id
        return chain

    def stepped(
        self,
        messages: list[bytes],
        seen: Checkpoint,
        since: Sequence[Checkpoint],
        step_outputs: Callable[[Checkpoint], list[NodeOutput]],
    ) -> list[NodeOutput]:
        """What to yield once the follower read ``since`` (the checkpoints after ``seen``,
        oldest first) and received every message published before (``messages``, and those
        kept from earlier): each step's streamed outputs, then the outputs of the checkpoint
        that step stored (``step_outputs``).  Steps carried after ``seen`` come first (a
        stored copy of one is not yielded again), and the last step yielded is
        :attr:`reached`.  Messages of steps after that are kept; stale ones dropped."""
        kept, self._later = self._later, []
        published = [*kept, *self._decode(messages)]
        chain = [seen, *self.carried_after(seen)]
        known = {checkpoint.checkpoint_id for checkpoint in chain}
        for checkpoint in since:
            if checkpoint.checkpoint_id not in known and checkpoint.step > chain[-1].step:
                chain.append(checkpoint)
        position = {checkpoint.checkpoint_id: index for index, checkpoint in enumerate(chain)}
        groups: list[list[NodeOutput]] = [[] for _ in chain]
        for message in published:
            index = position.get(message.checkpoint_id)
            if index is not None:
                groups[index].extend(self._outputs(message, chain[index]))
            elif message.step > chain[-1].step:
                self._later.append(message)
        outputs = groups[0]
        for index, checkpoint in enumerate(chain[1:], start=1):
            outputs.extend(step_outputs(checkpoint))
            outputs.extend(groups[index])
        self.reached = chain[-1]
        self._carried = {
            parent: carried
            for parent, carried in self._carried.items()
            if carried.step > self.reached.step
        }
        return outputs

    def _decode(self, messages: list[bytes]) -> list[Published]:
        """The messages but carried steps, which are kept aside (see :meth:`carried_after`)."""
        decoded: list[Published] = []
        for data in messages:
            published = decode(self._serializer, data)
            if published is None:
                continue
            if published.carried is not None:
                if published.carried.parent_id is not None:
                    self._carried[published.carried.parent_id] = published.carried
                continue
            decoded.append(published)
        return decoded

    def _outputs(self, published: Published, checkpoint: Checkpoint) -> list[NodeOutput]:
        """``published`` with the state its node was called with: that of its step's
        checkpoint, or its task's own input (a ``Send``); a child run's, from its source."""
        if published.source is not None:
            return self._of_child(published)
        task = next((t for t in checkpoint.tasks if t.id == published.task_id), None)
        values = task.arg if task is not None and task.has_arg else checkpoint.values
        return [published.output(self._make_state(values))]
