"""Purging: remove events' content from the logs, keep the chain provable.

``agentlog purge (--before DATE | --session ID | --project NAME)`` selects
frames by their events (from the logs themselves, the truth; the store may
lag) and replaces each selected frame, in place, by a *purged frame* (see
``frame.py``)::

    {"v":1,"prev":P,"seq":N,"purged":{"purge_id":…,"event_id":…,"kind":…,"observed_at":…}   ,"hash":H}

with the same ``prev``, ``seq`` and ``hash`` as before, padded with spaces to
exactly the original line's length. So every other frame keeps its byte and
logical offset (stored ``log_offset``s, ingest positions and segment names
stay right), the chain still links, and ``verify`` counts the frame as
purged instead of broken.

Who purged what, and when, is itself recorded, in an append-only chained log
of agentlog's own: ``logs/agentlog/purges.jsonl``, written by the ordinary
writer, one ``purge`` event per purge (``attrs``: ``purge_id``, ``who``,
``selector``, ``frames`` as ``[log, seq, hash]``). ``verify`` accepts a
purged frame only if a record names it by (log, seq, hash): "purging" a
frame by hand to hide an edit is a break, ``purged_without_record``.

Order and crashes. The record is appended (and fsynced) *before* any frame
is rewritten, so a crash leaves a record of an intended purge, never an
unexplained purged frame. Every purge first finishes what earlier records
name and the logs still hold (``pending``), so a re-run completes an
interrupted purge; purging the same selection again finds nothing new and
writes no record.

Rewriting. One purge at a time, and no seal meanwhile: the whole purge holds
the sealer's lock (``state/seal.lock``). Lines of the active file are
rewritten with ``pwrite`` at the same offsets under the writer's exclusive
``flock`` (no hook appends meanwhile; appends go after them anyway), each
line checked again (seq and hash) just before, then ``fdatasync``. A sealed
segment holding selected frames is rewritten whole into a temporary file in
its directory: zstd frames without selected lines are copied as they are,
the others decompressed, patched and recompressed at the segment's level;
then the trailer, ``fsync``, ``rename`` over the same name (its range and
seqs did not change) and ``fsync`` of the directory. The old file's inode is
freed once no reader holds it open. A crash leaves a ``*.seal.tmp`` file,
which the next purge or seal removes.

Limits (documented in ``docs/log-format.md``): a log with a break is not
purged (the evidence stays as it is; the result says so); bytes that are not
frames (a torn tail not yet repaired, foreign lines) are not touched; a
frame whose event is shorter than the smallest stub (``{}``: only
non-canonical events of one or two bytes) cannot be purged and is reported;
the file system may keep freed blocks (no secure erase).

The store (``store/purge.py``) deletes the rows of purged frames and vacuums
their Parquet files; it calls ``purge_logs`` here under its own locks.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from agentlog.core import AgentlogError
from agentlog import __version__
from agentlog.core.ids import uuid7
from agentlog.core.fileio import Discard, atomic_writer
from agentlog.core.paths import FILE_MODE
from agentlog.log.verify_tail import recorded_break
from agentlog.log.frame import (
    PREV_END,
    TRAILER,
    FrameError,
    event_bytes,
    is_purged,
    parse_any,
    parse_seq,
    purged_line,
)
from agentlog.log.purge_record import (
    MEMORY_LOG,
    PURGE_KEY,
    PURGE_LOG,
    PURGE_PROVIDER,
    _event_head,
    _lines,
    _loads,
    iter_records,
    purge_log_path,
    recorded_frames,
    root_of,
)
from agentlog.log.layout import (
    SegmentRef,
    encode_trailer,
    iter_logs,
    read_trailer,
    sealed_segments,
    session_key,
    split_log_path,
)

"""The memory's own log (``memory.store``): only a memory selector reaches it."""
US_PER_DAY = 86_400_000_000


class PurgeError(AgentlogError, RuntimeError):
    """A purge could not be done (the message says why)."""


