"""Importing an engram export (``shared/reference/engram.md`` §8) as one proposal.

engram writes every memory's current state twice: ``metadata/memories.ndjson``
(§8.3: sorted keys; ``id, kind, title, slug, content, attributes, tags, links,
evidence, confidence, visibility, lifetime, lifetime_until, archived, pinned,
created_by, created_at, updated_at, version``) and one markdown file per memory
under ``memory/<kind-plural>/`` (§8.2: YAML front matter with the same fields,
the content, and a trailing ``## Evidence`` heading with a fenced ``yaml`` list).
The NDJSON is read when the export has it, else the markdown (an export made
with ``--format markdown``).

Each memory becomes a ``create`` change keeping its id, slug, confidence,
evidence, lifetime, visibility and flags, and each of its links a ``link``
change, so approving the proposal gives the same memories. engram's kinds and
attribute names are ours, but engram checks attribute names only, so its
values can be loose. One memory's loose value never fails the import:

- a string that is unambiguously the declared type is converted (``"51.5"`` for
  a number, ``"true"`` for a boolean, ``"Company"`` for ``company``, one string
  for a list of one; a YAML date or time for an ISO one);
- a value that cannot be is kept, not dropped: the attribute leaves the
  attributes, a line in the memory's content says what engram had
  (``engram org_type: "cult" (…)``) and the memory is tagged ``engram-loose``
  (``tag:engram-loose`` finds them); a required attribute whose closed
  vocabulary has ``other`` takes ``other``;
- a memory that still cannot be made (an unknown kind, no title, a required
  attribute missing or unfixable, an id this memory has already, a
  relationship naming a memory neither in the export nor here) is left out,
  and so are links to it or to a memory that is nowhere; relationships come
  after the memories they name (engram's records need not);
- a confidence, visibility, lifetime, slug, tag or evidence item that is not
  valid is replaced by the default (the import prior 0.70, ``private`` — closed,
  as engram's recall treats an unknown visibility — ``standard``, a slug from
  the title) or left out.

Every such decision is reported per memory (:class:`EngramImport.report`). Not
kept: engram's times and versions (the memories are new here, made when the
proposal is merged).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Final

from agentlog.core.timefmt import format_datetime
from agentlog.memory.exchange import ExchangeError
from agentlog.memory.model import (
    EVIDENCE_TYPES,
    LIFETIMES,
    LINK_RELATIONS,
    SCHEMAS,
    VISIBILITIES,
    Attr,
    InvalidMemory,
    relationship_ends,
    validate_attributes,
    validate_evidence,
    validate_lifetime,
    validate_slug,
    validate_title,
)

LOOSE_TAG: Final = "engram-loose"
_EVIDENCE_MARK: Final = re.compile(r"^## Evidence[ \t]*\n+```ya?ml[ \t]*\n", re.M)


@dataclass
class EngramImport:
    """What an engram import opened: the proposal, how many memories it creates, and per memory
    what was converted, kept aside or left out (``{"id", "title", "notes", "skipped"}``)."""

    proposal: Any
    memories: int
    report: list[dict[str, Any]] = field(default_factory=list)


def _iso(value: Any) -> Any:
    """A YAML time or date as ISO 8601 text (UTC times with ``Z``); anything else as it is."""
    if isinstance(value, datetime):
        return format_datetime(value)
    if isinstance(value, date):
        return value.isoformat()
    return value


def _coerce(attr: Attr, value: Any) -> Any:
    """``value`` as ``attr``'s type when it unambiguously is one (else as it was)."""
    value = _iso(value)
    t = attr.type
    if t in ("number", "float01") and isinstance(value, str):
        try:
            n = float(value.strip())
        except ValueError:
            return value
        return int(n) if t == "number" and n.is_integer() and "." not in value else n
    if t == "bool" and isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        return value.strip().lower() in ("true", "yes")
    if t == "list" and isinstance(value, str) and value.strip():
        return [value]
    if t in ("str", "text") and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if attr.choices and isinstance(value, str) and value.strip().lower() in attr.choices:
        return value.strip().lower()
    return value


