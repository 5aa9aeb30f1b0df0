"""What the import tests share."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Iterable


def log_events(root: Path) -> list[dict[str, Any]]:
    """Every event in every session log under ``root`` (read as a reader of the log would)."""
    from agentlog.log.frame import event_bytes

    out = []
    for path in sorted((root / "logs").rglob("*.jsonl")):
        for line in path.read_bytes().splitlines(keepends=True):
            out.append(json.loads(event_bytes(line)))
    return out


def lines_held(root: Path) -> dict[tuple[str, int], bytes]:
    """The source lines the logs hold in ``raw`` (imported events': not hooks'), by (file,
    line); fails on a line held twice."""
    held: dict[tuple[str, int], bytes] = {}
    for ev in log_events(root):
        raw = ev.get("raw")
        if raw is None or not ev["attrs"].get("reconstructed"):
            continue
        where = (ev["attrs"]["source_file"], ev["attrs"]["source_line"])
        assert where not in held, f"{where} held twice"
        held[where] = raw["line"].encode("utf-8") if "line" in raw else base64.b64decode(raw["line_b64"])
    return held


def source_lines(files: Iterable[Path]) -> dict[tuple[str, int], bytes]:
    """Each non-blank line of ``files`` by (file, line), as the log keeps it: its secrets
    redacted (as the importer's redactor does to ``raw``), bytes not UTF-8 as they are."""
    from agentlog.capture.redact import redact_value

    out: dict[tuple[str, int], bytes] = {}
    for f in files:
        for n, line in enumerate(f.read_bytes().split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                out[(str(f), n)] = line
                continue
            out[(str(f), n)] = str(redact_value({"line": text})[0]["line"]).encode("utf-8")
    return out


def record_prompt(root: str, session_id: str, prompt: str = "hello") -> str:
    """A prompt recorded through the hook path (its log; not ingested); its event id."""
    from agentlog.capture.hook import build, record

    payload = {"session_id": session_id, "hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": "/nonexistent"}
    captured = build("claude-code", json.dumps(payload).encode(), 0, [])
    record(captured, root, "relaxed")
    return str(captured.event["event_id"])


def feed_file(parser: Any, path: Any) -> list[dict[str, Any]]:
    """The events ``parser`` gives for the file at ``path``, read by the importer's own line
    reader (every line fed, then finished)."""
    from agentlog.importers import run

    events: list[dict[str, Any]] = []
    for line, _ in run.iter_lines(str(path), 0, 0):
        assert line is not None
        record = run.parse_json(line.data)
        if record is not None:
            events += parser.feed(line, record)
    return events + parser.finish()


def parse_claude_transcript(path: Any) -> tuple[list[dict[str, Any]], Any]:
    """The events a Claude Code transcript gives, and its parser."""
    from agentlog.importers.claude_code import ClaudeCodeParser

    parser = ClaudeCodeParser(str(path))
    return feed_file(parser, path), parser
