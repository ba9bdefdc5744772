"""pyproject.toml declares every third-party module the tests and the benchmarks import.

``tests/`` may only import what the runtime dependencies and the ``test`` extra install (so that
``pip install -e ".[test]"`` runs the suite), ``bench/`` what those and the ``bench`` extra
install.  A module is matched to the distributions that provide it in this environment (``yaml``
is PyYAML's); one that is not installed here is taken to be its own distribution.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"langgraph_celery"}
#: Distributions the tests run as programs rather than import (``celery -A app flower``).
RUN_BY_THE_TESTS = {"flower"}


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(text: str) -> tuple[str, list[str]]:
    """The normalized distribution name of a requirement, and the extras it asks for."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", text)
    assert match, text
    extras = [extra.strip() for extra in (match.group(2) or "").split(",") if extra.strip()]
    return normalized(match.group(1)), extras


def declared(root: Path, *extras: str) -> set[str]:
    """The distributions the runtime dependencies and ``extras`` name (normalized), with the
    extras an extra takes from this project itself (``langgraph-celery[test,...]``)."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    own = normalized(project["name"])
    names = {requirement(text)[0] for text in project.get("dependencies", [])}
    wanted, seen = list(extras), set()
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in project["optional-dependencies"][extra]:
            name, inner = requirement(text)
            if name == own:
                wanted += inner
            else:
                names.add(name)
    return names


def imports(root: Path, folder: str) -> dict[str, set[str]]:
    """Top-level module -> the files of ``folder`` importing it (absolute imports only)."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                found.setdefault(module.partition(".")[0], set()).add(
                    path.relative_to(root).as_posix()
                )
    return found


def local_modules(root: Path) -> set[str]:
    """Modules of this repository's tests and benchmarks (imported by file name)."""
    paths = [path for folder in ("tests", "bench") for path in (root / folder).rglob("*.py")]
    return {path.stem for path in paths} | {"bench", "tests"}


def undeclared(root: Path, folder: str, *extras: str) -> dict[str, list[str]]:
    """The third-party modules ``folder`` imports that no distribution of the runtime
    dependencies and ``extras`` provides: module -> the files importing it."""
    allowed = declared(root, *extras)
    providers = packages_distributions()
    ours = local_modules(root) | FIRST_PARTY
    missing = {}
    for module, files in imports(root, folder).items():
        if module in sys.stdlib_module_names or module in ours:
            continue
        if not {normalized(d) for d in providers.get(module, [module])} & allowed:
            missing[module] = sorted(files)
    return missing


def test_the_test_extra_declares_every_module_the_tests_import() -> None:
    assert undeclared(ROOT, "tests", "test") == {}


def test_the_test_extra_declares_the_programs_the_tests_run() -> None:
    assert declared(ROOT, "test") >= RUN_BY_THE_TESTS


def test_the_bench_and_test_extras_declare_every_module_the_benchmarks_import() -> None:
    assert undeclared(ROOT, "bench", "test", "bench") == {}


def test_the_check_sees_an_undeclared_module(tmp_path: Path) -> None:
    """The check itself can fail: a module nothing declares is reported with its file; one an
    extra of the project's own extras declares is not."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "helpers.py").write_text("")
    (tmp_path / "tests" / "test_x.py").write_text(
        "import json\nimport yaml\nimport hypothesis.strategies\nfrom helpers import x\n"
        "from langgraph_celery import StateGraph\nfrom . import relative\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "my_project"\ndependencies = ["pytest>=8"]\n'
        "[project.optional-dependencies]\n"
        'fuzz = ["hypothesis[cli]>=6"]\ntest = ["my-project[fuzz]"]\n'
    )
    assert undeclared(tmp_path, "tests", "test") == {"yaml": ["tests/test_x.py"]}
    assert undeclared(tmp_path, "tests", "fuzz") == {"yaml": ["tests/test_x.py"]}
