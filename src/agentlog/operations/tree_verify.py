"""Trust beyond the chain (issue 28; docs/proofs.md): the Merkle tree against the logs, the
checkpoints against the tree, and the newest witnessed checkpoint against everything newer.

A hash chain proves a log unchanged only to someone who trusts its file: whoever
can write the data root can forge a whole chain and its head, cut a tail and fix
the head, swap or drop sessions. The tree holds every frame ingest checked, and
the signed checkpoints fix the tree's roots; ``verify_trust`` checks:

(a) the tree against the logs. Every tile hash above the leaves is the root of
    the tile below it, and the committed root (``tree-size``) is the root of the
    leaf hashes. Every leaf names a frame (log id, seq) in order, each log's
    frames from seq 0; reading each log once, front to back, frame *k* of a log
    the tree holds *n* frames of must be there, with seq *k*, and its leaf hash
    (from the frame's log id, seq and hash) must be the tree's. The frame's hash
    is checked against its bytes by the chain check of the same ``verify``.
(b) every kept checkpoint's signature (current and retired keys) and origin.
(c) every kept checkpoint is consistent with the current tree: an RFC 9162
    consistency proof from its size to the tree's verifies against both roots.
(d) the newest checkpoint cosigned by a registered witness is consistent with
    every checkpoint signed after it (none smaller, each extending it).

Each failure is a :class:`TrustBreak` naming the frame, log, tile or checkpoint.
Nothing is written.
"""

from __future__ import annotations

import os
import time
from array import array
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Final, Iterator

from agentlog.core import AgentlogError
from agentlog.core.paths import state_dir
from agentlog.integrity import keys, merkle
from agentlog.integrity.note import NoteVerifier, b64encode
from agentlog.integrity.tiles import TILE_BYTES, TILE_HEIGHT, TilesDamaged, level_path, tile_name
from agentlog.integrity.tree import RECORD, FrameTree, TreeDamaged, frame_leaf_hash
from agentlog.log import frame as log_frame
from agentlog.log.layout import log_path, sealed_segments
from agentlog.log.segments import SegmentError, read_from
from agentlog.operations.checkpoints import (
    CheckpointFailed,
    StoredCheckpoint,
    has_tree,
    kept_paths,
    open_kept,
    read_origin,
)
from agentlog.operations.witness import check_cosigned, read_cosigned

MAX_BREAKS: Final = 100
HASH: Final = merkle.HASH_SIZE


@dataclass(frozen=True)
class TrustBreak:
    """One thing that does not check out: ``kind`` is frame, log, tree, checkpoint or witness;
    ``where`` names it (``claude_code/ab12 frame 3``, ``000000000042-….note``, ``level/1 hash 3``)."""

    kind: str
    where: str
    reason: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class TrustReport:
    """What :func:`verify_trust` checked and what broke."""

    tree: bool = False
    tree_size: int = 0
    tree_root: str | None = None
    logs: int = 0
    frames_checked: int = 0
    checkpoints: int = 0
    newest: dict[str, Any] | None = None
    witnessed: dict[str, Any] | None = None
    breaks: list[TrustBreak] = field(default_factory=list)
    more_breaks: int = 0
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.breaks and not self.more_breaks

    def add(self, kind: str, where: str, reason: str, detail: str) -> None:
        if len(self.breaks) < MAX_BREAKS:
            self.breaks.append(TrustBreak(kind, where, reason, detail))
        else:
            self.more_breaks += 1

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def _short(h: bytes) -> str:
    return b64encode(h)


def verify_trust(root: str) -> TrustReport:
    """Check the tree, the checkpoints and the witnessed checkpoint (the module docstring)."""
    t0 = time.perf_counter()
    report = TrustReport()
    # the checkpoints first, then the tree: one signed meanwhile (the daemon) is not beyond it
    kept, log_keys = _open_checkpoints(root, report)
    tree = _open_tree(root, report)
    if tree is not None:
        leaves = _check_tiles(tree, report)
        if leaves is not None:
            _check_logs(root, tree, leaves, report)
    _check_checkpoints(tree, kept, report)
    if kept and log_keys:
        _check_witnessed(root, tree, kept, log_keys, report)
    if tree is None and not report.checkpoints:
        report.notes.append("no Merkle tree yet: `agentlog ingest` makes it, `agentlog checkpoint` signs it")
    elif not report.checkpoints:
        report.notes.append("no checkpoint yet: `agentlog checkpoint` signs the tree (the daemon does it every few minutes)")
    report.seconds = time.perf_counter() - t0
    return report


# -- (a) the tree against its tiles and the logs ------------------------------------------


