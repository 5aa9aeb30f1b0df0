"""Codex CLI rollout transcripts (``$CODEX_HOME/sessions/**/rollout-*.jsonl``) → reconstructed events.

Two line formats exist. The **modern** one wraps every line as
``{"timestamp", "type", "payload"}``; the **legacy** one (before about
October 2025) starts with a bare meta object ``{id, timestamp, instructions,
git?}`` followed by bare response items interleaved with
``{"record_type": "state"}`` markers, and has no per-item timestamps.

====================================================  ============================================
line (modern: ``type`` / ``payload.type``)            event
====================================================  ============================================
``session_meta`` (legacy: the bare meta line)         ``session_started``: id, cwd, cli_version;
                                                      originator, source, model_provider, git in
                                                      attrs (a later one naming another session:
                                                      ``notification``; the same one: nothing)
``turn_context``, ``event_msg`` ``task_started``      nothing: remember turn id, cwd, model
``event_msg`` ``user_message`` (0.17x: the            ``prompt_submitted`` (the two paired into one
``item_completed`` ``UserMessage`` item)              where both exist); injected context
                                                      (``<environment_context>`` …): ``notification``
``event_msg`` ``agent_message`` and                   one ``agent_message``: the two encodings of a
``response_item`` ``message`` role=assistant          text are paired within a turn
``response_item`` ``message``, other roles            nothing (``user_message`` is the prompt); in
                                                      legacy files (no ``event_msg``) a user
                                                      message is the prompt
``function_call`` (arguments: a JSON string),         ``tool_call_started``
``custom_tool_call``, ``local_shell_call``
``function_call_output``,                             ``tool_call_finished``, or ``tool_call_failed``
``custom_tool_call_output``                           (status, exit code, class: :mod:`.codex_items`,
                                                      with the call's structured record, below);
                                                      paired by ``call_id``. Shell tools
                                                      (``exec_command``, ``shell``, ``shell_command``)
                                                      are named ``Bash`` as the hooks name them
                                                      (``attrs.wire_tool``)
``item_completed`` ``CommandExecution`` /             nothing: the call's outcome, for its output
``FileChange`` / ``McpToolCall`` /                    line; after that line, a second end event
``DynamicToolCall`` items; ``event_msg``              (``attrs.late_outcome``) when it says worse
``patch_apply_end``, ``exec_command_end``,
``mcp_tool_call_end``
``web_search_call``                                   ``tool_call_started`` + its end
``event_msg`` ``task_complete`` / ``turn_aborted``    ``turn_stopped`` (``duration_ms``) /
                                                      ``turn_failed`` (cancelled, ``interrupted``);
                                                      no line says the session ended: it stays open
``event_msg`` ``token_count``                         ``usage`` (the response's counts)
``compacted``, ``event_msg`` ``context_compacted``    one ``compaction_finished`` (paired)
``thread_rolled_back``, review mode, ``error`` …      ``notification``
``event_msg`` ``item_completed``, item ``Plan``       ``notification`` (``notification_type`` plan,
                                                      the plan's text); items that mirror other
                                                      lines (messages, reasoning …): nothing
                                                      (counted); other item types: ``unknown``
``reasoning``, ``ghost_snapshot``, ``compaction``     nothing (counted)
items, ``agent_reasoning*``, state markers;
``world_state``, ``token_usage_record``,
``thread_settings_applied`` (0.17x)
anything else                                         ``unknown`` (``attrs.record_type``), counted
                                                      in ``stats.unknown``
====================================================  ============================================

Tool events mirror the Codex hook's ``PostToolUse`` mapping
(``claude_code._tool_event`` with ``codex=True``): same tool name, category,
paths, outcome and failure class. ``provider_event_name`` is
``rollout:<type>[:<payload type>]`` (legacy items: ``rollout:<item type>``).
Times come from each line's ``timestamp``; legacy items have none, so they
get the meta time plus their line number in µs and ``attrs.time_estimated``.
Lines that are not JSON objects, or whose payload has the wrong shape, are
problems and give no event. "Nothing" means no event of its own: the runner
keeps a line that no event holds as a ``transcript_line`` event
(:meth:`agentlog.importers.base.Parser.line_event`).
"""

