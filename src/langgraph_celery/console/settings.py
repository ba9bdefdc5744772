"""How the console is served: address, who may use it, and where Flower is.

:class:`ConsoleSettings` is checked once, when it is made: a console on an address other than
loopback must have ``basic_auth`` or ``token`` (anyone who reaches it could approve, cancel and
fork runs), and ``flower_url`` must be an http(s) URL without credentials (it is written into
every thread page).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

__all__ = ["LOOPBACK_NAMES", "ConsoleSettings", "SettingsError", "is_loopback"]

#: Host names that mean this machine only (besides the 127.0.0.0/8 and ::1 addresses).
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class SettingsError(ValueError):
    """A console setting that cannot be used; the message says which and what to do."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is loopback."""
    bare = host.strip().strip("[]").lower()
    if bare in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def _split_basic_auth(value: str) -> tuple[str, str]:
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise SettingsError(
            "--basic-auth takes USER:PASS with a non-empty user and password, e.g. "
            "--basic-auth admin:$(openssl rand -hex 12)"
        )
    return user, password


def _clean_flower_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"--flower-url must be an http(s) URL such as http://127.0.0.1:5555, got {url!r}"
        )
    if parts.username or parts.password:
        raise SettingsError(
            "--flower-url must not carry credentials: it is written into every page; give "
            "Flower's address only (the browser asks for Flower's login itself)"
        )
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


@dataclass(frozen=True)
class ConsoleSettings:
    """Where and for whom the console is served.

    ``basic_auth`` is ``"USER:PASS"``; ``token`` a shared secret given as ``Authorization:
    Bearer <token>`` or once as ``?token=<token>`` (the console then keeps it in a cookie).
    At most one of them.  ``flower_url`` turns node tasks into links to Flower.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    basic_auth: str | None = None
    token: str | None = None
    flower_url: str | None = None
    #: Seconds between two reads of the store for live updates (server-sent events).
    poll_interval: float = 1.0

    def __post_init__(self) -> None:
        if not self.host:
            raise SettingsError("--host is empty; give an address such as 127.0.0.1")
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"--port must be between 0 and 65535, got {self.port}")
        if self.basic_auth is not None and self.token is not None:
            raise SettingsError("give either --basic-auth or --token, not both")
        if self.basic_auth is not None:
            _split_basic_auth(self.basic_auth)
        if self.token is not None and len(self.token) < 8:
            raise SettingsError(
                "--token is shorter than 8 characters; use a long random one, e.g. "
                "--token $(openssl rand -hex 16)"
            )
        if not self.authenticated and not is_loopback(self.host):
            raise SettingsError(
                f"refusing to serve the console on {self.host!r} without authentication: "
                "anyone who reaches it could approve, cancel and fork runs. Add --basic-auth "
                "USER:PASS or --token TOKEN, or serve on 127.0.0.1 (the default)"
            )
        if self.flower_url is not None:
            object.__setattr__(self, "flower_url", _clean_flower_url(self.flower_url))
        if not self.poll_interval > 0:
            raise SettingsError(f"poll_interval must be positive, got {self.poll_interval}")

    @property
    def authenticated(self) -> bool:
        return self.basic_auth is not None or self.token is not None

    @property
    def credentials(self) -> tuple[str, str] | None:
        """``(user, password)`` of ``basic_auth``, if set."""
        return _split_basic_auth(self.basic_auth) if self.basic_auth is not None else None

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)
