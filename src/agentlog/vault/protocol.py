"""The vault's readable side: chain ids, the index, linkage, batching, the URL rule and
the JSON shapes of requests and responses (docs/vault.md).

The vault never sees a frame's bytes. What it sees per frame is an *index entry*
``{"seq", "prev", "hash", "at"}`` — the envelope's chain fields (a purged frame keeps
its hash) and the event's ``captured_at`` (µs, or null) — and from the index alone it
checks that a batch continues the chain it holds.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sys
from array import array
from dataclasses import dataclass
from hashlib import sha256
from typing import Any, Iterator, NamedTuple
from urllib.parse import quote, urlsplit

import orjson

from agentlog.vault import VaultError, VaultProtocolError

__all__ = [
    "MAX_BATCH_BYTES", "b64e", "b64d", "chain_id", "split_chain", "check_chain", "chain_path", "IndexEntry",
    "index_entries", "index_entry_at", "frame_index_at", "scan_index", "iter_frames", "linkage_error", "check_linkage", "split_batches", "check_url",
    "FramesRequest", "PackedIndex", "AT_NULL", "EnrollRequest", "dumps", "loads", "chain_genesis",
]

MAX_BATCH_BYTES = 8 << 20
_CHAIN_RE = re.compile(r"[A-Za-z0-9._~-]{1,255}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def b64e(data: bytes) -> str:
    """Standard base64 with padding."""
    return base64.b64encode(data).decode("ascii")


def b64d(text: str) -> bytes:
    """Strict standard base64 (padding required); VaultProtocolError otherwise."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, AttributeError) as e:
        raise VaultProtocolError("malformed base64") from e


def dumps(obj: Any) -> bytes:
    """Compact JSON (the wire form)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def loads(body: bytes) -> dict[str, Any]:
    """A JSON object from a body; VaultProtocolError when it is not one."""
    try:
        obj = orjson.loads(body)  # strict JSON (no NaN, integers within 64 bits); a batch's body parses 5x faster
    except (ValueError, UnicodeDecodeError) as e:
        raise VaultProtocolError("the body is not JSON") from e
    if not isinstance(obj, dict):
        raise VaultProtocolError("the body is not a JSON object")
    return obj


# -- chain ids ------------------------------------------------------------------------

def chain_id(provider: str, key: str) -> str:
    """The chain id of the log ``logs/<provider>/<key>.jsonl``."""
    return check_chain(f"{provider}~{key}")


def check_chain(chain: str) -> str:
    """``chain`` if it is ``<provider>~<key>`` of [A-Za-z0-9._~-], at most 255 characters."""
    if not isinstance(chain, str) or not _CHAIN_RE.fullmatch(chain):
        raise VaultProtocolError(f"not a chain id: {chain!r}"[:300])
    provider, sep, key = chain.partition("~")
    if not sep or not provider or not key:
        raise VaultProtocolError(f"not a chain id (want <provider>~<key>): {chain!r}")
    return chain


def split_chain(chain: str) -> tuple[str, str]:
    """(provider, key) of a chain id."""
    provider, _, key = check_chain(chain).partition("~")
    return provider, key


def chain_genesis(chain: str) -> str:
    """The ``prev`` of the chain's frame 0 (log.frame.genesis of its provider and key)."""
    from agentlog.log.frame import genesis

    return genesis(*split_chain(chain))


def chain_path(chain: str, suffix: str, machine_id: str | None = None) -> str:
    """``/v1/chains/<chain>/<suffix>`` (or the admin form with the machine id), each
    segment percent-encoded: the exact path that is signed."""
    seg = quote(check_chain(chain), safe="")
    if machine_id is None:
        return f"/v1/chains/{seg}/{suffix}"
    return f"/v1/admin/chains/{quote(machine_id, safe='')}/{seg}/{suffix}"


# -- the index -----------------------------------------------------------------------

class IndexEntry(NamedTuple):
    """What the vault may read about one frame (a tuple: a batch holds thousands)."""

    seq: int
    prev: str
    hash: str
    at: int | None

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "prev": self.prev, "hash": self.hash, "at": self.at}

    @classmethod
    def from_json(cls, d: Any) -> IndexEntry:
        if not isinstance(d, dict):
            raise VaultProtocolError("an index entry is an object")
        seq, prev, digest, at = d.get("seq"), d.get("prev"), d.get("hash"), d.get("at")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise VaultProtocolError("an index entry's seq is an integer >= 0")
        if not isinstance(prev, str) or not _HEX64.fullmatch(prev) or not isinstance(digest, str) \
                or not _HEX64.fullmatch(digest):
            raise VaultProtocolError(f"index entry {seq}: prev and hash are 64 lower-case hex")
        if at is not None and (isinstance(at, bool) or not isinstance(at, int)):
            raise VaultProtocolError(f"index entry {seq}: at is an integer or null")
        return cls(seq, prev, digest, at)


