"""The native hook client ``agentlog-hook`` (issue 29): its build, the protocol as it
speaks it to a real socket, every fallback, and a fuzz pass (slow tier).

Two builds of the client per module, both through ``build_client``: the real one
(its fallback is this interpreter and the package's ``_hook.py``) and a recording
one whose fallback is a tiny C recorder (tests/native_support.py), so that a test
sees exactly what a fallback received. The recorder stands in for the
interpreter itself: ``/bin/sh`` would refuse the ``-I -S`` the client passes.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentlog.capture import wire
from agentlog.core.ids import uuid7_time_ms
from agentlog.core.paths import data_root
from agentlog.install import native_build
from agentlog.install.native_build import NO_COMPILER, build_client
from native_support import (
    HOOK_MARK, KEEP, RECORDER_C, FakeDaemon, Record, Run, fuzz, run_client, short_root,
)

ONE_LINE = b"agentlog-hook: "


@dataclass(frozen=True)
class Clients:
    real: str
    recording: str
    recorder: str


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Clients:
    where = tmp_path_factory.mktemp("native")
    real = build_client(str(where / "real"))
    assert real.path is not None, real.reason
    compiler = native_build.find_compiler()
    assert compiler is not None
    (where / "recorder.c").write_text(RECORDER_C)
    subprocess.run([*compiler.command, "-O2", "-o", str(where / "recorder"), str(where / "recorder.c")], check=True)
    recording = build_client(str(where / "rec"), python=str(where / "recorder"), hook=HOOK_MARK)
    assert recording.path is not None, recording.reason
    return Clients(real.path, recording.path, str(where / "recorder"))


@pytest.fixture
def root() -> Iterator[Path]:
    with short_root() as where:
        yield where


@pytest.fixture
def daemon(root: Path) -> Iterator[FakeDaemon]:
    with FakeDaemon(root) as d:
        yield d


def assert_fell_back(r: Run, clients: Clients, stdin: bytes, args: list[str], *, quiet: bool) -> Record:
    """The fallback got exactly the kept stdin, the three variables and the argv; nothing on stdout."""
    assert r.returncode == 0
    assert r.stdout == b""
    assert r.record is not None, r.stderr
    rec = r.record
    assert rec.stdin == stdin[:KEEP]
    assert rec.stdin_bytes == str(len(stdin))
    assert rec.event_id is not None and wire.is_uuid7(rec.event_id.encode())
    assert rec.captured_at is not None and r.started_us <= int(rec.captured_at) <= r.ended_us
    assert uuid7_time_ms(rec.event_id) == int(rec.captured_at) // 1000
    assert rec.argv == [clients.recorder.encode(), b"-I", b"-S", HOOK_MARK.encode(), *(a.encode() for a in args)]
    if quiet:
        assert r.stderr == b""
    else:
        assert r.stderr.startswith(ONE_LINE) and r.stderr.endswith(b"; running the Python hook\n"), r.stderr
        assert r.stderr.count(b"\n") == 1
    return rec


def only_request(daemon: FakeDaemon) -> wire.Request:
    (seen,) = daemon.seen.values()
    return seen.request


# -- building -------------------------------------------------------------------------


def test_build_reuses_its_cache_and_removes_other_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_build, "RETIRE_AFTER_S", 0.0)  # the grace for running sessions: test_install_native.py
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(mode=0o755)
    stale = bin_dir / "agentlog-hook-0123456789abcdef"
    stale.write_bytes(b"old")
    dead_temp = bin_dir / ".agentlog-hook-dead.tmp"
    dead_temp.write_bytes(b"")
    os.utime(dead_temp, (time.time() - 7200, time.time() - 7200))
    live_temp = bin_dir / ".agentlog-hook-live.tmp"  # another build under way
    live_temp.write_bytes(b"")

    first = build_client(str(tmp_path))
    assert first.path is not None and not first.cached and first.reason == ""
    assert Path(first.path).parent == bin_dir and len(Path(first.path).name) == len("agentlog-hook-") + 16
    assert (bin_dir.stat().st_mode & 0o777) == 0o700 and (Path(first.path).stat().st_mode & 0o777) == 0o700
    assert sorted(p.name for p in bin_dir.iterdir()) == sorted([Path(first.path).name, live_temp.name])

    again = build_client(str(tmp_path))
    assert again.path == first.path and again.cached

    other = build_client(str(tmp_path), python="/usr/bin/python3-elsewhere")  # another key, the old one goes
    assert other.path is not None and other.path != first.path and not Path(first.path).exists()


def test_build_without_a_compiler_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_build.importlib.util, "find_spec", lambda name: None)  # no ziglang either
    empty = tmp_path / "empty"
    empty.mkdir()
    result = build_client(str(tmp_path), environ={"PATH": str(empty), "CC": "no-such-cc"})
    assert result.path is None and result.reason == NO_COMPILER
    assert not (tmp_path / "bin").exists()


def test_build_prefers_cc_and_reports_its_first_error_lines(tmp_path: Path) -> None:
    fake = tmp_path / "fakecc"
    fake.write_text('#!/bin/sh\ncase " $* " in *" --version "*) echo "fakecc 1.0"; exit 0;; esac\n'
                    'echo "$*" >> "$(dirname "$0")/args"\n'
                    'echo "agentlog_hook.c:1:1: error: it broke" >&2; echo "second line" >&2; exit 1\n')
    fake.chmod(0o755)
    result = build_client(str(tmp_path), environ={"PATH": os.environ["PATH"], "CC": f"{fake} -m64"})
    assert result.path is None
    assert result.reason == "the C compiler failed: agentlog_hook.c:1:1: error: it broke | second line"
    assert result.compiler == (str(fake), "-m64")
    strict, lenient = (tmp_path / "args").read_text().splitlines()  # a failed build is tried once without -Werror
    assert strict.startswith("-m64 -O2 -std=c11 -Wall -Wextra -Werror -DAGENTLOG_PYTHON=")
    assert lenient.startswith("-m64 -O2 -std=c11 -Wall -Wextra -DAGENTLOG_PYTHON=")
    assert [p.name for p in (tmp_path / "bin").iterdir()] == []  # no temporary left behind


def test_any_bytes_in_the_fallback_paths_reach_the_fallback(clients: Clients, tmp_path: Path, root: Path) -> None:
    """The two paths go into the C source as string literals: quotes, backslashes, a trigraph,
    a newline, non-ASCII and a byte that is not UTF-8 all come out as they went in."""
    weird = '/odd "dir"\\??/x\n\tq\u00e9\udcff%s/_hook.py'
    result = build_client(str(tmp_path), python=clients.recorder, hook=weird)
    assert result.path is not None, result.reason
    r = run_client(result.path, root, b"x", "codex")
    assert r.record is not None and r.record.argv[3] == os.fsencode(weird)


# -- the 'A' path -----------------------------------------------------------------------


def test_an_answer_reaches_stdout_byte_for_byte_and_the_request_is_right(clients: Clients, root: Path,
                                                                          daemon: FakeDaemon, tmp_path: Path) -> None:
    daemon.reply = bytes(range(256)) * 300 + b"\n"
    stdin = b'{"hook_event_name": "Stop", "session_id": "s"}\n'
    args = ["mode=answer", "two words", "\u00e9", ""]
    env = {"CLAUDE_PROJECT_DIR": "/p/q", "AGENTLOG_DURABILITY": "relaxed", "AGENTLOG_CAPTURE_MODE": "",
           "UNRELATED": "x", "GEMINI_PROJECT_DIR_X": "y"}
    r = run_client(clients.recording, root, stdin, "claude-code", *args, env=env, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr, r.record) == (0, daemon.reply, b"", None)
    req = only_request(daemon)
    assert req.agent == "claude-code" and req.args == args
    assert req.env == {"CLAUDE_PROJECT_DIR": "/p/q", "AGENTLOG_DURABILITY": "relaxed", "AGENTLOG_CAPTURE_MODE": ""}
    assert req.cwd == os.path.realpath(tmp_path)
    assert wire.is_uuid7(req.event_id.encode()) and uuid7_time_ms(req.event_id) == req.captured_at // 1000
    assert r.started_us <= req.captured_at <= r.ended_us
    assert (req.stdin_bytes, req.payload) == (len(stdin), stdin)
    assert req.deadline_ms == 1500  # how long it waits (field 9): the default


def test_the_hook_word_is_skipped_as_the_python_hook_does(clients: Clients, root: Path, daemon: FakeDaemon) -> None:
    r = run_client(clients.recording, root, b"{}", "hook", "gemini-cli", "mode=answer")
    assert r.stdout.startswith(b"ok ")
    req = only_request(daemon)
    assert (req.agent, req.args) == ("gemini-cli", ["mode=answer"])


def test_a_payload_over_16_mib_is_counted_whole_and_cut_to_16_mib(clients: Clients, root: Path,
                                                                   daemon: FakeDaemon) -> None:
    stdin = random.Random(29).randbytes(KEEP + 12345)
    r = run_client(clients.recording, root, stdin, "claude-code", "mode=answer")
    assert r.returncode == 0 and r.stdout.startswith(b"ok ") and r.record is None
    req = only_request(daemon)
    assert req.stdin_bytes == len(stdin) and req.payload == stdin[:KEEP]


@pytest.mark.parametrize("how", ["devnull", "closed"])
def test_an_empty_or_closed_stdin_is_an_empty_payload(clients: Clients, root: Path, daemon: FakeDaemon,
                                                      how: str) -> None:
    wrap = ["/bin/sh", "-c", 'exec "$0" "$@" <&-'] if how == "closed" else None
    r = run_client(clients.recording, root, None, "cursor", "mode=answer", wrap=wrap)
    assert r.returncode == 0 and r.stdout.startswith(b"ok ")
    req = only_request(daemon)
    assert (req.stdin_bytes, req.payload) == (0, b"")


def test_invalid_utf8_and_nul_bytes_pass_untouched(clients: Clients, root: Path, daemon: FakeDaemon) -> None:
    stdin = b'\xff\xfe\x00{"a": "\x80\xc3("}\x00'
    r = run_client(clients.recording, root, stdin, "codex", "mode=answer")
    assert r.stdout.startswith(b"ok ")
    assert only_request(daemon).payload == stdin


@pytest.mark.parametrize("how", ["closed", "broken pipe"])
def test_a_closed_stdout_does_not_fail_the_hook(clients: Clients, root: Path, daemon: FakeDaemon, how: str) -> None:
    daemon.reply = b"x" * (256 << 10)  # more than a pipe holds
    if how == "closed":
        r = run_client(clients.recording, root, b"{}", "claude-code", "mode=answer",
                       wrap=["/bin/sh", "-c", 'exec "$0" "$@" >&-'])
    else:
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            r = run_client(clients.recording, root, b"{}", "claude-code", "mode=answer", stdout=write_end)
        finally:
            os.close(write_end)
    assert r.returncode == 0  # not killed by SIGPIPE
    assert r.record is None and r.stderr == b""
    assert only_request(daemon).payload == b"{}"


def test_an_answer_after_a_delay_within_the_deadline_is_taken(clients: Clients, root: Path,
                                                              daemon: FakeDaemon) -> None:
    r = run_client(clients.recording, root, b"{}", "claude-code", "mode=delay:150", ack_ms=3000)
    assert r.stdout.startswith(b"ok ") and r.record is None and r.elapsed >= 0.15
    assert only_request(daemon).deadline_ms == 3000  # the client says how long it waits


# -- fallbacks ------------------------------------------------------------------------


def _live_daemon_elsewhere(root: Path, stack: ExitStack) -> FakeDaemon:
    return stack.enter_context(FakeDaemon(root / "elsewhere"))


def _nothing(root: Path, stack: ExitStack) -> None:
    pass


def _run_dir_only(root: Path, stack: ExitStack) -> None:
    (root / "run").mkdir(mode=0o700)


def _symlinked_socket(root: Path, stack: ExitStack) -> FakeDaemon:
    d = _live_daemon_elsewhere(root, stack)
    (root / "run").mkdir(mode=0o700)
    (root / "run" / "hook.sock").symlink_to(d.path)
    return d


def _symlinked_run_dir(root: Path, stack: ExitStack) -> FakeDaemon:
    d = _live_daemon_elsewhere(root, stack)
    (root / "run").symlink_to(d.run_dir)
    return d


def _open_run_dir(root: Path, stack: ExitStack) -> FakeDaemon:
    d = stack.enter_context(FakeDaemon(root))
    os.chmod(d.run_dir, 0o755)
    return d


def _foreign_run_dir(root: Path, stack: ExitStack) -> FakeDaemon:
    d = stack.enter_context(FakeDaemon(root))
    os.chown(d.run_dir, 65534, -1)
    return d


def _foreign_socket(root: Path, stack: ExitStack) -> FakeDaemon:
    d = stack.enter_context(FakeDaemon(root))
    os.chown(d.path, 65534, -1)
    return d


def _regular_file(root: Path, stack: ExitStack) -> None:
    (root / "run").mkdir(mode=0o700)
    (root / "run" / "hook.sock").write_bytes(b"")


def _refusing(root: Path, stack: ExitStack) -> None:
    (root / "run").mkdir(mode=0o700)
    s = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    s.bind(str(root / "run" / "hook.sock"))  # bound, never listening: connect is refused


def _daemon(root: Path, stack: ExitStack) -> FakeDaemon:
    return stack.enter_context(FakeDaemon(root))


VALID_A = wire.encode_response(wire.RECORDED, b"0123456789")
# name -> (set-up, the mode argument, quiet, does the daemon get the request)
FALLBACKS: dict[str, tuple[Callable[[Path, ExitStack], FakeDaemon | None], str, bool, bool]] = {
    "no run dir": (_nothing, "mode=answer", True, False),
    "no socket": (_run_dir_only, "mode=answer", True, False),
    "socket is a symlink": (_symlinked_socket, "mode=answer", False, False),
    "run dir is a symlink": (_symlinked_run_dir, "mode=answer", False, False),
    "run dir is 0755": (_open_run_dir, "mode=answer", False, False),
    "run dir of another uid": (_foreign_run_dir, "mode=answer", False, False),
    "socket of another uid": (_foreign_socket, "mode=answer", False, False),
    "socket is a regular file": (_regular_file, "mode=answer", False, False),
    "connection refused": (_refusing, "mode=answer", True, False),
    "F": (_daemon, "mode=fallback", True, True),
    "closed unanswered": (_daemon, "mode=close", False, True),
    "garbage": (_daemon, "mode=raw:" + b"HTTP/1.1 200 OK\r\n\r\n".hex(), False, True),
    "closed mid-reply": (_daemon, "mode=raw:" + VALID_A[:-3].hex(), False, True),
    "closed mid-header": (_daemon, "mode=raw:" + VALID_A[:6].hex(), False, True),
    "bad status": (_daemon, "mode=raw:" + (b"ALR1X" + bytes(4)).hex(), False, True),
    "bad magic": (_daemon, "mode=raw:" + (b"ALR2A" + bytes(4)).hex(), False, True),
    "reply over 1 MiB": (_daemon, "mode=big", False, True),
}


@pytest.mark.parametrize("case", list(FALLBACKS))
def test_every_failure_falls_back_with_the_same_bytes_and_event_id(clients: Clients, root: Path, case: str) -> None:
    setup, mode, quiet, reaches = FALLBACKS[case]
    if "another uid" in case and os.getuid() != 0:
        pytest.skip("making a file of another uid needs root")
    stdin = b'{"hook_event_name": "PreToolUse", "x": "\xff"}'
    with ExitStack() as stack:
        d = setup(root, stack)
        r = run_client(clients.recording, root, stdin, "claude-code", mode, "more", ack_ms=5000)
        rec = assert_fell_back(r, clients, stdin, ["claude-code", mode, "more"], quiet=quiet)
        if d is not None:
            assert len(d.seen) == (1 if reaches else 0)
            if reaches:  # the daemon saw the same event id: the Python hook can tell it is one event
                assert only_request(d).event_id == rec.event_id


def test_a_silent_daemon_is_bounded_by_the_ack_deadline(clients: Clients, root: Path, daemon: FakeDaemon) -> None:
    r = run_client(clients.recording, root, b"{}", "claude-code", "mode=never", ack_ms=300)
    assert_fell_back(r, clients, b"{}", ["claude-code", "mode=never"], quiet=False)
    assert b"in time" in r.stderr
    assert 0.3 <= r.elapsed < 3.0, r.elapsed
    assert only_request(daemon).event_id == r.record.event_id  # type: ignore[union-attr]


@pytest.mark.parametrize(("value", "low", "high"), [("0", 0.0, 1.0), ("-7", 0.0, 1.0), ("junk", 1.5, 4.0)])
def test_the_ack_deadline_is_clamped_and_defaults_to_1500_ms(clients: Clients, root: Path, daemon: FakeDaemon,
                                                             value: str, low: float, high: float) -> None:
    r = run_client(clients.recording, root, b"{}", "claude-code", "mode=never", ack_ms=value)
    assert r.record is not None and low <= r.elapsed < high, r.elapsed


def test_a_payload_over_16_mib_reaches_the_fallback_cut_with_its_total(clients: Clients, root: Path) -> None:
    stdin = random.Random(7).randbytes(KEEP + 1)
    r = run_client(clients.recording, root, stdin, "codex")
    assert_fell_back(r, clients, stdin, ["codex"], quiet=True)


def test_what_the_protocol_cannot_carry_goes_to_the_fallback(clients: Clients, root: Path, daemon: FakeDaemon) -> None:
    many = ["mode=answer", *(f"a{i}" for i in range(32))]  # 33 extra args
    r = run_client(clients.recording, root, b"{}", "claude-code", *many)
    assert_fell_back(r, clients, b"{}", ["claude-code", *many], quiet=False)
    long_agent = "x" * 65
    r = run_client(clients.recording, root, b"{}", long_agent, "mode=answer")
    assert_fell_back(r, clients, b"{}", [long_agent, "mode=answer"], quiet=False)
    assert daemon.seen == {}


def test_the_fallback_gets_fresh_variables_even_when_they_were_set(clients: Clients, root: Path) -> None:
    env = {"AGENTLOG_HOOK_EVENT_ID": "stale", "AGENTLOG_HOOK_CAPTURED_AT": "1", "AGENTLOG_HOOK_STDIN_BYTES": "99"}
    r = run_client(clients.recording, root, b"abc", "cursor", env=env)
    rec = assert_fell_back(r, clients, b"abc", ["cursor"], quiet=True)
    assert rec.event_id != "stale"


@pytest.mark.parametrize("args", [[], ["--help"], ["hook"], ["hook", "-h"]])
def test_usage_goes_straight_to_the_python_hook_with_stdin_untouched(clients: Clients, root: Path,
                                                                     args: list[str]) -> None:
    r = run_client(clients.recording, root, b"left alone", *args)
    assert r.returncode == 0 and r.record is not None
    assert r.record.argv == [clients.recorder.encode(), b"-I", b"-S", HOOK_MARK.encode(), *(a.encode() for a in args)]
    assert r.record.stdin == b"left alone" and r.record.event_id is None


def test_the_real_fallback_records_as_the_python_hook_does(clients: Clients, root: Path) -> None:
    """No daemon: the real build execs this interpreter on the package's _hook.py."""
    stdin = b'{"session_id": "s-native", "hook_event_name": "AfterTool", "tool_name": "x", "cwd": "/tmp"}'
    r = run_client(clients.real, root, stdin, "gemini-cli")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"{}", b"")
    logs = list((root / "logs").rglob("*.jsonl"))
    assert len(logs) == 1 and b"s-native" in logs[0].read_bytes()