def _fault(point: str) -> None:
    """Crash tests: ``AGENTLOG_FAULT_PURGE=<point>`` ends the process there
    (``os._exit``, like a kill). Points: ``recorded`` (the record is written,
    no frame rewritten yet), ``rewritten`` (logs rewritten, store not yet)."""
    if os.environ.get("AGENTLOG_FAULT_PURGE", "") == point:
        os._exit(75)


def _who() -> dict[str, Any]:
    import getpass

    try:
        user = getpass.getuser()
    except Exception:  # no login name (a container without passwd entry)
        user = str(os.getuid())
    return {"user": user, "host": socket.gethostname(), "pid": os.getpid()}


def _write_record(root: str, purge_id: str, now_us: int, who: dict[str, Any], selector: dict[str, Any],
                  frames: list[list[Any]]) -> None:
    import orjson

    from agentlog.log.writer import SessionLog

    ev = {
        "event_id": purge_id,
        "schema_version": 1,
        "kind": "purge",
        "provider": PURGE_PROVIDER,
        "provider_event_name": "agentlog.purge",
        "observed_at": now_us,
        "captured_at": now_us,
        "capture_mode": "full",
        "agentlog_version": __version__,
        "attrs": {"purge_id": purge_id, "who": who, "selector": selector, "frame_count": len(frames), "frames": frames},
    }
    # always strict: the record must be on disk before any frame changes
    SessionLog(root, PURGE_PROVIDER, PURGE_KEY, durability="strict").append([orjson.dumps(ev)])


# -- selecting ------------------------------------------------------------------------


@dataclass
class Selector:
    """Which events to purge: exactly one of the three."""

    before: int | None = None
    """``observed_at`` (µs since the epoch, UTC) before this."""
    session: str | None = None
    """The provider session id, or the log's key or ``provider/key``."""
    project: str | None = None
    """``project.name`` or ``project.root``."""
    retention_days: int | None = None
    """Set when the purge applies the ``retention_days`` setting (with ``before``)."""
    memory: str | None = None
    """A memory's id: every frame of the memory log that mentions it, but its
    ``memory_purged`` event (``memory.store.purge_memory`` writes that first).
    Only this selector reaches the memory log: memories are curated, not
    captured activity, and are not purged by date, session or project."""

    memory_proposals: tuple[str, ...] = ()
    """With ``memory``: the proposals that mention it, whose every frame goes too
    (a proposal that created it names it only once merged)."""

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.before, self.session, self.project, self.memory)) != 1:
            raise ValueError("give exactly one of before, session, project, memory")
        if self.memory is not None and len(self.memory) < 8:
            raise ValueError("a memory id to purge is at least 8 characters (it is matched in the frames' bytes)")

    def reaches(self, log: str) -> bool:
        """Whether this selector may select frames of the log ``provider/key``."""
        return (log == MEMORY_LOG) == (self.memory is not None)

    def matches_event(self, event: bytes) -> bool:
        """For the memory selector: the event (serialised) mentions the memory and is not its purge."""
        if self.memory is None:
            return False
        if self.memory.encode() not in event and not any(p.encode() in event for p in self.memory_proposals):
            return False
        ev = _loads(event)
        return not (isinstance(ev, dict) and ev.get("provider_event_name") == "memory_purged")

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if v is not None and v != ()}

    def whole_log(self, provider: str, key: str) -> bool:
        s = self.session
        return s is not None and (key in (s, session_key(s)) or f"{provider}/{key}" == s)

    def matches(self, head: dict[str, Any]) -> bool:
        if self.memory is not None:
            return False  # needs the whole event: matches_event
        if self.before is not None:
            t = head.get("observed_at")
            return isinstance(t, int) and t < self.before
        if self.session is not None:
            return head.get("provider_session_id") == self.session
        project = head.get("project")
        return isinstance(project, dict) and self.project in (project.get("name"), project.get("root"))


