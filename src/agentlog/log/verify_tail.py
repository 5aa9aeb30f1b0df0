"""The end of a verified log: its head, a torn last line, and recorded breaks.

``check_tail`` compares the head file with the end of the active file (the
frames themselves are checked by ``verify.py``). ``recorded_break`` reads a
``capture_gap`` frame in which an append recorded damage it repaired (a head
missing or invalid beside more than one frame, a log shorter than its head):
the chain itself is intact again, but the damage is a break for good, so the
repair does not turn it into a gap (issue 27, finding 16).
"""

from __future__ import annotations

import json
import mmap
from typing import Any

from agentlog.log.frame import FrameError, event_bytes, genesis, parse_any
from agentlog.log.report import Break, Gap, LogReport
from agentlog.log.writer import Tip, parse_head

BREAK_REASONS = frozenset({"head_missing", "head_invalid", "log_shorter_than_head"})
_LOG_BREAK = b'"log_break":true'


def recorded_break(line: bytes) -> dict[str, Any] | None:
    """The attrs of a ``capture_gap`` frame's line that records a break (``attrs.log_break``),
    else None. Called only for capture_gap frames, which are rare."""
    if _LOG_BREAK not in line:
        return None
    try:
        attrs = json.loads(event_bytes(line)).get("attrs")
    except (ValueError, FrameError, AttributeError):
        return None
    if not isinstance(attrs, dict) or attrs.get("log_break") is not True or attrs.get("reason") not in BREAK_REASONS:
        return None
    return attrs


def break_of(attrs: dict[str, Any], line: int, frame: int | None, file: str | None) -> Break:
    """The break a recorded-break frame stands for, saying what the append found."""
    reason = str(attrs["reason"])
    lost = attrs.get("lost_frames")
    lost_frames = lost if isinstance(lost, int) and not isinstance(lost, bool) else None
    last = attrs.get("last_seq")
    found = f"the log ended at frame {last}" if isinstance(last, int) else "the log's end"
    if reason == "log_shorter_than_head":
        what = (f"an append found the log shorter than its head (head: frame {attrs.get('head_seq')} ending at byte "
                f"{attrs.get('head_size')}; log: {attrs.get('log_size')} bytes, {found})")
    elif reason == "head_missing":
        what = f"an append found the head file missing beside more than one frame ({found})"
    else:
        claim = (f", the head named frame {attrs['head_seq']} at byte {attrs.get('head_size')}"
                 if isinstance(attrs.get("head_seq"), int) else "")
        what = f"an append found the head file unreadable or not matching the log beside more than one frame ({found}{claim})"
    if lost_frames is not None:
        count = f"{lost_frames} frame(s) lost"
    else:
        count = "how many frames were lost is unknown (no readable head said how many there were)"
    detail = f"{what}; it recovered from the log and went on: {count}"
    return Break(line, frame, reason, detail, file, lost_frames, recorded=True)


def check_tail(
    report: LogReport,
    data: bytes | mmap.mmap,
    size: int,
    complete_end: int,
    lines: int,
    active_frames: int,
    sealed_tip: tuple[int, str] | None,
    head_bytes: bytes | None,
) -> Tip | None:
    """Compare the head with the end of the log; classify a torn tail.

    ``lines`` are the active file's complete lines, ``active_frames`` those
    not also sealed; ``sealed_tip`` is the last sealed frame's (seq, hash)."""
    torn = size - complete_end
    if head_bytes is None:
        # No head. The writer creates it before a log's first frame, so only a
        # crash between creating the log file and its head (no frame yet) or,
        # from versions before that, inside the first append (at most one
        # frame) leaves none. A sealed log always has one: the seal rewrites it.
        if sealed_tip is None and active_frames == 0:
            torn_gap(report, torn, lines)
            return None
        if sealed_tip is None and active_frames == 1 and not report.breaks:
            report.gaps.append(Gap(0, 0, "head_missing", "no head after the first frame: a crash inside the first append"))
            torn_gap(report, torn, lines)
            return None
        report.breaks.append(Break(0, None, "head_missing", f"head file is missing; log has {report.frames} frames"))
        return None
    try:
        head = parse_head(head_bytes)
    except (ValueError, UnicodeDecodeError) as e:
        report.breaks.append(Break(0, None, "head_invalid", f"head file is unreadable: {e}"))
        return None
    # the head a log gets before its first frame: the genesis hash at size 0
    empty = head.offset == 0 and sealed_tip is None and head.hash == genesis(report.provider, report.session)
    if head.offset > size:
        if sealed_tip == (head.seq, head.hash) and lines == 0:
            report.gaps.append(
                Gap(0, head.seq, "stale_head", "the head names the last sealed frame at the file's size before sealing: a seal stopped before rewriting it; the next append or seal rewrites it")
            )
            torn_gap(report, torn, lines)
            return head
        report.breaks.append(
            Break(lines + 1, head.seq, "truncated", f"head names frame {head.seq} ending at byte {head.offset}, log has {size} bytes")
        )
        return head
    if head.offset > complete_end:
        # the head covers bytes of the incomplete last line: that line was complete once
        report.breaks.append(Break(lines + 1, head.seq, "truncated", "the frame the head names has lost its end"))
        return head
    # the head must name the frame ending exactly at head.offset (at 0: the last sealed one)
    if head.offset == 0:
        ok = empty or sealed_tip == (head.seq, head.hash)
    else:
        start = data.rfind(b"\n", 0, head.offset - 1) + 1
        try:
            seq, _prev, digest, _ = parse_any(data[start : head.offset])
            ok = seq == head.seq and digest == head.hash
        except FrameError:
            ok = False
    if not ok:
        report.breaks.append(
            Break(0, head.seq, "head_mismatch", f"head names frame {head.seq} ({head.hash[:16]}…) at byte {head.offset}, which the log does not have there")
        )
        return head
    if head.offset < complete_end:
        extra = data[head.offset:complete_end].count(b"\n")
        report.gaps.append(
            Gap(lines - extra + 1, 0 if empty else head.seq + 1, "head_behind", f"{extra} frame(s) after the head: a crash between writing a frame and updating the head; the next append adopts them")
        )
    torn_gap(report, torn, lines)
    return Tip(-1, head.hash, 0) if empty else head


def torn_gap(report: LogReport, torn: int, lines: int) -> None:
    if torn:
        report.gaps.append(
            Gap(lines + 1, None, "torn_tail", f"{torn} bytes of an incomplete frame after the last one: a crash mid-append; the next append cuts them and records a capture_gap")
        )
