"""Sealing an event's captured content with the data key, and opening it again.

The one place frames are sealed (``log/writer.py`` calls :func:`seal_events` on the events
it appends while encryption at rest is on); ``core/unsealing.py`` opens them (the readers' side,
kept apart so that the hook does not load it). A sealed event is the event with its
``content`` and ``raw`` members replaced by one last member::

    "sealed":{"k":"<key id>","n":"<base64 24-byte nonce>","c":"<base64 ciphertext>"}

The ciphertext is XChaCha20-Poly1305 (libsodium's IETF construction, through PyNaCl) of the
compact JSON ``{"content":…,"raw":…}`` (the members the event had), under the data key, with
the associated data ``agentlog/at-rest/v1 \\x1f <key id> \\x1f <event id>``: a ciphertext moved
to another event does not open. The frame's hash covers these bytes, so ``agentlog verify``
checks a sealed log without the key. Everything else in the event (kind, times, tool name,
paths, outcome, sizes in ``attrs``) stays readable: docs/encryption.md says what that reveals.

PyNaCl's libsodium is loaded on the first seal or open (only where encryption at rest is on);
the module itself is standard library only.
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
_SEALED_SET = frozenset(SEALED_FIELDS)
_CONTENT_KEY = b',"content":'
_RAW_KEY = b',"raw":'
_ID_PREFIX = b'{"event_id":"'
NONCE_BYTES = 24
TAG_BYTES = 16
_AAD = b"agentlog/at-rest/v1\x1f"


class SealError(AgentlogError):
    """A sealed event does not open: the wrong key, or its bytes were changed."""


_LIB: Any = None


def _sodium() -> Any:
    """PyNaCl's libsodium (its cffi module ``nacl._sodium``, initialised once), imported on the
    first seal or open in a process. ``nacl.bindings`` wraps the same calls and costs ~13.6 ms to
    import (docs/share.md), most of a hook's budget; this module alone costs a fraction of that.
    The hook runs with ``-S`` (no site-packages on the path, docs/hook-path.md): from a source
    checkout the interpreter's (or its virtual environment's) site directory is added (an
    installed package already sits in it); only a root with encryption at rest on pays for this."""
    global _LIB
    if _LIB is None:
        import sys

        if sys.flags.no_site:  # (added before the first try: a try that fails costs the hook ~0.3 ms)
            v = sys.version_info
            # a virtual environment's own (under -S, sys.prefix is the base interpreter's), then the base's
            venv = sys.executable.rsplit("/", 2)[0]
            lib = f"lib/python{v[0]}.{v[1]}/site-packages"
            sys.path += [d for d in (f"{venv}/{lib}", f"{sys.prefix}/{lib}") if d not in sys.path]
        try:
            mod = __import__("nacl._sodium", fromlist=["lib"])  # (a compiled module without stubs)
        except ImportError:
            import sysconfig

            sys.path += [sysconfig.get_paths()[n] for n in ("purelib", "platlib")]
            mod = __import__("nacl._sodium", fromlist=["lib"])
        if mod.lib.sodium_init() == -1:
            raise SealError("libsodium did not initialise")
        _LIB = mod
    return _LIB


def encrypt(message: bytes, ad: bytes, nonce: bytes, key: bytes) -> bytes:
    """XChaCha20-Poly1305 (IETF): the ciphertext with its 16-byte tag."""
    m = _sodium()
    ffi, lib = m.ffi, m.lib
    out = ffi.new("unsigned char[]", len(message) + TAG_BYTES)
    n = ffi.new("unsigned long long *")
    if lib.crypto_aead_xchacha20poly1305_ietf_encrypt(out, n, message, len(message), ad, len(ad), ffi.NULL,
                                                      nonce, key) != 0:
        raise SealError("encryption failed")
    return bytes(ffi.buffer(out, n[0]))


def decrypt(box: bytes, ad: bytes, nonce: bytes, key: bytes) -> bytes | None:
    """The plaintext of ``box``, or None when it does not open (the wrong key, changed bytes)."""
    if len(box) < TAG_BYTES or len(nonce) != NONCE_BYTES or len(key) != 32:
        return None
    m = _sodium()
    ffi, lib = m.ffi, m.lib
    out = ffi.new("unsigned char[]", max(1, len(box) - TAG_BYTES))
    n = ffi.new("unsigned long long *")
    if lib.crypto_aead_xchacha20poly1305_ietf_decrypt(out, n, ffi.NULL, box, len(box), ad, len(ad), nonce, key) != 0:
        return None
    return bytes(ffi.buffer(out, n[0]))


def aad_start(kid: str) -> bytes:
    """The associated data of an event sealed with data key ``kid``, but for the event id (UTF-8)
    that ends it."""
    return _AAD + kid.encode("ascii") + b"\x1f"


def seal_event(event: bytes, kid: str, key: bytes) -> bytes:
    """``event`` (compact JSON) with its ``content`` and ``raw`` sealed; unchanged when it has neither."""
    return seal_events([event], kid, key)[0]


def seal_events(events: list[bytes], kid: str, key: bytes) -> list[bytes]:
    """Each of ``events`` (compact JSON) with its ``content`` and ``raw`` sealed; unchanged when it
    has neither. The nonces of all of them come from one read of the OS's random source.

    In the canonical order they are the last members, so the event's own bytes are cut where
    they start: the head is kept as it is, and the plaintext is ``{`` and the rest, byte for byte
    (:func:`open_event` splices them back: an opened event is the event that was sealed). Where
    that cut does not hold (another order), the event is parsed and written again."""
    from agentlog.core import oslite as os

    nonces = os.urandom(NONCE_BYTES * len(events))
    m = _sodium()
    ffi, encrypt_into = m.ffi, m.lib.crypto_aead_xchacha20poly1305_ietf_encrypt
    new = ffi.new_allocator(should_clear_after_alloc=False)  # (libsodium writes every byte read back)
    kid_b = kid.encode("ascii")
    ad_start = aad_start(kid)
    mark = b',"sealed":{"k":"' + kid_b + b'","n":"'
    out: list[bytes] = []
    for i, event in enumerate(events):
        cut = _cut(event)
        if cut is not None:
            start, inner, eid = event[:cut[0]], b"{" + event[cut[0] + 1:], cut[1]
        else:  # the whole event, parsed
            ev = loads(event.decode("utf-8", "surrogatepass"))
            if not isinstance(ev, dict) or SEALED in ev or not any(f in ev for f in SEALED_FIELDS):
                out.append(event)
                continue
            members = {f: ev.pop(f) for f in SEALED_FIELDS if f in ev}
            start, inner = dumps_bytes(ev)[:-1], dumps_bytes(members)
            eid = str(ev.get("event_id", "")).encode("utf-8", "surrogatepass")
        nonce = nonces[i * NONCE_BYTES:(i + 1) * NONCE_BYTES]
        ad = ad_start + eid
        size = len(inner) + TAG_BYTES
        box = new("unsigned char[]", size)
        if encrypt_into(box, ffi.NULL, inner, len(inner), ad, len(ad), ffi.NULL, nonce, key) != 0:
            raise SealError("encryption failed")
        out.append(b"".join((start, mark, binascii.b2a_base64(nonce, newline=False), b'","c":"',
                             binascii.b2a_base64(ffi.buffer(box, size), newline=False), b'"}}')))
    return out


def _cut(event: bytes) -> tuple[int, bytes] | None:
    """Where the canonical event ``event``'s sealed members start, and its event id (UTF-8), or
    None when the cut does not hold (then the event is parsed whole).

    The cut is at the first ``,"content":`` (else ``,"raw":``). It holds when the event id is
    the first member (read in place, no escapes); when the head before the cut has no string
    ``"content"``, ``"raw"`` or ``"sealed"`` anywhere, so no member of those names, at any depth
    or spacing (agentlog's JSON writers never escape a letter); and when the rest after the cut,
    opened with ``{``, is one JSON object of ``content`` and ``raw`` alone: it then closes exactly
    the event's own object, so the cut is at the top level. (The rest is smaller than the head,
    so parsing it costs less than parsing the head.)"""
    cut = event.find(_CONTENT_KEY)
    if cut < 0:
        cut = event.find(_RAW_KEY)
    if cut <= 0 or not event.startswith(_ID_PREFIX):
        return None
    end = event.find(b'"', len(_ID_PREFIX), cut)
    if (end < 0 or event.find(b"\\", len(_ID_PREFIX), end) >= 0 or event.find(b'"content"', 0, cut) >= 0
            or event.find(b'"raw"', 0, cut) >= 0 or event.find(b'"sealed"', 0, cut) >= 0):
        return None
    tail = _parse(b"{" + event[cut + 1:])
    if not isinstance(tail, dict) or not tail or not tail.keys() <= _SEALED_SET:
        return None
    return cut, event[len(_ID_PREFIX):end]


def _parse(data: bytes) -> Any:
    """``data`` parsed (None: not JSON): with orjson where the process has loaded it (a bulk
    writer: an import, the capture server), else the hook's own codec."""
    import sys

    fast = sys.modules.get("orjson")
    if fast is not None:
        try:
            return fast.loads(data)
        except ValueError:  # (lone surrogates, big integers: the codec below takes them)
            pass
    try:
        return loads(data.decode("utf-8", "surrogatepass"))
    except ValueError:
        return None


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


__all__ = ["SEALED", "SEALED_MARK", "SealError", "seal_event", "seal_events", "is_sealed", "withhold_content",
           "encrypt", "decrypt", "aad_start", "NONCE_BYTES"]
