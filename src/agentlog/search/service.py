"""``agentlog search``: ranked hits, each with a highlighted snippet and where it belongs.

Ranking is BM25 over the index (:mod:`.index`, tantivy), newest first among equals.
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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from agentlog.search.engine_query import Checker, engine_query
from agentlog.search.index import catch_up
from agentlog.search.text import Query, SearchSyntaxError, parse_query

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
    note: str | None = None
    """What the hits may lack, when they may lack something (the outcome filter's bound was hit)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


TIE_WINDOW: Final = 1000
"""When equally ranked hits run past a page's end, this many are read to put the newest first."""



CHECKED_MAX: Final = 256
"""Candidates of a query with phrases whose text is read and checked, at most (the best ranked
first): a phrase of common words found only in events ranked below them is not found."""


def _checked(root: str, searcher: Any, query: Any, ranked: bool, n: int, offset: int, check: Checker,
             frames: dict[tuple[str, int], dict[str, Any]]) -> list[tuple[float, Any]]:
    """The ``n`` best candidates after ``offset`` that pass ``check`` on their text, read from
    their frames (kept in ``frames`` for the snippets), up to :data:`CHECKED_MAX` candidates."""
    from agentlog.search.text import plain

    passed: list[tuple[float, Any]] = []
    # one search for every candidate that may be checked (tantivy's cost is in matching, about
    # the same for 32 best or 256), read and checked best first until the page is full
    for score, addr in _top(searcher, query, ranked, max(CHECKED_MAX, 2 * (offset + n)), 0):
        d = searcher.doc(addr)
        log, at = d.get_first("log"), d.get_first("offset")
        frame = frames.get((log, at))
        if frame is None:
            frame = frames[(log, at)] = _frame_text(root, log, at)
        if not frame:
            continue
        if check(plain(frame.get("text"), frame.get("value"), frame["paths"], frame["tool"])):
            passed.append((score, addr))
            if len(passed) >= offset + n:
                break
    return passed[offset:offset + n]


def _top(searcher: Any, query: Any, ranked: bool, n: int, offset: int) -> list[tuple[float, Any]]:
    """The ``n`` best hits after ``offset``: by BM25, newest first among equals (by time alone
    when the query only filters)."""
    import tantivy

    if not ranked:
        return [(0.0, a) for _, a in searcher.search(query, n, count=False, order_by_field="t",
                                                     order=tantivy.Order.Desc, offset=offset).hits]
    end = offset + n
    # equally ranked hits are put newest first: read enough that a run of equals past the page's
    # end is whole (up to TIE_WINDOW), in one search (matching, not the page's size, is its cost)
    hits = searcher.search(query, max(4 * end, TIE_WINDOW), count=False).hits
    times = searcher.fast_field_values("t", [a for _, a in hits])
    ordered = sorted(zip(hits, times), key=lambda x: (-x[0][0], -(x[1] or 0)))
    return [h for h, _ in ordered[offset:end]]


OUTCOME_WINDOW: Final = 8
"""With an outcome filter, the first window of ranked candidates placed is this many times the
hits wanted; each next window is four times the last."""
OUTCOME_MAX: Final = 10_000
"""Ranked candidates placed, at most, to fill a page of hits of one outcome: past it the result
says so (:attr:`SearchResult.note`)."""


def search(root: str, text: str, *, limit: int = 20, offset: int = 0, outcome: str | None = None,
           filters: dict[str, list[str]] | None = None, catch: bool = True, engine: Any = None,
           mode: str | None = None, similar: str | None = None) -> SearchResult:
    """Hits for ``text`` (the query language of :mod:`.text`); ``filters`` add to its own,
    ``outcome`` (failed|succeeded|superseded) keeps hits whose attempt ended so. ``engine``:
    a query engine to read the hits' text and place with (else one is opened). ``mode``:
    lexical, semantic or hybrid (:mod:`.hybrid`); the default is hybrid with the ``semantic``
    extra installed, else lexical;
    ``similar``: an event's or attempt's id — the events nearest its meaning (``text`` may then
    hold only filters, or nothing)."""
    from agentlog.search import hybrid, semantic

    started = time.perf_counter()
    mode = mode or ("hybrid" if semantic.available() else "lexical")
    if mode not in hybrid.MODES:
        raise SearchSyntaxError(f"mode {mode!r}: expected one of {', '.join(hybrid.MODES)}")
    if mode != "lexical" or similar:
        semantic.require()
    q = parse_query(text) if text.strip() or not similar else Query()
    for k, vs in (filters or {}).items():
        q.filters.setdefault(k, []).extend(vs)
    if catch and engine is None:
        from agentlog.projection.current import bring_up_to_date
        from agentlog.query.engine import QueryError as EngineError

        try:  # the logs into the store and the projection, as every reader does: hits then have their place
            bring_up_to_date(root)
        except EngineError:
            pass
    caught = catch_up(root) if catch else None
    with contextlib.ExitStack() as stack:
        opened: list[Any] = [engine]

        def eng() -> Any:  # the query engine, opened when first needed
            if opened[0] is None:
                from agentlog.query.engine import Engine

                opened[0] = stack.enter_context(Engine(root))
            return opened[0]

        hits, more, note = _search(root, q, limit, offset, outcome, eng, mode, similar, text)
    return SearchResult(text, hits, more, round(time.perf_counter() - started, 4), caught, note)


Row = tuple[Any, ...]
"""A candidate hit as read from its frame: event id, time, kind, tool, provider, project, provider
session, paths (JSON), -score, log, offset."""


def _search(root: str, q: Query, limit: int, offset: int, outcome: str | None, eng: Callable[[], Any],
            mode: str = "lexical", similar: str | None = None,
            text: str = "") -> tuple[list[Hit], bool, str | None]:
    """The page of hits, whether there are more, and a note when the outcome filter's bound was hit."""
    frames: dict[tuple[str, int], dict[str, Any]] = {}
    searcher = _searcher(root)
    if searcher is None:
        return [], False, None
    sessions = _sessions(eng, q.filters.get("session", []))
    machines = _machine_logs(root, q.filters.get("machine", []))
    query, ranked, check = engine_query(q, sessions, machines)

    def lexical(n: int, skip: int) -> list[tuple[float, Any]]:
        try:
            return (_top(searcher, query, ranked, n, skip) if check is None
                    else _checked(root, searcher, query, ranked, n, skip, check, frames))
        except BaseException as e:  # tantivy refusing a query we built is a bug; say what it was
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise SearchSyntaxError(f"the index refused the query: {e}") from None

    from agentlog.search.hybrid import some_words

    loose = some_words(q, searcher, lambda part: engine_query(part, sessions, machines)[0]) \
        if mode == "hybrid" and not similar else None

    def some_of_the_words(n: int, skip: int) -> list[tuple[float, Any]]:
        """Hybrid's lexical side: the events holding every word, then those holding two or more."""
        every = lexical(n + skip, 0)
        seen = {(a.segment_ord, a.doc) for _, a in every}
        more = [(s, a) for s, a in _top(searcher, loose, True, n + skip, 0) if (a.segment_ord, a.doc) not in seen]
        return (every + more)[skip:skip + n]

    fusion = some_of_the_words if loose is not None else lexical
    candidates = _blend(root, searcher, q, text, mode, similar, eng, lexical, sessions, machines, fusion)
    if candidates is None:
        return [], False, f"{similar} has no vector: nothing was embedded for it (no text, or not a kind embedded)"
    if not outcome:
        rows = _rows(root, searcher, candidates(limit + 1, offset), frames)
        hits = _hits(root, rows, _place(root, rows, eng) if rows else {}, q.terms, frames)
        return hits[:limit], len(hits) > limit, None
    # the outcome is known only once a hit is placed: place the ranked candidates in growing
    # windows until the page is full or there are no more (or OUTCOME_MAX were placed)
    need = offset + limit + 1
    window = min(need * OUTCOME_WINDOW, OUTCOME_MAX)
    seen: dict[tuple[int, int], Row | None] = {}
    places: dict[str, dict[str, Any]] = {}
    while True:
        top = candidates(window, 0)
        fresh = [(s, a) for s, a in top if (a.segment_ord, a.doc) not in seen]
        for (_, a), row in zip(fresh, _rows(root, searcher, fresh, frames, keep_missing=True)):
            seen[(a.segment_ord, a.doc)] = row
        new_rows = [r for r in (seen[(a.segment_ord, a.doc)] for _, a in fresh) if r is not None]
        places.update(_place(root, new_rows, eng) if new_rows else {})
        matched = [r for r in (seen[(a.segment_ord, a.doc)] for _, a in top)
                   if r is not None and places.get(r[0], {}).get("outcome") == outcome]
        if len(matched) >= need or len(top) < window:
            note = None
            break
        if window >= OUTCOME_MAX:
            note = (f"outcome {outcome}: only the best {len(top):,} hits were placed (at most {OUTCOME_MAX:,}); "
                    "more may match further down — narrow the query (a word, tool:, since:)")
            break
        window = min(window * 4, OUTCOME_MAX)
    page = matched[offset:offset + limit + 1]
    hits = _hits(root, page, places, q.terms, frames)
    return hits[:limit], len(hits) > limit, note


def _blend(root: str, searcher: Any, q: Query, text: str, mode: str, similar: str | None, eng: Callable[[], Any],
           lexical: Callable[[int, int], list[tuple[float, Any]]], sessions: dict[str, list[tuple[str, str]]],
           machines: dict[str, list[str]],
           fusion: Callable[[int, int], list[tuple[float, Any]]]) -> Callable[[int, int], list[tuple[float, Any]]] | None:
    """The candidates of this mode: lexical, the nearest vectors, or both fused (:mod:`.hybrid`:
    ``fusion`` is the lexical side of a blend, :func:`.hybrid.some_words`); None when ``similar``
    names something with no vector."""
    from agentlog.search import hybrid, semantic

    if similar:
        keys = hybrid.similar_keys(root, eng(), similar)
        vector = hybrid.similar_vector(root, keys)
        if vector is None:
            return None
        return hybrid.semantic_candidates(root, searcher, vector, _filter_query(q, sessions, machines),
                                          frozenset(keys))
    wanted = hybrid.semantic_text(text)
    if mode == "lexical" or not wanted or not q.clauses or (mode == "hybrid" and hybrid.exact(q)):
        return lexical
    if not semantic.count(root):  # nothing embedded: the model is not even loaded
        return lexical if mode == "hybrid" else (lambda n, skip: [])
    near = hybrid.semantic_candidates(root, searcher, semantic.embed([wanted])[0],
                                      _filter_query(q, sessions, machines), floor=hybrid.floor(root))
    return near if mode == "semantic" else hybrid.fused(fusion, near)


def _filter_query(q: Query, sessions: dict[str, list[tuple[str, str]]], machines: dict[str, list[str]]) -> Any:
    """The query's filters and exclusions alone, as a tantivy query over events (what semantic
    candidates must match)."""
    import tantivy

    if not q.filters and not q.excluded:
        return tantivy.Query.exists_query("t")
    return engine_query(Query(clauses=[], excluded=list(q.excluded), filters=dict(q.filters), terms=[]), sessions,
                         machines)[0]


def _machine_logs(root: str, values: list[str]) -> dict[str, list[str]]:
    """Per ``machine:`` value, the logs (``provider/key``) of this data root that a vault pull
    brought from the machine it names: its id or host name, or a prefix of either."""
    if not values:
        return {}
    from agentlog.log.pulled import pulled_logs

    logs = pulled_logs(root)
    return {v: [f"{p.provider}/{p.key}" for p in logs if p.machine_id.startswith(v) or p.host.startswith(v)]
            for v in values}


def _rows(root: str, searcher: Any, top: list[tuple[float, Any]], frames: dict[tuple[str, int], dict[str, Any]],
          keep_missing: bool = False) -> list[Any]:
    """Each candidate's :data:`Row`, read from its frame (a frame purged or gone: left out, or
    None in its place with ``keep_missing``)."""
    out: list[Any] = []
    times = searcher.fast_field_values("t", [a for _, a in top])
    for (score, addr), us in zip(top, times):
        # the index stores only where the event is: the rest is its frame's (read for the snippet)
        d = searcher.doc(addr)
        log, at = d.get_first("log"), d.get_first("offset")
        frame = frames.get((log, at))
        if frame is None:
            frame = frames[(log, at)] = _frame_text(root, log, at)
        if not frame:  # its frame purged or gone: nothing to show (the index is about to lose it)
            if keep_missing:
                out.append(None)
            continue
        out.append((frame["event_id"], us, frame["kind"], frame["tool"], frame["provider"], frame["project"],
                    frame["session"], json.dumps(frame["paths"]) if frame["paths"] else None, -float(score),
                    log, at))
    return out


def _sessions(eng: Callable[[], Any], values: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Per ``session:`` value, the (provider, provider's session id) of the session it names as
    one of our ids (``ses_…``, bare, or an unambiguous prefix; :func:`..query.views.resolve_id`),
    if it names one. A value is also a prefix of the provider's own session id (the index's)."""
    from agentlog.query.engine import QueryError as EngineError
    from agentlog.query.views import AmbiguousId, IdError, resolve_id

    out: dict[str, list[tuple[str, str]]] = {}
    for v in values:
        out[v] = []
        try:
            ref = resolve_id(eng(), v, ["session"])
            res = eng().run("SELECT provider, provider_session_id FROM sessions WHERE session_id = ?", [ref.id])
        except AmbiguousId as e:
            raise SearchSyntaxError(f"session:{v}: {e}") from None
        except (IdError, EngineError):
            continue  # no session has that id: the provider's session ids are still looked at
        out[v] = [(str(p), str(s)) for p, s in res.rows if p and s]
    return out


_READERS: dict[tuple[str, int], tuple[Any, tuple[int, int, int]]] = {}


def index_stamp(root: str) -> tuple[int, int, int] | None:
    """What changes when the index commits (its ``meta.json``); None without an index."""
    import os

    from agentlog.search.index import index_path

    try:
        st = os.stat(os.path.join(os.path.abspath(index_path(root)), "meta.json"))
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _searcher(root: str) -> Any:
    """A searcher over the index's last commit (None when there is no index); the index is
    kept open per process and thread, and reloaded when a commit changed it."""
    import os
    import threading

    from agentlog.search.index import index_path, open_index

    path = os.path.abspath(index_path(root))
    stamp = index_stamp(root)
    if stamp is None:
        return None
    key = (path, threading.get_ident())
    kept = _READERS.get(key)
    if kept is None:
        idx = open_index(root, create=False)
        if idx is None:
            return None
        idx.reload()
        _READERS[key] = (idx, stamp)
    elif kept[1] != stamp:
        kept[0].reload()
        _READERS[key] = (kept[0], stamp)
    return _READERS[key][0].searcher()


def _place(root: str, rows: list[Row], eng: Callable[[], Any]) -> dict[str, dict[str, Any]]:
    """Per hit's event id, where it belongs: session, turn, attempt, that attempt's outcome and
    what superseded it (from the sidecars, else the views; nothing without a projection)."""
    from agentlog.projection.ids import derive
    from agentlog.query.engine import QueryError as EngineError

    ids = [r[0] for r in rows]
    sessions = sorted({derive("session", r[4], r[6] or "unknown") for r in rows if r[4]})
    found: dict[str, dict[str, Any]] = {i: {} for i in ids}
    if not sessions:
        return found
    try:
        placed = _place_from_parts(root, eng(), rows)
        if placed is None:  # one round trip: each hit's tool call or turn, and its attempt's outcome
            res = eng().run(
                f"WITH c AS (SELECT start_event_id, end_event_id, session_id, turn_id, attempt_id FROM tool_calls "
                f"  WHERE session_id IN ({_marks(sessions)}) AND (start_event_id IN ({_marks(ids)}) "
                f"  OR end_event_id IN ({_marks(ids)}))), "
                f"p AS (SELECT unnest([c.start_event_id, c.end_event_id]) AS event_id, c.session_id, c.turn_id, "
                f"  c.attempt_id FROM c UNION ALL SELECT prompt_event_id, session_id, turn_id, NULL FROM turns "
                f"  WHERE session_id IN ({_marks(sessions)}) AND prompt_event_id IN ({_marks(ids)})) "
                "SELECT p.event_id, p.session_id, p.turn_id, p.attempt_id, a.outcome, a.superseded_by FROM p "
                "LEFT JOIN attempts a ON a.attempt_id = p.attempt_id",
                [*sessions, *ids, *ids, *sessions, *ids], max_rows=max(10_000, 4 * len(ids)))
            placed = [dict(zip(res.columns, r)) for r in res.rows]
    except EngineError:
        return found  # no projection yet: hits without their place
    for place in placed:
        if place["event_id"] in found:
            found[place["event_id"]].update({k: v for k, v in place.items() if k != "event_id"})
    return found


def _hits(root: str, rows: list[Row], found: dict[str, dict[str, Any]], terms: list[str],
          frames: dict[tuple[str, int], dict[str, Any]]) -> list[Hit]:
    """The hits of ``rows``, placed as ``found`` says, each with its snippet (from its frame: the
    index keeps no text)."""
    from agentlog.core.kinds import META_PROVIDER
    from agentlog.projection.ids import derive, display
    from agentlog.query.views import iso

    out = []
    for event_id, observed, kind, tool, provider, project, session, paths, rank, log, at in rows:
        frame = frames.get((log, at))
        frame = frame if frame is not None else _frame_text(root, log, at)
        f = found.get(event_id, {})
        snippet, spans = _snippet(frame.get("text"), frame.get("value"), terms)
        # agentlog's own events (memory, corrections) belong to no agent's session
        sid = f.get("session_id") or (derive("session", provider, session or "unknown")
                                      if provider and provider != META_PROVIDER else None)
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


def _marks(values: list[Any]) -> str:
    """One ``?`` per value, comma-separated."""
    return ", ".join("?" for _ in values)


def _place_from_parts(root: str, eng: Any, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]] | None:
    """Each hit's session, turn, attempt and that attempt's outcome, looked up by its event id in
    the sidecars (:mod:`.places`) of only the projection files that hold the hit's session (the
    projection's index says which). A row counts only from its session's current file and with
    its session's id. None when that cannot be told (no projection, a session not in it, a file
    gone meanwhile): the caller reads the views."""
    from agentlog.projection.ids import derive
    from agentlog.projection.persist import session_files
    from agentlog.search import places

    manifest = getattr(eng, "manifest", None)
    if manifest is None:
        return None
    # per session part (its tool calls' and turns' files): the ids to look up in it, each id's session
    wanted: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    key_of: dict[str, str] = {}  # session id → its key
    parts_of: dict[str, tuple[tuple[str, str], ...]] = {}  # session key → its part's files (asked once)
    for r in rows:
        if not r[4]:
            continue
        key = f"{r[4]}\x1f{r[6] or 'unknown'}"
        sid = derive("session", r[4], r[6] or "unknown")
        key_of[sid] = key
        if key not in parts_of:
            calls = session_files(root, manifest, [key], "tool_calls")
            turns = session_files(root, manifest, [key], "turns_base")
            if calls is None or turns is None:
                return None
            parts_of[key] = tuple([*((f, "tool_calls") for f in calls), *((f, "turns_base") for f in turns)])
        parts = parts_of[key]
        if parts:
            wanted.setdefault(parts, {})[r[0]] = sid
    out: list[dict[str, Any]] = []
    attempts: dict[str, list[dict[str, Any]]] = {}
    try:
        for parts, of in sorted(wanted.items()):
            for row in places.lookup(root, parts, sorted(of)):
                if row["session_id"] != of.get(row["key"]):
                    continue
                place = {"event_id": row["key"], "session_id": row["session_id"], "turn_id": row["turn_id"],
                         "attempt_id": row.get("attempt_id"), "outcome": None, "superseded_by": None}
                out.append(place)
                if place["attempt_id"]:
                    attempts.setdefault(place["attempt_id"], []).append(place)
        overlays: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        overlay_files: dict[str, list[str] | None] = {}  # session id → its overlay files (asked once)
        for attempt, placed in attempts.items():
            sid = placed[0]["session_id"]
            if sid not in overlay_files:
                overlay_files[sid] = session_files(root, manifest, [key_of[sid]], "attempts_overlay")
            files = overlay_files[sid]
            if files is None:
                return None
            for f in files:
                overlays.setdefault(((f, "attempts_overlay"),), {})[attempt] = sid
        for parts, of in sorted(overlays.items()):
            for row in places.lookup(root, parts, sorted(of)):
                if row["session_id"] == of.get(row["key"]):
                    for place in attempts.get(row["key"], []):
                        place.update(outcome=row["outcome"], superseded_by=row["superseded_by"])
    except (FileNotFoundError, OSError):
        return None  # the projection moved on while this was read
    return out


def _frame_text(root: str, log: str, offset: int | None) -> dict[str, Any]:
    """``text`` and ``value`` (its content) of the event at ``offset`` of ``log``, and what a hit
    shows of its head — its id, kind, provider, session, tool, project and paths, as the store's
    columns hold them (a purged or missing frame: nothing)."""
    from agentlog.log.lookup import event_at

    ev = event_at(root, log, offset)
    if ev is None:
        return {}
    content = ev.get("content")
    paths = ev.get("paths")
    return {"text": ev.get("text") if isinstance(ev.get("text"), str) else _prompt_of(content), "value": content,
            "event_id": _str(ev.get("event_id")), "kind": _str(ev.get("kind")), "provider": _str(ev.get("provider")),
            "session": _str(ev.get("provider_session_id")), "tool": _str(_sub(ev, "tool", "name")),
            "project": _str(_sub(ev, "project", "name")),
            "paths": [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _sub(ev: dict[str, Any], name: str, key: str) -> Any:
    part = ev.get(name)
    return part.get(key) if isinstance(part, dict) else None


def _prompt_of(content: Any) -> str | None:
    return content.get("prompt") if isinstance(content, dict) and isinstance(content.get("prompt"), str) else None


def _snippet(text: str | None, content: Any, terms: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """A window of the event's text around the first term, and where the terms are in it."""
    source = re.sub(r"\s+", " ", _distinct_text(text, content))
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


def _distinct_text(text: str | None, content: Any) -> str:
    """The event's text, then the strings inside its content (a JSON value; a hit may lie at the
    end of a long output), each said once: a string already said (a command is the event's text
    and its tool input; a permission request repeats it in its suggestions) is left out, so
    that the snippet shows the match rather than the same command twice."""
    from agentlog.search.text import strings_of

    out: list[str] = []
    if content is not None:
        strings_of(content, out)
    said: list[str] = []
    seen: set[str] = set()
    for piece in ([text] if text else []) + out:
        key = " ".join(piece.split())
        if not key or key in seen or (len(key) <= 4096 and any(key in s for s in said)):
            continue
        seen.add(key)
        said.append(key)
    return " ".join(said)


__all__ = ["Hit", "SearchSyntaxError", "SearchResult", "search"]
