"""The hook as a process: exit codes, stdout, stderr, what reaches disk.

Tests taking ``hook_path`` run through both paths of issue 29 (tests/hook_paths.py): the
Python hook, and the native client answered by a capture server. The import-rule tests at
the end are about the Python hook's interpreter and run it alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentlog.log.layout import iter_logs
from agentlog.log.verify import verify_log
from agentlog.core.model import Event

from conftest import REPO
from hook_paths import HookPath

SID = "3f2d1c48-9b7a-4e51-8c6d-0a1b2c3d4e5f"


def frames(home: Path) -> list[dict[str, Any]]:
    out = []
    for path in iter_logs(str(home)):
        with open(path, "rb") as f:
            out += [json.loads(line) for line in f]
    return out


def events(home: Path) -> list[dict[str, Any]]:
    return [f["event"] for f in frames(home)]


def all_bytes_on_disk(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())


def payload(**kw: object) -> bytes:
    base: dict[str, object] = {"session_id": SID, "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": "hello"}
    base.update(kw)
    return json.dumps(base).encode()


def test_records_one_frame_and_says_nothing(agentlog_home: Path, hook_path: HookPath) -> None:
    r = hook_path.run(payload())
    assert r.returncode == 0
    assert r.stdout == b""
    assert r.stderr == b""
    evs = events(agentlog_home)
    assert len(evs) == 1
    ev = Event.from_wire(evs[0])
    assert ev.kind == "prompt_submitted"
    assert ev.provider == "claude_code"
    assert ev.provider_session_id == SID
    assert ev.event_id[14] == "7"  # UUIDv7
    assert ev.observed_at == ev.captured_at > 1_700_000_000_000_000
    assert ev.raw == json.loads(payload())
    for p in iter_logs(str(agentlog_home)):
        assert verify_log(p).status == "intact"


def test_files_are_private(agentlog_home: Path, hook_path: HookPath) -> None:
    hook_path.run(payload())
    for p in agentlog_home.rglob("*"):
        mode = p.stat().st_mode & 0o777
        if p.is_dir():
            assert mode == 0o700, p
        else:
            assert mode == 0o600, p


@pytest.mark.parametrize(
    "stdin, error",
    [
        (b"", "empty_payload"),
        (b"   \n", "empty_payload"),
        (b"{not json", "invalid_json"),
        (b"[1, 2, 3]", "payload_not_object"),
        (b'"just a string"', "payload_not_object"),
        (b"null", "payload_not_object"),
    ],
)
def test_bad_payloads_are_recorded_as_gaps(agentlog_home: Path, hook_path: HookPath, stdin: bytes,
                                           error: str) -> None:
    r = hook_path.run(stdin)
    assert r.returncode == 0
    assert r.stdout == b""
    (said,) = hook_path.said(r)
    assert said.startswith(b"agentlog hook: ")
    (ev,) = events(agentlog_home)
    assert ev["kind"] == "unknown"
    assert ev["attrs"]["payload_error"] == error
    Event.from_wire(ev)


def test_non_utf8_payload_keeps_what_parses(agentlog_home: Path, hook_path: HookPath) -> None:
    stdin = b'{"session_id": "s-utf8", "hook_event_name": "UserPromptSubmit", "prompt": "caf\xe9 \xff"}'
    r = hook_path.run(stdin)
    assert r.returncode == 0 and r.stdout == b""
    assert len(hook_path.said(r)) == 1
    (ev,) = events(agentlog_home)
    assert ev["attrs"]["payload_error"] == "invalid_utf8"
    assert ev["provider_session_id"] == "s-utf8"
    assert ev["kind"] == "prompt_submitted"
    assert "\ufffd" in ev["content"]["prompt"]


def test_non_utf8_garbage(agentlog_home: Path, hook_path: HookPath) -> None:
    r = hook_path.run(bytes(range(256)) * 4)
    assert r.returncode == 0 and r.stdout == b"" and len(hook_path.said(r)) == 1
    (ev,) = events(agentlog_home)
    assert ev["kind"] == "unknown"
    assert ev["attrs"]["payload_error"] in ("invalid_json", "invalid_utf8")


def test_oversized_payload_is_capped_and_recorded(agentlog_home: Path, hook_path: HookPath) -> None:
    big = b'{"session_id": "s-big", "hook_event_name": "PostToolUse", "tool_response": "' + b"x" * (17 << 20) + b'"}'
    r = hook_path.run(big)
    assert r.returncode == 0 and r.stdout == b""
    assert len(hook_path.said(r)) == 1
    (ev,) = events(agentlog_home)
    assert ev["kind"] == "unknown"
    assert ev["attrs"]["payload_error"] == "oversized"
    assert ev["attrs"]["payload_bytes"] == len(big)
    assert ev["provider_session_id"] == "s-big"  # sniffed from the head of the payload
    assert len(ev["content"]["payload_head"]) <= 64 << 10
    assert sum(p.stat().st_size for p in agentlog_home.rglob("*.jsonl")) < 1 << 20


def test_unknown_agent_is_recorded_not_fatal(agentlog_home: Path, hook_path: HookPath) -> None:
    r = hook_path.run(payload(), "vscode")
    assert r.returncode == 0 and r.stdout == b""
    assert len(hook_path.said(r)) == 1
    (ev,) = events(agentlog_home)
    assert ev["attrs"]["adapter_error"] == "unknown_agent"


def test_unwritable_data_root_still_exits_zero(tmp_path: Path, hook_path: HookPath) -> None:
    """The native client finds no socket there and falls back: the Python hook's outcome."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = hook_path.run(payload(), env={"AGENTLOG_HOME": str(blocker / "home")}, served=False)
    assert r.returncode == 0 and r.stdout == b""
    assert len(r.stderr.splitlines()) == 1


