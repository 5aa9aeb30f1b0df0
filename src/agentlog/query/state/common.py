"""What every time-travel answer shares: the engine they read (:class:`Runner`),
numbered statement parameters (:class:`Params`), the question errors
(:class:`StateError`), coverage notes, time and id formatting, the per-engine
memo cap, and the store's latest time (:func:`latest_event_us`, the default
"now": no function here reads the wall clock).
"""

from __future__ import annotations

import weakref
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, Iterable, Protocol

from agentlog.core import UsageError
from agentlog.query.timeexpr import format_us
from agentlog.projection.ids import PREFIXES, display, split_display

if TYPE_CHECKING:
    from agentlog.query.engine import QueryResult
    from agentlog.query.scope import Scope


class Runner(Protocol):
    """What these functions need of an engine: ``run`` one read-only statement."""

    def run(self, sql: str, params: list[Any] | None = None, *, timeout: float = ...,
            max_rows: int = ...) -> QueryResult: ...


class StateError(UsageError, ValueError):
    """A question that cannot be asked as put (``code`` is an ``AQL04xx`` code)."""

    def __init__(self, message: str, code: str = "AQL0409") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


US: Final = 1_000_000
FAILURES: Final = frozenset({"failed", "superseded"})
ALL_ROWS: Final = 100_000_000
"""Row cap for internal queries (each is already bounded by its SQL)."""

COVERAGE_CONFIDENCE: Final[dict[str, float]] = {"full": 0.9, "partial": 0.6, "minimal": 0.4, "unknown": 0.4}

_COVERAGE_NOTES: Final[dict[str, str]] = {
    "full": "the session's start, end, prompts and tool calls were observed; a reply or an action outside "
            "the hook surface (another terminal, the agent's own UI) would not be captured",
    "partial": "the session's start or its end was not observed (it may still be running), so what happened "
               "outside the observed span is unknown; a reply outside the hook surface would not be captured",
    "minimal": "neither the session's start nor its end was observed, only prompts and tool calls; waits, "
               "replies and anything outside the hook surface are invisible",
    "unknown": "no prompt and no tool call of the session was observed: hooks saw only lifecycle events, "
               "so nothing can be said about what it did",
}


def coverage_note(coverage: str | None) -> str:
    """What hooks could not see, given a session's coverage grade."""
    return _COVERAGE_NOTES.get(coverage or "unknown", _COVERAGE_NOTES["unknown"])


def _ts(us: int | None) -> str | None:
    return None if us is None else _format_us(us)


_format_us = lru_cache(maxsize=1 << 16)(format_us)
"""format_us, remembered: an answer formats the same stored times over and over."""


def _shown(text: str) -> str:
    cut = text[:40]
    safe = "".join(c if c.isprintable() else "?" for c in cut)
    return "'" + safe + ("…'" if len(text) > 40 else "'")


def _short(kind: str, value: str | None) -> str:
    """An id as a claim names it: whole, with its display prefix (it pastes back into any
    command; issue 27: ids are never cut)."""
    if value is None:
        return "?"
    return display(kind, value) if kind in PREFIXES else f"{kind}_{value}"


class Params:
    """Numbered parameters (``$1``, ``$2`` …) collected while a statement is built."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"

    def ts(self, us: int) -> str:
        return f"make_timestamptz({self(us)})"

    def many(self, values: Iterable[Any]) -> str:
        """An ``IN`` list: one parameter per value, or one list parameter when there are many."""
        vals = list(values)
        if not vals:
            return "(NULL)"
        if len(vals) > 32 and all(isinstance(v, str) for v in vals):
            return f"(SELECT unnest({self(vals)}::VARCHAR[]))"
        return "(" + ", ".join(self(v) for v in vals) + ")"


def _q(engine: Runner, sql: str, p: Params | None = None) -> list[dict[str, Any]]:
    res = engine.run(sql, p.values if p is not None and p.values else None, max_rows=ALL_ROWS)
    return [dict(zip(res.columns, r)) for r in res.rows]


def _dedup(ids: Iterable[str | None]) -> list[str]:
    out: dict[str, None] = {}
    for i in ids:
        if i:
            out[i] = None
    return list(out)


_LATEST: weakref.WeakKeyDictionary[Any, int | None] = weakref.WeakKeyDictionary()


def latest_event_us(engine: Runner) -> int | None:
    """The latest observed time in the store (µs), the default "now" of every answer
    (computed once per engine: its snapshot does not change)."""
    owner = getattr(engine, "__wrapped__", engine)
    try:
        return _LATEST[owner]
    except (KeyError, TypeError):
        pass
    rows = _q(engine, "SELECT epoch_us(max(observed_at)) AS t FROM events")
    latest = rows[0]["t"] if rows else None
    try:
        _LATEST[owner] = latest
    except TypeError:
        pass
    return latest


def _scope_conds(p: Params, scope: Scope | None, *, project_col: str | None = "project_id",
                 session_col: str | None = "session_id") -> list[str]:
    out: list[str] = []
    if scope is None:
        return out
    if scope.project_ids is not None and project_col:
        out.append(f"{project_col} IN {p.many(scope.project_ids)}")
    if scope.session and session_col:
        out.append(f"starts_with({session_col}, {p(split_display(scope.session)[1])})")
    return out


MEMO_CAP: Final = 20_000
"""Most entries a per-engine memo (activities, evidence, short calls) holds before it starts over."""


def _low(value: Any) -> tuple[bool, Any]:
    """A sort key placing None below every value (as DuckDB's NULLS LAST does in a descending order)."""
    return (value is not None, value if value is not None else 0)


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= MEMO_CAP:
        memo.clear()
    memo[key] = value
