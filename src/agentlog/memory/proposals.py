"""Proposals: agents and importers propose, a person merges, rejects or undoes.

A proposal holds changes — ``create``, ``edit``, ``confirm``, ``contradict``,
``add_evidence``, ``link``, ``archive``, ``delete`` — each checked when it is
opened, and the version of every memory it touches as it was then. Merging
checks those versions again: if any memory changed since, the merge is refused
and says which; otherwise every change is written in *one* event
(``proposal_merged``), so the read model applies all of them or none. That
event also keeps each touched memory's rows as they were before, so undo
writes them back (``proposal_undone``) — refused if a memory changed after the
merge — at a cost proportional to what it undoes, never to the log.
Confirmations and contradictions merged from a proposal weigh as an agent's,
whoever merges.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Final

from . import confidence as conf
from .model import (
    RECORDED_EVIDENCE,
    InvalidMemory,
    normalize_tags,
    slugify,
    validate_attributes,
    validate_evidence,
    validate_lifetime,
    validate_link,
    validate_slug,
    validate_title,
    validate_visibility,
)
from .service import check_slug_free, free_slug
from .store import NotFound, VersionConflict, connect, new_event, snapshot, transact

OPS: Final = ("create", "edit", "confirm", "contradict", "add_evidence", "link", "archive", "delete")


class StaleProposal(RuntimeError):
    """A memory a proposal touches changed since it was opened (or since the merge, for undo)."""


@dataclass
class Proposal:
    id: str
    status: str
    actor: str
    title: str
    note: str | None
    changes: list[dict[str, Any]]
    bases: dict[str, int]
    created_at: int
    updated_at: int
    merged: dict[str, Any] | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _memory_row(con: sqlite3.Connection, ident: str) -> tuple[str, int, str, dict[str, Any], list[str], str, str,
                                                                 str, float, int]:
    row = con.execute("SELECT id, version, kind, attributes, tags, title, slug, content, confidence, archived "
                      "FROM memories WHERE (id = ? OR slug = ?) AND deleted = 0", (ident, ident)).fetchone()
    if row is None:
        raise NotFound(f"no memory {ident!r}")
    return (row[0], row[1], row[2], json.loads(row[3]), json.loads(row[4]), row[5], row[6], row[7], row[8], row[9])


def _check(con: sqlite3.Connection, change: dict[str, Any], bases: dict[str, int],
           created: set[str] | None = None) -> dict[str, Any]:
    """One change, validated and normalised; the versions it is based on go to ``bases``;
    ``created`` holds the ids the proposal's earlier changes create (links may name them)."""
    created = created if created is not None else set()
    op = change.get("op")
    if op not in OPS:
        raise InvalidMemory(f"a change's op is one of {', '.join(OPS)}, not {op!r}")
    if op == "create":
        out: dict[str, Any] = {"op": op, "kind": change.get("kind"), "title": validate_title(change.get("title"))}
        out["attributes"] = validate_attributes(str(change.get("kind")), change.get("attributes") or {})
        out["content"] = change.get("content") if isinstance(change.get("content"), str) else ""
        out["tags"] = normalize_tags(change.get("tags"))
        out["evidence"] = [validate_evidence(r) for r in change.get("evidence") or []]
        if change.get("slug"):
            out["slug"] = validate_slug(change["slug"])
        # what an import keeps (engram's exports): its id, confidence, lifetime, visibility, flags
        if change.get("id") is not None:
            import uuid

            try:
                out["id"] = str(uuid.UUID(str(change["id"])))
            except ValueError:
                raise InvalidMemory(f"a memory id is a UUID, not {change['id']!r}") from None
            if con.execute("SELECT 1 FROM memories WHERE id = ?", (out["id"],)).fetchone():
                raise InvalidMemory(f"memory {out['id']} exists already")
        if change.get("confidence") is not None:
            c = change["confidence"]
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= 1:
                raise InvalidMemory(f"a confidence is a number from 0 to 1, not {c!r}")
            out["confidence"] = float(c)
        if change.get("lifetime") is not None:
            lt = change["lifetime"] if isinstance(change["lifetime"], dict) else {"policy": change["lifetime"]}
            out["lifetime"] = validate_lifetime(lt.get("policy"), lt.get("until"))
        if change.get("visibility") is not None:
            vis = change["visibility"] if isinstance(change["visibility"], dict) else {"visibility": change["visibility"]}
            out["visibility"] = validate_visibility(vis.get("visibility"), vis.get("allowed_actors") or None)
        for flag in ("archived", "pinned"):
            if change.get(flag) is not None:
                if not isinstance(change[flag], bool):
                    raise InvalidMemory(f"{flag} is true or false, not {change[flag]!r}")
                out[flag] = change[flag]
        return out
    if op == "link" and str(change.get("memory")) in created:  # a memory this proposal creates
        target = str(change.get("target"))
        if target not in created:
            target = _memory_row(con, target)[0]
        return {"op": op, "memory": str(change["memory"]), "relation": validate_link(change.get("relation"),
                str(change["memory"]), target), "target": target}
    mid, version, kind, attrs, tags, *_ = _memory_row(con, str(change.get("memory")))
    bases[mid] = version
    out = {"op": op, "memory": mid}
    if op == "edit":
        fields = change.get("fields") or {}
        unknown = set(fields) - {"title", "content", "attributes", "tags", "slug"}
        if unknown or not fields:
            raise InvalidMemory(f"an edit changes title, content, attributes, tags or slug, not {sorted(unknown)}")
        f: dict[str, Any] = {}
        if "title" in fields:
            f["title"] = validate_title(fields["title"])
        if "content" in fields:
            f["content"] = str(fields["content"])
        if "attributes" in fields:
            f["attributes"] = validate_attributes(kind, {**attrs, **(fields["attributes"] or {})})
        if "tags" in fields:
            f["tags"] = normalize_tags(fields["tags"])
        if "slug" in fields:
            f["slug"] = validate_slug(fields["slug"])
            check_slug_free(con, f["slug"], mid)
        out["fields"] = f
    elif op == "add_evidence":
        out["evidence"] = validate_evidence(change.get("evidence"))
    elif op == "link":
        target = str(change.get("target"))
        if target not in created:
            target = _memory_row(con, target)[0]
        out["relation"] = validate_link(change.get("relation"), mid, target)
        out["target"] = target
    return out


