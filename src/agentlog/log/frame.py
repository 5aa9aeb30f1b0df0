"""The frame: one line of a session log, sealed with SHA-256.

A frame is compact JSON on one line::

    {"v":1,"prev":"<64 hex>","seq":7,"event":{...},"hash":"<64 hex>"}\\n

``hash`` is the SHA-256 of the line's bytes up to (not including)
``,"hash":"``; it is spliced in as the last member so that verification
hashes the exact bytes written and never re-serialises. ``prev`` is the
previous frame's hash, or for ``seq`` 0 the session's genesis value, which
binds the chain to the log's name (frames copied into another session fail at
frame 0). The envelope always starts with the same bytes, so ``prev`` sits at
a fixed offset and ``seq`` right after it: both are read by position, without
parsing JSON. The trailing newline is not covered by the hash: a file whose
last line lacks it has a torn tail.

A *purged* frame (``agentlog purge``, ``log/purge.py``) is a frame whose
event was replaced in place, keeping ``prev``, ``seq`` and the original
``hash``::

    {"v":1,"prev":"<64 hex>","seq":7,"purged":{"purge_id":…,"event_id":…,"kind":…,"observed_at":…}   ,"hash":"<64 hex>"}\\n

padded with spaces before ``,"hash":"`` to exactly the original line's
length, so every later frame keeps its offset. Its hash can no longer be
recomputed: it is taken as given, and ``verify`` checks instead that a purge
record names it. ``parse_envelope`` and ``check_frame_at`` refuse it
(``not_a_frame``: the bytes after ``seq`` are not ``,"event":``), so code
that does not know about purging never mistakes it for an event;
``parse_any`` accepts both.

Standard library only (hook path); the hasher is the built-in ``_sha256``,
which imports in a fraction of a millisecond (hashlib loads OpenSSL; the
verifier, which is not on the hook path, uses hashlib).
"""

from __future__ import annotations

from agentlog.core import AgentlogError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import sha256
    from typing import Any
else:
    try:
        from _sha256 import sha256
    except ImportError:  # Python >= 3.12 renamed it
        try:
            from _sha2 import sha256
        except ImportError:  # pragma: no cover
            from hashlib import sha256

__all__ = [
    "sha256", "genesis", "seal", "seal_parts", "parse_envelope", "parse_seq", "event_bytes", "FrameError",
    "PURGED_MARK", "is_purged", "parse_purged", "parse_any", "purged_line", "line_pattern",
]

FORMAT_VERSION = 1
PREFIX = b'{"v":1,"prev":"'
HASH_HEX = 64
PREV_START = len(PREFIX)  # 15
PREV_END = PREV_START + HASH_HEX  # 79
SEQ_MARK = b'","seq":'
EVENT_MARK = b',"event":'
PURGED_MARK = b',"purged":'
HASH_MARK = b',"hash":"'
SUFFIX = b'"}\n'
# bytes from the start of HASH_MARK to the end of the line (newline included)
TRAILER = len(HASH_MARK) + HASH_HEX + len(SUFFIX)


def genesis(provider: str, session_key: str) -> str:
    """The ``prev`` of frame 0 of the log ``<provider>/<session_key>``."""
    data = ("agentlog/v1\x1f" + provider + "\x1f" + session_key).encode("utf-8", "surrogatepass")
    return sha256(data).hexdigest()


def seal(seq: int, prev: str, event_json: bytes, hasher: Any = None) -> tuple[bytes, str]:
    """Build the frame line for an already-serialised event; return (line, hash).

    ``hasher`` is a SHA-256 constructor: bulk writers (an import) pass
    ``hashlib.sha256``, several times faster per byte than the built-in one."""
    parts, digest = seal_parts(seq, prev, event_json, hasher)
    return b"".join(parts), digest


