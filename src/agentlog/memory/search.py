"""``agentlog memory search``: free text and operators.

The free text is the query language of event search (:mod:`agentlog.search.text`,
the same code-aware tokenisation): words (all must match), ``"exact phrases"``,
``-excluded``, ``a OR b``, a ``prefix*``; it runs on the memory's tantivy index
(:mod:`.text_index`), caught up with the read model first, and nothing typed is
engine syntax. The operators:

==========================  ===================================================
``kind:pitfall``            of that kind
``tag:ci``                  with that tag
``is:stale``                effective confidence under its kind's threshold
``is:archived``             archived (archived memories are left out otherwise)
``is:pinned``               pinned
``confidence>0.5``          effective confidence compared (``>``, ``>=``, ``<``, ``<=``)
``updated:>2026-01-01``     last change compared to a date or time (``:2026-01-01`` that day)
``has:evidence``            with any evidence (``has:links`` any link)
``evidence:att_3fecf63b``   with that evidence value, or recorded evidence whose id starts so
``linked:SLUG``             linked to or from that memory
``status:active``           any attribute of any kind equal to the value
``rule:"ruff format"``      an operator's value quoted, to hold spaces
==========================  ===================================================

A word with a colon whose name is none of these (``http://…``, ``tool:x``) is text.
Matches are ranked by BM25 times effective confidence (by effective confidence
alone with no text), and only the returned page is read whole.
"""

from __future__ import annotations

import functools
import re
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final

from agentlog.memory.model import SCHEMAS, InvalidMemory

ATTRIBUTE_NAMES: Final = frozenset(a.name for schema in SCHEMAS.values() for a in schema)
_TOKEN: Final = re.compile(r'(-?(?:\w+:)?"[^"]*"?)|(\S+)')
_COMPARE: Final = re.compile(r"^confidence(>=|<=|>|<)([0-9]*\.?[0-9]+)$")


@dataclass
class Query:
    """A parsed query: its free text (words, phrases and exclusions as typed, for
    :func:`agentlog.search.text.parse_query`), SQL conditions (with their parameters), and
    the conditions only Python can check (on effective confidence)."""

    text: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)
    stale: bool | None = None
    confidence: list[tuple[str, float]] = field(default_factory=list)
    archived: bool = False
    narrow: list[tuple[str, str, bool]] = field(default_factory=list)
    """The operators the text index can also answer (:func:`.text_index.matches`); see :meth:`index_narrowing`."""

    def index_narrowing(self) -> list[tuple[str, str, bool]]:
        """What the text index narrows its matches by: :attr:`narrow`, and archived memories
        left out unless ``is:archived`` asks for them (as the read model's conditions do)."""
        return self.narrow + ([] if self.archived else [("flag", "archived", False)])

    def free_text(self) -> Any:
        """The free text parsed as event search parses it (None when there is none)."""
        from agentlog.search.text import MAX_QUERY, Query as TextQuery, SearchSyntaxError, parse_query

        joined = " ".join(self.text)[:MAX_QUERY]  # as before event search refused longer queries
        if not joined.strip():
            return None
        try:
            return parse_query(joined)
        except SearchSyntaxError:  # only exclusions (beside operators): every memory but those
            bare = " ".join(w[1:] for w in self.text if w.startswith("-") and len(w) > 1)
            try:
                excluded = [t for alts in parse_query(bare).clauses for t in alts] if bare else []
            except SearchSyntaxError:
                excluded = []
            if excluded or any(w.startswith("-") for w in self.text):
                return TextQuery(excluded=excluded) if excluded else None  # (excluding nothing: every memory)
            # text typed, but no word in it (``"``, ``*``): it matches nothing, not everything (a
            # clause with no term to look for, which :func:`.text_index.engine_query` reads so)
            return TextQuery(clauses=[[]])