def _with_own_evidence(change: Any) -> Any:
    """``change`` with copies of its evidence (resolved in place when opened: the caller's stay as given)."""
    if not isinstance(change, dict):
        return change
    ev = change.get("evidence")
    if change.get("op") == "create" and isinstance(ev, list):
        return dict(change, evidence=[dict(r) if isinstance(r, dict) else r for r in ev])
    if change.get("op") == "add_evidence" and isinstance(ev, dict):
        return dict(change, evidence=dict(ev))
    return change


def open_proposal(root: str, changes: list[dict[str, Any]], *, title: str, note: str | None = None,
                  actor: str = "agent") -> Proposal:
    """Open a proposal (every change checked now; nothing applied)."""
    from ..ids import uuid7
    from .service import check_recorded

    if not changes:
        raise InvalidMemory("a proposal needs at least one change")
    pid = uuid7()
    checked: list[dict[str, Any]] = []

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        bases: dict[str, int] = {}
        created: set[str] = set()
        errors: list[str] = []
        for i, c in enumerate(changes, 1):
            try:
                one = _check(con, c, bases, created)
            except (InvalidMemory, NotFound) as e:
                errors.append(f"change {i}: {e}")
                continue
            if one["op"] == "create" and "id" in one:
                created.add(one["id"])
            checked.append(one)
        if errors:  # every problem of every change, and nothing opened
            raise InvalidMemory("; ".join(errors[:20]) + (f" … and {len(errors) - 20} more" if len(errors) > 20 else ""))
        body = {"title": validate_title(title), "note": note, "changes": checked, "bases": bases}
        return [new_event("proposal_opened", "", 0, actor, body, proposal_id=pid)], {}

    # recorded evidence checked to exist, a short id (att_3fecf63b) replaced by the full one (in copies of the changes)
    changes = [_with_own_evidence(c) for c in changes]
    refs = [r for c in changes if isinstance(c, dict)
            for r in ([c.get("evidence")] if c.get("op") == "add_evidence" else
                      c.get("evidence") or [] if c.get("op") == "create" else [])]
    clean = [validate_evidence(r) for r in refs]
    check_recorded(root, clean)
    for r, done in zip(refs, clean):
        if isinstance(r, dict) and r.get("type") in RECORDED_EVIDENCE:
            r["value"] = done["value"]
    transact(root, decide)
    return get(root, pid)


