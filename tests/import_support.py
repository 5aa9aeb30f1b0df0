"""What the import tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def log_events(root: Path) -> list[dict[str, Any]]:
    """Every event in every session log under ``root`` (read as a reader of the log would)."""
    from agentlog.log.frame import event_bytes

    out = []
    for path in sorted((root / "logs").rglob("*.jsonl")):
        for line in path.read_bytes().splitlines(keepends=True):
            out.append(json.loads(event_bytes(line)))
    return out


def record_prompt(root: str, session_id: str, prompt: str = "hello") -> str:
    """A prompt recorded through the hook path (its log; not ingested); its event id."""
    from agentlog.capture.hook import build, record

    payload = {"session_id": session_id, "hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": "/nonexistent"}
    captured = build("claude-code", json.dumps(payload).encode(), 0, [])
    record(captured, root, "relaxed")
    return str(captured.event["event_id"])
