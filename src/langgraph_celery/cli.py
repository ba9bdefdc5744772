"""``langgraph-celery``: run, resume, inspect and draw compiled graphs from the command line.

    langgraph-celery demo [--park] [--db URL] [--broker URL]
    langgraph-celery run MODULE:GRAPH [--input JSON] [--thread ID]
    langgraph-celery resume MODULE:GRAPH --thread ID [--update JSON]
    langgraph-celery state MODULE:GRAPH --thread ID [--json]
    langgraph-celery history MODULE:GRAPH --thread ID [--json]
    langgraph-celery runs MODULE:GRAPH [--status S] [--limit N] [--before RUN_ID] [--json]
    langgraph-celery status [MODULE[:GRAPH]] RUN_ID [--db URL] [--json]
    langgraph-celery cancel [MODULE[:GRAPH]] RUN_ID [--db URL] [--broker URL] [--json]
    langgraph-celery prune MODULE:GRAPH (--thread ID | --all) --keep-last N [--dry-run] [--json]
    langgraph-celery draw MODULE:GRAPH [--format mermaid|plantuml]
    langgraph-celery worker MODULE [CELERY WORKER OPTIONS...]
    langgraph-celery console MODULE [--host H] [--port P] [--basic-auth U:P | --token T]

``--broker``, ``--result-backend`` and ``--db`` set ``LGC_BROKER_URL``, ``LGC_RESULT_BACKEND`` and
``LGC_DATABASE_URL`` before the module is imported; modules that read them (as
:mod:`langgraph_celery.demo` does) follow.  When the graph's Celery broker is ``memory://``,
``run``, ``resume`` and ``demo`` start an in-process worker for the duration of the command.

``run`` and ``resume`` print ``run: RUN_ID`` first (graphs with a checkpoint saver), then
progress as ``node: {update as JSON}`` lines, then ``completed:`` and the final state (indented
JSON), or ``parked at node ...`` and the command that resumes the run; when the interruption's
metadata has a ``resume_with`` mapping, that command carries it as ``--update``.  ``state``,
``runs``, ``status`` and ``cancel`` print tables for people and, with ``--json``, JSON for
scripts (see :mod:`langgraph_celery._cli_runs`); ``history`` prints JSON.  All the JSON the
command prints is strict (RFC 8259); :data:`langgraph_celery._cli_output.JSON_HELP` (in their
``--help``) says how values JSON cannot hold are shown (``NaN``, keys that are not strings, lone
surrogates).  ``--input`` and ``--update`` are JSON objects nested at most 100 levels deep.

A password in a URL (``--broker``, ``--result-backend``, ``--db``, the ``LGC_*`` variables) is
masked wherever the command prints the URL, and kept out of all it writes to stderr (errors,
tracebacks, logs, hints): see :mod:`langgraph_celery._cli_secrets`.  A broker or result backend
URL whose password holds ``/``, ``?`` or ``#`` unencoded is refused (exit 2): Celery would
misread it.

Exit codes: 0 when the run completed or parked at an interruption, 1 when it failed (one line on
stderr, then a note when the database URL's password holds characters URL parsers may misread;
``--traceback`` for the whole story) or ``cancel`` found the run not running, 2 for usage errors,
130 when interrupted by Ctrl-C.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
import uuid
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from langgraph_celery import _cli_run_text, _cli_runs, _cli_start
from langgraph_celery._cli_input import (
    MAX_JSON_DEPTH,
    UsageError,
    json_object,
    one_line,
    thread_id,
)
from langgraph_celery._cli_load import (
    ImportFailure,
    load_graph,
    missing_store,
    other_owner,
)
from langgraph_celery._cli_output import (
    ENV_VARIABLES,
    JSON_HELP,
    PROG,
    environment_flags,
    follow,
    snapshot_json,
    to_json,
)
from langgraph_celery._cli_prune import add_prune_parser, cmd_prune
from langgraph_celery._cli_secrets import (
    Secrets,
    celery_misreads,
    masked,
    misread_note,
    redacted_stderr,
)

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = ["UsageError", "main"]

#: The URL options Celery reads (with ``urllib``, which ends the address at ``/``, ``?``, ``#``).
CELERY_URL_OPTIONS = ("broker", "result_backend")


# -- arguments ------------------------------------------------------------------------------------


def _database_url(value: str) -> str:
    """A URL as is; a plain path becomes a SQLite URL."""
    if "://" in value:
        return value
    return f"sqlite:///{os.path.abspath(value)}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Run LangGraph4j-style graphs in process or on Celery workers."
    )
    parser.add_argument("--traceback", action="store_true", help="show tracebacks of errors")
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log to stderr from this level up (workers, Celery, the library)",
    )
    env = argparse.ArgumentParser(add_help=False)
    group = env.add_argument_group("environment (set before MODULE is imported)")
    group.add_argument("--broker", metavar="URL", help="sets LGC_BROKER_URL")
    group.add_argument("--result-backend", metavar="URL", help="sets LGC_RESULT_BACKEND")
    group.add_argument("--db", metavar="URL", type=_database_url, help="sets LGC_DATABASE_URL")
    target = argparse.ArgumentParser(add_help=False, parents=[env])
    target.add_argument("target", metavar="MODULE:GRAPH", help="e.g. langgraph_celery.demo:graph")
    thread = argparse.ArgumentParser(add_help=False)
    thread.add_argument(
        "--thread", metavar="ID", type=thread_id, help="thread id (checkpointed graphs)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo", parents=[env], help="run the example agent: draft, approval, send"
    )
    mode = demo.add_mutually_exclusive_group()
    mode.add_argument("--approve", action="store_true", help="approve at once (the default)")
    mode.add_argument("--park", action="store_true", help="stop parked; print the resume command")
    demo.add_argument(
        "--thread", metavar="ID", type=thread_id, help="thread id (default: a new one)"
    )
    demo.add_argument("--topic", default="the product launch", help="what the draft is about")
    run = commands.add_parser("run", parents=[target, thread], help="start a run, follow it")
    run.add_argument(
        "--input",
        metavar="JSON",
        help=f"the run's input, a JSON object nested at most {MAX_JSON_DEPTH} levels deep",
    )
    resume = commands.add_parser("resume", parents=[target, thread], help="resume a parked run")
    resume.add_argument(
        "--update",
        metavar="JSON",
        help=f"merged into the state before resuming (a JSON object, at most {MAX_JSON_DEPTH} "
        "levels deep)",
    )
    state = commands.add_parser(
        "state", parents=[target, thread], help="a thread's state and run", epilog=JSON_HELP
    )
    state.add_argument("--checkpoint", metavar="ID", help="a past checkpoint instead of the last")
    state.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    history = commands.add_parser(
        "history", parents=[target, thread], help="a thread's checkpoints (JSON)", epilog=JSON_HELP
    )
    history.add_argument(
        "--json",
        action="store_true",
        help="print JSON (what history always prints: taken for symmetry with the other commands)",
    )
    _cli_runs.add_parsers(commands, target, env)
    draw = commands.add_parser("draw", parents=[target], help="print the graph's diagram")
    draw.add_argument("--format", choices=("mermaid", "plantuml"), default="mermaid")
    draw.add_argument(
        "--title",
        help="diagram title, one line without control characters (default: the graph id)",
    )
    worker = commands.add_parser(
        "worker",
        parents=[env],
        allow_abbrev=False,  # the options it does not know go to celery as they are
        help="celery -A MODULE worker, with the environment options",
    )
    worker.add_argument("module", metavar="MODULE", help="module (or module:app) of a Celery app")
    worker.epilog = "Other options go to `celery worker` (default: --loglevel=INFO)."
    add_prune_parser(commands, target)  # (see _cli_prune.py)
    from langgraph_celery.console.command import add_arguments as add_console_arguments

    add_console_arguments(
        commands.add_parser(
            "console", parents=[env], help="serve the web console (runs, approvals)"
        )
    )
    return parser


def _apply_environment(args: argparse.Namespace) -> None:
    for option, variable in ENV_VARIABLES.items():
        value = getattr(args, option, None)
        if value:
            os.environ[variable] = value


def _url_source(args: argparse.Namespace, option: str) -> str:
    """How the user gave the URL of ``option``: its flag, or its environment variable."""
    if getattr(args, option, None):
        return "--" + option.replace("_", "-")
    return ENV_VARIABLES[option]


def _check_celery_urls(args: argparse.Namespace) -> None:
    """Refuse a broker or result backend URL that Celery would misread: its error would show
    pieces of the password, even from a ``celery worker`` this command starts."""
    for option in CELERY_URL_OPTIONS:
        problem = celery_misreads(
            _url_source(args, option), os.environ.get(ENV_VARIABLES[option], "")
        )
        if problem:
            raise UsageError(problem)


# -- commands -------------------------------------------------------------------------------------


def _thread_for(graph: CompiledGraph, given: str | None, out: IO[str]) -> str | None:
    if graph.checkpoint_saver is None:
        if given is not None:  # (a graph without a saver keeps no thread: say so, not silently)
            print(
                f"note: the graph has no checkpoint saver, so thread {given!r} is not kept: "
                "compile it with CompileConfig(checkpoint_saver=...) to keep its runs",
                file=sys.stderr,
            )
        return given
    if given is not None:
        return given
    thread_id = f"thread-{uuid.uuid4().hex[:12]}"
    print(f"thread: {thread_id}", file=out)
    return thread_id


def _required_thread(args: argparse.Namespace) -> str:
    if not args.thread:
        raise UsageError(f"{args.command} needs --thread ID")
    thread_id: str = args.thread
    return thread_id


def cmd_run(args: argparse.Namespace, out: IO[str]) -> int:
    from langgraph_celery.graph.types import GraphInput

    values = json_object("--input", args.input)
    # (a new run even on a thread with a parked one, which `resume` continues)
    graph_input = GraphInput.no_args() if values is None else GraphInput.args(values)
    graph = load_graph(args.target)
    thread_id = _thread_for(graph, args.thread, out)
    follow(graph, graph_input, thread_id, target=args.target, env=environment_flags(args), out=out)
    return 0


def cmd_resume(args: argparse.Namespace, out: IO[str]) -> int:
    from langgraph_celery.graph.types import GraphInput

    update = json_object("--update", args.update)
    thread_id = _required_thread(args)
    graph = load_graph(args.target)
    env = environment_flags(args)
    follow(graph, GraphInput.resume(update), thread_id, target=args.target, env=env, out=out)
    return 0


def cmd_state(args: argparse.Namespace, out: IO[str]) -> int:
    from langgraph_celery.errors import GraphStateError
    from langgraph_celery.graph.config import RunnableConfig

    thread_id = _required_thread(args)
    graph = load_graph(args.target)
    missing = missing_store(graph.checkpoint_saver)
    if missing is not None:
        raise GraphStateError(f"thread {thread_id!r} has no checkpoint; {missing}")
    _note_another_graph(graph, thread_id, args.target)
    snapshot = graph.get_state(RunnableConfig(thread_id=thread_id, checkpoint_id=args.checkpoint))
    run = _cli_runs.thread_run(graph, thread_id, snapshot.checkpoint_id)
    document = snapshot_json(snapshot, thread_id)
    if args.json:
        document["run"] = run.to_json() if run is not None else None
        print(to_json(document, indent=2), file=out)
    else:
        print(_cli_run_text.state_text(document, run), file=out)
    return 0


def cmd_history(args: argparse.Namespace, out: IO[str]) -> int:
    from langgraph_celery.graph.config import RunnableConfig

    thread_id = _required_thread(args)
    graph = load_graph(args.target)
    missing = missing_store(graph.checkpoint_saver)
    if missing is not None:
        print(f"note: {missing}", file=sys.stderr)
        print("[]", file=out)
        return 0
    _note_another_graph(graph, thread_id, args.target)
    snapshots = graph.get_state_history(RunnableConfig(thread_id=thread_id))
    print(to_json([snapshot_json(s, thread_id) for s in snapshots], indent=2), file=out)
    return 0


def _note_another_graph(graph: CompiledGraph, thread_id: str, target: str) -> None:
    """Say on stderr when the thread holds another graph's runs (read, not refused)."""
    owner = other_owner(graph, thread_id)
    if owner is not None:
        print(
            f"note: thread {thread_id!r} holds runs of graph {owner!r}, not of {target} "
            f"({graph.config.graph_id!r}): shown as {target} reads it",
            file=sys.stderr,
        )


