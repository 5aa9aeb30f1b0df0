"""The proof a shared file carries, and checking it (docs/share.md, "How a reader checks it").

A shared file shows sanitised text, which is not the bytes of the frames it came from, so the
frames' own hashes cannot prove it. Instead the file binds its shown content to the frames in two
signed steps:

1. each shown frame's hash is in the log's signed tree: an inclusion proof against a signed
   checkpoint (the proofs of ``agentlog prove``, without the frame's bytes, which hold what was
   redacted);
2. a *share statement*, signed by the same key, names the SHA-256 of the file's bytes outside the
   proof block and the SHA-256 of the list of frames shown (``<log> <seq> <frame hash>`` lines).

A reader checks the checkpoint's signature, each frame's inclusion, the statement's signature,
that the statement's frames are the entries', and that the file's bytes outside the block hash to
the statement's digest. One character changed anywhere outside the block fails the last check; a
change inside it fails the others. The statement's text starts ``agentlog-share/v1``, which no
checkpoint can (a checkpoint starts with its origin, ``agentlog.local/…``), so neither can pass for
the other.

The block is the last ``agentlog-share-proof`` in the file: a JSON object right after it, with
``<``, ``>`` and ``&`` written as ``\\u003c`` etc., so it cannot close the ``<script>`` (HTML) or
comment (Markdown) it sits in.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Final, Iterable, Sequence

from agentlog.integrity import merkle
from agentlog.integrity.bundle_fields import MAX_PROOF, BundleError
from agentlog.integrity.bundle_fields import count as _count
from agentlog.integrity.bundle_fields import fields as _fields
from agentlog.integrity.bundle_fields import given_key as _given_key
from agentlog.integrity.bundle_fields import hashes as _hashes
from agentlog.integrity.bundle_fields import hex64 as _hex64
from agentlog.integrity.bundle_fields import line as _line
from agentlog.integrity.bundle_fields import obj as _obj
from agentlog.integrity.bundle_fields import text as _text
from agentlog.integrity.bundle_fields import verifier as _verifier
from agentlog.integrity.bundle_witness import NO_WITNESS, WitnessCheck, given_witnesses, parse_witnessed, \
    witness_outcome
from agentlog.integrity.checkpoint import CheckpointError, open_checkpoint
from agentlog.integrity.note import NoteError, Signer, open_note, sign
from agentlog.integrity.tree import leaf_data

FORMAT: Final = "agentlog-share/v1"
MARK: Final = "agentlog-share-proof"
_KEYS: Final = frozenset({"format", "origin", "key", "checkpoint", "entries", "statement"})
_ENTRY_KEYS: Final = frozenset({"log", "seq", "frame_hash", "leaf_index", "inclusion"})
_MAX_ENTRIES: Final = 1_000_000


def frames_digest(frames: Iterable[tuple[str, int, str]]) -> str:
    """SHA-256 (hex) of the frames a file shows: one ``<log> <seq> <frame hash>`` line each."""
    h = hashlib.sha256()
    for log, seq, frame_hash in frames:
        h.update(f"{log} {seq} {frame_hash}\n".encode("utf-8"))
    return h.hexdigest()


def _json(doc: dict[str, Any]) -> str:
    text = json.dumps(doc, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def seal(before: str, after: str, bundle: dict[str, Any], shown: Sequence[tuple[str, int]], signer: Signer) -> str:
    """The file: ``before`` (ending in the block's opening, which names :data:`MARK`), the proof
    block, ``after``. ``bundle`` is the session's proof bundle (``agentlog prove``'s), signed by
    ``signer``'s key; only the ``shown`` frames' entries are kept, without their bytes."""
    if bundle.get("key") != signer.verifier_key_string():
        raise BundleError("the proof bundle's checkpoint is not signed by the signer's key")
    if MARK not in before[-200:]:
        raise ValueError("the text before the proof block must end in its opening")
    wanted = set(shown)
    entries = [{k: e[k] for k in ("log", "seq", "frame_hash", "leaf_index", "inclusion")}
               for e in bundle["entries"] if (e["log"], e["seq"]) in wanted]
    if len(entries) != len(wanted):
        raise BundleError("the proof bundle lacks frames the file shows")
    digest = hashlib.sha256((before + after).encode("utf-8")).hexdigest()
    fd = frames_digest((e["log"], e["seq"], e["frame_hash"]) for e in entries)
    statement = sign(f"{FORMAT}\n{bundle['origin']}\n{digest}\n{fd}\n", [signer])
    doc: dict[str, Any] = {"format": FORMAT, "origin": bundle["origin"], "key": bundle["key"],
                           "checkpoint": bundle["checkpoint"], "entries": entries, "statement": statement}
    if "witnessed" in bundle:
        doc["witnessed"] = bundle["witnessed"]
    return before + _json(doc) + after


def is_share(data: bytes) -> bool:
    """Whether ``data`` looks like a shared file (it names the proof block) rather than a bundle."""
    return not data.lstrip().startswith(b"{") and MARK.encode() in data


def extract(data: bytes) -> tuple[dict[str, Any], str]:
    """(the proof block, the SHA-256 of the bytes around it) of a shared file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError("the file is not UTF-8 text") from None
    at = text.rfind(MARK)
    start = text.find("{", at) if at >= 0 else -1
    if start < 0 or start - at > 200:
        raise BundleError(f"the file has no {MARK} block")
    try:
        doc, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as e:
        raise BundleError(f"the {MARK} block is not JSON: {e.msg}") from None
    return _obj(doc, "the proof block"), hashlib.sha256((text[:start] + text[end:]).encode("utf-8")).hexdigest()


