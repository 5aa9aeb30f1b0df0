"""Attempts and signals as known at an instant: an attempt's outcome and
failure class masked to what was known at ``t`` (an attempt that had not
ended is ``in_progress``; a failed attempt whose retry had not started yet
is ``failed``, not ``superseded``; corrections recorded after ``t`` are
ignored), its view in an answer, its evidence list, and the signals not
cleared by ``t``.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Final, Sequence

from agentlog.query.state.common import FAILURES, Params, Runner, _dedup, _q, _remember, _ts
from agentlog.query.state.facts import _Core, _Facts, _newest


def _attempt_select(alias: str = "a") -> str:
    return (f"{alias}.attempt_id, {alias}.session_id, {alias}.turn_id, {alias}.turn_index, {alias}.attempt_index, "
            f"{alias}.approach, {alias}.paths, epoch_us({alias}.started_at) AS s, epoch_us({alias}.ended_at) AS e, "
            f"{alias}.outcome, {alias}.failure_class, {alias}.inferred_outcome, {alias}.inferred_failure_class, "
            f"{alias}.corrected_by, {alias}.superseded_by, {alias}.failing_event_id, {alias}.first_action_event_id, "
            f"{alias}.evidence, {alias}.confidence, {alias}.work_unit_id")


_ATTEMPT_FIELDS: Final = (
    "attempt_id", "session_id", "turn_id", "turn_index", "attempt_index", "approach", "s", "e", "outcome",
    "failure_class", "inferred_outcome", "inferred_failure_class", "corrected_by", "superseded_by",
    "failing_event_id", "first_action_event_id", "confidence", "work_unit_id", "successor_s",
)
"""What :func:`_attempts_at` keeps of each attempt (lists such as evidence are left out: few are
needed, see :func:`_evidence_of`); ``successor_s`` is the start of the attempt that superseded it."""


def _attempts_at(core: _Core, t: int, by: dict[str, Sequence[str]],
                 parts: Sequence[str] = ("last", "ended", "fail")) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per key (a session or work unit id; ``by`` maps ``session_id`` or ``work_unit_id`` to the keys)
    that had an attempt started by ``t``, the ``parts`` asked for: ``last`` (the last attempt
    started ≤ t), ``ended`` (the last two ended by t, newest first) and ``fail`` (the latest
    failure ended by t among the last five that failed, were superseded or corrected), each attempt
    a copy with ``outcome_at`` and ``class_at`` masked to what was known at ``t``."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for col, keys in by.items():
        index = core.attempts_by_session if col == "session_id" else core.attempts_by_unit
        for key in keys:
            ix = index.get(key)
            n = bisect_right(ix.starts, t) if ix is not None else 0
            if ix is None or n == 0:
                continue
            found: dict[str, list[dict[str, Any]]] = {}
            if "last" in parts:
                found["last"] = [_masked(core, ix.by_start[n - 1], t)]
            if "ended" in parts:
                found["ended"] = [_masked(core, x, t) for x in _newest(ix.by_end, ix.ends, t, 2)]
            if "fail" in parts:
                found["fail"] = []
                for x in _newest(ix.fails, ix.fail_ends, t, 5):
                    m = _masked(core, x, t)
                    if m["outcome_at"] in FAILURES:
                        found["fail"].append(m)
                        break
            out[key] = found
    return out


def _masked(core: _Core, a: dict[str, Any], t: int) -> dict[str, Any]:
    """A copy of attempt ``a`` with its outcome and class as known at ``t``.

    Once an uncorrected attempt has ended and its successor (if any) has started, what is known
    of it no longer changes: that copy is made once and shared (answers must not change it)."""
    settled = (a["corrected_by"] is None and a["e"] is not None and a["e"] <= t
               and (a["successor_s"] is None or a["successor_s"] <= t))
    if settled:
        found = core.settled.get(id(a))
        if found is not None:
            return found
    correction = (_corrections_at(core, [a["attempt_id"]], t).get(a["attempt_id"])
                  if a["corrected_by"] is not None else None)
    outcome, cls = _mask(a, t, correction)
    masked = {**a, "outcome_at": outcome, "class_at": cls}
    if settled:
        core.settled[id(a)] = masked
        view = _attempt_view(masked, t)
        if view is not None:
            core.settled_views[id(masked)] = view
    return masked


def _evidence_of(engine: Runner, facts: _Facts, core: _Core, attempt_ids: Sequence[str]) -> dict[str, list[str]]:
    """Each attempt's evidence list (memoised per engine)."""
    if not attempt_ids:
        return {}
    memo = facts.evidence
    missing = [a for a in _dedup(attempt_ids) if a not in memo]
    if missing:
        p = Params()
        conds = [f"attempt_id IN {p.many(missing)}"]
        starts = [s for a in missing if (s := core.attempt_starts.get(a)) is not None]
        if len(starts) == len(missing):
            # A range on the start lets the scan skip most rows before it reads the (long) evidence lists.
            conds.append(f"started_at BETWEEN {p.ts(min(starts))} AND {p.ts(max(starts))}")
        for r in _q(engine, f"SELECT attempt_id, evidence FROM attempts WHERE {' AND '.join(conds)}", p):
            _remember(memo, r["attempt_id"], list(r["evidence"] or []))
    return {a: memo[a] for a in attempt_ids if a in memo}


