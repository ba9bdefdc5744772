"""Issue 11, item 12: what the CLI prints as JSON is strict JSON, whatever the state holds, and
what it reads as JSON (``--input``, ``--update``) is refused with a usage error when it cannot be
used.

The state of ``cli_odd_state:odd`` holds non-finite floats, keys that are not strings and lone
surrogates; ``run``, ``state`` and ``history`` print it in new processes, and their output is read
back as UTF-8 by a parser that refuses ``NaN`` and ``Infinity``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_odd_state import odd_node
from langgraph_celery import END, START, CompileConfig, RunnableConfig, StateGraph
from langgraph_celery._cli_output import to_json
from langgraph_celery.checkpoint import SqlSaver

TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "langgraph_celery.cli"]
DEPTH_LIMIT = 100  # what the help of --input and --update promises


def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LGC_")}
    return subprocess.run(
        [*CLI, *args], cwd=TESTS, env=env, capture_output=True, timeout=60, check=False
    )


def refuse_constant(name: str) -> Any:
    raise AssertionError(f"not JSON: {name}")


def strict_json(data: bytes) -> Any:
    """``data`` read as UTF-8 (strictly) and as RFC 8259 JSON (no NaN, no Infinity)."""
    return json.loads(data.decode("utf-8"), parse_constant=refuse_constant)


def stdout_of(result: subprocess.CompletedProcess[bytes]) -> bytes:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert result.stderr == b""
    return result.stdout


#: kind (the node's input) -> how the CLI shows the value the node stores
SHOWN: dict[str, Any] = {
    "non_finite": {"nan": "NaN", "inf": "Infinity", "ninf": "-Infinity", "list": ["NaN", 1.5]},
    "keys": {'[1, "a"]': "tuple", "2": "int", "null": "none", "1.5": "float", "true": "bool"},
    "surrogate": "a\udc80b\ud800",
}


@pytest.mark.parametrize("kind", list(SHOWN))
def test_state_and_history_print_strict_json(kind: str, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'odd.sqlite'}"
    graph = StateGraph().add_node("odd", odd_node).add_edge(START, "odd").add_edge("odd", END)
    saver = SqlSaver(db)
    graph.compile(CompileConfig(checkpoint_saver=saver)).invoke(
        {"kind": kind}, RunnableConfig(thread_id="odd")
    )
    saver.dispose()
    final = {"kind": kind, "odd": SHOWN[kind]}

    target = "cli_odd_state:odd"
    state = strict_json(stdout_of(cli("state", target, "--thread", "odd", "--db", db, "--json")))
    assert state["values"] == final
    assert state["metadata"]["writes"] == {"odd": {"odd": SHOWN[kind]}}
    history = strict_json(stdout_of(cli("history", target, "--thread", "odd", "--db", db)))
    assert [snapshot["values"] for snapshot in history][:2] == [final, {"kind": kind}]


@pytest.mark.parametrize("kind", list(SHOWN))
def test_run_prints_each_update_and_the_final_state_as_strict_json(kind: str) -> None:
    out = stdout_of(cli("run", "cli_odd_state:odd", "--input", json.dumps({"kind": kind})))
    update = next(line for line in out.split(b"\n") if line.startswith(b"odd: "))
    assert strict_json(update.removeprefix(b"odd: ")) == {"odd": SHOWN[kind]}
    final = strict_json(out.split(b"completed:\n", 1)[1])
    assert final == {"kind": kind, "odd": SHOWN[kind]}


@pytest.mark.parametrize("command", ["state", "history"])
def test_the_help_says_how_values_json_cannot_hold_are_shown(command: str) -> None:
    help_text = " ".join(stdout_of(cli(command, "--help")).decode().split())
    assert "strict JSON (RFC 8259)" in help_text
    assert 'the strings "NaN", "Infinity" and "-Infinity"' in help_text
    assert 'the tuple (1, "a") as "[1, \\"a\\"]"' in help_text
    assert "a lone surrogate in a string as its \\uXXXX escape" in help_text


def test_to_json_shows_each_value_json_cannot_hold() -> None:
    value = {
        "floats": [float("nan"), float("inf"), -float("inf"), 0.5],
        (1, ("a", 2.0)): {float("nan"): 1, 1.5: 2, None: 3, False: 4},
        "\udc80": ("\ud800x", {1, 2}),
    }
    assert strict_json(to_json(value).encode("utf-8")) == {
        "floats": ["NaN", "Infinity", "-Infinity", 0.5],
        '[1, ["a", 2.0]]': {"NaN": 1, "1.5": 2, "null": 3, "false": 4},
        "\udc80": ["\ud800x", "{1, 2}"],
    }


# -- --input and --update -----------------------------------------------------------------------


def nested(depth: int) -> str:
    """A JSON object nesting arrays ``depth`` levels deep in all (the object is level 1)."""
    return '{"n": 1, "deep": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("depth", [DEPTH_LIMIT + 1, 50_000])
@pytest.mark.parametrize("flag", ["--input", "--update"])
def test_json_nested_too_deeply_is_a_usage_error(flag: str, depth: int) -> None:
    command = ["run", "cli_graphs:arithmetic"] if flag == "--input" else ["resume", "x:y"]
    result = cli(*command, "--thread", "t", flag, nested(depth))
    assert result.returncode == 2, result.stderr
    assert result.stderr.decode() == (
        f"langgraph-celery {command[0]}: error: {flag} nests arrays and objects more than "
        f"{DEPTH_LIMIT} levels deep; flatten it (or set the state in a node)\n"
    )
    assert result.stdout == b""


def test_json_nested_to_the_limit_runs() -> None:
    out = stdout_of(cli("run", "cli_graphs:arithmetic", "--input", nested(DEPTH_LIMIT)))
    final = strict_json(out.split(b"completed:\n", 1)[1])
    assert final["total"] == 3  # 1 doubled, then 1 added
    assert json.dumps(final["deep"]) == "[" * (DEPTH_LIMIT - 1) + "]" * (DEPTH_LIMIT - 1)


def test_an_integer_python_refuses_to_read_is_a_usage_error() -> None:
    result = cli("run", "cli_graphs:arithmetic", "--input", '{"n": ' + "1" * 5000 + "}")
    assert result.returncode == 2, result.stderr
    message = result.stderr.decode()
    assert "--input holds an integer of more than 4300 digits; write it as a string" in message
    assert len(message) < 200  # the input is not repeated in full
