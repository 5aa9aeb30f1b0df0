"""Checkpoints (https://c2sp.org/tlog-checkpoint) and witness cosignatures (https://c2sp.org/tlog-cosignature).

A checkpoint is a signed note whose text is a log's tree head::

    <origin>
    <tree size, decimal, no leading zero>
    <base64 of the 32-byte RFC 6962 root hash>
    [extension lines, each non-empty]

each line ending in a newline. The log signs it with an ordinary note key
(:func:`sign_checkpoint`); a reader opens it with the log's verifier key(s)
(:func:`open_checkpoint`) and gets a :class:`Checkpoint` back.

A witness that has checked the checkpoint is consistent with what it saw
before adds a *cosignature* (:func:`cosign`): one more signature line, by an
Ed25519 key of signature type 0x04, whose bytes are an 8-byte big-endian POSIX
time followed by the Ed25519 signature of::

    cosignature/v1
    time <the same time, decimal>
    <the checkpoint text, extension lines included>

The key id is ``SHA-256(name || 0x0A || 0x04 || public key)[:4]``, so one
Ed25519 key yields different ids as a log key and as a witness key. The signed
message does not name the witness: one key must serve one witness name only.

:func:`cosign` is the signing primitive. It checks that the note's text is a
checkpoint but not the log's signature, nor consistency with earlier
checkpoints: a witness does those first.
"""

from __future__ import annotations

import re
import time as _time
from dataclasses import dataclass
from typing import ClassVar, Iterable

from agentlog.integrity.note import (
    KeyPair,
    NoteError,
    NoteVerifier,
    PublicKey,
    Signature,
    Signer,
    Verifier,
    b64decode,
    b64encode,
    check_text,
    ed25519_verify,
    format_note,
    open_note,
    parse_note,
    sign,
)

ALG_COSIGNATURE_V1 = 0x04
"""Signature type of a timestamped Ed25519 checkpoint cosignature."""

ROOT_SIZE = 32
MAX_SIZE = 2**64 - 1
MAX_TIME = 2**63 - 1
COSIGNATURE_HEADER = "cosignature/v1\n"

_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_CONTROL = re.compile(r"[\x00-\x1f]")


class CheckpointError(NoteError):
    """A checkpoint body or cosignature that cannot be used."""


@dataclass(frozen=True)
class Checkpoint:
    """A log's tree head: its origin, its size (leaves) and its RFC 6962 root hash."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.origin, str) or not self.origin or _CONTROL.search(self.origin):
            raise CheckpointError("checkpoint origin must be one non-empty line")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or not 0 <= self.size <= MAX_SIZE:
            raise CheckpointError("checkpoint size must be an integer from 0 to 2^64-1")
        if not isinstance(self.root, bytes) or len(self.root) != ROOT_SIZE:
            raise CheckpointError(f"checkpoint root must be {ROOT_SIZE} bytes")
        object.__setattr__(self, "extensions", tuple(self.extensions))
        for ext in self.extensions:
            if not isinstance(ext, str) or not ext or _CONTROL.search(ext):
                raise CheckpointError("checkpoint extension lines must be non-empty single lines")


def format_body(cp: Checkpoint) -> str:
    """The checkpoint's note text: origin, size, root, extension lines, each ending in a newline."""
    lines = [cp.origin, str(cp.size), b64encode(cp.root), *cp.extensions]
    return "".join(line + "\n" for line in lines)


def parse_body(text: str) -> Checkpoint:
    """The checkpoint in a note text, strictly: at least three non-empty lines, each ending in a
    newline; a decimal size without leading zeros that fits 64 bits; a canonical base64 root of
    32 bytes; extension lines non-empty."""
    try:
        check_text(text)
    except NoteError as e:
        raise CheckpointError(f"malformed checkpoint: {e}") from None
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointError("malformed checkpoint: fewer than three lines")
    origin, size, root, *extensions = lines
    if not _DECIMAL.fullmatch(size):
        raise CheckpointError("malformed checkpoint: the size is not a decimal without leading zeros")
    if int(size) > MAX_SIZE:
        raise CheckpointError("malformed checkpoint: the size does not fit in 64 bits")
    try:
        root_hash = b64decode(root, "checkpoint root")
    except NoteError as e:
        raise CheckpointError(f"malformed checkpoint: {e}") from None
    return Checkpoint(origin, int(size), root_hash, tuple(extensions))


def sign_checkpoint(cp: Checkpoint, signer: Signer) -> str:
    """The checkpoint as a note signed by the log's key (signature type 0x01)."""
    if not isinstance(signer, Signer):
        raise CheckpointError("a checkpoint is signed with a plain note signer (type 0x01)")
    return sign(format_body(cp), [signer])


