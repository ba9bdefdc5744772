"""Hide credentials in text a page shows: errors of runs and of the console's own calls can
quote a broker or database URL (``redis://:secret@host``, ``password=secret``)."""

from __future__ import annotations

import re

__all__ = ["redact"]

#: ``scheme://user:password@`` (the user may be empty, as in ``redis://:password@host``)
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*):([^\s@/]+)@")
#: ``password=...`` in libpq connection strings and query strings
_KEY_PASSWORD = re.compile(
    r"(\b(?:password|passwd|pwd)\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s&;,]+)", re.IGNORECASE
)


def redact(text: str) -> str:
    """``text`` with the passwords of URLs and of ``password=`` settings replaced by ``**``."""
    text = _URL_PASSWORD.sub(r"\1:**@", text)
    return _KEY_PASSWORD.sub(r"\1**", text)
