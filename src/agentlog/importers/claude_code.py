"""Claude Code session transcripts (``~/.claude/projects/<slug>/<session>.jsonl``).

Format notes: ``shared/reference/hooks.md`` §5.1. One record per line; the
mapping (every event is reconstructed, see :mod:`agentlog.importers.base`):

==============================================  ======================================
record                                          events
==============================================  ======================================
``user``, text (string or ``text`` blocks)      ``prompt_submitted`` (its ``prompt_kind``
                                                says ``injected`` for agent-made text);
                                                ``isMeta``/``isCompactSummary`` →
                                                ``notification``; "[Request interrupted
                                                by user…" → ``turn_failed`` (cancelled,
                                                class ``interrupted``)
``user``, ``tool_result`` block                 ``tool_call_finished``, ``tool_call_failed``
                                                (``is_error``; "Sibling tool call errored":
                                                outcome and class ``cancelled``) or
                                                ``permission_denied`` (the user rejected it,
                                                or "Permission to use … has been denied":
                                                class ``policy_denied``); tool name and input
                                                from the ``tool_use`` with that id
``assistant``, ``tool_use`` block               ``tool_call_started``
``assistant``, ``text`` block                   ``agent_message``
``assistant``, ``thinking`` block               nothing (counted)
one API response (records sharing               one ``usage`` event: its final usage
``message.id``)
``assistant`` ``isApiErrorMessage``             ``notification`` (level error)
``system`` ``turn_duration``                    ``turn_stopped`` (``duration_ms``)
``system`` ``stop_hook_summary`` (sidechain)    ``subagent_stopped``
``system`` ``compact_boundary``,                ``compaction_finished``
``microcompact_boundary``
``system`` ``api_error``, ``local_command``     ``notification`` (api_error: level, retry
                                                attempt/max/delay, the error's status, type)
``progress`` ``agent_progress``                 the nested subagent record, mapped as above
                                                with the subagent's id (each nested record
                                                once)
``queue-operation`` ``enqueue``                 ``notification`` (a prompt queued while busy)
bookkeeping (``summary``, ``file-history-       nothing (counted)
snapshot``, other ``progress``, ``pr-link`` …)
anything else                                   ``unknown`` (counted per version)
==============================================  ======================================

"Nothing" means no event of its own: a line that gives no event holding it
(bookkeeping, an assistant record of thinking only, ``progress`` other than
``agent_progress`` …) is kept by the runner as a ``transcript_line`` event
(:meth:`agentlog.importers.base.Parser.line_event`), its thinking text with it.

Subagent files (``<session>/subagents/agent-<id>.jsonl``, and the inline
``isSidechain`` records of 1.x) give ``agent.agent_id`` and
``attrs.is_subagent``.
"""

from __future__ import annotations

from typing import Any, Final

from agentlog.capture.adapters.claude_code import batch_outcome
from agentlog.core.fastjson import dumps_bytes
from agentlog.importers.base import NOT_JSON, Parser, SourceLine, build_event, c, text_digest

#: record types that carry no activity: read, counted, not turned into events
BOOKKEEPING: Final = frozenset({
    "summary", "file-history-snapshot", "pr-link", "attachment", "custom-title", "tag", "mode", "ai-title",
    "permission-mode", "agent-name", "last-prompt",
})
INTERRUPTED: Final = "[Request interrupted by user"
REJECTED: Final = ("The user doesn't want to proceed with this tool use", "User rejected")
#: a parallel call Claude Code cancelled because another call of its batch failed (it never ran)
SIBLING_ERRORED: Final = "Sibling tool call errored"
#: open tool calls remembered for their results, at most
MAX_OPEN_CALLS: Final = 100_000
#: the largest tool input (JSON bytes) carried over to the next import of a grown file
MAX_CARRIED_INPUT: Final = 64 << 10


