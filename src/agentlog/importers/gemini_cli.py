"""Gemini CLI chat recordings → reconstructed events.

Gemini CLI records each session under ``~/.gemini/tmp/<projectHash>/chats/``
(hooks reference §5.3) in one of two forms:

- **JSONL** (v0.40-ish): a metadata line ``{sessionId, projectHash, startTime,
  lastUpdated, kind, directories?, summary?}``; message records (with an
  ``id``; the same id may be written again: the **last write wins**);
  ``{"$set": {…}}`` metadata updates; ``{"$rewindTo": "<id>"}``, which drops
  that message and every message after it.
- **one JSON document** (older builds) ``{sessionId, …, messages[]}``, mostly
  pretty-printed, so a line reader sees fragments: a runner detects it with
  :func:`chat_document` and calls :meth:`GeminiCliParser.feed_document`.

As a later line may replace or rewind a message, :meth:`~GeminiCliParser.feed`
keeps messages in an ordered dict by id (a rewritten id keeps its first
position, takes the last write's body and line) and
:meth:`~GeminiCliParser.finish` emits their events, each citing the line of
the record that produced it. Lines nothing later can change (metadata,
garbage) become events at once.

==================================  =============================================
record (``provider_event_name``)    events
==================================  =============================================
metadata (``chat:metadata``)        ``session_started``; cwd = first directory,
                                    else ``../.project_root`` beside ``chats/``
``user`` (``chat:user``)            ``prompt_submitted``; injected text
                                    (``prompt_kind``) → ``notification``; one
                                    holding only ``functionResponse`` parts
                                    (tool results): nothing
``gemini`` (``chat:gemini``)        ``agent_message`` when it has text or no tool
                                    calls (``agent.model``, ``attrs.tokens_*``),
                                    and a :attr:`~GeminiCliParser.usage` row
``toolCalls[]`` (``chat:toolCall``) ``tool_call_started``, and once ``status``
                                    is final ``tool_call_finished``/``_failed``
``info``/``warning``/``error``      ``notification``, ``attrs.level`` = type
``$set``, ``$rewindTo``             none (counted, applied; the line is
                                    kept as a ``transcript_line``, as is a
                                    write replaced or dropped)
anything else                       ``unknown`` (``attrs.unrecognised`` or
                                    ``attrs.payload_error``), reported
==================================  =============================================

Tool calls go through the capture helpers and the Gemini hook adapter's own
failure rules, so they get the kind, category, paths, outcome and failure
class a hook capture gets: the chat's ``functionResponse.response``
``{output|error}`` plays the hook's ``tool_response`` ``{llmContent, error}``;
``status: error`` fails even without error text; ``cancelled`` fails with
outcome ``cancelled``, class ``interrupted`` (as the Cursor adapter does). An
``error`` message stays a ``notification``: the chat marks no turn boundary
and such messages also report non-fatal trouble, so ``turn_failed`` would
guess. A record without a time takes the last time read before it
(``attrs.time_estimated``; before any, :attr:`~GeminiCliParser.base_time_us`).

Not mapped: ``displayContent``, ``resultDisplay`` (but as an error fallback),
a call's ``description``/``agentId``/``renderOutputAsMarkdown``,
``lastUpdated``, ``$set`` keys but ``directories``. The chat names no CLI
version and no turn id.

Merge-key items: the call ``id`` for tool events, ``text_digest`` of the
prompt for prompts, else the message ``id`` (none for session starts). In the
document form every event cites line 1 (where the document starts) with
``attrs.source_message_index``, its ``raw`` is the message re-serialised
compactly, and event indexes are ``10000 × (position + 1) + n``.
"""

from __future__ import annotations

from typing import Any, Callable, Final

from agentlog.capture.adapters import gemini_cli as hook
from agentlog.core.fastjson import dumps_bytes, loads
from agentlog.importers.base import (
    NOT_JSON,
    ParseStats,
    Parser,
    SourceLine,
    build_event,
    c,
    line_event_of,
    text_digest,
)