def cmd_draw(args: argparse.Namespace, out: IO[str]) -> int:
    title = one_line("--title", args.title)
    diagram = load_graph(args.target).get_graph(args.format, title).content
    print(diagram.rstrip("\n"), file=out)
    return 0


COMMANDS = {
    "demo": _cli_start.cmd_demo,
    "run": cmd_run,
    "resume": cmd_resume,
    "state": cmd_state,
    "history": cmd_history,
    "runs": _cli_runs.cmd_runs,
    "status": _cli_runs.cmd_status,
    "cancel": _cli_runs.cmd_cancel,
    "draw": cmd_draw,
    "worker": _cli_start.cmd_worker,
    "prune": cmd_prune,
    "console": _cli_start.cmd_console,
}


def main(argv: Sequence[str] | None = None) -> int:
    """The console script; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    # Every URL on the command line or in the LGC_* variables: their passwords never reach stderr
    # (argparse's own errors repeat arguments, libraries' errors repeat what they misread).
    urls = [*words, *(os.environ.get(variable, "") for variable in ENV_VARIABLES.values())]
    with redacted_stderr(Secrets(urls)):
        return _main(words)


def _main(argv: list[str]) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "worker":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.celery_args = extra
    _apply_environment(args)
    if args.log_level:
        logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    out = sys.stdout
    try:
        _check_celery_urls(args)
        return COMMANDS[args.command](args, out)
    except UsageError as error:
        parser.exit(2, f"{PROG} {args.command}: error: {error}\n")
    except BrokenPipeError:  # stdout closed early (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if args.traceback:
            traceback.print_exc()
        message = (
            str(error) if isinstance(error, ImportFailure) else f"{type(error).__name__}: {error}"
        )
        # (SQLAlchemy's errors end with a link to its error catalogue: not what to do here)
        message = message.split("\n(Background on this error at:")[0]
        print(f"{PROG} {args.command}: {message}", file=sys.stderr)
        database = os.environ.get(ENV_VARIABLES["db"], "")
        note = misread_note(_url_source(args, "db"), database)
        if note:
            print(note, file=sys.stderr)
        elif type(error).__module__.startswith("sqlalchemy"):
            print(_database_note(args, database), file=sys.stderr)
        return 1


def _database_note(args: argparse.Namespace, database: str) -> str:
    """What to check when the checkpoint store failed: the database, and where it came from."""
    if database:
        where = f"{masked(database)} (from {_url_source(args, 'db')})"
        return f"note: the checkpoint database is {where}: check that it is reachable"
    return (
        "note: the checkpoint database is the one the graph's module configures; name it with "
        "--db or LGC_DATABASE_URL if the module reads that variable"
    )


if __name__ == "__main__":
    sys.exit(main())