def _block_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "\n".join(str(b.get("text", "")) for b in v if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _agent_type(meta_path: str) -> str | None:
    """A subagent's type from the ``agent-<id>.meta.json`` beside its transcript, if any."""
    import orjson

    try:
        with open(meta_path, "rb") as fh:
            meta = orjson.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return None
    value = meta.get("agentType") if isinstance(meta, dict) else None
    return value if isinstance(value, str) and value else None


def _rule_denied(text: str) -> bool:
    """Whether a tool error is Claude Code's "Permission to use <tool> … has been denied"
    (a deny rule, or a person's answer)."""
    return text.startswith("Permission to use ") and "has been denied" in text[:2000]


class ClaudeCodeParser(Parser):
    """One Claude Code transcript file (main session or a subagent's)."""

    provider = "claude_code"
    source = "claude_code_transcript"
    carried = ("calls", "last_at")

    def carry(self) -> dict[str, Any]:
        out = super().carry()
        # calls still open at the end (their results come in the lines not yet written);
        # an input too large to keep is dropped (the result then has no input facts)
        out["calls"] = {k: [v[0], v[1] if len(dumps_bytes(v[1])) <= MAX_CARRIED_INPUT else None]
                        for k, v in out["calls"].items()}
        return out

    def __init__(self, path: str, session_hint: str | None = None) -> None:
        super().__init__(path, session_hint)
        # tool-use id → (name, input, the facts of the input: see _input_facts); a resumed import
        # carries (name, input) only
        self.calls: dict[str, Any] = {}
        self.nested_seen: set[str] = set()
        self.file_agent = None
        stem = path.rsplit("/", 1)[-1]
        self.file_agent_type: str | None = None
        if "/subagents/" in path and stem.startswith("agent-"):
            self.file_agent = stem[len("agent-"):].split(".", 1)[0]
            self.file_agent_type = _agent_type(path[: -len(".jsonl")] + ".meta.json")
        # API responses seen: message id → (its latest usage, first line, session, time, version, cwd, agent, model)
        self.responses: dict[str, tuple[Any, ...]] = {}
        self.last_at = 0

    def line_session(self, record: Any) -> str | None:
        sid = record.get("sessionId") if isinstance(record, dict) else None
        return sid if isinstance(sid, str) and sid else super().line_session(record)

    # -- the record loop ----------------------------------------------------------------
    def feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        if record is NOT_JSON or not isinstance(record, dict):
            self.stats.problem(line, "not a JSON object")
            return []
        return self._record(line, record, None, with_raw=True)

    def finish(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for mid, response in self.responses.items():
            out.extend(self._usage(mid, *response))
        self.responses.clear()
        return out

    def _record(self, line: SourceLine, rec: dict[str, Any], nested_agent: str | None,
                with_raw: bool) -> list[dict[str, Any]]:
        typ = rec.get("type")
        typ = typ if isinstance(typ, str) else ""
        self.stats.saw(typ or "(none)")
        version = c.text(rec.get("version"))
        at = c.timestamp_us(rec.get("timestamp"))
        if at is None:
            at = self.last_at
        else:
            self.last_at = max(self.last_at, at)
        ctx = _Context(self, line, rec, nested_agent, version, at, with_raw)
        if typ == "user":
            return ctx.user()
        if typ == "assistant":
            return ctx.assistant()
        if typ == "system":
            return ctx.system()
        if typ == "progress":
            return ctx.progress()
        if typ == "queue-operation":
            return ctx.queued()
        if typ in BOOKKEEPING:
            return []
        self.stats.unknown_record(version, typ or "(none)")
        ev = c.new_event("unknown", f"transcript:{typ}")
        ev["attrs"]["record_type"] = typ
        return [ctx.emit(ev, None)]

    # -- usage: one event per API response, its final usage ---------------------------
    def _usage(self, mid: str, usage: Any, line: SourceLine, session: str | None, at: int, version: str | None,
               cwd: str | None, agent: dict[str, Any], model: str | None) -> list[dict[str, Any]]:
        if not isinstance(usage, dict):
            return []
        ev = c.new_event("usage", "transcript:usage")
        attrs = ev["attrs"]
        attrs["message_id"] = mid
        c.set_str(attrs, "model", model)
        for name, key in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                          ("cache_read_tokens", "cache_read_input_tokens"),
                          ("cache_write_tokens", "cache_creation_input_tokens")):
            attrs[name] = c.integer(usage.get(key)) or 0
        cache = usage.get("cache_creation")
        if isinstance(cache, dict):
            for name, key in (("cache_write_5m_tokens", "ephemeral_5m_input_tokens"),
                              ("cache_write_1h_tokens", "ephemeral_1h_input_tokens")):
                n = c.integer(cache.get(key))
                if n is not None:
                    attrs[name] = n
        if agent:
            ev["agent"] = agent
            if "agent_id" in agent:
                attrs["is_subagent"] = True
        # the counts are part of the item: a response imported while it was still being
        # written, then again complete, gives two events; the usage table keeps the last
        item = (f"{attrs['message_id']}:{attrs['input_tokens']}:{attrs['output_tokens']}:{attrs['cache_read_tokens']}:"
                f"{attrs['cache_write_tokens']}")
        return [build_event(self, c.finish(ev), line, session_id=session, observed_at=at, item=item,
                            version=version, cwd=cwd)]


#: what :func:`common.input_facts` added to an event: its attrs, content and paths
Facts = tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...], tuple[str, ...]]