def open_checkpoint(
    note: str | bytes, verifiers: Verifier | Iterable[NoteVerifier], *, origin: str | None = None
) -> Checkpoint:
    """The checkpoint in ``note``, once a signature by one of ``verifiers`` (the log's current and
    retired keys) verifies (:func:`~agentlog.integrity.note.open_note`'s rules). With ``origin``, the
    checkpoint must be that log's."""
    listed: list[NoteVerifier] = [verifiers] if isinstance(verifiers, Verifier) else list(verifiers)
    opened = open_note(note, listed)
    cp = parse_body(opened.text)
    if origin is not None and cp.origin != origin:
        raise CheckpointError(f"checkpoint is for {cp.origin!r}, not {origin!r}")
    return cp


def cosigned_message(body: str, time: int) -> bytes:
    """What a witness signs: the ``cosignature/v1`` header, ``time <t>``, then the checkpoint text."""
    return f"{COSIGNATURE_HEADER}time {time}\n{body}".encode("utf-8")


def _check_time(time: int) -> int:
    if isinstance(time, bool) or not isinstance(time, int) or not 0 <= time <= MAX_TIME:
        raise CheckpointError("a cosignature time is whole POSIX seconds from 0 to 2^63-1")
    return time


class CosignatureSigner(KeyPair):
    """A witness's Ed25519 key for timestamped cosignatures (signature type 0x04)."""

    alg: ClassVar[int] = ALG_COSIGNATURE_V1
    __slots__ = ()

    def cosign_body(self, body: str, time: int) -> bytes:
        """The line's bytes after the key id: the time (8 bytes, big-endian), then the signature."""
        parse_body(body)
        return _check_time(time).to_bytes(8, "big") + self._ed25519(cosigned_message(body, time))

    def verifier(self) -> CosignatureVerifier:
        return CosignatureVerifier(self.name, self.public_key)


@dataclass(frozen=True)
class CosignatureVerifier(PublicKey):
    """A witness's public key (signature type 0x04); usable with ``open_note`` like any verifier."""

    alg: ClassVar[int] = ALG_COSIGNATURE_V1
    key_error: ClassVar[type[NoteError]] = CheckpointError

    def verify(self, text: bytes, signature: bytes) -> bool:
        return self.timestamp(text, signature) is not None

    def timestamp(self, text: bytes, signature: bytes) -> int | None:
        """The cosignature's time if ``signature`` verifies over the checkpoint ``text``, else None."""
        if len(signature) != 8 + 64:
            return None
        time = int.from_bytes(signature[:8], "big")
        try:
            body = text.decode("utf-8")
            parse_body(body)
        except (UnicodeDecodeError, NoteError):
            return None
        if time > MAX_TIME:
            return None
        return time if ed25519_verify(self.public_key, cosigned_message(body, time), signature[8:]) else None


def cosign(note: str | bytes, witness: CosignatureSigner, time: int | None = None) -> str:
    """``note`` (a signed checkpoint) with the witness's cosignature line for ``time`` (POSIX
    seconds, now when None) appended, replacing an earlier line by the same key. The log's own
    signature is not checked here (see the module doc)."""
    if not isinstance(witness, CosignatureSigner):
        raise CheckpointError("a cosignature is made with a CosignatureSigner (type 0x04)")
    text, signatures = parse_note(note)
    when = int(_time.time()) if time is None else time
    line = Signature(witness.name, witness.key_id, witness.cosign_body(text, when))
    kept = [s for s in signatures if (s.name, s.key_id) != (witness.name, witness.key_id)]
    return format_note(text, [*kept, line])


@dataclass(frozen=True)
class Cosignature:
    """A verified cosignature: which witness, and the time it signed at."""

    name: str
    key_id: int
    time: int


def verify_cosignature(
    note: str | bytes, witness: CosignatureVerifier, *, not_after: int | None = None
) -> Cosignature:
    """The witness's verified cosignature on the checkpoint ``note``.

    Raises :class:`CheckpointError` when the note has no line by this witness,
    when one of its lines does not verify, or (with ``not_after``) when the time
    is later than ``not_after``. Only the witness's lines are checked: open the
    note with the log's key too (:func:`open_checkpoint`) before trusting it."""
    text, signatures = parse_note(note)
    parse_body(text)
    body = text.encode("utf-8")
    found: Cosignature | None = None
    for sig in signatures:
        if (sig.name, sig.key_id) != (witness.name, witness.key_id):
            continue
        when = witness.timestamp(body, sig.signature)
        if when is None:
            raise CheckpointError(f"invalid cosignature by {witness.name}+{witness.key_id:08x}")
        if not_after is not None and when > not_after:
            raise CheckpointError(f"cosignature by {witness.name} is dated after {not_after} (at {when})")
        if found is None or when > found.time:
            found = Cosignature(witness.name, witness.key_id, when)
    if found is None:
        raise CheckpointError(f"no cosignature by {witness.name}+{witness.key_id:08x}")
    return found


__all__ = [
    "ALG_COSIGNATURE_V1", "Checkpoint", "CheckpointError", "Cosignature", "CosignatureSigner",
    "CosignatureVerifier", "cosign", "cosigned_message", "format_body", "open_checkpoint", "parse_body",
    "sign_checkpoint", "verify_cosignature",
]
