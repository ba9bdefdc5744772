"""The README as a newcomer meets it: at most 12 KB, and its quickstart runs as pasted and
prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
#: The README's size limit (the project's rule: everything longer lives in docs/).
LIMIT = 12_000


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _python_blocks(section: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_readme_is_at_most_12_kb() -> None:
    size = len(README.read_bytes())
    assert size <= LIMIT, f"README.md is {size} bytes; move detail to docs/ (limit {LIMIT})"


def test_the_quickstart_runs_and_prints_what_its_comments_say() -> None:
    (code,) = _python_blocks(_section(README.read_text(), "Quickstart"))
    # each print(...) line ends with a comment showing what it prints
    expected = [line.split("  # ", 1)[1] for line in code.splitlines() if line.startswith("print(")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md quickstart", "exec"), {"__name__": "quickstart"})
    assert len(expected) == 2
    assert printed.getvalue().splitlines() == expected
