"""Appending to a session log: serialised, O(1) in log size, crash-safe.

An append takes an exclusive ``flock`` on the log file, reads the head file
(``v1 <seq> <hash> <size>``) and ``fstat``s the log. When the size matches
the head, that is all it reads. Otherwise the log was left in an odd state
and the append repairs it *before* writing, never refusing:

- bytes after the head's size that form complete, valid frames chained to the
  head (a crash between writing a frame and updating the head) are adopted;
- an incomplete last line (a crash mid-write) is cut off and a
  ``capture_gap`` frame records how many bytes were lost and their SHA-256;
- complete lines that are not valid frames are left in place (they are
  evidence; ``verify`` reports them) and a ``capture_gap`` frame says so;
- a missing or unreadable head, or a log shorter than its head, is recovered
  from the last valid frame in the file, with a ``capture_gap`` frame. As a
  log's head is created (durably) before its first frame, a crash never leaves
  a log with frames and no valid head: beside more than one frame that frame
  records a break (``attrs.log_break``), which ``verify`` keeps reporting.

Sealing (``seal.py``) moves complete frames into compressed segments and
empties this file; the head then names the last sealed frame at size 0, so
the normal path continues the chain without knowing about segments. Only
recovery looks at them: a log shorter than its head whose head names the last
sealed frame is a seal interrupted between emptying the file and rewriting
the head (nothing lost, no gap frame), and a lost head beside an empty file
continues from the last sealed frame (read from the segment's trailer).

Then it writes the frames with one ``write`` each on an ``O_APPEND`` file,
``fdatasync``s them (``strict`` durability, the default; ``F_FULLFSYNC`` on
macOS) and overwrites the head in place: one ``pwrite`` of a fixed-width
record (numbers zero-padded, still ``v1 <seq> <hash> <size>``) at offset 0 —
a rename per append cost more than everything else an append does. The head
is written after the frames on purpose: a crash in between leaves it behind,
which the next append adopts as above; the head is never fsynced, because a
head lost or left behind by a power cut is recovered the same way. A head
whose size, hash and (for a frame under 4 KiB) seq do not match the frame
that ends there (a head torn or mixed by a power cut, or edited) is treated
as unreadable.

Standard library only (hook path).
"""

from __future__ import annotations

import fcntl
from agentlog.core import oslite as os
import sys
import time

from agentlog import __version__
from agentlog.core.fastjson import dumps_bytes
from agentlog.core.ids import uuid7
from agentlog.core import AgentlogError
from agentlog.core.paths import FILE_MODE, ensure_dir, fsync_path
from agentlog.log.frame import (
    EVENT_MARK,
    HASH_MARK,
    PREFIX,
    PREV_END,
    SEQ_MARK,
    SUFFIX,
    TRAILER,
    FrameError,
    genesis,
    parse_any,
    parse_seq,
    seal_parts,
    sha256,
)
from agentlog.log.layout import head_path, log_path, read_trailer, sealed_segments

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DURABILITY_MODES = ("strict", "relaxed")
_HEAD_PREFIX = "v1 "
_NUM_WIDTH = 20  # digits of a 64-bit number: every head has the same length
HEAD_SIZE = len(_HEAD_PREFIX) + _NUM_WIDTH + 1 + 64 + 1 + _NUM_WIDTH + 1
_HEX_DIGITS = frozenset("0123456789abcdef")


class Tip:
    """The last valid frame: its seq, hash and the log size just after it."""

    __slots__ = ("seq", "hash", "offset")

    def __init__(self, seq: int, hash: str, offset: int) -> None:
        self.seq = seq
        self.hash = hash
        self.offset = offset

    def __repr__(self) -> str:
        return f"Tip(seq={self.seq}, hash={self.hash[:12]}…, offset={self.offset})"


def format_head(tip: Tip) -> bytes:
    """The head record: always ``HEAD_SIZE`` bytes (numbers zero-padded), so that
    overwriting it in place leaves nothing of the previous one. Heads written
    unpadded (before the padding) read the same."""
    return f"{_HEAD_PREFIX}{tip.seq:0{_NUM_WIDTH}d} {tip.hash} {tip.offset:0{_NUM_WIDTH}d}\n".encode("ascii")


