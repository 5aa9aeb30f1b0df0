"""A fuzz pass over every CLI command's arguments (issue 27): random text, paths, ids, dates and
numbers for every argument and option of every command and subcommand, enumerated from the click
group itself so a new command is covered the day it is added. Run in-process with CliRunner
against a copy of a small real data root (tests/fuzz_support.py). Every call must end with exit
0, 1 or 2, within its time limit, with no traceback and without the CLI's last-resort guard
firing (its "internal error … AGENTLOG_DEBUG=1" line means an exception nothing expected).

Bugs this pass found are kept as explicit regressions in :data:`REGRESSIONS`. With FUZZ_STATS=FILE,
each call's argv, exit code and the end of its stderr are appended to FILE (one JSON line each), to
see what the fuzz reaches."""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.cli import cli
from agentlog.memory.model import KINDS, LINK_RELATIONS
from fuzz_support import GUARD_MARKERS, Seed, changes, copy_root, dates, either, ids, json_values, numbers, paths, \
    prepare_paths, search_queries, seed_root, statements, texts, time_limit

pytestmark = pytest.mark.slow  # ~65 s on one core, ~50 s on two

# Each skip, and why: these would block, or act on the machine beyond a temporary data root and HOME.
SKIPS: dict[tuple[str, ...], str] = {
    ("serve",): "serves the dashboard over HTTP until stopped (blocks)",
    ("mcp",): "serves MCP on stdio (or HTTP) until its client goes away (blocks)",
    ("daemon", "run"): "runs the daemon's loop in the foreground until stopped (blocks)",
    ("vault", "serve"): "serves the vault over HTTP until stopped (blocks)",
    ("otel", "serve"): "serves OTLP over HTTP until stopped (blocks)",
    ("daemon", "start"): "starts a background daemon process that outlives the test",
    ("daemon", "install"): "writes a login service and runs systemctl --user / launchctl on the machine",
    ("daemon", "uninstall"): "runs systemctl --user / launchctl on the machine",
    ("bench", "agents"): "runs the real agent CLIs against their model services (network, minutes)",
    ("bench", "run"): "the whole benchmark: minutes of work and gigabytes by design",
    ("bench", "step"): "one benchmark step in a subprocess: minutes of work by design",
    ("bench", "load"): "loads --events synthetic events: a huge count is work asked for, not a hang",
    ("bench", "sample"): "generates --events synthetic events: a huge count is work asked for, not a hang",
    ("bench", "classify"): "a timed benchmark over generated data: minutes of work by design",
    ("bench", "proofs"): "the proofs step of bench run: loads --events synthetic events and ingests them four times",
    ("bench", "team"): "starts moto's S3 server and a Ray cluster, publishes --events synthetic events, queries for minutes",
    ("bench", "sandbox"): "a timed benchmark: a real agentlog run brokering --runs commands and --size-mb MB",
    ("bench", "relevance"): "builds the relevance corpus and embeds it (minutes) before it measures anything",
    ("bench", "web"): "the web step of bench run: builds a --events store and starts servers over it (minutes)",
    ("run",): "starts the named program under the sandbox and waits for it to exit",
    ("exec",): "its exit status is the brokered command's (126 outside a run), not agentlog's 0/1/2",
    ("bench", "hook"): "a timed benchmark spawning hook processes by the hundred",
    ("bench", "verify"): "a timed benchmark over generated logs of the --sizes asked",
    ("bench", "otel"): "a timed benchmark: receiver processes flooded with requests, an export of --export-events",
    ("bench", "ship"): "a timed benchmark: a vault server, enrolments and --mb MiB sessions shipped by the round",
    ("bench", "share"): "a timed benchmark: imports a generated --events session and shares and snapshots it --runs times",
    ("demo",): "replays every shared hook capture through a hook process (~30 s a call); its --home is a data "
               "root, fuzzed as AGENTLOG_HOME by test_fuzz_data_root",
}


