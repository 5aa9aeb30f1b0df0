"""Where each session's log lives.

``<root>/logs/<provider>/<key>.jsonl`` holds the frames and
``<key>.head`` the last frame's ``seq``, hash and the log size after it.
``key`` is the provider's session id when it is a safe file name, else a
hash of it; a payload without any session id goes to ``_unknown``.

Sealed (zstd-compressed) segments of a session's earlier frames live in
``<key>.sealed/<base>-<end>.<first_seq>-<last_seq>.jsonl.zst``: ``base`` and
``end`` are the segment's logical offsets (uncompressed bytes of the
session's chain before its first byte and after its last), so a reader finds
the segments, their order and what each holds from the names alone. Each
segment ends with a zstd skippable frame, the *trailer*, readable without
zstd: a JSON object with the last frame's hash and an index of the
segment's zstd frames. The hook path reads it only to recover from damage.

Standard library only (hook path).
"""

from __future__ import annotations

from agentlog.core import oslite as os

from agentlog.core.kinds import CAPTURE_TEST_PREFIX
from agentlog.core.paths import logs_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOG_SUFFIX = ".jsonl"
HEAD_SUFFIX = ".head"
SEALED_SUFFIX = ".sealed"
SEGMENT_SUFFIX = ".jsonl.zst"
# The trailer: a zstd skippable frame (magic 0x184D2A5A, little-endian
# u32 length, payload) whose payload is a JSON object followed by a fixed
# footer, the JSON's length (u32 LE) and FOOTER_MAGIC, so that it is found
# by reading the last bytes of the file.
SKIPPABLE_MAGIC = 0x184D2A5A
FOOTER_MAGIC = b"agentlog-seg-v1\n"
FOOTER_LEN = 4 + len(FOOTER_MAGIC)
_MAX_TRAILER = 64 << 20
UNKNOWN_SESSION = "_unknown"
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_MAX_KEY = 120


def session_key(session_id: str | None) -> str:
    """A file-name-safe key for a provider session id (stable, collision-free)."""
    if not session_id:
        return UNKNOWN_SESSION
    if len(session_id) <= _MAX_KEY and session_id[0] not in "._-" and _SAFE.issuperset(session_id):
        return session_id
    from agentlog.log.frame import sha256

    return "h-" + str(sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest())[:40]


def provider_dir(root: str, provider: str) -> str:
    return os.path.join(logs_dir(root), provider)


def log_path(root: str, provider: str, key: str) -> str:
    return os.path.join(provider_dir(root, provider), key + LOG_SUFFIX)


def head_path(log_file: str) -> str:
    return log_file[: -len(LOG_SUFFIX)] + HEAD_SUFFIX


def sealed_dir(log_file: str) -> str:
    """The directory holding a session's sealed segments."""
    return log_file[: -len(LOG_SUFFIX)] + SEALED_SUFFIX


def segment_name(base: int, end: int, first_seq: int, last_seq: int) -> str:
    return f"{base:012d}-{end:012d}.{first_seq}-{last_seq}{SEGMENT_SUFFIX}"


class SegmentRef:
    """What a sealed segment's name says: its file and logical range and seqs."""

    __slots__ = ("path", "base", "end", "first_seq", "last_seq")

    def __init__(self, path: str, base: int, end: int, first_seq: int, last_seq: int) -> None:
        self.path = path
        self.base = base
        self.end = end
        self.first_seq = first_seq
        self.last_seq = last_seq

    def __repr__(self) -> str:
        return f"SegmentRef({self.base}-{self.end}, seq {self.first_seq}-{self.last_seq})"


def parse_segment_name(name: str) -> tuple[int, int, int, int] | None:
    """(base, end, first_seq, last_seq) of a segment file name, else None."""
    if not name.endswith(SEGMENT_SUFFIX):
        return None
    offsets, dot, seqs = name[: -len(SEGMENT_SUFFIX)].partition(".")
    base, d1, end = offsets.partition("-")
    first, d2, last = seqs.partition("-")
    if not (dot and d1 and d2 and base.isdigit() and end.isdigit() and first.isdigit() and last.isdigit()):
        return None
    b, e, f, la = int(base), int(end), int(first), int(last)
    if e <= b or la < f:
        return None
    return b, e, f, la