def test_unknown_event_is_recorded_and_listed(agentlog_home: Path, hook_path: HookPath) -> None:
    r = hook_path.run(payload(hook_event_name="SomethingNew2027", extra_field=1))
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    (ev,) = events(agentlog_home)
    assert ev["kind"] == "unknown"
    assert ev["attrs"].get("unrecognised") is True
    lines = (agentlog_home / "state" / "unrecognised.jsonl").read_text().splitlines()
    rec = json.loads(lines[-1])
    assert rec["event"] == "SomethingNew2027" and "extra_field" in rec["keys"]


def test_capture_test_flag(agentlog_home: Path, hook_path: HookPath) -> None:
    hook_path.run(payload(hook_event_name="SessionStart", _agentlog_capture_test=True,
                     session_id="agentlog-capture-test-1-2"))
    (ev,) = events(agentlog_home)
    assert ev["kind"] == "capture_test"
    # install's wiring check is not a session anyone ran: not listed, not left open
    from agentlog.api import run_sql

    assert run_sql(str(agentlog_home), "select count(*) as n from sessions").records() == [{"n": 0}]
    hook_path.run(payload(hook_event_name="SessionStart", session_id="real-1"))
    assert run_sql(str(agentlog_home), "select provider_session_id from sessions").records() == [
        {"provider_session_id": "real-1"}]


def test_codex_turn_end_imports_its_rollout_in_the_background(agentlog_home: Path, tmp_path: Path,
                                                              hook_path: HookPath) -> None:
    """Codex's Stop hook starts `agentlog import codex <rollout>` detached: the exit code
    its PostToolUse lacks arrives from the rollout, without waiting in the hook."""
    import shutil
    import time

    from agentlog.api import run_sql

    src = Path(__file__).parent / "data" / "real_agents" / "codex" / "0.171.0" / "nonzero_exit.jsonl"
    rollout = tmp_path / "rollout.jsonl"
    shutil.copy(src, rollout)
    sid = json.loads(src.read_text().splitlines()[0])["payload"]["id"]
    base = {"session_id": sid, "transcript_path": str(rollout), "cwd": str(tmp_path), "turn_id": "t"}
    for ev in ({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "call_al0000",
                "tool_input": {"command": "python3 -c 'import sys; sys.exit(3)'"}},
               {"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "call_al0000",
                "tool_input": {"command": "python3 -c 'import sys; sys.exit(3)'"}, "tool_response": ""}):
        hook_path.run(json.dumps({**base, **ev}).encode(), "codex")
    started = time.monotonic()
    proc = hook_path.run(json.dumps({**base, "hook_event_name": "Stop", "stop_hook_active": False}).encode(), "codex")
    assert proc.returncode == 0 and proc.stdout == b"{}"
    assert time.monotonic() - started < 5  # the hook did not wait for the import
    state = agentlog_home / "state" / "import.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and str(rollout) not in (state.read_text() if state.exists() else ""):
        time.sleep(0.1)
    rows = run_sql(str(agentlog_home), "select outcome_status, exit_code from tool_calls "
                                       "where provider_call_id = 'call_al0000'").records()
    assert rows == [{"outcome_status": "failure", "exit_code": 3}]