def parse_head(data: bytes) -> Tip:
    """Parse a head file's bytes; raises ValueError if malformed."""
    text = data.decode("ascii")
    if not text.startswith(_HEAD_PREFIX) or not text.endswith("\n"):
        raise ValueError("head is not 'v1 <seq> <hash> <size>'")
    parts = text[len(_HEAD_PREFIX) : -1].split(" ")
    if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit():
        raise ValueError("head is not 'v1 <seq> <hash> <size>'")
    h = parts[1]
    if len(h) != 64 or not _HEX_DIGITS.issuperset(h):
        raise ValueError("head hash is not 64 lower-case hex digits")
    return Tip(int(parts[0]), h, int(parts[2]))


class AppendResult:
    """What one append wrote."""

    __slots__ = ("seqs", "hashes", "gaps", "path", "written", "skipped", "tip", "withheld")

    def __init__(self, path: str) -> None:
        self.path = path
        self.seqs: list[int] = []
        self.hashes: list[str] = []
        self.gaps: list[dict[str, Any]] = []
        self.written = 0  # bytes of the frames written (gap frames included)
        self.skipped: list[int] = []
        """Indices (into the events given) not written: their event id was already in the log."""
        self.tip: Tip | None = None
        """The log's last frame once the append is done (None for a log still without frames)."""
        self.withheld = 0
        """Events written without their content: encryption at rest is on and its key locked."""


class UnsafeLogError(AgentlogError, PermissionError):
    """A session log the hook will not write: in a directory another user owns or anyone may
    write to, or a file that is not the user's own."""


def check_private(directory: str, fd: int) -> None:
    """Refuse (:class:`UnsafeLogError`) a log directory not owned by this user or writable by
    others, and a log file (open as ``fd``) another user owns."""
    uid = os.getuid()
    st = os.stat(directory)
    if st.st_uid != uid or st.st_mode & 0o002:
        raise UnsafeLogError(f"{directory} is {'writable by anyone' if st.st_mode & 0o002 else 'not yours'}: "
                             "refusing to write session logs there")
    if os.fstat(fd).st_uid != uid:
        raise UnsafeLogError(f"a log in {directory} is not yours: refusing to append to it")


