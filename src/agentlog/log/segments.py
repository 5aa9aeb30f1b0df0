"""Reading a session log across its sealed segments and its active file.

A session's chain is stored as zero or more sealed segments (zstd, in
``<key>.sealed/``, see ``layout``) followed by the active file
``<key>.jsonl``. Every frame has a *logical offset*: the number of
uncompressed bytes of the chain before it. Sealing moves frames from the
active file into a segment without changing their logical offsets, so a
reader that remembers "ingested up to logical offset N" stays right however
often the log is sealed.

One crash leaves the same frames in both places: a seal that stopped after
its segment was renamed into place and before it emptied the active file.
The active file then *starts* with a copy of the last sealed segment(s)
(``duplicate_prefix``); readers skip that copy, and the next seal removes it.

Readers take a shared ``flock`` on the active file only for an instant
(listing the segments and reading one chunk); sealing changes the active
file only under the exclusive lock, so every chunk comes from one consistent
state, and a reader that sees the state change re-lists and goes on from the
same logical offset. Sealed segments never change once renamed into place.

Not on the hook path: this module imports ``zstandard``.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator

from agentlog.core import AgentlogError
from agentlog.log.frame import HASH_MARK, PREFIX, PREV_END, SEQ_MARK, SUFFIX, TRAILER
from agentlog.log.layout import SegmentRef, read_trailer, sealed_segments

# Decompression never needs more than this window (the sealer caps its own);
# a segment asking for more is refused rather than allowed to allocate it.
MAX_WINDOW = 1 << 27


class SegmentError(AgentlogError, ValueError):
    """A sealed segment cannot be read back (corrupt zstd data, wrong size)."""


@dataclass(frozen=True)
class Segment:
    """One piece of a session's chain, in logical order."""

    path: str
    sealed: bool
    base_offset: int
    """Logical offset of the segment's first byte."""
    size: int
    """Uncompressed bytes (for the active file: its size minus ``skip``)."""
    first_seq: int | None
    last_seq: int | None
    skip: int = 0
    """Active file only: bytes at its start that are also sealed (crash residue)."""

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.size


# -- the active file ------------------------------------------------------------


def _first_seq(head: bytes) -> int | None:
    """The seq of a frame from its first bytes (no hash check)."""
    if not head.startswith(PREFIX) or head[PREV_END : PREV_END + len(SEQ_MARK)] != SEQ_MARK:
        return None
    start = PREV_END + len(SEQ_MARK)
    end = head.find(b",", start)
    digits = head[start:end] if end > start else b""
    return int(digits) if digits.isdigit() else None


def duplicate_prefix(read: Any, size: int, sealed: list[SegmentRef], last_hash: str | None) -> int:
    """How many bytes at the start of the active file are also sealed.

    ``read(n, offset)`` reads the active file. A seal that stopped between
    renaming its segment into place and emptying the active file leaves the
    segment's frames at the start of the file; their copy starts with the
    first frame of a sealed segment and ends with the last sealed frame. It
    is recognised by the first frame's seq (a sealed segment starts with it)
    and the hash of the frame ending where the copy must end (the last
    sealed hash, from the trailer). 0 in every normal state."""
    if not sealed or size == 0 or last_hash is None:
        return 0
    f0 = _first_seq(read(min(size, 128), 0))
    if f0 is None or f0 > sealed[-1].last_seq:
        return 0
    for ref in sealed:
        if ref.first_seq == f0:
            dup = sealed[-1].end - ref.base
            break
    else:
        return 0
    if dup > size or dup < TRAILER:
        return 0
    if read(TRAILER, dup - TRAILER) != HASH_MARK + last_hash.encode("ascii") + SUFFIX:
        return 0
    return dup


def _last_hash(sealed: list[SegmentRef]) -> str | None:
    if not sealed:
        return None
    meta = read_trailer(sealed[-1].path)
    h = meta.get("last_hash") if meta else None
    return h if isinstance(h, str) and len(h) == 64 else None


