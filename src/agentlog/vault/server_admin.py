"""The vault's admin endpoints (signed by an admin key of the current recipient set,
except ``bootstrap``, where a single-use token printed by ``vault serve`` stands in)."""

from __future__ import annotations

import json
import secrets
from typing import Any

from starlette.requests import Request

from agentlog.vault import VaultCryptoError, VaultProtocolError
from agentlog.vault.crypto import SignedRecipientSet
from agentlog.vault.protocol import b64d, b64e, check_chain, loads
from agentlog.vault.server_common import WRAP_LEN, Ctx, Reply, auth_admin, current_set, log, parse_error

__all__ = ["bootstrap", "tokens", "get_recipients", "put_recipients", "machines", "chains", "batches", "my_wraps",
           "wraps", "events", "TOKEN_TTL"]

TOKEN_TTL = 3600


def _signed_set(body: bytes, field: str | None = None) -> tuple[dict[str, Any], SignedRecipientSet]:
    try:
        d = loads(body)
        return d, SignedRecipientSet.from_json(d[field] if field else d)
    except (VaultProtocolError, KeyError) as e:
        raise Reply(400, {"error": f"not a signed recipient set: {e}"}) from None


def bootstrap(ctx: Ctx, request: Request, body: bytes) -> tuple[int, dict[str, Any]]:
    """POST /v1/admin/bootstrap: the first admin, with the token ``vault serve`` printed."""
    d, signed = _signed_set(body, "recipients")
    token = d.get("token")
    if not isinstance(token, str):
        raise Reply(400, {"error": "token is a string"})
    rset = signed.set
    if len(rset.admins) != 1 or rset.version != 1:
        raise Reply(400, {"error": "the first recipient set holds exactly its signer, version 1"})
    try:
        signed.check(rset)  # signed by the one admin it names
    except VaultCryptoError as e:
        raise Reply(400, {"error": str(e)}) from None
    now = ctx.now()
    with ctx.storage.transaction() as db:
        if db.execute("SELECT 1 FROM recipients").fetchone() is not None:
            raise Reply(409, {"error": "the vault already has admins"})
        if not ctx.storage.take_token(db, "bootstrap", token, now, signed.signed_by):
            raise Reply(401, {"error": "bad or used bootstrap token"})
        ctx.storage.put_recipients(db, 1, rset.fingerprint(), json.dumps(signed.to_json()), [signed.signed_by], now)
    log.info("bootstrapped: first admin %s", signed.signed_by[:16])
    return 201, {"version": 1, "fingerprint": rset.fingerprint()}


def tokens(ctx: Ctx, request: Request, body: bytes) -> tuple[int, dict[str, Any]]:
    """POST /v1/admin/tokens: a single-use enrolment token, valid one hour."""
    who, rset = auth_admin(ctx, request, body)
    now = ctx.now()
    secret = secrets.token_urlsafe(32)
    fp = rset.fingerprint()
    ctx.storage.add_token("enroll", secret, now, now + TOKEN_TTL, set_fp=fp, created_by=who)
    return 201, {"token": f"{fp}.{secret}", "expires_at": now + TOKEN_TTL}