def _open_tree(root: str, report: TrustReport) -> FrameTree | None:
    if not has_tree(root):
        return None
    try:
        tree = FrameTree(root)
    except (AgentlogError, OSError, ValueError, KeyError, TypeError) as e:
        report.add("tree", "state/tree", "unreadable", f"the tree's files cannot be read: {e}")
        return None
    report.tree, report.tree_size, report.tree_root = True, tree.size, tree.root_hash().hex()
    report.logs = sum(1 for c in tree.cursors.values() if c.seq >= 0)
    return tree


def _tile_root(hashes: bytes) -> bytes:
    return merkle.root_from_leaf_hashes([hashes[i : i + HASH] for i in range(0, len(hashes), HASH)])


def _check_tiles(tree: FrameTree, report: TrustReport) -> bytes | None:
    """The leaf hashes (level file 0) once every stored hash above them and the committed
    root agree with them; None (with the break) when a level file cannot be read."""
    size = tree.size
    try:
        parts = [tree.tiles.read_level(0, 0, size)] if size else []
    except (TilesDamaged, OSError) as e:
        report.add("tree", level_path(0), "tile_missing", f"{e}: the tree cannot be checked")
        return None
    leaves = b"".join(parts)
    # every node stored on tile level L+1 is the root of a full tile of level L
    levels: list[bytes] = [leaves]
    nodes = leaves
    level = 0
    while len(nodes) >= TILE_BYTES:
        above = [_tile_root(nodes[i : i + TILE_BYTES]) for i in range(0, len(nodes) - TILE_BYTES + 1, TILE_BYTES)]
        height = TILE_HEIGHT * (level + 1)
        for m, computed in enumerate(above):
            try:
                stored = tree.tiles.hash_at(height, m)
            except (TilesDamaged, OSError, IndexError) as e:
                report.add("tree", level_path(level + 1), "tile_missing", str(e))
                return None
            if stored != computed:
                report.add("tree", f"{level_path(level + 1)} hash {m}", "tile_hash",
                           f"{level_path(level + 1)} holds {_short(stored)} as hash {m}, but the "
                           f"{tile_name(level, m)} below it hashes to {_short(computed)}: the tree's hashes were changed")
        nodes = b"".join(above)
        levels.append(nodes)
        level += 1
    computed_root = merkle.root(size, _node_getter(levels))
    if computed_root != tree.root_hash():
        report.add("tree", "state/tree/tree-size", "root",
                   f"the committed root {_short(tree.root_hash())} is not the root of the tree's {size} leaf "
                   f"hashes ({_short(computed_root)}): the tree's tiles or its size record were changed")
    return leaves


def _node_getter(levels: list[bytes]) -> Callable[[int, int], bytes]:
    def get(level: int, index: int) -> bytes:
        tile_level, height = divmod(level, TILE_HEIGHT)
        nodes = levels[tile_level]
        first, count = index << height, 1 << height
        chunk = nodes[first * HASH : (first + count) * HASH]
        return chunk if count == 1 else _tile_root(chunk)

    return get


class _NotAFrame(AgentlogError):
    """A log line that is not a frame, at the logical offset in ``args[0]`` (never leaves here)."""


def _seq_and_hash(buf: bytes, start: int, end: int, offset: int) -> tuple[int, str]:
    """The seq and hash of the frame line ``buf[start:end]`` (a frame or a purged one), from
    its envelope only: the chain check of the same run checks the rest, and a wrong value here
    cannot match the tree's leaf anyway. Raises :class:`_NotAFrame` (at ``offset``)."""
    mark = end - log_frame.TRAILER
    at = start + log_frame.PREV_END + len(log_frame.SEQ_MARK)
    if (mark <= at or not buf.startswith(log_frame.PREFIX, start)
            or not buf.startswith(log_frame.SEQ_MARK, start + log_frame.PREV_END)
            or not buf.startswith(log_frame.HASH_MARK, mark) or not buf.startswith(log_frame.SUFFIX, end - 3)):
        raise _NotAFrame(offset)
    comma = buf.find(b",", at, at + 21)
    digits = buf[at:comma] if comma > at else b""
    if not digits.isdigit():
        raise _NotAFrame(offset)
    return int(digits), buf[mark + len(log_frame.HASH_MARK) : end - 3].decode("ascii", "replace")