EXAMPLES = 40
"""Hypothesis examples per command (every command together stays within ~2 minutes on 2 cores)."""
FEWER: dict[tuple[str, ...], int] = {("install",): 15, ("uninstall",): 15, ("doctor",): 10}
"""Commands whose every call costs a second or more: fewer examples."""
CALL_LIMIT = 60.0
"""Seconds one call may take before it counts as a hang."""

ID_NAMES = {"ident", "pid", "target", "entity_id", "session", "subject"}
DATE_NAMES = {"since", "until", "at", "before", "now"}
PATH_NAMES = {"path", "paths", "directory", "project_dir", "home", "cache_dir", "results_json", "out", "data_dir"}
NUMBER_TYPES = (click.types.IntParamType, click.types.FloatParamType)


def leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        if isinstance(cmd, click.Group):
            out += leaf_commands(cmd, prefix + (name,))
        else:
            out.append((prefix + (name,), cmd))
    return out


COMMANDS = leaf_commands(cli)


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    base = tmp_path_factory.mktemp("fuzz-seed")
    return seed_root(base / "root", base / "scratch")


# ---------------------------------------------------------------- values of each flavour

def _json_changes(seed: Seed) -> st.SearchStrategy[str]:
    return st.one_of(changes(seed).map(json.dumps), json_values().map(json.dumps), texts(30))


def _evidence(seed: Seed) -> st.SearchStrategy[str]:
    kinds = st.sampled_from(["event", "attempt", "session", "tool_call", "file", "url", "quote", "memory", "", "x"])
    return st.one_of(st.tuples(kinds, st.one_of(ids(seed), texts(30))).map(lambda t: f"{t[0]}:{t[1]}"), texts(30))


def _attrs() -> st.SearchStrategy[str]:
    names = st.one_of(st.sampled_from(["statement", "rule", "goal", "steps", "symptom", "avoid", "chosen", "subject_id",
                                       "object_id", "predicate", "email", "url", ""]), texts(10))
    return st.one_of(st.tuples(names, st.one_of(texts(30), numbers(), st.just("[1,2]"))).map(lambda t: f"{t[0]}={t[1]}"),
                     texts(20))


def _typed_number(ptype: click.ParamType) -> st.SearchStrategy[str]:
    """A number the type accepts (its whole range, huge ends included)."""
    lo, hi = getattr(ptype, "min", None), getattr(ptype, "max", None)
    if isinstance(ptype, click.types.IntParamType):
        return st.integers(-(2**63) if lo is None else int(lo), 2**63 if hi is None else int(hi)).map(str)
    return st.floats(-1e300 if lo is None else float(lo), 1e300 if hi is None else float(hi)).map(repr)


def value_strategy(param: click.Parameter, seed: Seed, path_choices: list[str],
                   wild: bool) -> st.SearchStrategy[str]:
    """A value for ``param`` of its flavour. Not ``wild``: of the type click checks (a choice, a number in its
    range), so the call reaches the command; ``wild``: anything at all."""
    name = param.name or ""
    ptype = param.type
    if isinstance(ptype, click.Choice):
        valid = st.sampled_from([str(c) for c in ptype.choices])
        return st.one_of(valid, texts(12)) if wild else valid
    if isinstance(ptype, click.Path) or name in PATH_NAMES:
        return paths(path_choices)
    if isinstance(ptype, NUMBER_TYPES):
        return numbers() if wild else st.one_of(_typed_number(ptype), _typed_number(ptype).filter(lambda v: len(v) < 4))
    if isinstance(ptype, click.types.BoolParamType):
        valid = st.sampled_from(["true", "false", "1", "0", "yes", "no"])
        return st.one_of(valid, texts(8)) if wild else valid
    if name in ID_NAMES:
        return ids(seed)
    if name in DATE_NAMES:
        return dates()
    if name == "project":
        return st.one_of(st.sampled_from(seed.projects or ["x"]), texts(40))
    if name == "statement":
        return statements()
    if name == "query":
        return search_queries()
    if name in {"inline", "adds"}:
        return _json_changes(seed)
    if name == "replaces":
        return st.tuples(numbers(), _json_changes(seed)).map(lambda t: f"{t[0]}={t[1]}")
    if name == "evidence":
        return _evidence(seed)
    if name == "attrs":
        return _attrs()
    if name == "kind":
        return st.one_of(st.sampled_from(KINDS + ("tool_call_failed", "prompt_submitted")), texts(12))
    if name == "relation":
        return st.one_of(st.sampled_from(LINK_RELATIONS), texts(12))
    if name == "agents":
        return st.one_of(st.sampled_from(["claude-code", "codex", "gemini-cli", "cursor", "all"]), texts(12))
    if name == "value":
        return st.one_of(numbers(), st.sampled_from(["true", "false", "full", "metadata_only", "strict", "relaxed"]),
                         texts(20))
    return texts()


