"""The console's guard: one ASGI middleware in front of every request.

* **Host**: a console served on loopback answers only requests addressed to a loopback name
  (``127.0.0.1``, ``localhost``, ``[::1]``), so a web page cannot reach it by pointing a domain
  of its own at 127.0.0.1 (DNS rebinding).
* **Authentication** (when configured): HTTP basic auth, or a token, given as ``Authorization:
  Bearer <token>``, or once as ``?token=<token>`` (kept in an HttpOnly cookie afterwards, and
  removed from the address with a redirect).
* **CSRF**: every request that is not GET, HEAD or OPTIONS must carry the session's CSRF token,
  as the ``X-CSRF-Token`` header or the ``csrf_token`` form field, and may only be a form
  (``application/x-www-form-urlencoded``) or JSON.  The token is an HMAC of the session cookie
  (HttpOnly, SameSite=Strict) under a secret made when the console starts.  A request with a
  cross-origin ``Origin`` header (``null`` included) is refused too.  Requests authenticated
  with an ``Authorization: Bearer`` header are exempt: a browser never adds it by itself.
* **Headers**: a Content-Security-Policy that allows scripts, styles and images from the console
  only (no inline script), ``nosniff``, no framing, no referrer to other sites, no caching.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from langgraph_celery.console.settings import ConsoleSettings, is_loopback

__all__ = ["CSRF_FIELD", "CSRF_HEADER", "SESSION_COOKIE", "TOKEN_COOKIE", "Guard", "csrf_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_COOKIE = "lgc_console_session"
TOKEN_COOKIE = "lgc_console_token"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
#: The largest request body accepted (forms and JSON updates).
MAX_BODY = 1024 * 1024
#: how a refusal of a body over ``MAX_BODY`` begins (answered 413, not 403)
TOO_LARGE = "request body over"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


def csrf_token(secret: bytes, session: str) -> str:
    """The CSRF token of ``session``."""
    return hmac.new(secret, session.encode(), hashlib.sha256).hexdigest()


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(headers: dict[str, str]) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:
        return {}
    return {key: morsel.value for key, morsel in jar.items()}


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


#: What a browser gets for a refused form post: a page, not JSON (the console's own templates
#: are out of reach here, before the app).
_REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>error {status}</title>
<link rel="stylesheet" href="/static/console.css"></head>
<body><main><h1>Error {status}</h1><p class="notice error" role="alert">{text}</p>
<p>Go back (the browser keeps what you typed), reload the page, and send it again.</p>
<p><a href="/inbox">Approvals</a> · <a href="/runs">Runs</a></p></main></body></html>
"""


def _wants_html(scope: Scope, headers: dict[str, str]) -> bool:
    """A browser's request for a page (not the JSON API)."""
    return not str(scope.get("path", "")).startswith("/api/") and "text/html" in headers.get(
        "accept", ""
    )


