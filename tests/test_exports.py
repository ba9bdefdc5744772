"""SPEC §1: the public API, the error tree and an import that connects to nothing."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

import langgraph_celery
from langgraph_celery import (
    GraphDefinitionError,
    GraphError,
    GraphInterrupt,
    GraphRecursionError,
    GraphStateError,
    InvalidUpdateError,
    NodeError,
    SerializationError,
)

PUBLIC_NAMES = {
    "StateGraph",
    "CompiledGraph",
    "AgentState",
    "START",
    "END",
    "Channel",
    "Channels",
    "RemoveByHash",
    "ReplaceAllWith",
    "MARK_FOR_REMOVAL",
    "Command",
    "Send",
    "CompileConfig",
    "RunnableConfig",
    "StreamMode",
    "GraphInput",
    "GraphResult",
    "NodeOutput",
    "StateSnapshot",
    "InterruptionMetadata",
    "CheckpointSaverTag",
    "GraphInterrupt",
    "InterruptibleAction",
    "RetryPolicy",
    "GraphRepresentation",
    "StreamingOutput",
    "Done",
}
ERROR_NAMES = {
    "GraphError",
    "GraphDefinitionError",
    "GraphRecursionError",
    "InvalidUpdateError",
    "GraphStateError",
    "SerializationError",
    "NodeError",
}


def test_all_is_exactly_the_documented_names() -> None:
    assert set(langgraph_celery.__all__) == PUBLIC_NAMES | ERROR_NAMES
    assert len(langgraph_celery.__all__) == len(set(langgraph_celery.__all__))


@pytest.mark.parametrize("name", sorted(PUBLIC_NAMES | ERROR_NAMES))
def test_every_documented_name_is_importable(name: str) -> None:
    module = importlib.import_module("langgraph_celery")
    assert getattr(module, name) is not None


def test_start_and_end_values() -> None:
    assert langgraph_celery.START == "__START__"
    assert langgraph_celery.END == "__END__"


def test_stream_modes() -> None:
    modes = langgraph_celery.StreamMode
    assert {mode.name for mode in modes} >= {"VALUES", "UPDATES", "SNAPSHOTS"}


@pytest.mark.parametrize(
    ("module_name", "names"),
    [
        (
            "langgraph_celery.checkpoint",
            ["BaseCheckpointSaver", "Checkpoint", "MemorySaver", "SqlSaver"],
        ),
        ("langgraph_celery.serde", ["Serializer", "JsonSerializer"]),
    ],
)
def test_submodule_names(module_name: str, names: list[str]) -> None:
    module = importlib.import_module(module_name)
    for name in names:
        assert name in module.__all__, name
        assert getattr(module, name) is not None


def test_memory_saver_is_a_checkpoint_saver() -> None:
    from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver

    assert isinstance(MemorySaver(), BaseCheckpointSaver)


@pytest.mark.parametrize(
    "cls",
    [
        GraphDefinitionError,
        GraphRecursionError,
        InvalidUpdateError,
        GraphStateError,
        SerializationError,
        NodeError,
    ],
)
def test_errors_derive_from_graph_error(cls: type[Exception]) -> None:
    assert issubclass(cls, GraphError)
    assert issubclass(GraphError, Exception)


def test_definition_error_is_a_value_error() -> None:
    assert issubclass(GraphDefinitionError, ValueError)
    with pytest.raises(ValueError):
        raise GraphDefinitionError("x")


def test_recursion_error_is_a_recursion_error() -> None:
    assert issubclass(GraphRecursionError, RecursionError)
    with pytest.raises(RecursionError):
        raise GraphRecursionError("x")


def test_graph_interrupt_is_an_exception_but_not_a_graph_error() -> None:
    assert issubclass(GraphInterrupt, Exception)
    assert not issubclass(GraphInterrupt, GraphError)
    interrupt = GraphInterrupt("why", {"k": 1})
    assert interrupt.reason == "why"
    assert dict(interrupt.metadata) == {"k": 1}
    assert GraphInterrupt().reason == ""


def test_node_error_attributes() -> None:
    error = NodeError("worker", "KeyError", "boom")
    assert error.node_id == "worker"
    assert error.error_type == "KeyError"
    assert "worker" in str(error)
    assert "KeyError" in str(error)


def test_import_opens_no_socket() -> None:
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise AssertionError(f"import tried to connect: {args!r}")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse

        import langgraph_celery
        import langgraph_celery.checkpoint
        import langgraph_celery.serde

        assert langgraph_celery.StateGraph is not None
        print("imported-ok")
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert "imported-ok" in completed.stdout


def test_value_types_construct_as_documented() -> None:
    from langgraph_celery import (
        AgentState,
        CheckpointSaverTag,
        Command,
        InterruptionMetadata,
        NodeOutput,
        Send,
        StateSnapshot,
    )

    state = AgentState({"k": 1})
    output = NodeOutput("n", state)
    assert (output.node, output.state, output.update) == ("n", state, None)
    snapshot = StateSnapshot("n", state, {"k": 1})
    assert snapshot.config is None
    assert snapshot.next == ()
    assert snapshot.step == 0
    assert snapshot.created_at is None
    assert snapshot.parent_config is None
    assert isinstance(snapshot, NodeOutput)
    interruption = InterruptionMetadata("n", state)
    assert (interruption.reason, dict(interruption.metadata)) == (None, {})
    assert CheckpointSaverTag("t").thread_id == "t"
    assert Command(goto="x", update={"a": 1}).goto == "x"
    assert Send("node", {"a": 1}).arg == {"a": 1}
