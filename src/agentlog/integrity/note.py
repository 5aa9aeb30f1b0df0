"""Signed notes (https://c2sp.org/signed-note): text, a blank line, signature lines.

A signed note is a text that ends in a newline, then one empty line, then one
or more signature lines::

    <text, each line ending in \\n>
    (empty line)
    — <key name> <base64(4-byte key id || signature)>

The text is everything up to and including the newline before the *last*
empty line; it may itself hold empty lines. The whole note is UTF-8 with no
control characters but the newline. A key is named by its key name and key
id together; the id is the first four bytes (big-endian) of
``SHA-256(name || 0x0A || signature type || public key)``.

This module knows signature type 0x01, plain Ed25519 over the text
(:class:`Signer`, :class:`Verifier`). Other types plug in through the
:class:`NoteSigner` / :class:`NoteVerifier` protocols: the timestamped
witness cosignature (type 0x04) lives in :mod:`agentlog.integrity.checkpoint`.

Keys travel as text. A verifier key is ``<name>+<8 hex key id>+<base64(type ||
public key)>``; a signer key is ``PRIVATE+KEY+<name>+<8 hex key id>+<base64(type
|| 32-byte seed)>`` and is a secret. :class:`Signer` never shows its seed in
``repr`` or in an error; only :meth:`KeyPair.private_key_string` spells it out,
for the key store to write.

Parsing is strict and every failure is a :class:`NoteError`: a text without its
final newline, bytes that are not UTF-8, control characters, a key name with a
space or a plus, base64 that is not in its one canonical form, a key id that is
not eight lowercase hex digits, more than :data:`MAX_SIGNATURES` signature
lines. Opening a note (:func:`open_note`) ignores lines from keys it was not
given (as the spec requires), verifies every line from a key it was given, and
rejects the whole note when one of those fails or when none was found.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from typing import ClassVar, Iterable, NamedTuple, NoReturn, Protocol, TypeVar

from nacl.exceptions import BadSignatureError, CryptoError
from nacl.signing import SigningKey, VerifyKey

from agentlog.core import AgentlogError

ALG_ED25519 = 0x01
"""Signature type of a plain Ed25519 note signature."""

MAX_SIGNATURES = 100
"""The most signature lines a note may carry (the spec asks verifiers to accept at least 16)."""

EM_DASH = "\u2014"
SIG_PREFIX = EM_DASH + " "
SEED_SIZE = 32
PUBLIC_KEY_SIZE = 32
ED25519_SIGNATURE_SIZE = 64

_HEX_ID = re.compile(r"[0-9a-f]{8}")
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")


class NoteError(AgentlogError, ValueError):
    """A note, key string or signature that cannot be used: malformed, or failing verification."""


class InvalidSignatureError(NoteError):
    """A signature line from a known key did not verify: the whole note is rejected."""

    def __init__(self, name: str, key_id: int) -> None:
        super().__init__(f"invalid signature for key {name}+{key_id:08x}")
        self.name = name
        self.key_id = key_id


class UnverifiedNoteError(NoteError):
    """No signature line came from a key the caller trusts; ``unverified`` holds the lines found."""

    def __init__(self, unverified: tuple[Signature, ...]) -> None:
        super().__init__("note has no verifiable signatures")
        self.unverified = unverified


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str, what: str) -> bytes:
    """Standard base64 in its canonical form only (padding, no stray bits), else :class:`NoteError`.

    A decoder that accepted other spellings would let two different notes carry the same signature."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise NoteError(f"{what} is not valid base64") from None
    if b64encode(raw) != text:
        raise NoteError(f"{what} is not canonical base64")
    return raw


def is_valid_name(name: str) -> bool:
    """A key name: non-empty UTF-8, no Unicode space, no plus, no control character."""
    if not name or "+" in name or any(c.isspace() for c in name) or _CONTROL.search(name):
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_name(name: str) -> str:
    if not isinstance(name, str) or not is_valid_name(name):
        raise NoteError(f"invalid key name {name!r}: it must be non-empty, without spaces or '+'")
    return name


