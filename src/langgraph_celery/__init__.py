"""langgraph-celery: LangGraph4j-style state graphs for Python, run in process or with every
node as a Celery task.  Importing the package connects to nothing."""

from langgraph_celery.errors import (
    GraphDefinitionError,
    GraphError,
    GraphRecursionError,
    GraphStateError,
    InvalidUpdateError,
    NodeError,
    SerializationError,
)
from langgraph_celery.graph.builder import StateGraph
from langgraph_celery.graph.compiled import CompiledGraph
from langgraph_celery.graph.config import CompileConfig, RunnableConfig
from langgraph_celery.graph.retry import RetryPolicy
from langgraph_celery.graph.state import (
    MARK_FOR_REMOVAL,
    AgentState,
    Channel,
    Channels,
    RemoveByHash,
    ReplaceAllWith,
)
from langgraph_celery.graph.types import (
    END,
    START,
    CheckpointSaverTag,
    Command,
    Done,
    GraphInput,
    GraphInterrupt,
    GraphRepresentation,
    GraphResult,
    InterruptibleAction,
    InterruptionMetadata,
    NodeOutput,
    Send,
    StateSnapshot,
    StreamingOutput,
    StreamMode,
)

__all__ = [
    "END",
    "MARK_FOR_REMOVAL",
    "START",
    "AgentState",
    "Channel",
    "Channels",
    "CheckpointSaverTag",
    "Command",
    "CompileConfig",
    "CompiledGraph",
    "Done",
    "GraphDefinitionError",
    "GraphError",
    "GraphInput",
    "GraphInterrupt",
    "GraphRecursionError",
    "GraphRepresentation",
    "GraphResult",
    "GraphStateError",
    "InterruptibleAction",
    "InterruptionMetadata",
    "InvalidUpdateError",
    "NodeError",
    "NodeOutput",
    "RemoveByHash",
    "ReplaceAllWith",
    "RetryPolicy",
    "RunnableConfig",
    "Send",
    "SerializationError",
    "StateGraph",
    "StateSnapshot",
    "StreamMode",
    "StreamingOutput",
]

__version__ = "0.1.0"
