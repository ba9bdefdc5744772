"""``langgraph-celery prune``: remove the old checkpoints of a graph's threads.

    langgraph-celery prune MODULE:GRAPH --thread ID --keep-last N [--dry-run] [--json]
    langgraph-celery prune MODULE:GRAPH --all --keep-last N [--dry-run] [--json]

Each thread keeps its ``N`` newest checkpoints and what its runs still need (the latest
checkpoint of a run that is not completed, with its parent): ``saver.prune(thread_id,
keep_last=N)``.  ``--all`` prunes every thread the run index records a run of the graph on
(the graph needs a ``graph_id``: the index files runs under it).  ``--dry-run`` says what would
be removed and removes nothing.

Output: one line per thread (how many checkpoints were removed and kept, and those kept beyond
the last ``N``, with why), or with ``--json`` one JSON document::

    {"keep_last": N, "dry_run": false,
     "threads": [{"thread_id": ..., "dry_run": false,
                  "kept": [{"checkpoint_id": ..., "reason": "last|run|parent|needed",
                            "detail": ...}, ...],
                  "deleted": [checkpoint ids, newest first]}, ...]}

Usage errors (no thread named, ``N`` below 1, a graph without a saver, ``--all`` on a graph
without a ``graph_id``) exit with code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from langgraph_celery._cli_input import UsageError
from langgraph_celery._cli_input import thread_id as thread_id_type
from langgraph_celery._cli_output import to_json
from langgraph_celery.checkpoint import BaseCheckpointSaver, Keep, Kept, PruneResult, RunIndex

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = ["add_prune_parser", "cmd_prune"]

#: Run records read at a time when ``--all`` looks for the graph's threads.
_PAGE = 500


def _keep_last(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of checkpoints to keep: give 1 or more (every thread keeps "
            "at least its latest)"
        )
    return value


def add_prune_parser(commands: Any, target: argparse.ArgumentParser) -> None:
    """Add ``prune`` to ``commands`` (the subparsers), with ``target`` (MODULE:GRAPH and the
    environment options) as a parent."""
    prune = commands.add_parser(
        "prune",
        parents=[target],
        help="remove old checkpoints of a thread (or of every thread of the graph)",
        description="Keep each thread's newest checkpoints and what its runs still need "
        "(parked, failed, cancelled or running runs' latest checkpoints); remove the rest.",
    )
    which = prune.add_mutually_exclusive_group(required=True)
    which.add_argument("--thread", metavar="ID", type=thread_id_type, help="the thread to prune")
    which.add_argument(
        "--all",
        action="store_true",
        help="every thread the run index records a run of the graph on (needs its graph_id)",
    )
    prune.add_argument(
        "--keep-last",
        metavar="N",
        type=_keep_last,
        required=True,
        help="how many of each thread's newest checkpoints to keep (1 or more)",
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    prune.add_argument("--json", action="store_true", help="print one JSON document")


def cmd_prune(args: argparse.Namespace, out: IO[str]) -> int:
    from langgraph_celery._cli_load import load_graph, missing_store

    graph = load_graph(args.target)
    saver = graph.checkpoint_saver
    if saver is None:
        raise UsageError(
            f"{args.target} has no checkpoint saver, so it keeps no threads to prune; compile "
            "it with CompileConfig(checkpoint_saver=...)"
        )
    stored = (missing := missing_store(saver)) is None  # (if not, read nothing)
    if args.thread is not None:
        if stored:
            _check_owner(graph, args)
        threads = [args.thread] if stored else []
    else:
        threads = list(_threads_of(graph, saver, args, stored))
    if missing is not None:
        print(f"note: {missing}", file=sys.stderr)
    results = []
    for thread_id in threads:
        result = saver.prune(thread_id, keep_last=args.keep_last, dry_run=args.dry_run)
        results.append(result)
        if not args.json:
            print(_line(result), file=out, flush=True)
    if args.json:
        document = {
            "keep_last": args.keep_last,
            "dry_run": args.dry_run,
            "threads": [result.to_data() for result in results],
        }
        print(to_json(document, indent=2), file=out)
    elif not results:
        print(f"no thread of graph {graph.config.graph_id!r} in the run index", file=out)
    return 0


def _check_owner(graph: CompiledGraph, args: argparse.Namespace) -> None:
    """Refuse to prune a thread that holds another graph's runs (as ``run`` refuses it)."""
    from langgraph_celery._cli_load import other_owner

    owner = other_owner(graph, args.thread)
    if owner is not None:
        raise UsageError(
            f"thread {args.thread!r} holds runs of graph {owner!r}, not of {args.target} "
            f"({graph.config.graph_id!r}): prune it with the module:graph of {owner!r}"
        )


def _threads_of(
    graph: CompiledGraph, saver: BaseCheckpointSaver, args: argparse.Namespace, stored: bool
) -> Iterator[str]:
    """The threads the run index records runs of ``graph`` on, most recently started first
    (none when nothing is ``stored``)."""
    graph_id = graph.config.graph_id
    if graph_id is None:
        raise UsageError(
            f"prune --all finds threads by the graph's id in the run index, and {args.target} "
            "has none: compile it with CompileConfig(graph_id=...), or name a thread with "
            "--thread"
        )
    if not isinstance(saver, RunIndex):
        raise UsageError(
            f"prune --all finds threads in the run index, which {type(saver).__name__} does not "
            "keep; name a thread with --thread"
        )
    if not stored:
        return
    seen: set[str] = set()
    before = None
    while True:
        page = saver.list_runs(graph_id, limit=_PAGE, before=before)
        for record in page:
            if record.thread_id not in seen:
                seen.add(record.thread_id)
                yield record.thread_id
        if len(page) < _PAGE:
            return
        before = page[-1]


def _line(result: PruneResult) -> str:
    verb = "would be removed" if result.dry_run else "removed"
    line = (
        f"thread {result.thread_id}: {len(result.deleted)} checkpoint(s) {verb}, "
        f"{len(result.kept)} kept"
    )
    if result.held:
        line += "; beyond the last: " + ", ".join(_why(kept) for kept in result.held)
    return line


def _why(kept: Kept) -> str:
    if kept.reason is Keep.RUN:
        return f"{kept.checkpoint_id} (latest of a {kept.detail} run)"
    if kept.reason is Keep.PARENT:
        return f"{kept.checkpoint_id} (parent of {kept.detail})"
    if kept.detail is None:  # (a saver of another kind, not naming the reader)
        return f"{kept.checkpoint_id} (another checkpoint is read from it)"
    return f"{kept.checkpoint_id} (read by {kept.detail})"