def _time_us(text: str) -> tuple[int, int]:
    """[start, end) of a date (that day) or a time (that instant), µs UTC."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            d = datetime.fromisoformat(text).replace(tzinfo=timezone.utc)
            start = int(d.timestamp() * 1_000_000)
            return start, start + 86_400_000_000
        d = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if d.tzinfo is None:
            d = d.replace(tzinfo=timezone.utc)
        us = int(d.timestamp() * 1_000_000)
        return us, us + 1
    except ValueError:
        raise InvalidMemory(f"updated: needs a date or an ISO time, not {text!r}") from None


def _evidence_condition(q: Query, value: str) -> None:
    """``evidence:VALUE``: evidence whose value is VALUE; and, when VALUE is an id as the other
    commands take it (a display prefix such as ``att_`` or none, at least 4 hex digits), recorded
    evidence whose id starts with it (of that prefix's type): ``evidence:att_3fecf63b``."""
    from agentlog.projection.ids import split_display

    typed, bare = split_display(value)
    hexpart = bare.replace("-", "")
    exact = "EXISTS (SELECT 1 FROM evidence WHERE memory_id = memories.id AND value IN (?, ?))"
    if not (4 <= len(hexpart) <= 32 and all(c in "0123456789abcdef" for c in hexpart)):
        q.where.append(exact)
        q.args += [value, bare if typed else value]
        return
    lo = "".join(("-" if i in (8, 12, 16, 20) else "") + c for i, c in enumerate(hexpart))  # the stored form's hyphens
    q.where.append("EXISTS (SELECT 1 FROM evidence WHERE memory_id = memories.id AND (value = ? OR "
                   "(value >= ? AND value < ? AND type IN ('event', 'attempt', 'session', 'tool_call')"
                   + (" AND type = ?" if typed else "") + ")))")
    q.args += [value, lo, lo + "g", *([typed] if typed else [])]  # (every id character sorts before 'g')


def _operator(q: Query, name: str, value: str) -> bool:
    """``name:value`` added to ``q`` when ``name`` is an operator (or an attribute); False when it is text."""
    low = value.lower()
    if name == "kind":
        q.where.append("kind = ?")
        q.args.append(low)
        q.narrow.append(("kind", low, True))
    elif name == "tag":
        q.where.append("EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ?)")
        q.args.append(low)
        q.narrow.append(("tag", low, True))
    elif name == "is" and low in ("stale", "archived", "pinned"):
        if low == "stale":
            q.stale = True
        elif low == "archived":
            q.archived = True
            q.where.append("archived = 1")
            q.narrow.append(("flag", "archived", True))
        else:
            q.where.append("pinned = 1")
            q.narrow.append(("flag", "pinned", True))
    elif name == "has" and low in ("evidence", "links"):
        table, col = ("evidence", "memory_id") if low == "evidence" else ("links", "source")
        q.where.append(f"EXISTS (SELECT 1 FROM {table} WHERE {col} = memories.id)")
    elif name == "evidence":
        _evidence_condition(q, value)
    elif name == "linked":
        q.where.append("EXISTS (SELECT 1 FROM links l JOIN memories o ON o.id IN (l.source, l.target) "
                       "WHERE memories.id IN (l.source, l.target) AND o.id != memories.id "
                       "AND (o.slug = ? OR o.id = ?))")
        q.args += [value, value]
    elif name == "updated":
        op = re.match(r"^(>=|<=|>|<)?(.*)$", value)
        assert op is not None
        start, end = _time_us(op.group(2))
        sql = {">": ("updated_at >= ?", end), ">=": ("updated_at >= ?", start), "<": ("updated_at < ?", start),
               "<=": ("updated_at < ?", end)}.get(op.group(1) or "")
        if sql is None:
            q.where.append("updated_at >= ? AND updated_at < ?")
            q.args += [start, end]
        else:
            q.where.append(sql[0])
            q.args.append(sql[1])
    elif name in ATTRIBUTE_NAMES:
        # a scalar attribute equal to the value, or a list attribute holding it
        q.where.append("EXISTS (SELECT 1 FROM json_each(memories.attributes, '$.' || ?) WHERE value = ?)")
        q.args += [name, value]
    else:
        return False
    return True


_QUOTED_OPERATOR: Final = re.compile(r'^(\w+):"([^"]*)"?$')


def parse(text: str) -> Query:
    """``text`` as free text and operators. An operator's value may be quoted to hold spaces
    (``rule:"ruff format"``, ``tag:"needs review"``); a quoted phrase after a name that is
    no operator is a phrase of the free text."""
    from agentlog.search.text import FILTERS

    q = Query()
    for m in _TOKEN.finditer(text):
        if m.group(1) is not None:  # a phrase: an operator's quoted value, or text (excluded, or after a name)
            quoted = _QUOTED_OPERATOR.match(m.group(1))
            if quoted and quoted.group(2).strip() and _operator(q, quoted.group(1).lower(), quoted.group(2).strip()):
                continue
            q.text.append(m.group(1))
            continue
        word = m.group(2)
        low = word.lower()
        cmp = _COMPARE.match(low)
        if cmp:
            q.confidence.append((cmp.group(1), float(cmp.group(2))))
            continue
        name, sep, value = word.partition(":")
        name = name.lower()
        if sep and value and _operator(q, name, value):
            continue
        if sep and name.lstrip("-") in FILTERS:  # an event filter's name is text here: its words, in order
            word = ("-" if name.startswith("-") else "") + '"' + word.lstrip("-").replace('"', " ") + '"'
        q.text.append(word)
    return q


def _effective_sql(con: sqlite3.Connection) -> tuple[str, str]:
    """SQL for a memory's effective confidence at the time bound as ``:now`` and for its kind's
    staleness threshold — :func:`agentlog.memory.confidence.effective` in SQL (the same
    operations in the same order), so ranking 1,000 matches costs no Python call per row.
    The text is the same at every call (the time is a parameter): SQLite's statement cache
    keeps the statement prepared."""
    import math

    try:
        con.execute("SELECT pow(2.0, 1.0)")
    except sqlite3.OperationalError:  # an SQLite built without its math functions
        con.create_function("pow", 2, math.pow, deterministic=True)
    return _effective_text()


@functools.cache
def _effective_text() -> tuple[str, str]:
    from agentlog.memory import confidence as conf

    half_life = "CASE memories.kind " + " ".join(f"WHEN '{k}' THEN {hl!r}" for k, (hl, _) in sorted(conf.DECAY.items())) \
        + " END"
    threshold = "CASE memories.kind " + " ".join(f"WHEN '{k}' THEN {th!r}" for k, (_, th) in sorted(conf.DECAY.items())) \
        + " ELSE 0.0 END"
    anchor = "coalesce(memories.last_confirmed_at, memories.created_at)"
    effective = (f"coalesce(memories.confidence * pow(2.0, -max((:now - {anchor}) / {float(conf.US_PER_DAY)!r}, "
                 f"0.0) / {half_life}), memories.confidence)")
    return effective, threshold


def run(con: sqlite3.Connection, text: str, *, limit: int = 20, offset: int = 0,
        now_us: int | None = None, root: str | None = None, mode: str | None = None) -> list[tuple[Any, float]]:
    """The page of memories matching ``text``: (memory, score), best first. The free text is
    matched by the text index of ``root`` (caught up with ``con`` first) and, in ``semantic`` or
    ``hybrid`` mode (the default with the ``semantic`` extra), by meaning (:mod:`.meaning`);
    ranking and the confidence conditions are computed in SQL; only the page's rows are read whole."""
    from agentlog.memory import meaning
    from agentlog.memory.rows import COLUMNS as _COLUMNS, memory_from_row as _row

    mode = mode or meaning.default_mode()
    if mode not in meaning.MODES:
        raise InvalidMemory(f"mode {mode!r}: expected one of {', '.join(meaning.MODES)}")
    if mode != "lexical":
        from agentlog.search import semantic

        semantic.require()

    q = parse(text)
    now = now_us if now_us is not None else time.time_ns() // 1000
    effective, threshold = _effective_sql(con)
    where = ["memories.deleted = 0", *q.where] + ([] if q.archived else ["memories.archived = 0"])
    args: dict[str, Any] = {"now": now, "limit": limit, "offset": offset}
    pending = list(q.args)

    def bind(value: Any) -> str:
        name = f"p{len(args)}"
        args[name] = value
        return ":" + name

    for i, cond in enumerate(where):  # the operators' ``?`` as named parameters, in order
        while "?" in cond:
            cond = cond.replace("?", bind(pending.pop(0)), 1)
        where[i] = cond
    if q.stale is not None:
        where.append(f"({effective} < {threshold}) = {bind(int(q.stale))}")
    for op, v in q.confidence:
        where.append(f"{effective} {op} {bind(v)}")
    free = q.free_text()
    if free is not None:
        import orjson

        from agentlog.memory import text_index

        if root is None:
            raise ValueError("a free-text memory search needs the data root (its text index)")
        found = text_index.matches(root, con, free, q.index_narrowing())  # (kind, tag and flags too)
        found = meaning.blended(root, con, free, " ".join(q.text), found, mode, q.index_narrowing())
        if not found:
            return []
        # the matches as one JSON object {row: relevance}, bound as a parameter
        source = "json_each(:hits) AS hit CROSS JOIN memories ON memories.rowid = CAST(hit.key AS INTEGER)"  # (hits first)
        args["hits"] = orjson.dumps(found, option=orjson.OPT_NON_STR_KEYS).decode()
        relevance = "hit.value"
    else:
        source, relevance = "memories", "1.0"
    cols = ", ".join(f"memories.{c}" for c in _COLUMNS)
    # ranked on the row ids alone (the sorter carries three values per match, not every column),
    # then the page's rows read whole
    page = (f"SELECT memories.rowid AS r, {relevance} * max({effective}, 0.01) AS score, memories.updated_at AS u, "
            f"memories.id AS i FROM {source} WHERE {' AND '.join(where)} ORDER BY score DESC, u DESC, i "
            f"LIMIT :limit OFFSET :offset")
    sql = (f"SELECT {cols}, page.score FROM ({page}) AS page JOIN memories ON memories.rowid = page.r "
           f"ORDER BY page.score DESC, page.u DESC, page.i")
    rows = con.execute(sql, args).fetchall()
    return [(_row(r[:-1], now), float(r[-1])) for r in rows]
