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
as gaps, not breaks, and so are the ``capture_gap`` frames already in the log.

The fast path hashes with hashlib (OpenSSL) over a memoryview, one line at a
time; ``jobs > 1`` splits a large log into byte ranges checked in parallel
processes and stitched at the boundaries.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from .frame import PREFIX, PREV_END, PREV_START, TRAILER, FrameError, genesis, parse_envelope, parse_seq
from .layout import head_path, iter_logs, split_log_path
from .writer import Tip, parse_head

MAX_BREAKS = 20
PARALLEL_MIN_BYTES = 4 << 20  # below this one process is faster than starting workers
# canonical key order puts kind third, so this matches only the top-level kind
GAP_MARK = b',"schema_version":1,"kind":"capture_gap"'

CAVEAT = (
    "A clean result proves that every frame is intact and in order since it was written "
    "and that nothing was removed from the end without the head noticing. It does not prove "
    "the log is what the agents sent: anyone with write access to the data directory could "
    "rewrite a whole chain and its head. Ship the logs (or their head hashes) somewhere the "
    "agents cannot write to turn this self-check into evidence."
)


@dataclass
class Break:
    """One place where a log is not what was written."""

    line: int
    """1-based line number in the file (0 for the head file)."""
    frame: int | None
    """The frame number expected at that line."""
    reason: str
    """bad_hash, not_a_frame, broken_link, sequence_gap, torn_tail, head_missing,
    head_invalid, head_mismatch, truncated."""
    detail: str


@dataclass
class Gap:
    """A recorded or pending loss of capture (a crash), not tampering."""

    line: int
    frame: int | None
    reason: str
    detail: str


@dataclass
class LogReport:
    """The verification result of one session log."""

    path: str
    provider: str
    session: str
    frames: int = 0
    bytes: int = 0
    status: str = "intact"
    """intact, gaps (intact, with recorded or pending capture gaps) or broken."""
    last_hash: str | None = None
    breaks: list[Break] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    gaps: list[tuple[int, int | None]] = field(default_factory=list)  # capture_gap frames: (line idx, seq)
    bad_lines: set[int] = field(default_factory=set)


def _scan(data: bytes | memoryview, base: bytes | None) -> _Chunk:
    """Check hashes and internal links/sequence of complete lines in ``data``.

    ``data`` ends with a newline. The link of the first line is checked by
    the caller (it needs the previous chunk), unless ``base`` is given.
    """
    buf = bytes(data) if isinstance(data, memoryview) else data
    mv = memoryview(buf)
    find = buf.find
    sha = hashlib.sha256
    out = _Chunk(start_line=0)
    breaks = out.breaks
    pos = 0
    idx = 0
    prev_hash = base
    expect_seq: int | None = None
    n_tail = TRAILER - 1  # TRAILER counts the newline
    while True:
        nl = find(b"\n", pos)
        if nl < 0:
            break
        claimed = buf[nl - 66 : nl - 2]
        ok = (
            nl - pos > PREV_END + n_tail
            and buf[nl - n_tail : nl - n_tail + 9] == b',"hash":"'
            and buf[nl - 2 : nl] == b'"}'  # not covered by the hash: check it
            and buf.startswith(PREFIX, pos)
            and sha(mv[pos : nl - n_tail]).hexdigest().encode() == claimed
        )
        if ok:
            prev = buf[pos + PREV_START : pos + PREV_END]
            seq = parse_seq(buf[pos : pos + PREV_END + 30])
            if idx == 0:
                out.first_prev = prev
                out.first_seq = seq
            if prev_hash is not None and prev != prev_hash and len(breaks) < MAX_BREAKS:
                breaks.append((idx, "broken_link", "prev does not match the previous frame's hash"))
                out.bad_lines.add(idx)
            if expect_seq is not None and seq != expect_seq and len(breaks) < MAX_BREAKS:
                if idx not in out.bad_lines:
                    breaks.append((idx, "sequence_gap", f"expected seq {expect_seq}, found {seq}"))
                    out.bad_lines.add(idx)
            if buf.find(GAP_MARK, pos + PREV_END, pos + PREV_END + 200) >= 0:
                out.gaps.append((idx, seq))
            expect_seq = seq + 1
            prev_hash = claimed
            out.last_seq = seq
        else:
            reason = _line_problem(buf[pos : nl + 1])
            if len(breaks) < MAX_BREAKS:
                breaks.append((idx, reason, _REASON_TEXT[reason]))
            out.bad_lines.add(idx)
            # A bad line's claimed hash (if any) still links the next one,
            # so one damaged frame is reported once, not twice.
            prev_hash = claimed if reason == "bad_hash" else None
            if idx == 0:
                out.first_prev = None
            expect_seq = expect_seq + 1 if expect_seq is not None else None
            out.last_seq = expect_seq - 1 if expect_seq is not None else None
        out.last_hash = prev_hash
        idx += 1
        pos = nl + 1
    out.lines = idx
    return out


