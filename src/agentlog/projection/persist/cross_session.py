"""The cross-session stage, stored: its rows by session and by project, as ``asession``/``aproject`` parts.

Over every session (:func:`_assemble_all`) or over the sessions of some projects only
(:func:`_assemble_projects`, which writes only the groups whose rows changed).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

from agentlog.projection.assemble import (
    ATTEMPT_OVERLAY,
    TURN_OVERLAY,
    Memo,
    Meta,
    Projection,
    assemble,
)
from agentlog.projection.persist.parts import (
    Index,
    Manifest,
    _digest,
    _load_results,
    _read_global,
    _write_global,
    _write_group_part,
)
from agentlog.projection.session import SessionResult
from agentlog.projection.tables import AT_DEPENDENT, GLOBAL_FAMILY

#: per projection directory, what the cross-session stage of this process's earlier
#: refreshes computed (see assemble.Memo: self-checking, so never wrong, only unused)
_MEMOS: dict[str, Memo] = {}


def _unit_signatures(p: Projection) -> dict[str, str]:
    """Per session, the work units its attempts belong to, in order: the only thing the
    cross-session stage decides about a session from other sessions while no
    correction or retraction is new."""
    out: dict[str, list[str]] = {}
    for a in p.tables["attempts"]:
        sid = a["session_id"]
        units = out.get(sid)
        if units is None:
            units = out[sid] = []
        units.append(a["work_unit_id"] or "")
    return {sid: "\x1f".join(units) for sid, units in out.items()}


def _stored_rows(p: Projection, sessions: set[str] | None = None) -> tuple[
        dict[str, dict[str, list[dict[str, Any]]]], dict[str, dict[str, list[dict[str, Any]]]]]:
    """The cross-session stage's rows as stored, by session id (only ``sessions``,
    default all) and by project key."""
    by_session: dict[str, dict[str, list[dict[str, Any]]]] = {}
    by_project: dict[str, dict[str, list[dict[str, Any]]]] = {}

    def put(groups: dict[str, dict[str, list[dict[str, Any]]]], key: str, table: str, row: dict[str, Any]) -> None:
        g = groups.get(key)
        if g is None:
            g = groups[key] = {}
        rows = g.get(table)
        if rows is None:
            rows = g[table] = []
        rows.append(row)

    def wanted(rows: list[dict[str, Any]]) -> Iterable[dict[str, Any]]:
        return rows if sessions is None else (r for r in rows if r["session_id"] in sessions)

    for s in wanted(p.tables["sessions"]):
        put(by_session, s["session_id"], "sessions", s | dict.fromkeys(AT_DEPENDENT["sessions"]))
    for t in wanted(p.tables["turns"]):
        put(by_session, t["session_id"], "turns_overlay", {k: t[k] for k in TURN_OVERLAY} | {"session_id": t["session_id"]})
    for a in wanted(p.tables["attempts"]):
        put(by_session, a["session_id"], "attempts_overlay",
            {k: a[k] for k in ATTEMPT_OVERLAY} | {"commit_shas": a["commit_shas"], "session_id": a["session_id"]})
    for name in ("signals", "commits", "decisions"):
        for row in wanted(p.tables[name]):
            put(by_session, row["session_id"], name, row)
    for name in ("handoffs", "conflicts", "edges_cross", "retracted_ids"):
        for row in p.tables[name]:
            put(by_project, row["project_id"] or "", name, row)
    for u in p.tables["work_units"]:
        put(by_project, u["project_id"] or "", "work_units", u | dict.fromkeys(AT_DEPENDENT["work_units"]))
    return by_session, by_project


def _project_stats(p: Projection) -> dict[str, dict[str, int]]:
    from collections import Counter

    out: dict[str, dict[str, int]] = {}
    for name, what in (("sessions", "sessions"), ("turns", "turns"), ("attempts", "attempts"),
                       ("handoffs", "handoffs"), ("work_units", "work_units"), ("decisions", "decisions"),
                       ("conflicts", "conflicts"), ("retracted_ids", "retracted_attempts")):
        for project, n in Counter(row["project_id"] for row in p.tables[name]).items():
            out.setdefault(project or "", {})[what] = n
    return out


def _assemble_all(directory: str, gen: int, m: Manifest, index: Index, results: dict[str, SessionResult],
                  meta: Meta, at: int | None, event_exists: Callable[[str], bool]) -> int:
    """The cross-session stage over every session: one new part of each family
    replaces the old ones. Returns the parts written."""
    p = assemble(results.values(), meta, at, event_exists)
    m.at = p.at
    by_session, by_project = _stored_rows(p)
    tag = f"g{gen}a"
    m.parts["asession"] = [_write_group_part(directory, tag, "asession", by_session) | {"delta": False}]
    m.parts["aproject"] = [_write_group_part(directory, tag, "aproject", by_project) | {"delta": False}]
    signatures = _unit_signatures(p)
    for entry in index.sessions.values():
        group = by_session.get(entry[0]) if entry[0] is not None else None
        entry[5:] = [tag, _digest(group), signatures.get(entry[0], "")] if group is not None else [None, None, None]
    stats = _project_stats(p)
    index.projects = {key: [tag, stats.get(key, {}), _digest(by_project.get(key, {}))]
                      for key in sorted(set(stats) | set(by_project))}
    _write_global(directory, gen, m, {"corrections": p.tables["corrections"],
                                      "retractions": p.tables["retractions"]})
    return 2


def _assemble_projects(directory: str, gen: int, previous: Manifest, m: Manifest, index: Index,
                       projects: set[str], rebuilt: set[str], meta: Meta, event_exists: Callable[[str], bool]) -> int:
    """The cross-session stage over the sessions of ``projects`` only (work units,
    handoffs and conflicts never cross projects); writes the sessions and projects
    whose stored rows changed (their digests tell) as new parts. With no project,
    only the corrections and retractions are looked at again (a retracted event
    may have arrived). Only the sessions ``rebuilt`` (keys) and those whose attempts
    changed work unit can have other rows than stored: the others are not looked
    at. Returns the parts written."""
    by_project_keys = index.project_keys()
    keys = [k for pk in sorted(projects) for k in by_project_keys.get(pk, []) if index.sessions[k][0] is not None]
    results = _load_results(directory, m, index, keys)
    memo = _MEMOS.setdefault(os.path.abspath(directory), Memo())
    p = assemble(results.values(), meta, m.at, event_exists, memo)
    key_of_sid = {index.sessions[k][0]: k for k in keys}
    signatures = _unit_signatures(p)
    look = {sid for sid, k in key_of_sid.items()
            if k in rebuilt or index.sessions[k][7] != signatures.get(sid, "")}
    by_session, by_project = _stored_rows(p, look)
    written = 0
    tag = f"g{gen}a"
    changed: dict[str, dict[str, list[dict[str, Any]]]] = {}
    digests: dict[str, str] = {}
    for sid, group in by_session.items():
        digest = _digest(group)
        entry = index.sessions[key_of_sid[sid]]
        entry[7] = signatures.get(sid, "")
        if entry[6] != digest:
            changed[sid] = group
            digests[sid] = digest
    if changed:
        m.parts["asession"].append(_write_group_part(directory, tag, "asession", changed))
        written += 1
        for sid in changed:
            entry = index.sessions[key_of_sid[sid]]
            if entry[5] is not None:
                m.part("asession", entry[5])["stale"].append(sid)
            entry[5:7] = [tag, digests[sid]]
    stats = _project_stats(p)
    changed_projects: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for pk in sorted(projects):
        group = by_project.get(pk, {})
        digest = _digest(group)
        old = index.projects.get(pk)
        if old is None or old[2] != digest:
            changed_projects[pk] = group
            if old is not None:
                m.part("aproject", old[0])["stale"].append(pk)
            index.projects[pk] = [tag, stats.get(pk, {}), digest]
        else:
            index.projects[pk] = [old[0], stats.get(pk, {}), digest]
    if changed_projects:
        m.parts["aproject"].append(_write_group_part(directory, tag, "aproject", changed_projects))
        written += 1
    # corrections and retractions: a row is the one this pass made when its target
    # is in these projects (or nowhere before), else the one stored
    previous_rows = _read_global(directory, previous)
    merged: dict[str, list[dict[str, Any]]] = {}
    for name in GLOBAL_FAMILY:
        before = {r["event_id"]: r for r in previous_rows[name]}
        rows = []
        for row in p.tables[name]:
            old_row = before.get(row["event_id"])
            if row["_project"] is None and old_row is not None and old_row["_project"] is not None \
                    and old_row["_project"] not in projects:
                row = old_row
            rows.append(row)
        merged[name] = rows
    if merged != previous_rows:
        _write_global(directory, gen, m, merged)
    return written
