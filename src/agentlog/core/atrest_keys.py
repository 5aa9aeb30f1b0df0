"""The data key of encryption at rest, and the key-encryption keys that wrap it.

One data key per data root (32 random bytes) seals every new frame's content
(``core/sealing.py``). It is never written to the data root in plain: ``state/keys/at-rest.json``
(0600) holds it wrapped (XChaCha20-Poly1305) by one or both of

- a key-encryption key kept in the OS keyring through the ``keyring`` package (service
  ``agentlog-at-rest``, user ``<key id>/<generation>``; ``pip install 'agentlog[atrest]'``), and
- a key-encryption key derived from a passphrase with Argon2id (PyNaCl's ``pwhash``; the
  salt and the limits are in the file).

Unlocking unwraps the data key into memory-backed storage (``core/atrest.py``); rotating
re-wraps the same data key under new key-encryption keys, so no frame is rewritten. A lost
keyring entry and a forgotten passphrase lose every sealed frame's content for good.
"""

from __future__ import annotations

import binascii
import os
from dataclasses import dataclass, field
from typing import Any

from agentlog.core import AgentlogError, UsageError
from agentlog.core.atrest import (
    KEY_BYTES,
    data_key_path,
    derived_root,
    forget_unlocked_key,
    id_path,
    key_id,
    keys_dir,
    store_unlocked_key,
    wraps_path,
)
from agentlog.core.fileio import write_atomic
from agentlog.core.jsonio import dumps_pretty, read_json
from agentlog.core.sealing import NONCE_BYTES, decrypt, encrypt
from agentlog.core.paths import FILE_MODE, ensure_dir

KEYRING_SERVICE = "agentlog-at-rest"
_WRAP_AAD = b"agentlog/at-rest/wrap/v1\x1f"
LOST_KEY_WARNING = (
    "Encryption at rest is on. New frames' content is sealed with a data key that only your {how} "
    "opens. If you lose it, that content is lost for good: nobody, agentlog included, can read it back "
    "(times, kinds, tool names and sizes stay readable, and `agentlog verify` still works)."
)


class AtRestKeyError(AgentlogError):
    """The data key cannot be made, unwrapped or re-wrapped (the message says why)."""


@dataclass
class KeyStatus:
    """What ``agentlog keys status`` shows."""

    enabled: bool
    key_id: str | None = None
    unlocked: bool = False
    wraps: list[str] = field(default_factory=list)
    derived_root: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"at_rest": self.enabled, "key_id": self.key_id, "unlocked": self.unlocked, "wraps": self.wraps,
                "derived_root": self.derived_root}


def _b64(b: bytes) -> str:
    return binascii.b2a_base64(b, newline=False).decode("ascii")


def _unb64(s: Any) -> bytes:
    if not isinstance(s, str):
        raise AtRestKeyError("the wrapped key file is damaged (a member is not text)")
    return binascii.a2b_base64(s)


def _wrap(kek: bytes, data_key: bytes, kid: str) -> dict[str, str]:
    nonce = os.urandom(NONCE_BYTES)
    return {"nonce": _b64(nonce), "wrapped": _b64(encrypt(data_key, _WRAP_AAD + kid.encode(), nonce, kek))}


def _unwrap(kek: bytes, wrap: dict[str, Any], kid: str) -> bytes | None:
    """The data key, or None when ``kek`` is not the key-encryption key of ``wrap``."""
    try:
        key = decrypt(_unb64(wrap.get("wrapped")), _WRAP_AAD + kid.encode(), _unb64(wrap.get("nonce")), kek)
    except ValueError:  # not base64
        return None
    return key if key is not None and len(key) == KEY_BYTES else None


def _passphrase_kek(passphrase: str, salt: bytes, ops: int, mem: int) -> bytes:
    from nacl import pwhash

    return bytes(pwhash.argon2id.kdf(32, passphrase.encode("utf-8"), salt, opslimit=ops, memlimit=mem))


