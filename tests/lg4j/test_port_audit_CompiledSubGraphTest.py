"""Audit port of LangGraph4j's ``CompiledSubGraphTest`` (newest version): assertions that
``tests/test_subgraph_compiled.py`` and ``tests/lg4j/test_port_CompiledSubGraphTest.py`` leave out.

- ``testCompiledSubGraphInterruptionWithDifferentSaver`` asserts that the parent's last output
  before the park is the subgraph's own (an instance of ``SubGraphOutput``, for ``NODE3.2``),
  with its messages, in both stream modes and both interruption kinds (declared
  ``interruptAfter("NODE3.2")`` in the child, or ``NODE3.3`` an ``InterruptableAction`` that
  stops while ``interrupt_subgraph`` is true): the existing ports check the node for the
  shared-saver case only.  Here: the last output's node is ``NODE3.2`` and, in ``SNAPSHOTS``
  mode, a ``StateSnapshot`` (SPEC §3).
- The parent's checkpoints while the child is parked: one per superstep before the subgraph
  (SPEC §4), ``next`` the subgraph node; after the resume, none of the child's steps are stored on
  the parent's thread (SPEC §9: the subgraph runs as one node of the parent).
- ``SubGraphTest``'s way to resume (a ``null`` input) on a parked compiled subgraph.

Java's ``FileSystemSaver`` and serializers are ``MemorySaver`` here; SPEC §4 asks for a thread.
"""

from __future__ import annotations

from typing import Any

import pytest

# (the builders of LangGraph4j's test, ported once in test_port_CompiledSubGraphTest.py)
from test_port_CompiledSubGraphTest import InterruptableNodeAction, chain, node

