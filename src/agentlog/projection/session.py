"""One session's projection: turns, tool calls, signals, attempts, supersession, commits.

Everything here depends on the session's own events only (in stream order,
see :mod:`.observe`), never on a reference time and never on another
session — which is what lets the projection re-build only the sessions new
events touch. What depends on other sessions or on "now" (liveness, work
units, handoffs, corrections) is :mod:`.assemble`'s.

The rules follow attemptdb's tier-1 projection (docs/projection.md says
where and why agentlog differs):

- turns: a prompt a person typed opens a turn; injected prompts
  (``<system-reminder>``, task notifications, local command output) do not;
  tool activity before the first prompt forms turn 0;
- tool calls pair by the provider's call id, else first-in-first-out by
  (agent, tool name) — an end that carries a call id only pairs with a
  start that has none; a lone end is a complete call without a start;
- signals: a permission request or a needs-input notification is pending
  until the session's next event that a person's reply could cause
  (background notifications, compaction, configuration and file-watch
  events do not clear it);
- attempts: a turn's calls split at each failing mutating or shell call;
  calls already running when it failed stay in its attempt;
- supersession: a failed attempt that touched files is superseded by the
  first later attempt, in the same or the next turn, touching one of them;
- commits: a successful ``git commit`` call, linked to the head it made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.projection.ids import derive
from agentlog.projection.observe import Obs

ALGORITHM_VERSION: Final = "agentlog-tier1-v2"

MUTATING: Final = frozenset({"file_write", "file_edit", "notebook"})
ATTEMPT_ENDING: Final = MUTATING | {"shell"}
SIGNAL_NOTIFICATIONS: Final = frozenset({"permission_prompt", "idle_prompt", "agent_needs_input", "elicitation_dialog"})
# Events that are not a reply to a pending question (they never clear a signal).
BACKGROUND_KINDS: Final = frozenset({
    "notification", "compaction_started", "compaction_finished", "config_changed", "file_changed",
    "capture_test", "capture_gap", "unknown", "purge", "cwd_changed", "usage",
})
TOOL_END_KINDS: Final = frozenset({"tool_call_finished", "tool_call_failed"})
APPROACH_ORDER: Final = (
    ("shell", "shell"), ("file_read", "read"), ("search", "search"), ("web", "web"), ("mcp", "mcp"),
    ("subagent", "subagent"), ("plan", "plan"), ("other", "other"),
)
# Confidence palette (fixed values, never computed scores).
CONF_HIGH: Final = 0.9
CONF_MID: Final = 0.6
CONF_LOW: Final = 0.4


@dataclass(slots=True)
class Call:
    """A tool call being paired."""

    tool_call_id: str
    ordinal: int
    turn_index: int
    agent_id: str | None
    tool_name: str | None
    category: str | None
    provider_call_id: str | None
    start: Obs | None = None
    end: Obs | None = None
    by_id: bool = False
    """Paired by call id (or a lone start/end with an id): the strongest pairing."""
    fifo: bool = False
    cached_paths: list[str] | None = None

    @property
    def first_at(self) -> int:
        o = self.start or self.end
        assert o is not None
        return o.observed_at

    @property
    def status(self) -> str | None:
        if self.end is None:
            return None
        if self.end.status:
            return self.end.status
        if self.end.kind == "permission_denied":
            return "denied"
        return "failure" if self.end.kind == "tool_call_failed" else "success"

    @property
    def failure_class(self) -> str | None:
        return self.end.failure_class if self.end is not None else None

    def paths(self) -> list[str]:
        """Union of the start's and end's paths (computed once: call after pairing)."""
        out = self.cached_paths
        if out is None:
            out = []
            for o in (self.start, self.end):
                if o is not None:
                    for p in o.paths:
                        if p not in out:
                            out.append(p)
            self.cached_paths = out
        return out

    def attr(self, key: str) -> Any:
        for o in (self.start, self.end):
            if o is not None and o.attrs.get(key) is not None:
                return o.attrs[key]
        return None

    def end_attr(self, key: str) -> Any:
        for o in (self.end, self.start):
            if o is not None and o.attrs.get(key) is not None:
                return o.attrs[key]
        return None


_INT_FACTS: Final = ("tests_passed", "tests_failed", "tests_skipped", "tests_errors", "check_errors")
_TEXT_FACTS: Final = ("failure_evidence", "result_summary", "test_runner", "failing_tests", "checker", "first_error",
                      "reclassified_from")


def _result_facts(end: Obs | None) -> dict[str, Any]:
    """What the call's end says of its result (docs/failures.md): the class's evidence,
    test and check counts, and the class an older classifier gave, if it differed."""
    attrs = end.attrs if end is not None else {}
    out: dict[str, Any] = {}
    for k in _INT_FACTS:
        v = attrs.get(k)
        out[k] = v if isinstance(v, int) and not isinstance(v, bool) else None
    for k in _TEXT_FACTS:
        v = attrs.get(k)
        out[k] = v if isinstance(v, str) else None
    return out


def _link_fixes(calls: list[Call], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A failed command and the next run of the same command that succeeded: the failed
    row's ``fixed_by`` names the passing call, and a ``fixed_by`` edge links them
    (evidence: the two ends)."""
    out: list[dict[str, Any]] = []
    waiting: dict[str, list[int]] = {}
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["finished_at"] or rows[i]["started_at"] or 0, i))
    for i in order:
        key = calls[i].attr("command_key")
        if not isinstance(key, str):
            continue
        status = rows[i]["outcome_status"]
        if status == "failure":
            waiting.setdefault(key, []).append(i)
        elif status == "success":
            for j in waiting.pop(key, []):
                rows[j]["fixed_by"] = rows[i]["tool_call_id"]
                ev = [x for x in (rows[j]["end_event_id"], rows[i]["end_event_id"]) if x]
                out.append(edge("fixed_by", "tool_call", rows[j]["tool_call_id"], "tool_call", rows[i]["tool_call_id"], ev))
    return out


