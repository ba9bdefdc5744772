"""Issue 11, item 11: no part of a URL's password reaches the command line's output.

Passwords hold the characters URL parsers cut at (``/``, ``#``, ``?``, ``@``, ``:``); the CLI
runs in a new process, as a user runs it, and everything it prints (stdout and stderr, errors,
tracebacks, logs, warnings) is searched for the password, its encoded forms and its pieces.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from langgraph_celery._cli_output import worker_command
from langgraph_celery._cli_secrets import Secrets, masked

TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "langgraph_celery.cli"]
#: RFC 3986's reserved characters: a parser that misreads a URL cuts its password at them.
RESERVED = ":/?#[]@!$&'()*+,;="

#: (URL, its password, the URL masked)
HOSTILE_URLS = [
    ("redis://:pa/ss#word@host:6379/0", "pa/ss#word", "redis://:**@host:6379/0"),
    ("postgresql://user:p@ss/w#rd@host/db", "p@ss/w#rd", "postgresql://user:**@host/db"),
    ("redis://:p@ss:w0rd@host:6379/0", "p@ss:w0rd", "redis://:**@host:6379/0"),
    ("amqp://app:p@ss:w@rd@host:5672//", "p@ss:w@rd", "amqp://app:**@host:5672//"),
    (
        "postgresql+psycopg://app:s3cr:et?q=1@host:5432/db",
        "s3cr:et?q=1",
        "postgresql+psycopg://app:**@host:5432/db",
    ),
    (
        "postgresql://app:Xq7/Zv9#Kw3@Jm5:Pt8?Rb2@[::1]:5432/db",
        "Xq7/Zv9#Kw3@Jm5:Pt8?Rb2",
        "postgresql://app:**@[::1]:5432/db",
    ),
]
IDS = [password for _, password, _ in HOSTILE_URLS]


def assert_hidden(password: str, output: str) -> None:
    """No form of ``password`` is in ``output``, no 3-character stretch of it that holds a
    reserved character (such a stretch is found only in the password), and no piece of it
    between reserved characters (of 2 characters or more) stands as a word of its own."""
    for form in {password, quote(password, safe=""), unquote(password)}:
        assert form not in output, f"{form!r} is in:\n{output}"
    for start in range(len(password) - 2):
        stretch = password[start : start + 3]
        if any(character in RESERVED for character in stretch):
            assert stretch not in output, f"{stretch!r} (of {password!r}) is in:\n{output}"
    for piece in re.split(f"[{re.escape(RESERVED)}]+", password):
        if len(piece) >= 2:
            alone = rf"(?<![^\W_]){re.escape(piece)}(?![^\W_])"
            assert not re.search(alone, output), f"{piece!r} (of {password!r}) is in:\n{output}"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    variables = {k: v for k, v in os.environ.items() if not k.startswith("LGC_")}
    return subprocess.run(
        [*CLI, *args],
        cwd=TESTS,
        env={**variables, "PYTHONUNBUFFERED": "1", **env},
        capture_output=True,
        text=True,
        timeout=90,
    )


# -- masking, in process ----------------------------------------------------------------------


@pytest.mark.parametrize(("url", "password", "expected"), HOSTILE_URLS, ids=IDS)
def test_masked_hides_the_whole_password_whatever_it_holds(
    url: str, password: str, expected: str
) -> None:
    assert masked(url) == expected
    assert_hidden(password, masked(url))


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://:secret@host:6379/0", "redis://:**@host:6379/0"),
        ("redis://host:6379/0?password=se#cret&db=1", "redis://host:6379/0?password=**&db=1"),
        ("redis://user@host/0", "redis://user@host/0"),  # a user name, no password
        ("redis://:@host/0", "redis://:@host/0"),
        ("sqlite:////tmp/a:b@c/x.sqlite", "sqlite:////tmp/a:b@c/x.sqlite"),  # a path
        ("memory://", "memory://"),
    ],
)
def test_masked_leaves_what_is_not_a_password(url: str, expected: str) -> None:
    assert masked(url) == expected


def test_redact_hides_the_password_and_the_pieces_a_parser_shows() -> None:
    secrets = Secrets(["postgresql://user:p@ss/w#rd@host/db", "redis://:abc@host"])
    text = "host 'ss' from p@ss/w#rd, p%40ss%2Fw%23rd; class ss2 abc abcd; database w#rd@host"
    # a piece of one character ("w") is left: hiding it would blank every "w" of every error
    assert secrets.redact(text) == "host '**' from **, **; class ss2 ** abcd; database w#**@host"


def test_worker_command_masks_every_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LGC_BROKER_URL", HOSTILE_URLS[2][0])
    monkeypatch.setenv("LGC_RESULT_BACKEND", HOSTILE_URLS[0][0])
    monkeypatch.setenv("LGC_DATABASE_URL", HOSTILE_URLS[1][0])
    command = worker_command("app")
    assert command == (
        "LGC_BROKER_URL='redis://:**@host:6379/0' LGC_RESULT_BACKEND='redis://:**@host:6379/0' "
        "LGC_DATABASE_URL='postgresql://user:**@host/db' celery -A app worker"
    )
    for _, password, _ in HOSTILE_URLS[:3]:
        assert_hidden(password, command)


# -- the command line -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["demo", "run", "worker"])
def test_a_broker_url_celery_would_misread_is_a_usage_error(command: str) -> None:
    """kombu reads ``redis://:pa/ss#word@...`` as host ``""``, port ``pa``: refused before."""
    url, password, shown = HOSTILE_URLS[0]
    target = {"demo": [], "run": ["cli_graphs:arithmetic"], "worker": ["langgraph_celery.demo"]}
    result = cli(command, *target[command], "--broker", url)
    assert result.returncode == 2, result
    assert result.stderr == (
        f"langgraph-celery {command}: error: --broker {shown}: its password holds '/' and '#', "
        "which Celery's URL parser reads as the end of the address; percent-encode them "
        "('/' as %2F, '#' as %23)\n"
    )
    assert_hidden(password, result.stdout + result.stderr)


