"""Sealing an event's captured content with the data key, and opening it again.

The one place frames are sealed (``log/writer.py`` calls :func:`seal_event` on every event
it appends while encryption at rest is on) and the one place they are opened
(:func:`open_event`, which the store's ingest calls). A sealed event is the event with its
``content`` and ``raw`` members replaced by one last member::

    "sealed":{"k":"<key id>","n":"<base64 24-byte nonce>","c":"<base64 ciphertext>"}

The ciphertext is XChaCha20-Poly1305 (libsodium's IETF construction, through PyNaCl) of the
compact JSON ``{"content":…,"raw":…}`` (the members the event had), under the data key, with
the associated data ``agentlog/at-rest/v1 \\x1f <key id> \\x1f <event id>``: a ciphertext moved
to another event does not open. The frame's hash covers these bytes, so ``agentlog verify``
checks a sealed log without the key. Everything else in the event (kind, times, tool name,
paths, outcome, sizes in ``attrs``) stays readable: docs/encryption.md says what that reveals.

Off the hook's fast path: PyNaCl is imported on the first seal (only where encryption at rest
is on); the module itself is standard library only.
"""

from __future__ import annotations

import binascii

from agentlog.core import AgentlogError
from agentlog.core.fastjson import dumps_bytes, loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SEALED = "sealed"
SEALED_MARK = b',"sealed":{"k":"'
"""How a sealed event's last member starts (a JSON string cannot hold these bytes unescaped)."""
SEALED_FIELDS = ("content", "raw")
NONCE_BYTES = 24
_AAD = b"agentlog/at-rest/v1\x1f"


class SealError(AgentlogError):
    """A sealed event does not open: the wrong key, or its bytes were changed."""


def _aead() -> Any:
    """PyNaCl's bindings, imported on the first seal or open in a process. The hook runs with
    ``-S`` (no site-packages on the path, docs/hook-path.md): then the interpreter's own
    site directories are added first, which only a root with encryption at rest on pays for."""
    try:
        from nacl import bindings
    except ImportError:
        import sys
        import sysconfig

        for name in ("purelib", "platlib"):
            path = sysconfig.get_paths()[name]
            if path not in sys.path:
                sys.path.append(path)
        from nacl import bindings
    return bindings


def _aad(kid: str, event_id: str) -> bytes:
    return _AAD + kid.encode("ascii") + b"\x1f" + event_id.encode("utf-8", "surrogatepass")


def seal_event(event: bytes, kid: str, key: bytes) -> bytes:
    """``event`` (compact JSON) with its ``content`` and ``raw`` sealed; unchanged when it has neither."""
    ev = loads(event.decode("utf-8", "surrogatepass"))
    if not isinstance(ev, dict) or SEALED in ev:
        return event
    inner = {f: ev.pop(f) for f in SEALED_FIELDS if f in ev}
    if not inner:
        return event
    from agentlog.core import oslite as os

    nonce = os.urandom(NONCE_BYTES)
    sealed = _aead().crypto_aead_xchacha20poly1305_ietf_encrypt(
        dumps_bytes(inner), _aad(kid, str(ev.get("event_id", ""))), nonce, key)
    ev[SEALED] = {"k": kid, "n": _b64(nonce), "c": _b64(sealed)}
    return dumps_bytes(ev)


def withhold_content(event: bytes) -> bytes:
    """``event`` without its ``content`` and ``raw``, ``attrs.content_withheld`` saying why
    (encryption at rest is on and the data key is locked: nothing may be written in plain)."""
    ev = loads(event.decode("utf-8", "surrogatepass"))
    if not isinstance(ev, dict) or SEALED in ev or not any(f in ev for f in SEALED_FIELDS):
        return event
    for f in SEALED_FIELDS:
        ev.pop(f, None)
    attrs = ev.get("attrs")
    ev["attrs"] = {**(attrs if isinstance(attrs, dict) else {}), "content_withheld": "at_rest_key_locked"}
    return dumps_bytes(ev)


def is_sealed(event: bytes) -> bool:
    """Whether ``event`` may be sealed (a cheap look for its last member's start)."""
    return SEALED_MARK in event


def open_event(event: bytes, keys: dict[str, bytes]) -> bytes:
    """``event`` with its sealed member opened (``keys``: data keys by id); unchanged when
    not sealed. Raises :class:`SealError` when it does not open."""
    from agentlog.core.jsonio import dumps as fast_dumps
    from agentlog.core.jsonio import loads as fast_loads

    ev = fast_loads(event)
    box = ev.get(SEALED) if isinstance(ev, dict) else None
    if not isinstance(box, dict):
        return event
    kid = box.get("k")
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        raise SealError(f"event {ev.get('event_id')} is sealed with data key {kid!r}, which this data root "
                        "does not have")
    try:
        plain = _aead().crypto_aead_xchacha20poly1305_ietf_decrypt(
            binascii.a2b_base64(box["c"]), _aad(kid, str(ev.get("event_id", ""))), binascii.a2b_base64(box["n"]),
            key)
    except Exception:  # nacl's CryptoError, a bad base64 or member
        raise SealError(f"event {ev.get('event_id')}: its sealed content does not open with data key {kid} "
                        "(the bytes were changed, or the key is not this one)") from None
    del ev[SEALED]
    inner = fast_loads(plain)
    for f in SEALED_FIELDS:
        if f in inner:
            ev[f] = inner[f]
    return fast_dumps(ev)


class Opener:
    """Opens the sealed events of one data root (a reader of log frames calls it on each
    event's bytes); the data key is loaded at the first sealed event, so a root without
    encryption at rest never loads it. Raises ``AtRestLockedError`` (the key is locked) or
    :class:`SealError`."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.keys: dict[str, bytes] | None = None

    def __call__(self, event: bytes) -> bytes:
        if SEALED_MARK not in event:
            return event
        if self.keys is None:
            from agentlog.core.atrest_keys import data_keys

            self.keys = data_keys(self.root)
        return open_event(event, self.keys)


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


__all__ = ["SEALED", "SEALED_MARK", "SealError", "seal_event", "open_event", "is_sealed", "withhold_content", "Opener"]
