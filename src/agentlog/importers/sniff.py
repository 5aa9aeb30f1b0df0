"""Is this file an agent's transcript? Read its first records and look for the agent's shape.

``agentlog import claude-code FILE`` used to take any file: a file that is not a transcript
became a session of garbage (every line kept as a ``transcript_line``). A file named on the
command line is now read first: its first non-empty lines must be JSON objects, and at
least one of them must have the shape the agent writes (the keys below, from each agent's
format, docs/import.md). A whole-document ``.json`` (Gemini CLI's older chats) is parsed
whole. ``--force`` imports a file anyway.
"""

from __future__ import annotations

from typing import Any, Callable, Final

import orjson

HEAD_BYTES: Final = 256 << 10
"""At most this much of a file is read to decide."""
HEAD_LINES: Final = 50


def _claude(d: dict[str, Any]) -> bool:
    return isinstance(d.get("type"), str) and any(k in d for k in ("sessionId", "uuid", "message", "leafUuid"))


def _codex(d: dict[str, Any]) -> bool:
    if d.get("type") in ("session_meta", "response_item", "event_msg", "turn_context", "compacted") and "payload" in d:
        return True
    return "timestamp" in d and any(k in d for k in ("instructions", "record_type")) or (
        d.get("type") in ("message", "function_call", "function_call_output", "reasoning") and "id" not in d)


def _gemini(d: dict[str, Any]) -> bool:
    if isinstance(d.get("messages"), list) and ("sessionId" in d or "projectHash" in d):
        return True
    return ("sessionId" in d and "projectHash" in d) or (
        d.get("type") in ("user", "gemini", "info", "error", "warning") and "id" in d and "timestamp" in d)


def _cursor(d: dict[str, Any]) -> bool:
    return (d.get("role") in ("user", "assistant") and isinstance(d.get("message"), dict)) or d.get("type") == "turn_ended"


SHAPES: Final[dict[str, Callable[[dict[str, Any]], bool]]] = {
    "claude-code": _claude, "codex": _codex, "gemini-cli": _gemini, "cursor": _cursor,
}
EXPECTED: Final = {
    "claude-code": "JSON lines with a type and sessionId/uuid/message (a ~/.claude/projects/*/*.jsonl file)",
    "codex": "JSON lines of session_meta/response_item/event_msg records (a ~/.codex/sessions rollout)",
    "gemini-cli": "a chat of Gemini CLI (~/.gemini/tmp/*/chats): messages with a sessionId",
    "cursor": "JSON lines of role/message records (a Cursor agent transcript)",
}


def looks_like(agent: str, path: str) -> tuple[bool, str]:
    """``(is it one, why not)`` for ``agent``'s transcripts; agents this module does not know
    (attemptdb, nd7 have their own checks) are always accepted."""
    shape = SHAPES.get(agent)
    if shape is None:
        return True, ""
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as e:
        return False, f"cannot read it ({e.strerror or e})"
    if not head.strip():
        return True, ""  # an empty file is a transcript nothing was written to yet
    if path.endswith(".json"):
        try:
            doc = orjson.loads(head)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and shape(doc):
            return True, ""
    records = 0
    for raw in head.splitlines()[:HEAD_LINES]:
        if not raw.strip():
            continue
        try:
            d = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(d, dict):
            records += 1
            if shape(d):
                return True, ""
    if not records:
        return False, "its first lines are not JSON objects"
    return False, f"none of its first {records} JSON records has the shape of one"


__all__ = ["EXPECTED", "SHAPES", "looks_like"]
