"""Signed checkpoints of the data root's Merkle tree (issue 28; docs/proofs.md).

The data root's *origin* (``agentlog.local/<16 hex digits>``) is made once, with
the signing key, and is also the key's name. ``checkpoint`` brings the tree up
to date (an ingest), signs its head as a C2SP tlog-checkpoint and keeps it:
every checkpoint is kept, under ``state/tree/checkpoints/<size>-<unix µs>.note``
(0600). A checkpoint of a size and root already signed is not written again.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from typing import Final

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.paths import ensure_dir, state_dir
from agentlog.integrity import keys
from agentlog.integrity.checkpoint import Checkpoint, open_checkpoint, parse_body, sign_checkpoint
from agentlog.integrity.note import Signer, parse_note
from agentlog.integrity.tree import FrameTree, tree_dir

ORIGIN_FILE: Final = "origin"
ORIGIN_PREFIX: Final = "agentlog.local/"


class CheckpointFailed(AgentlogError):
    """No checkpoint could be made or read (the message says why)."""


@dataclass(frozen=True)
class StoredCheckpoint:
    """A kept checkpoint: where, what it says and its signed note."""

    path: str
    checkpoint: Checkpoint
    note: str
    made_at_us: int


def origin(root: str) -> str:
    """The data root's origin, made on first use."""
    path = os.path.join(tree_dir(root), ORIGIN_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
        if text.startswith(ORIGIN_PREFIX):
            return text
        raise CheckpointFailed(f"{path} does not hold an origin ({ORIGIN_PREFIX}…); restore it from a backup")
    except FileNotFoundError:
        pass
    ensure_dir(tree_dir(root))
    made = ORIGIN_PREFIX + secrets.token_hex(8)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return origin(root)  # another process made it first
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(made + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return made


def signer(root: str) -> Signer:
    """The data root's checkpoint signer (made on first use, 0600)."""
    return keys.load_or_create_signer(state_dir(root), origin(root))


def checkpoints_dir(root: str) -> str:
    return os.path.join(tree_dir(root), "checkpoints")


def checkpoint(root: str, *, tree: FrameTree | None = None, now_us: int | None = None) -> StoredCheckpoint:
    """Sign the tree's current head and keep it (the newest kept one if it already says
    the same size and root)."""
    tree = tree if tree is not None else FrameTree(root)
    body = Checkpoint(origin(root), tree.size, tree.root_hash())
    newest = latest(root)
    if newest is not None and newest.checkpoint.size == body.size and newest.checkpoint.root == body.root:
        return newest
    note = sign_checkpoint(body, signer(root))
    at = now_us if now_us is not None else time.time_ns() // 1000
    ensure_dir(checkpoints_dir(root))
    path = os.path.join(checkpoints_dir(root), f"{body.size:012d}-{at}.note")
    write_atomic(path, note.encode("utf-8"))
    return StoredCheckpoint(path, body, note, at)


def stored(root: str) -> list[StoredCheckpoint]:
    """Every kept checkpoint, oldest first (by size, then time), each opened with the data
    root's current and retired keys; a note that does not open is an error."""
    try:
        names = sorted(n for n in os.listdir(checkpoints_dir(root)) if n.endswith(".note"))
    except FileNotFoundError:
        return []
    verifiers = keys.verifiers(state_dir(root), origin(root))
    out = []
    for name in names:
        path = os.path.join(checkpoints_dir(root), name)
        with open(path, encoding="utf-8") as fh:
            note = fh.read()
        try:
            body = open_checkpoint(note, verifiers, origin=origin(root))
        except AgentlogError as e:
            raise CheckpointFailed(f"{path}: {e}") from None
        try:
            at = int(name.rsplit("-", 1)[1].removesuffix(".note"))
        except (IndexError, ValueError):
            at = 0
        out.append(StoredCheckpoint(path, body, note, at))
    return out


def latest(root: str) -> StoredCheckpoint | None:
    kept = stored(root)
    return kept[-1] if kept else None


def unsigned_body(note: str) -> Checkpoint:
    """A checkpoint's body without checking any signature (for showing one)."""
    return parse_body(parse_note(note).text)


__all__ = ["Checkpoint", "CheckpointFailed", "sign_checkpoint", "StoredCheckpoint", "checkpoint", "checkpoints_dir", "latest", "origin", "signer",
           "stored", "unsigned_body"]
