"""Proof bundles (docs/proofs.md): some frames, each with its inclusion proof, and the signed
checkpoint they are proven against; and consistency bundles, that one tree extends another.

Building (:func:`build_entries`) reads each frame's line from its log (by the offset the store
kept when it still holds that frame, else by reading the log from the start) and its proof from
the tree's tiles; a purged frame is given without content, with its purge's id and time.

Checking (:func:`verify_bundle`, :func:`verify_consistency_bundle`) needs nothing of the data
root: the key, the signed note and the proofs are all in the bundle (or the key is given), and
so is the witnessed checkpoint the bundle's must extend, when there is one (``bundle_witness.py``).
A bundle is untrusted input: every field is checked for its type and shape first
(``bundle_fields.py``), and anything malformed is a :class:`BundleError` with the place and the
reason, never another exception.
What checks out and what does not is a report (:class:`BundleReport`,
:class:`ConsistencyReport`), one line per entry. ``standalone_verifier.py`` does the same with
the standard library and PyNaCl only; a test holds the two to the same answers.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Final, Iterable, Mapping

from agentlog.core import AgentlogError
from agentlog.integrity import merkle
from agentlog.integrity.bundle_fields import MAX_PROOF, MAX_SEQ, BadKey, BundleError, load_document
from agentlog.integrity.bundle_fields import count as _count
from agentlog.integrity.bundle_fields import fields as _keys
from agentlog.integrity.bundle_fields import given_key as _given_key
from agentlog.integrity.bundle_fields import hashes as _hashes
from agentlog.integrity.bundle_fields import hex64 as _hex
from agentlog.integrity.bundle_fields import line as _line
from agentlog.integrity.bundle_fields import obj as _object
from agentlog.integrity.bundle_fields import text as _text
from agentlog.integrity.bundle_fields import verifier as _verifier
from agentlog.integrity.bundle_witness import NO_WITNESS, WitnessCheck, given_witnesses, parse_witnessed, \
    witness_outcome
from agentlog.integrity.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from agentlog.integrity.note import NoteError, Verifier
from agentlog.integrity.tree import FrameTree, leaf_data
from agentlog.log import frame as log_frame

FORMAT: Final = "agentlog-proof/v1"
CONSISTENCY_FORMAT: Final = "agentlog-consistency/v1"

_ENTRY_KEYS: Final = frozenset({"log", "seq", "frame_hash", "leaf_index", "inclusion", "frame", "purged"})
_BUNDLE_KEYS: Final = frozenset({"format", "origin", "key", "checkpoint", "entries"})
_SIDE_KEYS: Final = frozenset({"size", "root", "checkpoint"})
_CONSISTENCY_KEYS: Final = frozenset({"format", "origin", "key", "old", "new", "proof"})
_TRAILER: Final = len(log_frame.HASH_MARK) + 64 + 2  # ,"hash":"<64 hex>"}
_FRAME_HEAD: Final = re.compile(rb'\{"v":1,"prev":"[0-9a-f]{64}","seq":(0|[1-9][0-9]{0,18}),"event":')


class ProofUnavailable(AgentlogError):
    """A proof cannot be made (a frame not in the tree, a log that changed since; the message says why)."""


@dataclass(frozen=True)
class Entry:
    """One checked-for-shape entry of a bundle."""

    log: str
    seq: int
    frame_hash: str
    leaf_index: int
    inclusion: list[bytes]
    frame: str | None
    purged: dict[str, Any] | None


def _entry(raw: object, i: int) -> Entry:
    where = f"entries[{i}]"
    doc = _object(raw, where)
    _keys(doc, _ENTRY_KEYS, where)
    log = _line(doc["log"], f"{where}.log")
    if "/" not in log:
        raise BundleError(f"{where}.log is not a log id (provider/key)")
    frame, purged = doc["frame"], doc["purged"]
    if (frame is None) == (purged is None):
        raise BundleError(f"{where} must have a frame or purged, one of the two")
    if frame is not None:
        _text(frame, f"{where}.frame")
    if purged is not None:
        p = _object(purged, f"{where}.purged")
        _keys(p, frozenset({"purge_id", "at"}), f"{where}.purged")
        _line(p["purge_id"], f"{where}.purged.purge_id")
        if p["at"] is not None:
            _line(p["at"], f"{where}.purged.at")
    return Entry(log, _count(doc["seq"], f"{where}.seq"), _hex(doc["frame_hash"], f"{where}.frame_hash"),
                 _count(doc["leaf_index"], f"{where}.leaf_index", 2**64 - 1),
                 _hashes(doc["inclusion"], f"{where}.inclusion", MAX_PROOF), frame, purged)


def _signed(note: str, key: Verifier, origin: str) -> Checkpoint | str:
    """The checkpoint in ``note`` once its signature by ``key`` verifies and it is ``origin``'s;
    else why not."""
    try:
        return open_checkpoint(note, key, origin=origin)
    except CheckpointError as e:
        return f"checkpoint: {e}"
    except NoteError as e:
        return f"checkpoint: {e}"


# -- checking an inclusion bundle -----------------------------------------------------------


@dataclass(frozen=True)
class EntryCheck:
    """What checking one entry found: ``ok`` (frame and hash proven), ``purged`` (content purged,
    hash proven) or ``failed`` (``reason`` says why)."""

    log: str
    seq: int
    leaf_index: int
    status: str
    reason: str
    purged: dict[str, Any] | None = None

    def line(self) -> str:
        tag = {"ok": "ok    ", "purged": "purged", "failed": "FAILED"}[self.status]
        return f"{tag} {self.log} seq {self.seq} (leaf {self.leaf_index}): {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"log": self.log, "seq": self.seq, "leaf_index": self.leaf_index, "status": self.status,
                "reason": self.reason, "purged": self.purged}


@dataclass
class BundleReport:
    """What :func:`verify_bundle` found. ``error`` is a failure of the whole bundle (its key, its
    checkpoint or its witnessed checkpoint); then no entry was checked. ``witness`` is the
    witnessed section that checked out, None when the bundle has none."""

    origin: str
    key: str
    key_given: bool
    size: int | None = None
    root: str | None = None
    error: str | None = None
    entries: list[EntryCheck] = field(default_factory=list)
    witness: WitnessCheck | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(e.status != "failed" for e in self.entries)

    def lines(self) -> list[str]:
        if self.error is not None:
            return [f"FAILED: {self.error}"]
        out = [e.line() for e in self.entries]
        out.append(self.witness.line() if self.witness is not None else NO_WITNESS)
        failed = sum(e.status == "failed" for e in self.entries)
        purged = sum(e.status == "purged" for e in self.entries)
        if failed:
            out.append(f"FAILED: {failed} of {_entries(len(self.entries))} did not verify against "
                       f"{self.origin} size {self.size}")
        else:
            out.append(f"verified: {_entries(len(self.entries))} against {self.origin} size {self.size} "
                       f"({len(self.entries) - purged} with content, {purged} purged)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "format": FORMAT, "origin": self.origin, "key": self.key,
                "key_given": self.key_given, "size": self.size, "root": self.root, "error": self.error,
                "witness": self.witness.to_dict() if self.witness is not None else None,
                "entries": [e.to_dict() for e in self.entries]}


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def frame_check(line: str, seq: int, frame_hash: str) -> str | None:
    """Why the frame line ``line`` (without its newline) is not frame ``seq`` with hash
    ``frame_hash``; None when it is."""
    data = line.encode("utf-8")
    head = _FRAME_HEAD.match(data)
    if head is None or len(data) < head.end() + _TRAILER:
        return "the frame is not a frame line"
    mark = len(data) - _TRAILER
    if data[mark:] != log_frame.HASH_MARK + frame_hash.encode("ascii") + b'"}':
        return "the frame does not end in its frame_hash"
    if hashlib.sha256(data[:mark]).hexdigest() != frame_hash:
        return "the frame's bytes do not hash to frame_hash"
    if int(head.group(1)) != seq:
        return f"the frame is seq {int(head.group(1))}, not {seq}"
    return None


def _check_entry(e: Entry, cp: Checkpoint) -> EntryCheck:
    def failed(reason: str) -> EntryCheck:
        return EntryCheck(e.log, e.seq, e.leaf_index, "failed", reason, e.purged)

    if e.frame is not None:
        why = frame_check(e.frame, e.seq, e.frame_hash)
        if why is not None:
            return failed(why)
    leaf = merkle.leaf_hash(leaf_data(e.log, e.seq, e.frame_hash))
    if not merkle.verify_inclusion(leaf, e.leaf_index, cp.size, e.inclusion, cp.root):
        return failed(f"the inclusion proof does not verify at leaf {e.leaf_index} of the checkpoint's tree")
    if e.purged is not None:
        at = e.purged["at"] or "an unknown time"
        return EntryCheck(e.log, e.seq, e.leaf_index, "purged",
                          f"content purged ({e.purged['purge_id']} at {at}), hash proven", e.purged)
    return EntryCheck(e.log, e.seq, e.leaf_index, "ok", "frame and hash proven")


def _header(doc: Mapping[str, Any], key: str | None) -> tuple[str, Verifier, BundleReport]:
    origin = _line(doc["origin"], "origin")
    bundled = _verifier(doc["key"], "key")
    given = _given_key(key)
    report = BundleReport(origin, bundled.key_string(), given is not None)
    if given is not None and given != bundled:
        report.key = given.key_string()
        report.error = f"the bundle's key {bundled.name}+{bundled.key_id:08x} is not the given key " \
                       f"{given.name}+{given.key_id:08x}"
    elif bundled.name != origin:
        report.error = f"the key is named {bundled.name!r}, not the origin {origin!r}"
    return origin, bundled, report


def verify_bundle(bundle: object, *, key: str | None = None, witnesses: Iterable[str] | None = None,
                  require_witness: bool = False) -> BundleReport:
    """Check an inclusion bundle (docs/proofs.md, "Checking a bundle") with its own key, or with
    ``key`` (a C2SP verifier key string), which the bundle's must then be; and its witnessed
    checkpoint, if it has one, with the bundle's witness keys or, given ``witnesses`` (witness
    verifier keys the checker trusts), with those: then one must have cosigned it, and a bundle
    without a witnessed checkpoint fails, as it does with ``require_witness``. Raises
    :class:`BundleError` for a malformed bundle and :class:`BadKey` for a malformed key."""
    given = given_witnesses(witnesses)
    doc = _object(bundle, "the bundle")
    if doc.get("format") != FORMAT:
        raise BundleError(f"not an {FORMAT} bundle (format {str(doc.get('format'))[:40]!r})")
    _keys(doc, _BUNDLE_KEYS | ({"witnessed"} if "witnessed" in doc else set()), "the bundle")
    note = _text(doc["checkpoint"], "checkpoint")
    raw = doc["entries"]
    if not isinstance(raw, list) or not raw:
        raise BundleError("entries is not a non-empty list")
    entries = [_entry(r, i) for i, r in enumerate(raw)]
    witnessed = parse_witnessed(doc["witnessed"]) if "witnessed" in doc else None
    origin, verifier, report = _header(doc, key)
    if report.error is not None:
        return report
    cp = _signed(note, verifier, origin)
    if isinstance(cp, str):
        report.error = cp
        return report
    report.size, report.root = cp.size, cp.root.hex()
    report.witness, report.error = witness_outcome(witnessed, verifier, origin, cp, given, require_witness)
    if report.error is not None:
        return report
    report.entries = [_check_entry(e, cp) for e in entries]
    return report


# -- consistency bundles --------------------------------------------------------------------


@dataclass
class ConsistencyReport:
    """What :func:`verify_consistency_bundle` found: whether the new tree extends the old one,
    and which of the two heads came with a checkpoint signed by the key."""

    origin: str
    key: str
    key_given: bool
    old_size: int
    new_size: int
    old_root: str
    new_root: str
    old_signed: bool = False
    new_signed: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def lines(self) -> list[str]:
        if self.error is not None:
            return [f"FAILED: {self.error}"]
        def signed(yes: bool) -> str:
            return "signed" if yes else "unsigned"
        return [f"verified: {self.origin} size {self.new_size} ({signed(self.new_signed)}) extends size "
                f"{self.old_size} ({signed(self.old_signed)})"]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "format": CONSISTENCY_FORMAT, "origin": self.origin, "key": self.key,
                "key_given": self.key_given, "old_size": self.old_size, "new_size": self.new_size,
                "old_root": self.old_root, "new_root": self.new_root, "old_signed": self.old_signed,
                "new_signed": self.new_signed, "error": self.error}


def _side(raw: object, where: str) -> tuple[int, bytes, str | None]:
    doc = _object(raw, where)
    _keys(doc, _SIDE_KEYS, where)
    note = doc["checkpoint"]
    if note is not None:
        _text(note, f"{where}.checkpoint")
    return _count(doc["size"], f"{where}.size", 2**64 - 1), bytes.fromhex(_hex(doc["root"], f"{where}.root")), note


def verify_consistency_bundle(bundle: object, *, key: str | None = None, witnesses: Iterable[str] | None = None,
                              require_witness: bool = False) -> ConsistencyReport:
    """Check a consistency bundle: each checkpoint given opens with the key and says the size and
    root beside it, and the proof shows the new tree extends the old (RFC 9162 §2.1.4.2). It has
    no witnessed checkpoint: with ``witnesses`` or ``require_witness`` it fails."""
    given = given_witnesses(witnesses)
    doc = _object(bundle, "the bundle")
    if doc.get("format") != CONSISTENCY_FORMAT:
        raise BundleError(f"not an {CONSISTENCY_FORMAT} bundle (format {str(doc.get('format'))[:40]!r})")
    _keys(doc, _CONSISTENCY_KEYS, "the bundle")
    old_size, old_root, old_note = _side(doc["old"], "old")
    new_size, new_root, new_note = _side(doc["new"], "new")
    proof = _hashes(doc["proof"], "proof", MAX_PROOF + 1)
    origin, verifier, head = _header(doc, key)
    report = ConsistencyReport(origin, head.key, head.key_given, old_size, new_size, old_root.hex(), new_root.hex(),
                               error=head.error)
    if report.error is None and (given or require_witness):
        report.error = "a consistency bundle carries no witnessed checkpoint (--witness, --require-witness)"
    if report.error is not None:
        return report
    for name, note, size, root in (("old", old_note, old_size, old_root), ("new", new_note, new_size, new_root)):
        if note is None:
            continue
        cp = _signed(note, verifier, origin)
        if isinstance(cp, str):
            report.error = f"{name} {cp}"
            return report
        if (cp.size, cp.root) != (size, root):
            report.error = f"the {name} checkpoint says size {cp.size}, root {cp.root.hex()[:16]}…, not the {name} head"
            return report
        setattr(report, f"{name}_signed", True)
    if not merkle.verify_consistency(old_size, new_size, old_root, new_root, proof):
        report.error = f"the consistency proof does not show that size {new_size} extends size {old_size}"
    return report


def verify_document(doc: object, *, key: str | None = None, witnesses: Iterable[str] | None = None,
                    require_witness: bool = False) -> BundleReport | ConsistencyReport:
    """Check a bundle of either format (by its ``format``)."""
    if isinstance(doc, dict) and doc.get("format") == CONSISTENCY_FORMAT:
        return verify_consistency_bundle(doc, key=key, witnesses=witnesses, require_witness=require_witness)
    return verify_bundle(doc, key=key, witnesses=witnesses, require_witness=require_witness)


# -- building -------------------------------------------------------------------------------


def entry(tree: FrameTree, size: int, log: str, seq: int, leaf_index: int, line: bytes,
          purge_times: Mapping[str, str | None]) -> dict[str, Any]:
    """A bundle entry for frame ``seq`` of ``log`` (its line with the newline, as read from the log),
    leaf ``leaf_index``, proven against the tree of ``size`` leaves."""
    import orjson

    try:
        if log_frame.is_purged(line[:128]):
            got, _prev, digest = log_frame.parse_purged(line)
            j = line.find(log_frame.PURGED_MARK, log_frame.PREV_END)
            stub = orjson.loads(line[j + len(log_frame.PURGED_MARK): len(line) - log_frame.TRAILER].rstrip(b" "))
            pid = str(stub.get("purge_id") or "") if isinstance(stub, dict) else ""
            frame, purged = None, {"purge_id": pid, "at": purge_times.get(pid)}
        else:
            got, _prev, digest = log_frame.parse_envelope(line, hashlib.sha256)
            frame, purged = line[:-1].decode("utf-8"), None
    except (log_frame.FrameError, orjson.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProofUnavailable(f"frame {seq} of {log} no longer checks out ({e}): the log changed after the "
                               "frame entered the tree; run `agentlog verify`") from None
    if got != seq:
        raise ProofUnavailable(f"the line read for frame {seq} of {log} is frame {got}")
    return {"log": log, "seq": seq, "frame_hash": digest, "leaf_index": leaf_index,
            "inclusion": [h.hex() for h in tree.tiles.inclusion_proof(leaf_index, size)],
            "frame": frame, "purged": purged}


def read_lines(root: str, wanted: Mapping[str, Mapping[int, int | None]]) -> dict[tuple[str, int], bytes]:
    """The line (with its newline) of each wanted frame, ``{log: {seq: offset or None}}``: read at
    the offset when one is given and the line there is that frame, else found by reading the log
    from its start (once per log). A frame not found is left out."""
    from agentlog.log.layout import log_path
    from agentlog.log.segments import SegmentError, line_at, lines_from

    out: dict[tuple[str, int], bytes] = {}
    for log, seqs in wanted.items():
        provider, _, key = log.partition("/")
        path = log_path(root, provider, key)
        rest = set(seqs)
        try:
            for seq, offset in seqs.items():
                if offset is None:
                    continue
                line = line_at(path, offset)
                if line.endswith(b"\n") and _seq_of(line) == seq:
                    out[(log, seq)] = line
                    rest.discard(seq)
            if rest:
                for _off, line in lines_from(path, 0):
                    found = _seq_of(line)
                    if found is not None and found in rest:
                        out[(log, found)] = line
                        rest.discard(found)
                        if not rest:
                            break
        except (OSError, SegmentError) as e:
            raise ProofUnavailable(f"cannot read the log {log}: {e}") from None
    return out


def _seq_of(line: bytes) -> int | None:
    try:
        return log_frame.parse_seq(line) if line.startswith(log_frame.PREFIX) else None
    except ValueError:
        return None


def purge_times(root: str) -> dict[str, str | None]:
    """``purge_id`` → when that purge was recorded (RFC 3339, UTC), from the purge records."""
    import orjson

    from agentlog.core.timefmt import format_us
    from agentlog.log.purge_record import purge_log_path
    from agentlog.log.segments import SegmentError, lines_from

    out: dict[str, str | None] = {}
    try:
        for _off, line in lines_from(purge_log_path(root), 0):
            try:
                ev = orjson.loads(log_frame.event_bytes(line)) if not log_frame.is_purged(line[:128]) else None
            except orjson.JSONDecodeError:
                continue
            attrs = ev.get("attrs") if isinstance(ev, dict) else None
            if isinstance(attrs, dict) and isinstance(attrs.get("purge_id"), str):
                at = ev.get("observed_at") if isinstance(ev, dict) else None
                out[attrs["purge_id"]] = format_us(at) if isinstance(at, int) else None
    except (OSError, SegmentError, ValueError):
        pass
    return out


def purged_frames(root: str) -> list[tuple[str, int, str]]:
    """(log, seq, event id) of every purged frame whose stub still names its event, in the logs the
    purge records name (a purged event is no longer in the store: this is how it is found)."""
    import orjson

    from agentlog.log.layout import log_path
    from agentlog.log.purge_record import recorded_frames
    from agentlog.log.segments import SegmentError, lines_from

    out: list[tuple[str, int, str]] = []
    for log in sorted({name for name, _seq, _h in recorded_frames(root)}):
        provider, _, key = log.partition("/")
        try:
            for _off, line in lines_from(log_path(root, provider, key), 0):
                if not log_frame.is_purged(line[:128]):
                    continue
                j = line.find(log_frame.PURGED_MARK, log_frame.PREV_END)
                try:
                    stub = orjson.loads(line[j + len(log_frame.PURGED_MARK): len(line) - log_frame.TRAILER].rstrip(b" "))
                except orjson.JSONDecodeError:
                    continue
                seq = _seq_of(line)
                if isinstance(stub, dict) and isinstance(stub.get("event_id"), str) and seq is not None:
                    out.append((log, seq, stub["event_id"]))
        except (OSError, SegmentError):
            continue
    return out


def build_entries(root: str, tree: FrameTree, size: int,
                  frames: Mapping[tuple[str, int], int | None],
                  leaves: Mapping[tuple[str, int], int] | None = None) -> list[dict[str, Any]]:
    """The bundle entries of ``frames`` ((log, seq) → the frame's offset when known), in leaf
    order, proven against the first ``size`` leaves of ``tree`` (``leaves``: their leaf indexes,
    when the caller has looked them up). :class:`ProofUnavailable` when one is not among those
    leaves or cannot be read."""
    leaves = leaf_indexes(tree, frames) if leaves is None else leaves
    missing = [f"{log} seq {seq}" for log, seq in frames if leaves.get((log, seq), size) >= size]
    if missing:
        raise ProofUnavailable(f"not in the tree of {size} frames yet: {', '.join(missing[:3])}"
                               + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
                               + " (run `agentlog ingest`, or check `agentlog status` for breaks)")
    wanted: dict[str, dict[int, int | None]] = {}
    for (log, seq), offset in frames.items():
        wanted.setdefault(log, {})[seq] = offset
    lines = read_lines(root, wanted)
    unread = [f"{log} seq {seq}" for log, seq in frames if (log, seq) not in lines]
    if unread:
        raise ProofUnavailable(f"the log no longer holds {', '.join(unread[:3])}: run `agentlog verify`")
    times = purge_times(root) if any(log_frame.is_purged(line[:128]) for line in lines.values()) else {}
    return [entry(tree, size, log, seq, leaves[(log, seq)], lines[(log, seq)], times)
            for log, seq in sorted(frames, key=lambda k: leaves[k])]


def leaf_indexes(tree: FrameTree, wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The leaf of each wanted (log, seq) the committed tree holds (one read of the leaf index)."""
    want = set(wanted)
    if len(want) == 1:
        (log, seq), = want
        at = tree.leaf_index(log, seq)
        return {} if at is None else {(log, seq): at}
    out: dict[tuple[str, int], int] = {}
    for i, log, seq in tree.leaves():
        if (log, seq) in want:
            out[(log, seq)] = i
            if len(out) == len(want):
                break
    return out


__all__ = [
    "BadKey", "BundleError", "BundleReport", "CONSISTENCY_FORMAT", "ConsistencyReport", "Entry", "EntryCheck", "FORMAT",
    "MAX_PROOF", "MAX_SEQ", "ProofUnavailable", "WitnessCheck", "build_entries", "entry", "frame_check", "leaf_indexes",
    "load_document", "purge_times",
    "purged_frames", "read_lines", "verify_bundle",
    "verify_consistency_bundle", "verify_document",
]
