"""A bundle's ``witnessed`` section (docs/proofs.md, "Bundles"): the newest checkpoint of the
data root that a registered witness cosigned, the witnesses' verifier keys, and the RFC 9162
consistency proof from its size to the bundle's checkpoint.

Checking it (:func:`check_witnessed`) ties the bundle's checkpoint to history a witness has
seen: the witnessed note must open with the bundle's (log) key, carry a valid C2SP
tlog-cosignature (type 0x04) by each listed witness — or, when the checker gives witness keys
it trusts, by at least one of those — and the bundle's checkpoint must extend it. Someone who
rewrote the logs and re-signed the tree with the data root's own key can make every inclusion
proof check out, but not this: the witnessed root is not a prefix of the forged tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Iterable

from agentlog.core import AgentlogError
from agentlog.integrity import merkle
from agentlog.integrity.bundle_fields import MAX_PROOF, BadKey, BundleError, fields, hashes, line, obj, text
from agentlog.integrity.checkpoint import Checkpoint, CheckpointError, CosignatureVerifier, open_checkpoint, \
    verify_cosignature
from agentlog.integrity.note import MAX_SIGNATURES, NoteError, Verifier, parse_note

WITNESSED_KEYS: Final = frozenset({"checkpoint", "witnesses", "consistency"})
NO_WITNESS: Final = "no witness: the bundle carries no witnessed checkpoint"


@dataclass(frozen=True)
class Witnessed:
    """A checked-for-shape ``witnessed`` section."""

    note: str
    witnesses: list[CosignatureVerifier]
    consistency: list[bytes]


def _witness_key(value: str, where: str) -> CosignatureVerifier:
    try:
        return CosignatureVerifier.from_key_string(value)
    except NoteError as e:
        raise BundleError(f"{where} is not a witness verifier key: {e}") from None


def parse_witnessed(raw: object) -> Witnessed:
    """The ``witnessed`` section, strictly: the cosigned note (a string), one to
    :data:`~agentlog.integrity.note.MAX_SIGNATURES` distinct witness verifier keys (type 0x04),
    and the consistency proof (at most 65 hashes)."""
    doc = obj(raw, "witnessed")
    fields(doc, WITNESSED_KEYS, "witnessed")
    note = text(doc["checkpoint"], "witnessed.checkpoint")
    listed = doc["witnesses"]
    if not isinstance(listed, list) or not 1 <= len(listed) <= MAX_SIGNATURES:
        raise BundleError(f"witnessed.witnesses is not a list of 1 to {MAX_SIGNATURES} witness keys")
    keys = [line(k, f"witnessed.witnesses[{i}]") for i, k in enumerate(listed)]
    if len(set(keys)) != len(keys):
        raise BundleError("witnessed.witnesses lists a key twice")
    return Witnessed(note, [_witness_key(k, f"witnessed.witnesses[{i}]") for i, k in enumerate(keys)],
                     hashes(doc["consistency"], "witnessed.consistency", MAX_PROOF + 1))


def given_witnesses(keys: Iterable[str] | None) -> list[CosignatureVerifier]:
    """The ``--witness`` keys a checker trusts, parsed, each once (:class:`BadKey` for one that is
    not a witness verifier key)."""
    out: list[CosignatureVerifier] = []
    for key in keys or ():
        try:
            v = CosignatureVerifier.from_key_string(key.strip())
        except NoteError as e:
            raise BadKey(f"--witness is not a witness verifier key (<name>+<key id>+<base64>, type 0x04): {e}") from None
        if v not in out:
            out.append(v)
    return out


@dataclass(frozen=True)
class WitnessCheck:
    """A witnessed section that checked out: the witnessed checkpoint's size and root, the
    witnesses whose cosignature counted (key string and cosignature time), whether their keys
    were given by the checker (else taken from the bundle), and the bundle checkpoint's size."""

    size: int
    root: str
    witnesses: list[tuple[str, int]]
    keys_given: bool
    extended_by: int

    def line(self) -> str:
        names = ", ".join(key.rsplit("+", 1)[0] for key, _t in self.witnesses)
        source = "witness keys given" if self.keys_given else "witness keys taken from the bundle"
        return f"witness: size {self.size} cosigned by {names} ({source}); size {self.extended_by} extends it"

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "root": self.root, "keys_given": self.keys_given,
                "witnesses": [{"key": key, "time": t} for key, t in self.witnesses]}


def _cosigned(note: str, w: CosignatureVerifier) -> tuple[str, int] | str:
    try:
        return w.key_string(), verify_cosignature(note, w).time
    except (CheckpointError, NoteError) as e:
        return f"witnessed checkpoint: {e}"


def check_witnessed(w: Witnessed, log_key: Verifier, origin: str, cp: Checkpoint,
                    given: list[CosignatureVerifier]) -> WitnessCheck | str:
    """The witnessed section checked against the bundle's key, origin and opened checkpoint
    ``cp``, with the witness keys ``given`` by the checker (none: the bundle's own); else why
    it fails, one line."""
    try:
        base = open_checkpoint(w.note, log_key, origin=origin)
    except AgentlogError as e:
        return f"witnessed checkpoint: {e}"
    counted: list[tuple[str, int]] = []
    for key in w.witnesses:  # every witness the bundle names must have cosigned
        got = _cosigned(w.note, key)
        if isinstance(got, str):
            return got
        counted.append(got)
    if given:
        lines = {(s.name, s.key_id) for s in parse_note(w.note).signatures}
        counted = []
        for key in given:
            if (key.name, key.key_id) not in lines:
                continue
            got = _cosigned(w.note, key)
            if isinstance(got, str):
                return got
            counted.append(got)
        if not counted:
            return "witnessed checkpoint: cosigned by none of the given witness keys"
    if base.size > cp.size:
        return f"the bundle's checkpoint (size {cp.size}) is smaller than the witnessed one (size {base.size}): " \
               "the log was rolled back after a witness saw it"
    if not merkle.verify_consistency(base.size, cp.size, base.root, cp.root, w.consistency):
        return f"the consistency proof from the witnessed size {base.size} to size {cp.size} does not verify: " \
               "the bundle's checkpoint does not extend what the witnesses saw"
    return WitnessCheck(base.size, base.root.hex(), counted, bool(given), cp.size)


def required(given: list[CosignatureVerifier], require: bool) -> str | None:
    """Why a bundle without a witnessed section fails, when the checker asked for a witness."""
    if given:
        return "no witnessed checkpoint in the bundle to check the given witness keys against"
    if require:
        return "no witnessed checkpoint in the bundle, and one is required (--require-witness)"
    return None


def witness_outcome(witnessed: Witnessed | None, log_key: Verifier, origin: str, cp: Checkpoint,
                    given: list[CosignatureVerifier], require: bool) -> tuple[WitnessCheck | None, str | None]:
    """(the witnessed section that checked out, or None; why the whole bundle fails, or None): a
    bundle's witnessed section checked against its checkpoint ``cp``, or its absence against
    what the checker asked for."""
    if witnessed is None:
        return None, required(given, require)
    checked = check_witnessed(witnessed, log_key, origin, cp, given)
    return (None, checked) if isinstance(checked, str) else (checked, None)


__all__ = ["NO_WITNESS", "WITNESSED_KEYS", "WitnessCheck", "Witnessed", "check_witnessed", "given_witnesses",
           "parse_witnessed", "required", "witness_outcome"]
