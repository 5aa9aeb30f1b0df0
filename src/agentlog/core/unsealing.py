"""Opening sealed events: the readers' side of ``core/sealing.py`` (whose docstring describes the
sealed member). The store's ingest makes one :class:`EventOpener` and calls it on every frame;
``log/lookup.py``, the memory log's fold, ``agentlog share`` and the importer's merge keys use an
:class:`Opener` of the data root (it loads the key at the first sealed event). Not on the hook path.
"""

from __future__ import annotations

import binascii
from typing import Any

from agentlog.core.atrest import data_keys
from agentlog.core.fastjson import loads
from agentlog.core.sealing import (
    _ID_PREFIX,
    NONCE_BYTES,
    SEALED_MARK,
    TAG_BYTES,
    SealError,
    _sodium,
    aad_start,
    decrypt,
)


def open_event(event: bytes, keys: dict[str, bytes]) -> bytes:
    """``event`` with its sealed member opened (``keys``: data keys by id): the head before the
    sealed member, and the plaintext's members spliced after it, without parsing the event.
    Unchanged when not sealed. Raises :class:`SealError` when it does not open. (A reader of
    many events makes one :class:`EventOpener` and calls it on each.)"""
    return EventOpener(keys)(event)


_N_SEP = b'","n":"'
_C_SEP = b'","c":"'
_IDS = len(_ID_PREFIX)
_KS = len(SEALED_MARK)
_NS, _CS = len(_N_SEP), len(_C_SEP)
_NONCE_B64 = 4 * NONCE_BYTES // 3


class EventOpener:
    """Opens sealed events with the data keys by id ``keys``: :func:`open_event` for every event
    of a reader (ingest opens each frame's). The sealed member is read in place when it has
    the form :func:`seal_event` writes (the members in their order, no escapes: base64 holds
    neither quotes nor backslashes), with what each key needs worked out once per key; any other
    form is parsed as JSON (:meth:`careful`). Either way libsodium's AEAD decides whether it opens."""

    def __init__(self, keys: dict[str, bytes]) -> None:
        self.keys = keys
        self._per_key: dict[bytes, tuple[bytes, bytes]] = {}
        """Key id (ASCII bytes) → (the associated data's start, the data key)."""
        self._lib: Any = None

    def __call__(self, event: bytes) -> bytes:
        at = event.rfind(SEALED_MARK)
        if at <= 0:
            return event
        k = at + _KS
        n = event.find(b'"', k)
        c = n + _NS + _NONCE_B64  # (base64 of a nonce: fixed length, no padding)
        end = len(event) - 3
        ide = event.find(b'"', _IDS)
        if self._lib is None:
            self._sodium()
        per = self._per_key.get(event[k:n]) if n > 0 else None
        # The id is in the associated data as it is in the bytes, so it must hold no escape (the
        # key id must be one of ours, and strict base64 refuses quotes and backslashes).
        if (per is None or not event.endswith(b'"}}') or not event.startswith(_N_SEP, n)
                or not event.startswith(_C_SEP, c) or not event.startswith(_ID_PREFIX) or ide < 0
                or event.find(b"\\", _IDS, ide) >= 0):
            return self.careful(event)
        view = memoryview(event)
        try:
            box = binascii.a2b_base64(view[c + _CS:end], strict_mode=True)
            nonce = binascii.a2b_base64(view[n + _NS:c], strict_mode=True)
        except ValueError:
            return self.careful(event)
        size = len(box) - TAG_BYTES
        if size < 3 or len(nonce) != NONCE_BYTES:
            return self.careful(event)
        ffi, lib, new = self._lib  # (set with the per-key table)
        out = new("unsigned char[]", size)
        ad = per[0] + event[_IDS:ide]
        if lib.crypto_aead_xchacha20poly1305_ietf_decrypt(out, ffi.NULL, ffi.NULL, box, len(box), ad, len(ad), nonce,
                                                          per[1]) != 0 or out[0] != 0x7B:  # '{'
            return self.careful(event)  # (which says why it does not open)
        return b"".join((view[:at], b",", memoryview(ffi.buffer(out, size))[1:]))

    def _sodium(self) -> None:
        """libsodium's calls (an allocator that does not zero: libsodium writes every byte that
        is read back), and what each key needs."""
        mod = _sodium()
        self._lib = (mod.ffi, mod.lib, mod.ffi.new_allocator(should_clear_after_alloc=False))
        for kid, key in self.keys.items():
            if kid.isascii() and len(key) == 32:
                self._per_key[kid.encode("ascii")] = (aad_start(kid), key)

    def careful(self, event: bytes) -> bytes:
        """``event`` opened the slow way: its sealed member parsed as JSON."""
        from agentlog.core.jsonio import loads as fast_loads

        at = event.rfind(SEALED_MARK)
        if at <= 0 or not event.endswith(b"}}"):
            return event
        try:
            box = fast_loads(event[at + len(b',"sealed":'):-1])
        except ValueError:  # not the sealed member after all: not for this function to say
            return event
        if not isinstance(box, dict):
            return event
        eid = _event_id(event, at)
        kid = box.get("k")
        key = self.keys.get(kid) if isinstance(kid, str) else None
        if key is None or not isinstance(kid, str):
            raise SealError(f"event {eid} is sealed with data key {kid!r}, which this data root does not have")
        try:
            ad = aad_start(kid) + eid.encode("utf-8", "surrogatepass")
            plain = decrypt(binascii.a2b_base64(box["c"]), ad, binascii.a2b_base64(box["n"]), key)
        except (KeyError, TypeError, ValueError):  # a member missing, not text, not base64
            plain = None
        if plain is None or not plain.startswith(b"{") or len(plain) < 3:
            raise SealError(f"event {eid}: its sealed content does not open with data key {kid} "
                            "(the bytes were changed, or the key is not this one)")
        return event[:at] + b"," + plain[1:]


def _event_id(event: bytes, at: int) -> str:
    """The event id of a sealed event (its first member, read in place; else its head parsed)."""
    if event.startswith(_ID_PREFIX):
        end = event.find(b'"', len(_ID_PREFIX))
        if end > 0 and b"\\" not in event[len(_ID_PREFIX):end]:
            return event[len(_ID_PREFIX):end].decode("utf-8", "surrogatepass")
    try:
        head = loads((event[:at] + b"}").decode("utf-8", "surrogatepass"))
    except ValueError:
        return ""
    return str(head.get("event_id", "")) if isinstance(head, dict) else ""


class Opener:
    """Opens the sealed events of one data root (a reader of log frames calls it on each
    event's bytes); the data key is loaded at the first sealed event, so a root without
    encryption at rest never loads it. Raises ``AtRestLockedError`` (the key is locked) or
    :class:`SealError`."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.opener: EventOpener | None = None

    def __call__(self, event: bytes) -> bytes:
        if SEALED_MARK not in event:
            return event
        if self.opener is None:
            self.opener = EventOpener(data_keys(self.root))
        return self.opener(event)


__all__ = ["EventOpener", "Opener", "open_event"]