@dataclass
class _Target:
    offset: int  # logical offset of the line
    length: int
    seq: int
    hash: str
    prev: str
    purge_id: str
    stubs: list[bytes]
    pending: bool  # named by an earlier record, not yet rewritten


def _stubs(purge_id: str, head: dict[str, Any]) -> list[bytes]:
    """The purged stubs to try, most informative first."""
    import orjson

    full: dict[str, Any] = {"purge_id": purge_id}
    for k, t in (("event_id", str), ("kind", str), ("observed_at", int)):
        v = head.get(k)
        if isinstance(v, t):
            full[k] = v
    out = [orjson.dumps(full)]
    if "event_id" in full:
        out.append(orjson.dumps({"purge_id": purge_id, "event_id": full["event_id"]}))
    out += [orjson.dumps({"purge_id": purge_id}), b"{}"]
    return out


# -- results ----------------------------------------------------------------------------


@dataclass
class LogPurge:
    """What a purge did (or would do) to one session log."""

    log: str
    path: str
    status: str = "purged"
    """purged, would_purge (dry run), skipped (not purged: see ``reason``)."""
    frames: int = 0
    """Frames whose content is (or would be) removed."""
    bytes: int = 0
    """Their bytes."""
    pending: int = 0
    """Of those, frames an earlier, interrupted purge had recorded."""
    segments_rewritten: int = 0
    unpurgeable: int = 0
    """Selected frames too short for a stub (left as they are)."""
    reason: str = ""


@dataclass
class LogsPurge:
    purge_id: str | None
    """The new record's id; None when nothing new was selected (or a dry run)."""
    selector: dict[str, Any]
    dry_run: bool
    who: dict[str, Any]
    at: int
    """µs since the epoch, UTC."""
    logs: list[LogPurge] = field(default_factory=list)
    purged_keys: set[tuple[str, int]] = field(default_factory=set)
    """(log, seq) of every frame any purge record names (for the store)."""

    @property
    def frames(self) -> int:
        return sum(lg.frames for lg in self.logs if lg.status != "skipped")

    @property
    def bytes(self) -> int:
        return sum(lg.bytes for lg in self.logs if lg.status != "skipped")


# -- purging the logs ---------------------------------------------------------------------