def sealed_segments(log_file: str) -> list[SegmentRef]:
    """The sealed segments of a session, in chain order (by logical base)."""
    d = sealed_dir(log_file)
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for n in names:
        parsed = parse_segment_name(n)
        if parsed is not None:
            out.append(SegmentRef(os.path.join(d, n), *parsed))
    out.sort(key=lambda s: (s.base, s.end))
    return out


def read_trailer(path: str) -> dict[str, Any] | None:
    """The trailer object of a sealed segment, or None when it is missing or
    unreadable. ``data_end`` is added: where the zstd frames end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size < 8 + FOOTER_LEN:
            return None
        footer = os.pread(fd, FOOTER_LEN, size - FOOTER_LEN)
        if footer[4:] != FOOTER_MAGIC:
            return None
        n = int.from_bytes(footer[:4], "little")
        start = size - FOOTER_LEN - n - 8
        if n > _MAX_TRAILER or start < 0:
            return None
        block = os.pread(fd, n + 8, start)
        if int.from_bytes(block[:4], "little") != SKIPPABLE_MAGIC or int.from_bytes(block[4:8], "little") != n + FOOTER_LEN:
            return None
        from agentlog.core import fastjson

        meta = fastjson.loads(block[8:].decode("utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(meta, dict):
        return None
    meta["data_end"] = start
    return meta


def encode_trailer(meta: dict[str, Any]) -> bytes:
    """The bytes of a trailer holding ``meta`` (see ``read_trailer``)."""
    from agentlog.core import fastjson

    body = fastjson.dumps_bytes(meta)
    return b"".join(
        (
            SKIPPABLE_MAGIC.to_bytes(4, "little"),
            (len(body) + FOOTER_LEN).to_bytes(4, "little"),
            body,
            len(body).to_bytes(4, "little"),
            FOOTER_MAGIC,
        )
    )


def split_log_path(log_file: str) -> tuple[str, str]:
    """(provider, key) of a log file path."""
    provider = os.path.basename(os.path.dirname(log_file))
    name = os.path.basename(log_file)
    return provider, name[: -len(LOG_SUFFIX)] if name.endswith(LOG_SUFFIX) else name


def iter_logs(root: str) -> list[str]:
    """Every session log under the data root, sorted: the ``<key>.jsonl`` path
    of each session that has an active file or sealed segments (or both)."""
    base = logs_dir(root)
    out: list[str] = []
    try:
        providers = sorted(os.listdir(base))
    except FileNotFoundError:
        return out
    for p in providers:
        d = os.path.join(base, p)
        try:
            names = sorted(os.listdir(d))
        except (NotADirectoryError, FileNotFoundError):
            continue
        keys = {n[: -len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX)}
        keys.update(n[: -len(SEALED_SUFFIX)] for n in names if n.endswith(SEALED_SUFFIX))
        out.extend(os.path.join(d, n) for n in sorted(k + LOG_SUFFIX for k in keys if k))
    return out


def is_capture_test(log_file: str) -> bool:
    """Whether ``log_file`` is the log of ``agentlog install``'s capture test."""
    return split_log_path(log_file)[1].startswith(CAPTURE_TEST_PREFIX)


def capture_test_logs(root: str) -> list[tuple[str, str, int]]:
    """(provider, session key, modified at in µs) of every capture-test log, newest first."""
    out = []
    for path in iter_logs(root):
        if is_capture_test(path):
            provider, key = split_log_path(path)
            try:
                mtime = os.stat(path).st_mtime_ns // 1000
            except OSError:
                mtime = 0
            out.append((provider, key, mtime))
    out.sort(key=lambda r: (-r[2], r[1]))
    return out