AT_NULL = -(1 << 63)
"""``at`` of a frame without a ``captured_at`` in the vault's packed index."""


@dataclass(frozen=True)
class PackedIndex:
    """A batch's index as the wire and the vault carry it: seqs implied (dense from
    ``first_seq``), every ``prev`` and ``hash`` as 32 raw bytes one after another, and
    the ``at`` values. Linkage inside the batch is one comparison: the prevs from the
    second on are the hashes up to the last but one."""

    first_seq: int
    prevs: bytes
    hashes: bytes
    ats: tuple[int | None, ...]

    def __post_init__(self) -> None:
        n = len(self.ats)
        if n == 0 or len(self.prevs) != 32 * n or len(self.hashes) != 32 * n:
            raise VaultProtocolError("the index holds no frame, or its prevs, hashes and ats differ in number")

    def __len__(self) -> int:
        return len(self.ats)

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.ats) - 1

    def prev(self, i: int) -> str:
        return self.prevs[32 * i : 32 * i + 32].hex()

    def hash(self, i: int) -> str:
        return self.hashes[32 * i : 32 * i + 32].hex()

    def entries(self) -> list[IndexEntry]:
        return [IndexEntry(self.first_seq + i, self.prev(i), self.hash(i), at) for i, at in enumerate(self.ats)]

    @classmethod
    def of(cls, entries: list[IndexEntry]) -> PackedIndex:
        """Pack dense ``entries``; VaultProtocolError when their seqs are not."""
        if not entries or any(e.seq != entries[0].seq + i for i, e in enumerate(entries)):
            raise VaultProtocolError("an index's seqs are dense and it holds a frame")
        return cls(entries[0].seq, bytes.fromhex("".join(e.prev for e in entries)),
                   bytes.fromhex("".join(e.hash for e in entries)), tuple(e.at for e in entries))

    def linkage_error(self) -> tuple[int, str] | None:
        """The first frame after the first whose ``prev`` is not the hash before it: (its seq, why)."""
        if self.prevs[32:] == self.hashes[:-32]:
            return None
        for i in range(1, len(self.ats)):
            if self.prevs[32 * i : 32 * i + 32] != self.hashes[32 * i - 32 : 32 * i]:
                return self.first_seq + i, f"frame {self.first_seq + i} does not link to the frame before it"
        return None  # pragma: no cover (the comparison above said they differ)

    def to_json(self) -> dict[str, Any]:
        return {"prev": b64e(self.prevs), "hash": b64e(self.hashes), "at": list(self.ats)}

    @classmethod
    def from_json(cls, d: Any, first_seq: int) -> PackedIndex:
        if not isinstance(d, dict):
            raise VaultProtocolError("index is an object {prev, hash, at}")
        prevs, hashes = b64d(_str(d, "prev", 1 << 30)), b64d(_str(d, "hash", 1 << 30))
        ats = d.get("at")
        if not isinstance(ats, list) or not all(
                a is None or (type(a) is int and AT_NULL < a < 1 << 63) for a in ats):
            raise VaultProtocolError("index.at is a list of integers (64-bit) or nulls")
        return cls(first_seq, prevs, hashes, tuple(ats))

    def pack(self) -> bytes:
        """The vault's stored form: prevs, hashes, then each ``at`` as a little-endian int64."""
        ats = array("q", [AT_NULL if a is None else a for a in self.ats])
        if sys.byteorder == "big":  # pragma: no cover
            ats.byteswap()
        return self.prevs + self.hashes + ats.tobytes()

    @classmethod
    def unpack(cls, first_seq: int, blob: bytes) -> PackedIndex:
        n = len(blob) // 72
        if n == 0 or len(blob) != 72 * n:
            raise VaultProtocolError("a stored index is 72 bytes a frame")
        ats = array("q")
        ats.frombytes(blob[64 * n :])
        if sys.byteorder == "big":  # pragma: no cover
            ats.byteswap()
        return cls(first_seq, blob[: 32 * n], blob[32 * n : 64 * n], tuple(None if a == AT_NULL else a for a in ats))


