"""Frozen configuration: how a graph is compiled and how one invocation runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, get_args

from langgraph_celery.errors import GraphStateError
from langgraph_celery.graph.types import NodeOutput, StreamingOutput, StreamMode

if TYPE_CHECKING:
    from langgraph_celery.checkpoint.base import BaseCheckpointSaver

__all__ = [
    "DURABILITY_MODES",
    "MAX_ID_LENGTH",
    "RESERVED_METADATA_KEYS",
    "CompileConfig",
    "Durability",
    "RunnableConfig",
    "Sink",
    "check_id",
    "require_id",
]

#: Where the outputs a run streams while a node runs go (``config.emit``, a streaming node's
#: chunks): the in-process executor's stream, or a worker's channel of the run.  Called from
#: the run's event loop or from a thread running a plain node.
Sink = Callable[[NodeOutput], None]

#: When a run stores its checkpoints (LangGraph's names): ``"sync"`` each step before the next
#: starts; ``"async"`` each step while the next one runs; ``"exit"`` only where the run stops
#: (parked, failed, cancelled, ended).  See docs/failure-modes.md for what a crash loses in each.
Durability = Literal["sync", "async", "exit"]
DURABILITY_MODES: tuple[str, ...] = get_args(Durability)

#: Metadata keys the runtime owns; ``put_metadata``/``add_metadata`` refuse them.
RESERVED_METADATA_KEYS = frozenset({"graph_id", "node_id", "node_path", "thread_id", "run_id"})

#: The longest thread, graph or node id: what a checkpoint store's id columns keep.  A longer one
#: is refused where it is given, before anything is stored or sent.
MAX_ID_LENGTH = 255


def check_id(what: str, value: str) -> str | None:
    """Why ``value`` cannot be a ``what`` id (too long), or ``None``."""
    if len(value) > MAX_ID_LENGTH:
        return (
            f"{what} is {len(value)} characters long; ids have at most {MAX_ID_LENGTH} "
            f"characters (the checkpoint store's id columns): {value[:40]!r}..."
        )
    return None


def require_id(what: str, value: object) -> str:
    """``value``, if it can be a ``what`` id: a non-empty string of at most
    :data:`MAX_ID_LENGTH` characters; else ``ValueError`` saying why."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    too_long = check_id(what, value)
    if too_long:
        raise ValueError(too_long)
    return value


