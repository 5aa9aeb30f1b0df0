"""Proof bundles for events and sessions, and consistency proofs (issue 28; docs/proofs.md).

:func:`prove` names what to prove the way every listing prints it (an event id, a session id,
the agent's own session id, a prefix, or a log's ``provider/key``), brings the store and the
tree up to date, signs a checkpoint when the newest kept one does not cover the frames, and
returns the bundle: each frame's line, its leaf and its inclusion proof against that checkpoint.
A purged event is no longer in the store; it is found by its purged frame, whose stub keeps its
id, and proven without content. :func:`prove_consistency` proves that a later tree extends an
earlier one, with the kept checkpoints of the two sizes.
"""

from __future__ import annotations

from typing import Any, Final

from agentlog.core import AgentlogError, UsageError
from agentlog.integrity import merkle
from agentlog.integrity.bundle import CONSISTENCY_FORMAT, FORMAT, ProofUnavailable, build_entries, leaf_indexes, \
    purged_frames, read_lines
from agentlog.integrity.leaf_ids import id_key
from agentlog.integrity.note import Signer
from agentlog.integrity.tree import FrameTree
from agentlog.operations import checkpoints

MAX_FRAMES: Final = 1_000_000
"""The most frames one bundle proves."""


class NothingToProve(AgentlogError, LookupError):
    """The id names nothing recorded (exit 1)."""


def _bare(ident: str) -> str:
    text = ident.strip()
    for prefix in ("ev_", "ses_"):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _sessions_frames(engine: Any, session_id: str, tree: FrameTree) -> dict[tuple[str, int], int | None]:
    """Every frame of the session: its events' frames in the store, and every frame of its own log
    (``provider/<its session id as a key>``) in the tree: purged ones included."""
    from agentlog.log.layout import session_key

    rows = engine.run("SELECT provider, provider_session_id FROM sessions WHERE session_id = ?", [session_id]).rows
    if not rows:
        return {}
    provider, psid = rows[0]
    frames: dict[tuple[str, int], int | None] = {}
    for lp, lk, seq, offset in engine.run(
            "SELECT log_provider, log_key, seq, log_offset FROM events WHERE provider = ? AND "
            "coalesce(provider_session_id, 'unknown') = ?", [provider, psid], max_rows=MAX_FRAMES).rows:
        frames[(f"{lp}/{lk}", int(seq))] = int(offset)
    own = f"{provider}/{session_key(psid if psid != 'unknown' else None)}"
    _whole_log(tree, own, frames)
    return frames


def _whole_log(tree: FrameTree, log: str, frames: dict[tuple[str, int], int | None]) -> None:
    cursor = tree.cursors.get(log)
    for seq in range(cursor.seq + 1 if cursor is not None else 0):
        frames.setdefault((log, seq), None)


def _log_named(tree: FrameTree, ident: str) -> str | None:
    """The log of the tree ``ident`` names: ``provider/key``, or a key (a provider's session id)."""
    from agentlog.log.layout import session_key

    text = ident.strip()
    if text in tree.numbers:
        return text
    found = [log for log in tree.logs if log.split("/", 1)[1] in (text, session_key(text))]
    return found[0] if len(found) == 1 else None


def _purged_event(root: str, ident: str) -> dict[tuple[str, int], int | None]:
    bare = _bare(ident).replace("-", "").lower()
    if len(bare) < 4 or any(c not in "0123456789abcdef" for c in bare):
        return {}
    hits = {(log, seq) for log, seq, event_id in purged_frames(root) if event_id.replace("-", "").startswith(bare)}
    if len(hits) > 1:
        raise UsageError(f"{ident!r} matches {len(hits)} purged events; give more of the id")
    return {hit: None for hit in hits}


def _frames(root: str, ident: str, tree: FrameTree,
            only: str | None) -> tuple[str, str, dict[tuple[str, int], int | None]]:
    """(what kind, its id, the frames to prove) of ``ident`` (an ``only`` kind of thing, when given)."""
    from agentlog.query.engine import Engine
    from agentlog.query.views import UnknownId, resolve_id

    text = ident.strip()
    if not text:
        raise UsageError("give an event or session id to prove")
    kinds = ["event"] if text.startswith("ev_") else ["session"] if text.startswith("ses_") else ["event", "session"]
    if only is not None:
        if only not in kinds:
            raise UsageError(f"{ident!r} is not a {only} id")
        kinds = [only]
    with Engine(root, projection="session" in kinds) as engine:
        try:
            ref = resolve_id(engine, text, kinds)
        except UnknownId as e:
            unknown: UnknownId | None = e
        else:
            unknown = None
            if ref.kind == "event":
                rows = engine.run("SELECT log_provider, log_key, seq, log_offset FROM events WHERE event_id = ?",
                                  [ref.id]).rows
                return "event", ref.display, {(f"{r[0]}/{r[1]}", int(r[2])): int(r[3]) for r in rows[:1]}
            return "session", ref.display, _sessions_frames(engine, ref.id, tree)
    if "event" in kinds:
        frames = _purged_event(root, text)
        if frames:
            return "event", text, frames
    log = _log_named(tree, text)
    if log is not None and "session" in kinds:
        frames = {}
        _whole_log(tree, log, frames)
        return "session", log, frames
    raise NothingToProve(str(unknown)) from None