from __future__ import annotations

import os
from typing import Any, Final

from agentlog.capture.project import strip_credentials
from agentlog.importers.base import NOT_JSON, Parser, SourceLine, build_event, c, text_digest
from agentlog.importers.codex_items import (
    CONFINED,
    OUTCOME_EVENTS,
    OUTCOME_ITEMS,
    as_outcome,
    combine,
    content_text,
    injected,
    mark,
    output_outcome,
    record_outcome,
    worse,
)

#: calls remembered while waiting for their output, at most
MAX_OPEN_CALLS: Final = 4096
_MAX_PENDING: Final = 4096
_TOP_TYPES: Final = frozenset(("session_meta", "turn_context", "response_item", "event_msg", "compacted"))
#: Codex's shell tools on the wire; its hooks name every one of them ``Bash``, and so does the import
_SHELL_TOOLS: Final = frozenset(("exec_command", "shell", "shell_command"))
HOOK_SHELL_NAME: Final = "Bash"
_SKIPPED_ITEMS: Final = frozenset(("reasoning", "ghost_snapshot", "compaction"))
_SKIPPED_EVENTS: Final = frozenset(("agent_reasoning", "agent_reasoning_raw_content",
                                    "agent_reasoning_section_break", "thread_settings_applied"))
#: top-level records of 0.17x that no event is made of: the world state the model was
#: given (instructions, environment) and a per-response token record (``token_count``
#: gives the same counts)
_SKIPPED_TOP: Final = frozenset(("world_state", "token_usage_record"))
#: completed turn items whose content the rollout's other lines already give
_MIRRORED_ITEMS: Final = frozenset(("UserMessage", "HookPrompt", "AgentMessage", "Reasoning", "CollabAgentToolCall",
                                    "SubAgentActivity", "WebSearch", "ImageView", "ImageGeneration",
                                    "ContextCompaction"))
_NOTIFY_EVENTS: Final = frozenset(("thread_rolled_back", "entered_review_mode", "exited_review_mode",
                                   "undo_completed", "error", "warning", "stream_error"))
_USAGE_KEYS: Final = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens",
                      "total_tokens")

_Built = list[tuple[dict[str, Any], str | None]]
"""Working events of one line (``c.new_event`` form) with their merge-key items."""


def _bounded_put(d: dict[str, Any], key: str, value: Any) -> None:
    """``d[key] = value``, dropping the oldest entry first when ``d`` holds
    :data:`MAX_OPEN_CALLS` (calls whose other half never comes must not pile up)."""
    if key not in d and len(d) >= MAX_OPEN_CALLS:
        d.pop(next(iter(d)))
    d[key] = value


