"""What a session's log already holds, so that an import writes nothing twice.

A reconstructed event is "already there" when the log has its id, its merge key
(a tool-use id, a prompt's digest …), a hook's event of the same kind within
:data:`WINDOW_US` (prompts, turn ends, session starts, which share no id), or,
for the tool events a hook recorded without a call id (Gemini CLI's), a hook
event of the same tool with the same ``attrs.input_key``.
"""

from __future__ import annotations

import os
from typing import Any, Final

import orjson

from agentlog.importers.base import merge_key, text_digest

#: a transcript's prompt (same text), turn end or session start and a hook's are one
#: when this close (µs)
WINDOW_US: Final = 5_000_000
WINDOW_KINDS: Final = frozenset({"turn_stopped", "session_started"})
TOOL_KINDS: Final = frozenset({"tool_call_started", "tool_call_finished", "tool_call_failed", "permission_denied"})


def hook_merge_key(event: dict[str, Any]) -> str | None:
    """The merge key of an event a hook recorded (see :func:`base.merge_key`)."""
    kind = event.get("kind")
    provider = str(event.get("provider") or "")
    session = event.get("provider_session_id")
    if kind in TOOL_KINDS:
        tool = event.get("tool")
        call_id = tool.get("call_id") if isinstance(tool, dict) else None
        if isinstance(call_id, str) and call_id:
            return merge_key(provider, session, str(kind), call_id)
        return None
    if kind == "prompt_submitted":
        content = event.get("content")
        prompt = content.get("prompt") if isinstance(content, dict) else None
        if isinstance(prompt, str):
            return merge_key(provider, session, "prompt_submitted", text_digest(prompt))
    return None


class Known:
    """What a session's log holds: event ids and merge keys; and, of what hooks
    recorded, the times of prompts (by a digest of their text, which a person may
    type twice), turn ends and session starts (which carry no id both sides share):
    a reconstructed one is the same thing when a hook's is within
    :data:`WINDOW_US`.

    Each id maps to the source line whose bytes its event holds in ``raw`` (0: none),
    so that a line whose event is not written is still kept when no event there
    holds it (:meth:`loses_line`)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.keys: set[str] = set()
        self.times: dict[tuple[str, ...], list[int]] = {}
        self.idless: dict[tuple[str, str, str], int] = {}
        """Tool events a hook recorded without a call id (Gemini CLI's), by (start or
        end, tool, ``attrs.input_key``): how many an import may still recognise."""

    @staticmethod
    def _idless_key(ev: dict[str, Any]) -> tuple[str, str, str] | None:
        kind = ev.get("kind")
        attrs = ev.get("attrs")
        tool = ev.get("tool")
        if kind not in TOOL_KINDS or not isinstance(attrs, dict) or not isinstance(tool, dict):
            return None
        ikey = attrs.get("input_key")
        if not isinstance(ikey, str):
            return None
        return ("start" if kind == "tool_call_started" else "end", str(tool.get("name")), ikey)

    @staticmethod
    def _timed(ev: dict[str, Any], key: str | None) -> tuple[str, ...] | None:
        kind = ev.get("kind")
        if kind == "prompt_submitted":
            return ("prompt", key) if key else None
        if kind in WINDOW_KINDS:
            return (str(ev.get("provider")), str(ev.get("provider_session_id")), str(kind))
        return None

    def add(self, ev: dict[str, Any], key: str | None) -> None:
        attrs = ev.get("attrs")
        self.ids[str(ev.get("event_id"))] = line_held(ev, attrs)
        hooked = not (isinstance(attrs, dict) and attrs.get("reconstructed") is True)
        if hooked and key is None:
            idless = self._idless_key(ev)
            if idless is not None:
                self.idless[idless] = self.idless.get(idless, 0) + 1
        timed = self._timed(ev, key)
        if timed is not None:
            if hooked:
                at = ev.get("observed_at")
                self.times.setdefault(timed, []).append(at if isinstance(at, int) else 0)
        elif key:
            self.keys.add(key)

    def take(self, ev: dict[str, Any], key: str | None) -> bool:
        """:meth:`has` then, when it was not there, :meth:`add` (an imported event:
        ``ev["attrs"]`` says ``reconstructed``); whether it was new."""
        event_id = ev["event_id"]
        if event_id in self.ids:
            return False
        idless = self._idless_key(ev) if key is not None and key not in self.keys else None
        if idless is not None and self.idless.get(idless, 0) > 0:
            # a call a hook recorded without its id (same tool, same input): already there
            self.idless[idless] -= 1
            self.keys.add(key)  # type: ignore[arg-type]
            return False
        timed = self._timed(ev, key)
        if timed is not None:
            times = self.times.get(timed, ())
            if times:
                if ev["attrs"].get("time_estimated") is True:
                    return False  # a transcript without times (Cursor): the same text is enough
                at = ev["observed_at"]
                if any(abs(at - t) <= WINDOW_US for t in times):
                    return False
        elif key:
            if key in self.keys:
                return False
            self.keys.add(key)
        self.ids[str(event_id)] = line_held(ev, ev["attrs"])
        if timed is not None and ev["attrs"].get("reconstructed") is not True:
            at = ev.get("observed_at")
            self.times.setdefault(timed, []).append(at if isinstance(at, int) else 0)
        return True

    def loses_line(self, ev: dict[str, Any]) -> bool:
        """Whether ``ev``, an event holding its line in ``raw`` that :meth:`take` did
        not take, leaves its line out of the log: it was the same thing as an event
        of a hook or of another line (its merge key or time), or an event of another
        line had its id (Gemini CLI writes a message again under its id)."""
        held = self.ids.get(ev["event_id"])
        return held is None or held != ev["attrs"].get("source_line")

    def holds_line(self, attrs: dict[str, Any]) -> bool:
        """Whether a ``transcript_line`` event made for a line's own event
        (:func:`base.line_event_of`: ``attrs.carrier_event_id``) need not be written:
        that event is in the log, holding that line."""
        carrier = attrs.get("carrier_event_id")
        return carrier is not None and self.ids.get(carrier) == attrs.get("source_line")

    def has(self, ev: dict[str, Any], key: str | None) -> bool:
        if ev["event_id"] in self.ids:
            return True
        timed = self._timed(ev, key)
        if timed is not None:
            times = self.times.get(timed, ())
            if ev["attrs"].get("time_estimated") is True:
                return bool(times)  # a transcript without times (Cursor): the same text is enough
            at = ev["observed_at"]
            return any(abs(at - t) <= WINDOW_US for t in times)
        return bool(key) and key in self.keys


def line_held(ev: dict[str, Any], attrs: Any) -> int:
    """The source line an event holds in ``raw`` (0: none, or not a reconstructed one's)."""
    if "raw" not in ev or not isinstance(attrs, dict):
        return 0
    n = attrs.get("source_line")
    return n if isinstance(n, int) else 0


def session_known(root: str, provider: str, session_id: str | None) -> Known:
    """What a session's log holds (sealed segments included)."""
    from agentlog.core.unsealing import Opener
    from agentlog.log.frame import event_bytes
    from agentlog.log.layout import log_path, session_key
    from agentlog.log.segments import lines_from

    opened = Opener(root)  # a sealed prompt's merge key is its text (docs/encryption.md)
    known = Known()
    path = log_path(root, provider, session_key(session_id))
    if not os.path.exists(path):
        return known
    for _, line in lines_from(path, 0):
        if not line.startswith(b'{"v":1') or b',"event":' not in line:
            continue
        body = opened(event_bytes(line))  # (the key locked: AtRestLockedError, said as it is)
        try:
            ev = orjson.loads(body)
        except Exception:
            continue
        if not isinstance(ev, dict):
            continue
        attrs = ev.get("attrs")
        key = attrs.get("merge_key") if isinstance(attrs, dict) else None
        known.add(ev, key if isinstance(key, str) else hook_merge_key(ev))
    return known


__all__ = ["Known", "TOOL_KINDS", "WINDOW_KINDS", "WINDOW_US", "hook_merge_key", "line_held", "session_known"]
