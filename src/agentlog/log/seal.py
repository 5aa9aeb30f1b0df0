"""Sealing: compress a session log's frames into a zstd segment, in place.

A session that ended, or has been idle for a while (``seal_idle_hours``),
has its active file's complete frames moved into a sealed segment
``<key>.sealed/<base>-<end>.<first>-<last>.jsonl.zst`` (see ``layout``) and
the active file emptied; a session that resumes appends to the empty file,
continuing its chain, and a later seal writes the next segment. Frames are
not changed: the hash still covers the uncompressed bytes, and every frame
keeps its logical offset (``segments``).

How one seal goes, and why it is safe at any instant:

1. Verify the whole log (sealed segments, active file, head) under the usual
   shared lock. A log with a break is never sealed: the evidence stays as it
   is. A torn last line is not sealed either; it stays for the writer's
   repair.
2. Compress the active file's complete frames into a temporary file, without
   any lock: those bytes never change (appends go after them), so hooks are
   not held up by the compression, which is slow at high levels.
3. Take the writer's exclusive ``flock`` on the active file (no append lands
   from here on), check that the frames are still there, and pick up frames
   appended during step 2 (compressed as one more zstd frame of the segment,
   then locked again).
4. Write the trailer, ``fsync``, rename the segment into place, ``fsync`` the
   directory. A crash from here until step 5 leaves the frames both sealed and
   in the active file: readers, ``verify`` and the next seal recognise that
   copy (``segments.duplicate_prefix``) and the writer just goes on appending
   after it; the next seal removes it. Nothing is lost or reported broken.
5. Truncate the active file to 0 and ``fsync`` it, *then* rewrite the head as
   ``v1 <last sealed seq> <hash> 0``. The file is truncated, never unlinked: a
   hook blocked on the lock holds that inode and appends to it next. A crash
   between the two leaves a head that names the last sealed frame beyond the
   (now empty) file; the writer recognises it from the last segment's trailer
   and continues the chain. Bytes of a torn last line are written back after
   the head, so the writer's repair records them as it always does (a crash
   in that instant loses those bytes of an incomplete frame, not a frame).

Only one sealer runs at a time (``state/seal.lock``).
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from agentlog import __version__
from agentlog.core.fileio import write_atomic
from agentlog.core.locks import Busy, open_locked
from agentlog.core.paths import FILE_MODE, ensure_dir, fsync_path, state_dir
from agentlog.log.frame import TRAILER, parse_any, parse_seq
from agentlog.log.layout import (
    encode_trailer,
    head_path,
    iter_logs,
    sealed_dir,
    sealed_segments,
    segment_name,
    split_log_path,
)
from agentlog.log.purge_record import root_of
from agentlog.log.writer import Tip, format_head

DEFAULT_LEVEL = 19
"""zstd level: 19 with long-distance matching gives ~13.5:1 on agent logs at
~2.5 MB/s of one core; sealing runs in the background, once per session."""
WINDOW_LOG = 27
"""Window up to 128 MiB (the zstd default limit for decoders), shrunk to
each zstd frame's size."""
ZFRAME_TARGET = 64 << 20
"""A segment is cut into independent zstd frames of about this many
uncompressed bytes, on line ends: a reader can start at any of them, and
decoding memory is bounded by it."""
ENDED_GRACE_SECONDS = 600
"""A session whose last event is ``session_ended`` is sealed once its log
has been quiet this long, without waiting for the idle time."""
_READ = 8 << 20
_MAX_ROUNDS = 3

MaySeal = Callable[[str, str, int], bool]
"""``may_seal(provider, key, end_logical_offset)``: may frames up to that
logical offset be sealed now (e.g. has the store ingested them)?"""


