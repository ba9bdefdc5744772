"""``langgraph-celery console``: its arguments and refusals (serving it is tested in the browser
tests, through the same command)."""

from __future__ import annotations

import io
from contextlib import redirect_stderr

import pytest

from langgraph_celery.cli import main


def run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exit:
            code = int(exit.code or 0)
    return code, err.getvalue()


def test_another_address_than_loopback_is_refused_without_authentication(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LGC_CONSOLE_TOKEN", raising=False)
    monkeypatch.delenv("LGC_CONSOLE_BASIC_AUTH", raising=False)
    code, err = run("console", "langgraph_celery.demo", "--host", "0.0.0.0")
    assert code == 2
    assert "without authentication" in err and "--basic-auth" in err


def test_basic_auth_and_token_are_exclusive() -> None:
    code, err = run("console", "m", "--basic-auth", "a:b", "--token", "0123456789")
    assert code == 2 and "not allowed with" in err


def test_a_module_without_graphs_is_refused_with_what_to_do() -> None:
    code, err = run("console", "json")
    assert code == 2 and "has no CompiledGraph" in err
    code, err = run("console", "langgraph_celery.demo:app")
    assert code == 2 and "is not a CompiledGraph" in err
    code, err = run("console", "no_such_module_here")
    assert code == 2 and "cannot import module" in err


def test_a_short_token_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LGC_CONSOLE_TOKEN", "short")
    code, err = run("console", "langgraph_celery.demo", "--host", "0.0.0.0")
    assert code == 2 and "shorter than 8" in err