def key_id(name: str, alg: int, public_key: bytes) -> int:
    """The 32-bit key id: the first four bytes of SHA-256(name || 0x0A || alg || public key)."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([alg]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


class VerifierKey(NamedTuple):
    """A parsed verifier key string (its key id checked against the name and key)."""

    name: str
    key_id: int
    alg: int
    public_key: bytes


def parse_verifier_key(text: str, alg: int) -> VerifierKey:
    """Parse ``<name>+<hex id>+<base64(alg || key)>`` for signature type ``alg`` (Ed25519 keys only)."""
    parts = text.split("+", 2) if isinstance(text, str) else []
    if len(parts) != 3:
        raise NoteError("malformed verifier key: want <name>+<key id>+<key>")
    name, kid, public = _parse_key_parts(parts[0], parts[1], parts[2], alg, "verifier key")
    if key_id(name, alg, public) != kid:
        raise NoteError(f"verifier key: key id {kid:08x} does not match the name and key")
    return VerifierKey(name, kid, alg, public)


def parse_signer_key(text: str, alg: int) -> tuple[str, bytes]:
    """Parse ``PRIVATE+KEY+<name>+<hex id>+<base64(alg || seed)>``: (name, seed). The key id must
    be the one of the seed's public key. Errors never quote the string (it is a secret)."""
    parts = text.split("+", 4) if isinstance(text, str) else []
    if len(parts) != 5 or parts[0] != "PRIVATE" or parts[1] != "KEY":
        raise NoteError("malformed signer key: want PRIVATE+KEY+<name>+<key id>+<key>")
    name, kid, seed = _parse_key_parts(parts[2], parts[3], parts[4], alg, "signer key")
    if key_id(name, alg, bytes(SigningKey(seed).verify_key)) != kid:
        raise NoteError("signer key: key id does not match the key")
    return name, seed


def _parse_key_parts(name: str, hex_id: str, encoded: str, alg: int, what: str) -> tuple[str, int, bytes]:
    """(name, key id, 32 bytes of key material) of a key string's three last parts."""
    if not is_valid_name(name):
        raise NoteError(f"{what}: invalid key name")
    if not _HEX_ID.fullmatch(hex_id):
        raise NoteError(f"{what}: key id must be 8 lowercase hex digits")
    raw = b64decode(encoded, f"{what} material")
    if not raw or raw[0] != alg:
        found = f"0x{raw[0]:02x}" if raw else "none"
        raise NoteError(f"{what}: signature type {found}, want 0x{alg:02x}")
    material = raw[1:]
    if len(material) != 32:
        raise NoteError(f"{what}: key is {len(material)} bytes, want 32")
    return name, int(hex_id, 16), material


class NoteSigner(Protocol):
    """Anything that signs a note's text under a (name, key id)."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def sign(self, text: bytes) -> bytes:
        """The signature bytes that follow the key id in the line."""
        ...


class NoteVerifier(Protocol):
    """Anything that checks one signature line's bytes (after the key id) over a note's text."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> int: ...

    def verify(self, text: bytes, signature: bytes) -> bool: ...


K = TypeVar("K", bound="KeyPair")


class KeyPair:
    """An Ed25519 key under a name, for one signature type (``alg``): the part every signer shares.

    The seed stays inside: ``repr`` shows the name and key id only."""

    alg: ClassVar[int] = ALG_ED25519
    __slots__ = ("_name", "_key_id", "_signing")

    def __init__(self, name: str, seed: bytes) -> None:
        check_name(name)
        if not isinstance(seed, bytes) or len(seed) != SEED_SIZE:
            raise NoteError(f"an Ed25519 seed is {SEED_SIZE} bytes")
        self._name = name
        self._signing = SigningKey(seed)
        self._key_id = key_id(name, self.alg, self.public_key)

    @classmethod
    def generate(cls: type[K], name: str) -> K:
        """A new random key (from the operating system's CSPRNG, through libsodium)."""
        return cls(name, bytes(SigningKey.generate()))

    @classmethod
    def from_private_key_string(cls: type[K], text: str) -> K:
        return cls(*parse_signer_key(text, cls.alg))

    @property
    def name(self) -> str:
        return self._name

    @property
    def key_id(self) -> int:
        return self._key_id

    @property
    def public_key(self) -> bytes:
        return bytes(self._signing.verify_key)

    def verifier_key_string(self) -> str:
        """``<name>+<hex id>+<base64(alg || public key)>``: safe to publish."""
        return f"{self._name}+{self._key_id:08x}+{b64encode(bytes([self.alg]) + self.public_key)}"

    def private_key_string(self) -> str:
        """``PRIVATE+KEY+…``: the secret itself, for the key store to write. Never log it."""
        seed = bytes(self._signing)
        return f"PRIVATE+KEY+{self._name}+{self._key_id:08x}+{b64encode(bytes([self.alg]) + seed)}"

    def _ed25519(self, message: bytes) -> bytes:
        return bytes(self._signing.sign(message).signature)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, key_id={self._key_id:08x})"

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"{type(self).__name__} holds a private key and is not pickled")