def _check_limit(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be greater than 0, got {value}")


def _names(name: str, value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{name} takes node ids (str), got {item!r}")
    return items


@dataclass(frozen=True)
class CompileConfig:
    """How a graph is compiled: checkpoints, interruptions, limits and where nodes run."""

    checkpoint_saver: BaseCheckpointSaver | None = None
    interrupt_before: tuple[str, ...] = ()
    interrupt_after: tuple[str, ...] = ()
    interrupt_before_edge: bool = False
    recursion_limit: int = 25
    release_thread: bool = False
    graph_id: str | None = None
    executor: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "interrupt_before", _names("interrupt_before", self.interrupt_before)
        )
        object.__setattr__(self, "interrupt_after", _names("interrupt_after", self.interrupt_after))
        _check_limit("recursion_limit", self.recursion_limit)
        if self.graph_id is not None:
            require_id("graph_id", self.graph_id)


def _check_metadata_key(key: str) -> None:
    if not isinstance(key, str):
        raise TypeError(f"metadata keys are strings, got {type(key).__name__}")
    if key in RESERVED_METADATA_KEYS:
        raise ValueError(
            f"metadata key {key!r} is reserved for the runtime (read it from the config's "
            f"attribute instead); reserved keys: {sorted(RESERVED_METADATA_KEYS)}"
        )


@dataclass(frozen=True)
class RunnableConfig:
    """How one invocation runs; nodes and routes receive it with the runtime fields set."""

    thread_id: str | None = None
    checkpoint_id: str | None = None
    next_node: str | None = None
    stream_mode: StreamMode = StreamMode.VALUES
    recursion_limit: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    parallel_executors: Mapping[str, Executor] = field(default_factory=dict)
    clone_state: bool = True
    durability: Durability = "sync"
    _graph_id: str | None = field(default=None, repr=False, compare=False)
    _node_id: str | None = field(default=None, repr=False, compare=False)
    _node_path: tuple[str, ...] = field(default=(), repr=False, compare=False)
    _run_id: str | None = field(default=None, repr=False, compare=False)
    _sink: Sink | None = field(default=None, repr=False, compare=False)
    _stream_state: Any = field(default=None, repr=False, compare=False)
    #: the id of the task being run (a node's id, or ``node#sendN`` for a Send)
    _task_id: str | None = field(default=None, repr=False, compare=False)
    #: the in-process run's ``Outcome`` (a compiled subgraph links its child run's to it)
    _outcome: Any = field(default=None, repr=False, compare=False)
    #: the checkpoint whose step is being run (in process, for a compiled subgraph's node)
    _step_id: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_limit("recursion_limit", self.recursion_limit)
        if self.durability not in DURABILITY_MODES:
            raise ValueError(
                f"durability={self.durability!r} is not a durability mode; use one of "
                f"{', '.join(repr(mode) for mode in DURABILITY_MODES)} (default 'sync': each "
                "step stored before the next starts)"
            )
        if not isinstance(self.stream_mode, StreamMode):
            object.__setattr__(self, "stream_mode", StreamMode(self.stream_mode))
        if self.thread_id is not None:
            if not isinstance(self.thread_id, str):
                raise TypeError(f"thread_id must be a string, got {type(self.thread_id).__name__}")
            too_long = check_id("thread_id", self.thread_id)
            if too_long:
                raise ValueError(too_long)
        if not isinstance(self.metadata, MappingProxyType):
            for key in self.metadata:
                _check_metadata_key(key)
            object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))
        if not isinstance(self.parallel_executors, MappingProxyType):
            object.__setattr__(
                self, "parallel_executors", MappingProxyType(dict(self.parallel_executors))
            )

    @property
    def graph_id(self) -> str | None:
        """The compiled graph's id, set by the runtime."""
        return self._graph_id

    @property
    def node_id(self) -> str | None:
        """The node (or, in a route, the edge's source) being run, set by the runtime."""
        return self._node_id

    @property
    def node_path(self) -> tuple[str, ...]:
        """The path of the node being run, set by the runtime: the root graph's ``graph_id``
        first when it was compiled with one, then the id of each compiled subgraph node that
        encloses the node, then the node's own id."""
        return self._node_path

    @property
    def run_id(self) -> str | None:
        """The id of the run being executed, set by the runtime."""
        return self._run_id

    def emit(self, value: Any) -> None:
        """Stream ``value`` now, from inside a node or hook: a :class:`NodeOutput` as it is,
        anything else as ``StreamingOutput(node, value, state)`` (the state the node was called
        with).  ``GraphStateError`` on a config that is not a run's."""
        sink = self._sink
        if sink is None:
            raise GraphStateError(
                "config.emit() streams from inside a running node or hook; this config is not "
                "one the runtime gave to a node (call emit on the config your node or hook "
                "receives)"
            )
        if not isinstance(value, NodeOutput):
            value = StreamingOutput(self._node_id or "", value, self._stream_state)
        sink(value)

    def put_metadata(self, key: str, value: Any) -> RunnableConfig:
        """A copy with ``key`` set (added or replaced)."""
        _check_metadata_key(key)
        return self._replace(metadata={**self.metadata, key: value})

    def add_metadata(self, key: str, value: Any) -> RunnableConfig:
        """A copy with ``key`` added; ``ValueError`` if it is already there."""
        _check_metadata_key(key)
        if key in self.metadata:
            raise ValueError(f"metadata key {key!r} already exists; use put_metadata to replace")
        return self._replace(metadata={**self.metadata, key: value})

    def _replace(self, **changes: Any) -> RunnableConfig:
        if not changes:  # a copy for the runtime fields: no need to validate again
            copy = object.__new__(RunnableConfig)
            copy.__dict__.update(self.__dict__)
            return copy
        return dataclasses.replace(self, **changes)

    def with_changes(self, **changes: Any) -> RunnableConfig:
        """A copy with public fields changed (``thread_id=...``, ``checkpoint_id=...``)."""
        for name in changes:
            if name.startswith("_"):
                raise ValueError(f"{name} is set by the runtime")
        return self._replace(**changes)

    def _for_runtime(
        self,
        *,
        graph_id: str | None = None,
        node_id: str | None = None,
        run_id: str | None = None,
        checkpoint_id: str | None = None,
        sink: Sink | None = None,
        stream_state: Any = None,
        task_id: str | None = None,
        outcome: Any = None,
        node_path: tuple[str, ...] | None = None,
        step_id: str | None = None,
    ) -> RunnableConfig:
        copy = (
            self._replace() if checkpoint_id is None else self._replace(checkpoint_id=checkpoint_id)
        )
        if graph_id is not None:
            object.__setattr__(copy, "_graph_id", graph_id)
        if node_path is not None:
            object.__setattr__(copy, "_node_path", node_path)
        if run_id is not None:
            object.__setattr__(copy, "_run_id", run_id)
        if node_id is not None:
            object.__setattr__(copy, "_node_id", node_id)
            object.__setattr__(copy, "_node_path", (*copy._node_path, node_id))
        if sink is not None:
            object.__setattr__(copy, "_sink", sink)
        if stream_state is not None:
            object.__setattr__(copy, "_stream_state", stream_state)
        if task_id is not None:
            object.__setattr__(copy, "_task_id", task_id)
        if outcome is not None:
            object.__setattr__(copy, "_outcome", outcome)
        if step_id is not None:
            object.__setattr__(copy, "_step_id", step_id)
        return copy
