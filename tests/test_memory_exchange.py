"""Export → restore → export gives identical bytes; a plain import opens a proposal."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlog.memory import exchange
from agentlog.memory import proposals as P
from agentlog.memory import service as S


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _history(root: str) -> None:
    a = S.create(root, "procedure", "Run the tests", content="Use **make test**.\n\nNot pytest.",
                 attributes={"goal": "run the tests", "steps": ["make test"]}, tags=["ci"])
    b = S.create(root, "decision", "Use DuckDB", attributes={"chosen": "duckdb", "alternatives": ["sqlite"]},
                 evidence=[{"type": "url", "value": "https://duckdb.org"},
                           {"type": "file", "path": "src/q.py", "line_start": 1, "line_end": 4}])
    S.link(root, b.id, "relates_to", a.id)
    S.confirm(root, a.id)
    gone = S.create(root, "fact", "temporary", attributes={"statement": "x"})
    S.delete(root, gone.id)


def test_export_restore_export_is_byte_identical(tmp_path: Path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    _history(first)
    out1, out2, out3 = tmp_path / "e1", tmp_path / "e2", tmp_path / "e3"
    manifest = exchange.export(first, str(out1))
    assert manifest["memories"] == 2 and manifest["events"] == 6
    exchange.export(first, str(out2))
    assert _files(out1) == _files(out2)  # exporting twice: the same bytes
    assert exchange.restore(second, str(out1)) == 6
    exchange.export(second, str(out3))
    assert _files(out3) == _files(out1)
    md = (out1 / "memories" / "procedure").glob("*.md")
    text = next(md).read_text()
    assert text.startswith("+++\n") and "Use **make test**." in text
    assert 'attributes = { goal = "run the tests", steps = ["make test"] }' in text
    with pytest.raises(exchange.ExchangeError, match="already has events"):
        exchange.restore(second, str(out1))


def test_a_tampered_export_is_refused(tmp_path: Path) -> None:
    root = str(tmp_path / "a")
    _history(root)
    out = tmp_path / "e"
    exchange.export(root, str(out))
    (out / "events.ndjson").write_bytes((out / "events.ndjson").read_bytes().replace(b"duckdb", b"duckdc"))
    with pytest.raises(exchange.ExchangeError, match="checksum"):
        exchange.restore(str(tmp_path / "b"), str(out))


@pytest.mark.parametrize("bad,message", [(b"{not json", "line 3 is not JSON"), (b"1, 2", "line 3 is not JSON"),
                                         (b'{"kind": "tool_call"}', "line 3 is not a memory event")])
def test_an_export_with_a_bad_event_line_restores_nothing(tmp_path: Path, bad: bytes, message: str) -> None:
    """Checksums made to match (an export written by hand): each line is still checked, and the one that is
    wrong is named, before anything is appended."""
    import hashlib
    import json

    root = str(tmp_path / "a")
    _history(root)
    out = tmp_path / "e"
    exchange.export(root, str(out))
    lines = (out / "events.ndjson").read_bytes().split(b"\n")
    lines[2] = bad
    data = b"\n".join(lines)
    (out / "events.ndjson").write_bytes(data)
    manifest = json.loads((out / "manifest.json").read_bytes())
    manifest["files"]["events.ndjson"] = hashlib.sha256(data).hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(exchange.ExchangeError, match=message):
        exchange.restore(str(tmp_path / "b"), str(out))
    assert not (tmp_path / "b" / "logs").exists()


def test_a_plain_import_opens_one_proposal(tmp_path: Path) -> None:
    root, other = str(tmp_path / "a"), str(tmp_path / "b")
    _history(root)
    out = tmp_path / "e"
    exchange.export(root, str(out))
    S.create(other, "fact", "already here", attributes={"statement": "y"})
    p = exchange.import_as_proposal(other, str(out))
    assert p.status == "open" and p.actor == "import" and len(p.changes) == 2
    P.approve(other, p.id)
    got = {m.title: m for m in S.list_memories(other)}
    assert set(got) == {"already here", "Run the tests", "Use DuckDB"}
    assert got["Run the tests"].content == "Use **make test**.\n\nNot pytest."
    assert got["Use DuckDB"].attributes == {"chosen": "duckdb", "alternatives": ["sqlite"]}
    assert got["Use DuckDB"].confidence == 0.7  # imported: the import prior (confidence.py, engram.md §3.5)


def test_the_cli_round_trip(agentlog_home: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    _history(str(agentlog_home))
    r = CliRunner()
    out = r.invoke(cli, ["memory", "export", str(tmp_path / "e"), "--json"], env={"AGENTLOG_HOME": str(agentlog_home)})
    assert out.exit_code == 0, out.output
    fresh = tmp_path / "fresh"
    done = r.invoke(cli, ["memory", "import", str(tmp_path / "e"), "--restore", "--json"],
                    env={"AGENTLOG_HOME": str(fresh)})
    assert done.exit_code == 0 and '"restored_events": 6' in done.output
    bad = r.invoke(cli, ["memory", "import", str(tmp_path)], env={"AGENTLOG_HOME": str(fresh)})
    assert bad.exit_code == 1 and "manifest" in bad.output


def _engram_export(d: Path, records: list[dict[str, object]]) -> None:
    """A small engram export as engram.md §8 documents it (sorted keys, compact)."""
    import json

    (d / "metadata").mkdir(parents=True)
    (d / "metadata" / "memories.ndjson").write_text(
        "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records))


ENGRAM = [
    {"id": "0190a8f0-0000-7000-8000-000000000001", "kind": "person", "schema_version": 1, "title": "Ada",
     "slug": "ada-0190a8f0", "content": "Works on the parser.", "attributes": {"full_name": "Ada L", "roles": ["dev"],
                                                                                "aliases": None, "notes": None},
     "tags": ["team"], "links": [{"relation": "works_at", "target": "0190a8f0-0000-7000-8000-000000000002"}],
     "evidence": [{"type": "quote", "value": "I maintain the parser", "note": None, "added_at": "2026-01-01T00:00:00Z",
                   "actor": "user"}],
     "confidence": 0.95, "visibility": "shared", "lifetime": "standard", "lifetime_until": None, "archived": False,
     "pinned": True, "user_weight": None, "created_by": "user", "created_at": "2026-01-01T00:00:00Z",
     "updated_at": "2026-01-02T00:00:00Z", "version": 3},
    {"id": "0190a8f0-0000-7000-8000-000000000002", "kind": "organization", "schema_version": 1, "title": "Acme",
     "slug": "acme-0190a8f0", "content": "", "attributes": {"name": "Acme", "org_type": "company"}, "tags": [],
     "links": [], "evidence": [], "confidence": 0.6, "visibility": "private", "lifetime": "until",
     "lifetime_until": "2030-01-01T00:00:00Z", "archived": True, "pinned": False, "user_weight": None,
     "created_by": "assistant", "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
     "version": 1},
]


def test_an_engram_export_imports_as_the_same_memories(tmp_path: Path) -> None:
    from agentlog.memory.engram import import_engram

    root = str(tmp_path / "home")
    _engram_export(tmp_path / "engram", ENGRAM)
    got = import_engram(root, str(tmp_path / "engram"))
    p = got.proposal
    assert p.actor == "import" and [c["op"] for c in p.changes] == ["create", "create", "link"]
    assert got.memories == 2 and got.report == []  # nothing loose: nothing to say
    P.approve(root, p.id)
    ada = S.get(root, "ada-0190a8f0")
    acme = S.get(root, "acme-0190a8f0")
    assert (ada.id, ada.kind, ada.title, ada.content, ada.tags) == (
        ENGRAM[0]["id"], "person", "Ada", "Works on the parser.", ["team"])
    assert ada.attributes == {"full_name": "Ada L", "roles": ["dev"]} and ada.confidence == 0.95 and ada.pinned
    assert ada.evidence == [{"type": "quote", "value": "I maintain the parser"}]
    assert ada.links == [("works_at", acme.id)]
    assert acme.archived and acme.visibility["visibility"] == "private"
    assert acme.lifetime == {"policy": "until", "until": "2030-01-01T00:00:00Z"} and acme.confidence == 0.6


def _engram_markdown(d: Path, r: dict[str, object], dirname: str) -> None:
    """One memory as engram's markdown (engram.md §8.2): YAML front matter in its fixed key order, strings as
    JSON literals, times bare ISO 8601 with Z, optional keys only when not default, tags sorted, links
    sorted, attribute keys sorted with None left out; the content; a trailing ## Evidence yaml block."""
    import json

    q = json.dumps
    lines = ["---", f"id: {q(r['id'])}", f"kind: {q(r['kind'])}", "schema_version: 1", f"title: {q(r['title'])}",
             f"slug: {q(r['slug'])}", f"created_at: {r['created_at']}", f"updated_at: {r['updated_at']}",
             f"created_by: {q(r['created_by'])}", f"confidence: {r['confidence']!r}", f"visibility: {q(r['visibility'])}",
             f"lifetime: {q(r['lifetime'])}"]
    if r.get("lifetime_until"):
        lines.append(f"lifetime_until: {r['lifetime_until']}")
    for flag in ("archived", "pinned"):
        if r.get(flag):
            lines.append(f"{flag}: true")
    lines.append("tags: [" + ", ".join(q(t) for t in sorted(r["tags"])) + "]")  # type: ignore[call-overload]
    links = sorted(r["links"], key=lambda k: (k["relation"], k["target"]))  # type: ignore[call-overload]
    lines.append("links:" + ("" if links else " []"))
    lines += [f"  - relation: {q(k['relation'])}\n    target: {q(k['target'])}" for k in links]
    attrs = {k: v for k, v in sorted(r["attributes"].items()) if v is not None}  # type: ignore[attr-defined]
    lines.append("attributes:" + ("" if attrs else " {}"))
    for k, v in attrs.items():
        lines.append(f"  {k}: " + (v if k.endswith("_at") else q(v)))
    lines.append("---")
    text = "\n".join(lines) + "\n" + str(r["content"]) + "\n"
    if r["evidence"]:
        text += "\n## Evidence\n\n```yaml\n" + "".join(
            f"- type: {q(e['type'])}\n  value: {q(e['value'])}\n  added_at: {e['added_at']}\n  actor: {q(e['actor'])}\n"
            for e in r["evidence"]) + "```\n"  # type: ignore[attr-defined]
    (d / "memory" / dirname).mkdir(parents=True, exist_ok=True)
    (d / "memory" / dirname / f"{r['slug']}.md").write_text(text)


