"""Signed checkpoints of the data root's Merkle tree (issue 28; docs/proofs.md).

The data root's *origin* (``agentlog.local/<16 hex digits>``) is made once, with
the signing key, and is also the key's name. ``checkpoint`` signs the tree's
head as a C2SP tlog-checkpoint and keeps it: every checkpoint is kept, under
``state/tree/checkpoints/<size>-<unix µs>.note`` (0600). A checkpoint of a size
and root already signed is not written again, and a tree that does not extend
the newest checkpoint is never signed (that would fork the history a witness
may have seen). A witness's cosigned copy of a checkpoint sits beside it, as
``<size>-<unix µs>.cosigned`` (``operations/witness.py``).

``make`` (``agentlog checkpoint``) ingests first; ``Periodic`` is the daemon's:
one checkpoint every few minutes (setting ``checkpoint_minutes``), only when the
tree has grown since the newest one.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable, Final

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.paths import ensure_dir, state_dir
from agentlog.integrity import keys, merkle
from agentlog.integrity.checkpoint import Checkpoint, open_checkpoint, parse_body, sign_checkpoint
from agentlog.integrity.note import NoteVerifier, Signer, parse_note
from agentlog.integrity.tiles import SIZE_FILE
from agentlog.integrity.tree import FrameTree, tree_dir

ORIGIN_FILE: Final = "origin"
ORIGIN_PREFIX: Final = "agentlog.local/"
NOTE_SUFFIX: Final = ".note"
COSIGNED_SUFFIX: Final = ".cosigned"
DEFAULT_EVERY_S: Final = 300.0


class CheckpointFailed(AgentlogError):
    """No checkpoint could be made or read (the message says why)."""


@dataclass(frozen=True)
class StoredCheckpoint:
    """A kept checkpoint: where, what it says and its signed note."""

    path: str
    checkpoint: Checkpoint
    note: str
    made_at_us: int

    @property
    def name(self) -> str:
        """The file's name (``<size>-<unix µs>.note``): how reports name a checkpoint."""
        return os.path.basename(self.path)

    @property
    def cosigned_path(self) -> str:
        return cosigned_path(self.path)