def _corrections_at(core: _Core, attempt_ids: Sequence[str], t: int) -> dict[str, dict[str, Any]]:
    """The latest applied outcome correction recorded by ``t``, per attempt."""
    out: dict[str, dict[str, Any]] = {}
    for a in attempt_ids:
        for c in reversed(core.corrections.get(a, [])):
            if c["at"] <= t:
                out[a] = c
                break
    return out


def _mask(a: dict[str, Any], t: int, correction: dict[str, Any] | None) -> tuple[str, str | None]:
    """An attempt's outcome and failure class as known at ``t``."""
    if a["e"] is None or a["e"] > t:
        return "in_progress", None
    if a["corrected_by"] is not None and a["inferred_outcome"] is not None:
        outcome, cls = str(a["inferred_outcome"]), a["inferred_failure_class"]
    else:
        outcome, cls = str(a["outcome"]), a["failure_class"]
    if outcome == "superseded" and (a["successor_s"] is None or a["successor_s"] > t):
        outcome = "failed"
    if correction is not None and correction["outcome"]:
        outcome = str(correction["outcome"])
        if correction["failure_class"]:
            cls = correction["failure_class"]
        elif outcome not in FAILURES:
            cls = None
    return outcome, cls


def _view(core: _Core, a: dict[str, Any] | None, t: int) -> dict[str, Any] | None:
    """:func:`_attempt_view`, a copy of the one kept for a settled attempt (see :func:`_masked`)."""
    kept = core.settled_views.get(id(a)) if a is not None else None
    return dict(kept) if kept is not None else _attempt_view(a, t)


def _attempt_view(a: dict[str, Any] | None, t: int) -> dict[str, Any] | None:
    if a is None:
        return None
    succ = a["superseded_by"] if (a["outcome_at"] == "superseded" and a["successor_s"] is not None
                                  and a["successor_s"] <= t) else None
    return {
        "attempt_id": a["attempt_id"], "turn_id": a["turn_id"], "outcome": a["outcome_at"],
        "failure_class": a["class_at"], "approach": a["approach"], "started_at": _ts(a["s"]),
        "ended_at": _ts(a["e"]) if a["e"] is not None and a["e"] <= t else None,
        "superseded_by": succ,
        "failing_event_id": a["failing_event_id"] if a["e"] is not None and a["e"] <= t else None,
    }


def _open_signals(core: _Core, session_ids: Sequence[str], t: int) -> dict[str, dict[str, Any]]:
    """The latest signal raised by ``t`` and not cleared by ``t``, per session."""
    out: dict[str, dict[str, Any]] = {}
    for sid in session_ids:
        for sig in core.signals.get(sid, ()):
            if sig["raised"] <= t and (sig["cleared"] is None or sig["cleared"] > t):
                out[sid] = sig
                break
    return out


def _signal_claim(sig: dict[str, Any]) -> str:
    if sig["kind"] == "permission_requested" or sig["signal_type"] in ("permission_request", "permission_prompt"):
        what = "a permission request"
    else:
        kind = str(sig["signal_type"] or "input")
        what = f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind} notification"
    return f"waiting on {what} (raised {_ts(sig['raised'])})"