def _fault(point: str) -> None:
    """Crash tests: ``AGENTLOG_FAULT_SEAL=<point>`` ends the process right
    there (``os._exit``, like a kill); ``<point>:<ms>`` pauses there instead.
    Points: ``compressed`` (before the exclusive lock), ``renamed`` (segment
    in place, file not yet emptied), ``truncated`` (file emptied, head not
    yet rewritten), ``head`` (head rewritten, torn bytes not yet back)."""
    fault = os.environ.get("AGENTLOG_FAULT_SEAL", "")
    if not fault:
        return
    name, _, ms = fault.partition(":")
    if name != point:
        return
    if ms.isdigit():
        time.sleep(int(ms) / 1000)
    else:
        os._exit(75)


class SealBusy(Busy):
    """Another process is sealing."""


@dataclass
class SealResult:
    """What sealing one log did (or would do)."""

    path: str
    provider: str
    session: str
    status: str = "nothing"
    """sealed, would_seal (dry run), nothing (no complete frame to seal),
    skipped (``may_seal`` said no), broken (verify found a break; not
    sealed) or error (``seal_idle`` only: an I/O error; nothing changed
    that a reader or the next seal cannot handle)."""
    reason: str = ""
    segment: str | None = None
    frames: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    base_offset: int = 0
    """Logical offset of the first sealed byte."""
    end_offset: int = 0
    """Logical offset just after the last sealed byte."""
    bytes_in: int = 0
    """Uncompressed bytes sealed."""
    bytes_out: int = 0
    """Size of the new segment file."""
    seconds: float = 0.0
    copy_left: bool = False
    """The active file could not be emptied (frames arrived that may not be
    sealed yet, or odd bytes): it keeps a copy of the sealed frames, which
    readers skip and the next seal removes."""
    copy_removed: int = 0
    """Bytes of an earlier interrupted seal's copy removed from the active file."""

    @property
    def ratio(self) -> float:
        return self.bytes_in / self.bytes_out if self.bytes_out else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratio"] = round(self.ratio, 2)
        return out


# -- locking -------------------------------------------------------------------


class SealLock:
    """``state/seal.lock``: one sealer at a time per data root."""

    def __init__(self, root: str, timeout: float) -> None:
        self.root = root
        self.timeout = timeout
        self.fd: int | None = None

    def __enter__(self) -> SealLock:
        d = state_dir(self.root)
        ensure_dir(d)
        fd = open_locked(os.path.join(d, "seal.lock"), self.timeout, FILE_MODE)
        if fd is None:
            raise SealBusy("another process is sealing session logs")
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# -- public ----------------------------------------------------------------------


def seal_log(
    log_file: str,
    *,
    level: int = DEFAULT_LEVEL,
    may_seal: MaySeal | None = None,
    dry_run: bool = False,
    lock_timeout: float = 5.0,
) -> SealResult:
    """Seal the complete frames of one session's active file into a new
    segment (see the module docstring). Raises SealBusy if another sealer
    holds the lock for ``lock_timeout`` seconds."""
    with SealLock(root_of(log_file), lock_timeout):
        return _seal(log_file, level, may_seal, dry_run)


def seal_idle(
    root: str,
    *,
    idle_seconds: float,
    ended_grace_seconds: float = ENDED_GRACE_SECONDS,
    level: int = DEFAULT_LEVEL,
    may_seal: MaySeal | None = None,
    dry_run: bool = False,
    logs: Iterable[str] | None = None,
    now: float | None = None,
    lock_timeout: float = 5.0,
    progress: Callable[[int, int, SealResult | None], None] | None = None,
) -> list[SealResult]:
    """Seal every log (of ``logs``, default all under ``root``) whose active
    file has not changed for ``idle_seconds``, or whose last event is
    ``session_ended`` and has not changed for ``ended_grace_seconds``.

    Returns one result per log that was due (sealed, would be sealed,
    skipped, broken or with nothing to seal); logs that are not due are left
    out. ``progress(done, total, result)`` is called after each log."""
    t = time.time() if now is None else now
    paths = iter_logs(root) if logs is None else list(logs)
    out: list[SealResult] = []
    with SealLock(root, lock_timeout):
        for i, path in enumerate(paths):
            res: SealResult | None = None
            due = _due(path, t, idle_seconds, ended_grace_seconds)
            if due:
                try:
                    res = _seal(path, level, may_seal, dry_run)
                    res.reason = res.reason or due
                except (OSError, RuntimeError, ValueError) as e:
                    provider, key = split_log_path(path)
                    res = SealResult(path=path, provider=provider, session=key, status="error", reason=f"{type(e).__name__}: {e}")
                out.append(res)
            if progress is not None:
                progress(i + 1, len(paths), res)
    return out


