"""The console's parts that need no server: diffs, approval forms, diagrams, the reject rule."""

from __future__ import annotations

import json
import re
import types
from datetime import UTC, datetime
from typing import Literal

import pytest
from pydantic import BaseModel

from langgraph_celery import END, START, StateGraph
from langgraph_celery.console.diagram import layout, render_svg
from langgraph_celery.console.diff import Change, compact, diff_states, pretty
from langgraph_celery.console.forms import (
    approval_form,
    forms_of,
    parse_form,
    resolve_model,
    schema_ref,
)
from langgraph_celery.console.steering import reject_update


class Shipment(BaseModel):
    ship: bool = True
    count: int
    weight: float | None = None
    speed: Literal["slow", "fast"] = "slow"
    labels: list[str] = []
    note: str = ""


def test_diff_names_each_key_that_changed_and_how() -> None:
    before = {"a": 1, "log": ["x"], "gone": True, "same": {"k": 1}}
    after = {
        "a": 2,
        "log": ["x", "y", "z"],
        "same": {"k": 1},
        "new": datetime(2026, 1, 1, tzinfo=UTC),
    }
    assert diff_states(before, after) == [
        Change("a", "changed", 1, 2),
        Change("log", "appended", None, ["y", "z"]),
        Change("new", "added", None, "2026-01-01T00:00:00Z"),
        Change("gone", "removed", True, None),
    ]
    assert diff_states(after, after) == []
    assert diff_states({"log": ["x", "y"]}, {"log": ["y"]})[0].kind == "changed"
    # a list that grew from equal (not the same) items, and from the same ones
    grown = diff_states({"log": [{"m": 1}]}, {"log": [{"m": 1}, {"m": 2}]})
    assert grown == [Change("log", "appended", None, [{"m": 2}])]
    items = [{"m": 1}]
    assert diff_states({"log": items}, {"log": [*items, {"m": 2}]}) == grown
    assert diff_states({"log": items}, {"log": items}) == []
    assert diff_states({"log": [1]}, {"log": [1.5]}) == [Change("log", "changed", [1], [1.5])]


def test_a_model_is_found_by_reference_or_by_name_never_imported() -> None:
    module = types.ModuleType("served")
    module.Shipment = Shipment  # type: ignore[attr-defined]
    assert resolve_model(schema_ref(Shipment), []) is Shipment
    assert resolve_model("Shipment", [module]) is Shipment
    assert resolve_model("Shipment", [], registered=[Shipment]) is Shipment
    assert resolve_model("Shipment", []) is None
    assert resolve_model("json:JSONDecoder", []) is None  # not a pydantic model
    assert resolve_model("not_imported_anywhere_xyz:Model", []) is None
    import sys

    assert "not_imported_anywhere_xyz" not in sys.modules


def test_the_form_lists_the_models_fields_prefilled_from_resume_with() -> None:
    form = approval_form({"schema": schema_ref(Shipment), "resume_with": {"count": 3}}, [])
    assert form.model is Shipment
    fields = {f.name: f for f in form.fields}
    assert [f.kind for f in form.fields] == [
        "checkbox",
        "integer",
        "number",
        "select",
        "json",
        "textarea",
    ]
    assert fields["count"].value == "3" and fields["count"].required
    assert fields["ship"].value == "true"
    assert fields["speed"].choices == ("slow", "fast")
    assert fields["labels"].value == "[]"
    unknown = approval_form({"schema": "Nowhere"}, [])
    assert unknown.model is None and "Nowhere" in (unknown.note or "")


def test_a_submitted_form_becomes_the_validated_update_or_field_errors() -> None:
    form = approval_form({"schema": schema_ref(Shipment)}, [])
    update, _ = parse_form(
        form,
        {"field.count": "4", "field.speed": "fast", "field.labels": '["a"]', "field.weight": ""},
    )
    assert update == {
        "ship": False,  # an unchecked box is not submitted
        "count": 4,
        "weight": None,
        "speed": "fast",
        "labels": ["a"],
        "note": "",
    }
    update, checked = parse_form(
        form, {"field.count": "many", "field.labels": "[oops", "field.ship": "true"}
    )
    assert update is None
    errors = {f.name: f.error for f in checked.fields if f.error}
    # every field's error at once: the JSON that did not parse, and what the model refuses
    assert set(errors) == {"labels", "count"}
    assert "not valid JSON" in (errors["labels"] or "")
    update, checked = parse_form(form, {"field.count": "many", "field.labels": "[]"})
    assert update is None
    assert {f.name for f in checked.fields if f.error} == {"count"}
    assert next(f for f in checked.fields if f.name == "count").value == "many"


class Signed(BaseModel):
    name: str
    remark: str = "none"


def test_shown_json_escapes_the_characters_that_reorder_text() -> None:
    """A right-to-left override in state would show the JSON after it reversed to a reviewer
    ("Trojan Source"): shown JSON escapes the layout controls, and stays the same JSON."""
    value = {"to": "alice\u202e@evil\u2066", "mark": "\u200f"}
    for text in (pretty(value), compact(value)):
        assert not any(ch in text for ch in "\u202e\u2066\u200f")
        assert "\\u202e" in text and "\\u2066" in text and "\\u200f" in text
        assert json.loads(text) == value
    assert compact({"plain": "héllo ✓"}) == '{"plain": "héllo ✓"}'


