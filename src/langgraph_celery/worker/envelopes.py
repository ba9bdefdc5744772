"""Transport envelopes a worker cannot read, dropped with a log line instead of stopping it.

On Redis, kombu keeps each message as a JSON *envelope* in the queue's list (the body, its
encoding, the headers and the delivery properties) and reads it in the worker's event loop
before Celery's consumer sees anything: an item that is not JSON (or nested deeper than Python's
parser goes), not a mapping, lacks ``properties`` or a ``delivery_tag``, or whose body its
``body_encoding`` cannot decode raised out of that loop and stopped the worker ("Unrecoverable
error").  It was already popped from the list, so it stopped only one worker; but anyone who
could push to the broker could stop every worker in turn.

:func:`guard_redis_envelopes`, installed on the task consumer's channel by
:class:`~langgraph_celery.worker.guard.GuardTaskMessages` at every start of the consumer, checks
each envelope as kombu reads it: one it cannot read is logged (its queue and the start of the
text) and dropped, and the worker serves on.  Nothing else changes: an envelope kombu reads goes
to Celery's consumer as before, whose own checks (and the guard's) refuse a bad task message.
On AMQP, ``py-amqp`` decodes a message's properties (its content type and headers table) as
it reads the frame, in the worker's event loop too; RabbitMQ passes them on as published: a
header it cannot decode (a timestamp past the year 9999, tables nested deeper than Python's
recursion limit, a content type that is not UTF-8) raised out of that loop and stopped the
worker, and the message, never acknowledged, stopped the next one.
:func:`guard_amqp_properties` has such properties decoded as none instead (logged), so that
Celery's consumer refuses the message as one it cannot read, and the worker serves on.
"""

from __future__ import annotations

import bz2
import functools
import logging
import lzma
import zlib
from typing import Any

from kombu import compression

__all__ = [
    "MalformedEnvelope",
    "bound_decompression",
    "guard_amqp_properties",
    "guard_redis_envelopes",
    "payload_problem",
]

log = logging.getLogger("langgraph_celery.worker")

#: How much of a dropped envelope the log line shows.
_SHOWN = 200


class MalformedEnvelope(Exception):
    """An envelope kombu's Redis transport cannot make a message of."""


def payload_problem(payload: Any) -> str | None:
    """What is wrong with an envelope (the JSON of a queue's item) before kombu reads it: what
    its Redis transport and Celery's consumer take for granted (a text body, text content type
    and encoding, a delivery tag it can key the unacknowledged messages by, the exchange and
    routing key it restores them to, headers it reads as a mapping); ``None`` if nothing."""
    if not isinstance(payload, dict):
        return f"it must be a mapping, got {type(payload).__name__}"
    body = payload.get("body")
    if not isinstance(body, str):
        return f"its body must be a text, got {type(body).__name__}"
    headers = payload.get("headers")
    if headers is not None and not isinstance(headers, dict):
        return f"its headers must be a mapping, got {type(headers).__name__}"
    for name in ("content-type", "content-encoding"):
        if payload.get(name) is not None and not isinstance(payload[name], str):
            return f"its {name} must be a text, got {type(payload[name]).__name__}"
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        return f"its properties must be a mapping, got {type(properties).__name__}"
    tag = properties.get("delivery_tag")
    if isinstance(tag, bool) or not isinstance(tag, str | int) or tag == "":
        return f"its delivery_tag must be a text or a number, got {type(tag).__name__}"
    info = properties.get("delivery_info")
    if not isinstance(info, dict):
        return f"its delivery_info must be a mapping, got {type(info).__name__}"
    for name in ("exchange", "routing_key"):
        if not isinstance(info.get(name), str):
            return f"its delivery_info must name its {name} (a text)"
    return None


def _checked_messages(channel: Any, made: list[bool]) -> type:
    """A subclass of ``channel``'s message class (kombu checks messages against it) refusing
    with :class:`MalformedEnvelope` an envelope it cannot make a message of; records in
    ``made`` that an envelope got that far (it was JSON)."""
    base: type = type(channel).Message

    class CheckedMessage(base):  # type: ignore[misc]
        def __init__(self, payload: Any, channel: Any = None, **kwargs: Any) -> None:
            made.append(True)
            problem = payload_problem(payload)
            if problem is not None:
                raise MalformedEnvelope(problem)
            try:
                super().__init__(payload, channel=channel, **kwargs)
            except Exception as error:
                raise MalformedEnvelope(f"{type(error).__name__}: {error}") from error

    CheckedMessage.__qualname__ = CheckedMessage.__name__ = base.__name__
    return CheckedMessage


