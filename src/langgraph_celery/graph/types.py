"""The values a graph takes and gives: inputs, commands, outputs, results and interruptions."""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langgraph_celery.graph.state import AgentState
from langgraph_celery.serde import _register_builtin

if TYPE_CHECKING:
    from langgraph_celery.graph.config import RunnableConfig

__all__ = [
    "END",
    "START",
    "CheckpointSaverTag",
    "Command",
    "Done",
    "GraphInput",
    "GraphInterrupt",
    "GraphRepresentation",
    "GraphResult",
    "InterruptibleAction",
    "InterruptionMetadata",
    "NodeOutput",
    "Send",
    "StateSnapshot",
    "StreamMode",
    "StreamingOutput",
]

START = "__START__"
END = "__END__"


class StreamMode(enum.Enum):
    """What ``stream()`` yields for each node: the merged state, the node's update, or
    checkpoint snapshots."""

    VALUES = "values"
    UPDATES = "updates"
    SNAPSHOTS = "snapshots"


@dataclass(frozen=True)
class Command:
    """What a route, or a command node (one added with ``destinations``), may return: where to
    go next (a label, a :class:`Send`, or a list of them) and an update to merge first."""

    goto: Hashable | Sequence[Hashable] = ()
    update: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Send:
    """Run ``node`` once with ``arg`` as its input state (map-reduce fan-out)."""

    node: str
    arg: Any = None


# (a command node's Sends are stored with its write: see graph/_algo.py's GOTO)
_register_builtin(Send, "Send")


class _InputKind(enum.Enum):
    NO_ARGS = "no_args"
    ARGS = "args"
    RESUME = "resume"
    #: ``None`` given as the input: a resume or no arguments, as the thread has it
    #: (``graph/_loop.py`` ``given_input``)
    NONE = "none"


@dataclass(frozen=True)
class GraphInput:
    """What a run starts with: new arguments, nothing, or a resume of a pending run."""

    kind: _InputKind
    value: Mapping[str, Any] | None = None

    @classmethod
    def no_args(cls) -> GraphInput:
        return cls(_InputKind.NO_ARGS)

    @classmethod
    def args(cls, values: Mapping[str, Any]) -> GraphInput:
        if not isinstance(values, Mapping):
            raise TypeError(f"GraphInput.args takes a mapping, got {type(values).__name__}")
        return cls(_InputKind.ARGS, dict(values))

    @classmethod
    def resume(cls, update: Mapping[str, Any] | None = None) -> GraphInput:
        if update is not None and not isinstance(update, Mapping):
            raise TypeError(f"GraphInput.resume takes a mapping, got {type(update).__name__}")
        return cls(_InputKind.RESUME, dict(update) if update is not None else None)

    @property
    def is_resume(self) -> bool:
        return self.kind is _InputKind.RESUME

    @property
    def is_none(self) -> bool:
        """Whether ``invoke`` was given ``None``: it continues the thread's pending run if it
        has one (a resume), else it is :meth:`no_args` (``graph/_loop.py`` ``given_input``)."""
        return self.kind is _InputKind.NONE

    @classmethod
    def of(cls, value: GraphInput | Mapping[str, Any] | None) -> GraphInput:
        """A :class:`GraphInput` from what ``invoke`` was given: a mapping means ``args``;
        ``None``, a resume of the thread's pending run if it has one, else ``no_args``."""
        if isinstance(value, GraphInput):
            return value
        if value is None:
            return cls(_InputKind.NONE)
        if isinstance(value, Mapping):
            return cls.args(value)
        raise TypeError(
            f"graph input must be a mapping, None or a GraphInput, got {type(value).__name__}"
        )


@dataclass(frozen=True)
class NodeOutput:
    """One step of a stream: the node that ran and the state after its superstep."""

    node: str
    state: AgentState
    update: Mapping[str, Any] | None = None

    @property
    def node_id(self) -> str:
        return self.node

    def is_start(self) -> bool:
        return self.node == START

    def is_end(self) -> bool:
        return self.node == END


@dataclass(frozen=True, init=False)
class StreamingOutput(NodeOutput):
    """A chunk a node streamed while it ran (an item of a generator in its update, or a value
    given to ``config.emit``), with the node and the state it was called with.  It is not a
    step: it is never stored in a checkpoint."""

    chunk: Any = None

    def __init__(self, node: str, chunk: Any, state: AgentState) -> None:
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "update", None)
        object.__setattr__(self, "chunk", chunk)


@dataclass(frozen=True)
class Done:
    """Yielded last by a streaming node's generator (sync or async): the update the generator
    adds to the rest of the node's update when it ends."""

    update: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class StateSnapshot(NodeOutput):
    """A checkpoint as the user sees it."""

    config: RunnableConfig | None = None
    next: tuple[str, ...] = ()
    step: int = 0
    created_at: datetime | None = None
    parent_config: RunnableConfig | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def checkpoint_id(self) -> str | None:
        return self.config.checkpoint_id if self.config is not None else None

    @property
    def values(self) -> Mapping[str, Any]:
        return self.state.data