def get(root: str, pid: str) -> Proposal:
    con = connect(root)
    try:
        # the id itself first (its primary key); a prefix only when that finds nothing (a LIKE reads every row)
        rows = con.execute("SELECT * FROM proposals WHERE id = ?", (pid,)).fetchall() or \
            con.execute("SELECT * FROM proposals WHERE id LIKE ? || '%'", (pid,)).fetchall()
        if len(rows) != 1:
            raise NotFound(f"no proposal {pid!r}" if not rows else f"{pid!r} names {len(rows)} proposals")
        r = rows[0]
        return Proposal(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]), r[7], r[8],
                        json.loads(r[9]) if r[9] else None, r[10])
    finally:
        con.close()


def list_proposals(root: str, status: str | None = "open", limit: int = 50) -> list[Proposal]:
    con = connect(root)
    try:
        q = "SELECT id FROM proposals" + (" WHERE status = ?" if status else "") + " ORDER BY created_at DESC, id LIMIT ?"
        ids = [r[0] for r in con.execute(q, ((status, limit) if status else (limit,)))]
    finally:
        con.close()
    return [get(root, i) for i in ids]


def diff(root: str, pid: str) -> list[str]:
    """A readable account of what merging would change, against the memories as they are now."""
    p = get(root, pid)
    con = connect(root)
    lines: list[str] = []
    try:
        for c in p.changes:
            if c["op"] == "create":
                lines.append(f"+ new {c['kind']}: {c['title']}")
                for k, v in c["attributes"].items():
                    lines.append(f"+   {k}: {v}")
                continue
            try:
                mid, version, _, attrs, tags, mtitle, slug, content, confidence, _ = _memory_row(con, c["memory"])
            except NotFound:
                lines.append(f"! {c['op']} {c['memory']}: the memory is gone")
                continue
            stale = "" if version == p.bases.get(mid) else f"  (changed since: version {p.bases.get(mid)} → {version})"
            lines.append(f"~ {c['op']} {slug}{stale}")
            if c["op"] == "edit":
                now = {"title": mtitle, "content": content, "attributes": attrs, "tags": tags, "slug": slug}
                for k, v in c["fields"].items():
                    if k == "attributes":  # attribute by attribute
                        for name in dict.fromkeys([*attrs, *v]):
                            if attrs.get(name) != v.get(name):
                                if name in attrs:
                                    lines.append(f"-   {name}: {attrs[name]}")
                                if name in v:
                                    lines.append(f"+   {name}: {v[name]}")
                    elif now.get(k) != v:
                        lines.append(f"-   {k}: {now.get(k)}")
                        lines.append(f"+   {k}: {v}")
            elif c["op"] in ("confirm", "contradict"):
                new = conf.confirmed(confidence, "agent") if c["op"] == "confirm" else \
                    conf.contradicted(confidence, "agent")
                lines.append(f"    confidence {confidence:.2f} → {new:.2f}")
            elif c["op"] == "add_evidence":
                lines.append(f"+   evidence {c['evidence']['type']}: {c['evidence']['value']}")
            elif c["op"] == "link":
                lines.append(f"+   link {c['relation']} → {c['target']}")
    finally:
        con.close()
    return lines


