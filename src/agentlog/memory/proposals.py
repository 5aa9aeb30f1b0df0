"""Proposals: agents and importers propose; a person edits, merges, rejects or undoes.

A proposal holds changes — ``create``, ``edit``, ``confirm``, ``contradict``,
``add_evidence``, ``link``, ``archive``, ``delete`` — each checked when it is
opened as the direct command would check it, and the version of every memory
it touches as it was then. A person may edit an open proposal (its title,
note, and changes dropped, replaced or added: :func:`edit_proposal`); every
change is checked again against the memories as they are, and a memory's base
version moves to its current version only when every change touching it was
written by that edit.

Merging checks everything again, against the memories as they are now: the
base versions (a memory changed since: refused, named), and each change as
the direct command would check it — its memory still there, not archived for
an edit or a link, a link's target still there, recorded evidence still in the
recorded history. Any problem refuses the whole merge, naming the memory and
the reason. Otherwise every change is written in *one* event
(``proposal_merged``), so the read model applies all of them or none. That
event also keeps each touched memory's rows as they were before, so undo
writes them back (``proposal_undone``) — refused if a memory changed after the
merge, or if another memory links to one the proposal created — at a cost
proportional to what it undoes, never to the log. Confirmations and
contradictions merged from a proposal weigh as an agent's, whoever merges.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Final, Iterable, Mapping, Sequence

from agentlog.core import AgentlogError
from agentlog.memory import confidence as conf
from agentlog.memory.model import (
    RECORDED_EVIDENCE,
    InvalidMemory,
    normalize_tags,
    relationship_ends,
    slugify,
    validate_attributes,
    validate_evidence,
    validate_lifetime,
    validate_link,
    validate_slug,
    validate_title,
    validate_visibility,
)
from agentlog.memory.service import check_relationship_ends, check_slug_free, free_slug
from agentlog.memory.store import NotFound, VersionConflict, connect, new_event, snapshot, transact

OPS: Final = ("create", "edit", "confirm", "contradict", "add_evidence", "link", "unlink", "archive", "delete")


class StaleProposal(AgentlogError, RuntimeError):
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
    if not isinstance(change, dict):
        raise InvalidMemory(f"a change is an object with an op, not {change!r}")
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
        check_relationship_ends(con, str(out["kind"]), out["attributes"], out.get("id", ""), created)
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
    mid, version, kind, attrs, tags, _, slug, *_, archived = _memory_row(con, str(change.get("memory")))
    if archived and op in ("edit", "link"):  # as the direct edit and link refuse it
        raise InvalidMemory(f"memory {slug} is archived: restore it first")
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
            check_relationship_ends(con, kind, f["attributes"], mid, created)
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
    elif op == "unlink":
        relation, target = str(change.get("relation")), str(change.get("target"))
        found = con.execute("SELECT target FROM links WHERE source = ? AND relation = ? AND target IN "
                            "(?, (SELECT id FROM memories WHERE slug = ? AND deleted = 0))",
                            (mid, relation, target, target)).fetchone()
        if found is None:
            raise InvalidMemory(f"memory {slug} has no link {relation} → {target}")
        out["relation"], out["target"] = relation, found[0]
    return out


def _all_checked(con: sqlite3.Connection, changes: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, int]],
                                                                        list[str]]:
    """Every change checked against the memories now (:func:`_check`): the checked changes, the
    base versions each one took (one dict per change), and every problem (``change N: …``)."""
    checked: list[dict[str, Any]] = []
    per: list[dict[str, int]] = []
    created: set[str] = set()
    errors: list[str] = []
    for i, c in enumerate(changes, 1):
        bases: dict[str, int] = {}
        try:
            one = _check(con, c, bases, created)
        except (InvalidMemory, NotFound) as e:
            errors.append(f"change {i}: {e}")
            continue
        if one["op"] == "create" and "id" in one:
            if one["id"] in created:
                errors.append(f"change {i}: memory {one['id']} is created by an earlier change already")
                continue
            created.add(one["id"])
        checked.append(one)
        per.append(bases)
    return checked, per, errors


def _refuse_all(errors: list[str]) -> None:
    """Every problem of every change in one refusal (the first 20 spelt out)."""
    if errors:
        raise InvalidMemory("; ".join(errors[:20]) + (f" … and {len(errors) - 20} more" if len(errors) > 20 else ""))


def _refs(change: Any) -> list[Any]:
    """The evidence references a change adds (a create's list, an ``add_evidence``'s one)."""
    if not isinstance(change, dict):
        return []
    if change.get("op") == "add_evidence":
        return [change.get("evidence")]
    if change.get("op") == "create" and isinstance(change.get("evidence"), list):
        return list(change["evidence"])
    return []


def _valid_or_as_given(ref: Any) -> Any:
    try:
        return validate_evidence(ref)
    except InvalidMemory:  # (reported by _check with the change's other problems)
        return ref


def _is_valid(ref: Any) -> bool:
    try:
        return bool(validate_evidence(ref) == ref)
    except InvalidMemory:
        return False


def _prepared(changes: list[Any]) -> list[Any]:
    """Copies of ``changes`` with their evidence validated (new dicts, so the recorded-evidence
    check may normalise them in place without touching what the caller holds)."""
    out: list[Any] = []
    for c in changes:
        if isinstance(c, dict) and c.get("op") == "add_evidence":
            c = {**c, "evidence": _valid_or_as_given(c.get("evidence"))}
        elif isinstance(c, dict) and c.get("op") == "create" and isinstance(c.get("evidence"), list):
            c = {**c, "evidence": [_valid_or_as_given(r) for r in c["evidence"]]}
        out.append(c)
    return out


def _evidence_problems(root: str, changes: list[Any]) -> list[tuple[int, str]]:
    """Recorded evidence (an event, attempt, session or tool call) of ``changes`` (as
    :func:`_prepared` gives them) checked to be in the recorded history as a direct command
    checks it (:func:`.service.check_recorded`, which opens the store only when there is some;
    it drops a display prefix such as ``att_`` in place): (change number, problem) for each
    reference that is not."""
    from agentlog.memory.service import check_recorded

    refs = [(i, r) for i, c in enumerate(changes, 1) for r in _refs(c)
            if isinstance(r, dict) and r.get("type") in RECORDED_EVIDENCE and _is_valid(r)]
    if not refs:
        return []
    try:
        check_recorded(root, [r for _, r in refs])
        return []
    except InvalidMemory:
        pass
    problems: list[tuple[int, str]] = []
    for i, r in refs:  # which ones (only when one is missing: each check opens the store)
        try:
            check_recorded(root, [r])
        except InvalidMemory as e:
            problems.append((i, str(e)))
    return problems


def open_proposal(root: str, changes: list[dict[str, Any]], *, title: str, note: str | None = None,
                  actor: str = "agent") -> Proposal:
    """Open a proposal (every change checked now, as the direct command would check it;
    every problem of every change reported, and nothing opened, if there is one)."""
    from agentlog.core.ids import uuid7

    if not changes:
        raise InvalidMemory("a proposal needs at least one change")
    title = validate_title(title)
    pid = uuid7()
    prepared = _prepared(changes)
    missing = [f"change {i}: {e}" for i, e in _evidence_problems(root, prepared)]

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        checked, per, errors = _all_checked(con, prepared)
        _refuse_all(errors + missing)
        bases = {mid: v for b in per for mid, v in b.items()}
        body = {"title": title, "note": note, "changes": checked, "bases": bases}
        return [new_event("proposal_opened", "", 0, actor, body, proposal_id=pid)], {}

    transact(root, decide)
    return get(root, pid)


def _load(con: sqlite3.Connection, pid: str) -> Proposal:
    """A proposal by its id or an unambiguous prefix of it, read on ``con``."""
    # the id itself first (its primary key); a prefix only when that finds nothing (a LIKE reads every row)
    rows = con.execute("SELECT * FROM proposals WHERE id = ?", (pid,)).fetchall() or \
        con.execute("SELECT * FROM proposals WHERE id LIKE ? || '%'", (pid,)).fetchall()
    if len(rows) != 1:
        raise NotFound(f"no proposal {pid!r}" if not rows else f"{pid!r} names {len(rows)} proposals")
    r = rows[0]
    return Proposal(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]), r[7], r[8],
                    json.loads(r[9]) if r[9] else None, r[10])


def get(root: str, pid: str) -> Proposal:
    con = connect(root)
    try:
        return _load(con, pid)
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


def _must_be(p: Proposal, status: str, doing: str) -> None:
    if p.status != status:
        raise InvalidMemory(f"proposal {p.id} is {p.status}, not {status}: only {'an' if status[0] in 'aeiou' else 'a'} "
                            f"{status} proposal can be {doing}")


def _unchanged_since(con: sqlite3.Connection, p: Proposal, status: str, doing: str) -> None:
    """Under the lock: the proposal is still as ``p`` was read before it (not decided or edited
    meanwhile by another process)."""
    now = _load(con, p.id)
    _must_be(now, status, doing)
    if now.updated_at != p.updated_at:
        raise StaleProposal(f"proposal {p.id} was edited meanwhile: review it again (nothing was {doing})")


# -- editing --------------------------------------------------------------------------------


def edit_proposal(root: str, pid: str, *, title: str | None = None, note: str | None = None,
                  drop: Iterable[int] = (), replace: Mapping[int, dict[str, Any]] | None = None,
                  add: Sequence[dict[str, Any]] = (), actor: str = "person") -> Proposal:
    """A person edits open proposal ``pid``: a new ``title`` or ``note`` (``""`` clears it);
    changes dropped (``drop``: their numbers, from 1, as :func:`diff` numbers them), replaced
    (``replace``: number → the new change) or added after the others (``add``).

    The changes it then holds are all checked again against the memories as they are now (as
    when it was opened: every problem reported, nothing written). The base versions stay
    honest: a memory a kept change touches keeps the version the proposal was opened (or last
    edited) against — so a memory changed since still refuses the merge — and one touched only
    by changes this edit wrote takes its current version. One ``proposal_edited`` event records
    the new title, note, changes and bases and what was edited; an edit that changes nothing
    writes nothing. Refused (:class:`InvalidMemory`) unless the proposal is open."""
    p = get(root, pid)
    _must_be(p, "open", "edited")
    replaced = dict(replace or {})
    dropped = sorted(set(drop))
    n = len(p.changes)
    wrong = [k for k in [*dropped, *replaced] if not 1 <= k <= n]
    if wrong:
        raise InvalidMemory(f"proposal {p.id} has changes 1 to {n}, not {wrong[0]}")
    if set(dropped) & set(replaced):
        raise InvalidMemory(f"change {min(set(dropped) & set(replaced))} cannot be both dropped and replaced")
    rows: list[tuple[int | None, Any]] = [(None, replaced[i]) if i in replaced else (i, c)
                                          for i, c in enumerate(p.changes, 1) if i not in dropped]
    rows.extend((None, c) for c in add)
    if not rows:
        raise InvalidMemory(f"proposal {p.id} would have no change left: reject it instead")
    new_title = validate_title(title) if title is not None else p.title
    new_note = (note or None) if note is not None else p.note
    prepared = _prepared([c for _, c in rows])
    missing = [f"change {i}: {e}" for i, e in _evidence_problems(root, prepared)]

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        _unchanged_since(con, p, "open", "edited")
        checked, per, errors = _all_checked(con, prepared)
        _refuse_all(errors + missing)
        changes: list[dict[str, Any]] = []
        bases: dict[str, int] = {}
        kept: set[str] = set()
        for (origin, _), one, took in zip(rows, checked, per):
            changes.append(p.changes[origin - 1] if origin is not None else one)  # a kept change as it was reviewed
            for mid, version in took.items():
                if origin is not None and mid in p.bases:
                    bases[mid] = p.bases[mid]
                    kept.add(mid)
                elif mid not in kept:
                    bases[mid] = version
        if (changes, bases, new_title, new_note) == (p.changes, p.bases, p.title, p.note):
            return [], {}
        edited = {"dropped": dropped, "replaced": sorted(replaced),
                  "added": list(range(len(rows) - len(add) + 1, len(rows) + 1)),
                  "title": new_title != p.title, "note": new_note != p.note}
        body = {"title": new_title, "note": new_note, "changes": changes, "bases": bases, "edited": edited}
        return [new_event("proposal_edited", "", 0, actor, body, proposal_id=p.id)], {}

    transact(root, decide)
    return get(root, p.id)


# -- review ---------------------------------------------------------------------------------


def _flat(value: Any) -> str:
    """A value on one line of the review (a newline in it shown as ``\\n``: each line of the
    review is one thing)."""
    return str(value).replace("\r", "\\r").replace("\n", "\\n")


def _ref(ref: dict[str, Any]) -> str:
    where = str(ref.get("value"))
    if ref.get("type") == "file":
        if "line_start" in ref or "line_end" in ref:
            where += f":{ref.get('line_start', '')}" + (f"-{ref['line_end']}" if "line_end" in ref else "")
        if ref.get("commit"):
            where += f" @ {ref['commit']}"
    return f"{ref.get('type')}: {_flat(where)}" + (f" ({_flat(ref['note'])})" if ref.get("note") else "")


def _text_lines(name: str, old: Any, new: Any) -> list[str]:
    """A field's change: ``-``/``+`` lines, or for text on several lines a line diff."""
    if isinstance(old, str) and isinstance(new, str) and ("\n" in old or "\n" in new):
        import difflib

        out = [f"~   {name}:"]
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1):
            if line.startswith(("---", "+++")) or line.startswith(("@@ -0,", "@@ -1,", "@@ -1 ")):
                continue  # (a hunk from the first line: nothing skipped before it)
            out.append("    …" if line.startswith("@@") else f"{line[0]}     {line[1:]}")
        return out
    return ([f"-   {name}: {_flat(old)}"] if old not in ("", None) else []) + [f"+   {name}: {_flat(new)}"]