def _key_of(stored: checkpoints.StoredCheckpoint, root: str) -> str:
    """The verifier key string of the key that signed ``stored`` (the current key or a retired one)."""
    from agentlog.core.paths import state_dir
    from agentlog.integrity import keys
    from agentlog.integrity.note import parse_note

    lines = {(s.name, s.key_id) for s in parse_note(stored.note).signatures}
    for v in keys.verifiers(state_dir(root), checkpoints.origin(root)):
        if (v.name, v.key_id) in lines:
            return v.key_string()
    raise ProofUnavailable(f"no key of this data root signed {stored.path}")


def _catch_up(root: str, *, projection: bool) -> FrameTree:
    """Ingest what the logs hold (growing the tree), the projection too when sessions are asked for."""
    from agentlog.store.ingest import ingest

    report = ingest(root)
    if report.busy:
        raise ProofUnavailable("another ingest held the store for 5 s; try again")
    if projection:
        from agentlog.projection.persist import refresh

        refresh(root)
    return FrameTree(root)


def _indexed_event(root: str, event_id: str,
                   tree: FrameTree) -> tuple[dict[tuple[str, int], int | None], dict[tuple[str, int], int]] | None:
    """(frames, leaves) of the event ``event_id`` found through the tree's event-id index,
    its frame read and its id checked; None when the index cannot say (the caller then
    asks the store)."""
    hits = tree.event_leaves(event_id)
    if not hits:
        return None
    want = event_id.strip().lower().encode("ascii", "replace")
    for leaf, offset in hits:
        log, seq = tree.leaf_at(leaf)
        line = read_lines(root, {log: {seq: offset}}).get((log, seq), b"")
        at = line.find(b'"event_id":"')  # the frame's own id comes first, in an event or a purged stub
        if at >= 0 and line[at + 12 : at + 13 + len(want)] == want + b'"':
            return {(log, seq): offset}, {(log, seq): leaf}
    return None


def prove(root: str, ident: str, *, only: str | None = None) -> dict[str, Any]:
    """The proof bundle (docs/proofs.md) of the event or session ``ident`` (with ``only``
    ``"event"`` or ``"session"``, that kind of thing only).

    A whole event id, when the tree already holds every frame, is found through the tree's
    event-id index, without the store (the whole process takes well under 300 ms); anything
    else brings the store and the tree up to date and asks the store."""
    text = ident.strip()
    found = None
    if only != "session" and not text.startswith("ses_") and id_key(_bare(text)) is not None:
        tree = FrameTree(root)
        if tree.current():
            found = _indexed_event(root, _bare(text), tree)
    if found is not None:
        frames, leaves = found
    else:
        tree = _catch_up(root, projection=not text.startswith("ev_") and only != "event")
        _kind, shown, frames = _frames(root, text, tree, only)
        if not frames:
            raise NothingToProve(f"{shown} has no frames in the logs")
        if len(frames) > MAX_FRAMES:
            raise ProofUnavailable(f"{shown} has {len(frames)} frames; a bundle proves at most {MAX_FRAMES}")
        leaves = leaf_indexes(tree, frames)
    newest = checkpoints.latest(root)
    if newest is None or newest.checkpoint.size <= max(leaves.values(), default=0) or newest.checkpoint.size > tree.size:
        newest = checkpoints.checkpoint(root, tree=tree)
    size = newest.checkpoint.size
    if tree.root_hash(size) != newest.checkpoint.root:
        raise ProofUnavailable(f"the checkpoint {newest.path} says a root the tree does not have at size {size}: "
                               "the tree was changed since it was signed")
    entries = build_entries(root, tree, size, frames, leaves)
    key = _key_of(newest, root)
    bundle: dict[str, Any] = {"format": FORMAT, "origin": checkpoints.origin(root), "key": key,
                              "checkpoint": newest.note, "entries": entries}
    witnessed = _witnessed(root, tree, size, key)
    if witnessed is not None:
        bundle["witnessed"] = witnessed
    return bundle