def read_origin(root: str) -> str | None:
    """The data root's origin, or None when none was made yet (nothing is created)."""
    path = os.path.join(tree_dir(root), ORIGIN_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
    except FileNotFoundError:
        return None
    if text.startswith(ORIGIN_PREFIX):
        return text
    raise CheckpointFailed(f"{path} does not hold an origin ({ORIGIN_PREFIX}…); restore it from a backup")


def origin(root: str) -> str:
    """The data root's origin, made on first use."""
    known = read_origin(root)
    if known is not None:
        return known
    path = os.path.join(tree_dir(root), ORIGIN_FILE)
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


def verifiers(root: str) -> list[NoteVerifier]:
    """The keys a kept checkpoint may be signed with: the current one and the retired ones."""
    return list(keys.verifiers(state_dir(root), origin(root)))


def checkpoints_dir(root: str) -> str:
    return os.path.join(tree_dir(root), "checkpoints")


def cosigned_path(note_path: str) -> str:
    """Where the cosigned copy of the checkpoint kept at ``note_path`` goes."""
    return note_path.removesuffix(NOTE_SUFFIX) + COSIGNED_SUFFIX


def kept_paths(root: str) -> list[str]:
    """The kept checkpoints' files, oldest first (by size, then time)."""
    try:
        names = sorted(n for n in os.listdir(checkpoints_dir(root)) if n.endswith(NOTE_SUFFIX))
    except FileNotFoundError:
        return []
    return [os.path.join(checkpoints_dir(root), n) for n in names]


def open_kept(path: str, keys_: list[NoteVerifier], origin_: str) -> StoredCheckpoint:
    """The checkpoint kept at ``path``, its signature checked with ``keys_`` and its origin ``origin_``."""
    try:
        with open(path, encoding="utf-8") as fh:
            note = fh.read()
        body = open_checkpoint(note, keys_, origin=origin_)
    except (AgentlogError, UnicodeDecodeError) as e:
        raise CheckpointFailed(f"{path}: {e}") from None
    name = os.path.basename(path)
    try:
        at = int(name.rsplit("-", 1)[1].removesuffix(NOTE_SUFFIX))
    except (IndexError, ValueError):
        at = 0
    return StoredCheckpoint(path, body, note, at)


def stored(root: str) -> list[StoredCheckpoint]:
    """Every kept checkpoint, oldest first (by size, then time), each opened with the data
    root's current and retired keys; a note that does not open is an error."""
    paths = kept_paths(root)
    if not paths:
        return []
    keys_, origin_ = verifiers(root), origin(root)
    return [open_kept(path, keys_, origin_) for path in paths]


def latest(root: str) -> StoredCheckpoint | None:
    """The newest kept checkpoint (the largest; of those, the last made), its signature checked."""
    paths = kept_paths(root)
    return open_kept(paths[-1], verifiers(root), origin(root)) if paths else None


def _check_extends(tree: FrameTree, newest: StoredCheckpoint) -> None:
    """Refuse to sign a tree that does not extend ``newest``."""
    old = newest.checkpoint
    if old.size > tree.size:
        raise CheckpointFailed(f"the tree holds {tree.size} frames, fewer than checkpoint {newest.name} signed "
                               f"({old.size}); it was truncated or replaced: run `agentlog verify`")
    proof = tree.tiles.consistency_proof(old.size, tree.size)
    if not merkle.verify_consistency(old.size, tree.size, old.root, tree.root_hash(), proof):
        raise CheckpointFailed(f"the tree does not extend checkpoint {newest.name} (its first {old.size} frames "
                               "differ from what that checkpoint signed): run `agentlog verify`")


def checkpoint(root: str, *, tree: FrameTree | None = None, now_us: int | None = None) -> StoredCheckpoint:
    """Sign the tree's current head and keep it (the newest kept one if it already says
    the same size and root). A tree that does not extend the newest kept checkpoint is
    refused (:class:`CheckpointFailed`)."""
    tree = tree if tree is not None else FrameTree(root)
    newest = latest(root)
    if newest is not None and newest.checkpoint.size > tree.size:
        tree.tiles.refresh()  # another process grew the tree and signed it since it was opened
    body = Checkpoint(origin(root), tree.size, tree.root_hash())
    if newest is not None:
        if newest.checkpoint.size == body.size and newest.checkpoint.root == body.root:
            return newest
        _check_extends(tree, newest)
    note = sign_checkpoint(body, signer(root))
    at = now_us if now_us is not None else time.time_ns() // 1000
    ensure_dir(checkpoints_dir(root))
    path = os.path.join(checkpoints_dir(root), f"{body.size:012d}-{at}{NOTE_SUFFIX}")
    write_atomic(path, note.encode("utf-8"))
    return StoredCheckpoint(path, body, note, at)


def has_tree(root: str) -> bool:
    """Whether the data root has a committed tree (ingest made one)."""
    return os.path.exists(os.path.join(tree_dir(root), SIZE_FILE))


def checkpoint_if_grown(root: str) -> StoredCheckpoint | None:
    """A new checkpoint when the tree has grown since the newest kept one, else None."""
    if not has_tree(root):
        return None
    tree = FrameTree(root)
    newest = latest(root)
    if tree.size == 0 or (newest is not None and newest.checkpoint.size == tree.size
                          and newest.checkpoint.root == tree.root_hash()):
        return None
    return checkpoint(root, tree=tree)


@dataclass
class Periodic:
    """The daemon's checkpoints: at most one every ``every_s`` seconds, and only after the tree
    grew (the daemon calls ``grew`` when an ingest added leaves, ``tick`` after each poll). The
    interval counts from the last checkpoint made; the first tick may sign at once (the tree may
    have grown before the daemon started). ``every_s`` 0 turns it off."""

    every_s: float = DEFAULT_EVERY_S
    clock: Callable[[], float] = time.monotonic
    last: float | None = field(default=None, init=False)
    pending: bool = field(default=True, init=False)

    def grew(self) -> None:
        self.pending = True

    def tick(self, root: str) -> StoredCheckpoint | None:
        if self.every_s <= 0 or not self.pending:
            return None
        now = self.clock()
        if self.last is not None and now - self.last < self.every_s:
            return None
        self.pending = False
        try:
            made = checkpoint_if_grown(root)
        except BaseException:
            self.last, self.pending = now, True  # tried again after the next interval
            raise
        if made is not None:
            self.last = now
        return made


def every_from_config(root: str) -> float:
    """Seconds between the daemon's checkpoints: the ``checkpoint_minutes`` setting (0: none)."""
    from agentlog.core.config import load as load_config

    return float(load_config(root).get("checkpoint_minutes", DEFAULT_EVERY_S / 60)) * 60


@dataclass(frozen=True)
class Made:
    """What ``agentlog checkpoint`` did: the checkpoint, whether it is new, and the ingest before it."""

    stored: StoredCheckpoint
    new: bool
    ingested_events: int
    ingest_note: str | None
    key: str


def make(root: str) -> Made:
    """Ingest what is pending (the tree grows), then sign the tree's head and keep it."""
    from agentlog.store.ingest import ingest

    report = ingest(root)
    note: str | None = None
    if report.busy:
        note = "another ingest is running: the checkpoint signs the tree as it was last committed"
    elif report.tree_error:
        note = f"the tree could not grow this time ({report.tree_error}); the checkpoint signs it as committed"
    before = latest(root)
    made = checkpoint(root)
    new = before is None or before.path != made.path
    return Made(made, new, report.events, note, signer(root).verifier_key_string())


def retired_keys(root: str) -> list[str]:
    """The verifier keys of the signer's retired keys, oldest first (they open older checkpoints)."""
    return [v.key_string() for v in keys.retired_verifiers(state_dir(root), origin(root))]


@dataclass(frozen=True)
class KeyRotation:
    """What ``rotate_key`` did: the new verifier key, the retired one, where its private key went."""

    key: str
    retired: str
    retired_key_file: str

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "retired": self.retired, "retired_key_file": self.retired_key_file}


def rotate_key(root: str) -> KeyRotation:
    """Replace the checkpoint signer by a new key; checkpoints signed before still open (the old
    verifier key is kept as retired, its private key moved to ``state/keys/retired/``)."""
    signer(root)  # a data root without a key gets one first, then rotates it like any other
    done = keys.rotate(state_dir(root), origin(root))
    return KeyRotation(done.signer.verifier_key_string(), done.retired.key_string(), done.retired_key_file)


def unsigned_body(note: str) -> Checkpoint:
    """A checkpoint's body without checking any signature (for showing one)."""
    return parse_body(parse_note(note).text)


__all__ = ["Checkpoint", "CheckpointFailed", "DEFAULT_EVERY_S", "KeyRotation", "Made", "Periodic", "StoredCheckpoint",
           "checkpoint", "checkpoint_if_grown", "checkpoints_dir", "cosigned_path", "every_from_config", "has_tree",
           "kept_paths", "latest", "make", "open_kept", "origin", "read_origin", "retired_keys", "rotate_key",
           "sign_checkpoint", "signer", "stored", "unsigned_body", "verifiers"]