def argv_strategy(path: tuple[str, ...], cmd: click.Command, seed: Seed,
                  path_choices: list[str]) -> st.SearchStrategy[list[str]]:
    """One command line for ``cmd``: three in four of the kind click accepts (choices, numbers in range),
    so the command itself runs on the fuzzed text, ids, dates and paths; the rest wild."""
    return either(_argv_strategy(path, cmd, seed, path_choices, wild=False),
                  _argv_strategy(path, cmd, seed, path_choices, wild=True))


def _argv_strategy(path: tuple[str, ...], cmd: click.Command, seed: Seed, path_choices: list[str],
                   wild: bool) -> st.SearchStrategy[list[str]]:
    """Options (each maybe), then the arguments; when ``wild``, now and then a required one missing,
    a ``--`` first or a stray token."""
    option_parts: list[st.SearchStrategy[list[str]]] = []
    argument_parts: list[st.SearchStrategy[list[str]]] = []
    for p in cmd.params:
        if isinstance(p, click.Option):
            if p.is_flag:
                flags = [o for o in p.opts + p.secondary_opts if o.startswith("--")] or p.opts
                option_parts.append(st.one_of(st.just([]), st.sampled_from(flags).map(lambda f: [f])))
                continue
            opt = max(p.opts, key=len)
            one = value_strategy(p, seed, path_choices, wild).map(lambda v, o=opt: [o, v])  # type: ignore[misc]
            if p.multiple:
                option_parts.append(st.lists(one, max_size=3).map(lambda xs: [a for x in xs for a in x]))
            elif p.required:
                option_parts.append(one)
            else:  # each option one time in three: commands with options that exclude each other still run
                option_parts.append(either(st.just([]), one, 3))
        elif isinstance(p, click.Argument):
            v = value_strategy(p, seed, path_choices, wild)
            if p.nargs == -1:
                argument_parts.append(st.lists(v, max_size=3))
            elif p.required:
                argument_parts.append(v.map(lambda x: [x]))
            else:
                argument_parts.append(st.one_of(st.just([]), v.map(lambda x: [x])))
    joined = st.tuples(st.tuples(*option_parts), st.tuples(*argument_parts),
                       st.sampled_from(["plain", "dashdash", "drop_last", "stray"] if wild else ["plain"]), texts(10))

    def build(t: tuple[Any, ...]) -> list[str]:
        opts, args, how, stray = t
        flat_opts = [a for part in opts for a in part]
        flat_args = [a for part in args for a in part]
        if how == "drop_last" and flat_args:
            flat_args = flat_args[:-1]
        dashes = how == "dashdash" or (not wild and any(a.startswith("-") for a in flat_args))
        tail = ["--", *flat_args] if dashes else flat_args
        extra = [stray] if how == "stray" else []
        return [*path, *flat_opts, *tail, *extra]

    return joined.map(build)


# ---------------------------------------------------------------- the judge

