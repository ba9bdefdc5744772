"""How the command line shows runs: ``runs``' table, ``status``' and ``cancel``'s blocks of
``label: value`` lines, ``state``'s table.  For people: cells are cut to a width and their control
characters escaped, times are UTC (``--json`` prints the same in full, for scripts)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph_celery._cli_output import to_json
from langgraph_celery._cli_run_view import RunView
from langgraph_celery.checkpoint.index import RunStatus

__all__ = ["block", "cell", "detail", "run_lines", "runs_table", "state_text", "when"]

#: The widest a table cell gets (the run id, the key to every other command, is never cut).
CELL_WIDTH = 40
DETAIL_WIDTH = 60
#: What a table cell shows escaped: control characters (a line break, a terminal's escape
#: sequence) and lone surrogates (which cannot be written as UTF-8).
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def cell(text: str | None, width: int | None = CELL_WIDTH) -> str:
    """``text`` on one line, what it holds that is not printable escaped, cut to ``width``."""
    if text is None:
        return "-"
    shown = _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], text)
    if width is not None and len(shown) > width:
        shown = shown[: width - 3] + "..."
    return shown


def when(moment: datetime | str | None) -> str:
    """A time as ``YYYY-MM-DD HH:MM:SS`` in UTC (a text that is not a time as it is)."""
    if moment is None:
        return "-"
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(text := moment)
        except ValueError:
            return cell(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def detail(run: RunView) -> str:
    if run.error_type is not None:
        return f"{run.error_type}: {run.error_message}"
    parts = [run.reason or ""]
    if run.deadline:
        parts.append(f"(deadline {when(run.deadline)})")
    return " ".join(part for part in parts if part)


def runs_table(runs: Sequence[RunView]) -> str:
    header = ("RUN", "STATUS", "NODE", "THREAD", "STARTED (UTC)", "UPDATED (UTC)", "DETAIL")
    rows = [header] + [
        (
            run.run_id,
            run.status.value,
            cell(run.node),
            cell(run.thread_id),
            when(run.created_at),
            when(run.updated_at),
            cell(detail(run), DETAIL_WIDTH) if detail(run) else "",
        )
        for run in runs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def run_lines(run: RunView) -> list[tuple[str, str]]:
    """The run as ``(label, value)`` lines, for a block of ``label: value``."""
    lines = [
        ("run", run.run_id),
        ("graph", cell(run.graph_id, None) if run.graph_id else "- (no graph_id)"),
        ("thread", cell(run.thread_id, None)),
        ("status", run.status.value),
        ("node", cell(run.node, None)),
    ]
    if run.status is RunStatus.PARKED:
        lines.append(("reason", cell(run.reason, None)))
        lines.append(("deadline", f"{when(run.deadline)} UTC" if run.deadline else "none"))
        shown = {k: v for k, v in run.metadata.items() if k not in ("expires_at", "resume_with")}
        if shown:
            lines.append(("metadata", cell(to_json(shown), None)))
    if run.error_type is not None:
        lines.append(("error", cell(f"{run.error_type}: {run.error_message}", None)))
    lines.append(("started", f"{when(run.created_at)} UTC" if run.created_at else "-"))
    lines.append(("updated", f"{when(run.updated_at)} UTC" if run.updated_at else "-"))
    return lines


def block(lines: Iterable[tuple[str, str]]) -> str:
    pairs = list(lines)
    width = max(len(label) for label, _ in pairs) + 2
    return "\n".join(f"{label + ':':<{width}}{value}" for label, value in pairs)


def state_text(snapshot: Mapping[str, Any], run: RunView | None) -> str:
    """``state``'s table: the checkpoint (a ``snapshot_json`` document), its run, its values."""
    step = f"step {snapshot['step']}, by node {cell(snapshot['node'], None)}"
    lines = [
        ("thread", cell(snapshot["thread_id"], None)),
        ("checkpoint", f"{snapshot['checkpoint_id']} ({step})"),
        ("next", ", ".join(cell(node, None) for node in snapshot["next"]) or "-"),
        ("created", f"{when(snapshot['created_at'])} UTC" if snapshot["created_at"] else "-"),
    ]
    if run is not None:
        lines += [line for line in run_lines(run) if line[0] != "thread"]
    values = to_json(snapshot["values"], indent=2)
    return f"{block(lines)}\nvalues:\n{values}"