def _input_facts(ev: dict[str, Any], name: str, tid: str, tool_input: Any, facts: Facts | None) -> Facts | None:
    """``tool`` and the input's facts (:func:`common.input_facts`) on a new event ``ev``
    of a call; returns what the facts added. ``facts`` — what the call's
    ``tool_use`` got — is put as is on its result's event instead of being worked
    out again from the same input: both events start alike (a named tool, nothing
    else), so the keys come in the same order."""
    category = c.set_tool(ev, name, tid) or "other"
    attrs, content, paths = ev["attrs"], ev["content"], ev["paths"]
    fresh = not attrs and not content and not paths
    if facts is not None and fresh:
        attrs.update(facts[0])
        content.update(facts[1])
        paths.extend(facts[2])
        return facts
    c.input_facts(ev, tool_input, category, name)
    return (tuple(attrs.items()), tuple(content.items()), tuple(paths)) if fresh else None


class _Context:
    """One record being mapped (the fields every event of it shares)."""

    def __init__(self, parser: ClaudeCodeParser, line: SourceLine, rec: dict[str, Any], nested_agent: str | None,
                 version: str | None, at: int, with_raw: bool) -> None:
        self.p = parser
        self.line = line
        self.rec = rec
        self.version = version
        self.at = at
        self.with_raw = with_raw
        self.session = c.text(rec.get("sessionId")) or parser.session_hint
        self.cwd = c.text(rec.get("cwd"))
        self.side = rec.get("isSidechain") is True
        agent_id = nested_agent or c.text(rec.get("agentId")) or parser.file_agent
        self.agent: dict[str, Any] = {}
        if agent_id is not None:
            self.agent["agent_id"] = agent_id
            if agent_id == parser.file_agent and parser.file_agent_type:
                self.agent["agent_type"] = parser.file_agent_type
        elif self.side:
            self.agent["agent_id"] = "sidechain"
        self.n = 0

    def emit(self, ev: dict[str, Any], item: str | None, turn_id: str | None = None) -> dict[str, Any]:
        attrs = ev["attrs"]
        if self.agent:
            ev["agent"] = {**self.agent, **(ev.get("agent") or {})}
            if "agent_id" in self.agent:
                attrs["is_subagent"] = True
        attrs["is_sidechain"] = self.side
        attrs["transcript_entry_type"] = self.rec.get("type")
        out = build_event(self.p, c.finish(ev), self.line, session_id=self.session, observed_at=self.at, item=item,
                          index=self.n, version=self.version, turn_id=turn_id, cwd=self.cwd,
                          with_raw=self.with_raw and self.n == 0, branch=c.text(self.rec.get("gitBranch")))
        self.n += 1
        return out

    # -- user ---------------------------------------------------------------------------
    def user(self) -> list[dict[str, Any]]:
        msg = self.rec.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        out: list[dict[str, Any]] = []
        if isinstance(content, str):
            out.append(self._prompt(content))
        elif isinstance(content, list):
            texts: list[str] = []
            images = 0
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "tool_result":
                    out.append(self._result(block))
                elif kind == "text" and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif kind == "image":
                    images += 1
                else:
                    self.p.stats.unknown_field(self.version, f"user.{kind}")
            if texts:
                ev = self._prompt("\n".join(texts))
                if images:
                    ev["attrs"]["images"] = images
                out.append(ev)
        else:
            self.p.stats.problem(self.line, "user record without message content")
        return out

    def _prompt(self, text: str) -> dict[str, Any]:
        turn_id = c.text(self.rec.get("promptId"))
        if text.startswith(INTERRUPTED):
            ev = c.new_event("turn_failed", "transcript:user")
            c.set_failure(ev, None, cls="interrupted", status="cancelled")
            ev["content"]["message"] = text
            return self.emit(ev, None, turn_id)
        if self.rec.get("isMeta") is True or self.rec.get("isCompactSummary") is True:
            ev = c.new_event("notification", "transcript:user")
            ev["attrs"]["meta"] = True
            ev["attrs"]["compact_summary"] = self.rec.get("isCompactSummary") is True
            ev["content"]["message"] = text
            return self.emit(ev, None, turn_id)
        ev = c.new_event("prompt_submitted", "transcript:user")
        c.prompt_facts(ev, text)
        c.set_str(ev["attrs"], "prompt_source", self.rec.get("promptSource"))
        return self.emit(ev, text_digest(text), turn_id)

    def _result(self, block: dict[str, Any]) -> dict[str, Any]:
        tid = c.text(block.get("tool_use_id")) or ""
        known = self.p.calls.pop(tid, None)
        name, tool_input = (known[0], known[1]) if known is not None else ("unknown", None)
        facts = known[2] if known is not None and len(known) > 2 else None
        text = _block_text(block.get("content"))
        result = self.rec.get("toolUseResult")
        if block.get("is_error") is True:
            err = text.strip()
            if err.startswith("<tool_use_error>") and err.endswith("</tool_use_error>"):
                err = err[len("<tool_use_error>"):-len("</tool_use_error>")].strip()
            if err.startswith(REJECTED) or _rule_denied(err):
                # a person's rejection, or a permission rule's: the call never ran
                ev = c.new_event("permission_denied", "transcript:tool_result")
                _input_facts(ev, name, tid, tool_input, facts)
                c.set_failure(ev, None, cls="policy_denied", status="denied")
                ev["content"]["reason"] = err
            elif err.startswith(SIBLING_ERRORED):
                # cancelled with its batch (another call of it failed): it never ran
                ev = c.new_event("tool_call_failed", "transcript:tool_result")
                _input_facts(ev, name, tid, tool_input, facts)
                c.set_failure(ev, err, cls="cancelled", status="cancelled")
            else:
                ev = c.new_event("tool_call_failed", "transcript:tool_result")
                _input_facts(ev, name, tid, tool_input, facts)
                if batch_outcome(text)[0] == "denied":
                    # an approval nobody could give (headless): the call never ran
                    c.set_failure(ev, err, cls="permission_denied", status="denied")
                else:
                    c.set_failure(ev, err)
        else:
            ev = c.new_event("tool_call_finished", "transcript:tool_result")
            _input_facts(ev, name, tid, tool_input, facts)
            c.set_tool_output(ev, result if result is not None else text)
            code = c.response_exit_code(result)
            ev["outcome"] = {"status": "success"}
            if code is not None:
                ev["outcome"]["exit_code"] = code
        if known is None:
            ev["attrs"]["unpaired_result"] = True
        return self.emit(ev, tid or None)

    # -- assistant ----------------------------------------------------------------------
    def assistant(self) -> list[dict[str, Any]]:
        msg = self.rec.get("message")
        if not isinstance(msg, dict):
            self.p.stats.problem(self.line, "assistant record without message")
            return []
        model = c.text(msg.get("model"))
        if model is not None and model != "<synthetic>":
            self.agent = {**self.agent, "model": model}
        mid = c.text(msg.get("id"))
        if mid is not None and not self.rec.get("isApiErrorMessage") and isinstance(msg.get("usage"), dict):
            # the records of one response share its id: the last one's usage is the final one
            was = self.p.responses.pop(mid, None)
            # the line's place, not its bytes (held until the end of the file)
            first_line = was[1] if was is not None else SourceLine(self.line.path, self.line.lineno,
                                                                    self.line.offset, b"")
            self.p.responses[mid] = (msg.get("usage"), first_line, self.session, self.at, self.version, self.cwd,
                                     dict(self.agent), model)
        out: list[dict[str, Any]] = []
        if self.rec.get("isApiErrorMessage") is True:
            ev = c.new_event("notification", "transcript:assistant")
            ev["attrs"]["level"] = "error"
            ev["attrs"]["api_error"] = True
            c.set_str(ev["attrs"], "error_type", self.rec.get("error"))
            ev["content"]["message"] = _block_text(msg.get("content"))
            return [self.emit(ev, None)]
        content = msg.get("content")
        if not isinstance(content, list):
            self.p.stats.problem(self.line, "assistant content is not a list")
            return []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                tid = c.text(block.get("id")) or ""
                name = c.text(block.get("name")) or "unknown"
                tool_input = block.get("input")
                if len(self.p.calls) >= MAX_OPEN_CALLS:
                    self.p.calls.pop(next(iter(self.p.calls)))
                ev = c.new_event("tool_call_started", "transcript:tool_use")
                self.p.calls[tid] = (name, tool_input, _input_facts(ev, name, tid, tool_input, None))
                out.append(self.emit(ev, tid or None))
            elif kind == "text":
                raw_text = block.get("text")
                text = raw_text if isinstance(raw_text, str) else ""
                ev = c.new_event("agent_message", "transcript:text")
                ev["content"]["message"] = text
                ev["attrs"]["message_chars"] = len(text)
                c.set_str(ev["attrs"], "stop_reason", msg.get("stop_reason"))
                out.append(self.emit(ev, f"{mid}:{self.rec.get('uuid')}:{self.n}" if mid else None))
            elif kind in ("thinking", "redacted_thinking"):
                continue
            else:
                self.p.stats.unknown_field(self.version, f"assistant.{kind}")
        return out

    # -- system, progress, queue ----------------------------------------------------------
    def system(self) -> list[dict[str, Any]]:
        sub = self.rec.get("subtype")
        name = f"transcript:system:{sub}"
        if sub == "turn_duration":
            if self.side:
                return []
            ev = c.new_event("turn_stopped", name)
            d = c.duration(self.rec.get("durationMs"))
            if d is not None:
                ev["duration_ms"] = d
            return [self.emit(ev, None)]
        if sub == "stop_hook_summary":
            if not self.side:
                return []
            ev = c.new_event("subagent_stopped", name)
            c.set_bool(ev["attrs"], "prevented_continuation", self.rec.get("preventedContinuation"))
            return [self.emit(ev, None)]
        if sub in ("compact_boundary", "microcompact_boundary"):
            ev = c.new_event("compaction_finished", name)
            meta = self.rec.get("compactMetadata") or self.rec.get("microcompactMetadata")
            if isinstance(meta, dict):
                c.set_str(ev["attrs"], "trigger", meta.get("trigger"))
                c.set_int(ev["attrs"], "pre_tokens", meta.get("preTokens"))
                c.set_int(ev["attrs"], "post_tokens", meta.get("postTokens"))
                c.set_int(ev["attrs"], "tokens_saved", meta.get("tokensSaved"))
            ev["attrs"]["micro"] = sub == "microcompact_boundary"
            return [self.emit(ev, None)]
        if sub in ("api_error", "local_command", "informational", "bridge_status") or sub is None:
            ev = c.new_event("notification", name)
            c.set_str(ev["attrs"], "level", self.rec.get("level"))
            c.set_int(ev["attrs"], "retry_attempt", self.rec.get("retryAttempt"))
            c.set_int(ev["attrs"], "max_retries", self.rec.get("maxRetries"))
            c.set_int(ev["attrs"], "retry_in_ms", self.rec.get("retryInMs"))
            error = self.rec.get("error")
            if isinstance(error, dict):  # the API's error: {status, error: {type, message}} …
                c.set_int(ev["attrs"], "error_status", error.get("status"))
                inner = error.get("error")
                c.set_str(ev["attrs"], "error_type", inner.get("type") if isinstance(inner, dict) else None)
            content = self.rec.get("content")
            if isinstance(content, str):
                ev["content"]["message"] = content
            return [self.emit(ev, None)]
        self.p.stats.unknown_record(self.version, f"system:{sub}")
        ev = c.new_event("unknown", name)
        ev["attrs"]["record_type"] = f"system:{sub}"
        return [self.emit(ev, None)]

    def progress(self) -> list[dict[str, Any]]:
        data = self.rec.get("data")
        if not isinstance(data, dict) or data.get("type") != "agent_progress":
            return []
        nested = data.get("message")
        if not isinstance(nested, dict):
            return []
        uuid = c.text(nested.get("uuid"))
        if uuid is not None:
            if uuid in self.p.nested_seen:
                return []
            self.p.nested_seen.add(uuid)
        nested = {"sessionId": self.rec.get("sessionId"), "cwd": self.rec.get("cwd"), "version": self.version,
                  "isSidechain": True, **nested}
        agent = c.text(data.get("agentId")) or "subagent"
        return self.p._record(self.line, nested, agent, with_raw=self.with_raw)

    def queued(self) -> list[dict[str, Any]]:
        if self.rec.get("operation") != "enqueue":
            return []
        ev = c.new_event("notification", "transcript:queue-operation")
        ev["attrs"]["queued_prompt"] = True
        content = self.rec.get("content")
        if isinstance(content, str):
            ev["content"]["message"] = content
        return [self.emit(ev, None)]