class Signer(KeyPair):
    """A plain Ed25519 note signer (signature type 0x01)."""

    __slots__ = ()

    def sign(self, text: bytes) -> bytes:
        return self._ed25519(text)

    def verifier(self) -> Verifier:
        return Verifier(self.name, self.public_key)


_Key = TypeVar("_Key", bound="PublicKey")


@dataclass(frozen=True)
class PublicKey:
    """A named Ed25519 public key of one signature type (``alg``): its key id, its verifier key
    string, and the parsing of one. :class:`Verifier` and the checkpoint module's
    ``CosignatureVerifier`` differ only in ``alg``, their error and how they verify."""

    alg: ClassVar[int] = ALG_ED25519
    key_error: ClassVar[type[NoteError]] = NoteError
    name: str
    public_key: bytes
    key_id: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        check_name(self.name)
        if len(self.public_key) != PUBLIC_KEY_SIZE:
            raise self.key_error(f"an Ed25519 public key is {PUBLIC_KEY_SIZE} bytes")
        object.__setattr__(self, "key_id", key_id(self.name, self.alg, self.public_key))

    @classmethod
    def from_key_string(cls: type[_Key], text: str) -> _Key:
        """From ``<name>+<hex id>+<base64(alg || public key)>``."""
        key = parse_verifier_key(text, cls.alg)
        return cls(key.name, key.public_key)

    def key_string(self) -> str:
        return f"{self.name}+{self.key_id:08x}+{b64encode(bytes([self.alg]) + self.public_key)}"


@dataclass(frozen=True)
class Verifier(PublicKey):
    """A plain Ed25519 note verifier (signature type 0x01)."""

    def verify(self, text: bytes, signature: bytes) -> bool:
        return ed25519_verify(self.public_key, text, signature)


def ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    if len(signature) != ED25519_SIGNATURE_SIZE:
        return False
    try:
        VerifyKey(public_key).verify(message, signature)
    except (BadSignatureError, CryptoError, ValueError, TypeError):
        return False
    return True


@dataclass(frozen=True)
class Signature:
    """One signature line: the key's name and id, and the bytes after the id."""

    name: str
    key_id: int
    signature: bytes

    @property
    def line(self) -> str:
        blob = self.key_id.to_bytes(4, "big") + self.signature
        return f"{SIG_PREFIX}{self.name} {b64encode(blob)}\n"


class ParsedNote(NamedTuple):
    """A note split into its text and its signature lines, nothing verified."""

    text: str
    signatures: tuple[Signature, ...]


class OpenedNote(NamedTuple):
    """What :func:`open_note` found: the text, the lines it verified, and the lines of unknown keys."""

    text: str
    verified: tuple[Signature, ...]
    unverified: tuple[Signature, ...]


def check_text(text: str) -> str:
    """A note text: ends in a newline, no control character but the newline."""
    if not isinstance(text, str) or not text.endswith("\n"):
        raise NoteError("malformed note: the text must end with a newline")
    if _CONTROL.search(text):
        raise NoteError("malformed note: control character in the text")
    _utf8(text)
    return text


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise NoteError("malformed note: not valid UTF-8") from None


def _decode(note: str | bytes) -> str:
    if isinstance(note, (bytes, bytearray, memoryview)):
        try:
            return bytes(note).decode("utf-8")
        except UnicodeDecodeError:
            raise NoteError("malformed note: not valid UTF-8") from None
    if not isinstance(note, str):
        raise NoteError(f"a note is text or bytes, not {type(note).__name__}")
    _utf8(note)
    return note