def _attributes(kind: str, raw: dict[str, Any], notes: list[str], loose: list[str]) -> dict[str, Any]:
    """``raw`` checked attribute by attribute: converted where it can be, kept aside (``loose``)
    where it cannot; raises :class:`InvalidMemory` when the memory cannot be made."""
    schema = {a.name: a for a in SCHEMAS[kind]}
    out: dict[str, Any] = {}
    for name, value in sorted(raw.items()):
        if value is None:
            continue
        attr = schema.get(name)
        if attr is None:
            loose.append(f"engram {name}: {json.dumps(value, default=str, ensure_ascii=False)} "
                         f"({kind} has no such attribute)")
            continue
        got = _coerce(attr, value)
        try:
            validate_attributes(kind, {**{a.name: _stand_in(a) for a in schema.values() if a.required},
                                       name: got})
        except InvalidMemory as e:
            if attr.required and "other" in attr.choices:
                out[name] = "other"
                notes.append(f"{name}: {value!r} is not one of its values: 'other' (engram's value kept in the content)")
            elif attr.required:
                raise InvalidMemory(f"{e} (a required attribute)") from None
            loose.append(f"engram {name}: {json.dumps(value, default=str, ensure_ascii=False)} ({e})")
            continue
        if got != _iso(value):  # (a YAML time read as ISO text is not worth a note)
            notes.append(f"{name}: {value!r} read as {got!r}")
        out[name] = got
    return validate_attributes(kind, out)


def _stand_in(attr: Attr) -> Any:
    """A valid value of ``attr`` (to check one other attribute alone against the schema)."""
    if attr.choices:
        return attr.choices[0]
    return {"list": ["x"], "uuid": str(uuid.UUID(int=0)), "time": "2000-01-01T00:00:00Z", "date": "2000-01-01",
            "bool": True, "number": 0, "float01": 0.0}.get(attr.type, "x")


