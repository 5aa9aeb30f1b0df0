"""`agentlog snapshot` (docs/share.md, "Snapshots"): create, list, verify, restore into an empty root, then
rebuild gives the same rows in every table; a damaged snapshot is refused, naming the file."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any, Callable

import pytest
import zstandard
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.operations.fixtures import missing, shared_dir


def _run(root: Path, *args: str, code: int = 0) -> Any:
    r = CliRunner().invoke(cli, list(args), env={"AGENTLOG_HOME": str(root)}, catch_exceptions=False)
    assert r.exit_code == code, (args, r.output[-3000:])
    return r


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared = shared_dir()
    if shared is None:
        pytest.fail(missing())
    home = tmp_path_factory.mktemp("snap") / "home"
    transcript = sorted((shared / "fixtures" / "claude-code").glob("*.jsonl"), key=lambda p: p.stat().st_size)[-1]
    _run(home, "import", "claude-code", str(transcript), "--json")
    _run(home, "import", "codex", str(sorted((shared / "fixtures" / "codex").glob("*.jsonl"))[0]), "--json")
    _run(home, "memory", "add", "fact", "The API listens on 8080", "--content", "port 8080", "--tag", "api")
    codex = json.loads(_run(home, "sql", "select provider_session_id from sessions where provider = 'codex'",
                            "--json").stdout)["rows"][0][0]
    _run(home, "seal", "--session", codex, "--idle-hours", "0", "--level", "3")  # a sealed segment to keep too
    _run(home, "checkpoint")
    return home


def _tables(root: Path) -> dict[str, Any]:
    from agentlog.query.catalog import tables

    out = {}
    for t in tables():
        got = json.loads(_run(root, "sql", f"select * from {t.name} order by all", "--json").stdout)
        out[t.name] = got["rows"]
    out["memory"] = json.loads(_run(root, "memory", "list", "--json").stdout)
    return out


def test_restore_then_rebuild_gives_the_same_rows_in_every_table(root: Path, tmp_path: Path) -> None:
    snap = tmp_path / "s.tar.zst"
    made = json.loads(_run(root, "snapshot", "create", "--out", str(snap), "--json").stdout)
    assert made["files"] >= 4 and snap.stat().st_mode & 0o777 == 0o600
    names = _names(snap)
    assert names[0] == "MANIFEST.json" and any(n.startswith("state/tree/checkpoints/") for n in names)
    assert any(".sealed/" in n and n.endswith(".jsonl.zst") for n in names)
    assert "logs/agentlog/memory.jsonl" in names and not any(n.startswith(("store/", "projection/")) for n in names)
    assert json.loads(_run(root, "snapshot", "verify", str(snap), "--json").stdout)["ok"] is True
    restored = tmp_path / "restored"
    _run(root, "snapshot", "restore", str(snap), "--into", str(restored))
    _run(restored, "rebuild")
    before, after = _tables(root), _tables(restored)
    assert before["events"] and before["sessions"] and before["memory"]
    for name in before:
        assert after[name] == before[name], name
    assert "all intact" in _run(restored, "verify").output
    again = CliRunner().invoke(cli, ["snapshot", "restore", str(snap), "--into", str(restored)])
    assert again.exit_code == 2 and "not an empty directory" in again.output


def test_default_place_and_list(root: Path) -> None:
    made = json.loads(_run(root, "snapshot", "create", "--json").stdout)
    listed = json.loads(_run(root, "snapshot", "list", "--json").stdout)
    assert made["path"] in [r["path"] for r in listed]
    assert listed[0]["files"] == made["files"]
    Path(made["path"]).unlink()


def _names(snap: Path) -> list[str]:
    with open(snap, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as z, tarfile.open(fileobj=z, mode="r|") as t:
        return [m.name for m in t]


def _rewrite(snap: Path, out: Path, change: Callable[[str, bytes], tuple[str, bytes] | None]) -> None:
    """A copy of the snapshot with each member passed through ``change`` (None drops it)."""
    members = []
    with open(snap, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as z, tarfile.open(fileobj=z, mode="r|") as t:
        while (m := t.next()) is not None:
            fh = t.extractfile(m)
            assert fh is not None
            members.append((m.name, fh.read()))
    with open(out, "wb") as raw, zstandard.ZstdCompressor().stream_writer(raw) as z, tarfile.open(fileobj=z, mode="w|") as t:
        for name, data in members:
            got = change(name, data)
            if got is None:
                continue
            info = tarfile.TarInfo(got[0])
            info.size = len(got[1])
            t.addfile(info, io.BytesIO(got[1]))


def test_a_damaged_snapshot_is_refused_naming_the_file(root: Path, tmp_path: Path) -> None:
    snap = tmp_path / "s.tar.zst"
    _run(root, "snapshot", "create", "--out", str(snap))
    log = next(n for n in _names(snap) if n.startswith("logs/claude_code/") and n.endswith(".jsonl"))

    def flip(name: str, data: bytes) -> tuple[str, bytes]:
        if name != log:
            return name, data
        i = len(data) // 2
        return name, data[:i] + bytes([data[i] ^ 1]) + data[i + 1:]

    cases: dict[str, Callable[[str, bytes], tuple[str, bytes] | None]] = {
        log: flip,
        "logs/agentlog/memory.jsonl": lambda n, d: None if n == "logs/agentlog/memory.jsonl" else (n, d),
        "../escape": lambda n, d: ("../escape", d) if n == log else (n, d),
    }
    for named, change in cases.items():
        bad = tmp_path / "bad.tar.zst"
        _rewrite(snap, bad, change)
        r = _run(root, "snapshot", "verify", str(bad), code=1)
        assert named in r.output, (named, r.output)
        into = tmp_path / "into"
        r = _run(root, "snapshot", "restore", str(bad), "--into", str(into), code=1)
        assert named in r.output and not into.exists()
        bad.unlink()
    truncated = tmp_path / "cut.tar.zst"
    truncated.write_bytes(snap.read_bytes()[: snap.stat().st_size // 2])
    r = _run(root, "snapshot", "verify", str(truncated), code=1)
    assert "damaged" in r.output or "does not match" in r.output