def parse_note(note: str | bytes) -> ParsedNote:
    """Split ``note`` into its text and signature lines, strictly, without verifying anything."""
    msg = _decode(note)
    if _CONTROL.search(msg):
        raise NoteError("malformed note: control character")
    split = msg.rfind("\n\n")
    if split < 0:
        raise NoteError("malformed note: no blank line before the signatures")
    text, block = msg[: split + 1], msg[split + 2 :]
    if not block or not block.endswith("\n"):
        raise NoteError("malformed note: the signature lines must end with a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"malformed note: more than {MAX_SIGNATURES} signatures")
    return ParsedNote(text, tuple(_parse_line(line) for line in lines))


def _parse_line(line: str) -> Signature:
    if not line.startswith(SIG_PREFIX):
        raise NoteError("malformed note: a signature line must start with '\u2014 '")
    name, sep, encoded = line[len(SIG_PREFIX) :].partition(" ")
    if not sep or not is_valid_name(name):
        raise NoteError("malformed note: bad key name in a signature line")
    blob = b64decode(encoded, "signature")
    if len(blob) < 5:
        raise NoteError("malformed note: signature too short")
    return Signature(name, int.from_bytes(blob[:4], "big"), blob[4:])


def format_note(text: str, signatures: Iterable[Signature]) -> str:
    """``text``, the blank line, and the signature lines (at least one, at most :data:`MAX_SIGNATURES`)."""
    check_text(text)
    sigs = list(signatures)
    if not sigs:
        raise NoteError("a signed note needs at least one signature")
    if len(sigs) > MAX_SIGNATURES:
        raise NoteError(f"a note carries at most {MAX_SIGNATURES} signatures")
    for sig in sigs:
        check_name(sig.name)
    return text + "\n" + "".join(sig.line for sig in sigs)


def sign(text: str, signers: Iterable[NoteSigner]) -> str:
    """Sign ``text`` (which must end in a newline) with each signer; one line per distinct key."""
    check_text(text)
    body = _utf8(text)
    seen: set[tuple[str, int]] = set()
    sigs: list[Signature] = []
    for signer in signers:
        name, kid = check_name(signer.name), signer.key_id
        if getattr(signer, "alg", ALG_ED25519) != ALG_ED25519:
            raise NoteError(f"{name}+{kid:08x} is not a plain note signer (use its own signing function)")
        if (name, kid) in seen:
            continue
        seen.add((name, kid))
        sigs.append(Signature(name, kid, signer.sign(body)))
    return format_note(text, sigs)


def open_note(note: str | bytes, verifiers: Iterable[NoteVerifier]) -> OpenedNote:
    """Parse ``note`` and check its signatures against ``verifiers``.

    Lines whose (name, key id) match no verifier are returned as unverified and
    otherwise ignored. Every line that matches one is verified: one failure
    rejects the note (:class:`InvalidSignatureError`), and so does finding no
    verified line at all (:class:`UnverifiedNoteError`). Repeated lines are
    reported once. Two different verifiers under one (name, key id) are an error
    if a line names them."""
    text, signatures = parse_note(note)
    known: dict[tuple[str, int], list[NoteVerifier]] = {}
    for v in verifiers:
        same = known.setdefault((v.name, v.key_id), [])
        if v not in same:
            same.append(v)
    body = text.encode("utf-8")
    verified: list[Signature] = []
    unverified: list[Signature] = []
    for sig in signatures:
        candidates = known.get((sig.name, sig.key_id))
        if not candidates:
            if sig not in unverified:
                unverified.append(sig)
            continue
        if len(candidates) > 1:
            raise NoteError(f"ambiguous key {sig.name}+{sig.key_id:08x}: more than one verifier has it")
        if not candidates[0].verify(body, sig.signature):
            raise InvalidSignatureError(sig.name, sig.key_id)
        if sig not in verified:
            verified.append(sig)
    if not verified:
        raise UnverifiedNoteError(tuple(unverified))
    return OpenedNote(text, tuple(verified), tuple(unverified))


__all__ = [
    "ALG_ED25519", "MAX_SIGNATURES", "InvalidSignatureError", "KeyPair", "NoteError", "NoteSigner",
    "NoteVerifier", "OpenedNote", "ParsedNote", "Signature", "Signer", "UnverifiedNoteError", "Verifier",
    "VerifierKey", "check_text", "format_note", "key_id", "open_note", "parse_note", "parse_signer_key",
    "parse_verifier_key", "sign",
]
