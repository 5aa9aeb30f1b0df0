"""What the dashboard shows, read from the store, the projection and the memory.

Each function takes an engine (the server's one, from its
:class:`agentlog.operations.reader.Source`) or the data root and returns a
JSON-ready dict (display ids, RFC 3339 times); the pages render them and
``/api/…`` returns them as they are.
"""

from __future__ import annotations

import os
from typing import Any, Final


from agentlog.core import UsageError
from agentlog.query.engine import Engine, QueryError
from agentlog.query.scope import Scope
from agentlog.query.views import ATTEMPT_COLUMNS, partition_days, plain, resolve_id

PAGE: Final = 25
"""Rows per page of every list."""


def _rows(engine: Engine, sql: str, params: list[Any] | None = None, max_rows: int = 10_000) -> list[dict[str, Any]]:
    return engine.run(sql, params or [], max_rows=max_rows).records()


# -- now ------------------------------------------------------------------------------------------


def now(engine: Engine, root: str) -> dict[str, Any]:
    """What is running, what waits on a person, the last hour's failures and today's tokens
    (``agentlog.query.now``: every part bounded, measured against the wall clock)."""
    from agentlog.api import dashboard_now

    return dashboard_now(engine, root)


# -- timeline ---------------------------------------------------------------------------------------


def timeline(engine: Engine, *, page: int = 0, project: str | None = None) -> dict[str, Any]:
    """A page of sessions (newest first) → turns → attempts, each session with its tool calls
    as segments of a time bar (start/end as fractions of the session's span, outcome)."""
    from agentlog.query import views

    scope = Scope(limit=PAGE + 1, offset=page * PAGE, project_ids=_project_ids(engine, project))
    rows = views.timeline(engine, scope)
    more = len(rows) > PAGE
    rows = rows[:PAGE]
    if rows:
        ids = [r["session_id"].split("_", 1)[1] for r in rows]
        calls = _rows(engine, "SELECT session_id, tool_name, started_at, coalesce(finished_at, started_at) AS ended, "
                              "outcome_status, attempt_id FROM tool_calls WHERE NOT retracted AND started_at IS NOT NULL AND session_id IN ("
                              + ", ".join("?" for _ in ids) + ") ORDER BY started_at", ids, max_rows=200_000)
        bars: dict[str, list[dict[str, Any]]] = {}
        for c in calls:
            bars.setdefault(c["session_id"], []).append(c)
        for r, sid in zip(rows, ids):
            r["bar"] = _bar(bars.get(sid, []))
    return {"sessions": rows, "page": page, "more": more, "project": project}


