"""Histories kept by other tools: attemptdb's Event v1 JSON lines and nd7's session logs.

**attemptdb** (``agentlog import attemptdb FILE``, e.g. the output of ``attempt
events --json``): each line is one Event v1 record (``shared/reference/
attemptdb.md`` §3.1). Its kinds are ours; fields map one to one (``paths``
from each PortablePath's ``repo_relative`` else ``original``; ``repo_remote``
→ ``project.remote``; capture modes other than ``metadata_only`` → ``full``).
The event keeps its id (so importing twice, or an event also in our log, is
one event); attemptdb's own ids (``session_id``, ``device_id``,
``source_seq``, ``hlc``) go to ``attrs.attemptdb``.

Its corrections and retractions name their targets by attemptdb's display ids
(``reference/attemptdb.md`` §3.3, §3.6), derived as our projection derives
its own (same namespace and names, ``project/ids.py``):

- a **retraction of a session** (``ses_…``: derived from the provider and the
  provider's session id, both kept) or **of an event** (``ev_…``: the event
  keeps its id) names the same thing here, so it becomes our retraction
  (provider ``agentlog``, session ``meta``, as ``agentlog retract`` writes it;
  attemptdb's id kept) and the projection applies it;
- a **correction** (its target an attempt ``att_…`` or a turn ``trn_…``) and a
  **retraction of an attempt** are kept as ``unknown`` events
  (``attrs.attemptdb_kind``) and not applied: attempt and turn ids are
  positional (the session, the turn's index, the attempt's index in it), so the
  same id names the attempt at that position in *our* projection — the same
  one only if our turn and attempt segmentation of the same events agrees with
  attemptdb's projector version, which nothing here can check (and our session
  may hold events attemptdb did not see: hooks, transcripts). Applied to the
  wrong attempt it would silently rewrite another outcome. A target given by
  a short id (``ses_1234abcd``) is kept the same way (it names nothing for sure).

**nd7** (``agentlog import nd7 DIR``: ``<state>/sessions/<id>/events.ndjson``,
``shared/reference/nd7.md`` §3): every frame's BLAKE3 seal and its link to the
one before (frame 0 to BLAKE3 of the session id) are checked on the way in; a
break is reported (file, line, reason) and the frames after it are imported
marked ``attrs.nd7_chain = "unverified"``. A frame's body is the hook payload
nd7 received (``hook`` frames keep it whole): it is turned back into that
payload and normalised by our own Claude Code adapter, so an nd7 tool call
becomes exactly the event our hook would have written.
"""

from __future__ import annotations

import re
from typing import Any, Final

from agentlog import __version__
from agentlog.core.fastjson import dumps
from agentlog.importers.base import NOT_JSON, Parser, SourceLine, event_id_for, raw_line

_HEX64: Final = re.compile(rb"[0-9a-f]{64}")
_SEAL: Final = b',"hash":"'
_MODES: Final = {"metadata_only": "metadata_only"}
_META_KINDS: Final = frozenset({"correction", "retraction"})
_WIRE_KEYS: Final = ("event_id", "schema_version", "kind", "provider", "provider_event_name", "observed_at",
                     "captured_at", "capture_mode", "agentlog_version", "provider_version", "provider_session_id",
                     "provider_turn_id", "agent", "tool", "paths", "outcome", "duration_ms", "project", "attrs",
                     "content", "raw")


