"""Witnesses: who may cosign the data root's checkpoints, and cosigning (issue 28; docs/proofs.md).

A witness is a key of its own (Ed25519, C2SP tlog-cosignature, signature type
0x04) that vouches for a checkpoint once it has checked it extends every
checkpoint it cosigned before: history a witness has seen cannot be rewritten
without the witness's copy disagreeing. The registry (``state/keys/witnesses``)
lists the witnesses whose cosignatures ``agentlog verify`` trusts.

``cosign`` is the witness's side, run with the witness's private key file: it
checks the newest checkpoint's signature and that it extends the one this
witness cosigned last, adds the cosignature line and keeps the cosigned note
beside the checkpoint (``<size>-<unix µs>.cosigned``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.paths import state_dir
from agentlog.integrity import keys, merkle
from agentlog.integrity.checkpoint import Checkpoint, CosignatureVerifier, cosign, open_checkpoint, verify_cosignature
from agentlog.integrity.note import NoteVerifier, parse_note
from agentlog.integrity.tree import FrameTree
from agentlog.operations.checkpoints import CheckpointFailed, StoredCheckpoint, has_tree, kept_paths, latest, open_kept, origin, \
    stored, verifiers


@dataclass(frozen=True)
class Witness:
    """A registered witness: its name and verifier key string."""

    name: str
    key: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key}


def _witness(v: CosignatureVerifier) -> Witness:
    return Witness(v.name, v.key_string())


def add(root: str, name: str, key: str, *, replace: bool = False) -> Witness:
    """Register witness ``name`` by its verifier key, given as the string or a file holding it."""
    return _witness(keys.add_witness(state_dir(root), name, key, replace=replace))


def listed(root: str) -> list[Witness]:
    """The registered witnesses, in the order they were added."""
    return [_witness(v) for v in keys.witnesses(state_dir(root))]


def remove(root: str, name: str) -> Witness:
    """Unregister witness ``name``: its cosignatures no longer count."""
    return _witness(keys.remove_witness(state_dir(root), name))


def keygen(path: str, name: str) -> Witness:
    """Make a witness key pair: the private key into a new file ``path`` (0600), the verifier key
    returned (to register with ``add`` wherever this witness is to be trusted)."""
    made = keys.create_witness_key(path, name)
    return Witness(made.name, made.verifier().key_string())


def read_cosigned(kept: StoredCheckpoint) -> str | None:
    """The cosigned copy of a kept checkpoint, None when no witness cosigned it."""
    try:
        with open(kept.cosigned_path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def cosigned_by(note: str, witness: CosignatureVerifier) -> bool:
    """Whether ``note`` carries a line by ``witness``'s key (verified or not)."""
    return any((s.name, s.key_id) == (witness.name, witness.key_id) for s in parse_note(note).signatures)


def check_cosigned(kept: StoredCheckpoint, note: str, log_keys: list[NoteVerifier],
                   witnesses: list[CosignatureVerifier]) -> list[str]:
    """The registered witnesses whose cosignature on the cosigned copy ``note`` of ``kept``
    verifies. Raises :class:`CheckpointFailed` when the copy is not ``kept``'s checkpoint, the
    log's signature on it fails, or a registered witness's line on it does not verify."""
    return [w.name for w in cosigners(kept, note, log_keys, witnesses)]


def cosigners(kept: StoredCheckpoint, note: str, log_keys: list[NoteVerifier],
              witnesses: list[CosignatureVerifier]) -> list[CosignatureVerifier]:
    """:func:`check_cosigned`, giving the witnesses' keys."""
    try:
        if parse_note(note).text != parse_note(kept.note).text:
            raise CheckpointFailed(f"{os.path.basename(kept.cosigned_path)} is not the checkpoint of {kept.name}")
        open_checkpoint(note, log_keys, origin=kept.checkpoint.origin)
        found = []
        for w in witnesses:
            if cosigned_by(note, w):
                verify_cosignature(note, w)
                found.append(w)
        return found
    except CheckpointFailed:
        raise
    except AgentlogError as e:
        raise CheckpointFailed(f"{os.path.basename(kept.cosigned_path)}: {e}") from None


@dataclass(frozen=True)
class NewestWitnessed:
    """The newest checkpoint a registered witness cosigned: the kept one, its cosigned note,
    and the registered witnesses whose cosignature on it verifies."""

    kept: StoredCheckpoint
    note: str
    witnesses: list[CosignatureVerifier]