def _due(path: str, now: float, idle_seconds: float, grace: float) -> str:
    """Why the log is due for sealing ('' if it is not)."""
    try:
        st = os.stat(path)
    except OSError:
        return ""
    if st.st_size == 0:
        return ""
    quiet = now - st.st_mtime
    if quiet >= idle_seconds:
        return f"idle for {quiet / 3600:.1f} h" if quiet >= 3600 else f"idle for {quiet / 60:.0f} min"
    if quiet >= grace and _ended(path, st.st_size):
        return "session ended"
    return ""


def _ended(path: str, size: int) -> bool:
    """Is the last complete frame a ``session_ended`` event?"""
    import json

    with open(path, "rb") as f:
        start = max(0, size - (64 << 10))
        f.seek(start)
        tail = f.read(size - start)
    end = tail.rfind(b"\n")
    if end < 0:
        return False
    begin = tail.rfind(b"\n", 0, end) + 1
    if begin == 0 and start > 0:
        return False  # a last frame of more than 64 KiB is not a session_ended event
    line = tail[begin : end + 1]
    j = line.find(b',"event":')
    try:
        event = json.loads(line[j + 9 : len(line) - TRAILER])
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("kind") == "session_ended"


# -- one log -----------------------------------------------------------------------


def _seal(log_file: str, level: int, may_seal: MaySeal | None, dry_run: bool) -> SealResult:
    from agentlog.log.verify import _verify

    started = time.monotonic()
    provider, key = split_log_path(log_file)
    res = SealResult(path=log_file, provider=provider, session=key)
    if not os.path.exists(log_file):
        return res  # no active file: nothing to seal
    report, info = _verify(log_file)
    hard = [b for b in report.breaks if not b.recorded]  # a recorded break is sealed with the rest
    if hard:
        b = hard[0]
        res.status = "broken"
        res.reason = f"{b.reason} at {b.file or log_file}:{b.line} (frame {b.frame}): {b.detail}"
        return res
    if info is None:
        return res
    sealed = info.sealed
    base = sealed[-1].end if sealed else 0
    start, end = info.skip, info.complete_end
    res.base_offset = res.end_offset = base
    if end <= start and not start:
        return res  # nothing complete to seal (maybe a torn tail, left to the writer)
    res.end_offset = base + end - start
    res.bytes_in = end - start
    if end > start and may_seal is not None and not may_seal(provider, key, res.end_offset):
        res.status = "skipped"
        res.reason = f"may_seal refused up to logical offset {res.end_offset}"
        return res
    if dry_run:
        res.status = "would_seal" if end > start else "nothing"
        res.frames = report.frames - report.sealed_frames
        return res
    fd = os.open(log_file, os.O_RDWR | os.O_CLOEXEC)
    try:
        _Sealer(log_file, fd, level, may_seal, res, base, start, end).run()
    finally:
        os.close(fd)
    res.seconds = round(time.monotonic() - started, 3)
    return res


def _write_head(log_file: str, tip: Tip) -> None:
    """Replace the head atomically and durably (the writer overwrites it in place; a seal is rare)."""
    write_atomic(head_path(log_file), format_head(tip), FILE_MODE, durable=True)


