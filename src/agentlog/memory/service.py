"""Memory commands: decide (validate against the current state), then write events.

Each command reads the memory it changes, checks the change against the rules
of :mod:`.model`, builds its events and hands them to :func:`.store.transact`
with the version it was based on — so a concurrent change makes it fail with
:class:`.store.VersionConflict` rather than overwrite. Commands that change
nothing write nothing.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from typing import Any, Callable, Final

from agentlog.memory import confidence as conf
from agentlog.memory.model import (
    RECORDED_EVIDENCE,
    InvalidMemory,
    normalize_tags,
    relationship_ends,
    slugify,
    suffixed,
    validate_attributes,
    validate_evidence,
    validate_lifetime,
    validate_link,
    validate_slug,
    validate_title,
    validate_visibility,
)
from agentlog.memory.rows import COLUMNS as _COLUMNS, Memory, annotate, loads_column as _loads, memory_from_row as _row
from agentlog.memory.store import NotFound, connect, new_event, transact

ACTORS: Final = ("person", "agent", "import")
def _now() -> int:
    return time.time_ns() // 1000


def get(root: str, ident: str, *, con: sqlite3.Connection | None = None, with_deleted: bool = False,
        now_us: int | None = None) -> Memory:
    """A memory by id, unambiguous id prefix (≥ 4 characters) or slug."""
    own = con is None
    c = con or connect(root)
    try:
        rows = c.execute(f"SELECT {', '.join(_COLUMNS)} FROM memories WHERE id = ? OR slug = ?", (ident, ident)).fetchall()
        if not rows and len(ident) >= 4 and re.fullmatch(r"[0-9a-f-]+", ident):
            rows = c.execute(f"SELECT {', '.join(_COLUMNS)} FROM memories WHERE id LIKE ? || '%'", (ident,)).fetchall()
        rows = [r for r in rows if with_deleted or not r[16]]
        if not rows:
            raise NotFound(f"no memory {ident!r}")
        if len(rows) > 1:  # (an id prefix; or a slug two memories share in a log written before slugs were unique)
            raise NotFound(f"{ident!r} names {len(rows)} memories ({', '.join(sorted(r[0] for r in rows))}); "
                           "give more of the id")
        m = _row(rows[0], now_us if now_us is not None else _now())
        m.evidence = [_loads(r[0]) for r in c.execute(
            "SELECT ref FROM evidence WHERE memory_id = ? ORDER BY seq", (m.id,))]
        m.links = [(r[0], r[1]) for r in c.execute(
            "SELECT relation, target FROM links WHERE source = ? ORDER BY relation, target", (m.id,))]
        annotate(c, [m])
        return m
    finally:
        if own:
            c.close()


def current_engine(root: str) -> Any:
    """A query engine over the store and projection, caught up with the logs first: evidence
    recorded a moment ago by a hook is there."""
    from agentlog.projection.current import bring_up_to_date
    from agentlog.query.engine import Engine

    bring_up_to_date(root)
    return Engine(root)


def check_recorded(root: str, refs: list[dict[str, Any]]) -> None:
    """Evidence that names recorded things must name things that exist (the store is
    asked; only then is the columnar stack loaded). A value is what the other commands
    take: the id, with its display prefix (``att_…``) or without, or an unambiguous prefix
    of at least 4 hex digits (``att_3fecf63b``, as ``agentlog timeline`` prints it) — each
    replaced here by the full id, so the memory names exactly one thing. A prefix several
    things share is refused, naming them."""
    recorded = [r for r in refs if r["type"] in RECORDED_EVIDENCE]
    if not recorded:
        return
    from agentlog.query.views import AmbiguousId, IdError, resolve_id

    engine = current_engine(root)
    with engine:
        for r in recorded:
            try:
                r["value"] = resolve_id(engine, r["value"], [r["type"]]).id
            except AmbiguousId as e:
                raise InvalidMemory(f"evidence {r['type']} {r['value']!r} is ambiguous: it matches "
                                    f"{', '.join(e.candidates[:8])}{' …' if len(e.candidates) > 8 else ''}; "
                                    "give more of the id") from None
            except IdError as e:  # unknown, or not an id at all
                raise InvalidMemory(f"evidence {r['type']} {r['value']!r} is not in the recorded history "
                                    f"({e})") from None


def create(root: str, kind: str, title: str, *, content: str = "", attributes: dict[str, Any] | None = None,
           tags: list[str] | None = None, evidence: list[dict[str, Any]] | None = None, slug: str | None = None,
           actor: str = "person", lifetime: str = "standard", until: str | None = None,
           visibility: str = "shared", allowed_actors: list[str] | None = None, pinned: bool = False) -> Memory:
    """A new memory (a person's own; agents and importers open proposals instead). Without
    ``slug``, one made from the title and id, made unique; a ``slug`` another memory has is
    refused."""
    if actor not in ACTORS:
        raise InvalidMemory(f"actor is one of {', '.join(ACTORS)}, not {actor!r}")
    from agentlog.core.ids import uuid7

    mid = uuid7()
    title = validate_title(title)
    attrs = validate_attributes(kind, attributes or {})
    refs = [validate_evidence(r) for r in evidence or []]
    check_recorded(root, refs)
    wanted = validate_slug(slug) if slug else None
    body = {
        "kind": kind, "title": title, "slug": "",
        "content": content if isinstance(content, str) else "", "attributes": attrs, "tags": normalize_tags(tags),
        "confidence": conf.prior(actor), "evidence": refs, "lifetime": validate_lifetime(lifetime, until),
        "visibility": validate_visibility(visibility, allowed_actors),
    }

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        # the slug decided under the lock, against every memory there is (no other write can take it meanwhile)
        check_relationship_ends(con, kind, attrs, mid)
        if wanted is not None:
            check_slug_free(con, wanted, mid)
            body["slug"] = wanted
        else:
            body["slug"] = free_slug(con, slugify(title, mid))
        events = [new_event("memory_created", mid, 1, actor, body)]
        if pinned:
            events.append(new_event("memory_pinned", mid, 2, actor, {"pinned": True}))
        return events, {mid: None}

    folded = transact(root, decide)
    return _as_created(folded[0]) if not pinned else get(root, mid)


def slug_owner(con: sqlite3.Connection, slug: str) -> str | None:
    """The memory that has ``slug`` (deleted ones too: undo can bring a tombstone back; a
    purged one has left the read model, and its slug is free)."""
    row = con.execute("SELECT id FROM memories WHERE slug = ? ORDER BY id LIMIT 1", (slug,)).fetchone()
    return str(row[0]) if row else None


def free_slug(con: sqlite3.Connection, wanted: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """``wanted`` if no memory (nor ``taken``: slugs given earlier in the same write) has it, else
    the first of ``wanted-2``, ``wanted-3`` … that none has. Slugs are unique across every kind
    (``show SLUG`` and ``linked:SLUG`` name one memory)."""
    slug, n = wanted, 1
    while slug in taken or slug_owner(con, slug) is not None:
        n += 1
        slug = suffixed(wanted, n)
    return slug


def check_slug_free(con: sqlite3.Connection, slug: str, mid: str) -> None:
    """Refuse ``slug`` for memory ``mid`` when another memory has it."""
    owner = con.execute("SELECT id, title FROM memories WHERE slug = ? AND id != ? ORDER BY id LIMIT 1",
                        (slug, mid)).fetchone()
    if owner is not None:
        raise InvalidMemory(f"slug {slug!r} is taken by memory {owner[0]} ({owner[1]!r}): choose another")


def check_relationship_ends(con: sqlite3.Connection, kind: str, attributes: dict[str, Any], mid: str,
                            created: set[str] | frozenset[str] = frozenset()) -> None:
    """A relationship names memories that exist (not deleted) — or that ``created`` holds (made
    by the same proposal's earlier changes) — and not itself; other kinds name none."""
    for name, end in relationship_ends(kind, attributes):
        if end == mid:
            raise InvalidMemory(f"a relationship's {name} cannot be the relationship itself")
        if end in created:
            continue
        row = con.execute("SELECT deleted, slug FROM memories WHERE id = ?", (end,)).fetchone()
        if row is None or row[0]:
            raise InvalidMemory(f"the relationship's {name} {end} names no memory here"
                                + (f" ({row[1]} was deleted)" if row else ""))


def _as_created(ev: dict[str, Any]) -> Memory:
    """The memory a ``memory_created`` event just written and folded made: its row as the fold
    wrote it (:func:`.store.created_row`) read as :func:`get` reads it — without asking the
    read model again (a test holds the two equal). ``ev`` as folded (parsed from the bytes
    written), so its JSON columns are their values already: decoding their text gives the same."""
    from agentlog.memory.store import created_row

    a, c = ev["attrs"], ev["content"]
    row = created_row(a["memory_id"], int(a["version"]), str(a["actor"]), int(ev["observed_at"]), c, _same)
    m = _row(row, _now(), decoded=True)
    m.evidence = [json.loads(json.dumps(r, sort_keys=True)) for r in c.get("evidence", [])]
    m.links = []
    return m


def _same(value: Any) -> Any:
    return value


def edit(root: str, ident: str, *, expected_version: int | None = None, actor: str = "person",
         title: str | None = None, content: str | None = None, attributes: dict[str, Any] | None = None,
         tags: list[str] | None = None, slug: str | None = None, pinned: bool | None = None,
         lifetime: str | None = None, until: str | None = None, visibility: str | None = None,
         allowed_actors: list[str] | None = None) -> Memory:
    """Change what is given (None: left as it is). Title, content, attributes, tags and slug
    are refused on an archived memory; pinned, lifetime and visibility are not (engram's
    rule). ``until`` alone means the lifetime ``until``; ``allowed_actors`` alone, the
    visibility ``restricted``. One ``memory_edited`` event, and a ``memory_pinned`` when the
    flag changes; nothing when nothing changes."""
    m = get(root, ident)
    change: dict[str, Any] = {}
    if title is not None and validate_title(title) != m.title:
        change["title"] = validate_title(title)
    if slug is not None and validate_slug(slug) != m.slug:
        change["slug"] = slug
    if content is not None and content != m.content:
        change["content"] = content
    if attributes is not None:
        merged = validate_attributes(m.kind, {**m.attributes, **attributes})
        if merged != m.attributes:
            change["attributes"] = merged
    if tags is not None and normalize_tags(tags) != m.tags:
        change["tags"] = normalize_tags(tags)
    if change:
        _not_archived(m)
    if lifetime is not None or until is not None:
        new_lifetime = validate_lifetime(lifetime or "until", until)
        if new_lifetime != m.lifetime:
            change["lifetime"] = new_lifetime
    if visibility is not None or allowed_actors is not None:
        new_visibility = validate_visibility(visibility or "restricted", allowed_actors)
        if new_visibility != m.visibility:
            change["visibility"] = new_visibility

    def check(con: sqlite3.Connection) -> None:  # under the lock, against every memory there is
        if "slug" in change:
            check_slug_free(con, change["slug"], m.id)
        if "attributes" in change:
            check_relationship_ends(con, m.kind, change["attributes"], m.id)

    events = [("memory_edited", change)] if change else []
    if pinned is not None and pinned != m.pinned:
        events.append(("memory_pinned", {"pinned": pinned}))
    return _change(root, m, events, expected_version, actor, check) if events else m


def confirm(root: str, ident: str, *, actor: str = "person", expected_version: int | None = None) -> Memory:
    m = get(root, ident)
    return _change(root, m, "memory_confirmed", expected_version, actor,
                   body={"confidence": conf.confirmed(m.confidence, _weight(actor))})


def contradict(root: str, ident: str, *, actor: str = "person", expected_version: int | None = None) -> Memory:
    m = get(root, ident)
    return _change(root, m, "memory_contradicted", expected_version, actor,
                   body={"confidence": conf.contradicted(m.confidence, _weight(actor))})


def add_evidence(root: str, ident: str, ref: dict[str, Any], *, actor: str = "person",
                 expected_version: int | None = None) -> Memory:
    m = get(root, ident)
    clean = validate_evidence(ref)
    check_recorded(root, [clean])
    return _change(root, m, "memory_evidence_added", expected_version, actor, body={"evidence": clean})


def link(root: str, ident: str, relation: str, target: str, *, actor: str = "person",
         expected_version: int | None = None) -> Memory:
    m = get(root, ident)
    _not_archived(m)
    other = get(root, target)
    validate_link(relation, m.id, other.id)
    if (relation, other.id) in (m.links or []):
        return m
    return _change(root, m, "memory_linked", expected_version, actor, body={"relation": relation, "target": other.id})


def unlink(root: str, ident: str, relation: str, target: str, *, actor: str = "person",
           expected_version: int | None = None) -> Memory:
    """Remove the link ``relation`` from memory ``ident`` to ``target`` (a memory's id, id
    prefix or slug — or the id of a memory since deleted, which a link can still name);
    refused when there is no such link. An archived memory's links can be removed."""
    m = get(root, ident)
    target_id = _link_target(root, m, target)
    if (relation, target_id) not in (m.links or []):
        have = ", ".join(f"{r} → {t}" for r, t in m.links or []) or "none"
        raise InvalidMemory(f"memory {m.slug} has no link {relation} → {target} (its links: {have})")
    return _change(root, m, "memory_unlinked", expected_version, actor, body={"relation": relation, "target": target_id})


def _link_target(root: str, m: Memory, target: str) -> str:
    """The id ``target`` names among ``m``'s link targets: a memory found as every command finds
    one when ``m`` links to it; else the one target id of ``m``'s links that is or starts with
    ``target`` (a memory deleted since); else the memory found (the caller says there is no link)."""
    try:
        found: str | None = get(root, target).id
    except NotFound:
        found = None
    targets = {t for _, t in m.links or []}
    if found in targets:
        return str(found)
    ids = sorted(t for t in targets if t == target or (len(target) >= 4 and t.startswith(target)))
    if len(ids) == 1:
        return ids[0]
    if found is None:
        raise NotFound(f"no memory {target!r}" + (f" ({target!r} starts {len(ids)} of the ids {m.slug} links to; "
                                                   "give more of it)" if ids else ""))
    return found


def archive(root: str, ident: str, *, restore: bool = False, actor: str = "person",
            expected_version: int | None = None) -> Memory:
    m = get(root, ident)
    if m.archived != restore:
        return m
    return _change(root, m, "memory_restored" if restore else "memory_archived", expected_version, actor)


def delete(root: str, ident: str, *, actor: str = "person", expected_version: int | None = None) -> Memory:
    """A tombstone: gone from every listing; its events stay in the log."""
    m = get(root, ident)
    return _change(root, m, "memory_deleted", expected_version, actor)


def _weight(actor: str) -> str:
    return "person" if actor == "person" else "agent"


def _not_archived(m: Memory) -> None:
    if m.archived:
        raise InvalidMemory(f"memory {m.slug} is archived: restore it first")


def _change(root: str, m: Memory, events: str | list[tuple[str, dict[str, Any]]], expected_version: int | None,
            actor: str, check: Callable[[sqlite3.Connection], None] | None = None,
            body: dict[str, Any] | None = None) -> Memory:
    """The ``events`` ((name, body) each; or one name with ``body``) changing ``m``, based on
    its version (or ``expected_version``); ``check`` runs under the lock first (what depends
    on other memories: a slug, a relationship's ends)."""
    base = m.version if expected_version is None else expected_version
    named = [(events, body or {})] if isinstance(events, str) else events
    evs = [new_event(name, m.id, base + i, actor, b) for i, (name, b) in enumerate(named, 1)]

    def decide(con: sqlite3.Connection) -> tuple[list[dict[str, Any]], dict[str, int | None]]:
        if check is not None:
            check(con)
        return evs, {m.id: base}

    transact(root, decide)
    return get(root, m.id, with_deleted=True)


def list_memories(root: str, *, kind: str | None = None, tag: str | None = None, include_archived: bool = False,
                  limit: int = 50, offset: int = 0, now_us: int | None = None) -> list[Memory]:
    con = connect(root)
    try:
        where = ["deleted = 0"]
        args: list[Any] = []
        if not include_archived:
            where.append("archived = 0")
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if tag:
            where.append("EXISTS (SELECT 1 FROM json_each(tags) WHERE value = ?)")
            args.append(tag.lower())
        rows = con.execute(f"SELECT {', '.join(_COLUMNS)} FROM memories WHERE {' AND '.join(where)} "
                           "ORDER BY pinned DESC, updated_at DESC, id LIMIT ? OFFSET ?", (*args, limit, offset))
        now = now_us if now_us is not None else _now()
        return annotate(con, [_row(r, now) for r in rows.fetchall()])
    finally:
        con.close()


def search(root: str, text: str, *, limit: int = 20, offset: int = 0,
           now_us: int | None = None, mode: str | None = None) -> list[tuple[Memory, float]]:
    """Memories matching ``text`` (words, phrases and operators: :mod:`.search`), by meaning
    too in ``mode`` hybrid or semantic (:mod:`.meaning`; hybrid is the default with the
    ``semantic`` extra), ranked by relevance × effective confidence; only the returned page is
    read whole."""
    from agentlog.memory import search as language

    con = connect(root)
    try:
        hits = language.run(con, text, limit=limit, offset=offset, now_us=now_us, root=root, mode=mode)
        annotate(con, [m for m, _ in hits])
        return hits
    finally:
        con.close()


def history(root: str, ident: str) -> list[dict[str, Any]]:
    """A memory's changes, oldest first: version, change, actor, when, proposal."""
    m = get(root, ident, with_deleted=True)
    con = connect(root)
    try:
        return [{"version": v, "change": ch, "actor": a, "at": at, "proposal_id": p}
                for v, ch, a, at, p in con.execute("SELECT version, change, actor, at, proposal_id FROM history "
                                                    "WHERE memory_id = ? ORDER BY n", (m.id,))]
    finally:
        con.close()


def _purged(root: str) -> dict[str, str]:
    from agentlog.log.purge_record import purged_events

    return purged_events(root)


def resolve_evidence(root: str, refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each evidence reference with what it points at, as recorded: an event's kind, tool
    and time; an attempt's outcome; a session's agent and span; a tool call's status. A
    recorded thing no longer in the history (purged, retracted) says so, never fails."""
    recorded = [r for r in refs if r["type"] in RECORDED_EVIDENCE]
    out = [dict(r) for r in refs]
    if not recorded:
        return out
    from agentlog.query.engine import QueryError

    sql = {
        "event": "SELECT kind, tool_name, observed_at, provider FROM events WHERE event_id = ?",
        "attempt": "SELECT outcome, failure_class, started_at, approach FROM attempts WHERE attempt_id = ?",
        "session": "SELECT provider, started_at, last_event_at, liveness FROM sessions WHERE session_id = ?",
        "tool_call": "SELECT tool_name, outcome_status, started_at, duration_ms FROM tool_calls WHERE tool_call_id = ?",
    }
    try:
        engine = current_engine(root)
    except QueryError as e:
        for r in out:
            if r["type"] in RECORDED_EVIDENCE:
                r["resolved"] = {"error": str(e)}
        return out
    with engine:
        for r in out:
            if r["type"] not in RECORDED_EVIDENCE:
                continue
            try:
                res = engine.run(sql[r["type"]], [r["value"]])
            except QueryError as e:
                r["resolved"] = {"error": str(e)}
                continue
            if not res.rows:
                purge_id = _purged(root).get(r["value"]) if r["type"] == "event" else None
                if purge_id is not None:
                    r["resolved"] = {"purged": True, "purge_id": purge_id,
                                     "why": "its content was purged (`agentlog purge`); its hash is kept"}
                else:
                    r["resolved"] = {"gone": True, "why": "no longer in the recorded history (purged or retracted)"}
            else:
                r["resolved"] = {c: (str(v) if v is not None and not isinstance(v, (int, float, str, bool)) else v)
                                 for c, v in zip(res.columns, res.rows[0])}
    return out
