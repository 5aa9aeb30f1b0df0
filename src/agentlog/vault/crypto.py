"""The vault's keys and sealed formats (PyNaCl and BLAKE3 only; nothing hand-rolled).

- A *machine key* is an Ed25519 seed (32 bytes); it signs the machine's requests.
- An *admin key* is a 32-byte seed: Ed25519 from the seed itself, X25519 from
  ``blake3(seed, derive_key_context=ADMIN_X25519_CONTEXT)``, so one seed backs up
  both halves and neither half's secret equals the other's. Its public form is
  64 bytes ``x25519_pub || ed25519_pub``; its fingerprint the BLAKE3 hex of those.
- A *recipient set* lists the admins every chain key is wrapped to; a signed set
  is accepted only from an admin already pinned, and never older than the pinned.
- A *chain key* (32 random bytes) is wrapped to each admin with an X25519 sealed
  box; batches are zstd-compressed, then sealed with XChaCha20-Poly1305 under the
  chain key, with associated data binding machine, chain, host and seq range.

Requests are signed over ``METHOD\\nPATH\\nWHO\\nTIMESTAMP\\nBODYHASH`` (docs/vault.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Self

import blake3
import nacl.bindings
import nacl.exceptions
import nacl.public
import nacl.signing
import nacl.utils

from agentlog.vault import BodyHashError, ClockSkewError, VaultAuthError, VaultCryptoError, VaultProtocolError
from agentlog.vault.protocol import b64d, b64e

__all__ = [
    "ADMIN_X25519_CONTEXT", "MAX_SKEW", "HEADER_MACHINE", "HEADER_ADMIN", "HEADER_TIMESTAMP", "HEADER_BODY",
    "HEADER_SIGNATURE", "MachineKey", "AdminKey", "RecipientSet", "SignedRecipientSet", "admin_fingerprint",
    "body_hash", "signed_bytes", "recipients_message", "request_headers", "verify_request", "wrap_chain_key",
    "new_chain_key", "batch_aad", "seal_batch", "open_batch",
]

ADMIN_X25519_CONTEXT = "agentlog-vault 2026 admin x25519"
MAX_SKEW = 300
SEED_LEN = 32
ADMIN_PUBLIC_LEN = 64
CHAIN_KEY_LEN = 32
NONCE_LEN = 24
ZSTD_LEVEL = 1  # 1.7x level 3's speed on session frames for 8% more bytes (5.4 against 5.9 times smaller; docs/vault.md)
HEADER_MACHINE = "X-Agentlog-Machine"
HEADER_ADMIN = "X-Agentlog-Admin"
HEADER_TIMESTAMP = "X-Agentlog-Timestamp"
HEADER_BODY = "X-Agentlog-Body"
HEADER_SIGNATURE = "X-Agentlog-Signature"


def _seed(seed: bytes) -> bytes:
    if not isinstance(seed, bytes) or len(seed) != SEED_LEN:
        raise VaultCryptoError(f"a key seed is {SEED_LEN} bytes")
    return seed


class _SeedKey:
    """An Ed25519 signing key kept as its 32-byte seed."""

    def __init__(self, seed: bytes) -> None:
        self.seed = _seed(seed)
        self._signing = nacl.signing.SigningKey(self.seed)

    @classmethod
    def generate(cls) -> Self:
        return cls(nacl.utils.random(SEED_LEN))

    @classmethod
    def from_seed(cls, seed: bytes) -> Self:
        return cls(seed)

    def sign(self, data: bytes) -> bytes:
        return bytes(self._signing.sign(data).signature)


class MachineKey(_SeedKey):
    """A machine's Ed25519 signing key."""

    def __init__(self, seed: bytes) -> None:
        super().__init__(seed)
        self.public: bytes = bytes(self._signing.verify_key)

    def __repr__(self) -> str:  # never the seed
        return f"MachineKey(public={self.public.hex()[:16]}…)"


class AdminKey(_SeedKey):
    """An admin's key pair: Ed25519 to sign, X25519 (derived) to open chain-key wraps."""

    def __init__(self, seed: bytes) -> None:
        super().__init__(seed)
        x_secret = blake3.blake3(self.seed, derive_key_context=ADMIN_X25519_CONTEXT).digest()
        self._box = nacl.public.PrivateKey(x_secret)
        self.public: bytes = bytes(self._box.public_key) + bytes(self._signing.verify_key)
        self.fingerprint: str = admin_fingerprint(self.public)

    def unwrap(self, wrap_b64: str) -> bytes:
        """The chain key inside a wrap made for this admin (VaultCryptoError otherwise)."""
        try:
            key = nacl.public.SealedBox(self._box).decrypt(b64d(wrap_b64))
        except (nacl.exceptions.CryptoError, VaultProtocolError) as e:
            raise VaultCryptoError("a chain-key wrap does not open with this admin key") from e
        if len(key) != CHAIN_KEY_LEN:
            raise VaultCryptoError("a chain-key wrap holds a key of the wrong length")
        return bytes(key)

    def __repr__(self) -> str:  # never the seed
        return f"AdminKey(fingerprint={self.fingerprint[:16]}…)"