class AttemptdbParser(Parser):
    """attemptdb Event v1 JSON lines."""

    provider = "attemptdb"
    source = "attemptdb_event_v1"
    keeps_lines = False

    def feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        from agentlog.core.model import Event, ModelError

        if record is NOT_JSON or not isinstance(record, dict):
            self.stats.problem(line, "not a JSON object")
            return []
        kind = record.get("kind")
        self.stats.saw(str(kind))
        try:
            ev = self._event(line, record)
        except (TypeError, ValueError, KeyError) as e:
            self.stats.problem(line, f"not an Event v1 record: {type(e).__name__}")
            return []
        try:
            Event.from_wire(ev)
        except ModelError as e:
            self.stats.problem(line, f"not a valid event: {e}")
            return []
        return [ev]

    def _event(self, line: SourceLine, r: dict[str, Any]) -> dict[str, Any]:
        from agentlog.core.kinds import EVENT_KINDS

        kind = str(r["kind"])
        attrs: dict[str, Any] = dict(r.get("attrs") or {})
        if kind == "retraction" and _translatable(attrs):
            return self._retraction(line, r, attrs)
        if kind in _META_KINDS or kind not in EVENT_KINDS:
            attrs["attemptdb_kind"] = kind
            if kind not in EVENT_KINDS:
                self.stats.unknown_record(str(r.get("adapter_version") or ""), kind)
            kind = "unknown"
        self._provenance(attrs, line, r, ("session_id", "device_id", "source_seq", "hlc", "span_id",
                                           "parent_span_id", "adapter_version", "hook_version"))
        observed = int(r["observed_at"])
        ev: dict[str, Any] = {
            "event_id": str(r["event_id"]),
            "schema_version": 1,
            "kind": kind,
            "provider": str(r.get("provider") or "attemptdb"),
            "provider_event_name": str(r.get("provider_event_name") or ""),
            "observed_at": observed,
            "captured_at": int(r.get("captured_at") or observed),
            "capture_mode": _MODES.get(str(r.get("capture_mode")), "full"),
            "agentlog_version": __version__,
        }
        for key in ("provider_version", "provider_session_id", "provider_turn_id"):
            if isinstance(r.get(key), str):
                ev[key] = r[key]
        agent = r.get("agent")
        if isinstance(agent, dict):
            a = {k: agent[k] for k in ("agent_type", "model") if isinstance(agent.get(k), str)}
            pid = agent.get("provider_agent_id")
            if isinstance(pid, str):
                a["agent_id"] = pid
            if a:
                ev["agent"] = a
        tool = r.get("tool")
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            ev["tool"] = {k: tool[k] for k in ("name", "category", "call_id") if isinstance(tool.get(k), str)}
        paths = []
        for p in r.get("paths") or ():
            if isinstance(p, dict):
                v = p.get("repo_relative") or p.get("original") or p.get("logical")
            else:
                v = p
            if isinstance(v, str) and v:
                paths.append(v)
        if paths:
            ev["paths"] = paths
        outcome = r.get("outcome")
        if isinstance(outcome, dict) and isinstance(outcome.get("status"), str):
            ev["outcome"] = {k: outcome[k] for k in ("status", "class", "exit_code") if outcome.get(k) is not None}
        if isinstance(r.get("duration_ms"), int):
            ev["duration_ms"] = r["duration_ms"]
        project = r.get("project")
        if isinstance(project, dict) and isinstance(project.get("root"), str):
            pr = {"root": project["root"], "name": str(project.get("name") or project["root"].rsplit("/", 1)[-1])}
            for ours, theirs in (("remote", "repo_remote"), ("branch", "branch"), ("head", "head")):
                if isinstance(project.get(theirs), str):
                    pr[ours] = project[theirs]
            ev["project"] = pr
        ev["attrs"] = attrs
        if ev["capture_mode"] == "full":
            if isinstance(r.get("content"), dict) and r["content"]:
                ev["content"] = r["content"]
            ev["raw"] = raw_line(line.data)
        return {k: ev[k] for k in _WIRE_KEYS if k in ev}


    def _provenance(self, attrs: dict[str, Any], line: SourceLine, r: dict[str, Any], keys: tuple[str, ...]) -> None:
        """attemptdb's own ids (``keys`` of the record) and where the event was read."""
        attrs["attemptdb"] = {k: r[k] for k in keys if r.get(k) not in (None, "", 0)}
        attrs["reconstructed"] = True
        attrs["reconstructed_from"] = self.source
        attrs["source_file"] = line.path
        attrs["source_line"] = line.lineno

    def _retraction(self, line: SourceLine, r: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
        """attemptdb's retraction of a session or an event as ours (what ``agentlog
        retract`` writes: provider ``agentlog``, session ``meta``), keeping its id.
        The target stays as it is: attemptdb derives a session id from the provider and
        the provider's session id exactly as our projection does (``project/ids.py``),
        and an imported event keeps attemptdb's id, so ``ses_…``/``ev_…`` names the
        same session or event here."""
        from agentlog.core.kinds import META_PROVIDER, META_SESSION, REASONS

        reason = theirs.get("reason")
        attrs: dict[str, Any] = {"target_type": theirs["target_type"], "target": theirs["target"],
                                 "reason": reason if reason in REASONS else "other"}
        if isinstance(theirs.get("note_chars"), int):
            attrs["note_chars"] = theirs["note_chars"]
        attrs["attemptdb_kind"] = "retraction"
        self._provenance(attrs, line, r, ("session_id", "device_id", "source_seq", "hlc", "provider",
                                           "provider_session_id", "adapter_version"))
        observed = int(r["observed_at"])
        ev: dict[str, Any] = {
            "event_id": str(r["event_id"]), "schema_version": 1, "kind": "retraction", "provider": META_PROVIDER,
            "provider_event_name": "Retraction", "observed_at": observed,
            "captured_at": int(r.get("captured_at") or observed),
            "capture_mode": _MODES.get(str(r.get("capture_mode")), "full"), "agentlog_version": __version__,
            "provider_session_id": META_SESSION, "attrs": attrs,
        }
        if ev["capture_mode"] == "full":
            content = r.get("content")
            if isinstance(content, dict) and isinstance(content.get("note"), str):
                ev["content"] = {"note": content["note"]}
            ev["raw"] = raw_line(line.data)
        return ev


#: a whole display id of a session or an event (a short one names nothing for sure)
_WHOLE_TARGET: Final = re.compile(r"(ses|ev)_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _translatable(attrs: dict[str, Any]) -> bool:
    """A retraction whose target means the same here: a session or an event named by
    its whole id (attempts are not: see the module docstring)."""
    target = attrs.get("target")
    tt = attrs.get("target_type")
    return isinstance(target, str) and tt in ("session", "event") and _WHOLE_TARGET.fullmatch(target) is not None \
        and target.startswith("ses_" if tt == "session" else "ev_")


def split_sealed(line: bytes) -> tuple[bytes, str] | None:
    """An nd7 frame line (without its newline) → (the hashed bytes, the hash), or
    None when it is not a sealed frame."""
    if not line.endswith(b'"}') or len(line) < 64 + len(_SEAL) + 2:
        return None
    digest = line[-66:-2]
    if not _HEX64.fullmatch(digest) or line[-66 - len(_SEAL):-66] != _SEAL:
        return None
    return line[:-66 - len(_SEAL)] + b"}", digest.decode("ascii")


def genesis(session_id: str) -> str:
    import blake3

    return str(blake3.blake3(session_id.encode("utf-8")).hexdigest())


class Nd7Parser(Parser):
    """One nd7 session log (``events.ndjson``), its chain checked as it is read."""

    provider = "nd7"
    source = "nd7"
    keeps_lines = False
    carried = ("prev", "seq", "broken")

    def __init__(self, path: str, session_hint: str | None = None) -> None:
        super().__init__(path, session_hint)
        parts = path.replace("\\", "/").split("/")
        self.session_dir = parts[-2] if len(parts) >= 2 else (session_hint or "")
        self.prev: str | None = None
        self.seq = -1
        self.broken = False
        self.breaks: list[tuple[int, str]] = []

    def _break(self, line: SourceLine, reason: str) -> None:
        if not self.broken:
            self.breaks.append((line.lineno, reason))
            self.stats.problem(line, f"nd7 chain broken: {reason}")
        self.broken = True

    def feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        import blake3

        if record is NOT_JSON or not isinstance(record, dict):
            self._break(line, "not a JSON frame")
            return []
        self.stats.saw(str(record.get("kind")))
        sealed = split_sealed(line.data)
        session = str(record.get("session_id") or self.session_dir)
        seq = record.get("seq")
        if sealed is None:
            self._break(line, "not a sealed frame")
        else:
            hashed, digest = sealed
            if blake3.blake3(hashed).hexdigest() != digest:
                self._break(line, f"frame {seq}: hash does not match its bytes")
            expected_prev = genesis(session) if self.prev is None else self.prev
            if record.get("prev") != expected_prev:
                self._break(line, f"frame {seq}: prev does not link to the frame before")
            if seq != self.seq + 1:
                self._break(line, f"frame {seq}: expected seq {self.seq + 1}")
            self.prev = digest
        if isinstance(seq, int):
            self.seq = seq
        return self._event(line, record, session)

    def _event(self, line: SourceLine, frame: dict[str, Any], session: str) -> list[dict[str, Any]]:
        from agentlog.capture.hook import build

        raw_body = frame.get("body")
        body: dict[str, Any] = raw_body if isinstance(raw_body, dict) else {}
        kind = frame.get("kind")
        if kind == "hook" and isinstance(body.get("raw"), dict):
            payload = dict(body["raw"])
        else:
            payload = {k: v for k, v in body.items() if k not in ("text", "reason", "ok", "argv", "paths")}
            if kind == "prompt":
                payload["prompt"] = body.get("text")
            elif kind in ("session_start",):
                payload["source"] = body.get("reason")
            elif kind == "session_end":
                payload["reason"] = body.get("reason")
            elif kind == "tool_result" and body.get("ok") is False:
                payload["hook_event_name"] = "PostToolUseFailure"
                payload["error"] = body.get("tool_response")
                payload.pop("tool_response", None)
        payload.setdefault("session_id", session)
        ts = frame.get("ts")
        at = int(ts) // 1000 if isinstance(ts, int) else 0
        agent = "codex" if str(frame.get("source", "")).endswith("codex") else "claude-code"
        captured = build(agent, dumps(payload).encode("utf-8"), 0, [], captured_at=at,
                         event_id=event_id_for(self.source, session, frame.get("seq"), at_us=at),
                         cwd=body.get("cwd") if isinstance(body.get("cwd"), str) else None)
        ev = captured.event
        ev["observed_at"] = at
        attrs = ev["attrs"]
        attrs["reconstructed"] = True
        attrs["reconstructed_from"] = self.source
        attrs["source_file"] = line.path
        attrs["source_line"] = line.lineno
        attrs["nd7_seq"] = frame.get("seq")
        attrs["nd7_host"] = frame.get("host")
        attrs["nd7_chain"] = "unverified" if self.broken else "verified"
        return [ev]