def test_a_result_backend_from_the_environment_is_named_by_its_variable() -> None:
    result = cli("draw", "cli_graphs:arithmetic", LGC_RESULT_BACKEND="redis://:a?b@host/1")
    assert result.returncode == 2, result
    assert "error: LGC_RESULT_BACKEND redis://:**@host/1: its password holds '?'" in result.stderr
    assert "percent-encode it ('?' as %3F)" in result.stderr
    assert_hidden("a?b", result.stderr)


@pytest.mark.parametrize(("url", "password", "shown"), HOSTILE_URLS, ids=IDS)
def test_a_failing_command_that_logs_warns_and_raises_with_the_url(
    url: str, password: str, shown: str
) -> None:
    result = cli(
        "--traceback",
        "--log-level",
        "WARNING",
        "run",
        "cli_leaky:leaky",
        "--db",
        url,
    )
    assert result.returncode == 1, result
    errors = result.stderr
    assert f"WARNING cli_leaky: connecting to {shown}\n" in errors
    assert f"UserWarning: the database at {shown} is slow" in errors
    assert "Traceback (most recent call last)" in errors
    last = errors.splitlines()[-1]
    if any(character in password for character in "/?#@"):  # it says what may have gone wrong
        assert last.startswith(f"note: the password in --db ({shown}) holds"), errors
        assert "percent-encode" in last
        last = errors.splitlines()[-2]
    assert last.startswith(
        f"langgraph-celery run: NodeError: node 'leak' failed with ConnectionError: "
        f"cannot connect to {shown} (broker '')."
    )
    assert_hidden(password, result.stdout + errors)


def test_an_import_error_naming_the_urls(tmp_path: Path) -> None:
    broker, broker_password, shown_broker = HOSTILE_URLS[3]
    database, db_password, shown_db = HOSTILE_URLS[5]
    result = cli(
        "draw",
        "cli_leaky:leaky",
        "--broker",
        broker,
        "--db",
        database,
        CLI_LEAKY_IMPORT_FAILS="1",
    )
    assert result.returncode == 1, result
    assert result.stderr.startswith(
        "langgraph-celery draw: importing 'cli_leaky' failed: "
        f"RuntimeError('cannot open {shown_db} (broker {shown_broker})')\n"
    )
    for password in (broker_password, db_password):
        assert_hidden(password, result.stdout + result.stderr)


def test_the_demo_header_worker_command_and_database_error(tmp_path: Path) -> None:
    """The demo prints its broker, database and worker command, then names the broker it
    cannot reach; a command on the database fails: SQLAlchemy reads ``p@ss/w#rd`` as password
    ``p`` and host ``ss``, and psycopg's error names that host."""
    broker, broker_password, shown_broker = HOSTILE_URLS[2]
    database, db_password, shown_db = HOSTILE_URLS[1]
    database = database.replace("@host/", "@127.0.0.1/")
    shown_db = shown_db.replace("@host/", "@127.0.0.1/")
    broker = broker.replace("@host:6379/", "@127.0.0.1:1/")  # nothing listens on port 1
    shown_broker = shown_broker.replace("@host:6379/", "@127.0.0.1:1/")
    result = cli(
        "demo",
        "--park",
        "--broker",
        broker,
        "--result-backend",
        "cache+memory://",
        "--db",
        database,
    )
    assert result.returncode == 2, result
    assert f"  broker:      {shown_broker}\n" in result.stdout
    assert f"  checkpoints: {shown_db}\n" in result.stdout
    assert (
        f"  workers:     LGC_BROKER_URL='{shown_broker}' LGC_RESULT_BACKEND=cache+memory:// "
        f"LGC_DATABASE_URL='{shown_db}' celery -A langgraph_celery.demo worker\n"
    ) in result.stdout
    assert f"cannot reach the Celery broker at {shown_broker} (" in result.stderr
    state = cli("state", "langgraph_celery.demo:graph", "--thread", "t", "--db", database)
    assert state.returncode == 1, state
    assert "langgraph-celery state: OperationalError: " in state.stderr
    assert "host '**'" in state.stderr  # the host SQLAlchemy read: a piece of the password
    assert f"note: the password in --db ({shown_db}) holds '/', '#' and '@'" in state.stderr
    assert "SQLAlchemy ends the password at the first '@'" in state.stderr
    assert "('/' as %2F, '#' as %23, '@' as %40)" in state.stderr
    for password in (broker_password, db_password):
        assert_hidden(password, result.stdout + result.stderr + state.stdout + state.stderr)


def test_argparse_errors_repeating_a_url_hide_its_password() -> None:
    url, password, shown = HOSTILE_URLS[1]
    result = cli("run", "cli_graphs:arithmetic", "--database", url)
    assert result.returncode == 2
    assert result.stderr.endswith(f"error: unrecognized arguments: --database {shown}\n")
    assert_hidden(password, result.stderr)
