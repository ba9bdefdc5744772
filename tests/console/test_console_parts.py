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


def _nested_graph() -> StateGraph:
    """``plan``, then ``prep`` (a merged subgraph: ``x``, ``y``), then ``approval`` (a compiled
    subgraph holding the compiled ``gate``, whose ``review`` may park, and the merged ``m``)."""
    inner = StateGraph().add_node("review", noop).add_node("fix", noop)
    inner.add_edge(START, "review").add_edge("fix", "review")
    inner.add_conditional_edges("review", lambda s: "ok", {"ok": END, "again": "fix"})
    merged = StateGraph().add_node("x", noop).add_node("y", noop)
    merged.add_edge(START, "x").add_edge("x", "y").add_edge("y", END)
    middle = StateGraph().add_node("gate", inner.compile()).add_node("m", merged)
    middle.add_edge(START, "gate").add_edge("gate", "m").add_edge("m", END)
    outer = StateGraph().add_node("plan", noop).add_node("prep", merged)
    outer.add_node("approval", middle.compile()).add_node("done", noop)
    outer.add_edge(START, "plan").add_edge("plan", "prep").add_edge("prep", "approval")
    return outer.add_edge("approval", "done").add_edge("done", END)


def _inside(svg: str, block: str) -> str:
    """The part of ``svg`` drawn inside the block of subgraph node ``block``."""
    start = svg.index(f'data-node="{block}"')
    depth, i = 0, svg.index("<g transform", start)
    for match in re.finditer(r"<g\b|</g>", svg[i:]):
        depth += 1 if match.group() != "</g>" else -1
        if depth == 0:
            return svg[i : i + match.end()]
    raise AssertionError(f"the block of {block} is not closed")


def test_subgraphs_are_drawn_as_nested_blocks_holding_their_graphs() -> None:
    """As the Mermaid and PlantUML diagrams draw them: each subgraph node is a block with its
    graph's START, nodes, END and edges inside, nested as deep as the subgraphs nest; the
    nodes carry the ids runs record (a merged subgraph's nodes their merged ids)."""
    spec = _nested_graph().compile().spec
    svg = render_svg(spec)
    assert 'class="block compiled" data-node="approval"' in svg
    assert 'class="block merged" data-node="prep"' in svg
    prep = _inside(svg, "prep")
    assert 'data-node="prep-x"' in prep and 'data-node="prep-y"' in prep
    assert prep.count('class="node terminal"') == 2  # (its own START and END, without ids)
    approval = _inside(svg, "approval")
    gate = _inside(approval, "gate")
    assert 'data-node="review"' in gate and 'data-node="fix"' in gate
    assert ">again<" in gate and ">ok<" in gate
    assert 'data-node="m-x"' in _inside(approval, "m")
    assert 'data-node="review"' not in svg.replace(approval, "")
    assert svg.count('data-node="__START__"') == svg.count('data-node="__END__"') == 1
    box = layout(spec)
    assert set(box.blocks) == {"prep", "approval"}
    assert set(box.blocks["approval"].blocks) == {"gate", "m"}
    _, y, w = box.nodes["approval"]
    inner = box.blocks["approval"]
    assert w >= inner.width and box.height_of("approval") > inner.height
    assert box.nodes["prep"][1] < y < box.nodes["done"][1]  # (the blocks stay in their layers)


def test_a_node_of_a_compiled_subgraph_is_highlighted_inside_its_blocks() -> None:
    """Where a child run parked (``review``, in ``gate`` in ``approval``): that node is the
    current one, and the blocks around it are marked as holding it; a merged subgraph's nodes
    are marked visited by their merged ids, a compiled one's are not (the thread's checkpoints
    record the parent's nodes only)."""
    spec = _nested_graph().compile().spec
    svg = render_svg(spec, highlight="review", status="parked", visited={"prep-x", "review"})
    assert 'class="block compiled holds-current status-parked" data-node="approval"' in svg
    assert 'class="block compiled holds-current status-parked" data-node="gate"' in svg
    assert 'class="node current status-parked" data-node="review"' in svg
    assert svg.count("current status-") == 3
    assert 'class="node visited" data-node="prep-x"' in svg
    assert 'class="node" data-node="m-x"' in svg
    running = render_svg(spec, highlight="approval", status="running")
    assert 'class="block compiled current status-running" data-node="approval"' in running
    merged = render_svg(spec, highlight="prep-y", status="failed")
    assert 'class="block merged holds-current status-failed" data-node="prep"' in merged
    assert 'class="node current status-failed" data-node="prep-y"' in merged
    assert render_svg(spec, highlight="nowhere").count("current") == 0


def test_a_subgraph_path_tells_apart_a_child_s_node_from_the_parent_s_of_the_same_id() -> None:
    """A run parked in a compiled subgraph names the inner node and its ``subgraph_path``: the
    path finds the child's ``review`` where the bare id finds the parent's."""
    child = StateGraph().add_node("review", noop).add_edge(START, "review")
    parent = (
        StateGraph()
        .add_node("review", noop)
        .add_node("approval", child.add_edge("review", END).compile())
    )
    parent.add_edge(START, "review").add_edge("review", "approval").add_edge("approval", END)
    spec = parent.compile().spec
    assert layout(spec).path_to("review") == ["review"]
    assert layout(spec).path_to(["approval", "review"]) == ["approval", "review"]
    assert layout(spec).path_to(["approval", "nowhere"]) == []
    svg = render_svg(spec, highlight=["approval", "review"], status="parked")
    assert 'class="block compiled holds-current status-parked" data-node="approval"' in svg
    assert svg.count('class="node current status-parked" data-node="review"') == 1
    assert 'class="node current' not in svg[: svg.index('data-node="approval"')]
    nested = layout(_nested_graph().compile().spec)
    assert nested.path_to(["approval", "m-x"]) == ["approval", "m", "x"]


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