from langgraph_celery import (
    END,
    START,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    RunnableConfig,
    StateSnapshot,
    StreamMode,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver


def sub_graph_with_interruption(
    saver: BaseCheckpointSaver, as_interruptable: bool
) -> CompiledGraph:
    """``subGraphWithInterruption(saver, serializer, asInterruptable)``."""
    return chain(
        [
            ("NODE3.1", node("NODE3.1")),
            ("NODE3.2", node("NODE3.2")),
            (
                "NODE3.3",
                InterruptableNodeAction("NODE3.3") if as_interruptable else node("NODE3.3"),
            ),
            ("NODE3.4", node("NODE3.4", "newAttribute")),
        ],
        CompileConfig(
            checkpoint_saver=saver, interrupt_after=() if as_interruptable else ("NODE3.2",)
        ),
    )


def different_saver_parent(as_interruptable: bool) -> CompiledGraph:
    """``testCompiledSubGraphInterruptionWithDifferentSaver``'s parent: the child has a
    ``MemorySaver`` of its own; NODE4 reads ``newAttribute``."""
    return chain(
        [
            ("NODE1", node("NODE1")),
            ("NODE2", node("NODE2")),
            ("NODE3", sub_graph_with_interruption(MemorySaver(), as_interruptable)),
            ("NODE4", node("NODE4", "newAttribute")),
            ("NODE5", node("NODE5")),
        ],
        CompileConfig(checkpoint_saver=MemorySaver()),
    )


PARKED = ["[NODE1]", "[NODE2]", "[NODE3.1]", "[NODE3.2]"]
DIFFERENT_SAVER_FINAL = [
    *PARKED,
    "[NODE3.3]",
    "[NODE3.4<myNewValue>]",
    "[NODE4<myNewValue>]",
    "[NODE5]",
]
INTERRUPTION_KINDS = pytest.mark.parametrize(
    "as_interruptable", [False, True], ids=["DECLARED_INTERRUPTION", "INTERRUPTABLE_ACTION"]
)


@INTERRUPTION_KINDS
@pytest.mark.parametrize("mode", [StreamMode.VALUES, StreamMode.SNAPSHOTS])
def test_different_saver_last_output_before_the_park_is_the_subgraphs(
    as_interruptable: bool, mode: StreamMode
) -> None:
    """``testCompiledSubGraphInterruptionWithDifferentSaver``: the last output is the
    subgraph's NODE3.2 with the subgraph's messages, the result an interruption; the resume
    ends with every node's message."""
    parent = different_saver_parent(as_interruptable)
    config = RunnableConfig(thread_id="audit-different-saver", stream_mode=mode)
    start = (
        GraphInput.args({"interrupt_subgraph": True}) if as_interruptable else GraphInput.no_args()
    )

    stream = parent.stream(start, config)
    outputs = list(stream)
    last = outputs[-1]
    assert not last.is_end()
    assert last.node == "NODE3.2"  # (Java: assertInstanceOf(SubGraphOutput.class, ...))
    if mode is StreamMode.SNAPSHOTS:
        assert isinstance(last, StateSnapshot)
    assert list(last.state.value("messages")) == PARKED
    assert [output.node for output in outputs] == [START, "NODE1", "NODE2", "NODE3.1", "NODE3.2"]
    assert not stream.result.is_empty()
    assert stream.result.is_interruption_metadata()
    assert stream.result.as_interruption_metadata().node_id == (
        "NODE3.3" if as_interruptable else "NODE3.2"
    )

    resume: dict[str, Any] = {"newAttribute": "<myNewValue>"}
    if as_interruptable:
        resume["interrupt_subgraph"] = False
    stream = parent.stream(GraphInput.resume(resume), config)
    outputs = list(stream)
    assert outputs[-1].is_end()
    assert list(outputs[-1].state.value("messages")) == DIFFERENT_SAVER_FINAL
    assert [output.node for output in outputs] == [
        "NODE3.3",
        "NODE3.4",
        "NODE3",
        "NODE4",
        "NODE5",
        END,
    ]
    assert stream.result.is_state_data()


@INTERRUPTION_KINDS
def test_parked_subgraph_leaves_the_parent_one_checkpoint_per_step_before_it(
    as_interruptable: bool,
) -> None:
    """While the child is parked the parent's thread holds its input and one checkpoint per
    superstep run (NODE1, NODE2), pending on NODE3; the resumed run adds the subgraph node's
    step (one, whatever the child ran), NODE4's and NODE5's, and no child node's."""
    parent = different_saver_parent(as_interruptable)
    config = RunnableConfig(thread_id="audit-checkpoints")
    start = (
        GraphInput.args({"interrupt_subgraph": True}) if as_interruptable else GraphInput.no_args()
    )
    list(parent.stream(start, config))

    parked = parent.get_state(config)
    assert parked.next == ("NODE3",)
    assert list(parked.state.value("messages")) == ["[NODE1]", "[NODE2]"]
    history = parent.get_state_history(config)
    assert [snapshot.node for snapshot in history] == ["NODE2", "NODE1", START]

    resume: dict[str, Any] = {"newAttribute": "<myNewValue>"}
    if as_interruptable:
        resume["interrupt_subgraph"] = False
    parent.invoke(GraphInput.resume(resume), config)
    stepped = [snapshot.node for snapshot in parent.get_state_history(config)]
    assert stepped[:3] == ["NODE5", "NODE4", "NODE3"]
    assert not {"NODE3.1", "NODE3.2", "NODE3.3", "NODE3.4"} & set(stepped)
    final = parent.get_state(config)
    assert final.next == ()
    assert list(final.state.value("messages")) == DIFFERENT_SAVER_FINAL


def test_parked_compiled_subgraph_resumed_with_a_none_input() -> None:
    """``SubGraphTest``'s resume (``stream(null)``) on the shared-saver graphs of
    ``testCompiledSubGraphInterruptionSharingSaver`` (declared interruption): ``None`` continues
    the parked run (docs/choices.md), the child where it stopped."""
    saver = MemorySaver()
    parent = chain(
        [
            ("NODE1", node("NODE1")),
            ("NODE2", node("NODE2")),
            ("NODE3", sub_graph_with_interruption(saver, as_interruptable=False)),
            ("NODE4", node("NODE4")),
            ("NODE5", node("NODE5", "newAttribute")),
        ],
        CompileConfig(checkpoint_saver=saver),
    )
    config = RunnableConfig(thread_id="audit-none-resume")
    assert [o.node for o in parent.stream({}, config)] == [
        START,
        "NODE1",
        "NODE2",
        "NODE3.1",
        "NODE3.2",
    ]
    assert [o.node for o in parent.stream(None, config)] == [
        "NODE3.3",
        "NODE3.4",
        "NODE3",
        "NODE4",
        "NODE5",
        END,
    ]
    assert list(parent.get_state(config).state.value("messages")) == [
        *PARKED,
        "[NODE3.3]",
        "[NODE3.4]",
        "[NODE4]",
        "[NODE5]",
    ]