def _label(con: sqlite3.Connection, mid: str, created: dict[str, dict[str, Any]]) -> str:
    """How the review names a memory: its slug; one this proposal creates by kind and title."""
    if mid in created:
        return f"new {created[mid]['kind']} {_flat(created[mid]['title'])!r}"
    row = con.execute("SELECT slug, deleted FROM memories WHERE id = ?", (mid,)).fetchone()
    return f"{mid} (gone)" if row is None else row[0] + (" (deleted)" if row[1] else "")


def _create_lines(con: sqlite3.Connection, number: int, c: dict[str, Any], p: Proposal,
                  links: list[tuple[int, str, str]], created: dict[str, dict[str, Any]]) -> list[str]:
    """Everything a created memory would have: slug, attributes, tags, content, evidence,
    links, confidence, lifetime, visibility and flags."""
    out = [f"+ #{number} new {c['kind']}: {_flat(c['title'])}",
           f"+   slug: {c['slug']}" if c.get("slug") else "+   slug: made from the title when merged"]
    out.extend(f"+   {k}: {_flat(v)}" for k, v in c["attributes"].items())
    if c.get("tags"):
        out.append("+   tags: " + ", ".join(_flat(t) for t in c["tags"]))
    if c.get("content"):
        out.append("+   content:")
        out.extend(f"+     {line}" for line in str(c["content"]).splitlines())
    out.extend(f"+   evidence {_ref(r)}" for r in c.get("evidence") or [])
    out.extend(f"+   link {relation} → {_label(con, target, created)} (change {n})" for n, relation, target in links)
    lifetime = c.get("lifetime") or {"policy": "standard", "until": None}
    vis = c.get("visibility") or {"visibility": "shared", "allowed_actors": []}
    facts = [f"confidence {c.get('confidence', conf.prior(_author(p))):.2f}",
             f"lifetime until {lifetime['until']}" if lifetime.get("until") else f"lifetime {lifetime['policy']}",
             f"visibility {vis['visibility']}" + (f" ({', '.join(vis['allowed_actors'])})"
                                                  if vis.get("allowed_actors") else "")]
    facts.extend(flag for flag in ("archived", "pinned") if c.get(flag))
    out.append("+   " + ", ".join(facts))
    if c.get("id"):
        out.append(f"+   id: {c['id']}")
    return out


