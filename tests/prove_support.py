"""Helpers for the proof tests (a test-support module, not a test file): the real hook and CLI
as processes, the standalone verifier loaded from its file, both verifiers' answers in one
shape (so a test can hold them to the same answer), and an attacker's tools: rewrite a log as a
self-consistent chain (every hash recomputed) and rebuild the Merkle tree over it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

from agentlog.capture.command import hook_argv
from agentlog.integrity.bundle import BundleError, verify_document
from agentlog.integrity.tree import tree_dir
from agentlog.log import frame
from agentlog.log.layout import head_path, iter_logs, split_log_path
from agentlog.log.writer import Tip, format_head

SCRIPT = Path(__file__).resolve().parents[1] / "src" / "agentlog" / "integrity" / "standalone_verifier.py"


def _load_standalone() -> Any:
    spec = importlib.util.spec_from_file_location("standalone_verifier_under_test", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SV = _load_standalone()


def hook(root: Path, sid: str, i: int, text: str = "prompt") -> None:
    """One prompt recorded by the real Claude Code hook, run as a process."""
    payload = {"session_id": sid, "cwd": "/tmp/prove-project", "hook_event_name": "UserPromptSubmit",
               "prompt": f"{text} {i} of {sid}"}
    r = subprocess.run(hook_argv("claude-code"), input=json.dumps(payload).encode(), capture_output=True,
                       timeout=60, env={**os.environ, "AGENTLOG_HOME": str(root)})
    assert r.returncode == 0, r.stderr


def cli(*args: str, home: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m agentlog ARGS`` on the data root ``home``; never a traceback."""
    r = subprocess.run([sys.executable, "-m", "agentlog", *args], capture_output=True, timeout=180,
                       input=stdin, env={**os.environ, "AGENTLOG_HOME": str(home)})
    out = subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())
    assert "Traceback" not in out.stdout + out.stderr, out.stderr
    return out


def standalone(python: str, path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The standalone verifier run by ``python -I`` (a venv with PyNaCl only)."""
    r = subprocess.run([python, "-I", str(SCRIPT), str(path), *args], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r


def outcome(doc: Any, key: str | None = None, witnesses: Iterable[str] = (),
            require_witness: bool = False) -> tuple[str, list[str]]:
    """("error", []) when the bundle is malformed or its key/checkpoint/witnessed checkpoint fails,
    else (ok|failed, statuses), by the library."""
    try:
        report = verify_document(doc, key=key, witnesses=list(witnesses), require_witness=require_witness)
    except BundleError:
        return "error", []
    if report.error is not None:
        return "error", []
    statuses = [e.status for e in getattr(report, "entries", [])]
    return ("ok" if report.ok else "failed"), statuses


def standalone_outcome(doc: Any, key: str | None = None, witnesses: Iterable[str] = (),
                       require_witness: bool = False) -> tuple[str, list[str]]:
    """:func:`outcome`, by the standalone verifier."""
    try:
        ok, statuses, _lines = SV.verify(doc, key, list(witnesses), require_witness)
    except (SV.Malformed, SV.Failed):
        return "error", []
    return ("ok" if ok else "failed"), statuses


# -- the attacker's tools -------------------------------------------------------------------------


def log_of(root: Path, sid: str) -> Path:
    """The log file of the session ``sid``."""
    [path] = [Path(p) for p in iter_logs(str(root)) if split_log_path(p)[1].startswith(sid)]
    return path


def events_of(path: Path) -> list[bytes]:
    return [frame.event_bytes(line) for line in path.read_bytes().splitlines(keepends=True)]


def reseal(path: Path, events: list[bytes]) -> None:
    """Write ``events`` as the log at ``path``: a self-consistent chain from the genesis of the
    log's own name (every hash recomputed with frame.seal) and a head naming its last frame."""
    provider, key = split_log_path(str(path))
    prev = frame.genesis(provider, key)
    out = b""
    for seq, event in enumerate(events):
        line, prev = frame.seal(seq, prev, event)
        out += line
    path.write_bytes(out)
    Path(head_path(str(path))).write_bytes(format_head(Tip(len(events) - 1, prev, len(out))))


def drop_tree(root: Path) -> None:
    """Delete the Merkle tree (level files, leaf and event id indexes, cursors, size), keeping the checkpoints and the
    origin: the next ingest rebuilds it from the logs as they are."""
    for name in ("level", "ids", "leaves", "logs", "cursors", "tree-size"):
        target = os.path.join(tree_dir(str(root)), name)
        if os.path.isdir(target):
            shutil.rmtree(target)
        elif os.path.exists(target):
            os.unlink(target)
