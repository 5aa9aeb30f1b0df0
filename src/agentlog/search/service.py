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
    con = _reader(root)
    want = limit + 1
    fetch = want * (8 if outcome else 1)
    try:
        cols = "d.event_id, d.observed_at, d.kind, d.tool, d.provider, d.project, d.session, d.paths"
        if q.match and not where:
            # FTS5 ranks and cuts the page itself (its rank column, BM25); docs are read for the page only
            sql = (f"SELECT {cols}, f.rank, d.log, d.offset FROM (SELECT rowid, rank FROM fts WHERE fts MATCH ? "
                   "ORDER BY rank LIMIT ? OFFSET ?) f JOIN docs d ON d.rowid = f.rowid ORDER BY f.rank, d.observed_at DESC")
            params: list[Any] = [q.match, fetch, offset]
        elif q.match:
            sql = (f"SELECT {cols}, fts.rank, d.log, d.offset FROM fts JOIN docs d ON d.rowid = fts.rowid "
                   "WHERE fts MATCH ? " + "".join(f" AND {w}" for w in where)
                   + " ORDER BY fts.rank, d.observed_at DESC LIMIT ? OFFSET ?")
            params = [q.match, *args, fetch, offset]
        else:
            sql = ("SELECT d.event_id, d.observed_at, d.kind, d.tool, d.provider, d.project, d.session, d.paths, 0.0, "
                   "d.log, d.offset FROM docs d" + (" WHERE " + " AND ".join(where) if where else "")
                   + " ORDER BY d.observed_at DESC LIMIT ? OFFSET ?")
            params = [*args, fetch, offset]
        try:
            rows = con.execute(sql, params).fetchall()
        except Exception as e:  # an FTS5 error on a query we built is a bug; say what it was
            raise QueryError(f"the index refused the query: {e}") from None
    finally:
        pass
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


_READERS: dict[tuple[str, int], Any] = {}


def _reader(root: str) -> Any:
    """A read connection to the index, kept per process and thread (opening one costs milliseconds)."""
    import os
    import threading

    from .index import db_path

    key = (os.path.abspath(db_path(root)), threading.get_ident())
    con = _READERS.get(key)
    if con is None or not os.path.exists(key[0]):
        con = _READERS[key] = connect(root)
    return con


def _hydrate(root: str, rows: list[tuple[Any, ...]], terms: list[str], engine: Any = None) -> list[Hit]:
    if not rows:
        return []
    from ..project.ids import derive, display
    from ..query.engine import Engine, QueryError as EngineError
    from ..query.views import iso

    ids = [r[0] for r in rows]
    sessions = sorted({derive("session", r[4], r[6] or "unknown") for r in rows if r[4]})
    found: dict[str, dict[str, Any]] = {i: {} for i in ids}

    def q(sql: str, params: list[Any]) -> list[dict[str, Any]]:
        res = eng.run(sql, params, max_rows=10_000)
        return [dict(zip(res.columns, r)) for r in res.rows]

    def marks(values: list[Any]) -> str:
        return ", ".join("?" for _ in values)

    try:
        with contextlib.nullcontext(engine) if engine is not None else Engine(root) as eng:
            if sessions:  # one round trip: each hit's tool call or turn, and its attempt's outcome
                placed = q(
                    f"WITH c AS (SELECT start_event_id, end_event_id, session_id, turn_id, attempt_id FROM tool_calls "
                    f"  WHERE session_id IN ({marks(sessions)}) AND (start_event_id IN ({marks(ids)}) "
                    f"  OR end_event_id IN ({marks(ids)}))), "
                    f"p AS (SELECT unnest([c.start_event_id, c.end_event_id]) AS event_id, c.session_id, c.turn_id, "
                    f"  c.attempt_id FROM c UNION ALL SELECT prompt_event_id, session_id, turn_id, NULL FROM turns "
                    f"  WHERE session_id IN ({marks(sessions)}) AND prompt_event_id IN ({marks(ids)})) "
                    "SELECT p.event_id, p.session_id, p.turn_id, p.attempt_id, a.outcome, a.superseded_by FROM p "
                    "LEFT JOIN attempts a ON a.attempt_id = p.attempt_id",
                    [*sessions, *ids, *ids, *sessions, *ids])
                for place in placed:
                    if place["event_id"] in found:
                        found[place["event_id"]].update({k: v for k, v in place.items() if k != "event_id"})
    except EngineError:
        pass  # no projection yet: hits without their place
    for r in rows:  # the text for the snippet: from the hit's own frame (the index keeps none)
        found[r[0]].update(_frame_text(root, r[9], r[10]))
    out = []
    for event_id, observed, kind, tool, provider, project, session, paths, rank, _log, _offset in rows:
        f = found.get(event_id, {})
        snippet, spans = _snippet(f.get("text"), f.get("content"), terms)
        sid = f.get("session_id") or (derive("session", provider, session or "unknown") if provider else None)
        turn = f.get("turn_id")
        out.append(Hit(
            event_id=event_id, observed_at=iso(int(observed)), kind=kind, tool=tool, provider=provider,
            project=project, score=round(-float(rank), 4), snippet=snippet, marks=spans,
            session_id=display("session", sid) if sid else None, turn_id=display("turn", turn) if turn else None,
            attempt_id=display("attempt", f["attempt_id"]) if f.get("attempt_id") else None,
            attempt_outcome=f.get("outcome"),
            superseded_by=display("attempt", f["superseded_by"]) if f.get("superseded_by") else None,
            paths=json.loads(paths) if paths else []))
    return out


def _frame_text(root: str, log: str, offset: int | None) -> dict[str, Any]:
    """``text`` and ``content`` (as JSON text) of the event at ``offset`` of ``log`` (a purged or
    missing frame: nothing)."""
    import orjson

    from ..log.lookup import event_at

    ev = event_at(root, log, offset)
    if ev is None:
        return {}
    content = ev.get("content")
    return {"text": ev.get("text") if isinstance(ev.get("text"), str) else _prompt_of(content),
            "content": orjson.dumps(content).decode() if content is not None else None}


def _prompt_of(content: Any) -> str | None:
    return content.get("prompt") if isinstance(content, dict) and isinstance(content.get("prompt"), str) else None


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
