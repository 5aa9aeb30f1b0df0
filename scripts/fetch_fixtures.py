#!/usr/bin/env python3
"""Fetch the shared real-agent fixtures from their public sources, checked by SHA-256.

The tests, the demo and the benchmarks read real captures of other people's
agent runs from ``shared/fixtures`` (``agentlog.operations.fixtures.shared_dir``).
A clone without them skips a large part of the suite. This script downloads
each file named in ``tests/fixtures-manifest.json`` from
``{base}/{repo}/{commit}/{path}`` (base: https://raw.githubusercontent.com),
checks the download's SHA-256 against the manifest, applies the file's
transform, checks the result's SHA-256, and only when every file checks out
moves them into ``<target>/fixtures/`` (each by an atomic rename). A file
already there with the right SHA-256 is kept as it is.

Standard library only; runs before agentlog is installed.

Exit codes: 0 every pinned file is in place; 1 a download or a file did not
match the manifest (nothing written); 2 usage or an unreadable manifest;
3 the network failed (nothing written).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MANIFEST = REPO_ROOT / "tests" / "fixtures-manifest.json"
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
BASE_URL_ENV = "AGENTLOG_FIXTURES_BASE_URL"
MAX_BYTES = 64 * 1024 * 1024
"""A download larger than this is refused (the largest fixture is about 3 MB)."""

_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")

TRANSFORMS: dict[str, Callable[[bytes], bytes]] = {
    "identity": lambda data: data,
}
"""Deterministic transforms from a source file's bytes to the fixture's bytes, by manifest name."""

EXAMPLES = """\
examples:
  python scripts/fetch_fixtures.py
      fetch into ./shared/fixtures beside this checkout (or $AGENTLOG_SHARED/fixtures)
  python scripts/fetch_fixtures.py --target /tmp/shared
      fetch into /tmp/shared/fixtures; then run the tests with AGENTLOG_SHARED=/tmp/shared
  python scripts/fetch_fixtures.py --base-url http://127.0.0.1:8000
      fetch from a mirror laid out as {repo}/{commit}/{path} (also: $AGENTLOG_FIXTURES_BASE_URL)
"""


class FetchError(Exception):
    """One line for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int, *, wrote: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.wrote = wrote
        """Some verified files were moved into place before the error."""


@dataclass(frozen=True)
class Entry:
    dest: str
    repo: str
    commit: str
    path: str
    source_sha256: str
    transform: str
    sha256: str

    def url(self, base: str) -> str:
        return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{urllib.parse.quote(self.path)}"


def _safe_relative(dest: object) -> bool:
    if not isinstance(dest, str) or not dest or dest.startswith("/") or "\\" in dest:
        return False
    return all(part not in ("", ".", "..") for part in dest.split("/"))