def _bar(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls as segments of [0, 1000] over the span of the session's calls (at most 400)."""
    if not calls:
        return []
    t0 = calls[0]["started_at"]
    t1 = max(c["ended"] for c in calls)
    span = max((t1 - t0).total_seconds(), 1e-6)
    out = []
    for c in calls[:400]:
        a = (c["started_at"] - t0).total_seconds() / span
        b = (c["ended"] - t0).total_seconds() / span
        out.append({"x": round(a * 1000, 1), "w": round(max((b - a) * 1000, 2.0), 1), "tool": c["tool_name"],
                    "outcome": c["outcome_status"] or "pending"})
    return out


def _project_ids(engine: Engine, project: str | None) -> list[str] | None:
    """The ids of ``project`` (a name, an id or its prefix, a path), or None for every project."""
    from agentlog.query.scope import resolve_projects

    return resolve_projects(engine, project, all_projects=not project).project_ids


# -- one session, one attempt ---------------------------------------------------------------------


_EDIT_TOOLS: Final = ("Edit", "MultiEdit", "Write", "apply_patch", "replace", "write_file", "edit_file")


def attempt(engine: Engine, ident: str, root: str) -> dict[str, Any]:
    """The attempt, its evidence events with their content (read from their own log frames), the
    edits it made as unified diffs, and what superseded it (or what it superseded)."""
    ref = resolve_id(engine, ident, ["attempt"])
    cols = ", ".join("a." + c for c in ATTEMPT_COLUMNS if c != "objective")
    (row,) = _rows(engine, f"SELECT {cols}, coalesce(a.objective, t.objective) AS objective, a.evidence, "
                           "a.project_name, a.provider, a.failing_event_id FROM attempts a "
                           "JOIN turns t USING (turn_id) WHERE a.attempt_id = ?", [ref.id])
    ids = list(row.get("evidence") or [])
    events: list[dict[str, Any]] = []
    if ids:
        # the small columns from the store (the session's days only), the content from each frame
        span = partition_days(row.get("started_at"), row.get("ended_at"))
        where = (f"observed_date IN ({', '.join('?' for _ in span)}) AND " if span else "")
        events = _rows(engine, "SELECT event_id, observed_at, kind, tool_name, outcome_status, outcome_class, "
                               f"exit_code, paths, log_provider, log_key, log_offset FROM events WHERE {where}"
                               "event_id IN (" + ", ".join("?" for _ in ids) + ") ORDER BY observed_at, event_id "
                               "LIMIT 500", [*span, *ids])
    diffs = []
    from agentlog.log.lookup import event_at

    for ev in events:
        frame = event_at(root, f"{ev.pop('log_provider')}/{ev.pop('log_key')}", ev.pop("log_offset"))
        ev["content"] = frame.get("content") if frame else None
        if ev["kind"] == "tool_call_started" and ev.get("tool_name") in _EDIT_TOOLS:
            diffs.extend(_diffs(ev))
    out = plain(row)
    from agentlog.api import failing_call

    out["failing_call"] = failing_call(engine, root, row["failing_event_id"]) if row.get("failing_event_id") else None
    out["events"] = [plain(e) for e in events]
    out["diffs"] = diffs
    return out


def share_file(root: str, ident: str, fmt: str, redact_paths: bool) -> Any:
    """The session ``ident`` as a shared file (docs/share.md): ``share.export.Shared``."""
    from agentlog.operations.proofs import prove_signed
    from agentlog.share.export import export
    from agentlog.share.view import target

    what = target(root, ident)
    if what.kind != "session":
        raise UsageError(f"{ident!r} is not a session id")
    bundle, signer = prove_signed(root, what.session_id, only="session")
    return export(what, bundle, signer, fmt=fmt, redact_paths=redact_paths)


def _diffs(ev: dict[str, Any]) -> list[dict[str, Any]]:
    from agentlog.share.view import edit_diffs

    raw = ev.get("content")
    content: dict[str, Any] = raw if isinstance(raw, dict) else {}
    given = content.get("tool_input", content.get("input"))
    inp: dict[str, Any] = given if isinstance(given, dict) else content
    return [{"path": path, "diff": text[:20_000]} for path, text in edit_diffs(inp, str((ev.get("paths") or ["?"])[0]))]


# -- failures, search, usage, integrity ---------------------------------------------------------


def failures(engine: Engine, root: str, *, page: int = 0, project: str | None = None) -> dict[str, Any]:
    """A page of failed tool calls (command or target, first error line or summary, class, the
    retry that fixed it) and, on the first page, the failures that recur."""
    from agentlog.api import failed_calls, failure_groups

    ids = _project_ids(engine, project)
    got = failed_calls(engine, root, limit=PAGE, offset=page * PAGE, project_ids=ids)
    groups = failure_groups(engine, root, project_ids=ids) if page == 0 else []
    return {"failures": got["failures"], "groups": groups, "page": page, "more": got["more"], "project": project}


def semantic_available() -> bool:
    """Whether searches by meaning can run (the ``semantic`` extra is installed)."""
    from agentlog.search.semantic import available

    return available()


def search_events(root: str, engine: Engine, text: str, *, page: int = 0, filters: dict[str, list[str]] | None = None,
                  outcome: str | None = None, mode: str | None = None, similar: str | None = None) -> dict[str, Any]:
    """A page of hits (``search.service``: ``mode`` lexical, semantic or hybrid, the library's
    default when None; ``similar``, an event's or attempt's id), each with its session, attempt
    and outcome."""
    from agentlog.search.service import search

    res = search(root, text, limit=PAGE, offset=page * PAGE, engine=engine, filters=filters, outcome=outcome,
                 mode=mode, similar=similar)
    hits = []
    for h in res.hits:
        d = dict(h.__dict__)
        d["parts"] = _marked(h.snippet, h.marks)
        hits.append(d)
    indexing = bool((res.index or {}).get("busy"))  # another process is writing the index: it may be behind
    return {"hits": hits, "page": page, "more": res.more, "query": text, "filters": filters or {}, "outcome": outcome,
            "indexing": indexing, "note": res.note}


def _marked(snippet: str, marks: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """The snippet cut into (text, is a match) pieces, for the page to mark up safely."""
    out: list[tuple[str, bool]] = []
    pos = 0
    for a, b in marks:
        if a > pos:
            out.append((snippet[pos:a], False))
        out.append((snippet[a:b], True))
        pos = b
    if pos < len(snippet):
        out.append((snippet[pos:], False))
    return out


def usage(engine: Engine) -> dict[str, Any]:
    """Tokens and cost by day (last 60), by model and by project: one pass over the usage rows
    (grouping sets), not one per breakdown."""
    keys = {"day": "strftime(observed_at, '%Y-%m-%d')", "model": "coalesce(model, '?')",
            "project": "coalesce(project_name, '?')"}
    rows = _rows(engine, f"SELECT {', '.join(f'{v} AS {k}' for k, v in keys.items())}, "
                         "grouping(" + ", ".join(keys.values()) + ") AS g, sum(total_tokens) AS tokens, "
                         "sum(input_tokens) AS input, sum(output_tokens) AS output, "
                         "round(sum(cost_usd), 4) AS cost_usd, count(*) AS responses FROM usage "
                         f"GROUP BY GROUPING SETS (({keys['day']}), ({keys['model']}), ({keys['project']}))",
                 max_rows=1_000_000)
    # grouping() has a bit set for each key not grouped on: day 4, model 2, project 1
    by: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}
    for r in rows:
        name = {3: "day", 5: "model", 6: "project"}[r.pop("g")]
        key = r.pop(name)
        for k in keys:
            r.pop(k, None)
        by[name].append({"key": key, **r})

    def biggest(xs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(xs, key=lambda r: (-(r["cost_usd"] if r["cost_usd"] is not None else -1.0),
                                         -(r["tokens"] or 0), str(r["key"])))[:30]

    days = sorted(by["day"], key=lambda r: str(r["key"]))[-60:]
    return {"days": days, "models": biggest(by["model"]), "projects": biggest(by["project"])}


def sql(engine: Engine, statement: str, *, max_rows: int = 500) -> dict[str, Any]:
    """A read-only SQL statement or a statement of the query language; the first ``max_rows`` rows."""
    from agentlog.query.ask import ask

    answer = ask(engine, statement, max_rows=max_rows)
    return {"columns": answer.columns, "rows": answer.cells(), "truncated": answer.truncated}


def integrity(root: str, *, everything: bool = False) -> dict[str, Any]:
    """The last verification of each log (``agentlog verify`` or "verify now").

    The logs of ``agentlog install``'s capture tests are left out unless broken
    or ``everything`` is asked for; ``capture_tests_hidden`` counts them."""
    from agentlog.log.layout import is_capture_test, iter_logs, split_log_path
    from agentlog.operations.verify import load, load_trust

    known = load(root)
    rows = []
    hidden = 0
    for path in iter_logs(root):
        provider, key = split_log_path(path)
        rec = known.get(f"{provider}/{key}")
        status = rec["status"] if rec else "not verified"
        if not everything and status != "broken" and is_capture_test(path):
            hidden += 1
            continue
        rows.append({"log": f"{provider}/{key}", "status": status,
                     "frames": rec["frames"] if rec else None, "purged": rec["purged"] if rec else None,
                     "verified_at": _iso_us(rec["verified_at"]) if rec else None,
                     "breaks": rec["breaks"] if rec else []})
    rows.sort(key=lambda r: (r["status"] != "broken", r["status"] == "intact", r["log"]))
    trust = load_trust(root)
    if trust is not None:
        trust["verified_at"] = _iso_us(trust.get("verified_at") or 0)
    from agentlog.capture.server import status as hook_server

    from dataclasses import asdict

    from agentlog.log.pulled import byte_checks

    # a vault pull's data root: every frame the pull found wrong, sessions or not (a chain whose
    # first batch failed has no frame here, hence no session)
    pulled = [asdict(b) | {"log": f"{b.provider}/{b.key}"} for b in byte_checks(root)[:500]]
    return {"logs": rows, "broken": sum(r["status"] == "broken" for r in rows),
            "unverified": sum(r["status"] == "not verified" for r in rows), "capture_tests_hidden": hidden,
            "trust": trust, "hook_server": hook_server(root), "byte_checks": pulled}


def verify_now(root: str, *, everything: bool = False) -> dict[str, Any]:
    from agentlog.log.layout import iter_logs
    from agentlog.log.verify import verify_logs
    from agentlog.operations.verify import save, trust

    reports = verify_logs(iter_logs(root), jobs=min(2, os.cpu_count() or 1))
    save(root, reports)
    trust(root)
    return integrity(root, everything=everything)


def _iso_us(us: int) -> str | None:
    from agentlog.core.timefmt import format_us

    return format_us(int(us))


__all__ = ["PAGE", "QueryError", "attempt", "failures", "integrity", "now", "search_events",
           "sql", "timeline", "usage", "verify_now"]
