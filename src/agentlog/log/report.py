"""What ``verify`` reports about a log: its breaks, its gaps, the totals.

Kept apart from ``verify.py`` (which re-exports these) so that the checks of
the head and of recorded breaks (``verify_tail.py``) can build them too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MAX_BREAKS = 20


@dataclass
class Break:
    """One place where a log is not what was written."""

    line: int
    """1-based line number in the file (0 for the head file)."""
    frame: int | None
    """The frame number expected at that line."""
    reason: str
    """bad_hash, not_a_frame, broken_link, sequence_gap, head_missing,
    head_invalid, head_mismatch, truncated, missing, segment_missing,
    segment_invalid, purged_without_record; and, at the line of the
    ``capture_gap`` frame in which an append recorded it (a *recorded*
    break), head_missing, head_invalid or log_shorter_than_head."""
    detail: str
    file: str | None = None
    """The sealed segment holding the line; None for the active log file (or
    its head, line 0)."""
    lost_frames: int | None = None
    """For a recorded break: how many frames the log lost, when the head that
    was found says (None: unknown, or not a recorded break)."""
    recorded: bool = False
    """A break an append found and recorded in a ``capture_gap`` frame (the chain
    is whole again from there): it stays a break, but seal and purge may go on
    with the log (a damaged log must still be purgeable, and the frame that
    records the damage is never purged)."""


@dataclass
class Gap:
    """A recorded or pending loss of capture (a crash), not tampering."""

    line: int
    frame: int | None
    reason: str
    detail: str
    file: str | None = None


@dataclass
class LogReport:
    """The verification result of one session log."""

    path: str
    provider: str
    session: str
    frames: int = 0
    """Frames in the whole chain (sealed segments and active file)."""
    bytes: int = 0
    """Uncompressed bytes of the whole chain (the log's logical size)."""
    status: str = "intact"
    """intact, gaps (intact, with recorded or pending capture gaps) or broken."""
    last_hash: str | None = None
    breaks: list[Break] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sealed_segments: int = 0
    sealed_frames: int = 0
    sealed_bytes: int = 0
    """Uncompressed bytes held by sealed segments."""
    sealed_disk_bytes: int = 0
    """What those segments take on disk."""
    purged: int = 0
    """Purged frames (content removed by ``agentlog purge``, hash kept) that
    a purge record names."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def add_break(report: LogReport, b: Break) -> None:
    """Add a break, up to ``MAX_BREAKS`` per log."""
    if len(report.breaks) < MAX_BREAKS:
        report.breaks.append(b)