def _frames(path: str) -> Iterator[tuple[int, str, int]]:
    """(seq, hash, end offset) of each complete line of a log (sealed segments, then the active
    file), front to back, each chunk read once and not copied; raises :class:`_NotAFrame` at a
    line that is not a frame."""
    carry = b""
    for offset, chunk in read_from(path, 0):
        start = 0
        if carry:
            nl = chunk.find(b"\n")
            if nl < 0:
                carry += chunk
                continue
            line = carry + chunk[: nl + 1]
            yield (*_seq_and_hash(line, 0, len(line), offset - len(carry)), offset + nl + 1)
            start, carry = nl + 1, b""
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            yield (*_seq_and_hash(chunk, start, nl + 1, offset + start), offset + nl + 1)
            start = nl + 1
        carry = chunk[start:]


def _check_logs(root: str, tree: FrameTree, leaves: bytes, report: TrustReport) -> None:
    """Each leaf names the next frame of its log; each log holds the tree's frames, each the leaf."""
    path = os.path.join(tree.directory, "leaves")
    try:
        with open(path, "rb") as fh:
            records = fh.read(tree.size * RECORD.size)
    except OSError as e:
        report.add("tree", "state/tree/leaves", "leaves_unreadable", f"{path}: {e.strerror}")
        return
    if len(records) != tree.size * RECORD.size:
        report.add("tree", "state/tree/leaves", "leaves_short",
                   f"{path} names {len(records) // RECORD.size} leaves; the tree has {tree.size}")
        return
    per_log = [array("Q") for _ in tree.logs]
    for index, (number, seq) in enumerate(RECORD.iter_unpack(records)):
        if number >= len(per_log):
            report.add("tree", f"leaf {index}", "leaf_log", f"leaf {index} names log number {number}; "
                       f"the tree knows {len(per_log)} logs")
            return
        if seq != len(per_log[number]):
            report.add("tree", f"leaf {index}", "leaf_order",
                       f"leaf {index} names {tree.logs[number]} frame {seq}, not its next frame {len(per_log[number])}")
            return
        per_log[number].append(index)
    for number, indices in enumerate(per_log):
        if indices:
            _check_log(root, tree, tree.logs[number], indices, leaves, report)


def _check_log(root: str, tree: FrameTree, log: str, indices: array[int], leaves: bytes,
               report: TrustReport) -> None:
    count = len(indices)
    cursor = tree.cursors.get(log)
    if cursor is None or cursor.seq != count - 1:
        report.add("tree", f"{log}", "cursor", f"the tree's cursor of {log} is at frame "
                   f"{cursor.seq if cursor else 'none'}, its leaves end at frame {count - 1}")
        return
    provider, key = log.split("/", 1)
    path = log_path(root, provider, key)
    seen = 0
    try:
        for seq, digest, end in _frames(path):
            k = seen
            if seq != k:
                report.add("frame", f"{log} frame {k}", "seq",
                           f"the log's frame {k} in order says seq {seq} ({path}): frames were removed, "
                           "added or reordered")
                return
            want = leaves[indices[k] * HASH : (indices[k] + 1) * HASH]
            if frame_leaf_hash(log, seq, digest) != want:
                report.add("frame", f"{log} frame {k}", "not_in_tree",
                           f"frame {k} of {path} (hash {digest[:16]}…) is not the tree's leaf {indices[k]}: "
                           "the frame was replaced after it was recorded")
                return
            seen += 1
            report.frames_checked += 1
            if seen == count:
                if end != cursor.offset:
                    report.add("log", f"{log} frame {k}", "offset",
                               f"frame {k} of {path} ends at byte {end}; the tree saw it end at {cursor.offset}")
                return
    except _NotAFrame as e:
        report.add("frame", f"{log} frame {seen}", "not_a_frame",
                   f"the line at byte {e.args[0]} of {path} is not a frame; the tree holds frames up to {count - 1}")
        return
    except (OSError, SegmentError) as e:
        report.add("log", log, "unreadable", f"{path}: {e}")
        return
    if seen == 0 and not os.path.exists(path) and not sealed_segments(path):
        report.add("log", log, "missing", f"{path} is gone; the tree holds its {count} frames "
                   f"(leaves {indices[0]}–{indices[-1]}): the session was deleted")
    else:
        report.add("log", f"{log} frame {seen}", "truncated",
                   f"{path} ends after {seen} frames; the tree holds {count} (up to frame {count - 1}): "
                   "the log was cut short")


# -- (b), (c) the checkpoints ----------------------------------------------------------------


