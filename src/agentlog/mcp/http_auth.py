"""``agentlog mcp --http``: the bearer token that guards it.

Streamable HTTP on loopback is reachable by every local process and user, so every
request must carry ``Authorization: Bearer <token>``. The token is made once (32 random
bytes, URL-safe) in ``<data root>/state/mcp-token``, mode 0600, and never printed or
logged: a client reads it from that file. A request without it, or with another, gets
401 before the MCP app sees it.
"""

from __future__ import annotations

import hmac
import os
import secrets
from typing import Any, Awaitable, Callable

from agentlog.core.fileio import write_atomic
from agentlog.core.paths import ensure_dir, state_dir

TOKEN_FILE = "mcp-token"


def token_path(root: str) -> str:
    return os.path.join(state_dir(root), TOKEN_FILE)


def load_or_create_token(root: str) -> str:
    """The server's token (made, 0600, the first time); a token file others can read is replaced."""
    path = token_path(root)
    try:
        st = os.stat(path, follow_symlinks=False)
        if st.st_mode & 0o077 == 0 and st.st_uid == os.getuid():
            with open(path, encoding="ascii") as fh:
                token = fh.read().strip()
            if len(token) >= 32:
                return token
    except (OSError, UnicodeDecodeError):
        pass
    ensure_dir(state_dir(root))
    token = secrets.token_urlsafe(32)
    write_atomic(path, (token + "\n").encode("ascii"))
    return token


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class BearerAuth:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = ("Bearer " + token).encode("ascii")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "unauthorized: send Authorization: Bearer <token from state/mcp-token>"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


__all__ = ["BearerAuth", "TOKEN_FILE", "load_or_create_token", "token_path"]