def _author(p: Proposal) -> str:
    """Whose prior a memory the proposal creates takes: its proposer's (a person, an agent, an import)."""
    return p.actor if p.actor in conf.PRIORS else "agent"


def diff(root: str, pid: str) -> list[str]:
    """A readable account of what merging would change, against the memories as they are now:
    each change numbered (``#N``, as :func:`edit_proposal` takes them), a created memory with
    everything it would have, an edit field by field (attribute by attribute, text line by
    line), and flags on memories that changed since, are archived or are gone."""
    p = get(root, pid)
    con = connect(root)
    try:
        return _diff_lines(con, p)
    finally:
        con.close()


def _diff_lines(con: sqlite3.Connection, p: Proposal) -> list[str]:
    created = {c["id"]: c for c in p.changes if c["op"] == "create" and c.get("id")}
    links: dict[str, list[tuple[int, str, str]]] = {}
    for n, c in enumerate(p.changes, 1):
        if c["op"] == "link" and c["memory"] in created:
            links.setdefault(c["memory"], []).append((n, c["relation"], c["target"]))
    lines: list[str] = []
    for n, c in enumerate(p.changes, 1):
        if c["op"] == "create":
            lines.extend(_create_lines(con, n, c, p, links.get(c.get("id") or "", []), created))
            continue
        if c["memory"] in created:  # a link from a memory this proposal creates
            lines.append(f"+ #{n} link {_label(con, c['memory'], created)} {c['relation']} → "
                         f"{_label(con, c['target'], created)}")
            continue
        try:
            mid, version, _, attrs, tags, mtitle, slug, content, confidence, archived = _memory_row(con, c["memory"])
        except NotFound:
            lines.append(f"! #{n} {c['op']} {_label(con, c['memory'], created)}: the memory is gone")
            continue
        flags = "" if version == p.bases.get(mid) else f"  (changed since: version {p.bases.get(mid)} → {version})"
        if archived and c["op"] in ("edit", "link"):
            flags += "  (archived: refused until it is restored)"
        lines.append(f"~ #{n} {c['op']} {slug}{flags}")
        if c["op"] == "edit":
            now = {"title": mtitle, "content": content, "attributes": attrs, "tags": tags, "slug": slug}
            if all(now.get(k) == v for k, v in c["fields"].items()):
                lines.append("    (so already: merging writes nothing for it)")
            for k, v in c["fields"].items():
                if k == "attributes":  # attribute by attribute
                    for name in dict.fromkeys([*attrs, *v]):
                        if attrs.get(name) != v.get(name):
                            if name in attrs:
                                lines.append(f"-   {name}: {_flat(attrs[name])}")
                            if name in v:
                                lines.append(f"+   {name}: {_flat(v[name])}")
                elif now.get(k) != v:
                    lines.extend(_text_lines(k, now.get(k), v))
        elif c["op"] in ("confirm", "contradict"):
            new = conf.confirmed(confidence, "agent") if c["op"] == "confirm" else \
                conf.contradicted(confidence, "agent")
            lines.append(f"    confidence {confidence:.2f} → {new:.2f}")
        elif c["op"] == "add_evidence":
            lines.append(f"+   evidence {_ref(c['evidence'])}")
        elif c["op"] == "link":
            there = " (linked already: merging writes nothing for it)" if con.execute(
                "SELECT 1 FROM links WHERE source = ? AND relation = ? AND target = ?",
                (mid, c["relation"], c["target"])).fetchone() else ""
            lines.append(f"+   link {c['relation']} → {_label(con, c['target'], created)}{there}")
        elif c["op"] == "unlink":
            gone = "" if con.execute("SELECT 1 FROM links WHERE source = ? AND relation = ? AND target = ?",
                                     (mid, c["relation"], c["target"])).fetchone() else "  (no longer linked)"
            lines.append(f"-   link {c['relation']} → {_label(con, c['target'], created)}{gone}")
    return lines