def get_recipients(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """GET /v1/admin/recipients: the current signed set (what add/remove start from);
    with ``?since=<version>``, ``{"sets": [...]}``: every signed set above that version,
    oldest first, so an admin can check each against the one before it."""
    auth_admin(ctx, request, body)
    since = request.query_params.get("since")
    if since is None:
        return current_set(ctx)[0].to_json()
    try:
        after = int(since)
    except ValueError:
        raise Reply(400, {"error": "since is an integer"}) from None
    rows = ctx.storage.query("SELECT signed FROM recipients WHERE version > ? ORDER BY version", (after,))
    return {"sets": [json.loads(r[0]) for r in rows]}


def put_recipients(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """PUT /v1/admin/recipients: a newer set signed by a current admin; the wraps of
    admins it drops are deleted."""
    who, current = auth_admin(ctx, request, body)
    _, signed = _signed_set(body)
    if signed.set.version <= current.version:
        raise Reply(409, {"error": f"version {signed.set.version} is not above the current {current.version}",
                          "version": current.version})
    try:
        signed.check(current)
    except VaultCryptoError as e:
        raise Reply(403, {"error": str(e)}) from None
    fps = list(signed.set.fingerprints())
    now = ctx.now()
    with ctx.storage.transaction() as db:
        top = db.execute("SELECT max(version) FROM recipients").fetchone()[0]
        if top is not None and int(top) >= signed.set.version:
            raise Reply(409, {"error": "the recipient set changed meanwhile", "version": int(top)})
        deleted = ctx.storage.put_recipients(db, signed.set.version, signed.set.fingerprint(),
                                             json.dumps(signed.to_json()), fps, now)
    ctx.storage.add_event(now, "recipients", detail=f"version {signed.set.version} set by {who}, "
                                                    f"{len(fps)} admins, {deleted} wraps deleted")
    return {"version": signed.set.version, "fingerprint": signed.set.fingerprint(), "wraps_deleted": deleted}


def machines(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """GET /v1/admin/machines."""
    auth_admin(ctx, request, body)
    rows = ctx.storage.query("SELECT machine_id, host, public_key, enrolled_at, rotated_at FROM machines "
                             "ORDER BY enrolled_at, machine_id")
    return {"machines": [{"machine_id": r[0], "host": r[1], "public_key": b64e(bytes(r[2])), "enrolled_at": r[3],
                          "rotated_at": r[4]} for r in rows]}


def chains(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """GET /v1/admin/chains: every chain with its head, size and last receipt."""
    auth_admin(ctx, request, body)
    rows = ctx.storage.query("SELECT c.machine_id, m.host, c.chain, c.head_seq, c.head_hash, c.epoch, c.bytes, "
                             "c.last_receipt FROM chains c JOIN machines m USING (machine_id) "
                             "ORDER BY c.machine_id, c.chain")
    keys = ("machine_id", "host", "chain", "head_seq", "head_hash", "epoch", "bytes", "last_receipt")
    return {"chains": [dict(zip(keys, r)) for r in rows]}


def _machine_chain(request: Request) -> tuple[str, str]:
    try:
        return str(request.path_params["machine_id"]), check_chain(str(request.path_params["chain"]))
    except VaultProtocolError as e:
        raise parse_error(e) from None


def my_wraps(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """GET /v1/admin/chains/{machine_id}/{chain}/wraps: this admin's wrap per key epoch
    (``{"epoch": n, "wraps": {"<epoch>": wrap}}``), so re-wrapping needs no ciphertext."""
    who, _ = auth_admin(ctx, request, body)
    machine_id, chain = _machine_chain(request)
    h = ctx.storage.head(machine_id, chain)
    if h is None:
        raise Reply(404, {"error": "no such chain"})
    rows = ctx.storage.query("SELECT epoch, wrap FROM wraps WHERE machine_id = ? AND chain = ? AND admin_fp = ? "
                             "ORDER BY epoch", (machine_id, chain, who))
    return {"epoch": h.epoch, "wraps": {str(r[0]): str(r[1]) for r in rows}}


def batches(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """GET /v1/admin/chains/{machine_id}/{chain}/batches?after=<seq>: one page of
    batches (a few MiB) with this admin's wrap for each batch's epoch."""
    who, _ = auth_admin(ctx, request, body)
    machine_id, chain = _machine_chain(request)
    raw_after = request.query_params.get("after", "-1")
    try:
        after = int(raw_after)
    except ValueError:
        raise Reply(400, {"error": "after is an integer"}) from None
    storage = ctx.storage
    if storage.head(machine_id, chain) is None:
        raise Reply(404, {"error": "no such chain"})
    page, more = storage.batches(machine_id, chain, after, ctx.page_bytes)
    out = []
    for b in page:
        out.append({
            "first_seq": b.first_seq, "last_seq": b.last_seq, "index": b.index().to_json(),
            "nonce": b64e(b.nonce), "ciphertext": b64e(storage.blobs.get(b.blob_key)),
            "wrap": storage.wrap(machine_id, chain, b.epoch, who), "epoch": b.epoch, "received_at": b.received_at,
        })
    return {"batches": out, "more": more}


def wraps(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """POST /v1/admin/wraps: wraps of an existing epoch's chain key for current admins
    (re-wrapping for an added admin)."""
    auth_admin(ctx, request, body)
    _, rset = current_set(ctx)
    try:
        d = loads(body)
        machine_id, chain, epoch, given = d["machine_id"], check_chain(d["chain"]), d["epoch"], d["wraps"]
    except (VaultProtocolError, KeyError, TypeError) as e:
        raise Reply(400, {"error": f"want machine_id, chain, epoch, wraps: {e}"}) from None
    if not isinstance(machine_id, str) or isinstance(epoch, bool) or not isinstance(epoch, int) \
            or not isinstance(given, dict) or not given:
        raise Reply(400, {"error": "want machine_id (string), epoch (integer), wraps (object)"})
    admins = rset.fingerprints()
    unknown = sorted(fp for fp in given if fp not in admins)
    if unknown:
        raise Reply(400, {"error": "wraps name admins outside the current set", "unknown": unknown})
    for fp, w in given.items():
        try:
            ok = isinstance(w, str) and len(b64d(w)) == WRAP_LEN
        except VaultProtocolError:
            ok = False
        if not ok:
            raise Reply(400, {"error": f"the wrap for {fp[:16]}… is not a sealed chain key"})
    h = ctx.storage.head(machine_id, chain)
    if h is None or not 0 <= epoch <= h.epoch:
        raise Reply(404, {"error": "no such chain or epoch"})
    with ctx.storage.transaction() as db:
        db.executemany("INSERT OR REPLACE INTO wraps VALUES (?, ?, ?, ?, ?)",
                       [(machine_id, chain, epoch, fp, w) for fp, w in given.items()])
    return {"stored": len(given)}


def events(ctx: Ctx, request: Request, body: bytes) -> dict[str, Any]:
    """GET /v1/admin/events?after=<id>: security events, oldest first."""
    auth_admin(ctx, request, body)
    try:
        after = int(request.query_params.get("after", "0"))
    except ValueError:
        raise Reply(400, {"error": "after is an integer"}) from None
    rows = ctx.storage.query("SELECT id, at, kind, machine_id, chain, seq, vault_hash, sent_hash, detail FROM events "
                             "WHERE id > ? ORDER BY id LIMIT 1000", (after,))
    keys = ("id", "at", "kind", "machine_id", "chain", "seq", "vault_hash", "sent_hash", "detail")
    return {"events": [dict(zip(keys, r)) for r in rows]}