def judge(argv: list[str], r: Result) -> None:
    """Exit 0, 1 or 2; no traceback; the guard did not fire; a failure says something on stderr."""
    shown = f"argv={argv!r}\nexit={r.exit_code}\nstdout={r.stdout[-1500:]!r}\nstderr={r.stderr[-1500:]!r}"
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        tb = "".join(traceback.format_exception(r.exception))
        raise AssertionError(f"uncaught {type(r.exception).__name__}\n{shown}\n{tb}")
    assert r.exit_code in (0, 1, 2), shown
    out = r.stdout + r.stderr
    assert "Traceback" not in out, shown
    for marker in GUARD_MARKERS:
        assert marker not in out, shown
    if r.exit_code != 0 and argv[:2] != ["daemon", "status"]:
        assert r.stderr.strip(), f"a failure says nothing on stderr\n{shown}"


def run_cli(argv: list[str], stdin: bytes = b"") -> Result:
    """One call, in-process; an exception in a thread of its (which would print a traceback on stderr
    and take the thread's work with it) fails it like one in the command."""
    died: list[str] = []

    def on_thread_death(args: threading.ExceptHookArgs) -> None:
        died.append("".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)))

    previous = threading.excepthook
    threading.excepthook = on_thread_death
    try:
        with time_limit(CALL_LIMIT, f"agentlog {' '.join(map(repr, argv))}"):
            r = CliRunner().invoke(cli, argv, input=stdin)
            time.sleep(0.001)  # a watchdog thread started by the call gets to run
    finally:
        threading.excepthook = previous
    assert not died, f"argv={argv!r}: a thread died\n{died[0]}"
    return r


