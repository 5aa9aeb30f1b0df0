"""The dashboard's guard: who may talk to it, from where, and what a page may load.

- **Host check** (against DNS rebinding): a request whose ``Host`` is not one
  of the addresses the server answers on (``127.0.0.1``, ``localhost``,
  ``[::1]`` with its port, and the bound host with ``--allow-remote``) is
  refused with 421 before anything else runs.
- **Token, then cookie.** The server mints a random token at start and prints
  ``http://127.0.0.1:PORT/?token=…``. The first request carrying it gets a
  session cookie (``HttpOnly``, ``SameSite=Strict``, path ``/``) and a
  redirect to the same address without the token; the token is then spent
  (one-time). Every other request needs the cookie: 401 otherwise.
- **CSRF**: every POST carries ``csrf`` (form field) or ``X-CSRF-Token``
  (header) equal to the session's CSRF token (an HMAC of the session id under
  the server's secret, put in each page); a POST without it, or with an
  ``Origin`` that is not this server, is refused with 403.
- **Headers** on every response: a strict Content-Security-Policy (no inline
  script or style, nothing from another origin, no framing), ``nosniff``,
  ``Referrer-Policy: same-origin`` (no Referer ever leaves for another site; the token is
  redirected away before any page loads; with ``no-referrer`` browsers send ``Origin: null``
  on form posts, which the Origin check would refuse).

Errors under ``/api/`` are RFC 9457 problem documents (:func:`problem`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE: Final = "agentlog_session"
CSP: Final = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
              "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS: Final = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


def is_loopback(host: str) -> bool:
    return host.strip("[]") in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


SESSION_SECONDS = 12 * 3600.0
"""A dashboard session lasts this long (the cookie's Max-Age and the server's own check)."""


@dataclass
class Guard:
    """The server's secrets and who it has let in."""

    port: int
    bind_host: str = "127.0.0.1"
    allow_remote: bool = False
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    sessions: dict[str, float] = field(default_factory=dict)
    """Session id → when it expires (``time.monotonic()``)."""
    token_spent: bool = False
    session_seconds: float = SESSION_SECONDS

    def allowed_hosts(self) -> set[str]:
        names = {"127.0.0.1", "localhost", "[::1]"}
        if self.allow_remote:
            names.add(self.bind_host if ":" not in self.bind_host else f"[{self.bind_host}]")
        return {f"{n}:{self.port}" for n in names} | ({n for n in names} if self.port in (80, 443) else set())

    def csrf_for(self, session: str) -> str:
        return hmac.new(self.secret, b"csrf\x1f" + session.encode(), hashlib.sha256).hexdigest()

    def url(self, host: str | None = None) -> str:
        """The address to open (with the one-time token)."""
        h = host or ("127.0.0.1" if not self.allow_remote else self.bind_host)
        if ":" in h and not h.startswith("["):
            h = f"[{h}]"
        return f"http://{h}:{self.port}/?{urlencode({'token': self.token})}"

    def open_session(self) -> str:
        sid = secrets.token_urlsafe(24)
        self.sessions[sid] = time.monotonic() + self.session_seconds
        return sid

    def session_of(self, request: Request) -> str | None:
        """The request's live session (an expired one is forgotten)."""
        sid = request.cookies.get(COOKIE)
        if sid is None or sid not in self.sessions:
            return None
        if time.monotonic() >= self.sessions[sid]:
            del self.sessions[sid]
            return None
        return sid


def problem(status: int, title: str, detail: str = "", *, type_: str = "about:blank",
            instance: str | None = None, **extra: Any) -> JSONResponse:
    """An RFC 9457 problem document."""
    body: dict[str, Any] = {"type": type_, "title": title, "status": status}
    if detail:
        body["detail"] = detail
    if instance:
        body["instance"] = instance
    body.update(extra)
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def _refuse(request: Request, status: int, title: str, detail: str) -> Response:
    if request.url.path.startswith("/api/"):
        return problem(status, title, detail, instance=request.url.path)
    from html import escape

    return HTMLResponse(f"<!doctype html><title>{escape(title)}</title><h1>{escape(title)}</h1>"
                        f"<p>{escape(detail)}</p>", status_code=status)


class GuardMiddleware:
    """Applies :class:`Guard` to every HTTP request (see the module docstring)."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        body: bytes | None = None
        if scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            body = await request.body()  # read once here; replayed to the app below
        response = await self._check(request, body)
        if response is not None:
            await self._send_with_headers(response, scope, receive, send)
            return
        if body is not None:
            replayed = False

            async def replay() -> Any:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            receive = replay

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.decode("latin-1").lower() for k, _ in headers}
                for k, v in HEADERS.items():
                    if k not in present:
                        headers.append((k.encode("latin-1"), v.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _send_with_headers(self, response: Response, scope: Scope, receive: Receive, send: Send) -> None:
        for k, v in HEADERS.items():
            response.headers.setdefault(k, v)
        await response(scope, receive, send)

    async def _check(self, request: Request, body: bytes | None) -> Response | None:
        g = self.guard
        host = request.headers.get("host", "")
        if host not in g.allowed_hosts():
            return _refuse(request, 421, "Misdirected request",
                           "this server answers only on its own loopback address (Host header refused)")
        token = request.query_params.get("token")
        if token is not None:
            if g.token_spent or not hmac.compare_digest(token.encode(), g.token.encode()):
                return _refuse(request, 401, "Token not accepted",
                               "this token was used already or is not this server's: restart `agentlog serve`, "
                               "or use the browser that opened it first")
            g.token_spent = True
            sid = g.open_session()
            query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(query)}" if query else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/", max_age=int(g.session_seconds))
            return response
        fetch_site = request.headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            # another origin (another port of 127.0.0.1 is "same-site") asking the browser to use our cookie
            return _refuse(request, 403, "Cross-site request refused",
                           f"Sec-Fetch-Site {fetch_site!r}: only this server's own pages may call it")
        session = g.session_of(request)
        if session is None:
            if request.url.path.startswith("/static/"):
                return None  # stylesheets and scripts hold nothing private
            return _refuse(request, 401, "Not signed in",
                           "open the address `agentlog serve` printed (it carries a one-time token)")
        request.scope.setdefault("state", {})["session"] = session
        request.scope["state"]["csrf"] = g.csrf_for(session)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("origin")
            if origin is not None and origin.split("://", 1)[-1] not in g.allowed_hosts():
                return _refuse(request, 403, "Cross-origin request refused", f"Origin {origin!r} is not this server")
            sent = request.headers.get("x-csrf-token")
            if sent is None and body is not None and request.headers.get("content-type", "").startswith(
                    "application/x-www-form-urlencoded"):
                from urllib.parse import parse_qs

                values = parse_qs(body.decode("utf-8", "replace")).get("csrf")
                sent = values[0] if values else None
            if sent is None or not hmac.compare_digest(sent.encode(), g.csrf_for(session).encode()):
                return _refuse(request, 403, "CSRF check failed",
                               "a change needs the page's CSRF token (reload the page and try again)")
        return None


__all__ = ["COOKIE", "CSP", "Guard", "GuardMiddleware", "is_loopback", "problem"]
