"""``agentlog search``: ranked hits, each with a highlighted snippet and where it belongs.

Ranking is BM25 over the index (:mod:`.index`), newest first among equals.
The page's events are then read back from the store — their text for the
snippet (the index keeps none), and the session, turn and attempt each
belongs to with that attempt's outcome and what superseded it — so "this
command failed, and this is what replaced it" is in the hit.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from .index import catch_up, connect
from .text import QueryError, parse_query

SNIPPET: Final = 90
"""Characters either side of the first match in a snippet."""


@dataclass
class Hit:
    event_id: str
    observed_at: str | None
    kind: str | None
    tool: str | None
    provider: str | None
    project: str | None
    score: float
    snippet: str
    marks: list[tuple[int, int]]
    """Spans of ``snippet`` that match a query term."""
    session_id: str | None = None
    turn_id: str | None = None
    attempt_id: str | None = None
    attempt_outcome: str | None = None
    superseded_by: str | None = None
    paths: list[str] = field(default_factory=list)


@dataclass
class SearchResult:
    query: str
    hits: list[Hit]
    more: bool
    seconds: float
    index: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _filters_sql(filters: dict[str, list[str]]) -> tuple[list[str], list[Any]]:
    from ..query.timeexpr import TimeError, resolve

    where: list[str] = []
    args: list[Any] = []
    for name, values in filters.items():
        conds: list[str] = []
        for v in values:
            if name == "tool":
                conds.append("lower(d.tool) = lower(?)")
                args.append(v)
            elif name == "kind":
                conds.append("(d.kind = ? OR d.kind LIKE ? || '%')")
                args += [v, {"prompt": "prompt_submitted", "tool": "tool_call"}.get(v, v)]
            elif name == "project":
                conds.append("d.project = ?")
                args.append(v)
            elif name == "provider":
                conds.append("d.provider = ?")
                args.append(v.replace("-", "_"))
            elif name == "session":
                conds.append("(d.session = ? OR d.session LIKE ? || '%')")
                args += [v, v]
            elif name == "path":
                conds.append("EXISTS (SELECT 1 FROM json_each(d.paths) p WHERE p.value GLOB ? OR p.value GLOB ?)")
                args += [v, "*/" + v]
            elif name in ("since", "until"):
                try:
                    us = resolve(v, time.time_ns() // 1000)
                except TimeError as e:
                    raise QueryError(f"{name}: {e}") from None
                conds.append("d.observed_at >= ?" if name == "since" else "d.observed_at < ?")
                args.append(us)
        if conds:
            where.append("(" + " OR ".join(conds) + ")")
    return where, args


def search(root: str, text: str, *, limit: int = 20, offset: int = 0, outcome: str | None = None,
           filters: dict[str, list[str]] | None = None, catch: bool = True, engine: Any = None) -> SearchResult:
    """Hits for ``text`` (the query language of :mod:`.text`); ``filters`` add to its own,
    ``outcome`` (failed|succeeded|superseded) keeps hits whose attempt ended so. ``engine``:
    a query engine to read the hits' text and place with (else one is opened)."""
    started = time.perf_counter()
    q = parse_query(text)
    for k, vs in (filters or {}).items():
        q.filters.setdefault(k, []).extend(vs)
    if catch and engine is None:
        from ..query.engine import QueryError as EngineError, bring_up_to_date

        try:  # the logs into the store and the projection, as every reader does: hits then have their place
            bring_up_to_date(root)
        except EngineError:
            pass
    caught = catch_up(root) if catch else None
    where, args = _filters_sql(q.filters)
    con = connect(root)
    want = limit + 1
    fetch = want * (8 if outcome else 1)
    try:
        if q.match:
            sql = ("SELECT d.event_id, d.observed_at, d.kind, d.tool, d.provider, d.project, d.session, d.paths, "
                   "bm25(fts) AS rank FROM fts JOIN docs d ON d.rowid = fts.rowid WHERE fts MATCH ? "
                   + "".join(f" AND {w}" for w in where) + " ORDER BY rank, d.observed_at DESC LIMIT ? OFFSET ?")
            params: list[Any] = [q.match, *args, fetch, offset]
        else:
            sql = ("SELECT d.event_id, d.observed_at, d.kind, d.tool, d.provider, d.project, d.session, d.paths, 0.0 "
                   "FROM docs d" + (" WHERE " + " AND ".join(where) if where else "")
                   + " ORDER BY d.observed_at DESC LIMIT ? OFFSET ?")
            params = [*args, fetch, offset]
        try:
            rows = con.execute(sql, params).fetchall()
        except Exception as e:  # an FTS5 error on a query we built is a bug; say what it was
            raise QueryError(f"the index refused the query: {e}") from None
    finally:
        con.close()
    if engine is not None or not rows:
        hits = _hydrate(root, rows, q.terms, engine)
    else:
        from ..query.engine import Engine

        with Engine(root) as fresh:
            hits = _hydrate(root, rows, q.terms, fresh)
    if outcome:
        hits = [h for h in hits if h.attempt_outcome == outcome]
    more = len(hits) > limit
    return SearchResult(text, hits[:limit], more, round(time.perf_counter() - started, 4), caught)