def iter_frames(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of ``data`` (end just after its newline); a last
    line without its newline (a torn tail) is an error."""
    start, n = 0, len(data)
    while start < n:
        end = data.find(b"\n", start)
        if end < 0:
            raise VaultProtocolError(f"torn frame at byte {start}: no newline")
        yield start, end + 1
        start = end + 1


def index_entries(data: bytes) -> list[IndexEntry]:
    """The index of whole frame lines (frames and purged frames). A frame's hash is
    checked against its bytes; a purged frame's is taken as given."""
    return [index_entry_at(data, start, end) for start, end in iter_frames(data)]


def index_entry_at(buf: bytes, start: int, end: int) -> IndexEntry:
    """The index entry of the frame line ``buf[start:end]`` (``end`` just after its
    newline), read in place: a frame's hash is checked against its bytes, a purged
    frame's taken as given. VaultProtocolError when it is neither."""
    seq, prev, digest, at = frame_index_at(buf, start, end)
    return IndexEntry(seq, prev.decode("ascii"), digest.decode("ascii"), at)


def frame_index_at(buf: bytes, start: int, end: int) -> tuple[int, bytes, bytes, int | None]:
    """:func:`index_entry_at` with ``prev`` and ``hash`` left as the line's hex bytes (the
    ship pass reads a few thousand frames a batch this way)."""
    from agentlog.log.frame import FrameError, check_frame_at, parse_purged

    try:
        seq, prev, digest, ev_start, ev_end = check_frame_at(buf, start, end, sha256)
    except FrameError as e:
        try:
            seq_, prev_, digest_ = parse_purged(buf[start:end])
        except FrameError:
            raise VaultProtocolError(f"not a frame at byte {start}: {e}") from None
        return seq_, prev_.encode("ascii"), digest_.encode("ascii"), None
    return seq, prev, digest, _captured_at(buf, ev_start, ev_end)


def scan_index(buf: bytes, pos: int) -> Iterator[tuple[int, int, int, bytes, bytes, int | None]]:
    """(start, end, seq, prev, hash, at) of each complete line of ``buf`` from ``pos`` on, as
    :func:`frame_index_at` reads it (``prev`` and ``hash`` as the line's hex bytes); stops
    before an incomplete last line. A line that is neither a frame nor a purged frame
    raises VaultProtocolError. Frames are matched whole by one pattern and hashed here;
    anything else takes the step-by-step path."""
    from agentlog.log.frame import EVENT_MARK, TRAILER, line_pattern

    match = line_pattern().match
    view = memoryview(buf)
    skip = len(EVENT_MARK)
    while True:
        m = match(buf, pos)
        if m is not None:
            end = m.end()
            mark = end - TRAILER
            prev, digits, digest = m.group(1, 2, 3)
            if sha256(view[pos:mark]).hexdigest().encode("ascii") == digest:
                yield pos, end, int(digits), prev, digest, _captured_at(buf, m.end(2) + skip, mark)
                pos = end
                continue
        nl = buf.find(b"\n", pos)
        if nl < 0:
            return
        seq, prev, digest, at = frame_index_at(buf, pos, nl + 1)  # a purged frame, or the error
        yield pos, nl + 1, seq, prev, digest, at
        pos = nl + 1


_CAPTURED_AT = b'"captured_at":'
_JSON_INT = re.compile(rb"(-?(?:0|[1-9][0-9]{0,17}))[,}]")  # within 64 bits, as orjson reads them


def _captured_at(buf: bytes, start: int, end: int) -> int | None:
    """The top-level ``captured_at`` of the event ``buf[start:end]`` when it is an
    integer, else None. Read in place when only scalars precede the one member of
    that name (how every event is written: no nested object or list can hold it,
    and JSON escapes quotes inside strings); parsed (orjson) otherwise."""
    i = buf.find(_CAPTURED_AT, start, end)
    if i > start and buf[start] == 0x7B and buf.find(b"{", start + 1, i) < 0 and buf.find(b"[", start + 1, i) < 0 \
            and buf.find(_CAPTURED_AT, i + len(_CAPTURED_AT), end) < 0:
        m = _JSON_INT.match(buf, i + len(_CAPTURED_AT), end)
        if m is not None:
            return int(m[1])
    try:
        value = orjson.loads(memoryview(buf)[start:end]).get("captured_at")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def linkage_error(entries: list[IndexEntry], start_seq: int, start_prev: str) -> tuple[int, str] | None:
    """The first place where ``entries`` fail to continue a chain whose next frame is
    ``start_seq`` with ``prev == start_prev``: (the seq expected there, why), or None."""
    seq, prev = start_seq, start_prev
    for e in entries:
        if e.seq != seq:
            return seq, f"seq {e.seq} where {seq} was expected"
        if e.prev != prev:
            return seq, f"frame {seq} does not link to the frame before it"
        seq, prev = seq + 1, e.hash
    return None


def check_linkage(entries: list[IndexEntry], chain: str, head: tuple[int, str] | None) -> int | None:
    """The first bad seq of ``entries`` as a continuation of ``chain`` after ``head``
    (``(seq, hash)``, or None: the chain starts at 0 from its genesis); None when they link."""
    start = (0, chain_genesis(chain)) if head is None else (head[0] + 1, head[1])
    bad = linkage_error(entries, *start)
    return None if bad is None else bad[0]


def split_batches(data: bytes, limit: int = MAX_BATCH_BYTES) -> list[tuple[int, int]]:
    """(start, end) byte ranges of ``data`` holding at most ``limit`` bytes of whole
    frames each; a frame larger than ``limit`` is a batch of its own."""
    out: list[tuple[int, int]] = []
    batch_start = -1
    batch_end = 0
    for start, end in iter_frames(data):
        if batch_start >= 0 and end - batch_start > limit:
            out.append((batch_start, batch_end))
            batch_start = -1
        if batch_start < 0:
            batch_start = start
        batch_end = end
    if batch_start >= 0:
        out.append((batch_start, batch_end))
    return out


# -- transport -----------------------------------------------------------------------

def check_url(url: str) -> str:
    """The vault URL without a trailing slash, if it is https:// or http:// to loopback."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as e:
        raise VaultError(f"not a vault URL: {url}") from e
    if parts.scheme not in ("http", "https") or not host or parts.query or parts.fragment or parts.username:
        raise VaultError(f"not a vault URL (want https://host[:port][/path]): {url}")
    if parts.scheme == "http" and host not in LOOPBACK_HOSTS:
        raise VaultError(f"{url}: plain http only to 127.0.0.1, localhost or ::1; use https://")
    return url.rstrip("/")


# -- requests ------------------------------------------------------------------------

def _int(d: dict[str, Any], name: str) -> int:
    v = d.get(name)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise VaultProtocolError(f"{name} is an integer >= 0")
    return v


def _str(d: dict[str, Any], name: str, limit: int = 1024) -> str:
    v = d.get(name)
    if not isinstance(v, str) or not v or len(v) > limit:
        raise VaultProtocolError(f"{name} is a non-empty string")
    return v


@dataclass(frozen=True)
class FramesRequest:
    """A batch as a machine posts it to ``/v1/chains/<chain>/frames``."""

    first_seq: int
    last_seq: int
    index: PackedIndex
    nonce: bytes
    ciphertext: bytes
    wraps: dict[str, str] | None = None
    genesis: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"first_seq": self.first_seq, "last_seq": self.last_seq, "index": self.index.to_json()}
        if self.wraps is not None:
            d["wraps"] = dict(self.wraps)
        if self.genesis is not None:
            d["genesis"] = self.genesis
        d["nonce"] = b64e(self.nonce)
        d["ciphertext"] = b64e(self.ciphertext)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FramesRequest:
        """Parse and check the request's own consistency (index matches the range)."""
        first, last = _int(d, "first_seq"), _int(d, "last_seq")
        index = PackedIndex.from_json(d.get("index"), first)
        if index.last_seq != last:
            raise VaultProtocolError("first_seq/last_seq do not match the index")
        wraps = d.get("wraps")
        if wraps is not None:
            if not isinstance(wraps, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in wraps.items()):
                raise VaultProtocolError("wraps maps admin fingerprints to base64 text")
            for v in wraps.values():
                b64d(v)
        genesis = d.get("genesis")
        if genesis is not None and (not isinstance(genesis, str) or not _HEX64.fullmatch(genesis)):
            raise VaultProtocolError("genesis is 64 lower-case hex")
        nonce = b64d(_str(d, "nonce", 64))
        if len(nonce) != 24:
            raise VaultProtocolError("nonce is 24 bytes")
        ciphertext = d.get("ciphertext")
        if not isinstance(ciphertext, str):
            raise VaultProtocolError("ciphertext is base64 text")
        return cls(first, last, index, nonce, b64d(ciphertext), wraps, genesis)


@dataclass(frozen=True)
class EnrollRequest:
    """``POST /v1/enroll`` (unsigned: the token stands in for a signature)."""

    token: str
    public_key: bytes
    host: str
    rotate: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "public_key": b64e(self.public_key), "host": self.host, "rotate": self.rotate}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EnrollRequest:
        token, host = _str(d, "token"), _str(d, "host", 255)
        if "\n" in host:
            raise VaultProtocolError("host holds a newline")
        key = b64d(_str(d, "public_key", 64))
        if len(key) != 32:
            raise VaultProtocolError("public_key is 32 bytes")
        rotate = d.get("rotate", False)
        if not isinstance(rotate, bool):
            raise VaultProtocolError("rotate is a boolean")
        return cls(token, key, host, rotate)