def prove_signed(root: str, ident: str, *, only: str | None = None) -> tuple[dict[str, Any], Signer]:
    """:func:`prove`, against a checkpoint signed by the data root's current key (one is signed
    first when the newest covering one was signed by a retired key), and that key's signer: what
    a shared file needs to sign its statement with the checkpoint's key (docs/share.md)."""
    signer = checkpoints.signer(root)
    bundle = prove(root, ident, only=only)
    if bundle["key"] != signer.verifier_key_string():
        checkpoints.checkpoint(root)
        bundle = prove(root, ident, only=only)
    return bundle, signer


def _witnessed(root: str, tree: FrameTree, size: int, key: str) -> dict[str, Any] | None:
    """The bundle's ``witnessed`` section: the newest checkpoint signed with ``key`` that a
    registered witness cosigned (its cosigned note), those witnesses' keys, and the consistency
    proof from its size to ``size``, from the tree as it is (a tree rebuilt over rewritten logs
    gives a proof that does not verify against the witnessed root: the checkers say so)."""
    from agentlog.integrity.note import Verifier
    from agentlog.operations.witness import newest_witnessed

    found = newest_witnessed(root, Verifier.from_key_string(key))
    if found is None:
        return None
    old = found.kept.checkpoint.size
    if old > size:
        raise ProofUnavailable(f"the witnessed checkpoint {found.kept.name} signs {old} frames, more than the "
                               f"bundle's checkpoint ({size}): the log was rolled back; run `agentlog verify`")
    return {"checkpoint": found.note, "witnesses": [w.key_string() for w in found.witnesses],
            "consistency": [h.hex() for h in tree.tiles.consistency_proof(old, size)]}


def prove_consistency(root: str, old_size: int, new_size: int) -> dict[str, Any]:
    """The proof that the tree of ``new_size`` frames extends the tree of ``old_size``, with the
    kept checkpoint of each size (null for a size none was signed at; the current tree's head is
    signed first when ``new_size`` is its size)."""
    tree = _catch_up(root, projection=False)
    if not 0 <= old_size <= new_size:
        raise UsageError(f"give OLD ≤ NEW, both ≥ 0 (got {old_size} and {new_size})")
    if new_size > tree.size:
        raise UsageError(f"the tree has {tree.size} frames; NEW may be at most that (got {new_size})")
    if new_size == tree.size:
        checkpoints.checkpoint(root, tree=tree)
    kept = {c.checkpoint.size: c for c in checkpoints.stored(root)}
    sides = {}
    signer: checkpoints.StoredCheckpoint | None = None
    for name, size in (("old", old_size), ("new", new_size)):
        root_hash = tree.root_hash(size)
        cp = kept.get(size)
        if cp is not None and cp.checkpoint.root != root_hash:
            raise ProofUnavailable(f"the checkpoint {cp.path} says a root for size {size} the tree does not have: "
                                   "the tree was changed since it was signed")
        sides[name] = {"size": size, "root": root_hash.hex(), "checkpoint": cp.note if cp is not None else None}
        signer = cp or signer
    key = _key_of(signer, root) if signer is not None else checkpoints.signer(root).verifier_key_string()
    return {"format": CONSISTENCY_FORMAT, "origin": checkpoints.origin(root), "key": key, "old": sides["old"],
            "new": sides["new"], "proof": [h.hex() for h in tree.tiles.consistency_proof(old_size, new_size)]}


def summary(bundle: dict[str, Any]) -> str:
    """One line on what a bundle proves (for the CLI's stderr)."""
    if bundle.get("format") == CONSISTENCY_FORMAT:
        return f"consistency of {bundle['origin']} size {bundle['old']['size']} → {bundle['new']['size']}"
    entries = bundle["entries"]
    purged = sum(e["frame"] is None for e in entries)
    size = bundle["checkpoint"].split("\n")[1]
    frames = "1 frame" if len(entries) == 1 else f"{len(entries)} frames"
    line = f"{frames} ({purged} purged) proven against checkpoint {bundle['origin']} size {size}"
    witnessed = bundle.get("witnessed")
    if witnessed is None:
        return line + "; no witnessed checkpoint"
    old = checkpoints.unsigned_body(witnessed["checkpoint"])
    new = checkpoints.unsigned_body(bundle["checkpoint"])
    by = ", ".join(k.split("+", 1)[0] for k in witnessed["witnesses"])
    proof = [bytes.fromhex(h) for h in witnessed["consistency"]]
    if not merkle.verify_consistency(old.size, new.size, old.root, new.root, proof):
        return line + f"; it does NOT extend the checkpoint of size {old.size} {by} witnessed (run `agentlog verify`)"
    return line + f", which extends the checkpoint of size {old.size} {by} witnessed"


__all__ = ["MAX_FRAMES", "NothingToProve", "prove", "prove_consistency", "prove_signed", "summary"]