def _passphrase_wrap(passphrase: str, data_key: bytes, kid: str) -> dict[str, Any]:
    from nacl import pwhash

    if len(passphrase) < 8:
        raise UsageError("the passphrase must be at least 8 characters")
    salt = os.urandom(pwhash.argon2id.SALTBYTES)
    ops, mem = pwhash.argon2id.OPSLIMIT_INTERACTIVE, pwhash.argon2id.MEMLIMIT_INTERACTIVE
    kek = _passphrase_kek(passphrase, salt, ops, mem)
    return {"kind": "passphrase", "kdf": "argon2id", "salt": _b64(salt), "opslimit": ops, "memlimit": mem,
            **_wrap(kek, data_key, kid)}


def _keyring() -> Any:
    from importlib import import_module

    try:
        keyring = import_module("keyring")  # an extra (agentlog[atrest]): not imported by name
    except ImportError:
        raise AtRestKeyError("the OS keyring needs the `keyring` package (pip install 'agentlog[atrest]'); "
                             "or use a passphrase (--passphrase)") from None
    return keyring


def _keyring_wrap(data_key: bytes, kid: str, generation: int) -> dict[str, Any]:
    kr = _keyring()
    kek = os.urandom(32)
    user = f"{kid}/{generation}"
    try:
        kr.set_password(KEYRING_SERVICE, user, _b64(kek))
    except Exception as e:  # keyring.errors.KeyringError and the backends' own
        raise AtRestKeyError(f"the OS keyring refused the key ({type(e).__name__}: {e}); use a passphrase "
                             "(--passphrase) where there is no keyring") from None
    return {"kind": "keyring", "service": KEYRING_SERVICE, "user": user, **_wrap(kek, data_key, kid)}


def _keyring_unwrap(wrap: dict[str, Any], kid: str) -> bytes | None:
    kr = _keyring()
    try:
        secret = kr.get_password(str(wrap.get("service", KEYRING_SERVICE)), str(wrap.get("user")))
    except Exception:
        return None
    if not secret:
        return None
    return _unwrap(_unb64(secret), wrap, kid)


def _write_wraps(root: str, kid: str, generation: int, wraps: list[dict[str, Any]]) -> None:
    ensure_dir(keys_dir(root))
    doc = {"version": 1, "key_id": kid, "cipher": "xchacha20poly1305-ietf", "generation": generation, "wraps": wraps}
    write_atomic(wraps_path(root), dumps_pretty(doc).encode("utf-8"), FILE_MODE)


def _read_wraps(root: str) -> dict[str, Any]:
    doc = read_json(wraps_path(root), None)
    if not isinstance(doc, dict) or not isinstance(doc.get("wraps"), list):
        raise AtRestKeyError(f"{wraps_path(root)} is missing or damaged: the data key cannot be unwrapped")
    return doc


def init(root: str, *, passphrase: str | None, use_keyring: bool) -> KeyStatus:
    """Turn encryption at rest on: a new data key, wrapped as asked, unlocked for this boot."""
    if key_id(root) is not None:
        raise UsageError(f"encryption at rest is already on for {root} (key {key_id(root)}); "
                         "`agentlog keys rotate --at-rest` re-wraps its key")
    if passphrase is None and not use_keyring:
        raise UsageError("say how the data key is kept: --keyring, --passphrase, or both")
    kid = os.urandom(16).hex()
    data_key = os.urandom(KEY_BYTES)
    wraps = []
    if passphrase is not None:
        wraps.append(_passphrase_wrap(passphrase, data_key, kid))
    if use_keyring:
        wraps.append(_keyring_wrap(data_key, kid, 1))
    _write_wraps(root, kid, 1, wraps)
    store_unlocked_key(root, kid, data_key)
    write_atomic(id_path(root), (kid + "\n").encode("ascii"), FILE_MODE)  # last: from here on, frames are sealed
    return status(root)