class _Sealer:
    def __init__(
        self, log_file: str, fd: int, level: int, may_seal: MaySeal | None, res: SealResult, base: int, start: int, end: int
    ) -> None:
        self.log_file = log_file
        self.fd = fd
        self.level = level
        self.may_seal = may_seal
        self.res = res
        self.base = base  # logical offset of the active file's ``start``
        self.start = start  # physical: first byte to seal (after an old copy)
        self.end = end  # physical: end of the frames compressed so far
        self.dir = sealed_dir(log_file)
        self.zframes: list[list[int]] = []
        self.tmp = ""
        self.first_seq = self.last_seq = -1
        self.last_hash = ""

    def run(self) -> None:
        self._clean_temp()
        out = None
        if self.end > self.start:
            self.first_seq = parse_seq(os.pread(self.fd, 128, self.start) + b",")
            self.last_seq, self.last_hash = self._frame_ending_at(self.end)
            if not os.path.isdir(self.dir):
                ensure_dir(self.dir)
                fsync_path(os.path.dirname(self.dir))
            self.tmp = os.path.join(self.dir, f".{os.getpid()}.seal.tmp")
            out = open(os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE), "wb")
        try:
            if out is not None:
                self._compress(out, self.start, self.end)
            rounds = 0
            while True:
                _fault("compressed")
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                try:
                    more = self._locked_step(out, last_round=rounds >= _MAX_ROUNDS)
                finally:
                    fcntl.flock(self.fd, fcntl.LOCK_UN)
                if more is None:
                    return
                # frames arrived while compressing: add them (outside the lock)
                new_end, tip = more
                self._compress(out, self.end, new_end)
                self.end = new_end
                self.last_seq, self.last_hash = tip
                rounds += 1
        finally:
            if out is not None and not out.closed:
                out.close()
            if self.tmp and os.path.exists(self.tmp):
                os.unlink(self.tmp)

    # -- steps ---------------------------------------------------------------

    def _locked_step(self, out: Any, last_round: bool) -> tuple[int, tuple[int, str]] | None:
        """With the exclusive lock held: finish (None), or return the end and
        last (seq, hash) of frames appended since the compression started."""
        res = self.res
        size = os.fstat(self.fd).st_size
        has_new = self.end > self.start
        if size < self.end or (has_new and self._frame_ending_at(self.end) != (self.last_seq, self.last_hash)):
            # only another sealer (or a hand) could do this; the seal lock rules out the first
            raise RuntimeError(f"{self.log_file} changed under the sealer")
        new_end, tip, odd = self._scan_after(size)
        if new_end > self.end and has_new and not last_round and not odd:
            if self.may_seal is None or self.may_seal(res.provider, res.session, self.base + new_end - self.start):
                return new_end, tip
        if has_new:
            self._install(out)
            _fault("renamed")
        if odd or new_end > self.end:
            # frames (or odd bytes) after what was sealed: the file cannot be
            # emptied; it keeps the copy, which readers skip
            res.copy_left = True
            return None
        torn = os.pread(self.fd, size - self.end, self.end) if size > self.end else b""
        st = os.fstat(self.fd)
        os.ftruncate(self.fd, 0)
        os.fdatasync(self.fd)  # emptied on disk before the head says so
        _fault("truncated")
        seq, digest = (self.last_seq, self.last_hash) if has_new else self._sealed_tip()
        _write_head(self.log_file, Tip(seq, digest, 0))
        _fault("head")
        if torn:
            # back for the writer's repair, which records the loss as usual
            os.pwrite(self.fd, torn, 0)
            os.fdatasync(self.fd)
        # the file's mtime keeps meaning "last appended to" (idle time, doctor)
        os.utime(self.fd, ns=(st.st_atime_ns, st.st_mtime_ns))
        res.copy_removed = self.start
        if not has_new and self.start:
            res.status = "sealed"
            res.reason = "removed the copy an interrupted seal left"
        return None

    def _sealed_tip(self) -> tuple[int, str]:
        from agentlog.log.layout import read_trailer

        last = sealed_segments(self.log_file)[-1]
        meta = read_trailer(last.path)
        assert meta is not None
        return last.last_seq, str(meta["last_hash"])

    def _scan_after(self, size: int) -> tuple[int, tuple[int, str], bool]:
        """Frames appended after ``end`` that chain to it: (their end, their
        last (seq, hash), whether complete lines that do not chain follow)."""
        if size <= self.end:
            return self.end, (self.last_seq, self.last_hash), False
        tail = os.pread(self.fd, size - self.end, self.end)
        pos = 0
        seq, digest = (self.last_seq, self.last_hash) if self.end > self.start else self._sealed_tip()
        while True:
            nl = tail.find(b"\n", pos)
            if nl < 0:
                break
            try:
                s, prev, h, _ = parse_any(tail[pos : nl + 1])
            except ValueError:
                return self.end + pos, (seq, digest), True
            if s != seq + 1 or prev != digest:
                return self.end + pos, (seq, digest), True
            seq, digest = s, h
            pos = nl + 1
        return self.end + pos, (seq, digest), False

    def _frame_ending_at(self, end: int) -> tuple[int, str]:
        from agentlog.log.segments import _line_ending_at_fd

        line = _line_ending_at_fd(self.fd, end, self.start)
        seq, _prev, digest, _ = parse_any(line)  # the last frame may be a purged one
        return seq, digest

    def _compress(self, out: Any, start: int, end: int) -> None:
        import zstandard

        pos = start
        while pos < end:
            cut = self._cut(pos, end)
            n = cut - pos
            params = zstandard.ZstdCompressionParameters.from_level(
                self.level,
                source_size=n,
                window_log=max(10, min(WINDOW_LOG, (n - 1).bit_length())),
                enable_ldm=True,
                write_content_size=True,
                write_checksum=True,
            )
            cobj = zstandard.ZstdCompressor(compression_params=params).compressobj(size=n)
            csize = 0
            p = pos
            while p < cut:
                data = os.pread(self.fd, min(_READ, cut - p), p)
                if not data:
                    raise RuntimeError(f"{self.log_file} shrank while sealing")
                chunk = cobj.compress(data)
                out.write(chunk)
                csize += len(chunk)
                p += len(data)
            chunk = cobj.flush()
            out.write(chunk)
            csize += len(chunk)
            self.zframes.append([csize, n])
            pos = cut

    def _cut(self, pos: int, end: int) -> int:
        """End of the zstd frame starting at ``pos``: the first line end at or
        after ``pos + ZFRAME_TARGET`` (all of it if the rest is not much more)."""
        if end - pos <= ZFRAME_TARGET + ZFRAME_TARGET // 2:
            return end
        p = pos + ZFRAME_TARGET - 1
        while p < end:
            piece = os.pread(self.fd, min(1 << 16, end - p), p)
            nl = piece.find(b"\n")
            if nl >= 0:
                return p + nl + 1
            p += len(piece)
        return end

    def _install(self, out: Any) -> None:
        """Write the trailer, make the segment durable and rename it into place."""
        res = self.res
        size = self.end - self.start
        meta = {
            "format": "agentlog-segment/1",
            "provider": res.provider,
            "key": res.session,
            "base": self.base,
            "end": self.base + size,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "last_hash": self.last_hash,
            "zframes": self.zframes,
            "level": self.level,
            "window_log": WINDOW_LOG,
            "sealed_at": time.time_ns() // 1000,
            "agentlog_version": __version__,
        }
        out.write(encode_trailer(meta))
        out.flush()
        os.fsync(out.fileno())
        out.close()
        final = os.path.join(self.dir, segment_name(self.base, self.base + size, self.first_seq, self.last_seq))
        os.replace(self.tmp, final)
        self.tmp = ""
        fsync_path(self.dir)
        res.status = "sealed"
        res.segment = final
        res.frames = self.last_seq - self.first_seq + 1
        res.first_seq, res.last_seq = self.first_seq, self.last_seq
        res.base_offset, res.end_offset = self.base, self.base + size
        res.bytes_in = size
        res.bytes_out = os.path.getsize(final)

    def _clean_temp(self) -> None:
        """Remove what a sealer that crashed before its rename left behind."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return
        for n in names:
            if n.endswith(".seal.tmp"):
                try:
                    os.unlink(os.path.join(self.dir, n))
                except FileNotFoundError:
                    pass


__all__ = ["DEFAULT_LEVEL", "SealBusy", "SealResult", "seal_idle", "seal_log"]