@dataclass(frozen=True)
class InterruptionMetadata:
    """Why and where a run stopped; the stream's result when it was interrupted."""

    node_id: str
    state: AgentState
    reason: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckpointSaverTag:
    """What ``release_thread`` released: the thread and its checkpoints (newest first)."""

    thread_id: str
    checkpoints: tuple[Any, ...] = ()


class GraphInterrupt(Exception):
    """Raised by a node to stop the run at itself; it runs again on resume."""

    def __init__(self, reason: str = "", metadata: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.metadata: Mapping[str, Any] = dict(metadata or {})


@runtime_checkable
class InterruptibleAction(Protocol):
    """A node action that is asked, before it runs, whether the run should stop there."""

    def interrupt(
        self, node_id: str, state: AgentState, config: RunnableConfig
    ) -> InterruptionMetadata | None: ...


class _ResultKind(enum.Enum):
    EMPTY = "EMPTY"
    STATE_DATA = "STATE_DATA"
    NODE_OUTPUT = "NODE_OUTPUT"
    INTERRUPTION_METADATA = "INTERRUPTION_METADATA"
    CHECKPOINT_SAVER_TAG = "CHECKPOINT_SAVER_TAG"


@dataclass(frozen=True)
class GraphResult:
    """The final value of a stream, with typed checks and accessors."""

    kind: _ResultKind
    value: Any = None
    #: the run was cancelled before it ended (the result is then empty)
    cancelled: bool = False

    Kind = _ResultKind

    @classmethod
    def of(cls, value: Any, cancelled: bool = False) -> GraphResult:
        """The result of a run that stopped with ``value``; ``cancelled``: the run was
        cancelled (a value of ``None`` is then a cancelled, empty result)."""
        if value is None:
            return cls(_ResultKind.EMPTY, cancelled=cancelled)
        if isinstance(value, InterruptionMetadata):
            return cls(_ResultKind.INTERRUPTION_METADATA, value)
        if isinstance(value, CheckpointSaverTag):
            return cls(_ResultKind.CHECKPOINT_SAVER_TAG, value)
        if isinstance(value, NodeOutput):
            return cls(_ResultKind.NODE_OUTPUT, value)
        if isinstance(value, Mapping):
            return cls(_ResultKind.STATE_DATA, dict(value))
        raise TypeError(f"not a graph result: {type(value).__name__}")

    def is_empty(self) -> bool:
        return self.kind is _ResultKind.EMPTY

    def is_cancelled(self) -> bool:
        """Whether the run was cancelled before it ended: its result is empty too (SPEC §9;
        LangGraph4j's ``isCancelled()``)."""
        return self.cancelled

    def is_state_data(self) -> bool:
        return self.kind is _ResultKind.STATE_DATA

    def is_node_output(self) -> bool:
        return self.kind is _ResultKind.NODE_OUTPUT

    def is_interruption_metadata(self) -> bool:
        return self.kind is _ResultKind.INTERRUPTION_METADATA

    def is_checkpoint_saver_tag(self) -> bool:
        return self.kind is _ResultKind.CHECKPOINT_SAVER_TAG

    def is_state_data_or_checkpoint_saver_tag(self) -> bool:
        return self.is_state_data() or self.is_checkpoint_saver_tag()

    def _expect(self, kind: _ResultKind) -> Any:
        if self.kind is not kind:
            raise TypeError(f"graph result is {self.kind.value}, not {kind.value}")
        return self.value

    def as_state_data(self) -> dict[str, Any]:
        value: dict[str, Any] = self._expect(_ResultKind.STATE_DATA)
        return value

    def as_node_output(self) -> NodeOutput:
        value: NodeOutput = self._expect(_ResultKind.NODE_OUTPUT)
        return value

    def as_interruption_metadata(self) -> InterruptionMetadata:
        value: InterruptionMetadata = self._expect(_ResultKind.INTERRUPTION_METADATA)
        return value

    def as_checkpoint_saver_tag(self) -> CheckpointSaverTag:
        value: CheckpointSaverTag = self._expect(_ResultKind.CHECKPOINT_SAVER_TAG)
        return value

    def as_state_data_or_last_checkpoint_state_data(self) -> dict[str, Any]:
        """The final state, or for a released thread the state of its last checkpoint."""
        if self.is_checkpoint_saver_tag():
            checkpoints = self.as_checkpoint_saver_tag().checkpoints
            if not checkpoints:
                return {}
            return dict(checkpoints[0].values)
        return self.as_state_data()


@dataclass(frozen=True)
class GraphRepresentation:
    """A diagram of a graph: ``kind`` is ``"mermaid"`` or ``"plantuml"``."""

    kind: str
    content: str

    def __str__(self) -> str:
        return self.content