def load_manifest(path: Path) -> tuple[list[Entry], list[str]]:
    """(the files to fetch, the dest of each file the manifest has no public source for)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise FetchError(f"cannot read the manifest {path}: {e.strerror or e}", 2) from None
    except ValueError as e:
        raise FetchError(f"the manifest {path} is not JSON: {e}", 2) from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list):
        raise FetchError(f"the manifest {path} has no list of files", 2)
    entries: list[Entry] = []
    unpinned: list[str] = []
    for i, f in enumerate(files):
        where = f"the manifest {path}, file {i + 1}"
        if not isinstance(f, dict) or not _safe_relative(f.get("dest")):
            raise FetchError(f"{where}: dest must be a relative path inside the target", 2)
        if f.get("repo") is None:
            unpinned.append(str(f["dest"]))
            continue
        checks = {
            "repo": _REPO, "commit": _HEX40, "source_sha256": _HEX64, "sha256": _HEX64,
        }
        for key, pattern in checks.items():
            if not isinstance(f.get(key), str) or not pattern.fullmatch(f[key]):
                raise FetchError(f"{where} ({f['dest']}): {key} is missing or malformed", 2)
        if not _safe_relative(f.get("path")):
            raise FetchError(f"{where} ({f['dest']}): path is missing or malformed", 2)
        if f.get("transform") not in TRANSFORMS:
            raise FetchError(f"{where} ({f['dest']}): unknown transform {f.get('transform')!r}", 2)
        entries.append(Entry(f["dest"], f["repo"], f["commit"], f["path"], f["source_sha256"], f["transform"], f["sha256"]))
    if len({e.dest for e in entries} | set(unpinned)) != len(entries) + len(unpinned):
        raise FetchError(f"the manifest {path} names a dest twice", 2)
    return entries, unpinned


def default_target() -> Path:
    env = os.environ.get("AGENTLOG_SHARED")
    return Path(env) if env else REPO_ROOT / "shared"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download(url: str, timeout: float) -> bytes:
    req = urllib.request.Request(url, headers={"User-Agent": "agentlog-fetch-fixtures"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            data: bytes = r.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as e:
        raise FetchError(f"cannot download {url}: HTTP {e.code} {e.reason}", 3) from None
    except urllib.error.URLError as e:
        raise FetchError(f"cannot download {url}: {e.reason}", 3) from None
    except (TimeoutError, OSError) as e:
        raise FetchError(f"cannot download {url}: {e.strerror or e or 'timed out'}", 3) from None
    if len(data) > MAX_BYTES:
        raise FetchError(f"{url}: larger than {MAX_BYTES} bytes, refused", 1)
    return data


def _have(final: Path, sha: str) -> bool:
    try:
        return final.is_file() and not final.is_symlink() and _sha256(final.read_bytes()) == sha
    except OSError:
        return False


def fetch(entries: list[Entry], target: Path, base: str, timeout: float, say: Callable[[str], None]) -> tuple[int, int]:
    """Download, verify, then move into ``target/fixtures``; (files written, files already there).

    Every download is verified before anything is written: one bad file and nothing is.
    """
    root = target / "fixtures"
    todo = [e for e in entries if not _have(root / e.dest, e.sha256)]
    if not todo:
        return 0, len(entries)
    blobs: dict[str, bytes] = {}
    for e in todo:
        url = e.url(base)
        data = download(url, timeout)
        got = _sha256(data)
        if got != e.source_sha256:
            raise FetchError(f"{e.dest}: {url} has SHA-256 {got}, the manifest pins {e.source_sha256}; refused", 1)
        out = TRANSFORMS[e.transform](data)
        if _sha256(out) != e.sha256:
            raise FetchError(f"{e.dest}: after the {e.transform} transform the SHA-256 is {_sha256(out)}, "
                             f"the manifest pins {e.sha256}; refused", 1)
        blobs[e.dest] = out
        say(f"  verified {e.dest} ({len(out)} bytes, {e.repo}@{e.commit[:12]})")
    made_target = not target.exists()
    written = 0
    staging: Path | None = None
    try:
        target.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".fetch-fixtures-", dir=target))
        for i, data in enumerate(blobs.values()):
            with open(staging / str(i), "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for i, dest in enumerate(blobs):
            final = root / dest
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / str(i), final)
            written += 1
    except OSError as e:
        raise FetchError(f"cannot write into {target}: {e.strerror or e}", 1, wrote=written > 0) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if made_target and target.is_dir() and not any(target.iterdir()):
            target.rmdir()
    return len(blobs), len(entries) - len(todo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="fetch_fixtures.py",
        description="Fetch the real-agent test fixtures from their public GitHub sources at pinned commits, "
                    "each checked by SHA-256, into <target>/fixtures.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=Path, default=None,
                    help="the shared directory to fill (default: $AGENTLOG_SHARED, else shared/ beside this checkout)")
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST,
                    help="the manifest of files (default: tests/fixtures-manifest.json)")
    ap.add_argument("--base-url", default=None,
                    help=f"where {{repo}}/{{commit}}/{{path}} is served (default: ${BASE_URL_ENV}, else {DEFAULT_BASE_URL})")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per download (default: 60)")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only errors and the summary line")
    args = ap.parse_args(argv)
    target: Path = args.target or default_target()
    base: str = args.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr)

    try:
        entries, unpinned = load_manifest(args.manifest)
        written, kept = fetch(entries, target, base, args.timeout, say)
    except FetchError as e:
        print(f"fetch_fixtures: {e}", file=sys.stderr)
        if e.code != 2:
            print("fetch_fixtures: " + ("some verified files were written, the rest were not" if e.wrote
                                        else "nothing was written"), file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print("fetch_fixtures: interrupted; nothing was written", file=sys.stderr)
        return 130
    for dest in unpinned:
        say(f"  skipped {dest} (no public source; not needed by the tests)")
    print(f"fetch_fixtures: {written} fetched, {kept} already present, in {target / 'fixtures'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