@dataclass(slots=True)
class Turn:
    index: int
    started_at: int
    first_event: str
    prompt: Obs | None = None
    stop: Obs | None = None
    ended_at: int | None = None
    status: str = "in_progress"
    failure_class: str | None = None
    calls: list[Call] = field(default_factory=list)
    last_event: str = ""
    last_at: int = 0


@dataclass
class SessionResult:
    """What one session projects to: rows of the per-session tables plus the facts
    the cross-session stage needs (all plain JSON-able values)."""

    key: str
    session: dict[str, Any]
    turns: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    signals: list[dict[str, Any]]
    commits: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    facts: dict[str, Any]
    #: what the cross-session stage derived from this result alone, kept while the
    #: result is (in memory only: never stored)
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _status(o: Obs) -> str:
    if o.status:
        return o.status
    return "failure" if o.kind == "tool_call_failed" else "success"


def better_end(old: Obs | None, new: Obs) -> bool:
    """Whether ``new``, a later account of a call's end, should replace ``old``:
    it reports a failure or denial where ``old`` reported success, a denial or a
    cancellation where ``old`` reported a failure, or the same
    outcome with an exit code or a class that ``old`` lacked."""
    if old is None:
        return True
    a, b = _status(old), _status(new)
    if a == "success" and b in ("failure", "denied"):
        return True
    if a == "failure" and b in ("denied", "cancelled"):
        return True  # the call never ran: a refusal or a cancellation says more than "it failed"
    if a != b:
        return False
    if old.exit_code is None and new.exit_code is not None:
        return True
    return b != "success" and old.failure_class in (None, "unknown") and new.failure_class not in (None, "unknown")


def _other_input_now(c: Call, end: Obs, key: str) -> bool:
    """Whether ``c``'s start is of an input other than ``key`` at the time of ``end``."""
    st = c.start
    if st is None or st.observed_at != end.observed_at:
        return False
    other = st.attrs.get("input_key")
    return other is not None and other != key


def _early_end(lone_ends: list[Call], o: Obs) -> Call | None:
    """The call, known so far by its end alone, that a start ``o`` without a call id
    begins: an end of the same agent and tool at the same time (with the same input
    when both say), which sorted before its start (equal times: the event ids decide).
    It leaves ``lone_ends``. (An end with a call id meets its start through the id.)"""
    if o.call_id or not lone_ends:
        return None
    # the stream is in time order: the ends before this start's time can match no later one
    stale = 0
    while stale < len(lone_ends) and (e := lone_ends[stale].end) is not None and e.observed_at < o.observed_at:
        stale += 1
    del lone_ends[:stale]
    key = o.attrs.get("input_key")
    found = None
    for i, c in enumerate(lone_ends):
        e = c.end
        if e is None or c.start is not None or e.agent_id != o.agent_id or e.tool_name != o.tool_name:
            continue
        other = e.attrs.get("input_key")
        if key is not None and other == key:
            found = i
            break
        if found is None and (key is None or other is None):
            found = i
    return None if found is None else lone_ends.pop(found)


def only_capture_test(events: list[Obs]) -> bool:
    """Whether a session is nothing but ``agentlog install``'s capture test (not a
    session anyone ran: it is not projected)."""
    return all(o.kind == "capture_test" for o in events)


def agent_id_of(session_id: str, provider_agent_id: str | None) -> str:
    if provider_agent_id:
        return derive("agent", "subagent", session_id, provider_agent_id)
    return derive("agent", "session", session_id)


def edge(kind: str, from_type: str, from_id: str, to_type: str, to_id: str, evidence: list[str],
         confidence: float = CONF_HIGH, source: str = "projection") -> dict[str, Any]:
    return {
        "edge_kind": kind, "from_type": from_type, "from_id": from_id, "to_type": to_type, "to_id": to_id,
        "evidence": evidence, "confidence": confidence, "edge_source": source,
    }