def admin_fingerprint(public64: bytes) -> str:
    """BLAKE3 hex of an admin's 64-byte public form."""
    if len(public64) != ADMIN_PUBLIC_LEN:
        raise VaultCryptoError(f"an admin public key is {ADMIN_PUBLIC_LEN} bytes")
    return blake3.blake3(public64).hexdigest()


@dataclass(frozen=True)
class RecipientSet:
    """The admins every chain key is wrapped to, and the set's version."""

    admins: tuple[bytes, ...]
    version: int

    def __post_init__(self) -> None:
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise VaultProtocolError("a recipient set's version is an integer >= 0")
        if not self.admins:
            raise VaultProtocolError("a recipient set names at least one admin")
        for a in self.admins:
            if not isinstance(a, bytes) or len(a) != ADMIN_PUBLIC_LEN:
                raise VaultProtocolError(f"an admin public key is {ADMIN_PUBLIC_LEN} bytes")
        if len(set(self.admins)) != len(self.admins):
            raise VaultProtocolError("a recipient set names an admin twice")

    def fingerprint(self) -> str:
        """BLAKE3 hex over the admins' keys sorted bytewise (the version is not included)."""
        return blake3.blake3(b"".join(sorted(self.admins))).hexdigest()

    def fingerprints(self) -> dict[str, bytes]:
        """Each admin's fingerprint -> its 64-byte public key."""
        return {admin_fingerprint(a): a for a in self.admins}

    def to_json(self) -> dict[str, Any]:
        return {"admins": [b64e(a) for a in self.admins], "version": self.version}

    @classmethod
    def from_json(cls, d: Any) -> RecipientSet:
        if not isinstance(d, dict) or not isinstance(d.get("admins"), list):
            raise VaultProtocolError("a recipient set is {\"admins\": [...], \"version\": n}")
        admins = []
        for a in d["admins"]:
            if not isinstance(a, str):
                raise VaultProtocolError("an admin key is base64 text")
            admins.append(b64d(a))
        return cls(tuple(admins), d.get("version"))  # type: ignore[arg-type]  # checked in __post_init__


def recipients_message(version: int, set_fingerprint: str) -> bytes:
    """The bytes a recipient set's signature covers."""
    return f"agentlog-vault recipients\n{version}\n{set_fingerprint}".encode("ascii")


@dataclass(frozen=True)
class SignedRecipientSet:
    """A recipient set with an Ed25519 signature by one of the admins of the set it replaces."""

    set: RecipientSet
    signed_by: str
    signature: bytes

    @classmethod
    def sign(cls, s: RecipientSet, key: AdminKey) -> SignedRecipientSet:
        return cls(s, key.fingerprint, key.sign(recipients_message(s.version, s.fingerprint())))

    def to_json(self) -> dict[str, Any]:
        return {"set": self.set.to_json(), "signed_by": self.signed_by, "signature": b64e(self.signature)}

    @classmethod
    def from_json(cls, d: Any) -> SignedRecipientSet:
        if not isinstance(d, dict) or not isinstance(d.get("signed_by"), str) or not isinstance(d.get("signature"), str):
            raise VaultProtocolError("a signed recipient set is {\"set\", \"signed_by\", \"signature\"}")
        return cls(RecipientSet.from_json(d.get("set")), d["signed_by"], b64d(d["signature"]))

    def check(self, pinned: RecipientSet) -> None:
        """Accept this set in place of ``pinned`` only if an admin of ``pinned`` signed
        it and it is not older; VaultCryptoError otherwise."""
        signer = pinned.fingerprints().get(self.signed_by)
        if signer is None:
            raise VaultCryptoError(f"the recipient set is signed by {self.signed_by[:16]}…, not by a pinned admin")
        try:
            nacl.signing.VerifyKey(signer[32:]).verify(
                recipients_message(self.set.version, self.set.fingerprint()), self.signature)
        except (nacl.exceptions.BadSignatureError, ValueError) as e:
            raise VaultCryptoError("the recipient set's signature does not verify") from e
        if self.set.version < pinned.version:
            raise VaultCryptoError(
                f"the recipient set is version {self.set.version}, older than the pinned {pinned.version}")


def body_hash(body: bytes) -> str:
    """BLAKE3 hex of a request body as sent (the empty body too)."""
    return blake3.blake3(body).hexdigest()