# -- deciding -------------------------------------------------------------------------------


def approve(root: str, pid: str, *, actor: str = "person") -> Proposal:
    """Merge: every change re-checked against the memories now — the base versions, and each
    change as the direct command would check it — and all written in one event, or none (the
    refusal names the memory and why)."""
    p = get(root, pid)
    _must_be(p, "open", "merged")
    # recorded evidence still recorded (checked before the lock, as a direct add_evidence checks it)
    missing = _evidence_problems(root, _prepared(p.changes))
    if missing:
        n, problem = missing[0]
        raise StaleProposal(f"change {n} ({_what(root, p.changes[n - 1])}): {problem} (any more): nothing was merged")

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        _unchanged_since(con, p, "open", "merged")
        ops, before, after = _merge_plan(con, p)
        ev = new_event("proposal_merged", "", 0, actor, {"ops": ops, "before": before, "after": after},
                       proposal_id=p.id)
        return [ev], {}

    transact(root, decide)
    return get(root, p.id)


def _what(root: str, c: dict[str, Any]) -> str:
    """A change named for a refusal: ``new KIND 'TITLE'`` or ``OP of memory SLUG``."""
    if c["op"] == "create":
        return f"new {c['kind']} {_flat(c['title'])!r}"
    con = connect(root)
    try:
        row = con.execute("SELECT slug FROM memories WHERE id = ?", (c["memory"],)).fetchone()
    finally:
        con.close()
    return f"{c['op']} of memory {row[0] if row else c['memory']}"


