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
    p = import_engram(root, str(tmp_path / "engram"))
    assert p.actor == "import" and [c["op"] for c in p.changes] == ["create", "create", "link"]
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


def test_an_engram_export_with_bad_values_opens_nothing_and_says_every_problem(tmp_path: Path) -> None:
    from agentlog.memory.engram import import_engram
    from agentlog.memory.model import InvalidMemory

    bad = [dict(ENGRAM[1], attributes={"name": "Acme", "org_type": "cult"}),
           dict(ENGRAM[0], links=[], confidence=7)]
    _engram_export(tmp_path / "engram", bad)
    root = str(tmp_path / "home")
    with pytest.raises(InvalidMemory) as e:
        import_engram(root, str(tmp_path / "engram"))
    assert "change 1" in str(e.value) and "org_type" in str(e.value) and "change 2" in str(e.value)
    assert P.list_proposals(root) == []


def test_two_memories_of_one_title_export_as_two_files_and_come_back_with_their_slugs(tmp_path: Path) -> None:
    root, other, again = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")
    a = S.create(root, "fact", "same title", attributes={"statement": "a"})
    b = S.create(root, "fact", "same title", attributes={"statement": "b"})
    assert a.slug != b.slug
    out = tmp_path / "e"
    manifest = exchange.export(root, str(out))
    files = sorted(p.name for p in (out / "memories" / "fact").glob("*.md"))
    assert manifest["memories"] == 2 and files == sorted([a.slug + ".md", b.slug + ".md"])
    # restore keeps the slugs (the same events); a plain import asks for them, and gets them when free
    exchange.restore(other, str(out))
    assert {m.slug for m in S.list_memories(other)} == {a.slug, b.slug}
    p = exchange.import_as_proposal(again, str(out))
    P.approve(again, p.id)
    assert {m.slug for m in S.list_memories(again)} == {a.slug, b.slug}
    # imported again into the same memory: the slugs are taken, so each gets the nearest free one
    P.approve(again, exchange.import_as_proposal(again, str(out)).id)
    assert {m.slug for m in S.list_memories(again)} == {a.slug, b.slug, a.slug + "-3", b.slug + "-2"}


def test_a_slug_two_memories_share_from_an_older_log_still_exports_both(tmp_path: Path) -> None:
    """A log written before slugs were unique: replayed, both memories are there, and both are exported
    (the second as <slug>.<id>.md); an older export that lost one of them to the other's file is refused
    by a plain import, which would otherwise drop a memory."""
    import json

    from agentlog.memory import store

    root = str(tmp_path / "a")
    a = S.create(root, "fact", "same", attributes={"statement": "a"}, slug="same")
    body = {"kind": "fact", "title": "same", "slug": "same", "content": "", "attributes": {"statement": "b"},
            "tags": [], "confidence": 0.95, "evidence": []}
    b_id = "ffffffff-0000-7000-8000-000000000000"  # (sorts after a's id)
    store.write(root, [store.new_event("memory_created", b_id, 1, "person", body)], {b_id: None})
    out = tmp_path / "e"
    manifest = exchange.export(root, str(out))
    assert manifest["memories"] == 2
    assert {p.name for p in (out / "memories" / "fact").glob("*.md")} == {"same.md", f"same.{b_id}.md"}
    assert a.id < b_id
    # an export as the older agentlog wrote it: one file for both, the manifest counting two
    (out / "memories" / "fact" / f"same.{b_id}.md").unlink()
    m = json.loads((out / "manifest.json").read_text())
    del m["files"][f"memories/fact/same.{b_id}.md"]
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(exchange.ExchangeError, match="counts 2 memories, its files hold 1"):
        exchange.import_as_proposal(str(tmp_path / "b"), str(out))
    assert exchange.restore(str(tmp_path / "c"), str(out)) == 2  # its events hold both
    assert len(S.list_memories(str(tmp_path / "c"))) == 2