def signed_bytes(method: str, path: str, who: str, timestamp: int, body_hash: str) -> bytes:
    """``METHOD\\nPATH\\nWHO\\nTIMESTAMP\\nBODYHASH``: what a request signature covers."""
    for part in (method, path, who, body_hash):
        if "\n" in part:
            raise VaultProtocolError("a signed request field holds a newline")
    return f"{method.upper()}\n{path}\n{who}\n{int(timestamp)}\n{body_hash}".encode("utf-8")


def request_headers(key: MachineKey | AdminKey, who: str, method: str, path: str, body: bytes,
                    now: int, *, admin: bool) -> dict[str, str]:
    """The headers that sign a request (``path`` exactly as sent, percent-encoding included)."""
    digest = body_hash(body)
    signature = key.sign(signed_bytes(method, path, who, now, digest))
    return {
        HEADER_ADMIN if admin else HEADER_MACHINE: who,
        HEADER_TIMESTAMP: str(int(now)),
        HEADER_BODY: digest,
        HEADER_SIGNATURE: b64e(signature),
        "Content-Type": "application/json",
    }


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None:
        lower = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lower), None)
    if value is None:
        raise VaultAuthError(f"missing header {name}")
    return value


def verify_request(public_ed25519: bytes, method: str, path: str, who: str, headers: Mapping[str, str],
                   body: bytes, now: int, max_skew: int = MAX_SKEW) -> None:
    """Check a signed request: timestamp within ``max_skew`` (ClockSkewError), the
    signature by ``public_ed25519`` (VaultAuthError), then the body against its signed
    hash (BodyHashError)."""
    raw_ts = _header(headers, HEADER_TIMESTAMP)
    if not raw_ts.isascii() or not raw_ts.isdigit() or len(raw_ts) > 15:
        raise VaultAuthError("bad timestamp header")
    timestamp = int(raw_ts)
    if abs(timestamp - now) > max_skew:
        raise ClockSkewError("clock skew", now)
    digest = _header(headers, HEADER_BODY)
    try:
        signature = b64d(_header(headers, HEADER_SIGNATURE))
        nacl.signing.VerifyKey(public_ed25519).verify(signed_bytes(method, path, who, timestamp, digest), signature)
    except (nacl.exceptions.BadSignatureError, ValueError) as e:
        raise VaultAuthError("bad signature") from e
    if body_hash(body) != digest:
        raise BodyHashError("the body does not match its signed hash")


def new_chain_key() -> bytes:
    return bytes(nacl.utils.random(CHAIN_KEY_LEN))


def wrap_chain_key(chain_key: bytes, admin_public64: bytes) -> str:
    """The chain key sealed to one admin's X25519 key (base64)."""
    if len(chain_key) != CHAIN_KEY_LEN:
        raise VaultCryptoError(f"a chain key is {CHAIN_KEY_LEN} bytes")
    if len(admin_public64) != ADMIN_PUBLIC_LEN:
        raise VaultCryptoError(f"an admin public key is {ADMIN_PUBLIC_LEN} bytes")
    box = nacl.public.SealedBox(nacl.public.PublicKey(admin_public64[:32]))
    return b64e(bytes(box.encrypt(chain_key)))


def batch_aad(machine_id: str, chain: str, host: str, first_seq: int, last_seq: int) -> bytes:
    """``<machine_id>\\n<chain>\\n<host>\\n<first_seq>\\n<last_seq>``: binds a batch to its place."""
    for part in (machine_id, chain, host):
        if "\n" in part:
            raise VaultProtocolError("an associated-data field holds a newline")
    return f"{machine_id}\n{chain}\n{host}\n{int(first_seq)}\n{int(last_seq)}".encode("utf-8")


def seal_batch(chain_key: bytes, frames: bytes, aad: bytes) -> tuple[bytes, bytes]:
    """zstd (level 3), then XChaCha20-Poly1305 with a fresh random nonce: (nonce, ciphertext)."""
    import zstandard

    if len(chain_key) != CHAIN_KEY_LEN:
        raise VaultCryptoError(f"a chain key is {CHAIN_KEY_LEN} bytes")
    nonce = bytes(nacl.utils.random(NONCE_LEN))
    packed = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(frames)
    ciphertext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(packed, aad, nonce, chain_key)
    return nonce, bytes(ciphertext)


def open_batch(chain_key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
    """The frame bytes of a sealed batch; VaultCryptoError on any tampering."""
    import zstandard

    if len(chain_key) != CHAIN_KEY_LEN or len(nonce) != NONCE_LEN:
        raise VaultCryptoError("wrong chain key or nonce length")
    try:
        packed = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(ciphertext, aad, nonce, chain_key)
    except nacl.exceptions.CryptoError as e:
        raise VaultCryptoError("the batch does not open: wrong key, moved, or tampered with") from e
    try:
        return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(packed))
    except zstandard.ZstdError as e:
        raise VaultCryptoError("the batch opens but does not decompress") from e
