"""Locating the shared real-agent fixtures (tests, demo, benchmarks).

They live in ``shared/fixtures`` beside the repository clone; ``AGENTLOG_SHARED``
overrides. Returns None when they are not there (an installed package).
"""

from __future__ import annotations

import os
from pathlib import Path


def shared_dir() -> Path | None:
    env = os.environ.get("AGENTLOG_SHARED")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    candidates += [p / "shared" for p in here.parents]
    candidates += [p / "shared" for p in Path.cwd().resolve().parents] + [Path.cwd() / "shared"]
    for c in candidates:
        if (c / "fixtures").is_dir():
            return c
    return None


def claude_hook_fixtures() -> list[Path]:
    """The Claude Code hook payload files (each a JSON array), sorted; [] when absent."""
    base = shared_dir()
    if base is None:
        return []
    return sorted((base / "fixtures" / "claude-code-hooks").glob("*.json"))


def payload_stdin(element: object) -> bytes:
    """The exact stdin bytes of one fixture element.

    The guardrails logger wrapped PostToolUseFailure payloads as
    with their own fields plus ``raw_input``, the original stdin, which is
    what is replayed. Every other element *is* the payload (re-serialised
    by its logger).
    """
    import json

    if isinstance(element, dict) and isinstance(element.get("raw_input"), str):
        try:
            inner = json.loads(element["raw_input"])
        except ValueError:
            inner = None
        if isinstance(inner, dict) and "hook_event_name" in inner:
            return str(element["raw_input"]).encode("utf-8")
    return json.dumps(element, ensure_ascii=False).encode("utf-8")