class _Active:
    """The active file, opened once, with the sealed segments it follows.

    ``refresh`` (under the shared lock) re-reads the state; ``same`` tells
    whether it is still the one a reader started from."""

    def __init__(self, log_file: str) -> None:
        self.log_file = log_file
        try:
            self.fd: int | None = os.open(log_file, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self.fd = None
        self.sealed: list[SegmentRef] = []
        self.names: tuple[str, ...] = ()
        self.skip = 0
        self.size = 0

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> _Active:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lock(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_SH)

    def unlock(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def refresh(self) -> None:
        """Read the state; call with the lock held."""
        self.sealed = sealed_segments(self.log_file)
        self.names = tuple(r.path for r in self.sealed)
        self.size = os.fstat(self.fd).st_size if self.fd is not None else 0
        self.skip = self._skip(self.size)

    def _skip(self, size: int) -> int:
        fd = self.fd
        if fd is None or not self.sealed:
            return 0
        return duplicate_prefix(lambda n, off: os.pread(fd, n, off), size, self.sealed, _last_hash(self.sealed))

    def same(self) -> bool:
        """Is the state still the one ``refresh`` saw? Call with the lock held.

        A seal that empties the active file either adds a segment (the names
        change) or removes a crash copy (``skip`` was not 0 and now is)."""
        if tuple(r.path for r in sealed_segments(self.log_file)) != self.names:
            return False
        if self.skip == 0 or self.fd is None:
            return True
        return self._skip(os.fstat(self.fd).st_size) == self.skip

    @property
    def base(self) -> int:
        return self.sealed[-1].end if self.sealed else 0

    def segments(self) -> list[Segment]:
        out = [Segment(r.path, True, r.base, r.end - r.base, r.first_seq, r.last_seq) for r in self.sealed]
        out.append(Segment(self.log_file, False, self.base, max(0, self.size - self.skip), None, None, self.skip))
        return out


def list_segments(log_file: str) -> list[Segment]:
    """The sealed segments in order, then the active file (always last, size 0
    when it is empty or absent)."""
    with _Active(log_file) as active:
        active.lock()
        try:
            active.refresh()
        finally:
            active.unlock()
        return active.segments()


def logical_size(log_file: str) -> int:
    """Uncompressed bytes of the whole chain (sealed + active, without the
    crash copy), i.e. the logical offset just after the last byte."""
    return list_segments(log_file)[-1].end_offset


# -- sealed segments --------------------------------------------------------------


def _decompressor() -> Any:
    import zstandard

    return zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)


def zframe_index(path: str, size: int) -> list[tuple[int, int, int, int]] | None:
    """(compressed start, compressed size, uncompressed start, uncompressed size)
    of each zstd frame of a segment, from its trailer; None when the trailer
    is missing or disagrees with the segment's size (then read from the start)."""
    meta = read_trailer(path)
    if meta is None:
        return None
    frames = meta.get("zframes")
    if not isinstance(frames, list):
        return None
    out = []
    c = u = 0
    for item in frames:
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, int) and x > 0 for x in item)):
            return None
        out.append((c, item[0], u, item[1]))
        c += item[0]
        u += item[1]
    if u != size or c != meta.get("data_end"):
        return None
    return out


def iter_sealed(path: str, size: int, start: int = 0, chunk: int = 8 << 20) -> Iterator[bytes]:
    """Uncompressed bytes of a sealed segment from ``start`` (relative) on, by
    streaming decompression from the zstd frame holding ``start``. Raises
    SegmentError if the data is corrupt or not ``size`` bytes long."""
    import zstandard

    if start >= size:
        return
    index = zframe_index(path, size) if start else None
    cstart = ustart = 0
    if index:
        for c0, _cs, u0, us in index:
            if u0 <= start < u0 + us:
                cstart, ustart = c0, u0
                break
    f: BinaryIO
    with open(path, "rb") as f:
        f.seek(cstart)
        reader = _decompressor().stream_reader(f, read_size=1 << 20, read_across_frames=True)
        pos = ustart
        try:
            while pos < start:  # decompress and drop what lies before ``start``
                data = reader.read(min(chunk, start - pos))
                if not data:
                    raise SegmentError(f"{path}: ends at byte {pos}, expected {size}")
                pos += len(data)
            while pos < size:
                data = reader.read(min(chunk, size - pos))
                if not data:
                    raise SegmentError(f"{path}: ends at byte {pos}, expected {size}")
                pos += len(data)
                yield data
            if reader.read(1):
                raise SegmentError(f"{path}: holds more than {size} bytes")
        except zstandard.ZstdError as e:
            raise SegmentError(f"{path}: {e}") from e


# -- reading the whole chain -----------------------------------------------------


def read_from(log_file: str, logical_offset: int, chunk: int = 8 << 20) -> Iterator[tuple[int, bytes]]:
    """Yield ``(logical offset, bytes)`` for everything from ``logical_offset``
    to the end: sealed segments (streaming decompression, starting inside a
    segment if need be), then the active file up to its current end (which
    may end in an incomplete line). Chunks are at most ``chunk`` bytes."""
    off = logical_offset
    with _Active(log_file) as active:
        while True:
            active.lock()
            try:
                active.refresh()
            finally:
                active.unlock()
            for ref in active.sealed:
                if off >= ref.end:
                    continue
                if off < ref.base:
                    raise SegmentError(f"{log_file}: no sealed segment holds logical bytes {off}-{ref.base}")
                rel = off - ref.base
                for data in iter_sealed(ref.path, ref.end - ref.base, rel, chunk):
                    yield ref.base + rel, data
                    rel += len(data)
                off = ref.end
            if active.fd is None:
                return
            base = active.base
            while True:
                active.lock()
                try:
                    if not active.same():
                        break  # sealed meanwhile: list again, go on from ``off``
                    data = os.pread(active.fd, chunk, active.skip + off - base)
                finally:
                    active.unlock()
                if not data:
                    return
                yield off, data
                off += len(data)


