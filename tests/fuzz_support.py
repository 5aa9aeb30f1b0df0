"""Helpers for the fuzz tests (a test-support module, not a test file).

- :func:`seed_root`: a small real data root — the synthetic Claude Code session
  shipped with agentlog replayed through the real hook, one real transcript of
  each agent from the shared fixtures imported, a memory, the suggested
  proposals — and the real ids it holds, of every kind, for the id strategy;
- :func:`time_limit`: a hang fails the test instead of stalling the run;
- strategies for argument values of each flavour: :func:`texts` (unicode,
  control characters, very long), :func:`ids` (real ids, their prefixes, made-up
  ids of every prefix form), :func:`dates`, :func:`numbers`, :func:`paths`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from click.testing import CliRunner
from hypothesis import strategies as st

from agentlog.cli import cli
from agentlog.memory.model import KINDS, LINK_RELATIONS
from agentlog.operations.demo import shipped_payloads
from agentlog.operations.fixtures import shared_dir
from conftest import run_hook

ID_PREFIXES = ("ses_", "trn_", "att_", "tc_", "ev_", "mem_", "prj_", "wu_", "sig_", "dec_", "prop_", "")
"""Every prefix form an id has (and none)."""

# What an unexpected exception looks like once the CLI's guard has turned it into one line.
GUARD_MARKERS = ("internal error (", "AGENTLOG_DEBUG")


class Hang(BaseException):
    """Raised in the test's thread when a call outlives its time limit. A BaseException, so
    neither the CLI's guard nor CliRunner turns it into an exit code."""


@contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Fail with :class:`Hang` when the block runs longer than ``seconds`` (main thread only)."""

    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"{what} still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Seed:
    root: Path
    ids: dict[str, list[str]] = field(default_factory=dict)
    projects: list[str] = field(default_factory=list)
    transcript: Path | None = None

    def all_ids(self) -> list[str]:
        return sorted({i for v in self.ids.values() for i in v})


def _cli(root: Path, *args: str) -> str:
    r = CliRunner().invoke(cli, list(args), env={"AGENTLOG_HOME": str(root)}, catch_exceptions=False)
    assert r.exit_code == 0, (args, r.output[-2000:])
    return r.stdout


def seed_root(root: Path, scratch: Path) -> Seed:
    """A small data root of real sessions, and the ids it holds."""
    scratch.mkdir(parents=True, exist_ok=True)
    env = {"AGENTLOG_HOME": str(root)}
    for payload in shipped_payloads():
        r = run_hook(payload, env=env, cwd=str(scratch))
        assert r.returncode == 0, r.stderr
    seed = Seed(root)
    shared = shared_dir()
    if shared is not None:
        for agent in ("claude-code", "codex", "gemini-cli"):
            found = sorted((shared / "fixtures" / agent).glob("*.jsonl"))
            if found:
                _cli(root, "import", agent, str(found[0]), "--json")
                if agent == "claude-code":
                    seed.transcript = found[0]
    _cli(root, "memory", "add", "fact", "The API listens on 8080", "--content", "port 8080", "--tag", "api")
    _cli(root, "memory", "suggest", "--all-projects")
    queries = {  # kind: (its prefix in listings, the statement; sql answers the bare uuid)
        "session": ("ses_", "select session_id from sessions"), "turn": ("trn_", "select turn_id from turns"),
        "attempt": ("att_", "select attempt_id from attempts"), "tool_call": ("tc_", "select tool_call_id from tool_calls"),
        "event": ("ev_", "select event_id from events order by observed_at limit 12"),
        "work_unit": ("wu_", "select work_unit_id from work_units"), "project": ("prj_", "select project_id from sessions"),
    }
    for kind, (prefix, sql) in queries.items():
        bare = {str(row[0]) for row in json.loads(_cli(root, "sql", sql, "--json"))["rows"] if row[0]}
        seed.ids[kind] = sorted(bare | {prefix + b for b in bare})
    rows = json.loads(_cli(root, "sql", "select distinct project_name from sessions", "--json"))["rows"]
    seed.projects = sorted(str(row[0]) for row in rows if row[0])
    seed.ids["memory"] = [m["id"] for m in json.loads(_cli(root, "memory", "list", "--json"))]
    seed.ids["proposal"] = [p["id"] for p in json.loads(_cli(root, "memory", "proposals", "--status", "all", "--json"))]
    assert seed.ids["session"] and seed.ids["attempt"] and seed.ids["memory"], seed.ids
    return seed


def copy_root(seed: Seed, dest: Path) -> Path:
    shutil.copytree(seed.root, dest, symlinks=True)
    return dest


# ---------------------------------------------------------------- strategies

# Characters a command line can carry: any code point but NUL (argv cannot hold it) and lone
# surrogates other than the ones Python decodes undecodable argv bytes to (U+DC80..U+DCFF).
_ARGV_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_ODD = ["", " ", "-", "--", "'", '"', "\\", "%", "%s", "{}", "*", "?", "..", "../..", "\n", "\t", "\r\n", "\x1b[31m",
        "\u202e", "\ufeff", "\u200b", "ﬁ", "Ω", "😀", "\udcff\udc80", "NULL", "null", "None", "true", "0", "-1",
        "'; DROP TABLE events; --", "$(id)", "`id`", "a" * 5000, "é" * 2000, "\x7f\x01\x02"]


def texts(max_size: int = 60) -> st.SearchStrategy[str]:
    """Random text: unicode, control characters, odd shapes, very long."""
    return st.one_of(
        st.text(_ARGV_CHARS, max_size=max_size),
        st.text(st.characters(min_codepoint=0x01, max_codepoint=0x7F), max_size=max_size),
        st.sampled_from(_ODD),
        st.text(_ARGV_CHARS, min_size=1, max_size=8).map(lambda s: s * 700),
    )


def ids(seed: Seed) -> st.SearchStrategy[str]:
    """Ids of every prefix form: real ones, their prefixes and case changes, made-up ones."""
    real = seed.all_ids()
    real_st = st.sampled_from(real)
    hexes = st.text("0123456789abcdef-", min_size=1, max_size=40)
    real_ish = st.one_of(
        real_st,
        st.tuples(real_st, st.integers(0, 40)).map(lambda t: t[0][: t[1]]),  # prefixes, down to nothing
        real_st.map(str.upper),
        real_st.map(lambda s: s.split("_", 1)[-1]),  # without its prefix
        real_st.map(lambda s: f" {s}\n"),
    )
    made_up = st.one_of(
        real_st.map(lambda s: s + "0"),
        st.tuples(st.sampled_from(ID_PREFIXES), real_st).map(lambda t: t[0] + t[1].split("_", 1)[-1]),  # wrong prefix
        st.tuples(st.sampled_from(ID_PREFIXES), hexes).map("".join),
        st.tuples(st.sampled_from(ID_PREFIXES), st.uuids().map(str)).map("".join),
        st.sampled_from(ID_PREFIXES).map(lambda p: p + "ffffffff-ffff-7fff-bfff-ffffffffffff"),
        texts(30),
    )
    return either(real_ish, made_up, 2)


_DATE_WORDS = ["now", "today", "yesterday", "tomorrow", "last tuesday", "3 days ago", "-15m", "-2h", "-1d", "-1w",
               "15m", "2h", "7d", "1w", "-0d", "-999999999d", "-99999999999999999999h", "+1d", "0", "-1", "1e309",
               "nan", "inf", "2026", "2026-01", "2026-01-01", "2026-13-45", "2026-02-30", "0000-00-00", "0001-01-01",
               "9999-12-31", "10000-01-01", "2026-01-01T00:00:00Z", "2026-01-01T25:61:61Z", "2026-01-01 12:00",
               "2026-01-01T00:00:00+99:99", "2026-01-01T00:00:00.123456789+05:30", "20260101", "1700000000",
               "1700000000000", "99999999999999999999", "-1700000000", "updated:>yesterday", "2026-01-01..2026-02-01"]


def dates() -> st.SearchStrategy[str]:
    """Times in every form a person might type, valid and not."""
    return st.one_of(
        st.sampled_from(_DATE_WORDS),
        st.datetimes().map(lambda d: d.isoformat()),
        st.dates().map(lambda d: d.isoformat()),
        st.integers(-(10**20), 10**20).map(str),
        st.tuples(st.sampled_from(["-", "", "+"]), st.integers(0, 10**12), st.sampled_from("smhdwy ")).map(
            lambda t: f"{t[0]}{t[1]}{t[2]}".strip()),
        texts(30),
    )


def numbers() -> st.SearchStrategy[str]:
    """Integers and floats as text: negative, zero, huge, not numbers at all."""
    return st.one_of(
        st.integers(-5, 200).map(str),
        st.sampled_from(["-1", "0", "-0", "2147483648", "9223372036854775808", "1" + "0" * 400, "1e9", "1.5", "nan",
                         "inf", "-inf", "0x10", "", " 3", "3 "]),
        st.integers().map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        texts(10),
    )


def prepare_paths(base: Path, seed: Seed) -> list[str]:
    """Paths of every kind, all under ``base``: missing, a directory, files of junk and of a real transcript,
    a symlink loop, a name too long for the file system."""
    base.mkdir(parents=True, exist_ok=True)
    (base / "adir").mkdir(exist_ok=True)
    (base / "adir" / "inner.jsonl").write_text('{"type": "user"}\n')
    (base / "emptydir").mkdir(exist_ok=True)
    (base / "empty.jsonl").write_bytes(b"")
    (base / "text.txt").write_text("hello\n")
    (base / "junk.jsonl").write_bytes(bytes(range(256)) * 4)
    (base / "notjson.json").write_text("{not json")
    (base / "list.json").write_text("[1, 2, 3]")
    (base / "object.json").write_text('{"a": 1}')
    if seed.transcript is not None:
        shutil.copy(seed.transcript, base / "real.jsonl")
    loop = base / "loop"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    dangling = base / "dangling"
    if not dangling.is_symlink():
        dangling.symlink_to(base / "nowhere")
    names = ["adir", "emptydir", "empty.jsonl", "text.txt", "junk.jsonl", "notjson.json", "list.json", "object.json",
             "real.jsonl", "loop", "dangling", "missing", "missing/deeper/x.jsonl", "text.txt/under-a-file",
             "x" * 300, "adir/" + "y" * 300]
    return [str(base / n) for n in names] + [".", "", "-", "adir", "missing-relative", "/dev/null"]


def either(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], one_in: int = 4) -> st.SearchStrategy[Any]:
    """``rare`` one time in ``one_in``, else ``usual`` (closures, not default arguments: hypothesis labels a
    flatmap by its function, and would print the strategies a default holds)."""
    return st.integers(1, one_in).flatmap(lambda i: rare if i == 1 else usual)


def json_values(text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Any]:
    """Any JSON value, nested a little."""
    words = texts(20) if text is None else text
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), words)
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(words, inner, max_size=3)), max_leaves=6)


def changes(seed: Seed) -> st.SearchStrategy[dict[str, Any]]:
    """A memory proposal's change: each op, right and wrong in its parts."""
    ops = st.sampled_from(["create", "edit", "confirm", "contradict", "add_evidence", "link", "unlink", "archive",
                           "delete", "nonsense", ""])
    return st.fixed_dictionaries({"op": ops}, optional={
        "kind": st.one_of(st.sampled_from(KINDS), texts(8)), "title": texts(30), "id": ids(seed),
        "attributes": st.dictionaries(st.sampled_from(["statement", "rule", "goal", "steps", "symptom", "x"]),
                                      json_values(), max_size=3),
        "evidence": st.lists(st.one_of(st.text(max_size=20), json_values()), max_size=3), "content": texts(40),
        "relation": st.sampled_from(LINK_RELATIONS), "target": ids(seed), "expected_version": numbers()})