def _hydrate(root: str, rows: list[tuple[Any, ...]], terms: list[str], engine: Any = None) -> list[Hit]:
    if not rows:
        return []
    from ..project.ids import derive, display
    from ..query.engine import Engine, QueryError as EngineError
    from ..query.views import iso

    ids = [r[0] for r in rows]
    marks = ", ".join("?" for _ in ids)
    found: dict[str, dict[str, Any]] = {}
    try:
        with contextlib.nullcontext(engine) if engine is not None else Engine(root) as eng:
            res = eng.run(
                "SELECT e.event_id, e.text, CAST(e.content AS VARCHAR) AS content, c.session_id, c.turn_id, "
                "c.attempt_id, a.outcome, a.superseded_by, t.turn_id AS prompt_turn, t.session_id AS prompt_session "
                "FROM events e LEFT JOIN tool_calls c ON e.event_id IN (c.start_event_id, c.end_event_id) "
                "LEFT JOIN attempts a ON a.attempt_id = c.attempt_id "
                f"LEFT JOIN turns t ON t.prompt_event_id = e.event_id WHERE e.event_id IN ({marks})", ids,
                max_rows=len(ids) * 4)
            for r in res.rows:
                found.setdefault(str(r[0]), dict(zip(res.columns, r)))
    except EngineError:
        pass  # no projection yet: hits without their place
    out = []
    for event_id, observed, kind, tool, provider, project, session, paths, rank in rows:
        f = found.get(event_id, {})
        snippet, spans = _snippet(f.get("text"), f.get("content"), terms)
        sid = f.get("session_id") or f.get("prompt_session") or (derive("session", provider, session or "unknown")
                                                                if provider else None)
        turn = f.get("turn_id") or f.get("prompt_turn")
        out.append(Hit(
            event_id=event_id, observed_at=iso(int(observed)), kind=kind, tool=tool, provider=provider,
            project=project, score=round(-float(rank), 4), snippet=snippet, marks=spans,
            session_id=display("session", sid) if sid else None, turn_id=display("turn", turn) if turn else None,
            attempt_id=display("attempt", f["attempt_id"]) if f.get("attempt_id") else None,
            attempt_outcome=f.get("outcome"),
            superseded_by=display("attempt", f["superseded_by"]) if f.get("superseded_by") else None,
            paths=json.loads(paths) if paths else []))
    return out


def _snippet(text: str | None, content: str | None, terms: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """A window of the event's text around the first term, and where the terms are in it."""
    source = " ".join(s for s in (text, _content_text(content)) if s)
    source = re.sub(r"\s+", " ", source)
    if not source:
        return "", []
    pattern = re.compile("|".join(re.escape(t) for t in sorted(set(terms), key=len, reverse=True)), re.I) \
        if terms else None
    first = pattern.search(source) if pattern else None
    start = max(0, (first.start() if first else 0) - SNIPPET)
    end = min(len(source), (first.end() if first else 0) + SNIPPET)
    window = ("…" if start else "") + source[start:end] + ("…" if end < len(source) else "")
    spans = [(m.start(), m.end()) for m in pattern.finditer(window)] if pattern else []
    return window, spans


def _content_text(content: str | None) -> str:
    if not content:
        return ""
    try:
        value = json.loads(content)
    except ValueError:
        return content
    from .text import strings_of

    out: list[str] = []
    strings_of(value, out, [20_000])
    return " ".join(out)


__all__ = ["Hit", "QueryError", "SearchResult", "search"]