MESSAGE_TYPES: Final = frozenset({"user", "gemini", "info", "error", "warning"})
MESSAGE_KEYS: Final = frozenset({"id", "timestamp", "type", "content", "displayContent", "model", "tokens",
                                 "thoughts", "toolCalls"})
CALL_KEYS: Final = frozenset({"id", "name", "args", "result", "status", "timestamp", "displayName", "description",
                              "resultDisplay", "renderOutputAsMarkdown", "agentId"})
FINAL_STATUSES: Final = frozenset({"success", "error", "cancelled", "canceled"})
TOKEN_KEYS: Final = ("input", "output", "cached", "thoughts", "tool", "total")
DOCUMENT_STRIDE: Final = 10_000

#: one held message: its line, the record, the time to use when it has none, the
#: event-index base and its position in a document's ``messages`` (None in JSONL)
_Held = tuple[SourceLine, dict[str, Any], int, int, int | None]


def chat_document(data: bytes) -> dict[str, Any] | None:
    """The older single-document form: ``data`` (a whole file) when its first
    non-space byte is ``{`` and it parses as one JSON object with a ``messages``
    list; else None."""
    if not data.lstrip()[:1] == b"{":
        return None
    try:
        doc = loads(data.decode("utf-8"))
    except Exception:  # not UTF-8, not one document, too deep
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("messages"), list) else None


def part_text(v: Any) -> str | None:
    """Text of a ``content``: a string, or a Part list's strings and ``text`` parts
    joined as Gemini joins them (no separator); None when it is neither."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "".join(p if isinstance(p, str) else p["text"] for p in v
                       if isinstance(p, str) or isinstance(p, dict) and isinstance(p.get("text"), str))
    return None


def function_response(result: Any) -> dict[str, Any] | None:
    """``functionResponse.response`` of a tool call's ``result`` (a Part list or one Part)."""
    for part in result if isinstance(result, list) else [result]:
        fr = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(fr, dict) and isinstance(fr.get("response"), dict):
            return fr["response"]  # type: ignore[no-any-return]
    return None