def purge_logs(
    root: str,
    selector: Selector,
    *,
    dry_run: bool = False,
    lock_timeout: float = 5.0,
    now_us: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> LogsPurge:
    """Select frames, write the purge record, rewrite the logs (see the module
    docstring). Raises ``seal.SealBusy`` if a seal or another purge holds the
    sealer's lock for ``lock_timeout`` seconds."""
    from agentlog.log.seal import SealLock

    at = time.time_ns() // 1000 if now_us is None else now_us
    with SealLock(root, lock_timeout):
        return _purge_logs(root, selector, dry_run, at, progress)


def _purge_logs(root: str, selector: Selector, dry_run: bool, at: int,
                progress: Callable[[str], None] | None) -> LogsPurge:
    from agentlog.log.verify import verify_log

    purge_id = uuid7(at // 1000)
    result = LogsPurge(purge_id=None, selector=selector.to_dict(), dry_run=dry_run, who=_who(), at=at)
    recorded = recorded_frames(root)
    result.purged_keys = {(name, seq) for name, seq, _h in recorded}
    plans: list[tuple[str, LogPurge, list[_Target]]] = []
    for path in iter_logs(root):
        provider, key = split_log_path(path)
        name = f"{provider}/{key}"
        if name == PURGE_LOG or not selector.reaches(name):
            continue  # the records themselves are never purged; the memory log only by memory
        if progress is not None:
            progress(name)
        targets, unpurgeable = _select(path, name, selector, recorded, purge_id)
        if not targets and not unpurgeable:
            continue
        lp = LogPurge(log=name, path=path, status="would_purge" if dry_run else "purged",
                      frames=len(targets), bytes=sum(t.length for t in targets),
                      pending=sum(t.pending for t in targets), unpurgeable=unpurgeable)
        if targets:
            report = verify_log(path)
            hard = [b for b in report.breaks if not b.recorded]  # a recorded break does not stop a purge
            if hard:
                b = hard[0]
                lp.status = "skipped"
                lp.reason = f"the log is broken ({b.reason} at {b.file or path}:{b.line}); verify it first"
        result.logs.append(lp)
        plans.append((path, lp, targets))
    if dry_run:
        return result
    new = [(lp.log, t.seq, t.hash) for _p, lp, ts in plans if lp.status != "skipped" for t in ts if not t.pending]
    if new:
        result.purge_id = purge_id
        _write_record(root, purge_id, at, result.who, result.selector, [list(f) for f in new])
        result.purged_keys.update((log, seq) for log, seq, _h in new)
    _fault("recorded")
    for path, lp, targets in plans:
        if lp.status == "skipped" or not targets:
            continue
        try:
            lp.segments_rewritten = _rewrite_log(path, targets)
        except (OSError, PurgeError, ValueError) as e:
            lp.status = "skipped"
            lp.reason = f"{type(e).__name__}: {e} (recorded; the next purge finishes it)"
    _fault("rewritten")
    return result


def _select(path: str, name: str, selector: Selector, recorded: dict[tuple[str, int, str], str],
            purge_id: str) -> tuple[list[_Target], int]:
    provider, key = name.split("/", 1)
    whole = selector.whole_log(provider, key)
    targets: list[_Target] = []
    unpurgeable = 0
    for off, line in _lines(path):
        if is_purged(line[:128]) or recorded_break(line) is not None:
            continue  # the frame that records a break keeps saying so (it holds sizes and hashes only)
        try:
            seq = parse_seq(line)
        except ValueError:
            continue  # not a frame: verify reports it
        if len(line) < PREV_END + TRAILER:
            continue
        digest = line[-67:-3].decode("ascii", "replace")
        earlier = recorded.get((name, seq, digest))
        event = event_bytes(line)
        head = _event_head(event)
        if earlier is None and not whole and not (selector.matches_event(event) if selector.memory is not None
                                                  else selector.matches(head)):
            continue
        pid = earlier or purge_id
        stubs = _stubs(pid, head)
        prev = line[15:PREV_END].decode("ascii", "replace")
        if purged_line(seq, prev, digest, stubs[-1:], len(line)) is None:
            unpurgeable += 1
            continue
        targets.append(_Target(off, len(line), seq, digest, prev, pid, stubs, earlier is not None))
    return targets, unpurgeable


def _new_line(t: _Target) -> bytes:
    line = purged_line(t.seq, t.prev, t.hash, t.stubs, t.length)
    assert line is not None and len(line) == t.length
    return line


def _check_old(old: bytes, t: _Target) -> bool:
    """Whether ``old`` is the target frame (True) or already its purged form
    (False); raises PurgeError if it is anything else."""
    try:
        seq, _prev, digest, purged = parse_any(old)
    except FrameError as e:
        raise PurgeError(f"frame {t.seq} changed before it could be purged ({e})") from None
    if (seq, digest) != (t.seq, t.hash):
        raise PurgeError(f"frame {t.seq} changed before it could be purged")
    return not purged


def _rewrite_log(path: str, targets: list[_Target]) -> int:
    """Rewrite the targets' lines in the sealed segments and the active file;
    returns how many segments were rewritten."""
    sealed = sealed_segments(path)
    rewritten = 0
    for ref in sealed:
        mine = [t for t in targets if ref.base <= t.offset < ref.end]
        if mine and _rewrite_segment(ref, mine):
            rewritten += 1
    _rewrite_active(path, sealed, targets)
    return rewritten


def _rewrite_active(path: str, sealed: list[SegmentRef], targets: list[_Target]) -> None:
    import fcntl

    from agentlog.log.segments import _last_hash, duplicate_prefix

    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)  # not O_APPEND: pwrite must land where it is told
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        base = sealed[-1].end if sealed else 0
        skip = duplicate_prefix(lambda n, off: os.pread(fd, n, off), size, sealed, _last_hash(sealed))
        copy_base = base - skip  # a crash copy of sealed frames holds them from this logical offset
        wrote = False
        for t in targets:
            if t.offset >= base:
                phys = skip + t.offset - base
            elif skip and t.offset >= copy_base:
                phys = t.offset - copy_base
            else:
                continue
            if phys + t.length > size:
                raise PurgeError(f"frame {t.seq} is beyond the end of {path}")
            if _check_old(os.pread(fd, t.length, phys), t):
                os.pwrite(fd, _new_line(t), phys)
                wrote = True
        if wrote:
            os.fdatasync(fd)
    finally:
        os.close(fd)  # releases the lock


def _rewrite_segment(ref: SegmentRef, targets: list[_Target]) -> bool:
    """Rewrite one sealed segment with the targets' lines purged (same name,
    same uncompressed bytes but those lines). False if nothing was left to do."""
    import zstandard

    from agentlog.log.seal import DEFAULT_LEVEL, WINDOW_LOG
    from agentlog.log.segments import MAX_WINDOW, zframe_index

    size = ref.end - ref.base
    meta = read_trailer(ref.path)
    index = zframe_index(ref.path, size)
    if meta is None or index is None:
        raise PurgeError(f"{ref.path}: the segment's trailer is missing or disagrees with it")
    level = meta.get("level")
    level = level if isinstance(level, int) and 1 <= level <= 22 else DEFAULT_LEVEL
    changed = False
    zframes: list[list[int]] = []
    # durable: the purged segment replaces the only copy. The temp file's name ends in
    # ``.seal.tmp``, so what a crash leaves is removed by the next seal (``_clean_temp``).
    with open(ref.path, "rb") as src, atomic_writer(ref.path, FILE_MODE, durable=True,
                                                    suffix=".purge.seal.tmp") as out:
        for c0, cs, u0, us in index:
            src.seek(c0)
            comp = src.read(cs)
            mine = [t for t in targets if u0 <= t.offset - ref.base < u0 + us]
            if not mine:
                out.write(comp)
                zframes.append([cs, us])
                continue
            data = bytearray(zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW).decompress(comp, max_output_size=us))
            if len(data) != us:
                raise PurgeError(f"{ref.path}: a zstd frame holds {len(data)} bytes, the trailer says {us}")
            for t in mine:
                r = t.offset - ref.base - u0
                if _check_old(bytes(data[r : r + t.length]), t):
                    data[r : r + t.length] = _new_line(t)
                    changed = True
            params = zstandard.ZstdCompressionParameters.from_level(
                level, source_size=us, window_log=max(10, min(WINDOW_LOG, (us - 1).bit_length())),
                enable_ldm=True, write_content_size=True, write_checksum=True,
            )
            z = zstandard.ZstdCompressor(compression_params=params).compress(bytes(data))
            del data
            out.write(z)
            zframes.append([len(z), us])
        if not changed:
            raise Discard  # nothing left to do: the segment stays as it is
        meta.pop("data_end", None)
        meta["zframes"] = zframes
        out.write(encode_trailer(meta))
    return changed


def parse_date(text: str) -> int:
    """µs since the epoch of an ISO date or date-time (UTC unless it says
    otherwise). Raises ValueError."""
    from datetime import datetime, timedelta, timezone

    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    dt = datetime.fromisoformat(t)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return (dt - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


__all__ = [
    "LogPurge",
    "LogsPurge",
    "PURGE_LOG",
    "PurgeError",
    "Selector",
    "iter_records",
    "parse_date",
    "purge_log_path",
    "purge_logs",
    "recorded_frames",
    "root_of",
]