class SessionLog:
    """One session's append-only, hash-chained log file."""

    def __init__(
        self,
        root: str,
        provider: str,
        key: str,
        *,
        session_id: str | None = None,
        durability: str = "strict",
        capture_mode: str = "full",
        hasher: Any = None,
    ) -> None:
        """``hasher``: a SHA-256 constructor for the frames (default the built-in
        one, cheap to import on the hook path; bulk writers pass ``hashlib.sha256``)."""
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}, not {durability!r}")
        self.root = root
        self.provider = provider
        self.key = key
        self.session_id = session_id
        self.durability = durability
        self.capture_mode = capture_mode
        self.hasher = hasher
        self.path = log_path(root, provider, key)
        self.head_file = head_path(self.path)
        # Fault injection for crash tests: split each frame write in two with
        # a pause between, so that a kill can land mid-frame.
        fault = os.environ.get("AGENTLOG_FAULT_SPLIT_WRITE_MS", "")
        self._split_pause = int(fault) / 1000.0 if fault.isdigit() else 0.0
        self._head_overlong = False
        self._bad_head: bytes | None = None  # the bytes of a head found invalid

    # -- public ------------------------------------------------------------
    def append(self, events: list[bytes], *, dedupe: list[str | None] | None = None, since: Tip | None = None) -> AppendResult:
        """Append already-serialised events (one frame each), repairing first if needed.

        ``dedupe`` (one entry per event: its event id, or None) makes the append skip,
        under the log's lock, each event whose id is already in the log's last
        ``DEDUPE_WINDOW`` bytes or earlier in this batch (``result.skipped``): the native
        hook's fallback and the capture server may both be handed one event
        (docs/hook-path.md). ``since``, a tip this log had earlier, narrows the search
        to what was written after it, when the frame it names is still where it was."""
        for ev in events:
            if b"\n" in ev:
                raise ValueError("an event's serialised form must not contain a raw newline")
        events, withheld = at_rest(self.root, events)
        result = AppendResult(self.path)
        result.withheld = withheld
        fd = self._open_locked()
        head_fd = -1
        try:
            head_fd = self._open_head()
            if head_fd < 0:
                head_fd = self._create_empty_head(fd)
            tip = self._recover(fd, head_fd, result)
            if dedupe is not None:
                events = self._without_present(fd, events, dedupe, since, result)
            offset = tip.offset if tip is not None else 0
            seq = tip.seq + 1 if tip is not None else 0
            prev = tip.hash if tip is not None else genesis(self.provider, self.key)
            frames: list[bytes] = [self._gap_event(g) for g in result.gaps]
            frames.extend(events)
            parts: list[bytes] = []
            for ev in frames:
                line, digest = seal_parts(seq, prev, ev, self.hasher)
                parts += line
                result.seqs.append(seq)
                result.hashes.append(digest)
                size = len(line[0]) + len(ev) + TRAILER
                offset += size
                result.written += size
                prev = digest
                seq += 1
            if self._split_pause:
                for i in range(0, len(parts), 5):
                    self._write(fd, b"".join(parts[i:i + 5]))
            elif parts:
                _write_all(fd, b"".join(parts))  # one copy of the batch; a torn tail is repaired as ever
            if frames:
                self._sync(fd)
                tip = Tip(seq - 1, prev, offset)
                self._write_head(head_fd, tip)
            result.tip = tip if tip is not None and tip.seq >= 0 else None
            return result
        finally:
            if head_fd >= 0:
                os.close(head_fd)
            os.close(fd)  # releases the lock

    # -- internals -----------------------------------------------------------
    def _without_present(self, fd: int, events: list[bytes], ids: list[str | None], since: Tip | None,
                         result: AppendResult) -> list[bytes]:
        """``events`` less those whose id is in the log's tail or earlier in the batch."""
        if len(ids) != len(events):
            raise ValueError("dedupe needs one entry per event")
        wanted = [i for i, e in enumerate(ids) if e]
        if not wanted:
            return events
        size = os.fstat(fd).st_size
        start = max(0, size - DEDUPE_WINDOW)
        if since is not None and start < since.offset <= size and _ends_frame(fd, since):
            start = since.offset  # nothing before it can be one of these events
        tail = os.pread(fd, size - start, start) if size > start else b""
        seen: set[str] = set()
        keep: list[bytes] = []
        for i, ev in enumerate(events):
            eid = ids[i]
            if eid and (eid in seen or (tail and (_ID_MARK + eid.encode("ascii", "replace") + b'"') in tail)):
                result.skipped.append(i)
                continue
            if eid:
                seen.add(eid)
            keep.append(ev)
        return keep

    def _open(self) -> int:
        """The log open for appending: never through a symlink (a planted ``x.jsonl -> ~/.bashrc``
        gets nothing), and only in a directory of the user's that others cannot write to."""
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        d = os.path.dirname(self.path)
        try:
            fd = os.open(self.path, flags, FILE_MODE)
        except FileNotFoundError:
            ensure_dir(d)
            fd = os.open(self.path, flags, FILE_MODE)
            if self.durability == "strict":
                fsync_path(d)
        try:
            check_private(d, fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open_locked(self) -> int:
        """The log open and exclusively locked, and still the file at its path: a log removed
        while this waited for its lock (``ship --prune-after`` takes the lock to remove a
        shipped, idle session) is let go and the path opened again, so no frame goes to a
        file nobody will read."""
        for _ in range(100):
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                st = os.fstat(fd)
                try:
                    now = os.stat(self.path, follow_symlinks=False)
                except FileNotFoundError:
                    now = None
            except BaseException:
                os.close(fd)
                raise
            if now is not None and (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):
                return fd
            os.close(fd)
        raise OSError(f"{self.path}: removed again each time it was opened")

    def _open_head(self) -> int:
        """The head file open for reading and rewriting; -1 when there is none."""
        try:
            return os.open(self.head_file, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return -1

    def _create_empty_head(self, fd: int) -> int:
        """Before a log's first frame, its head: the genesis hash at size 0 (no frame yet),
        durable (strict) before any frame is written. So a log with frames always has a
        head beside it, and a missing or invalid one is damage, never a crash inside the
        first append. -1 (nothing created) when the log is not new: a head lost beside
        frames or sealed segments is recovered from them instead."""
        if os.fstat(fd).st_size or sealed_segments(self.path):
            return -1
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        head_fd = os.open(self.head_file, flags, FILE_MODE)
        try:
            _pwrite_all(head_fd, format_head(Tip(0, genesis(self.provider, self.key), 0)))
            if self.durability == "strict":
                self._sync(head_fd)
                fsync_path(os.path.dirname(self.head_file))  # the log's and the head's names
        except BaseException:
            os.close(head_fd)
            raise
        return head_fd

    def _read_head(self, fd: int, head_fd: int, size: int) -> tuple[Tip | None, str | None]:
        """(tip, problem): problem is None, 'head_missing' or 'head_invalid'.

        A head that names a size within the log must match the frame that ends
        there (its hash, and its seq when the frame is under 4 KiB): one small read
        that catches a head torn by a power cut or edited into another valid-looking one.
        The head of a log without frames yet (genesis hash, size 0) is ``Tip(-1, genesis, 0)``."""
        self._bad_head = None
        if head_fd < 0:
            return None, "head_missing"
        data = os.pread(head_fd, 256, 0)
        self._head_overlong = len(data) > HEAD_SIZE
        try:
            tip = parse_head(data)
        except (ValueError, UnicodeDecodeError):
            self._bad_head = data
            return None, "head_invalid"
        if 0 < tip.offset <= size and not _ends_frame(fd, tip):
            self._bad_head = data
            return None, "head_invalid"
        if tip.offset == 0 and tip.hash == genesis(self.provider, self.key):
            return Tip(-1, tip.hash, 0), None
        return tip, None

    def _recover(self, fd: int, head_fd: int, result: AppendResult) -> Tip | None:
        size = os.fstat(fd).st_size
        head, problem = self._read_head(fd, head_fd, size)
        if head is not None:
            if head.offset == size:
                return head  # the normal case: nothing else is read
            if head.offset < size:
                return self._adopt_tail(fd, head, size, result)
            sealed = self._sealed_tip()
            if sealed is not None and sealed.seq == head.seq and sealed.hash == head.hash:
                # a seal emptied the file and stopped before rewriting the head
                return self._adopt_tail(fd, sealed, size, result) if size else sealed
            # frames the head names are gone: a break for good, whatever follows
            gap: dict[str, Any] = {
                "reason": "log_shorter_than_head", "log_break": True, "head_seq": head.seq, "head_size": head.offset,
                "log_size": size,
            }
            result.gaps.append(gap)
            tip = self._recover_from_end(fd, size, result)
            gap["last_seq"] = tip.seq if tip is not None else -1
            gap["lost_frames"] = max(0, head.seq - gap["last_seq"])
            gap["lost_bytes"] = max(0, head.offset - (tip.offset if tip is not None else 0))
            return tip
        assert problem is not None
        if size == 0:
            sealed = self._sealed_tip()
            if sealed is not None:
                result.gaps.append(self._head_gap(problem, sealed, size))
                return sealed
            if problem == "head_invalid":
                result.gaps.append(self._head_gap(problem, None, size))
            return None
        tip = self._recover_from_end(fd, size, result)
        if not (problem == "head_missing" and tip is not None and tip.seq == 0 and tip.offset == size):
            # A missing head beside exactly one frame is a crash inside the first
            # append of a version that wrote the head after it; anything else is
            # worth a frame of its own.
            result.gaps.insert(0, self._head_gap(problem, tip, size))
        return tip

    def _head_gap(self, problem: str, tip: Tip | None, size: int) -> dict[str, Any]:
        """The gap frame for a head found missing or invalid: what was found (the last
        frame's seq, the log's size, an invalid head's length, SHA-256 and what it claims)
        and, beside more than one frame, ``log_break`` (``verify`` reports a break for good)
        and ``lost_frames``: null, as no head says how many frames there were (an invalid
        head that parses names a size the log still has)."""
        gap: dict[str, Any] = {"reason": problem, "last_seq": tip.seq if tip is not None else -1, "log_size": size}
        if self._bad_head is not None:
            gap["head_bytes"] = len(self._bad_head)
            gap["head_sha256"] = sha256(self._bad_head).hexdigest()
            try:
                claim = parse_head(self._bad_head)
                gap["head_seq"], gap["head_size"] = claim.seq, claim.offset
            except (ValueError, UnicodeDecodeError):
                pass
        if tip is not None and tip.seq >= 1:
            gap["log_break"] = True
            gap["lost_frames"] = None
        return gap

    def _adopt_tail(self, fd: int, head: Tip, size: int, result: AppendResult) -> Tip:
        tail = os.pread(fd, size - head.offset, head.offset)
        tip = head
        pos = 0
        while True:
            nl = tail.find(b"\n", pos)
            if nl < 0:
                break
            line = tail[pos : nl + 1]
            try:
                seq, prev, digest, _ = parse_any(line)  # a frame purged meanwhile still chains
            except FrameError:
                break
            if seq != tip.seq + 1 or prev != tip.hash:
                break
            tip = Tip(seq, digest, head.offset + nl + 1)
            pos = nl + 1
        rest = tail[pos:]
        if rest:
            self._handle_rest(fd, tip, rest, result)
        return tip

    def _handle_rest(self, fd: int, tip: Tip, rest: bytes, result: AppendResult) -> None:
        """Bytes after the last valid frame: cut a torn last line, keep complete ones."""
        last_nl = rest.rfind(b"\n")
        complete = rest[: last_nl + 1]
        torn = rest[last_nl + 1 :]
        if complete:
            result.gaps.append(
                {
                    "reason": "foreign_bytes",
                    "after_seq": tip.seq,
                    "bytes": len(complete),
                    "lines": complete.count(b"\n"),
                    "sha256": sha256(complete).hexdigest(),
                }
            )
        if torn:
            os.ftruncate(fd, tip.offset + len(complete))
            result.gaps.append(
                {"reason": "torn_tail", "after_seq": tip.seq, "lost_bytes": len(torn), "sha256": sha256(torn).hexdigest()}
            )

    def _recover_from_end(self, fd: int, size: int, result: AppendResult) -> Tip | None:
        """Find the last valid frame when the head cannot be trusted.

        Reads the whole file: this runs only after damage (a lost or edited
        head, a log shorter than its head), never on the normal path.
        """
        data = os.pread(fd, size, 0)
        stop = data.rfind(b"\n") + 1  # end of the last complete line
        while stop > 0:
            start = data.rfind(b"\n", 0, stop - 1) + 1
            try:
                seq, _prev, digest, _ = parse_any(data[start:stop])
            except FrameError:
                stop = start
                continue
            tip = Tip(seq, digest, stop)
            if stop < size:
                self._handle_rest(fd, tip, data[stop:], result)
            return tip
        # no valid frame in the file: the chain goes on from the last sealed
        # frame, or a new chain starts after what is there
        sealed = self._sealed_tip()
        if data:
            self._handle_rest(fd, sealed or Tip(-1, "", 0), data, result)
        return sealed

    def _sealed_tip(self) -> Tip | None:
        """The last sealed frame (at offset 0 of this file), from the last
        segment's name and trailer; None if there is none or it is unreadable."""
        segments = sealed_segments(self.path)
        if not segments:
            return None
        last = segments[-1]
        meta = read_trailer(last.path)
        if meta is None or meta.get("last_seq") != last.last_seq:
            return None
        digest = meta.get("last_hash")
        if not isinstance(digest, str) or len(digest) != 64 or not _HEX_DIGITS.issuperset(digest):
            return None
        return Tip(last.last_seq, digest, 0)

    def _gap_event(self, gap: dict[str, Any]) -> bytes:
        now = time.time_ns() // 1000
        ev: dict[str, Any] = {
            "event_id": uuid7(now // 1000),
            "schema_version": 1,
            "kind": "capture_gap",
            "provider": self.provider,
            "provider_event_name": "agentlog.capture_gap",
            "observed_at": now,
            "captured_at": now,
            "capture_mode": self.capture_mode,
            "agentlog_version": __version__,
        }
        if self.session_id:
            ev["provider_session_id"] = self.session_id
        ev["attrs"] = {"capture_gap": True, **gap}
        return dumps_bytes(ev)

    def _write(self, fd: int, line: bytes) -> None:
        if self._split_pause:
            half = len(line) // 2
            _write_all(fd, line[:half])
            time.sleep(self._split_pause)
            _write_all(fd, line[half:])
        else:
            _write_all(fd, line)

    def _sync(self, fd: int) -> None:
        if self.durability != "strict":
            return
        if sys.platform == "darwin":
            fcntl.fcntl(fd, getattr(fcntl, "F_FULLFSYNC", 51))
        else:
            os.fdatasync(fd)

    def _write_head(self, head_fd: int, tip: Tip) -> None:
        """Overwrite the head in place (one ``pwrite`` of a fixed-width record), or
        create it. Not fsynced even when strict: the frames it names are, and a head
        lost or behind after a power cut is recovered from them."""
        record = format_head(tip)
        if head_fd < 0:
            fd = os.open(self.head_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)
            try:
                _pwrite_all(fd, record)
            finally:
                os.close(fd)
            if self.durability == "strict":
                fsync_path(os.path.dirname(self.head_file))  # the new name, once per log
            return
        _pwrite_all(head_fd, record)
        if self._head_overlong:  # a longer, damaged head: nothing of it may stay
            os.ftruncate(head_fd, len(record))


_CHECK_WINDOW = 4096
DEDUPE_WINDOW = 4 << 20
"""How far back from a log's end ``append(dedupe=…)`` looks for an event id."""
_ID_MARK = EVENT_MARK + b'{"event_id":"'  # how every (unpurged) frame's event starts


def _ends_frame(fd: int, tip: Tip) -> bool:
    """Whether the frame that ends at ``tip.offset`` has ``tip``'s hash and, when its line
    starts within the last 4 KiB read (most frames are smaller), ``tip``'s seq."""
    n = min(tip.offset, _CHECK_WINDOW)
    tail = os.pread(fd, n, tip.offset - n)
    if not tail.endswith(HASH_MARK + tip.hash.encode("ascii") + SUFFIX):
        return False
    start = tail.rfind(b"\n", 0, len(tail) - 1) + 1
    if start == 0 and tip.offset > n:
        return True  # a frame longer than the window: its hash alone
    line = tail[start:]
    try:
        return line.startswith(PREFIX) and line.startswith(SEQ_MARK, PREV_END) and parse_seq(line) == tip.seq
    except ValueError:
        return False


def at_rest(root: str, events: list[bytes]) -> tuple[list[bytes], int]:
    """``events`` as they may be written under ``root``: unchanged while encryption at rest is
    off; else their content sealed with the unlocked data key (``core/sealing.py``) or, when the
    key is locked, withheld (the frame keeps its metadata and says why its content is missing:
    plain content is never written to a root that asked for encryption). With how many were withheld."""
    from agentlog.core.atrest import AtRestLockedError, unlocked_key

    try:
        got = unlocked_key(root)
    except AtRestLockedError:
        from agentlog.core.sealing import withhold_content

        return [withhold_content(ev) for ev in events], len(events)
    if got is None:
        return events, 0
    from agentlog.core.sealing import seal_events, withhold_content

    kid, key = got
    try:
        return seal_events(events, kid, key), 0
    except ImportError:  # no PyNaCl where this process runs: still nothing in plain
        return [withhold_content(ev) for ev in events], len(events)


def _pwrite_all(fd: int, data: bytes) -> None:
    """``data`` at offset 0 (one ``pwrite``: a head is far smaller than a page)."""
    done = 0
    while done < len(data):
        try:
            done += os.pwrite(fd, data[done:], done)
        except InterruptedError:
            continue


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[n:]


def open_session_log(
    root: str, provider: str, session_id: str | None, *, durability: str = "strict", capture_mode: str = "full",
    hasher: Any = None,
) -> SessionLog:
    """The log of one provider session (file named by `layout.session_key`)."""
    from agentlog.log.layout import session_key

    return SessionLog(
        root, provider, session_key(session_id), session_id=session_id, durability=durability, capture_mode=capture_mode,
        hasher=hasher,
    )
