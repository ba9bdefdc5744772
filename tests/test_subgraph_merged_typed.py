"""SPEC §9 merged subgraphs with typed state: the merged graph's state is the parent's; a typed
parent's schema gains the keys the child declares (checked by the child's pydantic fields), and
the child's field types are registered with the saver's serializer even under an untyped parent.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    CompileConfig,
    InvalidUpdateError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver
from langgraph_celery.serde import JsonSerializer


class ParentDict(TypedDict):
    messages: Annotated[list[str], operator.add]


class ParentModel(BaseModel):
    messages: Annotated[list[str], operator.add] = []


class ChildModel(BaseModel):
    score: int = 0


@dataclasses.dataclass(frozen=True)
class Verdict:
    who: str
    ok: bool


@dataclasses.dataclass
class ChildData:
    verdict: Verdict | None = None


def single(schema: Any, action: Any, name: str = "c") -> StateGraph:
    return StateGraph(schema).add_node(name, action).add_edge(START, name).add_edge(name, END)


def parent_of(schema: Any, child: StateGraph) -> StateGraph:
    graph = StateGraph(schema).add_node("first", lambda state: {"messages": ["first"]})
    graph.add_node("sub", child)
    return graph.add_edge(START, "first").add_edge("first", "sub").add_edge("sub", END)


def test_a_typed_parent_gains_the_keys_its_subgraph_declares() -> None:
    child = single(
        {"log": Channel(operator.add, default=list)},
        lambda state: {"log": ["c"], "messages": ["c"]},
    )
    app = parent_of(ParentDict, child).compile()
    state = app.invoke({"messages": []})
    assert state["messages"] == ["first", "c"]
    assert state["log"] == ["c"]


def test_a_key_neither_declares_is_refused_naming_the_merged_node() -> None:
    child = single({}, lambda state: {"bogus": 1})
    with pytest.raises(InvalidUpdateError, match="node 'sub-c' wrote key 'bogus'"):
        parent_of(ParentDict, child).compile().invoke({"messages": []})


def test_the_childs_pydantic_fields_check_its_keys_under_a_pydantic_parent() -> None:
    child = single(ChildModel, lambda state: {"score": "many"})
    with pytest.raises(
        InvalidUpdateError, match=r"node 'sub-c' wrote an invalid value for field 'score'"
    ):
        parent_of(ParentModel, child).compile().invoke({})
    good = single(ChildModel, lambda state: {"score": "7"})
    assert parent_of(ParentModel, good).compile().invoke({})["score"] == 7


def test_the_childs_field_types_are_registered_under_an_untyped_parent(
    saver: BaseCheckpointSaver,
) -> None:
    def judge(state: AgentState) -> dict[str, Any]:
        return {"verdict": Verdict("ai", True)}

    child = single(ChildData, judge)
    app = parent_of({"messages": Channel(operator.add, default=list)}, child).compile(
        CompileConfig(checkpoint_saver=saver)
    )
    assert isinstance(saver.serializer, JsonSerializer)
    assert Verdict in set(saver.serializer.types)
    config = RunnableConfig(thread_id="typed-child")
    app.invoke({}, config)
    assert app.get_state(config).state["verdict"] == Verdict("ai", True)
