"""The error tree: every error the library raises sits under :class:`GraphError`.

``GraphInterrupt`` is control flow (a node asking to pause), not an error, so it is
defined in :mod:`langgraph_celery.graph.types` and does not derive from ``GraphError``.
"""

from __future__ import annotations

__all__ = [
    "CheckpointConflictError",
    "GraphDefinitionError",
    "GraphError",
    "GraphRecursionError",
    "GraphStateError",
    "InvalidUpdateError",
    "NodeError",
    "SerializationError",
]


class GraphError(Exception):
    """Root of every error raised by langgraph-celery."""


class GraphDefinitionError(GraphError, ValueError):
    """The graph as built cannot be compiled (unknown node, missing edge, ...)."""


class GraphRecursionError(GraphError, RecursionError):
    """A run took more supersteps than its recursion limit allows."""


class InvalidUpdateError(GraphError):
    """A node or hook produced an update the state cannot take."""


class GraphStateError(GraphError):
    """The run or thread is not in a state that allows the request."""


class CheckpointConflictError(GraphStateError):
    """Another writer already stored a checkpoint for the same thread, run and step."""


class SchemaError(GraphStateError):
    """The saver's tables cannot be brought to the schema this code needs: they are newer than
    it, or their data stops a migration.  The message says what to do."""


class SerializationError(GraphError):
    """A value cannot be stored with the checkpoint saver's serializer."""


class NodeError(GraphError):
    """A node action failed for good (after any retries).

    ``node_id`` names the node, ``error_type`` the original exception's class name; the original
    exception is ``__cause__`` when it was raised in this process.
    """

    def __init__(self, node_id: str, error_type: str, message: str) -> None:
        # (the three fields are the args, so that Celery's result backend, which stores an
        # exception as its class and args in JSON, rebuilds it as it was)
        super().__init__(node_id, error_type, message)
        self.node_id = node_id
        self.error_type = error_type
        self.error_message = message

    def __str__(self) -> str:
        return (
            f"node {self.node_id!r} failed with {self.error_type}: {self.error_message}. The "
            "last checkpoint is intact: fix the cause and invoke GraphInput.resume() on the "
            "same thread to run the failed step again."
        )

    def __reduce__(self) -> tuple[type[NodeError], tuple[str, str, str]]:
        return (type(self), (self.node_id, self.error_type, self.error_message))
