"""One question in either language: is the text AttemptQL or SQL, run it, return its rows.

:func:`language` decides (AttemptQL when :func:`agentlog.query.attemptql.is_attemptql`
says so; with ``typos``, also ``SHOW <word>`` where the word is not one of
SQL's ``SHOW`` forms: a misspelt AttemptQL target, better answered with the
parser's error than DuckDB's); :func:`ask` runs the text on an engine and
returns an :class:`Answer` whichever language it was. :func:`cell` makes a
value JSON-ready the way the dashboard and the MCP server show SQL cells.
Errors are the languages' own: :class:`~agentlog.query.attemptql.ParseError`
and the other ``ValueError`` of AttemptQL, :class:`~agentlog.query.engine.QueryError`
of the engine, :class:`~agentlog.query.views.IdError` of an id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import orjson

if TYPE_CHECKING:
    from agentlog.query.engine import Engine

Language: TypeAlias = Literal["attemptql", "sql"]

SQL_SHOW_WORDS: Final[frozenset[str]] = frozenset({
    "TABLES", "ALL", "DATABASES", "FUNCTIONS", "EVENTS", "SESSIONS_RAW", "EVENTS_RAW",
})
"""Words after SHOW that make it DuckDB's SQL ``SHOW`` rather than an AttemptQL target."""


def meant_as_attemptql(text: str) -> bool:
    """``SHOW <word>`` where the word is neither a SQL ``SHOW`` form nor a table:
    a misspelt AttemptQL target, better answered with the parser's error."""
    words = [w.strip(";").upper() for w in text.split(None, 3)[:3]]
    if words[:1] == ["EXPLAIN"]:
        words = words[1:]
    return len(words) >= 2 and words[0] == "SHOW" and words[1] not in SQL_SHOW_WORDS


def language(text: str, *, typos: bool = False) -> Language:
    """``attemptql`` or ``sql`` for ``text``; with ``typos``, a misspelt ``SHOW`` target
    counts as AttemptQL too (:func:`meant_as_attemptql`)."""
    from agentlog.query.attemptql import is_attemptql

    if is_attemptql(text) or (typos and meant_as_attemptql(text)):
        return "attemptql"
    return "sql"


@dataclass
class Answer:
    """The rows of one statement, whichever its language: ``columns``, ``rows`` (tuples
    in column order), ``truncated`` (more rows than asked for), ``notes`` for people
    (AttemptQL's; none for SQL)."""

    language: Language
    statement: str
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    notes: list[str] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts (column → value)."""
        return [dict(zip(self.columns, r)) for r in self.rows]

    def cells(self) -> list[list[Any]]:
        """The rows as lists of JSON-ready values (:func:`cell`)."""
        return [[cell(v) for v in r] for r in self.rows]


def ask(engine: Engine, text: str, *, max_rows: int = 10_000, timeout: float = 30.0) -> Answer:
    """Answer ``text`` (blanks around it ignored) on ``engine``: AttemptQL when
    :func:`language` says so, else one read-only SQL statement; at most ``max_rows``
    rows from the engine (an AttemptQL ``STATE`` answers every row), within
    ``timeout`` seconds."""
    statement = text.strip()
    if language(statement) == "attemptql":
        from agentlog.query.aql import execute

        res = execute(engine, statement, max_rows=max_rows, timeout=timeout)
        return Answer("attemptql", statement, res.columns, res.rows, res.truncated, res.notes)
    out = engine.run(statement, max_rows=max_rows, timeout=timeout)
    return Answer("sql", statement, out.columns, out.rows, out.truncated)


def cell(v: Any) -> Any:
    """``v`` as JSON shows it: scalars as they are, times as RFC 3339 text, anything else
    as its JSON text."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    from agentlog.query.views import iso

    text = iso(v)
    return text if text is not None and not isinstance(v, (list, dict, tuple)) else orjson.dumps(
        v, default=str).decode()


__all__ = ["Answer", "Language", "SQL_SHOW_WORDS", "ask", "cell", "language", "meant_as_attemptql"]
