"""A planted symlink or a foreign directory in the data root (issue 27, finding 15): the
hook never writes through a symlink and never into a directory others may write to; it
exits 0 as always and records why in its error log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentlog.core.paths import diagnostics_log as hook_error_log
from agentlog.log.layout import head_path, log_path, provider_dir, session_key

SESSION = "symlink-attack-1"


def _hook(root: Path, prompt: str = "hello") -> subprocess.CompletedProcess[bytes]:
    payload = {"session_id": SESSION, "hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": "/nonexistent"}
    return subprocess.run([sys.executable, "-m", "agentlog", "hook", "claude-code"], input=json.dumps(payload).encode(),
                          capture_output=True, timeout=60, env={**os.environ, "AGENTLOG_HOME": str(root)})


def _target(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    target.write_text("precious\n")
    return target


def test_a_symlinked_log_or_head_is_not_written_through(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert _hook(root).returncode == 0  # the provider directory exists now
    log = Path(log_path(str(root), "claude_code", session_key(SESSION + "-2")))
    target = _target(tmp_path, "bashrc")
    os.symlink(target, log)  # the next session's log points at a file of the user's
    payload = {"session_id": SESSION + "-2", "hook_event_name": "UserPromptSubmit", "prompt": "x", "cwd": "/nonexistent"}
    r = subprocess.run([sys.executable, "-m", "agentlog", "hook", "claude-code"], input=json.dumps(payload).encode(),
                       capture_output=True, timeout=60, env={**os.environ, "AGENTLOG_HOME": str(root)})
    assert r.returncode == 0
    assert target.read_text() == "precious\n"

    first = Path(log_path(str(root), "claude_code", session_key(SESSION)))
    head = Path(head_path(str(first)))
    head_target = _target(tmp_path, "ssh-config")
    head.unlink()
    os.symlink(head_target, head)  # the head a symlink to another file of the user's
    assert _hook(root, "again").returncode == 0
    assert head_target.read_text() == "precious\n"
    errors = Path(hook_error_log(str(root))).read_text()
    assert errors.count("\n") >= 2


def test_a_log_directory_anyone_may_write_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert _hook(root).returncode == 0
    log = Path(log_path(str(root), "claude_code", session_key(SESSION)))
    before = log.read_bytes()
    os.chmod(provider_dir(str(root), "claude_code"), 0o777)
    assert _hook(root, "into an open directory").returncode == 0
    assert log.read_bytes() == before
    assert "writable by anyone" in Path(hook_error_log(str(root))).read_text()
    os.chmod(provider_dir(str(root), "claude_code"), 0o700)
    assert _hook(root, "back to private").returncode == 0
    assert len(log.read_bytes()) > len(before)
