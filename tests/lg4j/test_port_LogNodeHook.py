"""Port of the use of LangGraph4j's ``hook/LogNodeHook`` (``langgraph4j-core``):
``CompiledSubGraphTest.testCompiledSubGraphSimple``, whose parent and compiled child both have
``LogNodeHook``'s before-call hook (logs the node and its ``config.nodePath()``, returns an
empty update) and after-call hook (logs them, returns the result as it is).  Here the hooks
record what they would log, and the test also checks those node paths (``config.node_path``,
SPEC §9).  (``hook/NestedNodeHook``'s uses are ported in ``test_lg4j.py`` and
``test_hook.py`` through ``lg4j_support.NestedNodeHook``.)
"""

from __future__ import annotations

from typing import Any

from lg4j_support import MESSAGES_SCHEMA, messages

from langgraph_celery import (
    END,
    START,
    AgentState,
    GraphInput,
    RunnableConfig,
    StateGraph,
)


class LogNodeHook:
    """``LogNodeHook.applyBeforeHook()``/``applyAfterHook()``, logging into ``self.log``."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, tuple[str, ...]]] = []

    def before(self, node_id: str, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        self.log.append(("before", node_id, config.node_path))
        return {}

    def after(self, node_id: str, state: AgentState, config: RunnableConfig, result: Any) -> Any:
        self.log.append(("after", node_id, config.node_path))
        return result


def step(message: str) -> Any:
    return lambda state, config: {"messages": message}


def test_compiled_sub_graph_simple() -> None:
    """``CompiledSubGraphTest.testCompiledSubGraphSimple`` (with ``LogNodeHook``)."""
    hook = LogNodeHook()
    workflow_child = (
        StateGraph(MESSAGES_SCHEMA)
        .add_before_call_node_hook(hook.before)
        .add_after_call_node_hook(hook.after)
        .add_node("child:step_1", step("child:step1"))
        .add_node("child:step_2", step("child:step2"))
        .add_node("child:step_3", step("child:step3"))
        .add_edge(START, "child:step_1")
        .add_edge("child:step_1", "child:step_2")
        .add_edge("child:step_2", "child:step_3")
        .add_edge("child:step_3", END)
        .compile()
    )
    workflow_parent = (
        StateGraph(MESSAGES_SCHEMA)
        .add_before_call_node_hook(hook.before)
        .add_after_call_node_hook(hook.after)
        .add_node("step_1", step("step1"))
        .add_node("step_2", step("step2"))
        .add_node("step_3", step("step3"))
        .add_node("subgraph", workflow_child)
        .add_edge(START, "step_1")
        .add_edge("step_1", "step_2")
        .add_edge("step_2", "subgraph")
        .add_edge("subgraph", "step_3")
        .add_edge("step_3", END)
        .compile()
    )

    outputs = list(workflow_parent.stream(GraphInput.no_args(), RunnableConfig()))

    assert outputs
    assert messages(outputs[-1].state) == [
        "step1",
        "step2",
        "child:step1",
        "child:step2",
        "child:step3",
        "step3",
    ]
    # (beyond the assertions of the Java test: what the hooks log)
    child = [("subgraph", f"child:step_{i}") for i in (1, 2, 3)]
    paths = [("step_1",), ("step_2",), ("subgraph",), *child, ("step_3",)]
    assert [entry for entry in hook.log if entry[0] == "before"] == [
        ("before", "step_1", ("step_1",)),
        ("before", "step_2", ("step_2",)),
        ("before", "subgraph", ("subgraph",)),
        *[("before", path[-1], path) for path in child],
        ("before", "step_3", ("step_3",)),
    ]
    assert sorted(entry[2] for entry in hook.log if entry[0] == "after") == sorted(paths)