@dataclass
class ShareReport:
    """What :func:`verify` found (the shape of ``verify-proof``'s reports)."""

    origin: str = ""
    key: str = ""
    key_given: bool = False
    size: int | None = None
    frames: int = 0
    error: str | None = None
    failed: list[str] = field(default_factory=list)
    witness: WitnessCheck | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed

    def lines(self) -> list[str]:
        if self.error is not None:
            return [f"FAILED: {self.error}"]
        out = [f"FAILED: {f}" for f in self.failed]
        out.append(self.witness.line() if self.witness is not None else NO_WITNESS)
        if self.failed:
            out.append(f"FAILED: the shared file does not verify against {self.origin} size {self.size}")
        else:
            out.append(f"verified: the shared file's content is unedited, signed with {self.key.split('+')[0]}, and "
                       f"its {self.frames} frames are in the tree of {self.origin} size {self.size}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "format": FORMAT, "origin": self.origin, "key": self.key, "key_given": self.key_given,
                "size": self.size, "frames": self.frames, "error": self.error, "failed": self.failed,
                "witness": self.witness.to_dict() if self.witness is not None else None}


def verify(data: bytes, *, key: str | None = None, witnesses: Iterable[str] | None = None,
           require_witness: bool = False) -> ShareReport:
    """Check a shared file (the module docstring says what); :class:`BundleError` when it has no
    well-formed proof block."""
    given = given_witnesses(witnesses)
    doc, digest = extract(data)
    if doc.get("format") != FORMAT:
        raise BundleError(f"not an {FORMAT} block (format {str(doc.get('format'))[:40]!r})")
    _fields(doc, _KEYS | ({"witnessed"} if "witnessed" in doc else set()), "the proof block")
    origin = _line(doc["origin"], "origin")
    bundled = _verifier(doc["key"], "key")
    note = _text(doc["checkpoint"], "checkpoint")
    statement = _text(doc["statement"], "statement")
    raw = doc["entries"]
    if not isinstance(raw, list) or not raw or len(raw) > _MAX_ENTRIES:
        raise BundleError("entries is not a non-empty list")
    entries = []
    for i, r in enumerate(raw):
        e = _obj(r, f"entries[{i}]")
        _fields(e, _ENTRY_KEYS, f"entries[{i}]")
        entries.append((_line(e["log"], f"entries[{i}].log"), _count(e["seq"], f"entries[{i}].seq"),
                        _hex64(e["frame_hash"], f"entries[{i}].frame_hash"),
                        _count(e["leaf_index"], f"entries[{i}].leaf_index", 2**64 - 1),
                        _hashes(e["inclusion"], f"entries[{i}].inclusion", MAX_PROOF)))
    witnessed = parse_witnessed(doc["witnessed"]) if "witnessed" in doc else None
    report = ShareReport(origin, bundled.key_string(), key is not None, frames=len(entries))
    mine = _given_key(key)
    if mine is not None and mine != bundled:
        report.error = f"the file's key {bundled.name}+{bundled.key_id:08x} is not the given key " \
                       f"{mine.name}+{mine.key_id:08x}"
        return report
    if bundled.name != origin:
        report.error = f"the key is named {bundled.name!r}, not the origin {origin!r}"
        return report
    try:
        cp = open_checkpoint(note, bundled, origin=origin)
    except (CheckpointError, NoteError) as e:
        report.error = f"checkpoint: {e}"
        return report
    report.size = cp.size
    report.witness, report.error = witness_outcome(witnessed, bundled, origin, cp, given, require_witness)
    if report.error is not None:
        return report
    for log, seq, frame_hash, leaf, proof in entries:
        if not merkle.verify_inclusion(merkle.leaf_hash(leaf_data(log, seq, frame_hash)), leaf, cp.size, proof, cp.root):
            report.failed.append(f"{log} seq {seq} (leaf {leaf}): the inclusion proof does not verify")
    try:
        opened = open_note(statement, [bundled])
    except NoteError as e:
        report.failed.append(f"the share statement's signature: {e}")
        return report
    lines = opened.text.split("\n")
    if len(lines) != 5 or lines[0] != FORMAT or lines[1] != origin:
        report.failed.append("the share statement is not an agentlog-share/v1 statement of this origin")
        return report
    if lines[3] != frames_digest((log, seq, h) for log, seq, h, _l, _p in entries):
        report.failed.append("the frames listed are not the frames the share statement signs")
    if lines[2] != digest:
        report.failed.append("the shown content was edited: its bytes do not hash to the signed digest")
    return report


__all__ = ["FORMAT", "MARK", "ShareReport", "extract", "frames_digest", "is_share", "seal", "verify"]