@pytest.mark.parametrize(
    "agent, event, stdout",
    [
        ("claude-code", "Stop", b""),
        ("cursor", "stop", b""),
        ("gemini-cli", "BeforeTool", b"{}"),
        ("gemini-cli", "AfterAgent", b"{}"),
        ("codex", "Stop", b"{}"),
        ("codex", "PreToolUse", b""),
    ],
)
def test_stdout_is_only_what_the_protocol_needs(agent: str, event: str, stdout: bytes, hook_path: HookPath) -> None:
    key = "conversation_id" if agent == "cursor" else "session_id"
    r = hook_path.run(json.dumps({key: "s1", "hook_event_name": event, "stop_hook_active": False}).encode(), agent)
    assert r.returncode == 0
    assert r.stdout == stdout
    if stdout:
        json.loads(stdout)


def test_codex_notify_argument(agentlog_home: Path, hook_path: HookPath) -> None:
    arg = json.dumps(
        {
            "type": "agent-turn-complete",
            "thread-id": "b5f6c1c2-1111-2222-3333-444455556666",
            "turn-id": "12345",
            "cwd": "/tmp",
            "input-messages": ["Rename foo to bar"],
            "last-assistant-message": "Done.",
        }
    )
    r = hook_path.run(None, "codex", arg)
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    (ev,) = events(agentlog_home)
    assert ev["kind"] == "turn_stopped"
    assert ev["provider"] == "codex"
    assert ev["provider_session_id"] == "b5f6c1c2-1111-2222-3333-444455556666"
    assert ev["provider_turn_id"] == "12345"


CANARIES = {
    "aws": "AKIAQ3EGUWXYZ7PLMN4B",
    "github": "ghp_" + "Zq8" * 12,
    "anthropic": "sk-ant-api03-" + "q7Xw" * 10,
    "openai": "sk-proj-" + "Lm3k" * 10,
    "slack": "xoxb-1234567890-abcdefghij",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnktdXNlciJ9.c2lnbmF0dXJlLWNhbmFyeS12YWx1ZQ",
    "password": "hunter2-canary-pw",
    "bearer": "bearer-canary-token-0099",
    "pem": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7canary",
}


def _secret_payloads() -> list[bytes]:
    c = CANARIES
    pem = f"-----BEGIN PRIVATE KEY-----\n{c['pem']}\n-----END PRIVATE KEY-----"
    return [
        payload(prompt=f"use {c['aws']} and {c['github']} please"),
        payload(
            hook_event_name="PreToolUse",
            tool_name="Bash",
            tool_use_id="toolu_x",
            tool_input={"command": f"curl -H 'Authorization: Bearer {c['bearer']}' https://example.invalid && export PASSWORD={c['password']}"},
        ),
        payload(
            hook_event_name="PostToolUse",
            tool_name="Read",
            tool_use_id="toolu_y",
            tool_input={"file_path": "/tmp/.env", "note": c["anthropic"]},
            tool_response={"type": "text", "file": {"content": f"OPENAI_API_KEY={c['openai']}\nSLACK={c['slack']}\n{pem}\n"}},
        ),
        payload(hook_event_name="PostToolUseFailure", tool_name="Bash", tool_use_id="toolu_z", tool_input={"command": "x"}, error=f"Exit code 1\nbad token {c['jwt']}"),
    ]


def test_secret_canaries_never_reach_disk(agentlog_home: Path, hook_path: HookPath) -> None:
    for stdin in _secret_payloads():
        r = hook_path.run(stdin)
        assert r.returncode == 0 and r.stderr == b"", r.stderr
    disk = all_bytes_on_disk(agentlog_home)
    for name, secret in CANARIES.items():
        assert secret.encode() not in disk, name
    assert b"[REDACTED:" in disk
    evs = events(agentlog_home)
    assert sum(e["attrs"].get("redactions", 0) for e in evs) >= len(CANARIES)
    for p in iter_logs(str(agentlog_home)):
        assert verify_log(p).status == "intact"


def test_metadata_only_writes_no_content(agentlog_home: Path, hook_path: HookPath) -> None:
    marker = "PURPLE-ELEPHANT-CONTENT-42"
    env = {"AGENTLOG_CAPTURE_MODE": "metadata_only"}
    hook_path.run(payload(prompt=f"say {marker}"), env=env)
    hook_path.run(
        payload(hook_event_name="PostToolUse", tool_name="Bash", tool_use_id="t", tool_input={"command": f"echo {marker}"}, tool_response={"stdout": marker}),
        env=env,
    )
    disk = all_bytes_on_disk(agentlog_home)
    assert marker.encode() not in disk
    for ev in events(agentlog_home):
        assert "content" not in ev and "raw" not in ev
        assert ev["capture_mode"] == "metadata_only"


