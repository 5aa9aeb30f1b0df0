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


_OPS: Final = {">": float.__gt__, ">=": float.__ge__, "<": float.__lt__, "<=": float.__le__}


def run(con: sqlite3.Connection, text: str, *, limit: int = 20, offset: int = 0,
        now_us: int | None = None) -> list[tuple[Any, float]]:
    """The page of memories matching ``text``: (memory, score), best first."""
    from .service import _COLUMNS, _row

    q = parse(text)
    now = now_us if now_us is not None else time.time_ns() // 1000
    where = ["deleted = 0", *q.where] + ([] if q.archived else ["archived = 0"])
    cols = ", ".join(f"memories.{c}" for c in _COLUMNS)
    if q.terms:
        sql = (f"SELECT {cols}, bm25(memory_fts) FROM memory_fts JOIN memories ON memories.id = memory_fts.id "
               f"WHERE memory_fts MATCH ? AND {' AND '.join(where)}")
        rows = con.execute(sql, [q.fts(), *q.args]).fetchall()
    else:
        rows = [(*r, -1.0) for r in con.execute(f"SELECT {cols} FROM memories WHERE {' AND '.join(where)}", q.args)]
    out = []
    for r in rows:
        m = _row(r[:-1], now)
        if q.stale is not None and m.stale != q.stale:
            continue
        if any(not _OPS[op](m.effective_confidence, v) for op, v in q.confidence):
            continue
        out.append((m, -float(r[-1]) * max(m.effective_confidence, 0.01)))
    out.sort(key=lambda x: (-x[1], -x[0].updated_at, x[0].id))
    return out[offset:offset + limit]