def _open_checkpoints(root: str, report: TrustReport) -> tuple[list[StoredCheckpoint], list[NoteVerifier]]:
    paths = kept_paths(root)
    report.checkpoints = len(paths)
    if not paths:
        return [], []
    try:
        origin = read_origin(root)
        if origin is None:
            report.add("checkpoint", "state/tree/origin", "origin_missing",
                       f"{len(paths)} checkpoints are kept but the data root's origin file is gone")
            return [], []
        log_keys: list[NoteVerifier] = list(keys.verifiers(state_dir(root), origin))
    except AgentlogError as e:
        report.add("checkpoint", "state/keys", "key", f"the checkpoints cannot be checked: {e}")
        return [], []
    kept = []
    for path in paths:
        try:
            kept.append(open_kept(path, log_keys, origin))
        except CheckpointFailed as e:
            report.add("checkpoint", os.path.basename(path), "signature", f"{e}")
    newest = max(kept, key=lambda k: (k.checkpoint.size, k.made_at_us), default=None)
    if newest is not None:
        report.newest = {"checkpoint": newest.name, "size": newest.checkpoint.size,
                         "root": newest.checkpoint.root.hex(), "made_at_us": newest.made_at_us}
    return kept, log_keys


def _consistent(tree: FrameTree | None, old_size: int, old_root: bytes, new_size: int, new_root: bytes) -> bool:
    proof = tree.tiles.consistency_proof(old_size, new_size) if tree is not None and old_size else []
    return merkle.verify_consistency(old_size, new_size, old_root, new_root, proof)


def _check_checkpoints(tree: FrameTree | None, kept: list[StoredCheckpoint], report: TrustReport) -> None:
    size = tree.size if tree is not None else 0
    now = tree.root_hash() if tree is not None else merkle.EMPTY_ROOT
    for k in kept:
        cp = k.checkpoint
        if cp.size > size:
            report.add("checkpoint", k.name, "beyond_tree",
                       f"{k.name} signs {cp.size} frames; the tree holds {size}: it was truncated or replaced")
            continue
        try:
            if _consistent(tree, cp.size, cp.root, size, now):
                continue
            at = tree.root_hash(cp.size) if tree is not None else merkle.EMPTY_ROOT
        except (TilesDamaged, TreeDamaged, OSError, IndexError, ValueError) as e:
            report.add("tree", "state/tree/tile", "tile_unreadable", f"no proof for {k.name}: {e}")
            continue
        report.add("checkpoint", k.name, "inconsistent",
                   f"{k.name} signs root {_short(cp.root)} at size {cp.size}; the tree's root at that size is "
                   f"{_short(at)}: the history it signed was rewritten")


# -- (d) the newest witnessed checkpoint -----------------------------------------------------


def _check_witnessed(root: str, tree: FrameTree | None, kept: list[StoredCheckpoint],
                     log_keys: list[NoteVerifier], report: TrustReport) -> None:
    cosigned = [(k, note) for k in kept if (note := read_cosigned(k)) is not None]
    try:
        registered = keys.witnesses(state_dir(root))
    except AgentlogError as e:
        report.add("witness", "state/keys/witnesses", "registry", str(e))
        return
    if not registered:
        if cosigned:
            report.notes.append(f"{len(cosigned)} checkpoints are cosigned, but no witness is registered "
                                "(`agentlog witness add`)")
        return
    witnessed: list[tuple[StoredCheckpoint, list[str]]] = []
    for k, note in cosigned:
        try:
            names = check_cosigned(k, note, log_keys, registered)
        except CheckpointFailed as e:
            report.add("witness", os.path.basename(k.cosigned_path), "cosignature", str(e))
            continue
        if names:
            witnessed.append((k, names))
    if not witnessed:
        report.notes.append("no checkpoint is cosigned by a registered witness (`agentlog checkpoint --cosign`)")
        return
    w, names = max(witnessed, key=lambda item: (item[0].checkpoint.size, item[0].made_at_us))
    base = w.checkpoint
    report.witnessed = {"checkpoint": w.name, "size": base.size, "root": base.root.hex(), "witnesses": names}
    by = ", ".join(names)
    for k in kept:
        cp = k.checkpoint
        if k is w or not (k.made_at_us > w.made_at_us or cp.size > base.size):
            continue
        if cp.size < base.size:
            report.add("witness", k.name, "rollback",
                       f"{k.name} ({cp.size} frames) was signed after {w.name}, which {by} witnessed at "
                       f"{base.size} frames: the log was rolled back after a witness saw it")
            continue
        if tree is None or cp.size > tree.size:
            continue  # reported above: beyond the tree
        try:
            if _consistent(tree, base.size, base.root, cp.size, cp.root):
                continue
        except (TilesDamaged, TreeDamaged, OSError, IndexError, ValueError):
            continue  # reported above
        report.add("witness", k.name, "fork",
                   f"{k.name} does not extend {w.name}, which {by} witnessed: the history was forked "
                   "after a witness saw it")


__all__ = ["MAX_BREAKS", "TrustBreak", "TrustReport", "verify_trust"]