def status(root: str) -> KeyStatus:
    kid = key_id(root)
    if kid is None:
        return KeyStatus(False)
    doc = read_json(wraps_path(root), {})
    kinds = [w.get("kind", "?") for w in doc.get("wraps", [])] if isinstance(doc, dict) else []
    return KeyStatus(True, kid, os.path.exists(data_key_path(root, kid)), kinds, derived_root(root, create=False))


def _unwrapped(root: str, passphrase: str | None) -> tuple[str, bytes]:
    """(key id, data key), unwrapped by the keyring (no passphrase given) or the passphrase."""
    kid = key_id(root)
    if kid is None:
        raise UsageError(f"encryption at rest is off for {root}: `agentlog keys init --at-rest` turns it on")
    doc = _read_wraps(root)
    tried = []
    for w in doc["wraps"]:
        kind = w.get("kind")
        got = None
        if kind == "passphrase" and passphrase is not None:
            tried.append("passphrase")
            got = _unwrap(_passphrase_kek(passphrase, _unb64(w.get("salt")), int(w["opslimit"]), int(w["memlimit"])),
                          w, kid)
        elif kind == "keyring" and passphrase is None:
            tried.append("keyring")
            got = _keyring_unwrap(w, kid)
        if got is not None:
            return kid, got
    if not tried:
        have = ", ".join(str(w.get("kind")) for w in doc["wraps"]) or "none"
        raise AtRestKeyError(f"the data key is wrapped by: {have}; "
                             + ("give the passphrase" if "passphrase" in have else "the OS keyring is needed"))
    raise AtRestKeyError(f"the data key did not unwrap with the {' or '.join(tried)} "
                         "(a wrong passphrase, or a keyring entry that is gone)")


def unlock(root: str, passphrase: str | None = None) -> KeyStatus:
    """Unwrap the data key into memory-backed storage until the next reboot (or ``lock``)."""
    kid, key = _unwrapped(root, passphrase)
    store_unlocked_key(root, kid, key)
    return status(root)


def lock(root: str) -> bool:
    """Forget the unlocked data key and drop the derived stores (they hold content in plain, in
    memory-backed storage; the next read after ``unlock`` rebuilds them). Hooks then withhold
    content and reads fail. Whether a key was unlocked."""
    import shutil

    kid = key_id(root)
    if kid is None:
        return False
    shutil.rmtree(derived_root(root, create=False), ignore_errors=True)
    return forget_unlocked_key(root, kid)


def rotate(root: str, *, passphrase: str | None, use_keyring: bool) -> KeyStatus:
    """Re-wrap the same data key under new key-encryption keys (a new passphrase's, a new
    keyring entry's); the old wraps are removed, no frame is rewritten. The key must be
    unlocked (``agentlog keys unlock``)."""
    from agentlog.core.atrest import unlocked_key

    if passphrase is None and not use_keyring:
        raise UsageError("say how the data key is kept from now on: --keyring, --passphrase, or both")
    got = unlocked_key(root)  # AtRestLockedError names `keys unlock`
    if got is None:
        raise UsageError(f"encryption at rest is off for {root}: `agentlog keys init --at-rest` turns it on")
    kid, data_key = got
    doc = _read_wraps(root)
    generation = int(doc.get("generation", 1)) + 1
    wraps = []
    if passphrase is not None:
        wraps.append(_passphrase_wrap(passphrase, data_key, kid))
    if use_keyring:
        wraps.append(_keyring_wrap(data_key, kid, generation))
    _write_wraps(root, kid, generation, wraps)
    for w in doc["wraps"]:  # the old keyring entries, once the new file is in place
        if w.get("kind") == "keyring":
            try:
                _keyring().delete_password(str(w.get("service", KEYRING_SERVICE)), str(w.get("user")))
            except Exception:
                pass
    return status(root)