class CodexParser(Parser):
    """One rollout file, fed in order. After the last line, :attr:`usage` holds
    the session's latest cumulative token usage (empty when none was logged)."""

    provider = "codex"
    source = "codex_rollout"
    carried = ("session_id", "version", "cwd", "turn_id", "model", "legacy", "open_calls", "outcomes", "ended",
               "sandboxed", "_base_us", "_last_us")

    def __init__(self, path: str, session_hint: str | None = None) -> None:
        super().__init__(path, session_hint)
        self.session_id: str | None = None
        self.version: str | None = None
        self.cwd: str | None = None
        self.turn_id: str | None = None
        self.model: str | None = None
        self.legacy = False
        self.sandboxed = False
        """The turn runs under a confining sandbox policy (``turn_context.sandbox_policy``):
        a command's "Operation not permitted" is then the sandbox's refusal."""
        self.usage: dict[str, Any] = {}
        """``input_tokens``, ``cached_input_tokens``, ``output_tokens``,
        ``reasoning_output_tokens``, ``total_tokens`` (those logged) and ``model``."""
        self.open_calls: dict[str, tuple[str, Any]] = {}
        """call id → (tool name, input) of calls whose output has not been seen."""
        self.outcomes: dict[str, list[Any]] = {}
        """call id → the outcome a structured record (a ``CommandExecution`` item,
        ``patch_apply_end`` …) gave before the call's output (a
        :class:`~agentlog.importers.codex_items.CallOutcome` as a list, JSON for :meth:`carry`)."""
        self.ended: dict[str, list[Any]] = {}
        """call id → [wire tool name, outcome status] of calls whose end was emitted: a
        structured record arriving after the output corrects it when it says worse."""
        self._pending: dict[tuple[str, str], int] = {}
        self._base_us: int | None = None
        self._last_us = 0

    # -- entry points ----------------------------------------------------------

    def line_session(self, record: Any) -> str | None:
        return self.session_id or self.session_hint

    def feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        try:
            return self._feed(line, record)
        except Exception as e:  # a bug must not stop an import; the line is reported instead
            self.stats.problem(line, f"parser error: {type(e).__name__}: {e}"[:200])
            return []

    def finish(self) -> list[dict[str, Any]]:
        """Nothing is held back: a call is emitted when seen, its end when its output is.
        Calls still in :attr:`open_calls` never got an output (interrupted, or the file ends)."""
        return []

    def _feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        if record is NOT_JSON:
            self.stats.problem(line, "not JSON")
            return []
        if not isinstance(record, dict):
            self.stats.problem(line, f"not a JSON object ({type(record).__name__})")
            return []
        rtype = record.get("type")
        built: _Built
        if rtype in _TOP_TYPES or ("payload" in record and isinstance(rtype, str)):
            built = self._modern(line, record, str(rtype))
        elif record.get("record_type") == "state":
            self.stats.saw("state")
            built = []
        elif isinstance(rtype, str) and rtype:
            self.legacy = True
            self.stats.saw(f"response_item:{rtype}")
            built = self._item(line, record, f"rollout:{rtype}")
        elif rtype is None and c.text(record.get("id")) is not None and self.session_id is None:
            self.legacy = True
            self._base_us = c.timestamp_us(record.get("timestamp"))
            self.stats.saw("session_meta")
            built = self._session_meta(record, "rollout:session_meta")
        else:
            self.stats.saw("(untyped)")
            self.stats.problem(line, "record has no type")
            built = []
        if not built:
            return []
        at, estimated = self._time(line, record)
        return [self._build(line, ev, item, index, at, estimated) for index, (ev, item) in enumerate(built)]

    # -- building ----------------------------------------------------------------

    def _time(self, line: SourceLine, record: dict[str, Any]) -> tuple[int, bool]:
        """The line's time in µs and whether it is estimated (legacy: meta time + line number)."""
        t = c.timestamp_us(record.get("timestamp"))
        estimated = t is None
        if t is None:
            t = self._base_us + line.lineno if self._base_us is not None else self._last_us + 1
        self._last_us = max(self._last_us, t)
        return t, estimated

    def _build(self, line: SourceLine, ev: dict[str, Any], item: str | None, index: int, at: int,
               estimated: bool) -> dict[str, Any]:
        attrs = ev["attrs"]
        if estimated:
            attrs["time_estimated"] = True
        if self.legacy:
            attrs["rollout_format"] = "legacy"
        cwd = self.cwd
        if cwd is not None and not os.path.isabs(cwd):  # e.g. a Windows path: no project lookup here
            attrs["cwd"] = cwd
            cwd = None
        if self.model is not None and ev["kind"] != "session_started":
            ev["agent"] = {"model": self.model}
        return build_event(self, c.finish(ev), line, session_id=self.session_id or self.session_hint,
                           observed_at=at, item=item, index=index, version=self.version,
                           turn_id=None if ev["kind"] == "session_started" else self.turn_id, cwd=cwd,
                           with_raw=index == 0)

    def _first_of_pair(self, key: str, encoding: str) -> bool:
        """Pair two encodings (``event``/``item``) of one thing: False when ``key`` answers an
        unpaired one of the other encoding (then it was already emitted), else True."""
        other = (key, "item" if encoding == "event" else "event")
        n = self._pending.get(other, 0)
        if n > 0:
            if n == 1:
                del self._pending[other]
            else:
                self._pending[other] = n - 1
            return False
        if len(self._pending) >= _MAX_PENDING:
            self._pending.clear()
        self._pending[(key, encoding)] = self._pending.get((key, encoding), 0) + 1
        return True

    def _new_turn(self, turn_id: str | None) -> None:
        if turn_id is not None and turn_id != self.turn_id:
            self.turn_id = turn_id
            self._pending.clear()

    def _unknown(self, name: str, record_type: str, payload_type: str | None) -> _Built:
        self.stats.unknown_record(self.version, record_type if payload_type is None
                                  else f"{record_type}:{payload_type}")
        ev = c.new_event("unknown", name)
        ev["attrs"]["record_type"] = record_type
        if payload_type is not None:
            ev["attrs"]["payload_type"] = payload_type
        ev["attrs"]["unrecognised"] = True
        return [(ev, None)]

    # -- modern lines ------------------------------------------------------------

    def _modern(self, line: SourceLine, record: dict[str, Any], rtype: str) -> _Built:
        payload = record.get("payload")
        ptype = payload.get("type") if isinstance(payload, dict) else None
        nested = rtype in ("response_item", "event_msg")
        key = f"{rtype}:{ptype}" if nested and isinstance(ptype, str) else rtype
        self.stats.saw(key)
        name = "rollout:" + key
        if not isinstance(payload, dict):
            self.stats.problem(line, f"{rtype}: payload is not an object")
            return []
        if nested and not (isinstance(ptype, str) and ptype):
            self.stats.problem(line, f"{rtype}: payload has no type")
            return []
        if rtype == "session_meta":
            return self._session_meta(payload, name)
        if rtype == "turn_context":
            self._new_turn(c.text(payload.get("turn_id")))
            self.cwd = c.text(payload.get("cwd")) or self.cwd
            self.model = c.text(payload.get("model")) or self.model
            policy = payload.get("sandbox_policy")
            mode = c.text(policy.get("type") if isinstance(policy, dict) else policy)
            if mode is not None:
                self.sandboxed = mode in CONFINED
            return []
        if rtype == "response_item":
            return self._item(line, payload, name)
        if rtype == "event_msg":
            return self._event_msg(line, payload, str(ptype), name)
        if rtype == "compacted":
            return self._compaction(payload, name, "item")
        if rtype in _SKIPPED_TOP:
            return []
        return self._unknown(name, rtype, None)

    def _session_meta(self, p: dict[str, Any], name: str) -> _Built:
        sid = c.text(p.get("id"))
        if self.session_id is not None:  # repeated after a resume, or a fork's parent
            if sid is None or sid == self.session_id:
                return []
            ev = c.new_event("notification", name)
            ev["attrs"]["notification_type"] = "session_meta"
            ev["attrs"]["meta_session_id"] = sid
            return [(ev, None)]
        self.session_id = sid
        self.version = c.text(p.get("cli_version")) or self.version
        self.cwd = c.text(p.get("cwd")) or self.cwd
        ev = c.new_event("session_started", name)
        attrs = ev["attrs"]
        for k in ("originator", "model_provider", "thread_source", "forked_from_id"):
            c.set_str(attrs, k, p.get(k))
        src = p.get("source")
        if isinstance(src, dict) and src:  # {"subagent": …}
            src = next(iter(src))
            attrs["is_subagent"] = src == "subagent"
        c.set_str(attrs, "source", src)
        git = c.as_dict(p.get("git"))
        c.set_str(attrs, "git_commit", git.get("commit_hash"))
        c.set_str(attrs, "git_branch", git.get("branch"))
        remote = c.text(git.get("repository_url"))
        if remote is not None:
            attrs["git_remote"] = strip_credentials(remote)
        return [(ev, None)]

    def _event_msg(self, line: SourceLine, p: dict[str, Any], ptype: str, name: str) -> _Built:
        if ptype == "user_message":
            msg = p.get("message")
            if not isinstance(msg, str):
                self.stats.problem(line, "user_message: message is not a string")
                return []
            if not injected(msg) and not self._first_of_pair("prompt:" + text_digest(msg), "event"):
                return []  # its response_item message gave the prompt
            return self._prompt(msg, name, p)
        if ptype == "agent_message":
            msg = c.text(p.get("message"))
            return [] if msg is None else self._agent_message(msg, name, "event", None, p.get("phase"))
        if ptype == "task_started":
            self._new_turn(c.text(p.get("turn_id")))
            return []
        if ptype == "token_count":
            return self._usage(p, name)
        if ptype in ("task_complete", "turn_aborted"):
            self._new_turn(c.text(p.get("turn_id")))
            if ptype == "task_complete":
                ev = c.new_event("turn_stopped", name)
                ev["duration_ms"] = c.duration(p.get("duration_ms"))
                c.copy_texts(ev, p, (("last_agent_message", "message"),))
            else:
                ev = c.new_event("turn_failed", name)
                c.set_str(ev["attrs"], "reason", p.get("reason"))
                c.set_failure(ev, None, cls="interrupted", status="cancelled")
            return [(ev, self.turn_id)]
        if ptype == "context_compacted":
            return self._compaction(p, name, "event")
        if ptype in _NOTIFY_EVENTS:
            ev = c.new_event("notification", name)
            ev["attrs"]["notification_type"] = ptype
            c.copy_texts(ev, p, (("message", "message"),))
            return [(ev, None)]
        if ptype in _SKIPPED_EVENTS:
            return []
        if ptype == "item_completed":
            return self._item_completed(line, p, name)
        if ptype in OUTCOME_EVENTS:
            return self._recorded(c.text(p.get("call_id")), p, name)
        return self._unknown(name, "event_msg", ptype)

    def _item_completed(self, line: SourceLine, p: dict[str, Any], name: str) -> _Built:
        """A completed turn item (``ItemCompletedEvent``: ``thread_id``, ``turn_id``, ``item``
        tagged by its ``type``). A ``Plan`` (the text of a proposed plan) no other line
        gives; 0.17x also writes the prompt as a ``UserMessage`` (no ``user_message`` event
        any more) and each tool call's structured outcome (``CommandExecution`` with its
        ``exit_code`` and ``status``, ``FileChange`` …), which the call's output line uses.
        Items that mirror other lines (the assistant's messages, reasoning) give nothing
        (counted)."""
        item = p.get("item")
        itype = item.get("type") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(itype, str) or not itype:
            self.stats.problem(line, "item_completed: item without a type")
            return []
        if itype == "Plan":
            ev = c.new_event("notification", f"{name}:Plan")
            ev["attrs"]["notification_type"] = "plan"
            text = item.get("text")
            if isinstance(text, str):
                ev["content"]["message"] = text
                ev["attrs"]["message_chars"] = len(text)
            item_id = c.text(item.get("id"))
            return [(ev, f"plan:{item_id}" if item_id else None)]
        if itype == "UserMessage":
            # 0.17x writes the prompt as this item (no event_msg user_message any more);
            # a file with both gives one prompt
            text = content_text(item.get("content"))
            if text is None or not text.strip() or injected(text):
                return []
            if not self._first_of_pair("prompt:" + text_digest(text), "item"):
                return []
            return self._prompt(text, f"{name}:UserMessage", item)
        if itype in OUTCOME_ITEMS:
            # the outcome its call's output states only as text (exit code, status)
            return self._recorded(c.text(item.get("id")), item, f"{name}:{itype}")
        if itype in _MIRRORED_ITEMS:
            return []
        return self._unknown(name, "event_msg", f"item_completed:{itype}")

    def _usage(self, p: dict[str, Any], name: str) -> _Built:
        """The running total kept in ``self.usage``; a ``usage`` event for the response
        the count is about (``last_token_usage``), normalised: ``input_tokens`` without
        the cached ones, which are ``cache_read_tokens``; output includes reasoning.
        Its item is the running total's ``total_tokens`` (a count written twice is one
        response)."""
        info = c.as_dict(p.get("info"))
        total = c.as_dict(info.get("total_token_usage"))
        usage: dict[str, Any] = {}
        for k in _USAGE_KEYS:
            c.set_int(usage, k, total.get(k))
        if not usage:
            return []
        if self.model is not None:
            usage["model"] = self.model
        self.usage = usage
        last = c.as_dict(info.get("last_token_usage"))
        if not last:
            return []
        cached = c.integer(last.get("cached_input_tokens")) or 0
        ev = c.new_event("usage", name)
        attrs = ev["attrs"]
        attrs["input_tokens"] = max(0, (c.integer(last.get("input_tokens")) or 0) - cached)
        attrs["output_tokens"] = c.integer(last.get("output_tokens")) or 0
        attrs["cache_read_tokens"] = cached
        attrs["cache_write_tokens"] = 0
        c.set_int(attrs, "reasoning_output_tokens", last.get("reasoning_output_tokens"))
        c.set_str(attrs, "model", self.model)
        item = f"token_count:{usage.get('total_tokens', '')}"
        attrs["message_id"] = item
        return [(ev, item)]

    def _compaction(self, p: dict[str, Any], name: str, encoding: str) -> _Built:
        if not self._first_of_pair("compaction", encoding):
            return []
        ev = c.new_event("compaction_finished", name)
        c.copy_texts(ev, p, (("message", "compact_summary"),))
        history = p.get("replacement_history")
        if isinstance(history, list):
            ev["attrs"]["replacement_items"] = len(history)
        return [(ev, None)]

    # -- response items (modern payloads and legacy lines) -------------------------

    def _item(self, line: SourceLine, p: dict[str, Any], name: str) -> _Built:
        ptype = p.get("type")
        if ptype == "message":
            text = content_text(p.get("content"))
            role = p.get("role")
            if text is None or not text.strip():
                return []
            if role == "assistant":
                return self._agent_message(text, name, "item", c.text(p.get("id")), p.get("phase"))
            if role == "user" and self.legacy:
                return self._prompt(text, name, p)
            return []  # context the model saw; the prompt is the user_message event (0.17x: the UserMessage item)
        if ptype in ("function_call", "custom_tool_call", "local_shell_call"):
            return self._call(line, p, str(ptype), name)
        if ptype in ("function_call_output", "custom_tool_call_output"):
            return self._output(p, name)
        if ptype == "web_search_call":
            return self._web_search(p, name)
        if isinstance(ptype, str) and ptype in _SKIPPED_ITEMS:
            return []
        if not isinstance(ptype, str) or not ptype:
            self.stats.problem(line, "response item has no type")
            return []
        return self._unknown(name, "response_item", ptype)

    def _prompt(self, text: str, name: str, p: dict[str, Any]) -> _Built:
        if injected(text):
            ev = c.new_event("notification", name)
            ev["attrs"]["notification_type"] = "injected_context"
            ev["attrs"]["prompt_kind"] = "injected"
            ev["attrs"]["message_chars"] = len(text)
            ev["content"]["message"] = text
            return [(ev, None)]
        ev = c.new_event("prompt_submitted", name)
        c.prompt_facts(ev, text)
        images = sum(len(v) for v in (p.get("images"), p.get("local_images")) if isinstance(v, list))
        if images:
            ev["attrs"]["image_count"] = images
        return [(ev, text_digest(text))]

    def _agent_message(self, text: str, name: str, encoding: str, item: str | None, phase: Any) -> _Built:
        if not self._first_of_pair("message:" + text_digest(text), encoding):
            return []
        ev = c.new_event("agent_message", name)
        ev["content"]["message"] = text
        ev["attrs"]["message_chars"] = len(text)
        c.set_str(ev["attrs"], "phase", phase)
        return [(ev, item)]

    def _set_tool(self, ev: dict[str, Any], name: Any, call_id: str | None) -> str:
        if isinstance(name, str) and name in _SHELL_TOOLS:
            ev["attrs"]["wire_tool"] = name
            return c.set_tool(ev, HOOK_SHELL_NAME, call_id, "shell") or "shell"
        return c.set_tool(ev, name, call_id) or "other"

    def _call(self, line: SourceLine, p: dict[str, Any], ptype: str, name: str) -> _Built:
        call_id = c.text(p.get("call_id")) or c.text(p.get("id"))
        ev = c.new_event("tool_call_started", name)
        tname: Any = p.get("name")
        if ptype == "function_call":
            tool_input = p.get("arguments")
            if isinstance(tool_input, str):
                ok, value = c.loads_or_none(tool_input)
                if ok:
                    tool_input = value
                else:
                    ev["attrs"]["arguments_invalid"] = True
                    self.stats.problem(line, "function_call: arguments are not JSON")
        elif ptype == "custom_tool_call":
            tool_input = p.get("input")
        else:
            tname, tool_input = "local_shell", p.get("action")
        category = self._set_tool(ev, tname, call_id)
        tname = tname if isinstance(tname, str) else ""
        c.input_facts(ev, tool_input, category, tname)
        c.set_str(ev["attrs"], "status", p.get("status"))
        if call_id is not None:
            _bounded_put(self.open_calls, call_id, (tname, tool_input))
        return [(ev, call_id)]

    def _output(self, p: dict[str, Any], name: str) -> _Built:
        call_id = c.text(p.get("call_id"))
        known = self.open_calls.pop(call_id, None) if call_id is not None else None
        ev = c.new_event("tool_call_finished", name)
        if known is None:
            ev["attrs"]["unpaired"] = True
            known = ("unknown", None)
        tname, tool_input = known
        category = self._set_tool(ev, tname or "unknown", call_id)
        c.input_facts(ev, tool_input, category, tname)
        resp = p.get("output")
        # As the hook's PostToolUse (codex=True): output kept, exit code from it; and
        # what a structured record of the call said before it (exit code, status)
        c.set_tool_output(ev, resp)
        fields = as_outcome(self.outcomes.pop(call_id, None)) if call_id is not None else None
        mcp = category == "mcp" or "__" in tname
        outcome = combine(output_outcome(resp, mcp, self.sandboxed), fields)
        mark(ev, outcome)
        if call_id is not None:
            _bounded_put(self.ended, call_id, [tname, outcome.status])
        return [(ev, call_id)]

    def _recorded(self, call_id: str | None, record: dict[str, Any], name: str) -> _Built:
        """A structured record of a call's outcome (see :mod:`agentlog.importers.codex_items`).
        Before the call's output (as Codex writes them): kept for it, no event. After it
        (a unified exec process that outlived its ``exec_command`` call, whose end
        then said nothing of an exit): a second end event for the call when the record
        says worse than the end given (a failure after a success), else nothing."""
        outcome = record_outcome(record, self.sandboxed)
        if call_id is None or outcome is None:
            return []
        done = self.ended.get(call_id)
        if done is None:
            _bounded_put(self.outcomes, call_id, list(outcome))
            return []
        tname = done[0] if isinstance(done, list) and done and isinstance(done[0], str) else "unknown"
        if not worse(outcome, done[1] if isinstance(done, list) and len(done) > 1 else "success"):
            return []
        ev = c.new_event("tool_call_failed", name)
        ev["attrs"]["late_outcome"] = True
        self._set_tool(ev, tname, call_id)
        mark(ev, outcome)
        self.ended[call_id] = [tname, outcome.status]
        return [(ev, call_id)]

    def _web_search(self, p: dict[str, Any], name: str) -> _Built:
        """A hosted web search (no hook sees it): its start and its end, from one line."""
        item = c.text(p.get("id")) or c.text(p.get("call_id"))
        out: _Built = []
        for kind in ("tool_call_started", "tool_call_finished"):
            ev = c.new_event(kind, name)
            c.input_facts(ev, p.get("action"), self._set_tool(ev, "web_search", item), "web_search")
            c.set_str(ev["attrs"], "status", p.get("status"))
            out.append((ev, item))
        end = out[1][0]
        if p.get("status") in ("failed", "incomplete"):
            end["kind"] = "tool_call_failed"
            c.set_failure(end, None, cls=str(p.get("status")))
        else:
            end["outcome"] = {"status": "success"}
        return out


__all__ = ["MAX_OPEN_CALLS", "CodexParser"]
