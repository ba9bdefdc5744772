"""Issue 11, item 12: a title (or a node name, or an edge label) cannot break a diagram.

``get_graph`` draws control characters as spaces, so no text adds lines to a PlantUML diagram
(a second ``@startuml``) or to Mermaid's front matter, and writes a Mermaid title YAML reads back
as it was given; ``draw --title`` refuses a title with control characters (exit 2).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from langgraph_celery import END, START, StateGraph
from test_draw import SAMPLE_EDGES, noop, parse_mermaid, parse_plantuml, sample

yaml: Any = pytest.importorskip("yaml")

TESTS = Path(__file__).resolve().parent
CONTROL = [chr(code) for code in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]]

#: (title, what the diagram shows)
HOSTILE_TITLES = [
    ("a\nb", "a b"),
    ("x\n@enduml\n@startuml\nA -> B\n", "x @enduml @startuml A -> B"),
    ("x\r\n---\nconfig: {theme: dark}", "x  --- config: {theme: dark}"),
    ("line\u2028sep\u2029para\x85nel", "line sep para nel"),
    ("tab\there\x00nul\x7fdel", "tab here nul del"),
    ("  \n\t ", None),  # nothing left: no title
]


def front_matter(content: str) -> tuple[dict[str, Any] | None, list[str]]:
    """(the Mermaid front matter read as YAML or None, the lines after it)."""
    lines = content.splitlines()
    if lines[0] != "---":
        return None, lines
    end = lines.index("---", 1)
    return yaml.safe_load("\n".join(lines[1:end])), lines[end + 1 :]


def plantuml_title(content: str) -> str | None:
    lines = content.splitlines()
    assert lines[0] == "@startuml" and lines[-1] == "@enduml", content
    assert lines.count("@startuml") == 1 and lines.count("@enduml") == 1, content
    titles = [line for line in lines if line.startswith("title")]
    assert len(titles) <= 1, content
    return titles[0].removeprefix("title ") if titles else None


def assert_one_line_each(content: str) -> None:
    for character in CONTROL:
        if character != "\n":
            assert character not in content, f"{character!r} in {content!r}"


@pytest.mark.parametrize(("title", "shown"), HOSTILE_TITLES)
def test_a_title_with_line_breaks_stays_on_its_line_in_plantuml(
    title: str, shown: str | None
) -> None:
    content = sample().get_graph("plantuml", title=title).content
    assert_one_line_each(content)
    assert plantuml_title(content) == shown
    assert parse_plantuml(content)[1] == SAMPLE_EDGES


@pytest.mark.parametrize(("title", "shown"), HOSTILE_TITLES)
def test_a_title_with_line_breaks_stays_in_the_mermaid_front_matter(
    title: str, shown: str | None
) -> None:
    content = sample().get_graph("mermaid", title=title).content
    assert_one_line_each(content)
    matter, body = front_matter(content)
    assert matter == (None if shown is None else {"title": shown})
    assert body[0] == "flowchart TD" and "---" not in body
    assert parse_mermaid(content)[1] == SAMPLE_EDGES


@pytest.mark.parametrize(
    "title",
    [
        "My Agent",
        "Agent #2: beta",
        'say "hi" \\ bye',
        "null",
        "true",
        "123",
        "- item",
        "[x], {y}",
        "&anchor *alias !tag",
        "Ünïcode \u2013 title",
        "'single'",
    ],
)
def test_a_mermaid_title_reads_back_as_it_was_given(title: str) -> None:
    matter, _ = front_matter(sample().get_graph("mermaid", title=title).content)
    assert matter == {"title": title}


def test_simple_titles_are_written_plain() -> None:
    content = sample(graph_id="support-bot").get_graph("mermaid").content
    assert content.startswith("---\ntitle: support-bot\n---\nflowchart TD\n")


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_node_names_and_edge_labels_with_line_breaks_stay_on_their_lines(kind: str) -> None:
    graph = StateGraph()
    graph.add_node("a\n@enduml", noop).add_node("b\r\n---", noop)
    graph.add_edge(START, "a\n@enduml")
    graph.add_conditional_edges("a\n@enduml", lambda s: END, {"go\nnow": "b\r\n---", "end": END})
    graph.add_edge("b\r\n---", END)
    content = graph.compile().get_graph(kind).content
    assert_one_line_each(content)
    if kind == "plantuml":
        plantuml_title(content)  # one diagram
        nodes, edges = parse_plantuml(content)
    else:
        assert front_matter(content)[0] is None
        nodes, edges = parse_mermaid(content)
    assert sorted(nodes.values()) == sorted([START, END, "a @enduml", "b  ---"])
    assert edges == {
        (START, "a @enduml", None, False),
        ("a @enduml", "b  ---", "go now", True),
        ("a @enduml", END, "end", True),
        ("b  ---", END, None, False),
    }


# -- draw --title -------------------------------------------------------------------------------


def draw(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LGC_")}
    return subprocess.run(
        [sys.executable, "-m", "langgraph_celery.cli", "draw", "cli_graphs:arithmetic", *args],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
@pytest.mark.parametrize("title", ["x\n@enduml\n@startuml", "x\r---", "tab\there", "x\u2028y"])
def test_draw_refuses_a_title_with_control_characters(kind: str, title: str) -> None:
    result = draw("--format", kind, "--title", title)
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert result.stderr == (
        "langgraph-celery draw: error: --title must be one line without control characters "
        f"(line breaks, tabs...), got {title!r}\n"
    )


def test_draw_writes_any_one_line_title() -> None:
    title = 'Agent #2: "beta"'
    mermaid = draw("--title", title)
    assert mermaid.returncode == 0, mermaid
    assert front_matter(mermaid.stdout)[0] == {"title": title}
    plantuml = draw("--format", "plantuml", "--title", title)
    assert plantuml.returncode == 0, plantuml
    assert plantuml_title(plantuml.stdout) == title