def seal_parts(seq: int, prev: str, event_json: bytes, hasher: Any = None) -> tuple[tuple[bytes, ...], str]:
    """:func:`seal`'s line as the pieces to join (a bulk writer joins a whole batch's
    at once; the event is hashed where it is, not copied into a body first)."""
    head = b"".join((PREFIX, prev.encode("ascii"), SEQ_MARK, str(seq).encode("ascii"), EVENT_MARK))
    h = (hasher or sha256)(head)
    h.update(event_json)
    digest = h.hexdigest()
    return (head, event_json, HASH_MARK, digest.encode("ascii"), SUFFIX), digest


class FrameError(AgentlogError, ValueError):
    """A line is not a well-formed sealed frame (the reason is the message)."""


def parse_seq(line: bytes) -> int:
    """The ``seq`` of a line already known to be a frame."""
    start = PREV_END + len(SEQ_MARK)
    return int(line[start : line.index(b",", start)])


def parse_envelope(line: bytes, hasher: Any = None) -> tuple[int, str, str]:
    """Return (seq, prev, hash) of a complete line (with its newline), checking
    shape and hash. Raises FrameError('not_a_frame' | 'bad_hash').

    ``hasher`` is a SHA-256 constructor; bulk readers pass ``hashlib.sha256``
    (OpenSSL, several times faster per byte than the built-in one the hook
    uses because it imports in a fraction of a millisecond)."""
    seq, prev, claimed, _, _ = check_frame_at(line, 0, len(line), hasher or sha256)
    return seq, prev.decode("ascii"), claimed.decode("ascii")


def event_bytes(line: bytes) -> bytes:
    """The serialised event inside a (checked) frame line."""
    j = line.find(EVENT_MARK, PREV_END)
    return line[j + len(EVENT_MARK) : len(line) - TRAILER]


def check_frame_at(buf: bytes, start: int, end: int, hasher: Any = None) -> tuple[int, bytes, bytes, int, int]:
    """Check the frame line ``buf[start:end]`` (``end`` just after its newline)
    in place, without copying it: the bulk readers' ``parse_envelope``.

    Returns (seq, prev, hash, event_start, event_end) — ``prev``/``hash`` as
    ASCII hex bytes, the event's JSON at ``buf[event_start:event_end]``.
    Raises FrameError('not_a_frame' | 'bad_hash'). Without ``hasher`` the
    hash is not checked: the caller hashes ``buf[start:end - TRAILER]``
    itself (bulk readers do it on another thread).
    """
    seq, prev, claimed, body, mark = _envelope(buf, start, end, EVENT_MARK)
    if hasher is not None and hasher(memoryview(buf)[start:mark]).hexdigest().encode("ascii") != claimed:
        raise FrameError("bad_hash")
    return seq, prev, claimed, body, mark


def _envelope(buf: bytes, start: int, end: int, body_mark: bytes) -> tuple[int, bytes, bytes, int, int]:
    """The shape every frame line ``buf[start:end]`` shares — prefix, prev,
    seq, ``body_mark`` (``,"event":`` or ``,"purged":``), hash, suffix —
    checked without copying the line. Returns (seq, prev, hash, where the
    body starts, where ``,"hash":"`` starts). Raises FrameError('not_a_frame').

    Two compiled patterns, one at each end of the line: the seq has at most as
    many digits as fit before ``body_mark`` within 21 bytes of its start."""
    if end - start < PREV_END + TRAILER + 16:
        raise FrameError("not_a_frame")
    head, tail = _PATTERNS.get(body_mark) or _compile(body_mark)
    h = head.match(buf, start, end)
    mark = end - TRAILER
    t = tail.fullmatch(buf, mark, end)
    if h is None or t is None:
        raise FrameError("not_a_frame")
    return int(h[2]), h[1], t[1], h.end(), mark


_PATTERNS: dict[bytes, tuple[Any, Any]] = {}