def _create(r: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The ``create`` change of one engram record; raises :class:`InvalidMemory` when it cannot be made."""
    try:
        mid = str(uuid.UUID(str(r.get("id"))))
    except ValueError:
        raise InvalidMemory(f"its id {r.get('id')!r} is not a UUID") from None
    kind = r.get("kind")
    if kind not in SCHEMAS:
        raise InvalidMemory(f"unknown kind {kind!r}")
    title = validate_title(r.get("title"))
    loose: list[str] = []
    raw = r.get("attributes") or {}
    attrs = _attributes(str(kind), raw if isinstance(raw, dict) else {}, notes, loose)
    content: str = r["content"] if isinstance(r.get("content"), str) else ""
    tags = [t for t in r.get("tags") or [] if isinstance(t, str)] if isinstance(r.get("tags"), list) else []
    if len(tags) != len(r.get("tags") or []):
        notes.append("tags that are not text left out")
    if loose:
        content = (content.rstrip("\n") + "\n\n" if content.strip() else "") + "\n".join(loose)
        tags.append(LOOSE_TAG)
        notes.append(f"kept in its content, tagged {LOOSE_TAG}: " + "; ".join(loose))
    change: dict[str, Any] = {"op": "create", "id": mid, "kind": kind, "title": title, "content": content,
                              "attributes": attrs, "tags": tags, "evidence": [],
                              "archived": r.get("archived") is True, "pinned": r.get("pinned") is True}
    try:
        if r.get("slug"):
            change["slug"] = validate_slug(r["slug"])
    except InvalidMemory:
        notes.append(f"slug {r['slug']!r} is not a slug here: one made from the title")
    c = r.get("confidence")
    if isinstance(c, str):
        try:
            c = float(c)
            notes.append(f"confidence {r['confidence']!r} read as {c!r}")
        except ValueError:
            pass
    if isinstance(c, (int, float)) and not isinstance(c, bool) and 0 <= c <= 1:
        change["confidence"] = float(c)
    elif c is not None:
        notes.append(f"confidence {r.get('confidence')!r} is not a number from 0 to 1: the import prior")
    vis = r.get("visibility") or "shared"
    if vis not in VISIBILITIES:
        notes.append(f"visibility {vis!r} is not one of {', '.join(VISIBILITIES)}: private")
        vis = "private"
    change["visibility"] = {"visibility": vis}
    policy, until = r.get("lifetime") or "standard", _iso(r.get("lifetime_until"))
    try:
        change["lifetime"] = validate_lifetime(policy, until if policy == "until" else None)
    except InvalidMemory as e:
        notes.append(f"lifetime {policy!r}{' until ' + str(until) if until else ''}: {e}: standard"
                     if policy in LIFETIMES else f"lifetime {policy!r} is not one of {', '.join(LIFETIMES)}: standard")
        change["lifetime"] = {"policy": "standard", "until": None}
    for item in r.get("evidence") or []:
        ref = {k: item[k] for k in ("type", "value", "note") if isinstance(item, dict) and item.get(k) is not None}
        try:
            if ref.get("type") not in EVIDENCE_TYPES or ref.get("type") in ("event", "attempt", "session",
                                                                             "tool_call"):
                raise InvalidMemory(f"evidence type {ref.get('type')!r} is not engram's")
            change["evidence"].append(validate_evidence(ref))
        except InvalidMemory as err:
            notes.append(f"evidence {json.dumps(item, default=str, ensure_ascii=False)} left out: {err}")
    return change


def _front_matter(path: str) -> dict[str, Any]:
    """One markdown file of an engram export (§8.2) as a record of the NDJSON's shape."""
    import yaml

    with open(path, encoding="utf-8-sig") as fh:
        text = fh.read()
    if not text.startswith("---\n"):
        raise InvalidMemory("no --- front matter")
    end = text.find("\n---\n", 3)
    if end < 0:
        raise InvalidMemory("its front matter is not closed")
    try:
        record = yaml.safe_load(text[4:end + 1])
    except yaml.YAMLError as e:
        raise InvalidMemory(f"its front matter is not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(record, dict):
        raise InvalidMemory("its front matter is not a mapping")
    body = text[end + 5:]
    marks = list(_EVIDENCE_MARK.finditer(body))
    if marks:  # the last ``## Evidence`` heading with a yaml fence (a memory's own text may hold another)
        mark = marks[-1]
        fence = body.find("\n```", mark.end() - 1)
        try:
            record["evidence"] = yaml.safe_load(body[mark.end():fence if fence >= 0 else len(body)]) or []
        except yaml.YAMLError as e:
            raise InvalidMemory(f"its evidence block is not YAML ({str(e).splitlines()[0]})") from None
        body = body[:mark.start()]
    record["content"] = body.strip("\n")
    return record


def _records(src: str) -> tuple[str, list[tuple[str, dict[str, Any] | str]]]:
    """(what was read, [(where, record or what is wrong with it)]) of the export at ``src``."""
    ndjson = os.path.join(src, "metadata", "memories.ndjson")
    out: list[tuple[str, dict[str, Any] | str]] = []
    if os.path.isfile(ndjson):
        with open(ndjson, encoding="utf-8-sig") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    out.append((f"line {n}", "not JSON"))
                    continue
                out.append((f"line {n}", r if isinstance(r, dict) else "not a memory record"))
        return ndjson, out
    base = os.path.join(src, "memory")
    if not os.path.isdir(base):
        raise ExchangeError(f"{src}: not an engram export (no metadata/memories.ndjson, no memory/ directory)")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".md") or name.lower() == "readme.md":
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, src)
            try:
                out.append((rel, _front_matter(path)))
            except (InvalidMemory, OSError, UnicodeDecodeError) as e:
                out.append((rel, str(e)))
    return os.path.join(src, "memory"), out


