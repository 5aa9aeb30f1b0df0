"""``agentlog memory search``: free text and operators.

A query is words and ``"exact phrases"`` (all must match, through FTS5; a
trailing ``*`` is a prefix; FTS syntax in the text cannot change the query)
and operators:

=======================  ===================================================
``kind:pitfall``         of that kind
``tag:ci``               with that tag
``is:stale``             effective confidence under its kind's threshold
``is:archived``          archived (archived memories are left out otherwise)
``is:pinned``            pinned
``confidence>0.5``       effective confidence compared (``>``, ``>=``, ``<``, ``<=``)
``updated:>2026-01-01``  last change compared to a date or time (``:2026-01-01`` that day)
``has:evidence``         with any evidence (``has:links`` any link)
``evidence:att_1234``    with that evidence value (display prefixes accepted)
``linked:SLUG``          linked to or from that memory
``status:active``        any attribute of any kind equal to the value
=======================  ===================================================

A word with a colon whose name is none of these (``http://…``) is text.
Matches are ranked by BM25 times effective confidence (by effective confidence
alone with no text), and only the returned page is read whole.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final

from .model import SCHEMAS, InvalidMemory

ATTRIBUTE_NAMES: Final = frozenset(a.name for schema in SCHEMAS.values() for a in schema)
_TOKEN: Final = re.compile(r'"([^"]*)"?|(\S+)')
_COMPARE: Final = re.compile(r"^confidence(>=|<=|>|<)([0-9]*\.?[0-9]+)$")


@dataclass
class Query:
    """A parsed query: FTS terms and SQL conditions (with their parameters), and the
    conditions only Python can check (on effective confidence)."""

    terms: list[str] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)
    stale: bool | None = None
    confidence: list[tuple[str, float]] = field(default_factory=list)
    archived: bool = False

    def fts(self) -> str:
        return " ".join(self.terms)


def _term(word: str, phrase: bool = False) -> str | None:
    if phrase:
        text = " ".join(re.findall(r"\w+", word, flags=re.UNICODE))
        return f'"{text}"' if text else None
    prefix = word.endswith("*")
    parts = re.findall(r"\w+", word.rstrip("*"), flags=re.UNICODE)
    if not parts:
        return None
    if len(parts) > 1:  # `parse_config.py` → the phrase of its parts
        return '"' + " ".join(parts) + '"' + ("*" if prefix else "")
    return f'"{parts[0]}"' + ("*" if prefix else "")


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


def parse(text: str) -> Query:
    q = Query()
    for m in _TOKEN.finditer(text):
        if m.group(1) is not None:
            t = _term(m.group(1), phrase=True)
            if t:
                q.terms.append(t)
            continue
        word = m.group(2)
        low = word.lower()
        cmp = _COMPARE.match(low)
        if cmp:
            q.confidence.append((cmp.group(1), float(cmp.group(2))))
            continue
        name, sep, value = word.partition(":")
        name = name.lower()
        if sep and value:
            if name == "kind":
                q.where.append("kind = ?")
                q.args.append(value.lower())
                continue
            if name == "tag":
                q.where.append("EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ?)")
                q.args.append(value.lower())
                continue
            if name == "is" and value.lower() in ("stale", "archived", "pinned"):
                v = value.lower()
                if v == "stale":
                    q.stale = True
                elif v == "archived":
                    q.archived = True
                    q.where.append("archived = 1")
                else:
                    q.where.append("pinned = 1")
                continue
            if name == "has" and value.lower() in ("evidence", "links"):
                table, col = ("evidence", "memory_id") if value.lower() == "evidence" else ("links", "source")
                q.where.append(f"EXISTS (SELECT 1 FROM {table} WHERE {col} = memories.id)")
                continue
            if name == "evidence":
                bare = value.split("_", 1)[1] if re.match(r"^[a-z]{2,3}_", value) else value
                q.where.append("EXISTS (SELECT 1 FROM evidence WHERE memory_id = memories.id AND value = ?)")
                q.args.append(bare)
                continue
            if name == "linked":
                q.where.append("EXISTS (SELECT 1 FROM links l JOIN memories o ON o.id IN (l.source, l.target) "
                               "WHERE memories.id IN (l.source, l.target) AND o.id != memories.id "
                               "AND (o.slug = ? OR o.id = ?))")
                q.args += [value, value]
                continue
            if name == "updated":
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
                continue
            if name in ATTRIBUTE_NAMES:
                # a scalar attribute equal to the value, or a list attribute holding it
                q.where.append("EXISTS (SELECT 1 FROM json_each(memories.attributes, '$.' || ?) WHERE value = ?)")
                q.args += [name, value]
                continue
        t = _term(word)
        if t:
            q.terms.append(t)
    return q


def _effective_sql(con: sqlite3.Connection, now_us: int) -> tuple[str, str]:
    """SQL for a memory's effective confidence at ``now_us`` and for its kind's staleness
    threshold — :func:`agentlog.memory.confidence.effective` in SQL (the same
    operations in the same order), so ranking 1,000 matches costs no Python call per row."""
    import math

    from . import confidence as conf

    try:
        con.execute("SELECT pow(2.0, 1.0)")
    except sqlite3.OperationalError:  # an SQLite built without its math functions
        con.create_function("pow", 2, math.pow, deterministic=True)
    half_life = "CASE memories.kind " + " ".join(f"WHEN '{k}' THEN {hl!r}" for k, (hl, _) in sorted(conf.DECAY.items())) \
        + " END"
    threshold = "CASE memories.kind " + " ".join(f"WHEN '{k}' THEN {th!r}" for k, (_, th) in sorted(conf.DECAY.items())) \
        + " ELSE 0.0 END"
    anchor = "coalesce(memories.last_confirmed_at, memories.created_at)"
    effective = (f"coalesce(memories.confidence * pow(2.0, -max(({int(now_us)} - {anchor}) / {float(conf.US_PER_DAY)!r}, "
                 f"0.0) / {half_life}), memories.confidence)")
    return effective, threshold


def run(con: sqlite3.Connection, text: str, *, limit: int = 20, offset: int = 0,
        now_us: int | None = None) -> list[tuple[Any, float]]:
    """The page of memories matching ``text``: (memory, score), best first. Ranking and
    the confidence conditions are computed in SQL; only the page's rows are read whole."""
    from .service import _COLUMNS, _row

    q = parse(text)
    now = now_us if now_us is not None else time.time_ns() // 1000
    effective, threshold = _effective_sql(con, now)
    where = ["memories.deleted = 0", *q.where] + ([] if q.archived else ["memories.archived = 0"])
    args: list[Any] = list(q.args)
    if q.stale is not None:
        where.append(f"({effective} < {threshold}) = ?")
        args.append(int(q.stale))
    for op, v in q.confidence:
        where.append(f"{effective} {op} ?")
        args.append(v)
    cols = ", ".join(f"memories.{c}" for c in _COLUMNS)
    if q.terms:
        source = "memory_fts JOIN memories ON memories.rowid = memory_fts.rowid"
        where.insert(0, "memory_fts MATCH ?")
        args.insert(0, q.fts())
        relevance = "-bm25(memory_fts)"
    else:
        source, relevance = "memories", "1.0"
    # ranked on the row ids alone (the sorter carries three values per match, not every column),
    # then the page's rows read whole
    page = (f"SELECT memories.rowid AS r, {relevance} * max({effective}, 0.01) AS score, memories.updated_at AS u, "
            f"memories.id AS i FROM {source} WHERE {' AND '.join(where)} ORDER BY score DESC, u DESC, i LIMIT ? OFFSET ?")
    sql = (f"SELECT {cols}, page.score FROM ({page}) AS page JOIN memories ON memories.rowid = page.r "
           f"ORDER BY page.score DESC, page.u DESC, page.i")
    rows = con.execute(sql, [*args, limit, offset]).fetchall()
    return [(_row(r[:-1], now), float(r[-1])) for r in rows]