def approve(root: str, pid: str, *, actor: str = "person") -> Proposal:
    """Merge: every change re-checked against the memories now, all written in one event."""
    from ..ids import uuid7

    p = get(root, pid)
    if p.status != "open":
        raise InvalidMemory(f"proposal {p.id} is {p.status}, not open")

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        for mid, base in sorted(p.bases.items()):
            row = con.execute("SELECT version FROM memories WHERE id = ? AND deleted = 0", (mid,)).fetchone()
            if row is None or row[0] != base:
                slug = con.execute("SELECT slug FROM memories WHERE id = ?", (mid,)).fetchone()
                raise StaleProposal(f"memory {slug[0] if slug else mid} changed since the proposal was opened "
                                    f"(version {base} then, {'gone' if row is None else row[0]} now): "
                                    "nothing was merged")
        ops: list[dict[str, Any]] = []
        slugs: set[str] = set()  # given by this merge so far (unique slugs: service.free_slug)
        versions: dict[str, int] = dict(p.bases)
        before: dict[str, Any] = {}
        state: dict[str, float] = {}
        for c in p.changes:
            if c["op"] == "create":
                mid = c.get("id") or uuid7()
                if con.execute("SELECT 1 FROM memories WHERE id = ?", (mid,)).fetchone():
                    raise StaleProposal(f"memory {mid} exists already: nothing was merged")
                before[mid] = None
                versions[mid] = 1
                body = {k: c[k] for k in ("kind", "title", "content", "attributes", "tags", "evidence")}
                # the slug asked for, or the nearest free one (a memory made since may have it)
                body["slug"] = free_slug(con, c.get("slug") or slugify(c["title"], mid), slugs)
                slugs.add(body["slug"])
                # a confidence the change carries (an engram record's), else the proposer's prior
                body["confidence"] = c.get("confidence", conf.prior(p.actor if p.actor in conf.PRIORS else "agent"))
                body["lifetime"] = c.get("lifetime", {"policy": "standard", "until": None})
                body["visibility"] = c.get("visibility", {"visibility": "shared", "allowed_actors": []})
                ops.append({"name": "memory_created", "memory_id": mid, "version": 1, "body": body})
                for flag, name in (("pinned", "memory_pinned"), ("archived", "memory_archived")):
                    if c.get(flag):
                        versions[mid] += 1
                        ops.append({"name": name, "memory_id": mid, "version": versions[mid],
                                    "body": {"pinned": True} if flag == "pinned" else {}})
                continue
            mid = c["memory"]
            if mid not in before:
                before[mid] = snapshot(con, mid)
            versions[mid] += 1
            if c["op"] == "edit":
                name, body = "memory_edited", c["fields"]
                if "slug" in body:  # taken by another memory since the proposal was opened
                    try:
                        check_slug_free(con, body["slug"], mid)
                    except InvalidMemory as e:
                        raise StaleProposal(f"{e}: nothing was merged") from None
            elif c["op"] in ("confirm", "contradict"):
                current = state.get(mid, before[mid]["memory"]["confidence"])
                value = conf.confirmed(current, "agent") if c["op"] == "confirm" else conf.contradicted(current, "agent")
                state[mid] = value
                name, body = f"memory_{c['op']}ed", {"confidence": value}
            elif c["op"] == "add_evidence":
                name, body = "memory_evidence_added", {"evidence": c["evidence"]}
            elif c["op"] == "link":
                name, body = "memory_linked", {"relation": c["relation"], "target": c["target"]}
            elif c["op"] == "archive":
                name, body = "memory_archived", {}
            else:
                name, body = "memory_deleted", {}
            ops.append({"name": name, "memory_id": mid, "version": versions[mid], "body": body})
        after = {mid: versions[mid] for mid in before}
        ev = new_event("proposal_merged", "", 0, actor, {"ops": ops, "before": before, "after": after},
                       proposal_id=p.id)
        return [ev], {}

    transact(root, decide)
    return get(root, p.id)


def reject(root: str, pid: str, *, reason: str | None = None, actor: str = "person") -> Proposal:
    p = get(root, pid)
    if p.status != "open":
        raise InvalidMemory(f"proposal {p.id} is {p.status}, not open")
    transact(root, lambda con: ([new_event("proposal_rejected", "", 0, actor, {"reason": reason},
                                           proposal_id=p.id)], {}))
    return get(root, p.id)


def undo(root: str, pid: str, *, actor: str = "person") -> Proposal:
    """Put back every memory a merged proposal touched as it was before — refused if any
    changed after the merge."""
    p = get(root, pid)
    if p.status != "merged" or not p.merged:
        raise InvalidMemory(f"proposal {p.id} is {p.status}: only a merged proposal can be undone")
    before, after = p.merged["before"], p.merged["after"]

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        for mid, version in sorted(after.items()):
            row = con.execute("SELECT version, slug FROM memories WHERE id = ?", (mid,)).fetchone()
            if row is None or row[0] != version:
                raise StaleProposal(f"memory {row[1] if row else mid} changed after the merge (version {version} "
                                    f"then, {row[0] if row else 'gone'} now): undo would lose that change; "
                                    "nothing was undone")
        for mid, snap in sorted(before.items()):  # a slug put back must still be free
            if snap is not None:
                other = con.execute("SELECT id FROM memories WHERE slug = ? AND id != ?",
                                    (snap["memory"]["slug"], mid)).fetchone()
                if other is not None and other[0] not in before:
                    raise StaleProposal(f"memory {other[0]} took the slug {snap['memory']['slug']!r} after the merge: "
                                        "nothing was undone")
        return [new_event("proposal_undone", "", 0, actor, {"restore": before}, proposal_id=p.id)], {}

    try:
        transact(root, decide)
    except VersionConflict as e:  # pragma: no cover - decide checks first
        raise StaleProposal(str(e)) from None
    return get(root, p.id)
