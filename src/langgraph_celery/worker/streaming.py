"""What nodes stream while they run on a worker, on its way to the clients following the run.

A node task's config carries a sink (:func:`output_sink`) that publishes each output it streams
(``StreamingOutput`` items of a generator in its update, ``config.emit``) on the run's outputs
channel (``names.run_outputs_channel``) as one JSON message, at once, in the order the node
produced them.  A client following the run (``stream()``, ``RunHandle.stream()``) subscribes to
that channel with the thread's wake-ups and yields each message as a ``StreamingOutput`` (a
``NodeOutput`` emitted as itself comes back as a plain ``NodeOutput`` of its node: its class
does not travel), with the state the node was called with, read from the store.

Outputs are never stored: a client that attaches late gets the steps from the store, and what
was published before it subscribed is gone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint, PendingTask
from langgraph_celery.errors import SerializationError
from langgraph_celery.graph.config import Sink
from langgraph_celery.graph.types import NodeOutput, StreamingOutput
from langgraph_celery.serde import JsonSerializer
from langgraph_celery.worker.notify import Notifier

__all__ = ["Published", "decode", "output_sink"]

#: the ``kind`` of a message: a StreamingOutput's chunk, or another NodeOutput of the node
CHUNK, OUTPUT = "chunk", "output"


def output_sink(
    notifier: Notifier, serializer: JsonSerializer, checkpoint: Checkpoint, task: PendingTask
) -> Sink:
    """The sink of ``task`` (of ``checkpoint``'s step) on a worker: publishes what it streams."""
    run_id, checkpoint_id = checkpoint.run_id, checkpoint.checkpoint_id

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
    if not all(isinstance(value, str) for value in (checkpoint_id, task_id, node, kind)):
        return None
    try:
        chunk = serializer.from_jsonable(message.get("chunk"))
    except SerializationError:
        return None
    return Published(str(checkpoint_id), str(task_id), str(node), str(kind), chunk)
