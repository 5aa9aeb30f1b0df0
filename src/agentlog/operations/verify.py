"""``agentlog verify``'s library side: the last verification result of each log
(``state/verify.json``, for the dashboard's Integrity page: written by ``agentlog
verify`` and the dashboard's "verify now"), and the checks beyond each log's chain
(``trust``: the Merkle tree against the logs, the checkpoints against the tree;
``operations/tree_verify.py``)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Iterable

from agentlog.core.paths import FILE_MODE, ensure_dir, state_dir

if TYPE_CHECKING:
    from agentlog.operations.tree_verify import TrustReport

FILE = "verify.json"
TRUST_FILE = "trust.json"
"""The last :func:`trust` result (``state/trust.json``), for the Integrity page."""


def _path(root: str) -> str:
    return os.path.join(state_dir(root), FILE)


def load(root: str) -> dict[str, dict[str, Any]]:
    """``provider/session`` → its last result (status, frames, purged, breaks, gaps, verified_at µs)."""
    from agentlog.core.jsonio import read_json

    data = read_json(_path(root), {})
    return data if isinstance(data, dict) else {}


def save(root: str, reports: Iterable[Any], at_us: int | None = None) -> None:
    """Record these :class:`~agentlog.log.verify.LogReport` results (others kept)."""
    from agentlog.core.fileio import write_json_atomic

    at = at_us if at_us is not None else time.time_ns() // 1000
    data = load(root)
    for r in reports:
        data[f"{r.provider}/{r.session}"] = {
            "provider": r.provider, "session": r.session, "status": r.status, "frames": r.frames,
            "purged": r.purged, "bytes": r.bytes, "verified_at": at,
            "breaks": [{"line": b.line, "frame": b.frame, "reason": b.reason, "detail": b.detail} for b in r.breaks][:20],
            "gaps": len(r.gaps),
        }
    ensure_dir(state_dir(root))
    # not durable (as before): a record for the dashboard, which a lost one leaves showing
    # "not verified" until the next verify
    write_json_atomic(_path(root), data, FILE_MODE, durable=False, sort_keys=True)


def trust(root: str) -> TrustReport:
    """The tree against the logs, every checkpoint against the tree, the newest witnessed
    checkpoint against everything newer (:func:`~agentlog.operations.tree_verify.verify_trust`);
    recorded for the Integrity page (:func:`load_trust`)."""
    from agentlog.core.fileio import write_json_atomic
    from agentlog.operations.tree_verify import verify_trust

    report = verify_trust(root)
    record = {**report.to_dict(), "verified_at": time.time_ns() // 1000}
    ensure_dir(state_dir(root))
    write_json_atomic(os.path.join(state_dir(root), TRUST_FILE), record, FILE_MODE, durable=False, sort_keys=True)
    return report


def load_trust(root: str) -> dict[str, Any] | None:
    """The last recorded :func:`trust` result (its ``to_dict`` and ``verified_at`` µs), or None."""
    from agentlog.core.jsonio import read_json

    data = read_json(os.path.join(state_dir(root), TRUST_FILE), None)
    return data if isinstance(data, dict) else None


__all__ = ["load", "load_trust", "save", "trust"]
