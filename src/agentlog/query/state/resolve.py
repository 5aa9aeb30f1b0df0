"""Ids as a person types them: :func:`resolve_id` turns a display-prefixed id
(``att_…``), a bare id, an unambiguous prefix of four or more hex digits or a
provider's session id into ``(kind, id)``, searching the id spaces of
:data:`ID_SPACES`, or raises :class:`ResolveError`. Ids are bare UUID text,
as stored.
"""

from __future__ import annotations

import re
from typing import Final, Sequence

from agentlog.core import AgentlogError
from agentlog.projection.ids import split_display
from agentlog.query.state.common import Params, Runner, _q, _shown


class ResolveError(AgentlogError, LookupError):
    """An id that names nothing (``AQL0301``), several things (``AQL0302``) or
    is not an id of the expected kind (``AQL0303``/``AQL0304``)."""

    def __init__(self, message: str, code: str, matches: dict[str, int] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.matches: dict[str, int] = matches or {}
        self.position: int | None = None
        """Where the id is in a statement (set by the statement executor)."""

    def __str__(self) -> str:
        return self.message


ID_SPACES: Final[dict[str, tuple[str, str]]] = {
    "attempt": ("attempts", "attempt_id"),
    "session": ("sessions", "session_id"),
    "turn": ("turns", "turn_id"),
    "tool_call": ("tool_calls", "tool_call_id"),
    "work_unit": ("work_units", "work_unit_id"),
    "decision": ("decisions", "decision_id"),
    "commit": ("commits", "commit_id"),
    "signal": ("signals", "signal_id"),
    "conflict": ("conflicts", "conflict_id"),
    "event": ("events", "event_id"),
}
"""Entity kind → (table, id column): every id space :func:`resolve_id` searches."""

MIN_PREFIX: Final = 4
_HEXISH: Final = re.compile(r"[0-9a-f-]+")


def resolve_id(engine: Runner, text: str, kinds: Sequence[str] | None = None) -> tuple[str, str]:
    """``(kind, full bare id)`` of an id as a person typed it.

    Accepts a display prefix (``att_…``: only that kind is searched), a bare
    id, an unambiguous prefix of at least four hex digits (hyphens optional),
    or — for sessions — the provider's own session id. An exact id wins over
    prefixes. Raises :class:`ResolveError` when nothing matches, when several
    entities match (listing how many of each kind; never a guess), or when a
    display prefix names a kind outside ``kinds``.
    """
    raw = text.strip()
    if not raw:
        raise ResolveError("an empty id", "AQL0303")
    allowed = list(kinds) if kinds else list(ID_SPACES)
    for k in allowed:
        if k not in ID_SPACES:
            raise ValueError(f"unknown id kind {k!r}")
    typed, bare = split_display(raw)
    if typed is not None:
        if typed not in allowed:
            raise ResolveError(f"{_shown(raw)} is a {typed} id; expected {_kinds_text(allowed)}", "AQL0304")
        allowed = [typed]
    # 1. Exact ids in the small tables (events, the big one, only in step 2).
    small = [k for k in allowed if k != "event"]
    if small:
        p = Params()
        ph = p(bare)
        sql = " UNION ALL ".join(
            f"(SELECT '{k}' AS kind, {ID_SPACES[k][1]} AS id FROM {ID_SPACES[k][0]} WHERE {ID_SPACES[k][1]} = {ph} "
            "LIMIT 1)" for k in small)
        hits = _q(engine, sql, p)
        if len(hits) == 1:
            return str(hits[0]["kind"]), str(hits[0]["id"])
        if len(hits) > 1:
            dup = {str(h["kind"]): 1 for h in hits}
            raise ResolveError(f"id {_shown(raw)} is ambiguous: {_counts_text(dup)}", "AQL0302", dup)
    # 2. Prefixes (and exact event ids).
    hexdigits = bare.replace("-", "")
    counts: dict[str, int] = {}
    found: dict[str, str] = {}
    prefix_ok = bool(_HEXISH.fullmatch(bare)) and len(hexdigits) >= MIN_PREFIX
    if prefix_ok or "event" in allowed:
        p = Params()
        parts = []
        for k in allowed:
            table, col = ID_SPACES[k]
            if prefix_ok:
                if "-" in bare or len(bare) <= 8:
                    cond = f"starts_with({col}, {p(bare)})"
                else:
                    cond = f"starts_with(replace({col}, '-', ''), {p(hexdigits)})"
            elif k == "event":
                cond = f"{col} = {p(bare)}"
            else:
                continue
            parts.append(f"SELECT '{k}' AS kind, count(*) AS n, min({col}) AS id, "
                         f"count(*) FILTER (WHERE {col} = {p(bare)}) AS exact FROM {table} WHERE {cond}")
        if parts:
            for h in _q(engine, " UNION ALL ".join(parts), p):
                if h["n"]:
                    counts[str(h["kind"])] = int(h["n"])
                    found[str(h["kind"])] = str(h["id"])
                    if h["exact"]:
                        return str(h["kind"]), bare
    if sum(counts.values()) == 1:
        k = next(iter(counts))
        return k, found[k]
    if counts:
        raise ResolveError(f"id prefix {_shown(raw)} is ambiguous: {_counts_text(counts)}; type more of it "
                           "or add a display prefix (att_, ses_, …)", "AQL0302", counts)
    # 3. A provider's own session id.
    if "session" in allowed:
        p = Params()
        rows = _q(engine, f"SELECT DISTINCT session_id FROM sessions WHERE provider_session_id = {p(raw)} LIMIT 3", p)
        if len(rows) == 1:
            return "session", str(rows[0]["session_id"])
        if len(rows) > 1:
            raise ResolveError(f"provider session id {_shown(raw)} is ambiguous: {len(rows)} sessions "
                               "(two providers use it); use the session id", "AQL0302", {"session": len(rows)})
    if not prefix_ok and not _HEXISH.fullmatch(bare):
        raise ResolveError(f"no {_kinds_text(allowed)} has the id {_shown(raw)}", "AQL0301")
    if not prefix_ok:
        raise ResolveError(f"id prefix {_shown(raw)} is too short: give at least {MIN_PREFIX} hex digits",
                           "AQL0303")
    from agentlog.query.id_hints import did_you_mean, near_ids

    hint = did_you_mean(near_ids(engine, raw, ID_SPACES, allowed))
    raise ResolveError(f"no {_kinds_text(allowed)} has an id starting with {_shown(raw)}{hint}", "AQL0301")


def _kinds_text(kinds: Sequence[str]) -> str:
    names = [k.replace("_", " ") for k in kinds]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k.replace('_', ' ')}{'s' if n != 1 else ''}" for k, n in
                     sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