class GeminiCliParser(Parser):
    """One Gemini CLI chat file (JSONL or the older single document)."""

    provider = "gemini_cli"
    source = "gemini_cli_chat"
    carried = ("session_id", "cwd", "subagent", "_last_us", "_fallback")

    def __init__(self, path: str, session_hint: str | None = None) -> None:
        super().__init__(path, session_hint)
        self.session_id: str | None = session_hint
        self.cwd: str | None = None
        self.subagent = False
        self.base_time_us = 0
        """Time of events before any timestamp was read (µs; the runner may set it)."""
        self.usage: list[dict[str, Any]] = []
        """One row per final ``gemini`` message: message_id, model, input, output,
        cached, thoughts, tool, total (ints or None) and timestamp (µs, None when it has none)."""
        self.rewound = 0
        """Messages dropped by ``$rewindTo``."""
        self._messages: dict[str, _Held] = {}
        self._last_us = 0
        self._fallback = 0
        self._held: SourceLine | None = None
        """The last line held back (a message: its events come from :meth:`finish`)."""

    # -- input ---------------------------------------------------------------

    def _safe(self, line: SourceLine, run: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        try:
            return run()
        except Exception as e:  # a bug must not stop the import
            self.stats.problem(line, f"parser error: {type(e).__name__}")
            return []

    def feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        return self._safe(line, lambda: self._feed(line, record))

    def holds(self, line: SourceLine) -> bool:
        return self._held is line

    def _dropped(self, held: _Held) -> list[dict[str, Any]]:
        """A held message's line, kept (``transcript_line``) as nothing else will hold
        it: a later write of its id replaced it, or ``$rewindTo`` dropped it. Kept as
        the line of the event that would have held it (:func:`base.line_event_of`), so
        that, read again after that event was written (an import before the rewrite),
        it is recognised as there. Not for a document's messages (their ``raw`` is their
        JSON re-serialised, not a line)."""
        line, rec, fallback, base, pos = held
        if pos is not None:
            return []
        # the message's events, worked out for their first one's id only: what they
        # would count (usage rows, problems, unknown fields) is not this file's
        rows, time, stats = len(self.usage), self._fallback, self.stats
        self.stats = ParseStats()
        try:
            events = self._message(line, rec, fallback, base, pos)
        finally:
            del self.usage[rows:]
            self._fallback, self.stats = time, stats
        if events and "raw" in events[0]:
            return [line_event_of(events[0])]
        return [self.line_event(line, rec)]

    def _feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        self._fallback = self._last_us
        if record is NOT_JSON or not isinstance(record, dict):
            if record is NOT_JSON and not line.data.strip():
                return []
            bad = "invalid_json" if record is NOT_JSON else "record_not_object"
            self.stats.saw(bad)
            self.stats.problem(line, "not JSON" if record is NOT_JSON else "record is not an object")
            return [self._unknown(line, "chat", payload_error=bad)]
        if "$rewindTo" in record:
            self.stats.saw("$rewindTo")
            return self._rewind(line, record["$rewindTo"])
        if "$set" in record:
            self.stats.saw("$set")
            self._update(line, record["$set"])
            return []
        if "id" in record or "type" in record:
            return self._put(line, record)
        if isinstance(record.get("messages"), list):
            return self.feed_document(line, record)
        if "sessionId" in record:
            self.stats.saw("metadata")
            return [self._metadata(line, record)]
        self.stats.saw("unknown")
        self.stats.unknown_record(None, "record")
        self.stats.problem(line, "unrecognised record")
        return [self._unknown(line, "chat", unrecognised=True)]

    def whole_document(self, data: bytes) -> Any:
        return chat_document(data)

    def feed_document(self, line: SourceLine, document: Any) -> list[dict[str, Any]]:
        """All events of an older single-document chat (see the module doc for
        what ``line`` and ``raw`` then are). ``line`` is the file's first line
        (its ``data`` is not used)."""
        return self._safe(line, lambda: self._document(line, document))

    def _document(self, line: SourceLine, document: Any) -> list[dict[str, Any]]:
        self.stats.saw("document")
        if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
            self.stats.problem(line, "not a chat document")
            return [self._unknown(line, "chat", payload_error="not_a_chat_document")]
        meta = {k: v for k, v in document.items() if k != "messages"}
        out = [self._metadata(self._sub(line, meta), meta)]
        for i, msg in enumerate(document["messages"]):
            sub = self._sub(line, msg)
            if isinstance(msg, dict):
                self._put(sub, msg, DOCUMENT_STRIDE * (i + 1), i)
            else:
                self.stats.saw("not_object")
                self.stats.problem(line, f"messages[{i}] is not an object")
                out.append(self._unknown(sub, "chat", payload_error="record_not_object", base=DOCUMENT_STRIDE * (i + 1),
                                         pos=i))
        out.extend(self._drain())
        return out

    def finish(self) -> list[dict[str, Any]]:
        return self._safe(SourceLine(self.path, 0, 0, b""), self._drain)

    @staticmethod
    def _sub(line: SourceLine, value: Any) -> SourceLine:
        try:
            data = dumps_bytes(value)
        except Exception:
            data = b""
        return SourceLine(line.path, line.lineno, line.offset, data)

    def _put(self, line: SourceLine, rec: dict[str, Any], base: int = 0,
             pos: int | None = None) -> list[dict[str, Any]]:
        """Hold a message (the last write of an id wins); the events of the write it
        replaced, if any: its line, kept."""
        typ = rec.get("type") if isinstance(rec.get("type"), str) else None
        self.stats.saw(typ or "message")
        if typ not in MESSAGE_TYPES:
            self.stats.unknown_record(None, f"message:{typ}" if typ else "message")
        for k in rec:
            if k not in MESSAGE_KEYS:
                self.stats.unknown_field(None, f"{typ or 'message'}.{k}")
        key = c.text(rec.get("id"))
        if key is None:
            self.stats.problem(line, "message without an id")
            key = f"\x00{line.lineno}:{pos}"
        t = c.timestamp_us(rec.get("timestamp"))
        if t is not None:
            self._last_us = t
        was = self._messages.get(key)
        self._messages[key] = (line, rec, self._last_us, base, pos)
        self._held = line
        return [] if was is None else self._dropped(was)

    def _rewind(self, line: SourceLine, target: Any) -> list[dict[str, Any]]:
        """Drop the message ``target`` and those after it; their lines, kept."""
        if not isinstance(target, str) or target not in self._messages:
            self.stats.problem(line, "$rewindTo names no message read so far (in this pass)")
            return []
        keys = list(self._messages)
        out: list[dict[str, Any]] = []
        for k in keys[keys.index(target):]:
            out.extend(self._dropped(self._messages.pop(k)))
            self.rewound += 1
        return out

    def _update(self, line: SourceLine, value: Any) -> None:
        if not isinstance(value, dict):
            self.stats.problem(line, "$set is not an object")
            return
        if self.cwd is None:
            self.cwd = _first_directory(value.get("directories"))

    # -- events --------------------------------------------------------------

    def _build(self, ev: dict[str, Any], line: SourceLine, at: int | None, item: str | None, n: int = 0, base: int = 0,
               pos: int | None = None) -> dict[str, Any]:
        if self.subagent:
            ev["attrs"]["is_subagent"] = True
        if at is None:  # the record has no time: the last one read before it
            at = self._fallback or self.base_time_us
            ev["attrs"]["time_estimated"] = True
        if pos is not None:
            ev["attrs"]["source_message_index"] = pos
        return build_event(self, c.finish(ev), line, session_id=self.session_id, observed_at=at, item=item,
                           index=base + n, cwd=self.cwd, with_raw=n == 0)

    def _unknown(self, line: SourceLine, name: str, *, payload_error: str | None = None, unrecognised: bool = False,
                 item: str | None = None, base: int = 0, pos: int | None = None) -> dict[str, Any]:
        ev = c.new_event("unknown", name)
        c.set_str(ev["attrs"], "payload_error", payload_error)
        if unrecognised:
            ev["attrs"]["unrecognised"] = True
        return self._build(ev, line, None, item, 0, base, pos)

    def _metadata(self, line: SourceLine, rec: dict[str, Any]) -> dict[str, Any]:
        sid = c.text(rec.get("sessionId"))
        if sid is not None:
            self.session_id = sid
        cwd = _first_directory(rec.get("directories")) or project_root_of(self.path)
        if cwd is not None:
            self.cwd = cwd
        kind = c.text(rec.get("kind"))
        self.subagent = kind == "subagent"
        t = c.timestamp_us(rec.get("startTime"))
        self._fallback = self._last_us
        if t is not None and not self._last_us:
            self._last_us = t
        ev = c.new_event("session_started", "chat:metadata")
        c.set_str(ev["attrs"], "session_kind", kind)
        c.set_str(ev["attrs"], "project_hash", rec.get("projectHash"))
        c.set_str(ev["content"], "summary", rec.get("summary"))
        return self._build(ev, line, t, None)

    def _drain(self) -> list[dict[str, Any]]:
        held = list(self._messages.values())
        self._messages.clear()
        out: list[dict[str, Any]] = []
        for line, rec, fallback, base, pos in held:
            out.extend(self._message(line, rec, fallback, base, pos))
        return out

    def _message(self, line: SourceLine, rec: dict[str, Any], fallback: int, base: int,
                 pos: int | None) -> list[dict[str, Any]]:
        typ = rec.get("type")
        mid = c.text(rec.get("id"))
        at = c.timestamp_us(rec.get("timestamp"))
        self._fallback = fallback
        name = f"chat:{typ}" if isinstance(typ, str) else "chat:message"
        raw_content = rec.get("content")
        body = part_text(raw_content)
        if body is None and (raw_content is not None or typ == "user"):
            self.stats.problem(line, f"message {mid!r}: content is not text")
        if typ == "gemini":
            return self._gemini(line, rec, mid, at, body or "", base, pos)
        if typ == "user" and _tool_results_only(raw_content):
            return []  # the calls' results, which their toolCalls entries give: not a prompt
        if typ == "user" and body is None:
            return [self._unknown(line, name, payload_error="content_not_text", item=mid, base=base, pos=pos)]
        if typ == "user" and body is not None and c.prompt_kind(body) == "human":
            ev = c.new_event("prompt_submitted", name)
            c.prompt_facts(ev, body)
            return [self._build(ev, line, at, text_digest(body), 0, base, pos)]
        if typ in ("user", "info", "warning", "error"):  # a user's here is text the agent injected
            ev = c.new_event("notification", name)
            ev["attrs"]["notification_type"] = "injected_prompt" if typ == "user" else typ
            if typ != "user":
                ev["attrs"]["level"] = typ
            c.set_str(ev["content"], "message", body)
            return [self._build(ev, line, at, mid, 0, base, pos)]
        ev = c.new_event("unknown", name)
        ev["attrs"]["unrecognised"] = True
        c.set_str(ev["attrs"], "message_type", typ)
        return [self._build(ev, line, at, mid, 0, base, pos)]

    def _gemini(self, line: SourceLine, rec: dict[str, Any], mid: str | None, at: int | None, body: str, base: int,
                pos: int | None) -> list[dict[str, Any]]:
        model = c.text(rec.get("model"))
        tokens = c.as_dict(rec.get("tokens"))
        row: dict[str, Any] = {"message_id": mid, "model": model}
        for k in TOKEN_KEYS:
            row[k] = c.integer(tokens.get(k))
        row["timestamp"] = at
        self.usage.append(row)
        usage = self._usage(line, row, at, base, pos)
        calls = rec.get("toolCalls")
        if calls is None:
            calls = []
        elif not isinstance(calls, list):
            self.stats.problem(line, f"message {mid!r}: toolCalls is not a list")
            calls = []
        out: list[dict[str, Any]] = []
        if body or not any(isinstance(call, dict) for call in calls):
            ev = c.new_event("agent_message", "chat:gemini")
            if model is not None:
                ev["agent"] = {"model": model}
            ev["content"]["message"] = body
            attrs = ev["attrs"]
            attrs["message_chars"] = len(body)
            for k in TOKEN_KEYS:
                c.set_int(attrs, f"tokens_{k}", tokens.get(k))
            thoughts = rec.get("thoughts")
            if isinstance(thoughts, list) and thoughts:
                attrs["thought_count"] = len(thoughts)
                ev["content"]["thoughts"] = thoughts
            out.append(self._build(ev, line, at, mid, 0, base, pos))
        for i, call in enumerate(calls):
            if not isinstance(call, dict):
                self.stats.problem(line, f"message {mid!r}: toolCalls[{i}] is not an object")
                continue
            out.extend(self._tool(line, call, model, at, len(out), base, pos))
        if usage is not None:
            out.append(self._build(usage[0], line, at, usage[1], len(out), base, pos))
        return out

    @staticmethod
    def _usage(line: SourceLine, row: dict[str, Any], at: int | None, base: int,
               pos: int | None) -> tuple[dict[str, Any], str] | None:
        """A ``usage`` event for one final message, normalised (``docs/import.md``):
        Gemini's ``input`` includes the ``cached`` tokens and its ``output`` excludes
        the ``thoughts`` (billed as output); ``tool`` tokens are input."""
        if all(row.get(k) is None for k in TOKEN_KEYS):
            return None
        ev = c.new_event("usage", "chat:usage")
        attrs = ev["attrs"]
        cached = row.get("cached") or 0
        attrs["message_id"] = row["message_id"]
        c.set_str(attrs, "model", row.get("model"))
        attrs["input_tokens"] = max(0, (row.get("input") or 0) - cached) + (row.get("tool") or 0)
        attrs["output_tokens"] = (row.get("output") or 0) + (row.get("thoughts") or 0)
        attrs["cache_read_tokens"] = cached
        attrs["cache_write_tokens"] = 0
        item = ":".join(str(x) for x in (row["message_id"], attrs["input_tokens"], attrs["output_tokens"], cached))
        return ev, item

    def _tool(self, line: SourceLine, call: dict[str, Any], model: str | None, at: int | None, n: int, base: int,
              pos: int | None) -> list[dict[str, Any]]:
        for k in call:
            if k not in CALL_KEYS:
                self.stats.unknown_field(None, f"toolCall.{k}")
        cid = c.text(call.get("id"))
        tname = call.get("name")
        own = c.timestamp_us(call.get("timestamp"))
        at = own if own is not None else at
        status = c.text(call.get("status"))

        def start(kind: str) -> tuple[dict[str, Any], str]:
            ev = c.new_event(kind, "chat:toolCall")
            category = c.set_tool(ev, tname, cid) or "other"
            c.input_facts(ev, call.get("args"), category, tname if isinstance(tname, str) else "")
            if model is not None:
                ev["agent"] = {"model": model}
            c.set_str(ev["attrs"], "tool_display_name", call.get("displayName"))
            c.set_str(ev["attrs"], "tool_status", status)
            return ev, category

        started, category = start("tool_call_started")
        # the key the hooks' id-less BeforeTool/AfterTool carry for this call: how an import
        # knows a call the hooks already recorded (importers/run.py, Known)
        started["attrs"]["input_key"] = hook.input_key(tname, call.get("args"))
        out = [self._build(started, line, at, cid, n, base, pos)]
        result = call.get("result")
        st = (status or "").lower()
        if st not in FINAL_STATUSES and (status is not None or result is None):
            return out  # still running (scheduled, executing, awaiting_approval …)
        ev, _ = start("tool_call_finished")
        ev["attrs"]["input_key"] = started["attrs"]["input_key"]
        resp = function_response(result)
        output = resp.get("output") if resp is not None else None
        error = resp.get("error") if resp is not None else None
        c.set_tool_output(ev, output if output is not None else resp if resp is not None else result)
        ev["outcome"] = {"status": "success"}
        display = c.text(call.get("resultDisplay"))
        if st in ("cancelled", "canceled"):
            ev["kind"] = "tool_call_failed"
            ev["attrs"]["interrupted"] = True
            c.set_failure(ev, c.error_text(error) or display, cls="interrupted", status="cancelled")
        else:
            like: dict[str, Any] = {}
            if isinstance(output, str):
                like["llmContent"] = output
            if error is not None:
                like["error"] = error
            failed, err, code = hook._failure({}, like, category)
            if failed or st == "error":
                ev["kind"] = "tool_call_failed"
                c.set_failure(ev, err or c.error_text(error) or display, code)
        out.append(self._build(ev, line, at, cid, n + 1, base, pos))
        return out


def project_root_of(chat_path: str) -> str | None:
    """The project directory Gemini CLI wrote beside a chat's folder
    (``<tmp>/<project>/.project_root``, 0.4x and later), or None."""
    import os

    marker = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(chat_path))), ".project_root")
    try:
        with open(marker, "rb") as f:
            text = f.read(4096).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.startswith("/") and "\n" not in text else None


def _tool_results_only(content: Any) -> bool:
    """Whether a ``user`` message holds only ``functionResponse`` parts (Gemini CLI
    writes each batch of tool results as one)."""
    return (isinstance(content, list) and bool(content)
            and all(isinstance(p, dict) and "functionResponse" in p for p in content))


def _first_directory(v: Any) -> str | None:
    return next((d for d in v if isinstance(d, str) and d), None) if isinstance(v, list) else None


__all__ = ["GeminiCliParser", "chat_document", "function_response", "part_text"]