EVENT = {"id": "0190a8f0-0000-7000-8000-000000000003", "kind": "event", "title": "Launch", "slug": "launch",
         "content": "It went out.\n\n## Evidence\n\nNot the block: the memory's own heading.",
         "attributes": {"occurred_at": "2026-03-01T09:30:00Z", "outcome": "shipped"}, "tags": ["b", "a"], "links": [],
         "evidence": [], "confidence": 0.8, "visibility": "shared", "lifetime": "permanent", "lifetime_until": None,
         "archived": False, "pinned": False, "created_by": "user", "created_at": "2026-01-01T00:00:00Z",
         "updated_at": "2026-01-01T00:00:00Z"}


def _state(root: str) -> list[tuple[object, ...]]:
    return sorted((m.id, m.kind, m.title, m.slug, m.content, m.attributes, sorted(m.tags), m.confidence, m.lifetime,
                   m.visibility, m.archived, m.pinned, S.get(root, m.id).evidence, S.get(root, m.id).links)
                  for m in S.list_memories(root, include_archived=True))


def test_a_markdown_only_engram_export_imports_as_its_ndjson_does(tmp_path: Path) -> None:
    from agentlog.memory.engram import import_engram

    records = [*ENGRAM, EVENT]
    _engram_export(tmp_path / "ndjson", records)
    for r, d in zip(records, ("people", "organizations", "events")):
        _engram_markdown(tmp_path / "markdown", r, d)
    (tmp_path / "markdown" / "README.md").write_text("generated by engram\n")
    roots = []
    for form in ("ndjson", "markdown"):
        root = str(tmp_path / f"home-{form}")
        got = import_engram(root, str(tmp_path / form))
        assert got.memories == 3 and got.report == [], form
        P.approve(root, got.proposal.id)
        roots.append(root)
    assert _state(roots[0]) == _state(roots[1])
    launch = S.get(roots[1], "launch")
    assert launch.attributes == {"occurred_at": "2026-03-01T09:30:00Z", "outcome": "shipped"}  # a YAML time: ISO text
    assert launch.content.endswith("Not the block: the memory's own heading.")
    assert S.get(roots[1], "ada-0190a8f0").evidence == [{"type": "quote", "value": "I maintain the parser"}]