_REASON_TEXT = {
    "not_a_frame": "line is not a sealed frame",
    "bad_hash": "hash does not match the frame's bytes",
}


def _line_problem(line: bytes) -> str:
    try:
        parse_envelope(line)
    except FrameError as e:
        return str(e)
    return "bad_hash"  # unreachable in practice: the fast check failed


def _scan_range(path: str, start: int, end: int) -> _Chunk:
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    return _scan(data, None)


def _split_points(data: bytes, parts: int) -> list[int]:
    """Byte offsets that cut ``data`` into ~equal ranges of whole lines."""
    n = len(data)
    points = [0]
    for i in range(1, parts):
        p = data.find(b"\n", n * i // parts)
        if p < 0 or p + 1 >= n or p + 1 <= points[-1]:
            continue
        points.append(p + 1)
    points.append(n)
    return points


# -- one log ----------------------------------------------------------------

def verify_log(path: str, *, jobs: int = 1, pool: ProcessPoolExecutor | None = None) -> LogReport:
    """Verify one session log file and its head."""
    provider, key = split_log_path(path)
    report = LogReport(path=path, provider=provider, session=key)
    head_file = head_path(path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        report.status = "broken"
        report.breaks.append(Break(0, None, "missing", "log file does not exist"))
        return report
    try:
        # A shared lock: no append lands between reading the log and its head.
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) if size else b""
        try:
            with open(head_file, "rb") as f:
                head_bytes: bytes | None = f.read(256)
        except FileNotFoundError:
            head_bytes = None
    finally:
        os.close(fd)
    report.bytes = size
    complete_end = data.rfind(b"\n") + 1
    body = data[:complete_end]
    torn = data[complete_end:]

    chunks: list[_Chunk]
    if jobs > 1 and len(body) >= PARALLEL_MIN_BYTES:
        points = _split_points(body, jobs)
        ranges = list(zip(points, points[1:]))
        own_pool = pool is None
        ex = pool or ProcessPoolExecutor(max_workers=jobs)
        try:
            chunks = list(ex.map(_scan_range, [path] * len(ranges), [a for a, _ in ranges], [b for _, b in ranges]))
        finally:
            if own_pool:
                ex.shutdown()
    else:
        chunks = [_scan(body, None)]

    _stitch(report, chunks, genesis(provider, key).encode())
    _check_tail(report, data, complete_end, torn, head_bytes)
    if report.breaks:
        report.status = "broken"
    elif report.gaps:
        report.status = "gaps"
    return report


def _stitch(report: LogReport, chunks: list[_Chunk], genesis_hash: bytes) -> None:
    line0 = 0
    prev_hash: bytes | None = genesis_hash
    prev_seq = -1
    for ch in chunks:
        if ch.lines == 0:
            continue
        # the first line's link and seq, which the chunk could not check
        if 0 not in ch.bad_lines:
            if prev_hash is not None and ch.first_prev != prev_hash:
                what = "frame 0 does not start from this session's genesis" if line0 == 0 else "prev does not match the previous frame's hash"
                ch.breaks.insert(0, (0, "broken_link", what))
            elif ch.first_seq is not None and ch.first_seq != prev_seq + 1:
                ch.breaks.insert(0, (0, "sequence_gap", f"expected seq {prev_seq + 1}, found {ch.first_seq}"))
        for idx, reason, detail in ch.breaks:
            if len(report.breaks) < MAX_BREAKS:
                report.breaks.append(Break(line0 + idx + 1, line0 + idx, reason, detail))
        for idx, seq in ch.gaps:
            report.gaps.append(Gap(line0 + idx + 1, seq, "capture_gap", "a capture_gap frame records lost bytes"))
        line0 += ch.lines
        prev_hash = ch.last_hash
        prev_seq = ch.last_seq if ch.last_seq is not None else prev_seq + ch.lines
    report.frames = line0
    report.last_hash = prev_hash.decode() if prev_hash else None


def _check_tail(report: LogReport, data: bytes, complete_end: int, torn: bytes, head_bytes: bytes | None) -> None:
    """Compare the head with the end of the log; classify a torn tail."""
    frames = report.frames
    if head_bytes is None:
        # No head yet: a crash inside the first append (mid-frame 0, or after
        # frame 0 but before the head) leaves at most one frame plus a torn line.
        if frames == 0:
            _torn_gap(report, torn)
            return
        if frames == 1 and not report.breaks:
            report.gaps.append(Gap(0, 0, "head_missing", "no head after the first frame: a crash inside the first append"))
            _torn_gap(report, torn)
            return
        report.breaks.append(Break(0, None, "head_missing", f"head file is missing; log has {frames} frames"))
        return
    try:
        head = parse_head(head_bytes)
    except (ValueError, UnicodeDecodeError) as e:
        report.breaks.append(Break(0, None, "head_invalid", f"head file is unreadable: {e}"))
        return
    if head.offset > len(data):
        report.breaks.append(
            Break(frames + 1, head.seq, "truncated", f"head names frame {head.seq} ending at byte {head.offset}, log has {len(data)} bytes")
        )
        return
    if head.offset > complete_end:
        # the head covers bytes of the incomplete last line: that line was complete once
        report.breaks.append(Break(frames + 1, head.seq, "truncated", "the frame the head names has lost its end"))
        return
    # the head must name the frame ending exactly at head.offset
    if head.offset == 0:
        line = b""
    else:
        start = data.rfind(b"\n", 0, head.offset - 1) + 1
        line = data[start : head.offset]
    try:
        seq, _prev, digest = parse_envelope(line)
        ok = seq == head.seq and digest == head.hash
    except FrameError:
        ok = False
    if not ok:
        report.breaks.append(
            Break(0, head.seq, "head_mismatch", f"head names frame {head.seq} ({head.hash[:16]}…) at byte {head.offset}, which the log does not have there")
        )
        return
    if head.offset < complete_end:
        extra = data[head.offset:complete_end].count(b"\n")
        report.gaps.append(
            Gap(frames - extra + 1, head.seq + 1, "head_behind", f"{extra} frame(s) after the head: a crash between writing a frame and updating the head; the next append adopts them")
        )
    _torn_gap(report, torn)


def _torn_gap(report: LogReport, torn: bytes) -> None:
    if torn:
        report.gaps.append(
            Gap(report.frames + 1, None, "torn_tail", f"{len(torn)} bytes of an incomplete frame after the last one: a crash mid-append; the next append cuts them and records a capture_gap")
        )


# -- many logs ---------------------------------------------------------------

def select_logs(root: str, session: str | None = None) -> list[str]:
    """All logs under ``root``, or those whose session key or provider/key is ``session``."""
    logs = iter_logs(root)
    if session is None:
        return logs
    from .layout import session_key

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


def summary_tip(report: LogReport) -> Tip | None:
    """The last frame as a Tip (for callers that continue from a verified log)."""
    if report.last_hash is None or report.frames == 0:
        return None
    return Tip(report.frames - 1, report.last_hash, report.bytes)