def _merge_plan(con: sqlite3.Connection, p: Proposal) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, int]]:
    """The events merging ``p`` writes, each touched memory's rows before and version after —
    or :class:`StaleProposal` naming the memory and the reason. The changes are walked in order
    over what the memories are now and what the earlier changes made of them (an edit after an
    archive of the same memory is refused as a direct edit would be)."""
    from agentlog.core.ids import uuid7

    for mid, base in sorted(p.bases.items()):
        row = con.execute("SELECT version FROM memories WHERE id = ? AND deleted = 0", (mid,)).fetchone()
        if row is None or row[0] != base:
            slug = con.execute("SELECT slug FROM memories WHERE id = ?", (mid,)).fetchone()
            raise StaleProposal(f"memory {slug[0] if slug else mid} changed since the proposal was opened "
                                f"(version {base} then, {'gone' if row is None else row[0]} now): "
                                "nothing was merged")
    live: dict[str, dict[str, Any] | None] = {}  # slug, archived, deleted: now, then as the changes leave them

    def memory(mid: str) -> dict[str, Any] | None:
        if mid not in live:
            row = con.execute("SELECT slug, archived, deleted FROM memories WHERE id = ?", (mid,)).fetchone()
            live[mid] = None if row is None else {"slug": row[0], "archived": bool(row[1]), "deleted": bool(row[2])}
        return live[mid]

    def refuse(n: int, c: dict[str, Any], why: str) -> StaleProposal:
        return StaleProposal(f"change {n} ({c['op']}): memory {why}: nothing was merged")

    kinds: dict[str, str] = {}  # of the memories this merge creates

    def gone_end(n: int, c: dict[str, Any], label: str, kind: str, attributes: dict[str, Any]) -> None:
        """A relationship must name memories that are there when it is merged (as the changes
        before it leave them)."""
        for name, end in relationship_ends(kind, attributes):
            target = memory(end)
            if target is None or target["deleted"]:
                raise refuse(n, c, f"{label} is a relationship whose {name} "
                                   f"{target['slug'] if target else end} is gone")

    ops: list[dict[str, Any]] = []
    slugs: set[str] = set()  # given by this merge so far (unique slugs: service.free_slug)
    versions: dict[str, int] = dict(p.bases)
    before: dict[str, Any] = {}
    state: dict[str, float] = {}
    edited: dict[str, dict[str, Any]] = {}  # the edited fields of each memory, as the changes so far leave them
    linked: set[tuple[str, str, str]] = set()  # links this merge adds so far, and removes
    unlinked: set[tuple[str, str, str]] = set()
    for n, c in enumerate(p.changes, 1):
        if c["op"] == "create":
            mid = c.get("id") or uuid7()
            if memory(mid) is not None:
                raise refuse(n, c, f"{mid} exists already")
            before[mid] = None
            versions[mid] = 1
            body = {k: c[k] for k in ("kind", "title", "content", "attributes", "tags", "evidence")}
            gone_end(n, c, repr(c["title"]), c["kind"], c["attributes"])
            kinds[mid] = c["kind"]
            # the slug asked for, or the nearest free one (a memory made since may have it)
            body["slug"] = free_slug(con, c.get("slug") or slugify(c["title"], mid), slugs)
            slugs.add(body["slug"])
            # a confidence the change carries (an engram record's), else the proposer's prior
            body["confidence"] = c.get("confidence", conf.prior(_author(p)))
            body["lifetime"] = c.get("lifetime", {"policy": "standard", "until": None})
            body["visibility"] = c.get("visibility", {"visibility": "shared", "allowed_actors": []})
            ops.append({"name": "memory_created", "memory_id": mid, "version": 1, "body": body})
            live[mid] = {"slug": body["slug"], "archived": bool(c.get("archived")), "deleted": False}
            edited[mid] = {k: body[k] for k in ("title", "content", "attributes", "tags", "slug")}
            for flag, name in (("pinned", "memory_pinned"), ("archived", "memory_archived")):
                if c.get(flag):
                    versions[mid] += 1
                    ops.append({"name": name, "memory_id": mid, "version": versions[mid],
                                "body": {"pinned": True} if flag == "pinned" else {}})
            continue
        mid = c["memory"]
        m = memory(mid)
        if m is None or m["deleted"]:
            raise refuse(n, c, f"{m['slug'] if m else mid} is gone")
        if m["archived"] and c["op"] in ("edit", "link"):
            raise refuse(n, c, f"{m['slug']} is archived: restore it first")
        fields = edited[mid] if mid in edited else edited.setdefault(mid, _fields(con, mid))
        if _changes_nothing(c, fields, m, linked, unlinked, con):
            continue  # as the direct command: what is so already writes nothing (and takes no version)
        if mid not in before:
            before[mid] = snapshot(con, mid)
        versions[mid] += 1
        if c["op"] == "edit":
            body = {k: v for k, v in c["fields"].items() if fields.get(k) != v}  # the fields that change
            fields.update(body)
            name = "memory_edited"
            if "attributes" in body:
                kind = kinds.get(mid) or con.execute("SELECT kind FROM memories WHERE id = ?", (mid,)).fetchone()[0]
                gone_end(n, c, m["slug"], kind, body["attributes"])
            if "slug" in body:  # taken by another memory since the proposal was opened
                try:
                    check_slug_free(con, body["slug"], mid)
                except InvalidMemory as e:
                    raise refuse(n, c, str(e)) from None
        elif c["op"] in ("confirm", "contradict"):
            current = state.get(mid, before[mid]["memory"]["confidence"])
            value = conf.confirmed(current, "agent") if c["op"] == "confirm" else conf.contradicted(current, "agent")
            state[mid] = value
            name, body = f"memory_{c['op']}ed", {"confidence": value}
        elif c["op"] == "add_evidence":
            name, body = "memory_evidence_added", {"evidence": c["evidence"]}
        elif c["op"] == "link":
            target = memory(c["target"])
            if target is None or target["deleted"]:
                raise refuse(n, c, f"{m['slug']} would link to {target['slug'] if target else c['target']}, "
                                   "which is gone")
            name, body = "memory_linked", {"relation": c["relation"], "target": c["target"]}
            unlinked.discard((mid, c["relation"], c["target"]))
            linked.add((mid, c["relation"], c["target"]))
        elif c["op"] == "unlink":
            key = (mid, c["relation"], c["target"])
            if key not in linked and (key in unlinked or not con.execute(
                    "SELECT 1 FROM links WHERE source = ? AND relation = ? AND target = ?", key).fetchone()):
                raise refuse(n, c, f"{m['slug']} is no longer linked {c['relation']} → {c['target']}")
            linked.discard(key)
            unlinked.add(key)
            name, body = "memory_unlinked", {"relation": c["relation"], "target": c["target"]}
        elif c["op"] == "archive":
            name, body = "memory_archived", {}
            m["archived"] = True
        else:
            name, body = "memory_deleted", {}
            m["deleted"] = True
        ops.append({"name": name, "memory_id": mid, "version": versions[mid], "body": body})
    return ops, before, {mid: versions[mid] for mid in before}