def newest_witnessed(root: str, log_key: NoteVerifier) -> NewestWitnessed | None:
    """The largest (then the last made) kept checkpoint signed with ``log_key`` whose cosigned
    copy carries a verifying cosignature by a registered witness; None when there is none. A
    checkpoint or cosigned copy that does not check out is passed over (``verify`` reports it)."""
    registered = keys.witnesses(state_dir(root))
    if not registered:
        return None
    origin_ = origin(root)
    best: NewestWitnessed | None = None
    for path in kept_paths(root):
        try:
            kept = open_kept(path, [log_key], origin_)
        except CheckpointFailed:
            continue
        note = read_cosigned(kept)
        if note is None:
            continue
        try:
            found = cosigners(kept, note, [log_key], registered)
        except CheckpointFailed:
            continue
        if found and (best is None or (kept.checkpoint.size, kept.made_at_us)
                      >= (best.kept.checkpoint.size, best.kept.made_at_us)):
            best = NewestWitnessed(kept, note, found)
    return best


def cosigned_witnesses(root: str, kept: StoredCheckpoint) -> list[str]:
    """The registered witnesses whose cosignature on ``kept`` verifies (for listing; ``verify``
    reports the ones that do not)."""
    note = read_cosigned(kept)
    if note is None:
        return []
    names = []
    for w in keys.witnesses(state_dir(root)):
        try:
            if cosigned_by(note, w):
                verify_cosignature(note, w)
                names.append(w.name)
        except AgentlogError:
            continue
    return names


@dataclass(frozen=True)
class Cosigned:
    """What ``cosign_newest`` did."""

    path: str
    note: str
    checkpoint: Checkpoint
    witness: Witness
    registered: bool
    previous: str | None
    """The checkpoint this witness cosigned before (whose extension was checked), if any."""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "note": self.note, "size": self.checkpoint.size,
                "root": self.checkpoint.root.hex(), "witness": self.witness.to_dict(),
                "registered": self.registered, "previous": self.previous}


def cosign_newest(root: str, key_file: str, *, time: int | None = None) -> Cosigned:
    """Cosign the newest kept checkpoint with the witness key in ``key_file``, after checking its
    signature (by the data root's key) and that it extends the checkpoint this witness cosigned
    before; the cosigned note is kept beside the checkpoint."""
    witness = keys.load_witness_key(key_file)
    newest = latest(root)
    if newest is None:
        raise CheckpointFailed("no checkpoint to cosign: run `agentlog checkpoint` first")
    mine = witness.verifier()
    previous: StoredCheckpoint | None = None
    for kept in stored(root):
        note = read_cosigned(kept)
        if kept.path != newest.path and note is not None and cosigned_by(note, mine):
            verify_cosignature(note, mine)
            previous = kept
    if previous is not None:
        _check_extends(root, previous, newest)
    current = read_cosigned(newest) or newest.note
    open_checkpoint(current, verifiers(root), origin=origin(root))
    note = cosign(current, witness, time)
    write_atomic(newest.cosigned_path, note.encode("utf-8"))
    registered = mine in keys.witnesses(state_dir(root))
    return Cosigned(newest.cosigned_path, note, newest.checkpoint, _witness(mine), registered,
                    previous.name if previous else None)


def _check_extends(root: str, old: StoredCheckpoint, new: StoredCheckpoint) -> None:
    """Refuse to cosign ``new`` unless the tree proves it extends ``old`` (cosigned before)."""
    a, b = old.checkpoint, new.checkpoint
    if b.size < a.size:
        raise CheckpointFailed(f"{new.name} signs {b.size} frames, fewer than {old.name} this witness cosigned "
                               f"({a.size}): refusing to cosign a rolled-back log")
    if not has_tree(root):
        raise CheckpointFailed("no Merkle tree to prove the checkpoints consistent with")
    tree = FrameTree(root)
    if b.size > tree.size:
        raise CheckpointFailed(f"{new.name} signs {b.size} frames, more than the tree holds ({tree.size})")
    proof = tree.tiles.consistency_proof(a.size, b.size)
    if not merkle.verify_consistency(a.size, b.size, a.root, b.root, proof):
        raise CheckpointFailed(f"{new.name} does not extend {old.name}, which this witness cosigned: "
                               "refusing to cosign a forked log (run `agentlog verify`)")


__all__ = ["Cosigned", "NewestWitnessed", "Witness", "add", "check_cosigned", "cosign_newest", "cosigned_by", "cosigned_witnesses",
           "cosigners", "keygen", "listed", "newest_witnessed", "read_cosigned", "remove"]
