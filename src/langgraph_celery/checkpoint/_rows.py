"""How :class:`~langgraph_celery.checkpoint.SqlSaver` reads checkpoints from their rows: a
whole body as it is, a delta through its parents (the saver's cache, the rows at hand, one row
at a time, then the rest of its chain at once: see :mod:`langgraph_celery.checkpoint._delta`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from langgraph_celery.checkpoint._delta import Chain
from langgraph_celery.checkpoint._incremental import Incremental
from langgraph_celery.checkpoint._records import as_utc
from langgraph_celery.checkpoint._statements import Statements
from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.serde import Serializer

__all__ = ["PrunedMeanwhile", "RowReader", "reread_if_pruned"]

T = TypeVar("T")

#: How many times a read starts again when a prune removed a row it was reading through.
REREADS = 3


class PrunedMeanwhile(LookupError):
    """A delta's parent was gone when the read reached it: a prune of the thread committed
    between the read of the row and that of its parent (it made the row whole first, so the
    row read again needs no parent)."""


def reread_if_pruned(read: Callable[[], T]) -> T:
    """``read()``, started again (up to :data:`REREADS` times) when a concurrent prune removed a
    row it was reading through."""
    for _ in range(REREADS - 1):
        try:
            return read()
        except PrunedMeanwhile:
            pass
    return read()


class RowReader:
    """Checkpoints from rows of ``<prefix>checkpoints`` (their columns as the saver selects
    them), for one saver."""

    def __init__(
        self,
        serializer: Serializer,
        incremental: Incremental,
        read: Callable[[Any, Mapping[str, Any]], Sequence[Any]],
        sql: Statements,
    ) -> None:
        self.serializer = serializer
        self._incremental = incremental
        self._read = read
        self._sql = sql

    def load_all(
        self, thread_id: str, rows: Sequence[Any], copy: bool = True
    ) -> Sequence[Checkpoint]:
        """Checkpoints of ``rows`` (newest first), their deltas applied oldest first, each
        read from the rows at hand (``copy``: see :meth:`load`)."""
        by_id = {row.checkpoint_id: row for row in rows}
        loaded = {
            row.checkpoint_id: self.load(thread_id, row, by_id, copy) for row in reversed(rows)
        }
        return [loaded[row.checkpoint_id] for row in rows]

    def load(
        self,
        thread_id: str,
        row: Any,
        at_hand: Mapping[str, Any] | None = None,
        copy: bool = True,
    ) -> Checkpoint:
        """The checkpoint of ``row``; a delta is read through its parents: those in
        ``at_hand`` (rows by id), the saver's cache, one row at a time for the first two, then
        the rest of its chain at once."""
        body = self.serializer.loads(row.body)
        if row.budget is not None:
            chain = Chain(row.base_id, int(row.budget), int(row.depth or 0))
            self._incremental.chain_of(thread_id, row.checkpoint_id, chain)
        fetched: dict[str, Any] = dict(at_hand or {})
        fetched[row.checkpoint_id] = row
        lookups = [0]

        def fetch(checkpoint_id: str) -> Any:
            found = fetched.get(checkpoint_id)
            if found is not None:
                return found
            params = {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
            if lookups[0] != 2 or row.base_id is None:
                # (after the chain: a row made whole by prune is not in it; it is found so)
                lookups[0] += 1
                rows = self._read(self._sql.body_of, params)
            else:
                lookups[0] += 1
                chain = {"thread_id": thread_id, "base_id": row.base_id}
                rows = self._read(self._sql.bodies_of_chain, chain)
                if checkpoint_id not in {r.checkpoint_id for r in rows}:
                    rows = [*rows, *self._read(self._sql.body_of, params)]
            fetched.update((r.checkpoint_id, r) for r in rows)
            found = fetched.get(checkpoint_id)
            if found is None:
                raise PrunedMeanwhile(
                    f"checkpoint {row.checkpoint_id!r} of thread {thread_id!r} is stored as a "
                    f"delta of {checkpoint_id!r}, which is gone"
                )
            return found

        def body_of(checkpoint_id: str) -> Any:
            return self.serializer.loads(fetch(checkpoint_id).body)

        def parent_of(checkpoint_id: str) -> str | None:
            parent: str | None = fetch(checkpoint_id).parent_id
            return parent

        values = self._incremental.values(
            thread_id, row.checkpoint_id, body, parent_of, body_of, copy
        )
        return Checkpoint.from_body(
            body,
            values=values,
            thread_id=thread_id,
            checkpoint_id=row.checkpoint_id,
            run_id=row.run_id,
            step=row.step,
            parent_id=row.parent_id,
            created_at=as_utc(row.created_at),
            kind=row.kind,
        )
