"""Every command against an unusable data root: one clear line and exit 1 or 2, never a
Python traceback (issue 27, finding 2). The roots: a regular file, a read-only file system,
a full one (tmpfs mounts in a private mount namespace; skipped where namespaces are not
allowed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = [
    ["status"], ["timeline"], ["failures"], ["sessions"], ["verify"], ["ingest"], ["usage"], ["search", "foo"],
    ["memory", "list"], ["project"], ["why"], ["show", "abc"], ["rebuild"], ["seal"],
    ["purge", "--session", "abc", "--dry-run"], ["state", "--at", "now"], ["trace", "abc"], ["config", "show"],
    ["sql", "select 1"], ["query", "SHOW ATTEMPTS"], ["correct", "abc", "--outcome", "failed"],
]
AGENTLOG = [sys.executable, "-m", "agentlog"]


def _namespaces() -> bool:
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30)
    return r.returncode == 0


NS = _namespaces()


def _check(r: subprocess.CompletedProcess[str], what: str) -> None:
    out = r.stdout + r.stderr
    assert "Traceback" not in out, (what, out[-2000:])
    assert r.returncode in (0, 1, 2), (what, r.returncode, out[-2000:])
    if r.returncode:
        assert r.stderr.strip(), what  # says why


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: "-".join(a)[:30])
def test_a_data_root_that_is_a_file(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    root.write_text("not a directory\n")
    monkeypatch.setenv("AGENTLOG_HOME", str(root))
    r = subprocess.run([*AGENTLOG, *args], capture_output=True, text=True, timeout=120)
    _check(r, f"file root: {args}")


@pytest.mark.skipif(not NS, reason="needs unshare -rm (user and mount namespaces) for a tmpfs")
@pytest.mark.parametrize("kind", ["read-only", "full"])
def test_a_read_only_or_full_data_root(kind: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    setup = f"mount -t tmpfs -o size=256k tmpfs {root}"
    if kind == "read-only":
        setup += f" && mount -o remount,ro {root}"
    else:
        setup += f" && (dd if=/dev/zero of={root}/fill bs=4k 2>/dev/null || true)"
    runs = []
    for args in COMMANDS:
        quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in [*AGENTLOG, *args])
        runs.append(f"{quoted} >{tmp_path}/out.$i 2>{tmp_path}/err.$i; echo $? >{tmp_path}/rc.$i; i=$((i+1))")
    script = setup + " && i=0 && " + " && ".join(runs)
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=900,
                       env={"AGENTLOG_HOME": str(root), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    for i, args in enumerate(COMMANDS):
        rc = int((tmp_path / f"rc.{i}").read_text())
        out, err = (tmp_path / f"out.{i}").read_text(), (tmp_path / f"err.{i}").read_text()
        _check(subprocess.CompletedProcess(args, rc, out, err), f"{kind} root: {args}")
