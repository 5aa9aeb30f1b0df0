"""Verifying session logs: every frame's hash, every link, the head.

For each log, ``verify_log`` checks, line by line, that the line is a sealed
frame (shape), that its hash matches its bytes, that its ``prev`` is the
previous line's hash (the genesis value for the first line) and that ``seq``
counts up from 0 without a gap; then that the head file names the last frame
(seq, hash and log size). A damaged frame is reported with its file, line,
frame number and reason, and checking goes on so that later damage is seen
too (up to ``MAX_BREAKS``).

Not every oddity is tampering. A crash can leave an incomplete last line
*beyond* what the head covers (a torn tail) or complete frames the head does
not yet name (a crash between the frame and the head update); the next
append repairs both and records a ``capture_gap`` frame. These are reported
as gaps, not breaks, and so are the ``capture_gap`` frames already in the log,
except those in which an append recorded damage it repaired (a head missing
or invalid beside more than one frame, a log shorter than its head:
``attrs.log_break``): those stay breaks, at their line (``verify_tail.py``).

The fast path hashes with hashlib (OpenSSL) over a memoryview, one line at a
time; ``jobs > 1`` splits a large log into byte ranges checked in parallel
processes and stitched at the boundaries.

A sealed log is checked segment by segment, by streaming decompression
(nothing is unpacked to disk), the chain continuing from each segment into
the next and into the active file; a break inside a segment names the
segment (``file``) and the line inside it. A seal interrupted by a crash
leaves a copy of sealed frames at the start of the active file
(``sealed_prefix``) or a head that still names the file's size before the
seal (``stale_head``): gaps, like the other crash residue.

A purged frame (``agentlog purge``: its event replaced by a stub, its hash
kept) is checked for its link and seq, its hash is taken as given, and it is
counted in ``purged``, not reported as a break, provided a purge record (the
``agentlog/purges`` log, ``log/purge.py``) names it by (log, seq, hash).
One that no record names is a break, ``purged_without_record``: otherwise
anyone could hide an edited frame by "purging" it.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

from agentlog.log.frame import (
    PREFIX,
    TRAILER,
    FrameError,
    genesis,
    parse_any,
    parse_seq,
)
from agentlog.log.layout import (
    SegmentRef,
    head_path,
    iter_logs,
    read_trailer,
    sealed_segments,
    split_log_path,
)
from agentlog.log.report import MAX_BREAKS as MAX_BREAKS, Break as Break, Gap as Gap, LogReport as LogReport, add_break as _brk
from agentlog.log.verify_tail import break_of, check_tail, recorded_break
from agentlog.log.writer import Tip

PARALLEL_MIN_BYTES = 4 << 20  # below this one process is faster than starting workers
# A capture_gap frame (always written by the log writer, so in canonical key
# order with a UUID event id) has this at a fixed offset: just after the
# 36-character event_id, i.e. _GAP_AT + the number of digits of its seq.
GAP_MARK = b',"schema_version":1,"kind":"capture_gap"'
_GAP_LEN = len(GAP_MARK)
_GAP_AT = len(b'{"v":1,"prev":"') + 64 + len(b'","seq":') + len(b',"event":{"event_id":"') + 36 + 1

CAVEAT = (
    "A clean result proves that every frame is intact and in order since it was written "
    "and that nothing was removed from the end without the head noticing. On its own it does "
    "not prove the log is what the agents sent: anyone with write access to the data directory "
    "could rewrite a whole chain, its head, the Merkle tree and its checkpoints together. A "
    "checkpoint kept where they cannot write (`agentlog checkpoint --publish`, or cosigned by a "
    "witness) turns this into evidence: any rewrite of what it covers is then a break."
)


# -- scanning ---------------------------------------------------------------

@dataclass
class _Chunk:
    """What one worker found in a byte range made of whole lines."""

    start_line: int  # 0-based index of the first line of the range (filled in by the caller)
    lines: int = 0
    first_prev: bytes | None = None
    first_seq: int | None = None
    last_hash: bytes | None = None
    last_seq: int | None = None
    breaks: list[tuple[int, str, str]] = field(default_factory=list)  # (line idx in chunk, reason, detail)
    gaps: list[tuple[int, int | None, dict[str, Any] | None]] = field(default_factory=list)
    """capture_gap frames: (line idx, seq, the attrs of one that records a break, else None)."""
    purged: list[tuple[int, int, bytes]] = field(default_factory=list)  # purged frames: (line idx, seq, hash)
    bad_lines: set[int] = field(default_factory=set)


MIN_FRAME = len(PREFIX) + 64 + len(b'","seq":0,"event":{}') + TRAILER - 1


def _scan(data: bytes | mmap.mmap, base: bytes | None, start: int = 0, end: int | None = None) -> _Chunk:
    """Check hashes and internal links/sequence of complete lines in ``data``.

    ``data[start:end]`` is whole lines. The link of the first line is checked
    by the caller (it needs the previous chunk), unless ``base`` is given.

    The loop is the hot path of ``verify``: per line one ``find``, a few
    slice comparisons and one SHA-256 over a memoryview (no copy). A line
    that fails any check is re-examined by the slow path, which names the
    reason.
    """
    buf = data
    mv = memoryview(buf)
    find = buf.find
    sha = hashlib.sha256
    out = _Chunk(start_line=0)
    stop = len(buf) if end is None else end
    pos = start
    idx = 0
    prev_hash = base
    expect_seq: int | None = None
    gap_at = next_width = 0
    t = TRAILER - 1  # TRAILER counts the newline
    while True:
        nl = find(b"\n", pos, stop)
        if nl < 0:
            break
        # One comparison covers the trailer and the hash, one the link and
        # the sequence number: each check is a slice and a compare in C.
        if (
            expect_seq is not None
            and prev_hash is not None
            and nl - pos >= MIN_FRAME
            and buf[nl - t : nl] == b',"hash":"%b"}' % (h := sha(mv[pos : nl - t]).hexdigest().encode())
            and buf[pos : pos + 128].startswith(b'{"v":1,"prev":"%b","seq":%d,' % (prev_hash, expect_seq))
        ):
            if buf[pos + gap_at : pos + gap_at + _GAP_LEN] == GAP_MARK:
                out.gaps.append((idx, expect_seq, recorded_break(bytes(buf[pos : nl + 1]))))
            prev_hash = h
            expect_seq += 1
            if expect_seq == next_width:  # one more digit from now on
                gap_at += 1
                next_width *= 10
        else:
            prev_hash, expect_seq = _slow_line(out, buf, pos, nl, idx, prev_hash, expect_seq)
            if expect_seq is not None:
                digits = len(str(expect_seq))
                gap_at = _GAP_AT + digits
                next_width = 10**digits
        idx += 1
        pos = nl + 1
    out.lines = idx
    out.last_hash = prev_hash
    out.last_seq = expect_seq - 1 if expect_seq is not None else None
    mv.release()
    return out


def _slow_line(
    out: _Chunk, buf: bytes | mmap.mmap, pos: int, nl: int, idx: int, prev_hash: bytes | None, expect_seq: int | None
) -> tuple[bytes | None, int | None]:
    """Examine one line that the fast path could not pass; record what is wrong.

    Returns the (prev_hash, expected next seq) to continue with.
    """
    breaks = out.breaks
    line = buf[pos : nl + 1]
    try:
        seq, prev_text, digest, purged = parse_any(line)
    except FrameError as e:
        reason = str(e)
        if len(breaks) < MAX_BREAKS:
            breaks.append((idx, reason, _REASON_TEXT[reason]))
        out.bad_lines.add(idx)
        if idx == 0:
            out.first_prev = None
        claimed = line[-67:-3]
        # A bad line's claimed hash still links the next one, so one damaged
        # frame is reported once, not twice.
        return (claimed if reason == "bad_hash" else None), (expect_seq + 1 if expect_seq is not None else None)
    prev = prev_text.encode()
    at = _GAP_AT + len(str(seq))
    if purged:
        out.purged.append((idx, seq, digest.encode()))
    elif line[at : at + _GAP_LEN] == GAP_MARK:
        out.gaps.append((idx, seq, recorded_break(bytes(line))))
    if idx == 0:
        out.first_prev = prev
        out.first_seq = seq
    if prev_hash is not None and prev != prev_hash:
        if len(breaks) < MAX_BREAKS:
            breaks.append((idx, "broken_link", "prev does not match the previous frame's hash"))
        out.bad_lines.add(idx)
    elif expect_seq is not None and seq != expect_seq:
        if len(breaks) < MAX_BREAKS:
            breaks.append((idx, "sequence_gap", f"expected seq {expect_seq}, found {seq}"))
        out.bad_lines.add(idx)
    return digest.encode(), seq + 1


_REASON_TEXT = {
    "not_a_frame": "line is not a sealed frame",
    "bad_hash": "hash does not match the frame's bytes",
}


def _scan_range(path: str, start: int, end: int) -> _Chunk:
    """Worker: map the file and scan [start, end) (whole lines)."""
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), end, access=mmap.ACCESS_READ)
    try:
        return _scan(m, None, start, end)
    finally:
        m.close()


def _split_points(buf: bytes | mmap.mmap, end: int, parts: int, start: int = 0) -> list[int]:
    """Byte offsets that cut [start, end) into ~equal ranges of whole lines."""
    points = [start]
    for i in range(1, parts):
        p = buf.find(b"\n", start + (end - start) * i // parts, end)
        if p < 0 or p + 1 >= end or p + 1 <= points[-1]:
            continue
        points.append(p + 1)
    points.append(end)
    return points


# -- one log ----------------------------------------------------------------

class _Chain:
    """Where the chain stands after the lines checked so far."""

    __slots__ = ("prev_hash", "prev_seq", "frames", "purged")

    def __init__(self, prev_hash: bytes | None, prev_seq: int = -1, frames: int = 0) -> None:
        self.prev_hash = prev_hash
        self.prev_seq = prev_seq
        self.frames = frames
        self.purged: list[tuple[int, str, int, int, str | None]] = []
        """Purged frames seen: (seq, hash, line, frame number, file)."""


def _add_chunk(report: LogReport, chain: _Chain, ch: _Chunk, line0: int, file: str | None) -> None:
    """Link a scanned chunk to the chain; record its breaks and gaps.

    ``line0`` is the number of lines of ``file`` before the chunk; frames are
    numbered across the whole chain (sealed segments included)."""
    if ch.lines == 0:
        return
    # the first line's link and seq, which the chunk could not check
    if 0 not in ch.bad_lines:
        if chain.prev_hash is not None and ch.first_prev != chain.prev_hash:
            what = "frame 0 does not start from this session's genesis" if chain.frames == 0 else "prev does not match the previous frame's hash"
            ch.breaks.insert(0, (0, "broken_link", what))
        elif ch.first_seq is not None and ch.first_seq != chain.prev_seq + 1:
            ch.breaks.insert(0, (0, "sequence_gap", f"expected seq {chain.prev_seq + 1}, found {ch.first_seq}"))
    for idx, reason, detail in ch.breaks:
        if len(report.breaks) < MAX_BREAKS:
            report.breaks.append(Break(line0 + idx + 1, chain.frames + idx, reason, detail, file))
    for idx, seq, broke in ch.gaps:
        if broke is not None:  # damage an append repaired: still a break
            _brk(report, break_of(broke, line0 + idx + 1, chain.frames + idx, file))
        else:
            report.gaps.append(Gap(line0 + idx + 1, seq, "capture_gap", "a capture_gap frame records lost bytes", file))
    for idx, seq, digest in ch.purged:
        chain.purged.append((seq, digest.decode("ascii"), line0 + idx + 1, chain.frames + idx, file))
    chain.frames += ch.lines
    chain.prev_hash = ch.last_hash
    chain.prev_seq = ch.last_seq if ch.last_seq is not None else chain.prev_seq + ch.lines


def _verify_sealed(report: LogReport, chain: _Chain, ref: SegmentRef, boundaries: list[tuple[bytes | None, int, int]]) -> None:
    """Check one sealed segment by streaming decompression (never unpacked to
    disk), continuing the chain; then that its name and trailer agree with
    what it holds."""
    from agentlog.log.segments import SegmentError, iter_sealed, zframe_index

    file = ref.path
    size = ref.end - ref.base
    boundaries.append((chain.prev_hash, chain.prev_seq, chain.frames))
    report.sealed_segments += 1
    report.sealed_disk_bytes += _size(file)
    if ref.base != report.sealed_bytes:
        _brk(report, Break(0, chain.frames, "segment_missing", f"the segment starts at logical byte {ref.base}, the segments before it end at {report.sealed_bytes}", file))
    seq_before, frames_before = chain.prev_seq, chain.frames
    lines = 0
    carry = b""
    readable = True
    try:
        for data in iter_sealed(file, size):
            buf = carry + data if carry else data
            end = buf.rfind(b"\n") + 1
            ch = _scan(buf, None, 0, end)
            _add_chunk(report, chain, ch, lines, file)
            lines += ch.lines
            carry = buf[end:]
    except SegmentError as e:
        readable = False
        _brk(report, Break(lines + 1, chain.frames, "segment_invalid", f"cannot be decompressed: {e}", file))
    meta = read_trailer(file)
    if not readable:
        # go on from what the trailer claims, so later damage is still seen
        h = meta.get("last_hash") if meta else None
        chain.prev_hash = h.encode() if isinstance(h, str) else None
        chain.prev_seq = ref.last_seq
        chain.frames = frames_before + ref.last_seq - ref.first_seq + 1
    else:
        if carry:
            _brk(report, Break(lines + 1, chain.frames, "truncated", "the segment ends inside a frame", file))
        if (seq_before + 1, chain.prev_seq, lines) != (ref.first_seq, ref.last_seq, ref.last_seq - ref.first_seq + 1):
            _brk(report, Break(0, frames_before, "segment_invalid", f"the name says seq {ref.first_seq}-{ref.last_seq}, the segment holds {lines} frames after seq {seq_before}", file))
        if meta is None:
            _brk(report, Break(0, frames_before, "segment_invalid", "the segment's trailer is missing or unreadable", file))
        else:
            claims = (meta.get("base"), meta.get("end"), meta.get("first_seq"), meta.get("last_seq"), meta.get("last_hash"))
            has = (ref.base, ref.end, ref.first_seq, ref.last_seq, chain.prev_hash.decode() if chain.prev_hash else None)
            if claims != has or zframe_index(file, size) is None:
                _brk(report, Break(0, frames_before, "segment_invalid", "the segment's trailer disagrees with its name or content", file))
    report.sealed_frames += chain.frames - frames_before
    report.sealed_bytes = ref.end


@dataclass
class _ActiveInfo:
    """What verification learned about the active file (for the sealer)."""

    size: int
    skip: int
    complete_end: int
    head: Tip | None
    sealed: list[SegmentRef]


def verify_log(path: str, *, jobs: int = 1, pool: ProcessPoolExecutor | None = None) -> LogReport:
    """Verify one session log: its sealed segments, its active file and its head.

    Sealed segments are checked first, without a lock (they never change).
    Then a shared lock on the active file is held while checking it, so no
    append or seal lands between reading the frames and the head (an append
    waits; ~0.3 s per 100 MB here). The active file is memory-mapped, not
    copied.
    """
    return _verify(path, jobs=jobs, pool=pool)[0]


def _verify(
    path: str, *, jobs: int = 1, pool: ProcessPoolExecutor | None = None
) -> tuple[LogReport, _ActiveInfo | None]:
    """``verify_log``, also returning what the sealer needs."""
    provider, key = split_log_path(path)
    report = LogReport(path=path, provider=provider, session=key)
    chain = _Chain(genesis(provider, key).encode())
    boundaries: list[tuple[bytes | None, int, int]] = []
    sealed = sealed_segments(path)
    for ref in sealed:
        _verify_sealed(report, chain, ref, boundaries)
    info: _ActiveInfo | None = None
    fd: int | None = None
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if not sealed:
            report.status = "broken"
            report.breaks.append(Break(0, None, "missing", "log file does not exist"))
            return report, None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_SH)
        # a seal may have added segments while the others were checked
        now = sealed_segments(path)
        if [r.path for r in now[: len(sealed)]] != [r.path for r in sealed]:
            _brk(report, Break(0, None, "segment_missing", "sealed segments were removed or renamed while verifying"))
        for ref in now[len(sealed) :]:
            _verify_sealed(report, chain, ref, boundaries)
            sealed.append(ref)
        size = os.fstat(fd).st_size if fd is not None else 0
        try:
            with open(head_path(path), "rb") as f:
                head_bytes: bytes | None = f.read(256)
        except FileNotFoundError:
            head_bytes = None
        data: bytes | mmap.mmap = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if fd is not None and size else b""
        try:
            info = _verify_active(report, chain, boundaries, sealed, path, data, size, head_bytes, jobs, pool)
        finally:
            if isinstance(data, mmap.mmap):
                data.close()
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock
    if chain.purged:
        _check_purged(report, chain, path)
    if report.breaks:
        report.status = "broken"
    elif report.gaps:
        report.status = "gaps"
    return report, info


def _verify_active(
    report: LogReport,
    chain: _Chain,
    boundaries: list[tuple[bytes | None, int, int]],
    sealed: list[SegmentRef],
    path: str,
    data: bytes | mmap.mmap,
    size: int,
    head_bytes: bytes | None,
    jobs: int,
    pool: ProcessPoolExecutor | None,
) -> _ActiveInfo:
    complete_end = data.rfind(b"\n") + 1
    sealed_tip = (chain.prev_seq, chain.prev_hash.decode()) if sealed and chain.prev_hash else None
    lines = 0
    skip = 0
    if sealed_tip is not None and size:
        from agentlog.log.segments import duplicate_prefix

        skip = duplicate_prefix(lambda n, off: bytes(data[off : off + n]), size, sealed, sealed_tip[1])
    if skip:
        # a copy of the last sealed segment(s): check it as the chain it was
        first = parse_seq(bytes(data[:128]) + b",")
        j = next(i for i, r in enumerate(sealed) if r.first_seq == first)
        copy = _Chain(*boundaries[j])
        ch = _scan(data, None, 0, skip)
        _add_chunk(report, copy, ch, 0, None)
        lines = ch.lines
        report.gaps.append(
            Gap(1, first, "sealed_prefix", f"the first {lines} frame(s) are also in sealed segments: a seal stopped before emptying the file; the next seal removes the copy")
        )
    chunks: list[_Chunk]
    if jobs > 1 and complete_end - skip >= PARALLEL_MIN_BYTES:
        points = _split_points(data, complete_end, jobs, skip)
        ranges = list(zip(points, points[1:]))
        from concurrent.futures import ProcessPoolExecutor

        own_pool = pool is None
        ex = pool or ProcessPoolExecutor(max_workers=jobs - 1)
        try:
            # the first range here, the others in workers
            futures = [ex.submit(_scan_range, path, a, b) for a, b in ranges[1:]]
            chunks = [_scan(data, None, ranges[0][0], ranges[0][1])]
            chunks += [f.result() for f in futures]
        finally:
            if own_pool:
                ex.shutdown()
    else:
        chunks = [_scan(data, None, skip, complete_end)]
    active_frames = chain.frames
    for ch in chunks:
        _add_chunk(report, chain, ch, lines, None)
        lines += ch.lines
    active_frames = chain.frames - active_frames
    report.frames = chain.frames
    report.bytes = report.sealed_bytes + size - skip
    report.last_hash = chain.prev_hash.decode() if chain.prev_hash else None
    head = check_tail(report, data, size, complete_end, lines, active_frames, sealed_tip, head_bytes)
    return _ActiveInfo(size, skip, complete_end, head, sealed)


def _check_purged(report: LogReport, chain: _Chain, path: str) -> None:
    """Count the purged frames a purge record names; the others are breaks."""
    from agentlog.log.purge_record import recorded_frames, root_of

    name = f"{report.provider}/{report.session}"
    recorded = recorded_frames(root_of(path))
    for seq, digest, line, frame, file in chain.purged:
        if (name, seq, digest) in recorded:
            report.purged += 1
        else:
            _brk(report, Break(line, frame, "purged_without_record", "the frame's event was removed, but no purge record names this frame and hash", file))


# -- many logs ---------------------------------------------------------------

def select_logs(root: str, session: str | None = None) -> list[str]:
    """All logs under ``root``, or those whose session key or provider/key is ``session``."""
    logs = iter_logs(root)
    if session is None:
        return logs
    from agentlog.log.layout import session_key

    wanted = {session, session_key(session)}
    return [p for p in logs if split_log_path(p)[1] in wanted or "/".join(split_log_path(p)) == session]


def verify_logs(paths: Iterable[str], *, jobs: int = 1) -> list[LogReport]:
    """Verify many logs: small ones spread over processes, big ones split."""
    paths = list(paths)
    if jobs <= 1 or not paths:
        return [verify_log(p) for p in paths]
    sizes = {p: _size(p) for p in paths}
    big = [p for p in paths if sizes[p] >= PARALLEL_MIN_BYTES]
    small = [p for p in paths if sizes[p] < PARALLEL_MIN_BYTES]
    from concurrent.futures import ProcessPoolExecutor

    results: dict[str, LogReport] = {}
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        for p in big:
            results[p] = verify_log(p, jobs=jobs, pool=ex)
        if len(small) > 1:
            batch = max(1, len(small) // (jobs * 4))
            for p, r in zip(small, ex.map(verify_log, small, chunksize=batch)):
                results[p] = r
        else:
            for p in small:
                results[p] = verify_log(p)
    return [results[p] for p in paths]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
