"""Every command against an unusable data root: one clear line and exit 1 or 2, never a
Python traceback (issue 27, finding 2). The roots: a regular file, a read-only file system,
a full one (tmpfs mounts in a private mount namespace; skipped where namespaces are not
allowed)."""

from __future__ import annotations

import os
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


@pytest.mark.skipif(not NS, reason="needs unshare -rm (user and mount namespaces) for a tmpfs")
def test_payloads_a_full_disk_drops_are_counted_and_recorded_as_a_gap(tmp_path: Path) -> None:
    """Issue 27, finding 22: on a full disk hooks exit 0 and earlier frames stay, but the calls'
    events vanished without a trace. Now the drops are counted in a record reserved while
    there was room, the next hook that can write records a capture_gap saying how many and
    when, and verify reports it without a traceback."""
    import json

    root = tmp_path / "root"
    root.mkdir()
    hook = " ".join([sys.executable, "-m", "agentlog", "hook", "claude-code"])

    def prompt(n: int) -> str:
        payload = json.dumps({"session_id": "s-full", "hook_event_name": "UserPromptSubmit",
                              "prompt": f"prompt number {n} " + "y" * 2000, "cwd": "/nonexistent"})
        return f"echo '{payload}' | {hook}; echo $? >> {tmp_path}/rcs"

    script = " && ".join([
        f"mount -t tmpfs -o size=512k tmpfs {root}",
        prompt(1),
        f"(dd if=/dev/zero of={root}/fill bs=4k 2>/dev/null || true)",
        prompt(2), prompt(3),
        f"cp {root}/state/dropped-payloads {tmp_path}/dropped",
        f"rm {root}/fill",
        prompt(4),
        f"({' '.join([sys.executable, '-m', 'agentlog', 'verify'])} >{tmp_path}/verify.out 2>&1; echo $? >{tmp_path}/verify.rc)",
        f"cat {root}/logs/claude_code/*.jsonl > {tmp_path}/log.jsonl",
    ])
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=600,
                       env={"AGENTLOG_HOME": str(root), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "rcs").read_text().split() == ["0", "0", "0", "0"]  # hooks never fail the agent
    assert (tmp_path / "dropped").read_text().split()[:2] == ["v1", "2"]
    log = (tmp_path / "log.jsonl").read_text()
    assert "prompt number 1" in log and "prompt number 4" in log
    assert "prompt number 2" not in log and "prompt number 3" not in log
    gaps = [json.loads(line)["event"] for line in log.splitlines() if '"kind":"capture_gap"' in line]
    assert gaps and gaps[-1]["attrs"]["dropped_payloads"] == 2 and gaps[-1]["attrs"]["reason"] == "disk_full"
    out = (tmp_path / "verify.out").read_text()
    assert "Traceback" not in out and int((tmp_path / "verify.rc").read_text()) in (0, 1)


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """`agentlog schema | head -1`: the pipe closes before the output is written; the
    command stops without a traceback or an error line, exit 0."""
    import subprocess
    import sys

    env = {**os.environ, "AGENTLOG_HOME": str(tmp_path / "data"), "HOME": str(tmp_path)}
    for args in (["schema"], ["status", "--no-ingest"], ["sql", "select * from range(200000)"]):
        with subprocess.Popen([sys.executable, "-m", "agentlog", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            err = proc.stderr.read().decode()
            assert proc.wait(timeout=120) == 0, (args, err)
        assert "Traceback" not in err and "Broken pipe" not in err and "Exception ignored" not in err, (args, err)


def test_a_native_library_panic_is_one_line_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyo3's PanicException (deltalake, tantivy) derives from BaseException: the guard still
    turns it into one line, exit 1."""
    import importlib

    from click.testing import CliRunner

    from agentlog.cli import cli

    class PanicException(BaseException):
        pass

    status = importlib.import_module("agentlog.store.status")

    def panics(*_a: object, **_k: object) -> None:
        raise PanicException("called `Option::unwrap()` on a `None` value")

    monkeypatch.setattr(status, "status", panics)
    r = CliRunner().invoke(cli, ["status"], env={"AGENTLOG_HOME": str(tmp_path / "data")})
    assert r.exit_code == 1 and "internal error in a native library (PanicException" in r.output
    assert "Traceback" not in r.output


def test_a_data_root_whose_name_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """A directory name of bytes that are not UTF-8 reaches Python as lone surrogates; the
    store's tables cannot live under it: one line, exit 1 (found by the fuzz pass)."""
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(tmp_path / "data-\udcff\udc80")
    for argv in (["sessions", "--all-projects", "--json"], ["status", "--json"], ["ingest"]):
        r = CliRunner().invoke(cli, argv, env={"AGENTLOG_HOME": root})
        assert r.exit_code == 1 and "not valid UTF-8" in r.output and "internal error" not in r.output, (argv, r.output)