def changes_from(src: str, existing: set[str] | frozenset[str] = frozenset(),
                 known: set[str] | frozenset[str] = frozenset()) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The proposal's changes for the engram export at ``src``, and the per-memory report.
    ``existing``: ids this memory has already (such a record is left out); ``known``: ids a
    link may point at besides the export's own."""
    where, records = _records(src)
    creates: list[dict[str, Any]] = []
    pending_links: list[tuple[dict[str, Any], dict[str, Any]]] = []
    report: list[dict[str, Any]] = []
    seen: set[str] = set()
    for at, r in records:
        notes: list[str] = []
        entry: dict[str, Any] = {"id": r.get("id") if isinstance(r, dict) else None,
                 "title": r.get("title") if isinstance(r, dict) else None, "at": at, "notes": notes,
                 "skipped": False}
        try:
            if not isinstance(r, dict):
                raise InvalidMemory(r)
            change = _create(r, notes)
            if change["id"] in seen:
                raise InvalidMemory("its id is another record's")
            if change["id"] in existing:
                raise InvalidMemory("a memory with its id exists here already")
        except InvalidMemory as e:
            entry["skipped"] = True
            notes.append(f"left out: {e}")
            report.append(entry)
            continue
        seen.add(change["id"])
        creates.append(change)
        raw_links = r.get("links") or []
        pending_links += [(change, link) for link in (raw_links if isinstance(raw_links, list) else [raw_links])]
        if notes:
            report.append(entry)
    creates = _relationships_last(creates, seen, known, report)
    links: list[dict[str, Any]] = []
    for change, link in pending_links:
        target = str(link.get("target")) if isinstance(link, dict) else None
        relation = link.get("relation") if isinstance(link, dict) else None
        why = ("its relation is not one of engram's" if relation not in LINK_RELATIONS else
               "its target is neither in the export nor here" if target not in seen and target not in known else
               "a memory cannot link to itself" if target == change["id"] else None)
        if why is None:
            links.append({"op": "link", "memory": change["id"], "relation": relation, "target": target})
            continue
        found = next((e for e in report if e["id"] == change["id"]), None)
        if found is None:
            found = {"id": change["id"], "title": change["title"], "at": "", "notes": [], "skipped": False}
            report.append(found)
        found["notes"].append(f"link {json.dumps(link, default=str)} left out: {why}")
    if not creates:
        problems = "; ".join(f"{e['at']}: {' '.join(e['notes'])}" for e in report[:20])
        raise ExchangeError(f"{where}: no memory to import" + (f" ({problems})" if problems else ""))
    return creates + links, report


def _relationships_last(creates: list[dict[str, Any]], seen: set[str], known: set[str] | frozenset[str],
                        report: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The creates with each relationship after the memories it names (a proposal's change may
    name only what is there or made by an earlier change); a relationship naming a memory
    neither in the export nor here — or one left out — is left out itself, and reported
    (its id leaves ``seen``: links to it are left out too)."""
    placed = set(known) | {c["id"] for c in creates if c["kind"] != "relationship"}
    waiting = [c for c in creates if c["kind"] == "relationship"]
    ordered = [c for c in creates if c["kind"] != "relationship"]

    def unplaced(c: dict[str, Any]) -> list[str]:  # the ends not made before it ("subject_id <id>")
        return [f"{name} {end}" for name, end in relationship_ends("relationship", c["attributes"])
                if end not in placed or end == c["id"]]

    while waiting:  # (relationships naming relationships: as many rounds as the longest chain)
        ready = [c for c in waiting if not unplaced(c)]
        if not ready:
            break
        ordered += ready
        placed.update(c["id"] for c in ready)
        waiting = [c for c in waiting if c["id"] not in placed]  # (ids are unique among the creates)
    for c in waiting:
        missing = unplaced(c)
        seen.discard(c["id"])
        found = next((e for e in report if e["id"] == c["id"]), None)
        if found is None:
            found = {"id": c["id"], "title": c["title"], "at": "", "notes": [], "skipped": True}
            report.append(found)
        found["skipped"] = True
        found["notes"].append(f"left out: the relationship's {', '.join(missing)} names a memory neither in the "
                              "export nor here")
    return ordered


def import_engram(root: str, src: str) -> EngramImport:
    """One proposal creating the memories of the engram export at ``src`` (actor ``import``)."""
    from agentlog.memory.proposals import open_proposal
    from agentlog.memory.store import connect

    con = connect(root)
    try:
        ids = {str(r[0]) for r in con.execute("SELECT id FROM memories WHERE deleted = 0")}
        every = {str(r[0]) for r in con.execute("SELECT id FROM memories")}
    finally:
        con.close()
    changes, report = changes_from(src, existing=every, known=ids)
    n = sum(1 for c in changes if c["op"] == "create")
    p = open_proposal(root, changes, title=f"import {n} memories from engram ({os.path.basename(os.path.abspath(src))})",
                      actor="import")
    return EngramImport(p, n, report)
