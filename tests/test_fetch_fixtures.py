"""scripts/fetch_fixtures.py against a real HTTP server on 127.0.0.1.

The server lays files out as GitHub's raw host does (``{repo}/{commit}/{path}``);
the script runs as a process with ``--base-url`` pointing at it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentlog.operations.fixtures import missing, shared_dir

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "fetch_fixtures.py"
MANIFEST = REPO / "tests" / "fixtures-manifest.json"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(the directory served, its base URL)."""
    root = tmp_path / "raw"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _publish(root: Path, repo: str, commit: str, path: str, data: bytes) -> None:
    out = root / repo / commit / path
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)


def test_the_manifest_pins_every_file_to_a_commit_and_a_hash() -> None:
    doc = json.loads(MANIFEST.read_text(encoding="utf-8"))
    files = doc["files"]
    assert len({f["dest"] for f in files}) == len(files) == 29
    pinned = [f for f in files if f["repo"] is not None]
    assert [f["dest"] for f in files if f["repo"] is None] == ["README.md"]
    for f in pinned:
        assert len(f["commit"]) == 40 and int(f["commit"], 16) >= 0
        assert f["transform"] in doc["transforms"]
        assert len(f["sha256"]) == len(f["source_sha256"]) == 64
        assert f["commit"] == doc["sources"][f["repo"]]["commit"]


def test_fetches_every_fixture_from_a_mirror_and_each_matches_its_hash(serve: tuple[Path, str], tmp_path: Path) -> None:
    shared = shared_dir()
    if shared is None:
        pytest.skip(missing())
    root, base = serve
    files = [f for f in json.loads(MANIFEST.read_text(encoding="utf-8"))["files"] if f["repo"] is not None]
    for f in files:  # every transform is the identity: the source is the fixture's bytes
        assert f["transform"] == "identity"
        _publish(root, f["repo"], f["commit"], f["path"], (shared / "fixtures" / f["dest"]).read_bytes())
    target = tmp_path / "shared"
    r = _run("--base-url", base, "--target", str(target))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stdout.strip() == f"fetch_fixtures: {len(files)} fetched, 0 already present, in {target / 'fixtures'}"
    for f in files:
        assert _sha((target / "fixtures" / f["dest"]).read_bytes()) == f["sha256"], f["dest"]
    assert sorted(p.relative_to(target / "fixtures").as_posix() for p in target.rglob("*") if p.is_file()) == \
        sorted(f["dest"] for f in files)
    # the tests' locator finds what was fetched
    import os

    env = {**os.environ, "AGENTLOG_SHARED": str(target)}
    found = subprocess.run([sys.executable, "-c", "from agentlog.operations.fixtures import shared_dir; print(shared_dir())"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert found.stdout.strip() == str(target)
    # a second run downloads nothing: the files are there with the right hashes
    again = _run("--base-url", base, "--target", str(target), "--quiet")
    assert again.returncode == 0 and f"0 fetched, {len(files)} already present" in again.stdout


def _small_manifest(tmp_path: Path, root: Path, *, tamper: bool) -> Path:
    """Two files served from ``root``; with ``tamper`` the second one's bytes differ from what is pinned."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    files: list[dict[str, str | None]] = []
    for i, name in enumerate(["a.json", "sub/b.jsonl"]):
        data = f'{{"n": {i}}}\n'.encode()
        _publish(root, "someone/project", commit, f"logs/{name}", data + (b" " if tamper and i == 1 else b""))
        files.append({"dest": f"claude-code-hooks/{name.replace('/', '-')}", "repo": "someone/project", "commit": commit,
                      "path": f"logs/{name}", "source_sha256": _sha(data), "transform": "identity",
                      "sha256": _sha(data), "licence": "MIT"})
    files.append({"dest": "README.md", "repo": None, "commit": None, "path": None, "source_sha256": None,
                  "transform": None, "sha256": "0" * 64, "licence": None})
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"files": files}))
    return manifest


def test_a_tampered_download_is_refused_and_nothing_is_written(serve: tuple[Path, str], tmp_path: Path) -> None:
    root, base = serve
    manifest = _small_manifest(tmp_path, root, tamper=True)
    target = tmp_path / "shared"
    r = _run("--base-url", base, "--target", str(target), "--manifest", str(manifest))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[-2].startswith("fetch_fixtures: claude-code-hooks/sub-b.jsonl: http://127.0.0.1:")
    assert "the manifest pins" in lines[-2] and lines[-2].endswith("refused")
    assert lines[-1] == "fetch_fixtures: nothing was written"
    assert "Traceback" not in r.stderr
    assert not target.exists()  # not even the first file, which was fine


def test_the_untampered_set_is_written_and_an_unpinned_file_is_named(serve: tuple[Path, str], tmp_path: Path) -> None:
    root, base = serve
    manifest = _small_manifest(tmp_path, root, tamper=False)
    target = tmp_path / "shared"
    r = _run("--base-url", base, "--target", str(target), "--manifest", str(manifest))
    assert r.returncode == 0, r.stderr
    assert "skipped README.md (no public source" in r.stderr
    assert sorted(p.name for p in (target / "fixtures" / "claude-code-hooks").iterdir()) == ["a.json", "sub-b.jsonl"]
    assert [p.name for p in target.iterdir()] == ["fixtures"]  # no staging left behind


def test_a_network_failure_is_one_line_and_exit_3(serve: tuple[Path, str], tmp_path: Path) -> None:
    root, base = serve
    manifest = _small_manifest(tmp_path, root, tamper=False)
    (root / "someone").rename(root / "gone")  # every download is a 404
    r = _run("--base-url", base, "--target", str(tmp_path / "shared"), "--manifest", str(manifest))
    assert r.returncode == 3
    assert r.stderr.splitlines()[0].startswith("fetch_fixtures: cannot download http://127.0.0.1:")
    assert "HTTP 404" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "shared").exists()


@pytest.mark.parametrize("bad", [
    {"dest": "../escape.json"}, {"dest": "/abs.json"}, {"commit": "main"}, {"transform": "rot13"}, {"path": "a/../../b"},
])
def test_a_malformed_manifest_is_refused_before_any_download(tmp_path: Path, bad: dict[str, str]) -> None:
    entry = {"dest": "x/a.json", "repo": "o/r", "commit": "a" * 40, "path": "a.json", "source_sha256": "b" * 64,
             "transform": "identity", "sha256": "b" * 64, "licence": None, **bad}
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"files": [entry]}))
    r = _run("--base-url", "http://127.0.0.1:9", "--target", str(tmp_path / "t"), "--manifest", str(manifest))
    assert r.returncode == 2
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"fetch_fixtures: the manifest {manifest}, file 1")
    assert not (tmp_path / "t").exists()


def test_help_has_an_example() -> None:
    r = _run("--help")
    assert r.returncode == 0
    assert "examples:" in r.stdout and "python scripts/fetch_fixtures.py --target" in r.stdout