def _fields(con: sqlite3.Connection, mid: str) -> dict[str, Any]:
    """A memory's fields an edit changes, as an edit change holds them (decoded)."""
    row = con.execute("SELECT title, content, attributes, tags, slug FROM memories WHERE id = ?", (mid,)).fetchone()
    if row is None:  # (a memory the merge creates: its fields are kept from its create)
        return {}
    return {"title": row[0], "content": row[1], "attributes": json.loads(row[2]), "tags": json.loads(row[3]),
            "slug": row[4]}


def _changes_nothing(c: dict[str, Any], fields: dict[str, Any], m: dict[str, Any],
                     linked: set[tuple[str, str, str]], unlinked: set[tuple[str, str, str]],
                     con: sqlite3.Connection) -> bool:
    """An edit whose every field is so already, a link that exists already, an archive of an
    archived memory (as the merge's earlier changes leave them)."""
    if c["op"] == "edit":
        return all(fields.get(k) == v for k, v in c["fields"].items())
    if c["op"] == "link":
        key = (c["memory"], c["relation"], c["target"])
        return key in linked or (key not in unlinked and con.execute(
            "SELECT 1 FROM links WHERE source = ? AND relation = ? AND target = ?", key).fetchone() is not None)
    if c["op"] == "archive":
        return bool(m["archived"])
    return False