def statements() -> st.SearchStrategy[str]:
    """SQL and AttemptQL, read-only, writing, broken, huge; and random text."""
    shapes = ["select 1", "select * from sessions", "select count(*) as n from events", "SHOW FAILED ATTEMPTS",
              "SHOW ATTEMPTS FOR path = 'src/parser.py'", "SHOW SESSIONS SINCE -1d", "WHY att_0000", "TRACE ses_0 UP 3",
              "delete from events", "drop table events", "copy events to '/tmp/x.csv'", "attach '/tmp/x.db'",
              "select * from read_csv('/etc/passwd')", "pragma version", "select 1; select 2", "select",
              "select * from nosuchtable", "select 1/0", "select repeat('x', 100000000)",
              "select * from range(1000000000)", "SHOW", "SHOW NONSENSE", "SHOW FAILED ATTEMPTS WHERE",
              "select '\x1b[31m'", "SHOW ATTEMPTS LIMIT 99999999999999999999", "SHOW ATTEMPTS SINCE 9999-12-31"]
    return st.one_of(st.sampled_from(shapes), texts(80))


def search_queries() -> st.SearchStrategy[str]:
    """Search text: words, operators half-written, filters; and random text."""
    shapes = ["pytest", "parser", '"unterminated', "a AND", "OR OR", "kind:fact", "updated:>yesterday", "tag:", "*",
              "title:(", "has:evidence", "NOT", "-", "a~", "field:value:other", "^", "[a TO z]", "a^2", "\\",
              "path:" + "*a" * 300, "session:" + "f" * 3000, "since:2026-13-01", "since:-99999999999d"]
    return st.one_of(st.sampled_from(shapes), texts(40))


def paths(choices: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(choices),
                     texts(20).filter(lambda s: not s.startswith(("/", "~")) and "\x00" not in s))


__all__ = ["GUARD_MARKERS", "Hang", "ID_PREFIXES", "Seed", "changes", "copy_root", "dates", "either", "ids",
           "json_values",
           "numbers", "paths", "prepare_paths", "search_queries", "seed_root", "statements", "texts", "time_limit"]