def _is_signal(o: Obs) -> str | None:
    if o.kind == "permission_requested":
        return "permission_request"
    if o.kind == "notification":
        t = o.attrs.get("notification_type") or o.attrs.get("type") or o.attrs.get("matcher")
        if isinstance(t, str) and t in SIGNAL_NOTIFICATIONS:
            return t
    return None


def _approach(calls: list[Call]) -> str:
    buckets: dict[str, list[str]] = {"file_edit": [], "file_write": [], "notebook": []}
    counts: dict[str, int] = {}
    for c in calls:
        cat = c.category or "other"
        if cat in buckets:
            for p in c.paths():
                if p not in buckets[cat]:
                    buckets[cat].append(p)
            if not c.paths():
                counts[cat] = counts.get(cat, 0) + 1
        else:
            counts[cat] = counts.get(cat, 0) + 1
    parts: list[str] = []
    for cat, label in (("file_edit", "edit"), ("file_write", "write"), ("notebook", "notebook")):
        paths = buckets[cat]
        if paths:
            shown = ", ".join(paths[:4]) + (f" +{len(paths) - 4} more" if len(paths) > 4 else "")
            parts.append(f"{label} {shown}")
        elif counts.get(cat):
            n = counts[cat]
            parts.append(label if n == 1 else f"{label} ×{n}")
    for cat, label in APPROACH_ORDER:
        n = counts.get(cat, 0)
        if n:
            parts.append(label if n == 1 else f"{label} ×{n}")
    # Categories outside the fixed list (a newer adapter's) count as "other".
    extra = sum(n for cat, n in counts.items() if cat not in buckets and cat not in dict(APPROACH_ORDER))
    if extra:
        parts.append("other" if extra == 1 else f"other ×{extra}")
    return " · ".join(parts) if parts else "no tool calls"


