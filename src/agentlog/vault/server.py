"""The vault's HTTP server: a Starlette app over :class:`~agentlog.vault.storage.Storage`.

Machine endpoints live here (enroll, recipients, head, frames); the admin ones in
:mod:`agentlog.vault.server_admin`. Handlers do their database and blob work in a
thread (``run_in_threadpool``); the storage lock serialises writers. Log lines name
the endpoint, the caller and the status — never a key, a token or ciphertext.
"""

from __future__ import annotations

import secrets
import sqlite3
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentlog.vault import VaultProtocolError
from agentlog.vault.protocol import (
    EnrollRequest, FramesRequest, b64d, chain_genesis, check_chain, loads,
)
from agentlog.vault import server_admin as admin
from agentlog.vault.server_common import (
    WRAP_LEN, Ctx, Reply, auth_machine, current_set, log, parse_error, read_body,
)
from agentlog.vault.storage import Head, Storage

__all__ = ["create_app", "ensure_bootstrap_token"]

Handler = Callable[[Ctx, Request, bytes], dict[str, Any] | tuple[int, dict[str, Any]]]


def endpoint(ctx: Ctx, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Wrap a synchronous handler: body limit, replies, a log line, the thread."""

    async def run(request: Request) -> Response:
        status = 500
        try:
            body = await read_body(request, ctx.max_body)
            result = await run_in_threadpool(handler, ctx, request, body)
            status, payload = result if isinstance(result, tuple) else (200, result)
            return JSONResponse(payload, status_code=status)
        except Reply as r:
            status = r.status
            return r.response()
        finally:
            who = request.headers.get("x-agentlog-machine") or request.headers.get("x-agentlog-admin") or "-"
            log.info("%s %s %s %d", request.method, request.url.path, who[:24], status)

    return run


# -- machine endpoints -----------------------------------------------------------------

def enroll(ctx: Ctx, request: Request, body: bytes) -> tuple[int, dict[str, Any]]:
    """POST /v1/enroll: a single-use token buys a machine id (nothing written on failure)."""
    try:
        req = EnrollRequest.from_json(loads(body))
    except VaultProtocolError as e:
        raise parse_error(e) from None
    signed, _ = current_set(ctx)
    secret = req.token.rpartition(".")[2]
    now = ctx.now()
    with ctx.storage.transaction() as db:  # a Reply rolls it back: a refused enrolment writes nothing
        if not _token_valid(db, secret, now):
            raise Reply(401, {"error": "bad, used or expired token"})
        existing = db.execute("SELECT machine_id FROM machines WHERE host = ?", (req.host,)).fetchone()
        if existing is not None and not req.rotate:
            raise Reply(409, {"error": f"host {req.host} is already enrolled (pass rotate to replace its key)"})
        machine_id = str(existing[0]) if existing is not None else "m-" + secrets.token_hex(8)
        if not ctx.storage.take_token(db, "enroll", secret, now, machine_id):
            raise Reply(401, {"error": "bad, used or expired token"})
        if existing is not None:
            db.execute("UPDATE machines SET public_key = ?, rotated_at = ? WHERE machine_id = ?",
                       (req.public_key, now, machine_id))
        else:
            db.execute("INSERT INTO machines VALUES (?, ?, ?, ?, NULL)", (machine_id, req.host, req.public_key, now))
    return 201, {"machine_id": machine_id, "recipients": signed.to_json()}


def _token_valid(db: sqlite3.Connection, secret: str, now: int) -> bool:
    from agentlog.vault.storage import secret_hash

    return db.execute("SELECT 1 FROM tokens WHERE secret_hash = ? AND kind = 'enroll' AND used_at IS NULL AND "
                      "(expires_at IS NULL OR expires_at > ?)", (secret_hash(secret), now)).fetchone() is not None


def recipients(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """GET /v1/recipients: the current signed recipient set."""
    auth_machine(ctx, request, body)
    return current_set(ctx)[0].to_json()


def _chain(request: Request) -> str:
    try:
        return check_chain(str(request.path_params["chain"]))
    except VaultProtocolError as e:
        raise parse_error(e) from None


def head(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """GET /v1/chains/{chain}/head: the caller's chain's last acknowledged frame."""
    machine_id = auth_machine(ctx, request, body)
    h = ctx.storage.head(machine_id, _chain(request))
    if h is None:
        raise Reply(404, {"error": "no such chain"})
    return {"seq": h.seq, "hash": h.hash, "epoch": h.epoch}


def frames(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """POST /v1/chains/{chain}/frames: auth -> body hash -> head -> linkage -> store -> head."""
    machine_id = auth_machine(ctx, request, body)
    chain = _chain(request)
    try:
        req = FramesRequest.from_json(loads(body))
    except VaultProtocolError as e:
        raise parse_error(e) from None
    first, last = req.first_seq, req.last_seq
    now = ctx.now()
    try:
        stored = _accept(ctx, machine_id, chain, req, now)
    except Reply as r:
        ctx.storage.add_receipt(now, machine_id, chain, first, last, r.status, str(r.body.get("error", "")))
        raise
    ctx.storage.add_receipt(now, machine_id, chain, first, last, 200, "stored" if stored else "replay")
    return {"acked_seq": last} if stored else {"acked_seq": last, "replay": True}


def _expect(head: Head | None, chain: str) -> dict[str, Any]:
    if head is None:
        return {"expected_seq": 0, "head_hash": None, "genesis": chain_genesis(chain)}
    return {"expected_seq": head.seq + 1, "head_hash": head.hash}


def _accept(ctx: Ctx, machine_id: str, chain: str, req: FramesRequest, now: int) -> bool:
    """Check one batch against the chain and store it: True when stored, False for an
    idempotent replay; a Reply (409/422/400) otherwise."""
    storage = ctx.storage
    h = storage.head(machine_id, chain)
    if h is not None and req.first_seq <= h.seq:
        return _replay(ctx, machine_id, chain, req, h, now)
    expect_seq, expect_prev = (0, chain_genesis(chain)) if h is None else (h.seq + 1, h.hash)
    if req.first_seq != expect_seq:
        raise Reply(409, {"error": f"expected seq {expect_seq}", **_expect(h, chain)})
    if req.index.prev(0) != expect_prev or (h is None and req.genesis not in (None, expect_prev)):
        raise Reply(409, {"error": f"frame {expect_seq} does not continue the chain", **_expect(h, chain)})
    epoch, wraps = _wraps(ctx, req, h, chain)
    bad = req.index.linkage_error()
    if bad is not None:
        raise Reply(422, {"seq": bad[0], "error": bad[1]})
    if not storage.store_batch(machine_id, chain, req.index, epoch, req.nonce, req.ciphertext, wraps, now, h):
        raise Reply(409, {"error": "the chain moved meanwhile", **_expect(storage.head(machine_id, chain), chain)})
    return True


def _wraps(ctx: Ctx, req: FramesRequest, h: Head | None, chain: str) -> tuple[int, dict[str, str] | None]:
    """The batch's key epoch and the wraps to keep. A chain's first batch, and any batch
    carrying wraps (a rekey), starts an epoch and must wrap for every current admin;
    wraps for anyone else are dropped."""
    if h is not None and req.wraps is None:
        return h.epoch, None
    _, rset = current_set(ctx)
    admins = rset.fingerprints()
    given = req.wraps or {}
    missing = sorted(fp for fp in admins if fp not in given)
    if missing:
        raise Reply(409, {"error": "the batch must carry a wrap for every admin", "missing_wraps": missing,
                          **_expect(h, chain)})
    keep = {fp: w for fp, w in given.items() if fp in admins}
    for fp, w in keep.items():
        if len(b64d(w)) != WRAP_LEN:
            raise Reply(400, {"error": f"the wrap for {fp[:16]}… is not a sealed chain key"})
    return (0 if h is None else h.epoch + 1), keep


def _replay(ctx: Ctx, machine_id: str, chain: str, req: FramesRequest, h: Head, now: int) -> bool:
    """A batch starting at or before the head: a replay if its index matches what the
    vault holds, a divergence (409 + security event) if not."""
    upto = min(req.last_seq, h.seq)
    held = {e.seq: e for e in ctx.storage.stored_index(machine_id, chain, req.first_seq, upto)}
    for e in req.index.entries():
        if e.seq > upto:
            break
        row = held.get(e.seq)
        if row is None or row != e:
            vault_hash = row.hash if row is not None else None
            ctx.storage.add_event(now, "divergence", machine_id, chain, e.seq, vault_hash, e.hash,
                                  "a shipped frame was sent again with a different index entry")
            log.warning("security event: divergence %s %s at seq %d", machine_id, chain, e.seq)
            raise Reply(409, {"error": f"the chain diverges at seq {e.seq}", "diverges_at": e.seq,
                              "expected_seq": h.seq + 1, "head_hash": h.hash})
    if req.last_seq > h.seq:  # the start is held; the rest cannot be cut out of one ciphertext
        raise Reply(409, {"error": f"expected seq {h.seq + 1}", "expected_seq": h.seq + 1, "head_hash": h.hash})
    return False


def ensure_bootstrap_token(storage: Storage, now: int) -> str | None:
    """A fresh single-use bootstrap token when the vault has no admin yet (earlier unused
    ones are dropped); None once it has one. Only its hash is stored."""
    if storage.current_recipients() is not None:
        return None
    storage.drop_unused_tokens("bootstrap")
    secret = secrets.token_urlsafe(32)
    storage.add_token("bootstrap", secret, now, None)
    return secret


def create_app(storage: Storage, ctx: Ctx | None = None) -> Starlette:
    """The vault's ASGI app over ``storage``."""
    c = ctx or Ctx(storage)
    routes = [
        Route("/v1/enroll", endpoint(c, enroll), methods=["POST"]),
        Route("/v1/recipients", endpoint(c, recipients), methods=["GET"]),
        Route("/v1/chains/{chain}/head", endpoint(c, head), methods=["GET"]),
        Route("/v1/chains/{chain}/frames", endpoint(c, frames), methods=["POST"]),
        Route("/v1/admin/bootstrap", endpoint(c, admin.bootstrap), methods=["POST"]),
        Route("/v1/admin/tokens", endpoint(c, admin.tokens), methods=["POST"]),
        Route("/v1/admin/recipients", endpoint(c, admin.get_recipients), methods=["GET"]),
        Route("/v1/admin/recipients", endpoint(c, admin.put_recipients), methods=["PUT"]),
        Route("/v1/admin/machines", endpoint(c, admin.machines), methods=["GET"]),
        Route("/v1/admin/chains", endpoint(c, admin.chains), methods=["GET"]),
        Route("/v1/admin/chains/{machine_id}/{chain}/batches", endpoint(c, admin.batches), methods=["GET"]),
        Route("/v1/admin/chains/{machine_id}/{chain}/wraps", endpoint(c, admin.my_wraps), methods=["GET"]),
        Route("/v1/admin/wraps", endpoint(c, admin.wraps), methods=["POST"]),
        Route("/v1/admin/events", endpoint(c, admin.events), methods=["GET"]),
    ]
    return Starlette(routes=routes)