def test_engram_loose_values_are_converted_or_kept_and_reported_never_failing_the_import(tmp_path: Path) -> None:
    from agentlog.memory.engram import LOOSE_TAG, import_engram

    base = {"schema_version": 1, "content": "", "tags": [], "links": [], "evidence": [], "visibility": "shared",
            "lifetime": "standard", "lifetime_until": None, "archived": False, "pinned": False, "created_by": "user",
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}

    def rec(n: int, kind: str, title: str, attributes: dict[str, object], **more: object) -> dict[str, object]:
        return {**base, "id": f"0190a8f0-0000-7000-8000-00000000010{n}", "kind": kind, "title": title,
                "slug": title.lower().replace(" ", "-"), "attributes": attributes, "confidence": 0.9, **more}

    records = [
        rec(1, "location", "London", {"name": "London", "latitude": "51.5", "longitude": "-0.12",
                                      "location_type": "City"}),
        rec(2, "organization", "Acme", {"name": "Acme", "org_type": "cult", "url": None}, confidence=7,
            content="A company."),
        rec(3, "asset", "Laptop", {"asset_type": "gizmo", "identifier": 42}),
        rec(4, "contact", "Mail", {"channel": "email", "value": "a@b", "preferred": "true"}, visibility="secret"),
        rec(5, "project", "Bogus", {"name": "Bogus", "status": "bogus"}),  # required, closed, no 'other': left out
        rec(6, "person", "Bob", {"full_name": "Bob"}, links=[
            {"relation": "works_at", "target": "0190a8f0-0000-7000-8000-000000000102"},
            {"relation": "works_at", "target": "0190a8f0-0000-7000-8000-000000000105"},  # the one left out
            {"relation": "likes", "target": "0190a8f0-0000-7000-8000-000000000102"}]),
        rec(7, "gadget", "Unknown kind", {}),
    ]
    _engram_export(tmp_path / "engram", records)
    root = str(tmp_path / "home")
    got = import_engram(root, str(tmp_path / "engram"))
    assert got.memories == 5
    report = {e["title"]: e for e in got.report}
    assert set(report) == {"London", "Acme", "Laptop", "Mail", "Bogus", "Bob", "Unknown kind"}
    assert report["Bogus"]["skipped"] and "project.status must be one of" in " ".join(report["Bogus"]["notes"])
    assert report["Unknown kind"]["skipped"] and not report["Acme"]["skipped"]
    assert "confidence 7" in " ".join(report["Acme"]["notes"])
    assert sum("left out" in n for n in report["Bob"]["notes"]) == 2
    P.approve(root, got.proposal.id)
    london, acme, laptop, mail, bob = (S.get(root, s) for s in ("london", "acme", "laptop", "mail", "bob"))
    assert london.attributes == {"name": "London", "latitude": 51.5, "longitude": -0.12, "location_type": "city"}
    assert acme.attributes == {"name": "Acme"} and acme.tags == [LOOSE_TAG] and acme.confidence == 0.7
    assert acme.content.startswith("A company.\n\n") and 'engram org_type: "cult"' in acme.content
    assert laptop.attributes == {"asset_type": "other", "identifier": "42"} and 'asset_type: "gizmo"' in laptop.content
    assert mail.attributes["preferred"] is True and mail.visibility["visibility"] == "private"
    assert bob.links == [("works_at", acme.id)]
    assert {m.id for m, _ in S.search(root, "tag:" + LOOSE_TAG)} == {acme.id, laptop.id}
    assert {m.id for m, _ in S.search(root, "cult")} == {acme.id}


