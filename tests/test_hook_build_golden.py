"""Golden test: every real Claude Code hook payload in the shared fixtures (and the hook
benchmark's payload) built by ``hook.build`` and serialised, byte for byte.

The events hold third parties' paths and text, so only a SHA-256 of each file's events
(one line each) is committed: ``tests/golden/hook-build-digests.json``. A change to any
byte of any event (normalising, classifying, failure summaries, project, redaction,
serialising) fails here; regenerate with ``AGENTLOG_UPDATE_GOLDENS=1`` only for a change
meant to alter the events, and say so. Built as the capture server builds (no environment,
no client working directory), with a fixed event id, clock and version.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from agentlog.bench.hookbench import bench_payload
from agentlog.capture import hook
from agentlog.core.fastjson import dumps_bytes
from agentlog.operations.fixtures import missing, shared_dir

REPO = Path(__file__).resolve().parents[1]
SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures" / "claude-code-hooks"
GOLDEN = REPO / "tests" / "golden" / "hook-build-digests.json"
UPDATE = os.environ.get("AGENTLOG_UPDATE_GOLDENS") == "1"


def _built(payloads: list[bytes]) -> str:
    lines = []
    for data in payloads:
        captured = hook.build("claude-code", data, len(data), [], environ={}, captured_at=1765000000000000,
                              event_id="01900000-0000-7000-8000-000000000001", process_cwd="")
        captured.event["agentlog_version"] = "golden"
        lines.append(dumps_bytes(captured.event))
    return hashlib.sha256(b"\n".join(lines)).hexdigest()


def _digests() -> dict[str, str]:
    out = {"bench_payload": _built([bench_payload("bench-session-0001", i) for i in range(3)])}
    for path in sorted(FIXTURES.glob("*.json")):
        elements = json.loads(path.read_text(encoding="utf-8"))
        out[path.stem] = _built([json.dumps(e).encode() for e in elements])
    return out


@pytest.mark.skipif(not FIXTURES.is_dir() or not any(FIXTURES.glob("*.json")), reason=missing(FIXTURES))
def test_built_events_are_unchanged() -> None:
    got = _digests()
    if UPDATE:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert got == want