def reject(root: str, pid: str, *, reason: str | None = None, actor: str = "person") -> Proposal:
    p = get(root, pid)
    _must_be(p, "open", "rejected")

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        _must_be(_load(con, p.id), "open", "rejected")
        return [new_event("proposal_rejected", "", 0, actor, {"reason": reason}, proposal_id=p.id)], {}

    transact(root, decide)
    return get(root, p.id)


def undo(root: str, pid: str, *, actor: str = "person") -> Proposal:
    """Put back every memory a merged proposal touched as it was before — refused if any
    changed after the merge, or if another memory links to one it created (undo would leave
    that link pointing at nothing). Its cost: the touched memories' rows, and for each created
    one the links to it (an index: never the log, never every link)."""
    p = get(root, pid)
    if p.status != "merged" or not p.merged:
        raise InvalidMemory(f"proposal {p.id} is {p.status}: only a merged proposal can be undone")
    before, after = p.merged["before"], p.merged["after"]

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        _must_be(_load(con, p.id), "merged", "undone")
        for mid, version in sorted(after.items()):
            row = con.execute("SELECT version, slug FROM memories WHERE id = ?", (mid,)).fetchone()
            if row is None or row[0] != version:
                raise StaleProposal(f"memory {row[1] if row else mid} changed after the merge (version {version} "
                                    f"then, {row[0] if row else 'gone'} now): undo would lose that change; "
                                    "nothing was undone")
        for mid in sorted(m for m, snap in before.items() if snap is None):  # the memories it created
            for source, slug, relation in con.execute(
                    "SELECT l.source, m.slug, l.relation FROM links l JOIN memories m ON m.id = l.source "
                    "WHERE l.target = ? ORDER BY l.source, l.relation", (mid,)):
                if source not in before:
                    made = con.execute("SELECT slug FROM memories WHERE id = ?", (mid,)).fetchone()
                    name = made[0] if made else mid
                    raise StaleProposal(f"memory {slug} was linked to {name}, which the proposal created, after the "
                                        "merge: undo would leave that link pointing at nothing; nothing was undone "
                                        f"(remove the link first: agentlog memory unlink {slug} {relation} {name})")
            for source, slug, role in con.execute(  # a relationship naming it (the two partial indexes)
                    "SELECT id, slug, 'subject_id' FROM memories WHERE kind = 'relationship' AND deleted = 0 AND "
                    "json_extract(attributes, '$.subject_id') = ? UNION ALL "
                    "SELECT id, slug, 'object_id' FROM memories WHERE kind = 'relationship' AND deleted = 0 AND "
                    "json_extract(attributes, '$.object_id') = ? ORDER BY 1, 3", (mid, mid)):
                if source not in before:
                    made = con.execute("SELECT slug FROM memories WHERE id = ?", (mid,)).fetchone()
                    raise StaleProposal(f"relationship {slug} names {made[0] if made else mid}, which the proposal "
                                        f"created, as its {role}: undo would leave it naming nothing; nothing was "
                                        "undone (edit or delete that relationship first)")
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
