"""What every vault endpoint shares: the context, replies, the body limit and request
authentication (machine or admin signatures, docs/vault.md)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse

from agentlog.vault import BodyHashError, ClockSkewError, VaultAuthError, VaultCryptoError, VaultError, VaultProtocolError
from agentlog.vault.crypto import (
    HEADER_ADMIN, HEADER_MACHINE, RecipientSet, SignedRecipientSet, verify_request,
)
from agentlog.vault.storage import Storage

__all__ = ["Ctx", "Reply", "read_body", "request_path", "auth_machine", "auth_admin", "current_set", "MAX_BODY",
           "WRAP_LEN", "log", "parse_error"]

MAX_BODY = 64 << 20
WRAP_LEN = 80  # a sealed box around a 32-byte chain key: 32 (ephemeral key) + 16 (tag) + 32
log = logging.getLogger("agentlog.vault")


@dataclass
class Ctx:
    """The vault's state as the endpoints see it."""

    storage: Storage
    clock: Callable[[], float] = time.time
    max_body: int = MAX_BODY
    page_bytes: int = 4 << 20
    extra: dict[str, Any] = field(default_factory=dict)

    def now(self) -> int:
        return int(self.clock())


class Reply(VaultError):
    """An HTTP answer other than success, raised from deep inside a handler (never
    leaves the server: ``endpoint`` turns it into the response)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body.get("error"))
        self.status = status
        self.body = body

    def response(self) -> JSONResponse:
        return JSONResponse(self.body, status_code=self.status)


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or 413 beyond ``limit`` bytes (announced or streamed)."""
    announced = request.headers.get("content-length")
    if announced is not None and (not announced.isdigit() or int(announced) > limit):
        raise Reply(413, {"error": f"request body over {limit} bytes"})
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Reply(413, {"error": f"request body over {limit} bytes"})
        chunks.append(chunk)
    return b"".join(chunks)


def request_path(request: Request) -> str:
    """The path exactly as sent (percent-encoding kept), without the query."""
    raw = request.scope.get("raw_path")
    if isinstance(raw, bytes) and raw:
        return raw.decode("latin-1").split("?", 1)[0]
    return str(request.scope["path"])


def _verify(ctx: Ctx, public: bytes, request: Request, who: str, body: bytes) -> None:
    try:
        verify_request(public, request.method, request_path(request), who, request.headers, body, ctx.now())
    except ClockSkewError as e:
        raise Reply(401, {"error": "clock skew", "server_time": e.server_time}) from None
    except BodyHashError as e:
        raise Reply(400, {"error": str(e)}) from None
    except VaultAuthError as e:
        raise Reply(401, {"error": str(e)}) from None


def auth_machine(ctx: Ctx, request: Request, body: bytes) -> str:
    """The machine id of a request signed by an enrolled machine (401 otherwise)."""
    who = request.headers.get(HEADER_MACHINE)
    if not who:
        raise Reply(401, {"error": f"missing header {HEADER_MACHINE}"})
    public = ctx.storage.machine_key(who)
    if public is None:
        raise Reply(401, {"error": "unknown machine"})
    _verify(ctx, public, request, who, body)
    return who


def current_set(ctx: Ctx) -> tuple[SignedRecipientSet, RecipientSet]:
    """The vault's current signed recipient set (503 before bootstrap)."""
    row = ctx.storage.current_recipients()
    if row is None:
        raise Reply(503, {"error": "the vault has no admin yet (bootstrap it first)"})
    import json

    signed = SignedRecipientSet.from_json(json.loads(row[1]))
    return signed, signed.set


def auth_admin(ctx: Ctx, request: Request, body: bytes) -> tuple[str, RecipientSet]:
    """(fingerprint, current set) for a request signed by an admin of the current set:
    401 for a bad signature or timestamp, 403 for a machine or anyone not in the set."""
    who = request.headers.get(HEADER_ADMIN)
    if not who:
        if request.headers.get(HEADER_MACHINE):
            raise Reply(403, {"error": "admin endpoints take admin keys, not machine keys"})
        raise Reply(401, {"error": f"missing header {HEADER_ADMIN}"})
    _, rset = current_set(ctx)
    public = rset.fingerprints().get(who)
    if public is None:
        raise Reply(403, {"error": "not an admin of this vault"})
    _verify(ctx, public[32:], request, who, body)
    return who, rset


def parse_error(e: VaultProtocolError | VaultCryptoError | ValueError) -> Reply:
    return Reply(400, {"error": str(e)})