def line_at(log_file: str, logical_offset: int, chunk: int = 16 << 10) -> bytes:
    """The line (a frame, with its newline) that starts at ``logical_offset``; what there is
    up to the end when no newline follows (a frame being written). :func:`read_from` for one
    line: the state is read once and the active file read under one shared lock."""
    parts: list[bytes] = []
    with _Active(log_file) as active:
        active.lock()
        try:
            active.refresh()
            base = active.base
            if logical_offset >= base:
                if active.fd is None:
                    return b""
                pos = active.skip + logical_offset - base
                while True:
                    data = os.pread(active.fd, chunk, pos)
                    nl = data.find(b"\n")
                    if nl >= 0:
                        parts.append(data[: nl + 1])
                        return b"".join(parts)
                    if not data:
                        return b"".join(parts)
                    parts.append(data)
                    pos += len(data)
        finally:
            active.unlock()
    # sealed segments never change: no lock needed to read them (a frame never spans two)
    for ref in active.sealed:
        if ref.base <= logical_offset < ref.end:
            for data in iter_sealed(ref.path, ref.end - ref.base, logical_offset - ref.base, chunk):
                nl = data.find(b"\n")
                if nl >= 0:
                    parts.append(data[: nl + 1])
                    break
                parts.append(data)
            return b"".join(parts)
    raise SegmentError(f"{log_file}: no sealed segment holds logical byte {logical_offset}")


def line_ending_at(log_file: str, logical_offset: int) -> bytes:
    """The complete frame line (with its newline) whose newline is the byte
    just before ``logical_offset``; b"" if that byte is not a newline."""
    if logical_offset <= 0:
        return b""
    with _Active(log_file) as active:
        active.lock()
        try:
            active.refresh()
            base = active.base
            if logical_offset > base:
                if active.fd is None:
                    return b""
                return _line_ending_at_fd(active.fd, active.skip + logical_offset - base, active.skip)
        finally:
            active.unlock()
    # sealed segments never change: no lock needed to read them
    for ref in active.sealed:
        if ref.base < logical_offset <= ref.end:
            return _line_ending_in_sealed(ref, logical_offset - ref.base)
    return b""


def _line_ending_in_sealed(ref: SegmentRef, rel_end: int) -> bytes:
    """The line ending just before ``rel_end`` inside one segment. Segments'
    zstd frames end on line ends, so it lies in one zstd frame."""
    size = ref.end - ref.base
    index = zframe_index(ref.path, size)
    start = 0
    if index:
        for _c0, _cs, u0, us in index:
            if u0 < rel_end <= u0 + us:
                start = u0
                break
    pos = start
    tail = b""
    for data in iter_sealed(ref.path, size, start):
        take = data[: rel_end - pos]
        nl = take.rfind(b"\n", 0, len(take) - 1) if pos + len(take) == rel_end else take.rfind(b"\n")
        tail = take[nl + 1 :] if nl >= 0 else tail + take
        pos += len(take)
        if pos >= rel_end:
            break
    return tail if tail.endswith(b"\n") and pos == rel_end else b""


def _line_ending_at_fd(fd: int, end: int, floor: int = 0) -> bytes:
    """The complete line whose newline is the byte before ``end`` (b"" if none);
    it starts no earlier than ``floor``."""
    if end <= floor or os.pread(fd, 1, end - 1) != b"\n":
        return b""
    parts: list[bytes] = []
    pos = end - 1
    step = 4096
    while pos > floor:
        start = max(floor, pos - step)
        piece = os.pread(fd, pos - start, start)
        nl = piece.rfind(b"\n")
        if nl >= 0:
            parts.append(piece[nl + 1 :])
            break
        parts.append(piece)
        pos = start
        step = min(step * 4, 16 << 20)
    parts.reverse()
    return b"".join(parts) + b"\n"


__all__ = [
    "Segment",
    "SegmentError",
    "duplicate_prefix",
    "iter_sealed",
    "line_ending_at",
    "list_segments",
    "logical_size",
    "read_from",
    "line_at",
]


def lines_from(log_file: str, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """(logical offset, complete line with its newline) of every complete line of a
    session's chain from ``start`` (a line's first byte): sealed segments, then the
    active file; an incomplete last line is left out."""
    carry = b""
    base = start
    for off, data in read_from(log_file, start):
        buf = carry + data if carry else data
        pos = 0
        if not carry:
            base = off
        while True:
            nl = buf.find(b"\n", pos)
            if nl < 0:
                break
            yield base + pos, buf[pos : nl + 1]
            pos = nl + 1
        carry = buf[pos:]
        base += pos