def test_config_file_sets_capture_mode(agentlog_home: Path, hook_path: HookPath) -> None:
    (agentlog_home / "config.toml").write_text('capture_mode = "metadata_only"\n')
    hook_path.run(payload(prompt="secret-ish words"))
    (ev,) = events(agentlog_home)
    assert ev["capture_mode"] == "metadata_only" and "content" not in ev
    # a second run reads the cache, not the TOML
    assert (agentlog_home / "state" / "config.cache.json").exists()


def test_bad_config_falls_back_to_defaults(agentlog_home: Path, hook_path: HookPath) -> None:
    (agentlog_home / "config.toml").write_text('capture_mode = "everything"\n')
    r = hook_path.run(payload())
    assert r.returncode == 0 and len(hook_path.said(r)) == 1
    (ev,) = events(agentlog_home)
    assert ev["capture_mode"] == "full"


def test_hook_imports_only_the_standard_library(tmp_path: Path, agentlog_home: Path) -> None:
    """Run the real hook entry and list every module it loaded."""
    probe = tmp_path / "probe.py"
    script = str(REPO / "src" / "agentlog" / "_hook.py")
    # Run the entry script's own set-up (not its __main__ block, which ends
    # the process with posix._exit), then its main, then list the modules.
    probe.write_text(
        "import runpy, sys\n"
        f"ns = runpy.run_path({script!r}, run_name='probe')\n"
        "ns['main'](['claude-code'])\n"
        "import json\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    stdin = payload(hook_event_name="PostToolUse", tool_name="Bash", tool_use_id="t", tool_input={"command": "git status"}, tool_response={"stdout": "password=hunter22"})
    r = subprocess.run([sys.executable, "-I", "-S", str(probe)], input=stdin, capture_output=True, timeout=60)
    assert r.returncode == 0
    modules = json.loads(r.stderr.decode().splitlines()[-1])
    # the probe itself imported runpy and json; everything else must be stdlib or ours
    foreign = [m for m in modules if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] not in ("agentlog", "__main__")]
    assert foreign == []
    for heavy in ("click", "rich", "orjson", "duckdb", "pyarrow", "deltalake", "tomlkit"):
        assert heavy not in modules
    assert len(events(agentlog_home)) == 1


def test_hook_path_avoids_expensive_stdlib_modules(agentlog_home: Path) -> None:
    """Not a correctness rule but a cost rule (docs/hook-path.md): re, json, typing… cost ms each."""
    code = (
        "import sys, posix\n"
        f"sys.path.insert(0, {str(REPO / 'src')!r})\n"
        "fd = posix.open(sys.argv[1], posix.O_RDONLY); posix.dup2(fd, 0)\n"
        "from agentlog.capture.hook import main\n"
        "main(['claude-code'])\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    expensive = {"os", "re", "json", "typing", "uuid", "dataclasses", "enum", "functools", "collections", "datetime", "tomllib", "inspect", "logging", "pathlib", "shlex", "hashlib"}
    pytest_out = ("Exit code 1\nFAILED tests/t.py::test_timeout - AssertionError\n"
                  "=== 1 failed, 3 passed in 0.1s ===\nTraceback (most recent call last):\nModuleNotFoundError: x")
    for n, body in enumerate((
        dict(hook_event_name="PostToolUse", tool_name="Edit", tool_use_id="t", tool_input={"file_path": "/tmp/a.py", "old_string": "a", "new_string": "b"}, tool_response={"filePath": "/tmp/a.py"}),
        # a failed call: the failure classifier and its summaries run too
        dict(hook_event_name="PostToolUseFailure", tool_name="Bash", tool_use_id="f", tool_input={"command": "pytest -q"}, error=pytest_out),
        dict(hook_event_name="PostToolUse", tool_name="Bash", tool_use_id="g", tool_input={"command": "pytest -q"}, tool_response={"stdout": "4 passed in 0.1s", "stderr": ""}),
    )):
        p = agentlog_home / f"payload{n}.json"
        p.write_bytes(payload(**body))
        r = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(p)], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        loaded = set(r.stdout.decode().split())
        assert loaded & expensive == set(), body["hook_event_name"]
        if n == 1:
            assert "agentlog.capture.failures.summaries" in loaded