def test_a_required_text_box_left_empty_is_field_required() -> None:
    """An empty box of a required ``str`` is the field missing, not ``""``; an optional one
    keeps what was typed, the empty text included."""
    form = approval_form({"schema": schema_ref(Signed)}, [])
    assert [f.required for f in form.fields] == [True, False]
    update, checked = parse_form(form, {"field.name": "", "field.remark": ""})
    assert update is None
    assert {f.name: f.error for f in checked.fields if f.error} == {"name": "Field required"}
    update, _ = parse_form(form, {"field.name": "Ada", "field.remark": ""})
    assert update == {"name": "Ada", "remark": ""}


def test_console_forms_names_the_model_of_a_node_without_metadata() -> None:
    module = types.ModuleType("served")
    module.CONSOLE_FORMS = {"letters:send": Shipment, "review": Shipment}  # type: ignore[attr-defined]
    assert forms_of([module], "letters", "send") is Shipment
    assert forms_of([module], "other", "review") is Shipment
    assert forms_of([module], "letters", "draft") is None


@pytest.mark.parametrize(
    ("metadata", "update"),
    [
        ({"reject_with": {"decision": "no"}}, {"decision": "no"}),
        ({"resume_with": {"approved": True, "by": "me"}}, {"approved": False, "by": "me"}),
        ({"resume_with": {"text": "ok"}}, None),
        ({}, None),
    ],
)
def test_reject_resumes_with_reject_with_or_the_approval_inverted(metadata, update) -> None:
    assert reject_update(metadata) == update


def noop(state: object) -> dict[str, object]:
    return {}


def loop_graph(name: str = "review") -> StateGraph:
    return (
        StateGraph()
        .add_node("plan", lambda s: {})
        .add_node("a", lambda s: {})
        .add_node("b", lambda s: {})
        .add_node(name, lambda s: {})
        .add_edge(START, "plan")
        .add_edge("plan", "a")
        .add_edge("plan", "b")
        .add_edge(["a", "b"], name)
        .add_conditional_edges(name, lambda s: "ok", {"ok": END, "again": "plan"})
    )


def test_the_diagram_draws_every_node_and_edge_in_layers() -> None:
    spec = loop_graph().compile().spec
    box = layout(spec)
    assert set(box.nodes) == {START, "plan", "a", "b", "review", END}
    ranks = box.ranks
    assert ranks[START] < ranks["plan"] < ranks["a"] == ranks["b"] < ranks["review"] < ranks[END]
    back = [(e.source, e.target) for e in box.edges if e.back]
    assert back == [("review", "plan")]
    svg = render_svg(spec, highlight="review", status="failed", visited={"plan"})
    assert svg.count('<g class="node') == 6
    assert svg.count('<path class="edge') == 7
    assert 'class="node current status-failed" data-node="review"' in svg
    assert 'class="node visited" data-node="plan"' in svg
    assert ">again<" in svg and ">ok<" in svg


def test_a_node_of_a_compiled_subgraph_highlights_the_subgraph_s_node() -> None:
    """Where a child run parked (``review``, a node of the compiled subgraph ``approval``),
    the parent's diagram highlights ``approval``, drawn as a subgraph; nested ones too."""
    inner = StateGraph().add_node("review", noop).add_edge(START, "review")
    inner_graph = inner.add_edge("review", END).compile()
    middle = StateGraph().add_node("gate", inner_graph).add_edge(START, "gate")
    middle_graph = middle.add_edge("gate", END).compile()
    outer = StateGraph().add_node("plan", noop).add_node("approval", middle_graph)
    outer.add_edge(START, "plan").add_edge("plan", "approval").add_edge("approval", END)
    spec = outer.compile().spec
    svg = render_svg(spec, highlight="review", status="parked")
    assert 'class="node subgraph current status-parked" data-node="approval"' in svg
    assert render_svg(spec, highlight="nowhere").count("current") == 0


def test_a_label_beside_an_edge_that_goes_around_a_node_is_off_it_and_inside_the_drawing() -> None:
    graph = (
        StateGraph()
        .add_node("a", noop)
        .add_node("b", noop)
        .add_edge(START, "a")
        .add_conditional_edges("a", lambda s: "y", {"yes": "b", "a-longer-label": END})
        .add_edge("b", END)
    )
    svg = render_svg(graph.compile().spec)
    view = [float(v) for v in re.search(r'viewBox="([^"]+)"', svg).group(1).split()]  # type: ignore[union-attr]
    rects = re.findall(r'<rect x="([\d.-]+)" y="([\d.-]+)" width="([\d.]+)" height="(\d+)"', svg)
    boxes = [tuple(float(v) for v in r) for r in rects]
    label = next(b for b in boxes if b[3] == 18 and b[2] > 80)  # (the longer label's box)
    node_b = re.search(
        r'data-node="b"><title>b</title><rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"', svg
    )
    assert node_b is not None
    bx, _, bw = (float(v) for v in node_b.groups())
    assert label[0] >= bx + bw or label[0] + label[2] <= bx  # beside b, not over it
    assert view[0] <= label[0] and label[0] + label[2] <= view[0] + view[2]


def test_the_diagram_escapes_names() -> None:
    spec = loop_graph('<script>alert("x")</script>').compile().spec
    svg = render_svg(spec, title="<b>")
    assert "<script>" not in svg and "<b>" not in svg
    assert "&lt;script&gt;" in svg
    assert re.search(r"<(?!/?(svg|defs|marker|path|title|g|rect|text)\b)", svg) is None