def test_engram_relationships_follow_what_they_name_and_dangling_ones_are_left_out(tmp_path: Path) -> None:
    """engram does not check a relationship's ends: one written before the memories it names is
    made after them; one naming a memory that is nowhere (or a relationship left out) is left
    out and reported, and links to it with it."""
    from agentlog.memory.engram import import_engram

    ids = [f"0190a8f0-0000-7000-8000-00000000020{n}" for n in range(6)]
    base = {k: v for k, v in ENGRAM[1].items() if k not in ("id", "kind", "title", "slug", "attributes")}

    def rec(n: int, kind: str, title: str, attributes: dict[str, object], **more: object) -> dict[str, object]:
        return {**base, "id": ids[n], "kind": kind, "title": title, "slug": title.lower().replace(" ", "-"),
                "attributes": attributes, "archived": False, **more}

    def rel(n: int, title: str, subject: str, obj: str, **more: object) -> dict[str, object]:
        return rec(n, "relationship", title, {"subject_id": subject, "predicate": "knows", "object_id": obj}, **more)

    records = [
        rel(0, "About knowing", ids[1], ids[3]),  # names a relationship that follows it
        rel(1, "Ada knows Bob", ids[3], ids[4]),  # names people that follow it
        rec(3, "person", "Ada", {"full_name": "Ada"}),
        rec(4, "person", "Bob", {"full_name": "Bob"},
            links=[{"relation": "relates_to", "target": ids[5]}]),  # to a relationship left out
        rel(5, "Ada knows a ghost", ids[3], "0190a8f0-0000-7000-8000-0000000002ff"),
    ]
    _engram_export(tmp_path / "engram", records)
    root = str(tmp_path / "home")
    got = import_engram(root, str(tmp_path / "engram"))
    report = {e["title"]: e for e in got.report}
    assert got.memories == 4 and set(report) == {"Ada knows a ghost", "Bob"}
    assert report["Ada knows a ghost"]["skipped"] and "object_id 0190a8f0-0000-7000-8000-0000000002ff names a " \
        "memory neither in the export nor here" in " ".join(report["Ada knows a ghost"]["notes"])
    assert not report["Bob"]["skipped"] and "left out" in " ".join(report["Bob"]["notes"])
    assert [c.get("title") for c in got.proposal.changes] == ["Ada", "Bob", "Ada knows Bob", "About knowing"]
    P.approve(root, got.proposal.id)
    assert S.get(root, ids[0]).attributes["subject_id"] == ids[1] and S.get(root, ids[4]).links == []