# -- the data root ------------------------------------------------------------------------


DATA_ROOTS: dict[str, Callable[[Path], dict[str, str]]] = {
    "AGENTLOG_HOME with ~ and ..": lambda b: {"AGENTLOG_HOME": "~/x/../h", "HOME": str(b)},
    "AGENTLOG_HOME ~ alone, HOME with a slash": lambda b: {"AGENTLOG_HOME": "~", "HOME": f"{b}/hh/"},
    "AGENTLOG_HOME relative": lambda b: {"AGENTLOG_HOME": "rel/./y//"},
    "AGENTLOG_HOME with dots and slashes": lambda b: {"AGENTLOG_HOME": f"{b}//a/../w/./"},
    "AGENTLOG_HOME ~unknown user": lambda b: {"AGENTLOG_HOME": "~no-such-user-29/x"},
    "XDG_DATA_HOME with a trailing slash": lambda b: {"AGENTLOG_HOME": "", "XDG_DATA_HOME": f"{b}/xdg/"},
    "XDG_DATA_HOME relative": lambda b: {"XDG_DATA_HOME": "xdg-rel"},
    "HOME only": lambda b: {"XDG_DATA_HOME": "", "HOME": f"{b}/home//"},
}


@pytest.mark.parametrize("case", list(DATA_ROOTS))
def test_the_client_finds_the_data_root_as_data_root_does(clients: Clients, case: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with short_root() as base:
        env = DATA_ROOTS[case](base)
        full = {"HOME": os.environ.get("HOME", "/root"), **env}
        monkeypatch.chdir(base)
        monkeypatch.setenv("HOME", full["HOME"])  # expanduser reads the process's HOME
        expected = data_root(full)
        with FakeDaemon(Path(base, expected)) as d:
            r = run_client(clients.recording, None, b"{}", "claude-code", "mode=answer", env=env, cwd=base)
            assert r.stdout.startswith(b"ok ") and r.record is None, (expected, r.stderr)
            assert len(d.seen) == 1


# -- fuzz -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fuzz_every_payload_reaches_the_daemon_or_the_fallback(clients: Clients, root: Path) -> None:
    """10,000 runs, seeded: random stdin (empty to over 16 MiB, bytes of any kind), random
    extra arguments and variables, and a server that answers, answers late, sends garbage,
    a damaged or cut answer, 'F', or nothing. Every run exits 0 (no signal), and its
    payload reaches exactly one of: the daemon with an 'A' (the reply printed byte for
    byte), or the fallback (the same bytes, total and event id); a fallback where an
    answer was due only when the deadline passed."""
    t0 = time.monotonic()
    problems, outcomes = fuzz(clients.recording, clients.recorder, root, runs=10_000, seed=29, ack_ms=60)
    elapsed = time.monotonic() - t0
    assert problems == [], f"{len(problems)} problems in {elapsed:.0f} s ({outcomes}); first: {problems[:5]}"
    # about 45 % of the runs are due an answer: both paths must really have been taken
    assert outcomes["A"] >= 3000 and outcomes["fallback"] >= 3000, outcomes


@pytest.mark.slow
def test_no_undefined_behaviour_under_the_sanitizers(clients: Clients, tmp_path: Path, root: Path) -> None:
    """The client built with -fsanitize=address,undefined (errors fatal) through the fixed tests'
    scenarios and 300 fuzz runs."""
    flags = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g")
    built = build_client(str(tmp_path), python=clients.recorder, hook=HOOK_MARK, extra_flags=flags)
    if built.path is None:
        pytest.skip(f"no sanitizer build here: {built.reason}")
    problems, outcomes = fuzz(built.path, clients.recorder, root, runs=300, seed=2929, ack_ms=200)
    assert problems == [], problems[:5]
    assert outcomes["A"] >= 50 and outcomes["fallback"] >= 50, outcomes
    with FakeDaemon(root / "big") as d:
        r = run_client(built.path, root / "big", random.Random(3).randbytes(KEEP + 70000), "codex", "mode=answer")
        assert r.returncode == 0 and r.stdout.startswith(b"ok "), r.stderr[-2000:]
        r = run_client(built.path, root / "big", None, "codex", "mode=big")
        assert r.returncode == 0 and r.record is not None, r.stderr[-2000:]
        assert len(d.seen) == 2
    for env in ({"AGENTLOG_HOME": "~/a/../../b/./c//"}, {"AGENTLOG_HOME": "", "XDG_DATA_HOME": "x/"}, {"HOME": "/"}):
        r = run_client(built.path, None, b"{}", "cursor", env=env, cwd=tmp_path)
        assert r.returncode == 0 and r.record is not None, r.stderr[-2000:]
