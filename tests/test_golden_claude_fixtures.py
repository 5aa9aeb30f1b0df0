"""Golden test: every real Claude Code hook payload in the shared fixtures, normalised.

Each fixture file (a JSON array of stdin payloads) has a golden file
``tests/golden/claude-code-hooks/<stem>.jsonl`` with one line per payload:
the mapping-relevant fields of the adapter's output. Regenerate with
``AGENTLOG_UPDATE_GOLDENS=1`` and review the diff by hand.

Home directories in paths are written as ``~`` in the goldens so that the
third parties' user names in the fixtures are not copied into this repo.

The shared directory is found by ``agentlog.operations.fixtures.shared_dir`` (``<repo>/../shared``; ``AGENTLOG_SHARED`` overrides).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentlog.capture.adapters import claude_code
from agentlog.operations.fixtures import missing, shared_dir
from agentlog.core.model import Event

REPO = Path(__file__).resolve().parents[1]
SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"  # the same lookup as the demo
FIXTURES = SHARED / "fixtures" / "claude-code-hooks"
GOLDEN_DIR = REPO / "tests" / "golden" / "claude-code-hooks"
UPDATE = os.environ.get("AGENTLOG_UPDATE_GOLDENS") == "1"

ATTR_KEYS = (
    "command_category",
    "git_subcommand",
    "error_class",
    "prompt_kind",
    "notification_type",
    "is_subagent",
    "file_ext",
    "lines_added",
    "lines_removed",
    "unrecognised",
)


def fixture_files() -> list[Path]:
    if not FIXTURES.is_dir():
        return []
    return sorted(FIXTURES.glob("*.json"))


def genuine_payload(element: Any) -> Any:
    """The stdin Claude sent for one logged element.

    One logger saved PostToolUseFailure as a wrapper whose ``raw_input`` is
    the original stdin (plus the logger's ``logged_at``); unwrap it.
    """
    if isinstance(element, dict) and "raw_input" in element:
        raw = element["raw_input"]
        if isinstance(raw, str):
            raw = json.loads(raw)
        if isinstance(raw, dict):
            return raw
    return element


def elide_home(p: str) -> str:
    for prefix in ("/Users/", "/home/"):
        if p.startswith(prefix):
            rest = p[len(prefix) :]
            _user, sep, tail = rest.partition("/")
            return "~/" + tail if sep else "~"
    return p


def golden_line(out: dict[str, Any]) -> str:
    attrs = out.get("attrs", {})
    row: dict[str, Any] = {
        "kind": out["kind"],
        "provider_event_name": out["provider_event_name"],
        "tool": out.get("tool"),
        "outcome": out.get("outcome"),
        "paths": [elide_home(p) for p in out.get("paths", [])],
        "duration_ms": out.get("duration_ms"),
        "agent": out.get("agent"),
        "attrs": {k: attrs[k] for k in ATTR_KEYS if k in attrs},
    }
    row = {k: v for k, v in row.items() if v not in (None, [], {})}
    return json.dumps(row, ensure_ascii=False)


def full_event(out: dict[str, Any], payload: Any) -> Event:
    d = dict(out)
    d.pop("cwd", None)
    d.update(
        event_id="0190f0e0-0000-7000-8000-000000000000",
        schema_version=1,
        provider=claude_code.PROVIDER,
        observed_at=d.get("observed_at", 1),
        captured_at=1,
        raw=payload,
    )
    return Event.from_wire(d)


@pytest.mark.skipif(not fixture_files(), reason=missing(FIXTURES))
@pytest.mark.parametrize("fixture", fixture_files(), ids=lambda p: p.stem)
def test_claude_fixture_golden(fixture: Path) -> None:
    elements = json.loads(fixture.read_text(encoding="utf-8"))
    assert isinstance(elements, list)
    lines = []
    for element in elements:
        payload = genuine_payload(element)
        out = claude_code.normalise(payload, [])
        full_event(out, payload)  # strict model check
        assert out.get("provider_session_id"), "every real payload has a session id"
        assert "unrecognised" not in out.get("attrs", {})
        lines.append(golden_line(out))
    text = "\n".join(lines) + "\n"
    golden = GOLDEN_DIR / f"{fixture.stem}.jsonl"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
        return
    assert golden.exists(), f"missing golden {golden}; run with AGENTLOG_UPDATE_GOLDENS=1 and review it"
    expected = golden.read_text(encoding="utf-8").splitlines()
    assert len(expected) == len(lines), f"{fixture.name}: {len(lines)} payloads, golden has {len(expected)} lines"
    for i, (got, want) in enumerate(zip(lines, expected)):
        assert got == want, f"{fixture.name} element {i}:\n got  {got}\n want {want}"


@pytest.mark.skipif(not fixture_files(), reason=missing(FIXTURES))
def test_claude_fixture_kind_counts() -> None:
    """Every fixture payload maps to the kind its event name promises."""
    counts: Counter[str] = Counter()
    for fixture in fixture_files():
        for element in json.loads(fixture.read_text(encoding="utf-8")):
            out = claude_code.normalise(genuine_payload(element), [])
            counts[out["kind"]] += 1
    assert counts["unknown"] == 0
    assert counts["tool_call_failed"] >= 10  # the PostToolUseFailure file at least
    assert counts["tool_call_started"] == 62
    assert counts["permission_requested"] == 44
    assert counts["notification"] == 47