def test_an_engram_import_from_the_cli_reports_each_memory(agentlog_home: Path, tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from agentlog.cli import cli

    loose = dict(ENGRAM[1], attributes={"name": "Acme", "org_type": "cult"}, confidence=None)
    _engram_export(tmp_path / "engram", [dict(ENGRAM[0], links=[]), loose])
    env = {"AGENTLOG_HOME": str(agentlog_home)}
    out = CliRunner().invoke(cli, ["memory", "import", "--from", "engram", str(tmp_path / "engram"), "--json"], env=env)
    assert out.exit_code == 0, out.output
    done = json.loads(out.output)
    assert done["memories"] == 2 and [e["title"] for e in done["report"]] == ["Acme"]
    P.approve(str(agentlog_home), done["proposal"])
    assert S.get(str(agentlog_home), "acme-0190a8f0").confidence == 0.7  # no confidence of its own: the import prior
    again = CliRunner().invoke(cli, ["memory", "import", "--from", "engram", str(tmp_path / "engram")], env=env)
    assert again.exit_code == 1 and "no memory to import" in again.output and "exists here already" in again.output
    empty = tmp_path / "nothing"
    (empty / "memory").mkdir(parents=True)
    none = CliRunner().invoke(cli, ["memory", "import", "--from", "engram", str(empty)], env=env)
    assert none.exit_code == 1 and none.output.count("\n") == 1 and "no memory to import" in none.output