async def _reply(
    send: Send,
    status: int,
    text: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    page: bool = False,
) -> None:
    if page:
        body = _REFUSED_PAGE.format(status=status, text=html.escape(text)).encode()
        kind = b"text/html; charset=utf-8"
    else:
        body = json.dumps({"detail": text}).encode()
        kind = b"application/json"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *SECURITY_HEADERS,
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Checks the host, authentication and CSRF of each request; see the module's docstring."""

    def __init__(self, app: ASGIApp, settings: ConsoleSettings, secret: bytes | None = None):
        self.app = app
        self.settings = settings
        self.secret = secret or secrets.token_bytes(32)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        cookies = _cookies(headers)
        if self.settings.loopback and not is_loopback(_host_name(headers.get("host", ""))):
            await _reply(
                send,
                421,
                "this console answers requests addressed to 127.0.0.1 or localhost only; open "
                "it at that address",
            )
            return
        extra_cookies: list[str] = []
        bearer = False
        if self.settings.authenticated:
            outcome = self._authenticate(scope, headers, cookies)
            if outcome == "redirect":
                await self._redirect_without_token(scope, send)
                return
            if outcome is None:
                await self._unauthorized(send)
                return
            bearer = outcome == "bearer"
        session = cookies.get(SESSION_COOKIE, "")
        if len(session) < 16:
            session = secrets.token_urlsafe(24)
            extra_cookies.append(f"{SESSION_COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict")
        state = scope.setdefault("state", {})
        state["csrf_token"] = csrf_token(self.secret, session)
        if scope["method"] not in SAFE_METHODS and not bearer:
            receive_or_error = await self._check_csrf(scope, receive, headers, cookies)
            if isinstance(receive_or_error, str):
                status = 413 if receive_or_error.startswith(TOO_LARGE) else 403
                await _reply(send, status, receive_or_error, page=_wants_html(scope, headers))
                return
            receive = receive_or_error

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *SECURITY_HEADERS,
                    *[(b"set-cookie", c.encode()) for c in extra_cookies],
                ]
                names = {k.lower() for k, _ in message["headers"]}
                if b"cache-control" not in names:
                    message["headers"].append((b"cache-control", b"no-store"))
            await send(message)

        await self.app(scope, receive, send_with_headers)

    # -- authentication -------------------------------------------------------------------------

    def _authenticate(
        self, scope: Scope, headers: dict[str, str], cookies: dict[str, str]
    ) -> str | None:
        """``"ok"``, ``"bearer"`` (an explicit token header), ``"redirect"`` (a valid token in
        the query: keep it in a cookie) or ``None`` (refused)."""
        settings = self.settings
        authorization = headers.get("authorization", "")
        scheme, _, value = authorization.partition(" ")
        if settings.token is not None:
            if scheme.lower() == "bearer" and _same(value.strip(), settings.token):
                return "bearer"
            if _same(cookies.get(TOKEN_COOKIE, ""), settings.token):
                return "ok"
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            if scope["method"] == "GET" and _same(query.get("token", ""), settings.token):
                return "redirect"
            return None
        credentials = settings.credentials
        if credentials is not None and scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(value.strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                return None
            if _same(user, credentials[0]) & _same(password, credentials[1]):
                return "ok"
        return None

    async def _unauthorized(self, send: Send) -> None:
        if self.settings.token is not None:
            await _reply(
                send,
                401,
                "this console needs its token: open it once as /?token=<token>, or send "
                "'Authorization: Bearer <token>'",
            )
            return
        await _reply(
            send,
            401,
            "this console needs a user and password (--basic-auth)",
            [(b"www-authenticate", b'Basic realm="langgraph-celery console", charset="UTF-8"')],
        )

    async def _redirect_without_token(self, scope: Scope, send: Send) -> None:
        query = [
            (k, v)
            for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
            if k != "token"
        ]
        location = scope.get("root_path", "") + scope["path"]
        if query:
            location += "?" + urlencode(query)
        assert self.settings.token is not None
        cookie = f"{TOKEN_COOKIE}={self.settings.token}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode()),
                    (b"set-cookie", cookie.encode()),
                    (b"content-length", b"0"),
                    *SECURITY_HEADERS,
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    # -- CSRF -----------------------------------------------------------------------------------

    async def _check_csrf(
        self, scope: Scope, receive: Receive, headers: dict[str, str], cookies: dict[str, str]
    ) -> Receive | str:
        """A ``receive`` that replays the body, or why the request is refused."""
        origin = headers.get("origin")
        # ("null", an opaque origin: a sandboxed frame, a data: URL, or a cross-origin form
        # under the same-origin referrer policy; the console's own forms send theirs)
        if origin is not None and origin.split("://", 1)[-1] != headers.get("host"):
            return f"cross-origin request from {origin} refused"
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type not in ("application/x-www-form-urlencoded", "application/json", ""):
            return (
                f"content type {content_type!r} is not accepted: send a form "
                "(application/x-www-form-urlencoded) or JSON"
            )
        body = b""
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return "the client went away"
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_BODY:
                return f"{TOO_LARGE} {MAX_BODY} bytes refused"
        given = headers.get(CSRF_HEADER)
        if given is None and content_type == "application/x-www-form-urlencoded":
            fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
            given = fields.get(CSRF_FIELD)
        session = cookies.get(SESSION_COOKIE)
        if not session or not given or not _same(given, csrf_token(self.secret, session)):
            return (
                "missing or wrong CSRF token: reload the page and try again (API clients: read "
                "the token from GET /api/session and send it as X-CSRF-Token with its cookie)"
            )
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay
