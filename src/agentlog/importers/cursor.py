"""Cursor agent transcripts (``agent-transcripts/<id>/<id>.jsonl``) → reconstructed events.

A Cursor transcript line is either a message,
``{"role": "user"|"assistant", "message": {"content": [block, …]}}`` with
``text`` and ``tool_use`` (``name``, ``input``) blocks, or a turn marker,
``{"type": "turn_ended", "status": "success"|"error", "error"?}``.
Transcripts carry **no timestamps, no tool-use ids, no tool results and no
token usage** (hooks reference, §5.4 "Cursor agent transcripts").

==============================================  =====================================
line / block                                    event (``provider_event_name``)
==============================================  =====================================
``user`` text blocks (joined)                   ``prompt_submitted`` (``transcript:user``)
``assistant`` ``text`` block                    ``agent_message`` (``transcript:assistant``)
``assistant`` ``tool_use`` block                ``tool_call_started``, ``attrs.result_unknown``
``turn_ended`` ``success`` (or other status)    ``turn_stopped`` (``transcript:turn_ended``)
``turn_ended`` ``error`` / ``aborted``          ``turn_failed`` (``content.error``, class)
anything else (record, block, non-JSON line)    ``unknown`` (``attrs.unrecognised`` or
                                                ``attrs.payload_error``)
==============================================  =====================================

Prompts: the text inside ``<user_query>…</user_query>`` (stripped), without a
leading ``<timestamp>…</timestamp>`` element, whose text is kept in
``attrs.prompt_timestamp_text``; the whole line stays in ``raw``. A prompt's
merge-key item is :func:`~agentlog.importers.base.text_digest` of that text,
the hook's ``beforeSubmitPrompt`` prompt. Tool events have no item (no ids).

Tool names are kept verbatim (``Read``, ``Shell``, ``Grep`` …, as the hook's
``preToolUse`` keeps ``tool_name``); category, paths and command facts come
from the capture helpers. A file tool whose input names its file by ``path``
(Cursor's ``Read``) gets the file facts ``beforeReadFile`` would give.

Time: ``observed_at`` = base + line number × :data:`LINE_STEP_US`, where base
is the latest ``<timestamp>`` parsed so far (e.g. ``Saturday, Aug 29, 2026,
1:20 PM (UTC+2)``; a time without a zone is not parsed), else
:attr:`CursorParser.base_time_us` (set by the runner, default 0). Every event
has ``attrs.time_estimated``. The step is a millisecond so that two identical
prompts on different lines get different event ids (ids take the
millisecond of ``observed_at``; a prompt's id does not take its line).

Session: :attr:`~agentlog.importers.base.Parser.session_hint` (else the file
stem). Under ``…/subagents/<subId>.jsonl`` every event also has
``agent.agent_id`` = that id, ``attrs.is_subagent`` and
``attrs.parent_conversation_id``. No cwd, version or turn id is known;
``attrs.turn_index`` counts the ``turn_ended`` markers before the line.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from agentlog.importers.base import NOT_JSON, Parser, SourceLine, build_event, c, text_digest

#: µs added to the base time per line number
LINE_STEP_US: Final = 1000
_KNOWN_KEYS: Final = {"user": ("role", "message"), "assistant": ("role", "message"),
                      "turn_ended": ("type", "status", "error")}
_MONTHS: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_TS_RE: Final = re.compile(
    r"(?:[A-Za-z]+,\s*)?([A-Za-z]{3,9})\.?\s+(\d{1,2}),\s*(\d{4}),?\s+(\d{1,2}):(\d{2})(?::(\d{2}))?"
    r"\s*([AaPp][Mm])?\s*\(\s*(?:UTC|GMT)\s*(?:([+-])(\d{1,2})(?::?(\d{2}))?)?\s*\)")
_TAG_RE: Final = re.compile(r"<timestamp>(.*?)</timestamp>", re.S)
_QUERY_RE: Final = re.compile(r"<user_query>(.*?)(?:</user_query>|\Z)", re.S)


def parse_cursor_timestamp(s: str) -> int | None:
    """µs since the epoch of Cursor's prompt time text, e.g. ``Saturday, Aug 29,
    2026, 1:20 PM (UTC+2)``; ``None`` unless it parses completely, with a zone."""
    m = _TS_RE.fullmatch(s.strip())
    if m is None:
        return None
    mon, day, year, hour, minute, sec, ampm, sign, oh, om = m.groups()
    key = mon[:3].lower()
    if key not in _MONTHS:
        return None
    h = int(hour)
    if ampm is not None:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if ampm.lower() == "pm" else 0)
    offset = 0
    if sign is not None:
        offset = int(oh) * 60 + int(om or 0)
        if int(oh) > 14 or int(om or 0) > 59:
            return None
        offset = -offset if sign == "-" else offset
    try:
        dt = datetime(int(year), _MONTHS.index(key) + 1, int(day), h, int(minute), int(sec or 0),
                      tzinfo=timezone(timedelta(minutes=offset)))
    except ValueError:
        return None
    return int(dt.timestamp()) * 1_000_000


def split_user_text(text: str) -> tuple[str, str | None, bool]:
    """(prompt, timestamp text, whether it was wrapped in ``<user_query>``)."""
    ts = _TAG_RE.search(text)
    stamp = ts.group(1).strip() if ts is not None else None
    q = _QUERY_RE.search(text)
    if q is not None:
        return q.group(1).strip(), stamp, True
    rest = text[:ts.start()] + text[ts.end():] if ts is not None else text
    return rest.strip(), stamp, False


class CursorParser(Parser):
    """One Cursor transcript file (see the module docstring for the mapping)."""

    provider = "cursor"
    source = "cursor_transcript"
    carried = ("_stamp_us", "_turns")

    def __init__(self, path: str, session_hint: str | None = None) -> None:
        super().__init__(path, session_hint)
        self.base_time_us = 0
        """Base of the estimated times until a ``<timestamp>`` parses (µs; the runner may set it)."""
        self._stamp_us: int | None = None
        self._turns = 0
        norm = path.replace("\\", "/")
        stem = norm.rsplit("/", 1)[-1]
        stem = stem.rsplit(".", 1)[0] if "." in stem else stem
        self.session_id: str | None = session_hint or stem or None
        parts = norm.split("/")
        self.subagent = "subagents" in parts[:-1]
        self.parent_id: str | None = None
        if self.subagent:
            i = len(parts) - 2 - parts[:-1][::-1].index("subagents")
            self.parent_id = parts[i - 1] if i > 0 and parts[i - 1] else None

    # -- per line -------------------------------------------------------------

    def feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        if not line.data.strip():
            return []
        try:
            return self._feed(line, record)
        except Exception as e:  # a bug here must not lose the line
            self.stats.problem(line, f"parser error: {type(e).__name__}")
            ev = c.new_event("unknown", "transcript:")
            ev["attrs"]["adapter_error"] = type(e).__name__
            return self._build([ev], line)

    def _feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        if record is NOT_JSON:
            self.stats.saw("not_json")
            self.stats.problem(line, "line is not JSON")
            return self._build([self._unknown("transcript:", "invalid_json")], line)
        if not isinstance(record, dict):
            self.stats.saw("not_object")
            self.stats.problem(line, f"line is a JSON {type(record).__name__}, not an object")
            return self._build([self._unknown("transcript:", "payload_not_object")], line)
        role, typ = record.get("role"), record.get("type")
        rtype = role if isinstance(role, str) and role else typ if isinstance(typ, str) and typ else "(none)"
        self.stats.saw(rtype)
        name = "transcript:" + rtype
        if rtype in _KNOWN_KEYS:
            for k in record:
                if k not in _KNOWN_KEYS[rtype]:
                    self.stats.unknown_field(None, f"{rtype}.{k}")
        if rtype == "turn_ended":
            evs = [self._turn_ended(record, name)]
        elif rtype in ("user", "assistant"):
            evs = self._message(line, record, rtype, name)
        else:
            self.stats.unknown_record(None, rtype)
            ev = self._unknown(name, None)
            ev["attrs"]["unrecognised"] = True
            evs = [ev]
        out = self._build(evs, line)
        if rtype == "turn_ended":
            self._turns += 1
        return out

    def _message(self, line: SourceLine, record: dict[str, Any], role: str, name: str) -> list[dict[str, Any]]:
        message = record.get("message")
        if not isinstance(message, dict):
            self.stats.problem(line, f"{role}: message is not an object")
            return [self._unknown(name, "bad_message")]
        for k in message:
            if k != "content":
                self.stats.unknown_field(None, f"{role}.message.{k}")
        blocks = message.get("content")
        if isinstance(blocks, str):  # tolerated: one text block
            self.stats.unknown_field(None, f"{role}.message.content:string")
            blocks = [{"type": "text", "text": blocks}]
        if not isinstance(blocks, list):
            self.stats.problem(line, f"{role}: message.content is not a list")
            return [self._unknown(name, "bad_content")]
        evs: list[dict[str, Any]] = []
        texts: list[str] = []
        for i, b in enumerate(blocks):
            btype = b.get("type") if isinstance(b, dict) else None
            if not isinstance(btype, str) or not btype or (btype == "text" and not isinstance(b.get("text"), str)):
                self.stats.problem(line, f"{role}: content block {i} has no type" if btype != "text"
                                   else f"{role}: text block {i} has no text")
                ev = self._unknown(name, "bad_block")
            elif btype == "text":
                if role == "user":
                    texts.append(b["text"])
                    continue
                ev = c.new_event("agent_message", name)
                c.set_str(ev["content"], "message", b["text"])
            elif btype == "tool_use" and role == "assistant":
                ev = self._tool_use(b, name)
            else:
                self.stats.unknown_record(None, f"{role}.{btype}")
                ev = self._unknown(name, None)
                ev["attrs"]["unrecognised"] = True
                ev["attrs"]["block_type"] = btype
            evs.append(ev)
        if texts:
            evs.insert(0, self._prompt(line, "\n".join(texts), name))
        if not evs:
            self.stats.unknown_record(None, f"{role}.empty")
            evs.append(self._unknown(name, "empty_content"))
        return evs

    def _prompt(self, line: SourceLine, text: str, name: str) -> dict[str, Any]:
        prompt, stamp, wrapped = split_user_text(text)
        ev = c.new_event("prompt_submitted", name)
        c.prompt_facts(ev, prompt)
        attrs: dict[str, Any] = ev["attrs"]
        if wrapped:
            attrs["prompt_wrapper"] = "user_query"
        if stamp is not None:
            attrs["prompt_timestamp_text"] = stamp
            at = parse_cursor_timestamp(stamp)
            if at is not None:
                self._stamp_us = at
            else:
                self.stats.problem(line, "unparsed <timestamp> text")
        ev["_item"] = text_digest(prompt)
        return ev

    def _tool_use(self, block: dict[str, Any], name: str) -> dict[str, Any]:
        ev = c.new_event("tool_call_started", name)
        tname = block.get("name")
        category = c.set_tool(ev, tname) or "other"
        tool_input = block.get("input")
        c.input_facts(ev, tool_input, category, tname if isinstance(tname, str) else "")
        paths: list[str] = ev["paths"]
        if category in ("file_read", "file_write", "file_edit") and paths and isinstance(tool_input, dict) \
                and not any(isinstance(tool_input.get(k), str) for k in c.FILE_KEYS):
            c.set_file_facts(ev, paths[0])
        ev["attrs"]["result_unknown"] = True
        return ev

    def _turn_ended(self, record: dict[str, Any], name: str) -> dict[str, Any]:
        ev = c.new_event("turn_stopped", name)
        attrs: dict[str, Any] = ev["attrs"]
        status = c.text(record.get("status"))
        if status is not None:
            attrs["status"] = status
        if status not in ("success", "completed", "error", "aborted"):
            self.stats.unknown_field(None, f"turn_ended.status:{status or '(none)'}")
        err = c.error_text(record.get("error"))
        if status == "aborted":
            ev["kind"] = "turn_failed"
            c.set_failure(ev, err, cls="interrupted", status="cancelled")
        elif status == "error":
            ev["kind"] = "turn_failed"
            c.set_failure(ev, err)
            if ev["outcome"]["class"] == "unknown":
                ev["outcome"]["class"] = attrs["error_class"] = "turn_failed"
        elif err is not None:
            ev["content"]["error"] = err
        return ev

    # -- building -------------------------------------------------------------

    @staticmethod
    def _unknown(name: str, error: str | None) -> dict[str, Any]:
        ev = c.new_event("unknown", name)
        if error is not None:
            ev["attrs"]["payload_error"] = error
        return ev

    def _build(self, evs: list[dict[str, Any]], line: SourceLine) -> list[dict[str, Any]]:
        base = self._stamp_us if self._stamp_us is not None else self.base_time_us
        at = base + line.lineno * LINE_STEP_US
        out: list[dict[str, Any]] = []
        for index, ev in enumerate(evs):
            item = ev.pop("_item", None)
            attrs: dict[str, Any] = ev["attrs"]
            attrs["time_estimated"] = True
            attrs["turn_index"] = self._turns
            if self.subagent:
                ev["agent"] = {"agent_id": self.session_id} if self.session_id else {}
                attrs["is_subagent"] = True
                if self.parent_id is not None:
                    attrs["parent_conversation_id"] = self.parent_id
            out.append(build_event(self, c.finish(ev), line, session_id=self.session_id, observed_at=at,
                                   item=item if isinstance(item, str) else None, index=index,
                                   with_raw=index == 0))
        return out


__all__ = ["LINE_STEP_US", "CursorParser", "parse_cursor_timestamp", "split_user_text"]