@pytest.fixture
def fuzz_env(seed: Seed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """A copy of the seeded root, a HOME of its own, the working directory inside ``tmp_path``."""
    root = copy_root(seed, tmp_path / "root")
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("AGENTLOG_HOME", str(root))
    monkeypatch.setenv("HOME", str(home))
    # `keys init --at-rest` may turn encryption at rest on: its unlocked key goes here, and the OS
    # keyring is never asked (keyring's own failing backend)
    monkeypatch.setenv("AGENTLOG_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                "AGENTLOG_DEBUG", "AGENTLOG_SERVICE_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    cwd = tmp_path / "cwd"
    choices = prepare_paths(cwd, seed)
    monkeypatch.chdir(cwd)
    return root, choices


def test_every_command_is_fuzzed_or_skipped_for_a_reason() -> None:
    names = {p for p, _ in COMMANDS}
    assert set(SKIPS) <= names, set(SKIPS) - names  # a skip for a command that is gone goes too
    assert len(names - set(SKIPS)) >= 40, names - set(SKIPS)
    assert all(reason.strip() for reason in SKIPS.values())


@pytest.mark.parametrize("path, cmd", [c for c in COMMANDS if c[0] not in SKIPS], ids=lambda v: " ".join(v)
                         if isinstance(v, tuple) else "")
def test_fuzz_command(path: tuple[str, ...], cmd: click.Command, seed: Seed, fuzz_env: tuple[Path, list[str]]) -> None:
    _, choices = fuzz_env
    stdin = st.one_of(st.binary(max_size=200), st.just(b"{}"), st.just(b'{"hook_event_name": "SessionStart"}'))

    @settings(max_examples=FEWER.get(path, EXAMPLES), deadline=None, derandomize=bool(os.environ.get("CI")),
              suppress_health_check=list(HealthCheck))
    @given(argv=argv_strategy(path, cmd, seed, choices), stdin=stdin if path == ("hook",) else st.just(b""))
    def fuzz(argv: list[str], stdin: bytes) -> None:
        r = run_cli(argv, stdin)
        if os.environ.get("FUZZ_STATS"):
            with open(os.environ["FUZZ_STATS"], "a") as f:
                f.write(json.dumps({"argv": argv, "exit": r.exit_code, "err": r.stderr[-300:]}) + "\n")
        judge(argv, r)

    fuzz()


# ---------------------------------------------------------------- what the fuzz found

REGRESSIONS: list[tuple[list[str], int, str]] = [
    # argv bytes that are not UTF-8 reach Python as lone surrogates; SQLite could not take them (the guard fired)
    (["memory", "reject", "\udcff\udc80"], 2, "is not UTF-8 text"),
    (["show", "ses_\udcff"], 2, "is not UTF-8 text"),
    # a value too long for tantivy's regex engine: ValueError from tantivy (the guard fired)
    (["search", "--kind", "0" * 2000, "pytest"], 2, "is too long or too complex to search"),
    (["search", "--session", "a" * 3000, "pytest"], 2, "is too long or too complex to search"),
    # a timeout the watchdog's wait cannot hold: OverflowError in its thread (a traceback on stderr, the
    # statement no longer watched); NaN passes click's FloatRange(0.1)
    (["sql", "select count(*) as n from range(300000000)", "--timeout", "1e300"], 0, ""),
    (["sql", "select 1", "--timeout", "nan"], 2, "a timeout is a positive number of seconds"),
    (["query", "SHOW FAILED ATTEMPTS", "--timeout", "inf"], 0, ""),
]


@pytest.mark.parametrize("argv, code, says", REGRESSIONS, ids=lambda a: " ".join(a)[:40] if isinstance(a, list) else "")
def test_regression(argv: list[str], code: int, says: str, fuzz_env: tuple[Path, list[str]]) -> None:
    r = run_cli(argv)
    judge(argv, r)
    assert r.exit_code == code and says in r.stderr, (r.exit_code, r.stderr)


def test_a_file_whose_name_is_not_utf8_can_still_be_named(fuzz_env: tuple[Path, list[str]], seed: Seed) -> None:
    if seed.transcript is None:
        pytest.skip("shared fixtures not found")
    name = os.fsdecode(b"\xff-transcript.jsonl")
    Path(name).write_bytes(seed.transcript.read_bytes())
    r = run_cli(["import", "claude-code", name, "--json"])
    judge(["import", "claude-code", name], r)
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)  # the name written as JSON escapes, read back as it was
    assert any(f.get("path", "").endswith(name) for f in data["files"]), r.stdout


# ---------------------------------------------------------------- the data root's own path

@pytest.mark.parametrize("name", ["\x1f", "a|b", "[x]", "^", "tab\there"])
def test_a_data_root_the_store_cannot_live_under_is_refused_in_one_line(name: str, seed: Seed, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the fuzz (demo --home '\\x1f'): Delta Lake refuses control characters in a table's path (a
    DeltaError: the guard fired) and panics on [ ] ^ | (a Rust panic no `except Exception` catches: a traceback)."""
    root = tmp_path / name / "root"
    monkeypatch.setenv("AGENTLOG_HOME", str(root))
    monkeypatch.chdir(tmp_path)
    for argv in (["sessions", "--all-projects"], ["status"], ["ingest"]):
        r = run_cli(argv)
        judge(argv, r)
        assert r.exit_code == 1 and "which the store cannot have in its path" in r.stderr, (argv, r.stderr)


def test_fuzz_data_root(seed: Seed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AGENTLOG_HOME of any name (all under tmp_path): each command answers, or refuses in one line."""
    monkeypatch.chdir(tmp_path)
    made: list[Path] = []

    @settings(max_examples=25, deadline=None, derandomize=bool(os.environ.get("CI")),
              suppress_health_check=list(HealthCheck))
    @given(name=texts(40),
           argv=st.sampled_from([["sessions", "--all-projects", "--json"], ["status", "--json"], ["paths"],
                                 ["verify"], ["memory", "list"], ["search", "pytest"]]))
    def fuzz(name: str, argv: list[str]) -> None:
        name = name.replace("/", "_").replace("\x00", "_")[:120].strip(".") or "_"
        root = tmp_path / f"r{len(made)}" / name
        made.append(root)
        monkeypatch.setenv("AGENTLOG_HOME", str(root))
        judge(argv, run_cli(argv))

    fuzz()