def structural_edges(turns: list[dict[str, Any]], tool_calls: list[dict[str, Any]],
                     attempts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The edges the tables already state, as edge rows: session → turn and
    turn → tool call (``parent_of``), prompt → turn (``triggered``), event →
    attempt (``evidence_for``, one per evidence event). They are not stored:
    the query engine's ``edges`` view derives them the same way (``STRUCTURAL_EDGES_SQL``)."""
    out: list[dict[str, Any]] = []
    for t in turns:
        opening = t["prompt_event_id"] or t["first_event_id"]
        out.append(edge("parent_of", "session", t["session_id"], "turn", t["turn_id"], [opening]))
        if t["prompt_event_id"]:
            out.append(edge("triggered", "event", t["prompt_event_id"], "turn", t["turn_id"], [t["prompt_event_id"]]))
    for c in tool_calls:
        out.append(edge("parent_of", "turn", c["turn_id"], "tool_call", c["tool_call_id"], list(c["evidence"])))
    for a in attempts:
        for ev_id in a["evidence"]:
            out.append(edge("evidence_for", "event", ev_id, "attempt", a["attempt_id"], [ev_id], a["confidence"]))
    return out


def coverage(started: bool, ended: bool, prompts: int, calls: int) -> str:
    if not prompts and not calls:
        return "unknown"
    if started and ended and prompts and calls:
        return "full"
    if started or ended:
        return "partial"
    return "minimal"


def build_session(key: str, events: list[Obs], retracted_events: frozenset[str] = frozenset()) -> SessionResult:
    """Project one session from its events in stream order (see :func:`.observe.ordered`).

    ``retracted_events`` are dropped before anything is built, so the rules run as
    if they had never been recorded."""
    evs = [o for o in events if o.event_id not in retracted_events and o.kind not in ("correction", "retraction")]
    first = evs[0]
    provider = first.provider
    psid = first.provider_session_id or "unknown"
    session_id = derive("session", provider, psid)
    main_agent = agent_id_of(session_id, None)

    project_obs = next((o for o in evs if o.project_root), None)
    root = project_obs.project_root if project_obs else None
    remote = project_obs.project_remote if project_obs else None
    from agentlog.projection.ids import project_id as _pid

    project_id = _pid(root, remote)
    project_name = (project_obs.project_name if project_obs else None) or "unknown"

    turns: list[Turn] = []
    calls: list[Call] = []
    open_by_id: dict[str, Call] = {}
    ended_by_id: dict[str, Call] = {}
    fifo: dict[tuple[str | None, str | None], list[Call]] = {}
    lone_ends: list[Call] = []  # calls known by an end alone, without a call id (their start may come next)
    used_ids: set[str] = set()
    signals: list[dict[str, Any]] = []
    open_signal: dict[str, Any] | None = None
    agents: list[str] = []
    denials: list[tuple[Obs, int]] = []
    heads: list[tuple[int, str, str]] = []  # (position, event id, head) whenever the head changes
    last_head: str | None = None
    started: Obs | None = None
    ended: Obs | None = None
    end_reason: str | None = None
    prompt_count = 0
    failure_events = 0
    last_activity: Obs | None = None
    stats = {"fifo_pairings": 0, "unpaired_tool_finishes": 0}

    def current_turn(o: Obs) -> Turn:
        if not turns:
            turns.append(Turn(0, o.observed_at, o.event_id))
        return turns[-1]

    agent_ids: dict[str | None, str] = {}

    def agent_of(provider_agent_id: str | None) -> str:
        a = agent_ids.get(provider_agent_id)
        if a is None:
            a = agent_ids[provider_agent_id] = agent_id_of(session_id, provider_agent_id)
        return a

    agents_seen: set[str | None] = set()
    for pos, o in enumerate(evs):
        k = o.kind
        if o.agent_id not in agents_seen and (o.agent_id or k not in ("session_started", "session_ended")):
            agents_seen.add(o.agent_id)
            agents.append(agent_of(o.agent_id))
        if o.head and o.head != last_head:
            heads.append((pos, o.event_id, o.head))
            last_head = o.head
        if k != "session_ended":
            last_activity = o
        # A pending question is answered by the next event a reply could cause.
        if open_signal is not None and k not in BACKGROUND_KINDS:
            open_signal["cleared_at"] = o.observed_at
            open_signal["cleared_by"] = o.event_id
            open_signal["pending"] = False
            open_signal = None
        if k == "session_started":
            if started is None:
                started = o
            if ended is not None and ended.observed_at <= o.observed_at:
                ended = None  # resumed
                end_reason = None
        elif k == "session_ended":
            ended = o
            r = o.attrs.get("reason")
            end_reason = r if isinstance(r, str) else None
            if turns and turns[-1].ended_at is None:
                turns[-1].ended_at = o.observed_at
                turns[-1].status = "unknown"
        elif k == "prompt_submitted":
            if o.attrs.get("prompt_kind") == "injected":
                pass
            else:
                prompt_count += 1
                if turns and turns[-1].ended_at is None:
                    turns[-1].ended_at = o.observed_at
                    turns[-1].status = "unknown"
                if ended is not None:
                    ended = None
                    end_reason = None
                t = Turn(len(turns) if turns else 1, o.observed_at, o.event_id, prompt=o)
                t.index = (turns[-1].index + 1) if turns else 1
                t.last_event, t.last_at = o.event_id, o.observed_at
                turns.append(t)
        elif k == "tool_call_started" and o.call_id and (o.call_id in open_by_id or o.call_id in ended_by_id):
            # A second account of a call's start (a transcript's, after the hook's):
            # the same call.
            same = open_by_id.get(o.call_id) or ended_by_id[o.call_id]
            if same.start is None:
                same.start = o
        elif k == "tool_call_started" and (early := _early_end(lone_ends, o)) is not None:
            # its end sorted first (the same time; the event ids decide): the same call
            early.start = o
            early.fifo = not early.by_id
            stats["fifo_pairings"] += int(early.fifo)
            stats["unpaired_tool_finishes"] -= 1
        elif k == "tool_call_started":
            turn = current_turn(o)
            cid = o.call_id
            if cid and cid not in used_ids:
                tcid = derive("tool_call", session_id, "call", cid)
                used_ids.add(cid)
            else:
                tcid = derive("tool_call", session_id, "seq", str(len(calls)))
            c = Call(tcid, len(calls), turn.index, o.agent_id, o.tool_name, o.tool_category, cid, start=o)
            calls.append(c)
            turn.calls.append(c)
            if cid:
                open_by_id.setdefault(cid, c)
            fifo.setdefault((o.agent_id, o.tool_name), []).append(c)
        elif k in TOOL_END_KINDS and o.call_id and o.call_id in ended_by_id:
            # A second account of a call that already ended (a batch of outcomes, a
            # transcript's result): never a call of its own; it replaces the end it
            # adds to (a failure or an exit code the first lacked).
            prior = ended_by_id[o.call_id]
            if better_end(prior.end, o):
                was = prior.status in ("failure", "denied")
                prior.end = o
                now = prior.status in ("failure", "denied")
                failure_events += int(now) - int(was)
                if prior.status == "denied":
                    denials.append((o, pos))
        elif k in TOOL_END_KINDS or (k == "permission_denied" and o.call_id and o.call_id in open_by_id):
            # (a refusal of a call that started ends it: it will not run; a person's
            # rejection in a Claude transcript, Claude's PermissionDenied hook)
            turn = current_turn(o)
            cid = o.call_id
            match: Call | None = None
            if cid and cid in open_by_id:
                match = open_by_id.pop(cid)
                match.by_id = True
                q = fifo.get((match.agent_id, match.tool_name))
                if q is not None and match in q:
                    q.remove(match)
            else:
                q = fifo.get((o.agent_id, o.tool_name))
                if q:
                    in_key = o.attrs.get("input_key")
                    order = list(range(len(q)))
                    if in_key is not None:
                        # calls without ids (Gemini): the one with the same input first
                        alike = [i for i in order if (st := q[i].start) is not None and st.attrs.get("input_key") == in_key]
                        # not a start of another input at this same time: this end's own
                        # start may sort after it (it then pairs with it: _early_end)
                        order = alike + [i for i in order
                                         if i not in alike and not _other_input_now(q[i], o, in_key)]
                    for i in order:
                        cand = q[i]
                        if cid and cand.provider_call_id:
                            continue
                        match = q.pop(i)
                        match.fifo = True
                        stats["fifo_pairings"] += 1
                        if match.provider_call_id:
                            open_by_id.pop(match.provider_call_id, None)
                        break
            if match is not None:
                match.end = o
                if match.category is None:
                    match.category = o.tool_category
                if not match.provider_call_id and cid:
                    match.provider_call_id = cid
            else:
                stats["unpaired_tool_finishes"] += 1
                if cid and cid not in used_ids:
                    tcid = derive("tool_call", session_id, "call", cid)
                    used_ids.add(cid)
                else:
                    tcid = derive("tool_call", session_id, "seq", str(len(calls)))
                c = Call(tcid, len(calls), turn.index, o.agent_id, o.tool_name, o.tool_category, cid, end=o,
                         by_id=bool(cid))
                calls.append(c)
                turn.calls.append(c)
                match = c
                if not cid:
                    lone_ends.append(c)
            if match.provider_call_id:
                ended_by_id[match.provider_call_id] = match
            if match.status in ("failure", "denied"):
                failure_events += 1
            if match.status == "denied":
                denials.append((o, pos))
        elif k == "permission_denied":
            current_turn(o)
            denials.append((o, pos))
        elif k in ("turn_stopped", "turn_failed"):
            turn = current_turn(o)
            turn.stop = o
            turn.ended_at = o.observed_at
            if k == "turn_failed":
                failure_events += 1
                turn.status = "failed"
                cls = o.failure_class or o.attrs.get("failure_class") or o.attrs.get("reason")
                turn.failure_class = cls if isinstance(cls, str) else "turn_failed"
            else:
                turn.status = "completed"
                turn.failure_class = None
        if turns:
            # after the event is placed: a prompt that opened a turn is that turn's event
            turns[-1].last_event = o.event_id
            turns[-1].last_at = o.observed_at
        sig = _is_signal(o) if (k == "permission_requested" or k == "notification") else None
        if sig is not None:
            if turns:
                pass
            open_signal = {
                "signal_id": derive("signal", session_id, o.event_id),
                "session_id": session_id, "provider": provider, "project_id": project_id,
                "project_name": project_name, "event_id": o.event_id, "raised_at": o.observed_at,
                "kind": o.kind, "signal_type": sig, "cleared_at": None, "cleared_by": None, "pending": True,
                "evidence": [o.event_id], "confidence": CONF_HIGH,
            }
            signals.append(open_signal)

    if turns and turns[-1].ended_at is None and ended is not None and turns[-1].status == "in_progress":
        turns[-1].ended_at = ended.observed_at
        turns[-1].status = "unknown"

    cov = coverage(started is not None, ended is not None, prompt_count, len(calls))

    # -- tool call rows ------------------------------------------------------
    turn_ids = {t.index: derive("turn", session_id, str(t.index)) for t in turns}
    tool_rows: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for c in calls:
        s, e = c.start, c.end
        dur = None
        if e is not None and e.duration_ms is not None:
            dur = e.duration_ms
        elif s is not None and s.duration_ms is not None and e is not None:
            dur = s.duration_ms
        elif s is not None and e is not None:
            dur = max(0, (e.observed_at - s.observed_at) // 1000)
        ev_ids = [x.event_id for x in (s, e) if x is not None]
        paths = c.paths()
        la, lr = c.end_attr("lines_added"), c.end_attr("lines_removed")
        tool_rows.append({
            "tool_call_id": c.tool_call_id, "session_id": session_id, "provider": provider,
            "project_id": project_id, "project_name": project_name, "turn_id": turn_ids[c.turn_index],
            "agent_id": agent_of(c.agent_id), "parent_agent_id": main_agent if c.agent_id else None,
            "provider_agent_id": c.agent_id, "tool_name": c.tool_name, "tool_category": c.category,
            "provider_call_id": c.provider_call_id,
            "started_at": s.observed_at if s else None, "finished_at": e.observed_at if e else None,
            "duration_ms": dur, "outcome_status": c.status, "outcome_class": c.failure_class,
            "exit_code": e.exit_code if e else None, "path_relative": paths[0] if paths else None,
            "paths": paths, "command_category": c.attr("command_category"),
            "git_subcommand": c.attr("git_subcommand"),
            "lines_added": la if isinstance(la, int) else None, "lines_removed": lr if isinstance(lr, int) else None,
            "start_event_id": s.event_id if s else None, "end_event_id": e.event_id if e else None,
            "pairing": "call_id" if c.by_id else ("fifo" if c.fifo else ("start_only" if e is None else "end_only")),
            "evidence": ev_ids, "confidence": CONF_HIGH if c.by_id or (s and e is None) else CONF_MID,
            **_result_facts(e), "fixed_by": None,
        })
    edges.extend(_link_fixes(calls, tool_rows))

    # -- attempts ------------------------------------------------------------
    attempt_rows: list[dict[str, Any]] = []
    turn_rows: list[dict[str, Any]] = []
    turn_facts: list[dict[str, Any]] = []
    call_index = {c.tool_call_id: c for c in calls}
    attempt_calls: dict[str, list[Call]] = {}
    for t in turns:
        tid = turn_ids[t.index]
        groups: list[list[Call]] = [[]]
        failing: list[Call | None] = [None]
        boundary: int | None = None
        ordered_calls = sorted(t.calls, key=lambda c: (c.first_at, c.ordinal))
        for c in ordered_calls:
            at = c.first_at
            if boundary is not None and at > boundary:
                groups.append([])
                failing.append(None)
                boundary = None
            groups[-1].append(c)
            if failing[-1] is None and (c.category in ATTEMPT_ENDING) and c.status in ("failure", "denied"):
                failing[-1] = c
                if c.end is not None:
                    boundary = c.end.observed_at
                elif c.start is not None:
                    boundary = c.start.observed_at
                else:
                    boundary = t.started_at
        explicit_stop = t.status in ("completed", "failed")
        all_by_id = all(c.by_id for c in t.calls)
        if cov in ("minimal", "unknown"):
            conf = CONF_LOW
        elif not explicit_stop or not all_by_id:
            conf = CONF_MID
        else:
            conf = CONF_HIGH
        ids_here: list[str] = []
        for gi, (group, fail) in enumerate(zip(groups, failing)):
            att_id = derive("attempt", session_id, str(t.index), str(gi))
            ids_here.append(att_id)
            last = gi == len(groups) - 1
            if fail is not None:
                outcome = "failed"
                fclass = fail.failure_class or fail.status
                fail_ev = fail.end or fail.start
                ended_at = fail_ev.observed_at if fail_ev is not None else None
            else:
                fclass = None
                ended_at = t.ended_at
                if t.status == "completed":
                    outcome = "succeeded" if group else "unknown"
                elif t.status == "failed":
                    outcome = "failed"
                    fclass = t.failure_class or "turn_failed"
                elif t.status == "unknown":
                    outcome = "abandoned"
                else:
                    outcome = "in_progress"
            if gi == 0:
                started_at = t.started_at
            else:
                started_at = group[0].first_at
            evidence: list[str] = []
            if gi == 0 and t.prompt is not None:
                evidence.append(t.prompt.event_id)
            for c in group:
                for x in (c.start, c.end):
                    if x is not None and x.event_id not in evidence:
                        evidence.append(x.event_id)
            if last and t.stop is not None and t.stop.event_id not in evidence:
                evidence.append(t.stop.event_id)
            if not evidence:
                evidence.append(t.first_event)
            att_paths: list[str] = []
            for c in group:
                for p in c.paths():
                    if p not in att_paths:
                        att_paths.append(p)
            attempt_calls[att_id] = group
            attempt_rows.append({
                "attempt_id": att_id, "session_id": session_id, "provider": provider,
                "project_id": project_id, "project_name": project_name, "turn_id": tid, "turn_index": t.index,
                "attempt_index": gi, "objective": t.prompt.text if t.prompt else None,
                "approach": _approach(group), "started_at": started_at, "ended_at": ended_at,
                "outcome": outcome, "failure_class": fclass,
                "tool_call_ids": [c.tool_call_id for c in group], "tool_call_count": len(group),
                "paths": att_paths, "commit_shas": [], "superseded_by": None, "supersedes": None,
                "failing_event_id": _first_event(fail),
                "first_action_event_id": (group[0].start or group[0].end).event_id  # type: ignore[union-attr]
                if group else None,
                "evidence": evidence, "confidence": conf, "algorithm_version": ALGORITHM_VERSION,
            })
        prompt_chars = None
        if t.prompt is not None:
            pc = t.prompt.attrs.get("prompt_chars")
            prompt_chars = pc if isinstance(pc, int) else (len(t.prompt.text) if t.prompt.text else None)
        opening = t.prompt.event_id if t.prompt else t.first_event
        turn_rows.append({
            "turn_id": tid, "session_id": session_id, "provider": provider, "project_id": project_id,
            "project_name": project_name, "turn_index": t.index, "started_at": t.started_at,
            "ended_at": t.ended_at, "status": t.status, "failure_class": t.failure_class,
            "prompt_event_id": t.prompt.event_id if t.prompt else None,
            "stop_event_id": t.stop.event_id if t.stop else None,
            "tool_call_ids": [c.tool_call_id for c in t.calls], "tool_call_count": len(t.calls),
            "objective": t.prompt.text if t.prompt else None, "prompt_chars": prompt_chars,
            "first_event_id": t.first_event, "last_event_id": t.last_event or t.first_event,
            "attempt_ids": ids_here,
            "evidence": [x for x in (opening, t.stop.event_id if t.stop else None) if x],
            "confidence": CONF_HIGH if (t.prompt is not None and explicit_stop) else CONF_MID,
        })
        # Facts for work units: paths touched by mutating or shell calls, edit windows,
        # the last calls (phase), in-flight calls.
        mpaths: list[str] = []
        for c in t.calls:
            if c.category in ATTEMPT_ENDING:
                for p in c.paths():
                    if p not in mpaths:
                        mpaths.append(p)
        turn_facts.append({
            "turn_id": tid, "index": t.index, "started_at": t.started_at, "ended_at": t.ended_at,
            "last_at": max(t.last_at, t.started_at), "status": t.status, "opening_event": opening,
            "objective_event": t.prompt.event_id if t.prompt else None, "mpaths": mpaths,
            "edited": any(c.category in MUTATING for c in t.calls),
            "tail": [[c.category, c.status, c.attr("git_subcommand"), c.attr("command_category")]
                     for c in ordered_calls[-5:]],
            "decisive_before": _decisive_before(ordered_calls),
            "in_flight": sum(1 for c in t.calls if c.end is None),
        })

    # -- supersession ------------------------------------------------------------
    approach_changes: list[dict[str, Any]] = []
    for i, a in enumerate(attempt_rows):
        if a["outcome"] != "failed" or not a["paths"]:
            continue
        pa = set(a["paths"])
        for b in attempt_rows[i + 1:]:
            if b["turn_index"] not in (a["turn_index"], a["turn_index"] + 1):
                if b["turn_index"] > a["turn_index"] + 1:
                    break
                continue
            if pa.intersection(b["paths"]):
                a["outcome"] = "superseded"
                a["superseded_by"] = b["attempt_id"]
                if b["supersedes"] is None:
                    b["supersedes"] = a["attempt_id"]
                ev = [x for x in (a["failing_event_id"], b["first_action_event_id"]) if x]
                approach_changes.append(_approach_change(a, b, ev))
                edges.append(edge("superseded", "attempt", a["attempt_id"], "attempt", b["attempt_id"], ev))
                if a["failing_event_id"] and b["first_action_event_id"]:
                    edges.append(edge("caused", "event", a["failing_event_id"], "event",
                                      b["first_action_event_id"], ev))
                break

    # -- commits -----------------------------------------------------------------
    commit_rows: list[dict[str, Any]] = []
    attempt_of_call = {c.tool_call_id: a["attempt_id"] for a in attempt_rows for c in attempt_calls[a["attempt_id"]]}
    for row in tool_rows:
        row["attempt_id"] = attempt_of_call.get(row["tool_call_id"])
    consumed: set[int] = set()
    positions = {o.event_id: i for i, o in enumerate(evs)}
    for c in calls:
        if c.attr("git_subcommand") != "commit" or c.category != "shell":
            continue
        if c.status not in (None, "success"):
            continue
        anchor = c.start or c.end
        assert anchor is not None
        apos = positions[anchor.event_id]
        before = None
        if c.start is not None and c.start.head:
            before = c.start.head
        else:
            for hp, _, h in heads:
                if hp < apos:
                    before = h
        sha, linkage, conf, ev = None, "unresolved", CONF_LOW, [x.event_id for x in (c.start, c.end) if x]
        if c.end is not None and c.end.head and c.end.head != before:
            sha, linkage, conf = c.end.head, "end_event", CONF_HIGH
        else:
            for hi, (hp, hev, h) in enumerate(heads):
                if hp > apos and hi not in consumed and h != before:
                    sha, linkage, conf = h, "next_head", 0.7
                    consumed.add(hi)
                    ev.append(hev)
                    break
        att = attempt_of_call.get(c.tool_call_id)
        commit_rows.append({
            "commit_id": derive("commit", "session", session_id, "call", c.tool_call_id),
            "session_id": session_id, "provider": provider, "project_id": project_id,
            "project_name": project_name, "turn_id": turn_ids[c.turn_index], "attempt_id": att,
            "tool_call_id": c.tool_call_id, "sha": sha, "previous_sha": before,
            "branch": (c.end.branch if c.end and c.end.branch else (c.start.branch if c.start else None)),
            "committed_at": (c.end or anchor).observed_at,
            "linkage": linkage, "evidence": ev, "confidence": conf, "algorithm_version": ALGORITHM_VERSION,
        })
        if sha:
            for a in attempt_rows:
                if a["attempt_id"] == att:
                    a["commit_shas"].append(sha)

    # -- session row and facts -------------------------------------------------------
    last_ev = evs[-1]
    active = prompt_count > 0 or bool(calls)
    touches: dict[str, list[Any]] = {}  # path -> [first event, first at, last event, last at]
    edits: dict[str, list[Any]] = {}  # path -> [first at, last at, added, removed, [event ids ≤3], committed_after]
    for c in calls:
        anchor = c.end or c.start
        assert anchor is not None
        for p in c.paths():
            tch = touches.get(p)
            if tch is None:
                touches[p] = [anchor.event_id, anchor.observed_at, anchor.event_id, anchor.observed_at]
            else:
                tch[2], tch[3] = anchor.event_id, anchor.observed_at
            if c.category in MUTATING:
                ed = edits.get(p)
                la, lr = c.end_attr("lines_added"), c.end_attr("lines_removed")
                if ed is None:
                    ed = edits[p] = [anchor.observed_at, anchor.observed_at, 0, 0, [], False]
                ed[1] = anchor.observed_at
                ed[2] += la if isinstance(la, int) else 0
                ed[3] += lr if isinstance(lr, int) else 0
                if len(ed[4]) < 3:
                    ed[4].append(anchor.event_id)
                ed[5] = False
        if c.attr("git_subcommand") == "commit" and c.status in (None, "success"):
            for ed in edits.values():
                ed[5] = True
    session_row = {
        "session_id": session_id, "provider": provider, "provider_session_id": psid,
        "project_id": project_id, "project_name": project_name, "project_root": root,
        "started_at": started.observed_at if started else first.observed_at,
        "ended_at": ended.observed_at if ended else None, "end_reason": end_reason,
        "start_source": (started.attrs.get("source") if started and isinstance(started.attrs.get("source"), str)
                         else None),
        "event_count": len(evs), "turn_count": len(turns), "prompt_count": prompt_count,
        "tool_call_count": len(calls), "failure_count": failure_events, "agents": agents,
        "coverage": cov, "first_event_id": first.event_id, "last_event_id": last_ev.event_id,
        "last_event_at": last_ev.observed_at,
        "last_activity_at": last_activity.observed_at if last_activity else first.observed_at,
        "last_activity_event_id": last_activity.event_id if last_activity else first.event_id,
        "start_event_id": started.event_id if started else None,
        "end_event_id": ended.event_id if ended else None,
        "in_flight_calls": sum(1 for c in calls if c.end is None),
        "evidence": [x for x in (started.event_id if started else first.event_id,
                                 ended.event_id if ended else None) if x],
        "confidence": CONF_HIGH if cov == "full" else (CONF_MID if cov == "partial" else CONF_LOW),
        "unpaired_tool_starts": sum(1 for c in calls if c.end is None),
        "unpaired_tool_finishes": stats["unpaired_tool_finishes"], "fifo_pairings": stats["fifo_pairings"],
    }
    denial_facts = []
    attempt_of_event: dict[str, str] = {}
    if denials:
        for att_id, group in attempt_calls.items():
            for c in group:
                for x in (c.start, c.end):
                    if x is not None:
                        attempt_of_event[x.event_id] = att_id
    for o, pos in denials:
        nxt = None
        for j in range(pos + 1, len(evs)):
            if evs[j].kind == "tool_call_started" or evs[j].kind in TOOL_END_KINDS:
                nxt = evs[j]
                break
        denial_facts.append({
            "event_id": o.event_id, "at": o.observed_at, "tool": o.tool_name,
            "attempt": attempt_of_event.get(o.event_id),
            "next_event": nxt.event_id if nxt else None, "next_tool": nxt.tool_name if nxt else None,
            "next_category": nxt.tool_category if nxt else None,
            "next_attempt": attempt_of_event.get(nxt.event_id) if nxt else None,
        })
    facts = {
        "active": active, "touches": touches, "edits": edits, "turns": turn_facts,
        "denials": denial_facts, "project_root": root, "approach_changes": approach_changes,
        "event_ids": [o.event_id for o in evs],
    }
    return SessionResult(key, session_row, turn_rows, attempt_rows, tool_rows, signals, commit_rows, edges, facts)


def _approach_change(a: dict[str, Any], b: dict[str, Any], evidence: list[str]) -> dict[str, Any]:
    """The decision a supersession records: attempt ``b`` chosen over failed attempt ``a``
    (``work_unit_id`` is filled by the cross-session stage)."""
    why = a["failure_class"] or "a failure"
    shared = [p for p in a["paths"] if p in b["paths"]]
    paths = ", ".join(shared or a["paths"])
    same = a["approach"] == b["approach"]
    rationale = (f"abandoned approach after {why} on {paths}; retried with "
                 + ("the same kind of change" if same else f"a different approach ({b['approach']})"))
    return {
        "decision_id": derive("decision", "approach_change", a["attempt_id"], b["attempt_id"]),
        "kind": "approach_change", "work_unit_id": None, "session_id": b["session_id"],
        "provider": b["provider"], "project_id": b["project_id"], "project_name": b["project_name"],
        "turn_id": b["turn_id"], "selected": b["attempt_id"], "alternatives": [a["attempt_id"]],
        "rationale": rationale, "rationale_source": "derived", "decided_at": b["started_at"],
        "evidence": evidence, "confidence": min(a["confidence"], b["confidence"], 0.7),
        "algorithm_version": ALGORITHM_VERSION,
    }


def _first_event(c: Call | None) -> str | None:
    """The end event of a call, else its start (the event that shows how it went)."""
    if c is None:
        return None
    o = c.end or c.start
    return o.event_id if o is not None else None


def _decisive_before(calls: list[Call]) -> bool:
    """Whether a file-mutating call precedes the turn's last five calls."""
    return any(c.category in MUTATING for c in calls[:-5])
