"""Passwords in the URLs ``langgraph-celery`` is given: masked wherever it prints a URL, and kept
out of everything it writes to stderr (errors, tracebacks, logs, hints).

A URL is masked *before* anything parses it.  A password may hold characters that URL parsers
take for the end of the address (``/``, ``?``, ``#``: ``urllib``, so kombu and Celery) or of the
password (``@``: SQLAlchemy); such a parser raises, or hands pieces of the password back as a
host, a port or a path, and its error message shows them.  So here the password is everything
between the first ``:`` after ``scheme://`` and the *last* ``@`` of the URL: when a URL is
ambiguous, more is hidden, never less.  Query parameters whose name holds ``pass``, ``pwd``,
``secret`` or ``token`` are masked too.

What the command writes to stderr goes through :class:`RedactingStream`, which replaces with
``**`` each password in its three forms (as given, percent-encoded, percent-decoded) wherever it
appears (a password of less than 4 characters only where no letter or digit touches it) and, for
a password with reserved characters, each piece of 2 characters or more between them (what a
misreading parser shows: a host, a port, a path) where no letter or digit touches it.  A single
character is not hidden: that would blank every such letter of every error.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any, cast
from urllib.parse import quote, unquote

__all__ = [
    "MASK",
    "RedactingStream",
    "Secrets",
    "celery_misreads",
    "masked",
    "misread_characters",
    "misread_note",
    "redacted_stderr",
]

MASK = "**"
#: RFC 3986 reserved characters: where a parser may cut a password into pieces.
RESERVED = ":/?#[]@!$&'()*+,;="
#: Characters some URL parser reads as the end of a password (``urllib``: ``/?#``;
#: SQLAlchemy: ``@``).
MISREAD = "/?#@"
#: Passwords shorter than this are redacted only where they stand as a word of their own.
_SHORT = 4
#: Pieces of a password (between reserved characters) shorter than this are not redacted.
_PIECE = 2
_QUERY_SECRET = re.compile(r"([?&;][^=&;#]*(?:pass|pwd|secret|token)[^=&;#]*=)([^&]*)", re.I)
_PIECES = re.compile(f"[{re.escape(RESERVED)}]+")
#: ``{}`` where no letter or digit touches it.
_ALONE = r"(?<![^\W_]){}(?![^\W_])"


def _password_span(url: str) -> tuple[int, int] | None:
    """Where the password of ``url`` is (``url[start:end]``), found without parsing the URL."""
    scheme = url.find("://")
    if scheme < 0:
        return None
    start = scheme + 3
    at = url.rfind("@")
    if at <= start or url[start] == "/":  # no user part, or no authority (sqlite:////a:b@c)
        return None
    colon = url.find(":", start, at)
    return None if colon < 0 else (colon + 1, at)  # no ":": a user name only


def passwords(url: str) -> list[str]:
    """The passwords in ``url``: its user part's and its secret query parameters'."""
    span = _password_span(url)
    found = [url[span[0] : span[1]]] if span else []
    rest = url[span[1] :] if span else url
    found += [match.group(2) for match in _QUERY_SECRET.finditer(rest)]
    return [password for password in found if password]


def masked(url: str) -> str:
    """``url`` with its passwords replaced by ``**`` (see the module's docstring)."""
    span = _password_span(url)
    head = ""
    if span is not None and span[0] < span[1]:
        head, url = url[: span[0]] + MASK, url[span[1] :]
    return head + _QUERY_SECRET.sub(lambda match: match.group(1) + MASK, url)


def misread_characters(url: str) -> str:
    """The characters of :data:`MISREAD` in ``url``'s passwords, in that order ("" if none)."""
    held = "".join(passwords(url))
    return "".join(character for character in MISREAD if character in held)


def _listed(characters: str) -> str:
    quoted = [repr(character) for character in characters]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def _encode(characters: str) -> str:
    pronoun = "them" if len(characters) > 1 else "it"
    encodings = ", ".join(f"{character!r} as %{ord(character):02X}" for character in characters)
    return f"percent-encode {pronoun} ({encodings})"


def celery_misreads(source: str, url: str) -> str | None:
    """Why Celery cannot read the broker or result backend ``url`` given as ``source`` (a flag or
    a variable), or ``None``: ``urllib`` ends the address at ``/``, ``?`` or ``#`` (it finds the
    last ``@``, so an ``@`` in a password is read right)."""
    misread = misread_characters(url).replace("@", "")
    if not misread:
        return None
    return (
        f"{source} {masked(url)}: its password holds {_listed(misread)}, which Celery's URL "
        f"parser reads as the end of the address; {_encode(misread)}"
    )


def misread_note(source: str, url: str) -> str | None:
    """For a command that failed: a note saying that the password of the database ``url`` (given
    as ``source``) may have been misread, or ``None``.  The error then names a host or a
    database made of pieces of the password (shown as ``**``), which puzzles without it."""
    misread = misread_characters(url)
    if not misread:
        return None
    return (
        f"note: the password in {source} ({masked(url)}) holds {_listed(misread)}, where URL "
        "parsers may end the password or the address (SQLAlchemy ends the password at the first "
        f"'@'); if the error is about that address, {_encode(misread)}"
    )


class Secrets:
    """The passwords to keep out of the command's stderr, and how to find them in a text."""

    def __init__(self, urls: Iterable[str] = ()) -> None:
        self._anywhere: set[str] = set()  # matched wherever they appear
        self._words: set[str] = set()  # matched where no letter or digit touches them
        self._pattern: re.Pattern[str] | None = None
        for url in urls:
            self.add_url(url)

    def add_url(self, url: str) -> None:
        for password in passwords(url):
            for form in {password, unquote(password), quote(password, safe="")}:
                (self._anywhere if len(form) >= _SHORT else self._words).add(form)
            for form in {password, unquote(password)}:
                pieces = _PIECES.split(form)
                if len(pieces) > 1:
                    self._words.update(piece for piece in pieces if len(piece) >= _PIECE)
        self._pattern = self._compile()

    def _compile(self) -> re.Pattern[str] | None:
        alternatives = [(text, re.escape(text)) for text in self._anywhere]
        alternatives += [(text, _ALONE.format(re.escape(text))) for text in self._words]
        if not alternatives:
            return None
        alternatives.sort(key=lambda pair: len(pair[0]), reverse=True)  # the whole before a piece
        return re.compile("|".join(regex for _, regex in alternatives))

    def redact(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub(MASK, text)


#: A URL in a text (an error message, a log line): its password is masked wherever it is shown.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def mask_urls(text: str) -> str:
    """``text`` with the password of every URL in it masked (see :func:`masked`)."""
    return _URL.sub(lambda match: masked(match.group()), text)


class RedactingStream:
    """A text stream that writes to ``stream`` what it is given, with the secrets redacted and
    the password of any URL in it masked (a node's error may name a database of its own).

    Each ``write`` is redacted on its own: a secret split over two writes is not found (``print``,
    ``logging`` and ``traceback`` write a URL in one piece)."""

    def __init__(self, stream: IO[str], secrets: Secrets) -> None:
        self.stream, self.secrets = stream, secrets

    def write(self, text: str) -> int:
        self.stream.write(self.secrets.redact(mask_urls(text)))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...: the stream's own
        return getattr(self.stream, name)


@contextmanager
def redacted_stderr(secrets: Secrets) -> Iterator[None]:
    """``sys.stderr`` redacts ``secrets`` until the block ends."""
    original = sys.stderr
    sys.stderr = cast(IO[str], RedactingStream(original, secrets))
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stderr = original