def guard_redis_envelopes(channel: Any) -> bool:
    """Check every envelope ``channel`` (a kombu Redis channel consuming task queues) reads
    with ``BRPOP``: one that is not JSON, or that kombu cannot make a message of, is logged and
    dropped (it is already off the queue).  Idempotent; returns whether ``channel`` is one this
    applies to (kombu's Redis channels)."""
    handlers = getattr(channel, "handlers", None)
    if not isinstance(handlers, dict) or "BRPOP" not in handlers:
        return False
    read = handlers["BRPOP"]
    if getattr(read, "__guarded_envelopes__", False):
        return True
    made: list[bool] = []
    channel.Message = _checked_messages(channel, made)

    def guarded_read(**options: Any) -> Any:
        made.clear()
        try:
            return read(**options)
        except MalformedEnvelope as error:
            _dropped(channel, str(error))
        except (ValueError, TypeError, RecursionError) as error:
            if made:  # (raised past the envelope: Celery's consumer and what it calls)
                raise
            # (RecursionError: JSON nested deeper than the parser goes)
            _dropped(channel, f"it is not JSON ({type(error).__name__}: {error})")
        return True

    guarded_read.__guarded_envelopes__ = True  # type: ignore[attr-defined]
    handlers["BRPOP"] = guarded_read
    return True


def _dropped(channel: Any, problem: str) -> None:
    queues = ", ".join(sorted(getattr(channel, "_active_queues", ()) or ())) or "?"
    log.error(
        "Dropped a message on the broker that kombu cannot read (from one of the queues %s): %s",
        queues,
        problem[:_SHOWN],
    )


def guard_amqp_properties() -> bool:
    """Make ``py-amqp``'s decoding of a message's basic properties (content type, encoding,
    headers table, ...) log and return none (no headers, no content type) instead of raising
    on properties it cannot decode: Celery's consumer then refuses the message (an unknown or
    undecodable message, settled) and the worker serves on.  Process-wide and idempotent;
    called in workers.  Returns whether ``py-amqp`` is there to guard."""
    try:
        from amqp import serialization  # type: ignore[import-untyped]
        from amqp.spec import Basic  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - (kombu requires py-amqp)
        return False
    decode = serialization.PROPERTY_CLASSES.get(Basic.CLASS_ID)
    if decode is None:  # pragma: no cover
        return False
    if getattr(decode, "__guarded_properties__", False):
        return True

    def guarded(buf: Any, offset: int) -> tuple[dict[str, Any], int]:
        try:
            properties, end = decode(buf, offset)
        except Exception as error:  # (RecursionError, OverflowError, UnicodeDecodeError, ...)
            log.error(
                "Refused a message on the broker whose AMQP properties py-amqp cannot decode "
                "(decoded as none): %s: %s",
                type(error).__name__,
                str(error)[:_SHOWN],
            )
            return {"application_headers": {}}, len(buf)
        return properties, end

    guarded.__guarded_properties__ = True  # type: ignore[attr-defined]
    serialization.PROPERTY_CLASSES[Basic.CLASS_ID] = guarded
    return True


#: The most a compressed message body may inflate to in a worker (a few hundred bytes of bzip2
#: inflate to a gigabyte): past it the message is refused as one that cannot be decoded.
MAX_INFLATED = 64 * 2**20


def _inflate(decompressor: Any, body: bytes, limit: int) -> bytes:
    out = decompressor.decompress(body, limit + 1)
    if len(out) > limit:
        raise ValueError(f"a compressed message body inflates past {limit} bytes: refused")
    return bytes(out)


def bound_decompression(limit: int = MAX_INFLATED) -> None:
    """Make kombu's decompression of message bodies (gzip/zlib, bzip2, lzma, the compressions
    Celery's ``task_compression`` uses) stop at ``limit`` bytes in this process, instead of
    inflating whatever a message's ``compression`` header says to.  kombu reports a body it
    could not decompress as a decoding error, which Celery's consumer logs and acknowledges.
    Process-wide and idempotent; called in workers, whose messages come from the broker."""
    for content_type, make in (
        ("application/x-gzip", zlib.decompressobj),
        ("application/x-bz2", bz2.BZ2Decompressor),
        ("application/x-lzma", lzma.LZMADecompressor),
    ):
        encoder = compression._encoders.get(content_type)
        if encoder is None:
            continue
        decoder = functools.partial(_bounded, make, limit)
        compression.register(encoder, decoder, content_type)  # type: ignore[no-untyped-call]


def _bounded(make: Any, limit: int, body: Any) -> bytes:
    data = body.encode() if isinstance(body, str) else bytes(body)
    return _inflate(make(), data, limit)
