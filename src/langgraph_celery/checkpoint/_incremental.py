"""What :class:`~langgraph_celery.checkpoint.MemorySaver` and
:class:`~langgraph_celery.checkpoint.SqlSaver` share to store checkpoints as deltas and read
them back (the format and the rule are in :mod:`langgraph_celery.checkpoint._delta`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph_celery._clone import clone_value
from langgraph_celery.checkpoint._delta import (
    Chain,
    Delta,
    ValuesCache,
    decode_ops,
    encode_ops,
    next_chain,
    reconstruct,
)
from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.errors import SerializationError
from langgraph_celery.serde import Serializer

__all__ = ["Encoded", "Incremental"]


@dataclass(frozen=True, slots=True)
class Encoded:
    """A checkpoint as a saver stores it: its body's text and where it stands in its chain
    (``chain.base_id`` is ``None`` for a whole value)."""

    text: str
    chain: Chain


class Incremental:
    """A saver's delta bookkeeping: encoding a checkpoint, and a cache of recent states."""

    def __init__(self, serializer: Serializer, dump_body: Callable[[Checkpoint], str]) -> None:
        self.serializer = serializer
        self.dump_body = dump_body
        self.cache = ValuesCache()

    def encode(
        self,
        checkpoint: Checkpoint,
        parent_chain: Callable[[str], Chain | None] | None = None,
        *,
        whole: bool = False,
    ) -> Encoded:
        """``checkpoint``'s body: its delta when it has one and its parent's chain (from the
        cache, else ``parent_chain(parent_id)``) has room for it, else (and ``whole``) its
        whole state."""
        delta, parent_id = checkpoint.delta, checkpoint.parent_id
        if delta is not None and parent_id is not None and not whole:
            body = {
                "delta": encode_ops(delta, checkpoint.metadata, self.serializer.dumps),
                "tasks": [task.to_data() for task in checkpoint.tasks],
                "node": checkpoint.node,
                "extra": checkpoint.extra,
                "metadata": checkpoint.metadata,
                "kind": checkpoint.kind.value,
            }
            try:
                text = self.serializer.dumps(body)
            except SerializationError:
                self.serializer.dumps(checkpoint.values)  # (names the state key at fault)
                raise
            thread_id = checkpoint.thread_id
            parent = self.cache.chain(thread_id, parent_id)
            if parent is None and parent_chain is not None:
                parent = parent_chain(parent_id)
            chain = next_chain(parent_id, parent, len(text))
            if chain is not None:
                return Encoded(text, chain)
        text = self.dump_body(checkpoint)
        return Encoded(text, Chain.whole(len(text)))

    def stored(self, checkpoint: Checkpoint, encoded: Encoded) -> None:
        """Remember what was stored: its chain, and its values (a delta: applied when read)."""
        thread_id, checkpoint_id = checkpoint.thread_id, checkpoint.checkpoint_id
        self.cache.put_chain(thread_id, checkpoint_id, encoded.chain)
        if encoded.chain.base_id is not None and checkpoint.parent_id is not None:
            body = self.serializer.loads(encoded.text)
            own: Delta = decode_ops(body["delta"], body.get("metadata") or {})
            self.cache.put_delta(thread_id, checkpoint_id, checkpoint.parent_id, own)

    def values(
        self,
        thread_id: str,
        checkpoint_id: str,
        body: Mapping[str, Any],
        parent_of: Callable[[str], str | None],
        body_of: Callable[[str], Mapping[str, Any]],
        copy: bool = True,
    ) -> dict[str, Any]:
        """The values of a checkpoint read as ``body`` (loaded), a fresh copy: its own if
        whole, else reconstructed through its parents (``parent_of``, ``body_of``) and kept in
        the cache.  Without ``copy``: the cached values themselves, which the caller must never
        change (a worker's node gets them through ``CopyOnRead``; the runtime merges into new
        containers), so a step costs no copy of the state."""
        if "delta" not in body:
            whole = dict(body["values"])
            self.cache.put(thread_id, checkpoint_id, whole)
            if not copy:
                return whole
            copied: dict[str, Any] = clone_value(whole)
            return copied

        def own_body(checkpoint: str) -> Mapping[str, Any]:
            return body if checkpoint == checkpoint_id else body_of(checkpoint)

        found = reconstruct(
            checkpoint_id, parent_of, own_body, lambda c: self.cache.get(thread_id, c)
        )
        self.cache.put(thread_id, checkpoint_id, found)
        if not copy:
            return found
        fresh: dict[str, Any] = clone_value(found)
        return fresh

    def chain_of(self, thread_id: str, checkpoint_id: str, chain: Chain) -> None:
        self.cache.put_chain(thread_id, checkpoint_id, chain)

    def forget(self, thread_id: str, checkpoint_ids: Any = None) -> None:
        self.cache.forget(thread_id, checkpoint_ids)
