"""Runs on the command line: ``runs``, ``status`` and ``cancel``, and the run ``state`` shows.

    langgraph-celery runs MODULE:GRAPH [--status S] [--limit N] [--before RUN_ID] [--json]
    langgraph-celery status [MODULE[:GRAPH]] RUN_ID [--db URL] [--json]
    langgraph-celery cancel [MODULE[:GRAPH]] RUN_ID [--db URL] [--broker URL] [--json]

``status`` and ``cancel`` take ``MODULE`` (the run's graph is found among the module's compiled
graphs by its ``graph_id``) or ``MODULE:GRAPH``, or the run id alone with the store given by
``--db`` (or ``LGC_DATABASE_URL``): a run id does not say where the run is stored (see
:mod:`langgraph_celery._cli_run_view`, which also says what is known of a run).

``cancel`` stops a run on Celery at its current step (``RunHandle.cancel``): nodes already
running finish, no further step is dispatched, the checkpoints stay and a resume continues the
thread.  A run that is not running (parked, failed, completed) is not cancelled (exit code 1).
A graph run in process (no executor) is refused (exit code 2): its runs live in the process that
runs them, which this command cannot reach.  Without a module the command cannot tell: it marks
the run cancelled in the store, which Celery workers obey at the next step; a run going on in
process elsewhere does not read the mark (a parked one is cancelled wherever it ran).

Tables are for people (see :mod:`langgraph_celery._cli_run_text`); ``--json`` prints strict JSON
for scripts, in full.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING

from langgraph_celery._cli_input import UsageError
from langgraph_celery._cli_load import load_graph, missing_store
from langgraph_celery._cli_output import PROG, environment_flags, resume_command, to_json
from langgraph_celery._cli_run_text import block, cell, run_lines, runs_table
from langgraph_celery._cli_run_view import (
    RunView,
    find_run,
    find_run_in_store,
    graph_key,
    latest_of_run,
    on_celery,
    run_index,
    run_view,
    store_of_environment,
    thread_run,
)
from langgraph_celery.checkpoint.index import RunIndex, RunRecord, RunStatus
from langgraph_celery.graph._marks import has_pending

if TYPE_CHECKING:
    from langgraph_celery.checkpoint.base import BaseCheckpointSaver, CheckpointView
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = [
    "add_parsers",
    "cmd_cancel",
    "cmd_runs",
    "cmd_status",
    "thread_run",
]

#: How many runs ``runs`` lists when ``--limit`` is not given (as ``RunIndex.list_runs``).
DEFAULT_LIMIT = 50


def _hints(run: RunView, target: str, graph: CompiledGraph, env: list[str]) -> list[str]:
    """What the user can do next with ``run``, as commands to copy."""
    if run.status is RunStatus.RUNNING and on_celery(graph):
        return ["cancel it with:", f"  {_command('cancel', target, run.run_id, *env)}"]
    behind = _left_behind(run, graph) if run.status is not RunStatus.COMPLETED else None
    if behind is not None:
        later, checkpoint_id, pending = behind
        went_on = f"run {later} went on on thread {run.thread_id} after it"
        return [
            f"{went_on}: `resume` continues that one;" if pending else f"{went_on} and ended;",
            f"fork this run's last checkpoint ({checkpoint_id}) to go on from it (the",
            "console's Fork, or RunnableConfig(thread_id=..., checkpoint_id=...))",
        ]
    if run.status is RunStatus.PARKED:
        suggested = run.metadata.get("resume_with")
        update = dict(suggested) if isinstance(suggested, Mapping) else None
        return ["resume it with:", f"  {resume_command(target, run.thread_id, update, env)}"]
    if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        what = "run its failed step again" if run.status is RunStatus.FAILED else "continue it"
        return [f"{what} with:", f"  {resume_command(target, run.thread_id, None, env)}"]
    return []


def _left_behind(run: RunView, graph: CompiledGraph) -> tuple[str, str, bool] | None:
    """When a later run went on on ``run``'s thread: that run's id, ``run``'s own latest
    checkpoint (what a fork goes on from), and whether the later run has steps pending (a
    resume continues it)."""
    saver = graph.checkpoint_saver
    latest = saver.get(run.thread_id) if saver is not None else None
    if saver is None or latest is None or latest.run_id == run.run_id:
        return None
    own = next((c for c in saver.list(run.thread_id) if c.run_id == run.run_id), None)
    if own is None:
        return None
    return latest.run_id, own.checkpoint_id, has_pending(latest)


def _command(command: str, *words: str) -> str:
    return " ".join(shlex.quote(word) for word in (PROG, command, *words))


# -- the commands ---------------------------------------------------------------------------------


#: The most runs one page of ``runs`` lists (the next page: ``--before``).
MOST_A_PAGE = 10_000


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    if value > MOST_A_PAGE:
        raise argparse.ArgumentTypeError(
            f"must be at most {MOST_A_PAGE}, got {value}: page on with --before"
        )
    return value


def add_parsers(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    target: argparse.ArgumentParser,
    env: argparse.ArgumentParser,
) -> None:
    """The ``runs``, ``status`` and ``cancel`` subcommands (``target``: the parent parser with
    ``MODULE:GRAPH`` and the environment options; ``env``: the environment options alone)."""
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    runs = commands.add_parser(
        "runs", parents=[target, as_json], help="a graph's runs, newest first"
    )
    runs.add_argument(
        "--status", choices=[status.value for status in RunStatus], help="only runs with it"
    )
    runs.add_argument(
        "--limit",
        type=_positive,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"at most N runs (default {DEFAULT_LIMIT})",
    )
    runs.add_argument("--before", metavar="RUN_ID", help="the page after this run")
    one_run = argparse.ArgumentParser(add_help=False, parents=[env, as_json])
    one_run.add_argument("run_id", metavar="RUN_ID", help="as `run` prints it, `runs` lists it")
    module_help = "the module whose graphs' store holds the run (or one graph of it)"
    status = commands.add_parser(
        "status",
        parents=[one_run],
        help="a run's status, interruption, error",
        usage=f"{PROG} status [MODULE[:GRAPH]] RUN_ID [--db URL] [--json]",
    )
    status.add_argument(
        "more",
        nargs="?",
        metavar="RUN_ID",
        help=f"with MODULE[:GRAPH] first: {module_help}; "
        "without it the store is --db (or LGC_DATABASE_URL)",
    )
    cancel = commands.add_parser(
        "cancel",
        parents=[one_run],
        help="cancel a running or parked run (Celery)",
        usage=f"{PROG} cancel [MODULE[:GRAPH]] RUN_ID [--db URL] [--broker URL] [--json]",
    )
    cancel.add_argument(
        "more",
        nargs="?",
        metavar="RUN_ID",
        help=f"with MODULE[:GRAPH] first: {module_help}; "
        "without it the store is --db (or LGC_DATABASE_URL)",
    )


def cmd_runs(args: argparse.Namespace, out: IO[str]) -> int:
    graph = load_graph(args.target)
    saver = run_index(graph, args.target)
    assert isinstance(saver, RunIndex)
    missing = missing_store(saver)
    if missing is not None:  # (no runs there: say so, and read nothing)
        print(f"note: {missing}", file=sys.stderr)
    before = None
    if args.before:
        before = saver.get_run(args.before) if missing is None else None
        if before is None or before.graph_id != graph_key(graph):
            raise UsageError(f"--before {args.before}: no such run of {args.target}")
    status = RunStatus(args.status) if args.status else None
    records = (
        []
        if missing is not None
        else saver.list_runs(graph_key(graph), status, limit=args.limit + 1, before=before)
    )
    more = len(records) > args.limit
    records = records[: args.limit]
    runs = [
        run_view(_details_view(saver, record), record)
        if record.status in (RunStatus.PARKED, RunStatus.FAILED)
        else run_view(None, record)
        for record in records
    ]
    next_before = runs[-1].run_id if more else None
    if graph.config.graph_id is None:
        print(
            f"note: {args.target} has no graph_id; these are the runs of every graph compiled "
            "without one on this store (CompileConfig(graph_id=...) tells them apart)",
            file=sys.stderr,
        )
    if args.json:
        document = {"runs": [run.to_json() for run in runs], "next_before": next_before}
        print(to_json(document, indent=2), file=out)
        return 0
    if not runs:
        which = f" {status.value}" if status else ""
        print(f"no{which} runs of {args.target}", file=out)
        return 0
    print(runs_table(runs), file=out)
    if next_before is not None:
        words = [args.target] + (["--status", status.value] if status else [])
        words += ["--limit", str(args.limit)] if args.limit != DEFAULT_LIMIT else []
        words += ["--before", next_before, *environment_flags(args)]
        print(f"more: {_command('runs', *words)}", file=out)
    return 0


def _details_view(saver: BaseCheckpointSaver, record: RunRecord) -> CheckpointView | None:
    """For a list: the store's view of the run's checkpoint when it is its thread's latest
    (one read; a run a later one followed on its thread shows its details in ``status``)."""
    return latest_of_run(saver, record.thread_id, record.run_id, history=False)


def _target_and_run(args: argparse.Namespace) -> tuple[str | None, str]:
    """``[MODULE[:GRAPH]] RUN_ID`` as given: the module (``None`` without it) and the run id."""
    if getattr(args, "more", None) is None:
        if ":" in args.run_id:  # (a run id has no colon: this names a graph)
            raise UsageError(
                f"the following arguments are required: RUN_ID (after {args.run_id}; or the "
                "run id alone with --db URL)"
            )
        return None, args.run_id
    return args.run_id, args.more


def cmd_status(args: argparse.Namespace, out: IO[str]) -> int:
    target, run_id = _target_and_run(args)
    if target is None:
        with store_of_environment("status") as saver:
            run = find_run_in_store(saver, run_id)
        if args.json:
            print(to_json(run.to_json(), indent=2), file=out)
        else:
            print(block(run_lines(run)), file=out)
        return 0
    found = find_run(target, run_id)
    if args.json:
        print(to_json(found.run.to_json(), indent=2), file=out)
        return 0
    print(block(run_lines(found.run)), file=out)
    for line in _hints(found.run, found.target, found.graph, environment_flags(args)):
        print(line, file=out)
    return 0


def cmd_cancel(args: argparse.Namespace, out: IO[str]) -> int:
    from langgraph_celery.worker.cancelling import cancel_run
    from langgraph_celery.worker.handle import RunHandle

    target, run_id = _target_and_run(args)
    if target is None:
        with store_of_environment("cancel") as saver:
            run = find_run_in_store(saver, run_id)
            cancelled = cancel_run(saver, run.thread_id, run.run_id, wake=_wake_up())
            after = find_run_in_store(saver, run_id)
        return _cancelled(args, out, run, after, cancelled, [])
    found = find_run(target, run_id)
    run, graph = found.run, found.graph
    if not on_celery(graph):
        raise UsageError(
            f"{found.target} runs in process (no executor): a run of it lives in the process "
            "that runs it, which this command cannot reach; stop it there (Ctrl-C, or "
            "GraphStream.cancel()). A parked or failed run runs nothing until it is resumed."
        )
    cancelled = RunHandle(run.run_id, run.thread_id, graph).cancel()
    after = find_run(found.target, run.run_id).run
    hints = _hints(after, found.target, graph, environment_flags(args))
    return _cancelled(args, out, run, after, cancelled, hints)


def _wake_up() -> Callable[[str, bool], None] | None:
    """Without a module: the wake-ups of the broker ``--broker`` (or ``LGC_BROKER_URL``) names,
    when it is Redis, so a client following the run sees the cancel at once (else within its
    polling interval)."""
    from celery import Celery

    from langgraph_celery.worker.notify import Notifier

    broker = os.environ.get("LGC_BROKER_URL")
    if not broker:
        return None
    app = Celery("langgraph-celery-cancel", broker=broker)
    app.conf.result_backend = os.environ.get("LGC_RESULT_BACKEND")
    return Notifier(app).publish


def _cancelled(
    args: argparse.Namespace,
    out: IO[str],
    run: RunView,
    after: RunView,
    cancelled: bool,
    hints: Sequence[str],
) -> int:
    """Say what ``cancel`` did: 0 when the run is cancelled, 1 when there was nothing to do."""
    done = cancelled or after.status is RunStatus.CANCELLED
    if args.json:
        print(to_json({"cancelled": cancelled, "run": after.to_json()}, indent=2), file=out)
    elif cancelled:
        print(
            f"cancelled run {run.run_id} on thread {cell(run.thread_id, None)}: it stops "
            "before its next step (nodes already running finish), or stays where it was parked; "
            "its checkpoints stay, and a resume continues it",
            file=out,
        )
        for line in hints:
            print(line, file=out)
    elif done:
        print(f"run {run.run_id} was cancelled already", file=out)
    if not done:
        at = f" at node {after.node!r}" if after.node else ""
        print(
            f"{PROG} cancel: run {run.run_id} is {after.status.value}{at}, neither running nor "
            "parked: nothing to cancel",
            file=sys.stderr,
        )
        return 1
    return 0