def _compile(body_mark: bytes) -> tuple[Any, Any]:
    """The patterns of :func:`_envelope`, compiled on first use (``re`` is not
    imported on the hook's path, which only writes frames)."""
    import re

    digits = 21 - len(body_mark)
    head = re.compile(re.escape(PREFIX) + b"([0-9a-f]{64})" + re.escape(SEQ_MARK) + b"([0-9]{1,%d})" % digits
                      + re.escape(body_mark))
    tail = re.compile(re.escape(HASH_MARK) + b"([0-9a-f]{64})" + re.escape(SUFFIX))
    _PATTERNS[body_mark] = (head, tail)
    return head, tail


def line_pattern() -> Any:
    """A compiled pattern matching one whole frame line — prefix, prev, seq, ``,"event":``,
    the event, hash, suffix and newline — for bulk readers that check thousands of lines
    a batch: a line it matches is one :func:`check_frame_at` accepts (without the hash
    check, which is the caller's) with the same seq, prev and hash; a line it does not
    match (a purged frame, damage, an incomplete last line) is for the step-by-step check.
    Group 1 is prev, 2 the seq's digits, 3 the hash; the event ends ``TRAILER`` bytes
    before the match's end."""
    global _LINE
    if _LINE is None:
        import re

        _LINE = re.compile(re.escape(PREFIX) + b"([0-9a-f]{64})" + re.escape(SEQ_MARK) + b"([0-9]{1,12})"
                           + re.escape(EVENT_MARK) + b"[^\n]*" + re.escape(HASH_MARK) + b"([0-9a-f]{64})"
                           + re.escape(SUFFIX))
    return _LINE


_LINE: Any = None


def is_purged(line: bytes) -> bool:
    """Whether a line is shaped like a purged frame (the bytes after ``seq``
    are ``,"purged":``); cheap, no JSON parsing, no hash."""
    seq_start = PREV_END + len(SEQ_MARK)
    j = line.find(b",", seq_start, seq_start + 21)
    return j > seq_start and line.startswith(PURGED_MARK, j)


def parse_purged(line: bytes) -> tuple[int, str, str]:
    """Return (seq, prev, hash) of a complete purged frame line (with its
    newline), checking its shape only: its hash covers the bytes it had
    before the purge. Raises FrameError('not_a_frame')."""
    seq, prev, claimed, body_start, mark = _envelope(line, 0, len(line), PURGED_MARK)
    # the stub is one JSON object, then only the padding spaces
    body = line[body_start:mark].rstrip(b" ")
    if not body.startswith(b"{") or not body.endswith(b"}") or b"\n" in body:
        raise FrameError("not_a_frame")
    return seq, prev.decode("ascii"), claimed.decode("ascii")


def parse_any(line: bytes, hasher: Any = None) -> tuple[int, str, str, bool]:
    """(seq, prev, hash, purged) of a frame or a purged frame. A frame's hash
    is checked; a purged frame's is taken as given (``verify`` checks that a
    purge record names it). Raises FrameError('not_a_frame' | 'bad_hash')."""
    try:
        seq, prev, digest = parse_envelope(line, hasher)
        return seq, prev, digest, False
    except FrameError as e:
        if str(e) != "not_a_frame" or not is_purged(line):
            raise
    seq, prev, digest = parse_purged(line)
    return seq, prev, digest, True


def purged_line(seq: int, prev: str, digest: str, stubs: list[bytes], length: int) -> bytes | None:
    """The purged frame replacing a frame line of ``length`` bytes (newline
    included): the first of ``stubs`` (serialised JSON objects, most to least
    informative) that fits, padded with spaces to exactly ``length``. None
    when even the last does not fit (an event of a few bytes, which holds no
    content anyway)."""
    head = b"".join((PREFIX, prev.encode("ascii"), SEQ_MARK, str(seq).encode("ascii"), PURGED_MARK))
    tail = b"".join((HASH_MARK, digest.encode("ascii"), SUFFIX))
    for stub in stubs:
        pad = length - len(head) - len(stub) - len(tail)
        if pad >= 0:
            return b"".join((head, stub, b" " * pad, tail))
    return None
