"""What changed between two instants (:func:`diff_state`): :func:`state_at`
at both, joined by subject, one row (:data:`DIFF_COLUMNS`) per changed field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Sequence

from agentlog.query.timeexpr import format_us
from agentlog.query.state.common import Runner, StateError, _dedup
from agentlog.query.state.facts import _core, _facts
from agentlog.query.state.at import _states_at, flatten_session, flatten_work_unit

if TYPE_CHECKING:
    from agentlog.query.scope import Scope


DIFF_COLUMNS: Final = ("subject_type", "subject_id", "session_id", "provider", "change", "field", "before", "after",
                       "confidence", "uncertainty", "evidence")
SESSION_DIFF_FIELDS: Final = ("state", "liveness", "coverage", "turn_id", "turn_status", "in_flight",
                              "last_attempt_id", "last_attempt_outcome", "last_failure_id",
                              "last_failure_outcome", "last_failure_class", "blocked", "explanation")
UNIT_DIFF_FIELDS: Final = ("status", "phase", "turn_id", "turn_status", "in_flight", "last_attempt_id",
                           "last_attempt_outcome", "last_failure_class", "blocked", "explanation")


def diff_state(engine: Runner, t1: int, t2: int, scope: Scope | None = None, *,
               session_ids: Sequence[str] | None = None, work_unit_ids: Sequence[str] | None = None,
               provider: str | None = None) -> list[dict[str, Any]]:
    """What changed between ``t1`` and ``t2``: :func:`state_at` at both, joined by
    subject (sessions, work units); one row per changed field, a subject that
    appeared is ``added``, one that left ``removed`` (a session leaves by
    ending; a unit by completing or being abandoned — ``after`` says which).
    Unchanged subjects and fields are omitted; ``last_activity_at`` is not
    compared (it moves with every event). ``t1 >= t2`` raises :class:`StateError`.
    """
    if t1 >= t2:
        raise StateError(f"DIFF STATE needs the first time before the second ({format_us(t1)} is not before "
                         f"{format_us(t2)})", "AQL0408")
    a, b = _states_at(engine, [t1, t2], scope, session_ids, work_unit_ids, provider)
    core = _core(engine, _facts(engine))
    rows: list[dict[str, Any]] = []

    before = {s["session_id"]: flatten_session(s) for s in a.sessions}
    after = {s["session_id"]: flatten_session(s) for s in b.sessions}
    gone = [sid for sid in before if sid not in after]
    for sid, row in before.items():
        if sid not in after:
            end = core.session_by_id.get(sid, {})
            rows.append(_diff_row(row, "removed", "state", row["state"],
                                  "closed" if end.get("ended_us") is not None and end["ended_us"] <= t2 else None,
                                  _dedup([end.get("end_event_id"), *row["evidence"]])))
    rows.extend(_added_or_changed(before, after, "state", SESSION_DIFF_FIELDS))

    ub = {u["work_unit_id"]: flatten_work_unit(u) for u in a.work_units}
    ua = {u["work_unit_id"]: flatten_work_unit(u) for u in b.work_units}
    closed_b = {u["work_unit_id"]: u for u in b.closed_work_units}
    for uid, row in ub.items():
        if uid in ua:
            continue
        if uid in closed_b:
            final = closed_b[uid]
            rows.append(_diff_row(row, "removed", "status", row["status"], final["status"],
                                  _dedup([*final["evidence"], *row["evidence"]])))
        else:
            st = core.unit_by_id.get(uid, {})
            rows.append(_diff_row(row, "removed", "status", row["status"], st.get("status"),
                                  _dedup([*(st.get("evidence") or []), *row["evidence"]])))
    rows.extend(_added_or_changed(ub, ua, "status", UNIT_DIFF_FIELDS))
    return rows


def _added_or_changed(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], headline: str,
                      fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Diff rows for what is in ``after``: added (told by its ``headline`` field), or each field changed."""
    rows: list[dict[str, Any]] = []
    for key, row in after.items():
        old = before.get(key)
        if old is None:
            rows.append(_diff_row(row, "added", headline, None, row[headline], row["evidence"]))
            continue
        for f in fields:
            if old[f] != row[f]:
                rows.append(_diff_row(row, "changed", f, old[f], row[f], row["evidence"]))
    return rows


def _diff_row(flat: dict[str, Any], change: str, fieldname: str, before: Any, after: Any,
              evidence: list[str]) -> dict[str, Any]:
    return {
        "subject_type": flat["subject_type"], "subject_id": flat["subject_id"], "session_id": flat["session_id"],
        "provider": flat["provider"], "change": change, "field": fieldname, "before": before, "after": after,
        "confidence": flat["confidence"], "uncertainty": flat["uncertainty"], "evidence": evidence,
    }
