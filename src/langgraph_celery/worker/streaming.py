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
from langgraph_celery.worker.notify import Notifier

__all__ = ["Published", "Relay", "decode", "output_sink"]

#: the ``kind`` of a message: a StreamingOutput's chunk, or another NodeOutput of the node
CHUNK, OUTPUT = "chunk", "output"


def output_sink(
    notifier: Notifier, serializer: JsonSerializer, checkpoint: Checkpoint, task: PendingTask
) -> Sink:
    """The sink of ``task`` (of ``checkpoint``'s step) on a worker: publishes what it streams."""
    run_id, checkpoint_id, step = checkpoint.run_id, checkpoint.checkpoint_id, checkpoint.step

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
            "task": task.id,
            "node": output.node,
            "kind": CHUNK if streamed else OUTPUT,
            "chunk": chunk,
        }
        notifier.publish_output(run_id, json.dumps(message, separators=(",", ":")))

    return publish


@dataclass(frozen=True)
class Published:
    """One message of a run's outputs channel, decoded."""

    checkpoint_id: str
    step: int
    task_id: str
    node: str
    kind: str
    chunk: Any

    def output(self, state: Any) -> NodeOutput:
        if self.kind == CHUNK:
            return StreamingOutput(self.node, self.chunk, state)
        return NodeOutput(self.node, state)


def decode(serializer: JsonSerializer, data: bytes) -> Published | None:
    """A message of the outputs channel, or ``None`` if it is not one of ours."""
    try:
        message = json.loads(data)
    except ValueError:
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
    except SerializationError:
        return None
    return Published(str(checkpoint_id), step, str(task_id), str(node), str(kind), chunk)


class Relay:
    """A follower's outputs channel, relayed in the run's order (see the module's docstring).

    ``make_state(values)`` builds the state a node was called with from stored values.
    """

    def __init__(self, serializer: JsonSerializer, make_state: Callable[[Any], Any]) -> None:
        self._serializer = serializer
        self._make_state = make_state
        self._later: list[Published] = []  # messages of steps the follower has not read yet

    def running(self, messages: list[bytes], seen: Checkpoint) -> tuple[list[NodeOutput], bool]:
        """The outputs of ``messages`` to yield now, those of ``seen``'s step (the latest the
        follower read); and whether one came from a later step (the follower then reads the
        store): those wait for :meth:`stepped`.  A message of an earlier step is stale (one
        left on a reused connection, or of a node that ran again after its step was stored):
        it is dropped."""
        outputs: list[NodeOutput] = []
        later = False
        for published in self._decode(messages):
            if published.step > seen.step or self._later:
                self._later.append(published)
                later = True
            elif published.checkpoint_id == seen.checkpoint_id:
                outputs.append(self._output(published, seen))
        return outputs, later

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
        that step stored (``step_outputs``).  Messages of steps after ``since`` are kept;
        stale ones dropped."""
        chain = [seen, *since]
        position = {checkpoint.checkpoint_id: index for index, checkpoint in enumerate(chain)}
        groups: list[list[NodeOutput]] = [[] for _ in chain]
        kept, self._later = self._later, []
        for published in [*kept, *self._decode(messages)]:
            index = position.get(published.checkpoint_id)
            if index is not None:
                groups[index].append(self._output(published, chain[index]))
            elif published.step > chain[-1].step:
                self._later.append(published)
        outputs = groups[0]
        for index, checkpoint in enumerate(since, start=1):
            outputs.extend(step_outputs(checkpoint))
            outputs.extend(groups[index])
        return outputs

    def _decode(self, messages: list[bytes]) -> list[Published]:
        decoded = (decode(self._serializer, data) for data in messages)
        return [published for published in decoded if published is not None]

    def _output(self, published: Published, checkpoint: Checkpoint) -> NodeOutput:
        """``published`` with the state its node was called with: that of its step's
        checkpoint, or its task's own input (a ``Send``)."""
        task = next((t for t in checkpoint.tasks if t.id == published.task_id), None)
        values = task.arg if task is not None and task.has_arg else checkpoint.values
        return published.output(self._make_state(values))
