"""Samples → canonical wire events, through the real capture path."""

from __future__ import annotations

import hashlib
from typing import Any

from agentlog.api import capture_hook_payload
from agentlog.core.fastjson import dumps_bytes
from agentlog.bench.workload.reconstruct import TranscriptState, transcript_events


def event_id(sample: dict[str, Any]) -> str:
    """A UUIDv7 for a sample: time part = the sample's ``t`` in ms, the rest hashed from
    (session, n, t) — all of which derive from the seed, so ids are reproducible."""
    ms = int(sample["t"]) // 1000
    digest = hashlib.blake2b(f"{sample['session']}\x1f{sample['n']}\x1f{sample['t']}".encode("utf-8"),
                             digest_size=10).digest()
    rand = int.from_bytes(digest, "big")
    rand_a = (rand >> 64) & 0x0FFF
    rand_b = rand & 0x3FFF_FFFF_FFFF_FFFF
    value = ((ms & 0xFFFF_FFFF_FFFF) << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _cwd(payload: dict[str, Any]) -> str | None:
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str):
        return roots[0]
    return None


def sample_events(sample: dict[str, Any], state: TranscriptState | None = None) -> list[dict[str, Any]]:
    """The canonical wire events of one sample.

    ``source: hook``: the payload's JSON bytes go through
    :func:`agentlog.capture.hook.build` exactly as the hook would run it
    (adapter, redaction, project lookup), with ``captured_at = t``, a
    deterministic event id and no environment (so the machine's
    ``CLAUDE_PROJECT_DIR`` and the like cannot leak in). ``source:
    transcript``: :func:`reconstruct.transcript_events`; pass one
    :class:`TranscriptState` per stream so tool results are paired with their
    calls (:class:`Canonicalizer` does).
    """
    eid = event_id(sample)
    if sample["source"] == "hook":
        payload = sample["payload"]
        data = dumps_bytes(payload)
        captured = capture_hook_payload(sample["agent"], data, len(data), [], environ={},
                                        captured_at=int(sample["t"]), event_id=eid, cwd=_cwd(payload))
        return [captured.event]
    return transcript_events(sample, state, event_id=eid)


class Canonicalizer:
    """``sample_events`` with one transcript state for a whole stream (call in stream order)."""

    def __init__(self) -> None:
        self.state = TranscriptState()

    def __call__(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        return sample_events(sample, self.state)
