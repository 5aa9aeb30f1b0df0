"""The memory search language: each operator with a positive and a negative case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.memory import confidence as conf
from agentlog.memory import service as S
from agentlog.memory.model import InvalidMemory


@pytest.fixture
def mems(agentlog_home: Path) -> dict[str, S.Memory]:
    root = str(agentlog_home)
    out = {
        "tests": S.create(root, "procedure", "Run the tests", content="Use the make target",
                          attributes={"goal": "run the tests", "steps": ["make test"]}, tags=["ci"]),
        "ruff": S.create(root, "convention", "Format with ruff", attributes={"rule": "ruff format", "scope": "python"},
                         tags=["style"], evidence=[{"type": "url", "value": "https://docs.astral.sh/ruff"}]),
        "proj": S.create(root, "project", "agentlog", attributes={"name": "agentlog", "status": "active"}),
        "old": S.create(root, "project", "oldthing", attributes={"name": "oldthing", "status": "abandoned"},
                        actor="agent"),
    }
    S.link(root, out["ruff"].id, "relates_to", out["tests"].id)
    S.archive(root, out["old"].id)
    S.edit(root, out["proj"].id, pinned=True)
    return {k: S.get(root, v.id) for k, v in out.items()}


def ids(root: Path, q: str, **kw: object) -> set[str]:
    """The memories the words match (hybrid, the default with the semantic extra, adds memories
    near in meaning: tests/test_search_semantic.py)."""
    return {m.id for m, _ in S.search(str(root), q, **{"mode": "lexical", **kw})}  # type: ignore[arg-type]


def test_each_operator_finds_what_it_names_and_not_the_rest(agentlog_home: Path, mems: dict[str, S.Memory]) -> None:
    t, r, p, o = (mems[k].id for k in ("tests", "ruff", "proj", "old"))
    root = agentlog_home
    cases = [
        ("tests", {t}), ("tests ruff", set()), ('"make target"', {t}), ('"target make"', set()), ("form*", {r}),
        ("kind:convention", {r}), ("kind:pitfall", set()),
        ("tag:ci", {t}), ("tag:nope", set()),
        ("is:archived", {o}), ("kind:convention is:archived", set()),
        ("is:pinned", {p}), ("is:pinned kind:convention", set()),
        ("has:evidence", {r}), ("has:evidence kind:procedure", set()),
        ("has:links", {r}), ("has:links kind:project", set()),
        ("evidence:https://docs.astral.sh/ruff", {r}), ("evidence:https://nowhere", set()),
        ("linked:" + mems["tests"].slug, {r}), ("linked:" + mems["ruff"].slug, {t}), ("linked:" + mems["proj"].slug, set()),
        ("status:active", {p}), ("status:paused", set()), ("steps:make test", set()), ("scope:python", {r}),
        ('steps:"make test"', {t}), ('steps:"make tests"', set()),  # a quoted value: an attribute, spaces and all
        ('rule:"ruff format"', {r}), ('rule:"ruff check"', set()), ('rule:"ruff', set()),
        ('tag:"ci"', {t}), ('kind:"pitfall"', set()),
        ("confidence>0.9", {t, r, p}), ("confidence<0.9", set()), ("confidence>0.96", set()), ("confidence<=0.95 kind:project", {p}),
        ("updated:>2000-01-01", {t, r, p}), ("updated:<2000-01-01", set()),
        ("kind:project is:archived", {o}), ("kind:project status:abandoned", set()),  # archived: only with is:archived
        ("http://example.com", set()),
    ]
    for q, want in cases:
        assert ids(root, q) == want, q


def test_is_stale_uses_the_effective_confidence_at_read_time(agentlog_home: Path,
                                                               mems: dict[str, S.Memory]) -> None:
    t = mems["tests"]
    later = t.created_at + int((conf.stale_after_days(t.confidence, "procedure") + 1) * conf.US_PER_DAY)
    assert t.id in ids(agentlog_home, "is:stale", now_us=later)
    assert t.id not in ids(agentlog_home, "is:stale")


def test_bad_dates_are_refused_and_fts_syntax_is_text(agentlog_home: Path, mems: dict[str, S.Memory]) -> None:
    with pytest.raises(InvalidMemory, match="updated"):
        S.search(str(agentlog_home), "updated:>yesterday")
    for q in ('tests OR ruff', 'NEAR(tests ruff)', 'tests AND NOT ruff', '"unbalanced', 'tests -ruff', "col:umn"):
        assert isinstance(S.search(str(agentlog_home), q), list)
    t, r = mems["tests"].id, mems["ruff"].id
    # the free text is event search's language: OR, -exclusion, phrases, prefixes; the rest is text
    assert ids(agentlog_home, "tests OR ruff") == {t, r}
    assert ids(agentlog_home, "make -ruff") == {t}
    assert ids(agentlog_home, "kind:convention -ruff") == set()
    assert ids(agentlog_home, "kind:procedure -ruff") == {t}
    assert ids(agentlog_home, 'NEAR(tests ruff)') == set()
    assert ids(agentlog_home, 'tests AND NOT ruff') == set()


def test_free_text_with_no_word_in_it_matches_nothing(agentlog_home: Path, mems: dict[str, S.Memory]) -> None:
    """Punctuation alone is text that names no word: no memory matches it (it once matched every one)."""
    t, r = mems["tests"].id, mems["ruff"].id
    for q in ('"', '""', '" "', "*", "***", "kind:procedure \"", "tag:ci *", '(', "OR"):
        assert ids(agentlog_home, q) == set(), q
    # beside a word, punctuation is ignored; an exclusion of nothing excludes nothing
    assert ids(agentlog_home, 'tests "') == {t}
    assert ids(agentlog_home, 'kind:convention -"') == {r}
    assert ids(agentlog_home, "kind:convention") == {r}


def test_ranking_is_relevance_times_confidence(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    strong = S.create(root, "fact", "the cache lives in redis", attributes={"statement": "redis cache"})
    weak = S.create(root, "fact", "the cache lives in memcached", actor="agent", attributes={"statement": "cache"})
    assert [m.id for m, _ in S.search(root, "cache")] == [strong.id, weak.id]
    for _ in range(2):
        S.confirm(root, weak.id)
        S.contradict(root, strong.id)
    assert [m.id for m, _ in S.search(root, "cache")] == [weak.id, strong.id]


@settings(max_examples=200, deadline=None)
@given(c=st.floats(0, 1), kind=st.sampled_from(sorted(conf.DECAY) + ["not-a-kind"]),
       anchor=st.integers(0, 2_000_000_000_000_000), created=st.integers(0, 2_000_000_000_000_000),
       now=st.integers(0, 2_000_000_000_000_000), confirmed=st.booleans())
def test_effective_confidence_in_sql_equals_the_python_formula(c: float, kind: str, anchor: int, created: int,
                                                                now: int, confirmed: bool) -> None:
    """Ranking and the confidence operators use the SQL form; show uses Python: the same number."""
    import sqlite3

    from agentlog.memory.search import _effective_sql

    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE memories (confidence REAL, kind TEXT, last_confirmed_at INTEGER, created_at INTEGER)")
    con.execute("INSERT INTO memories VALUES (?, ?, ?, ?)", (c, kind, anchor if confirmed else None, created))
    effective, threshold = _effective_sql(con)
    got, under = con.execute(f"SELECT {effective}, {threshold} FROM memories", {"now": now}).fetchone()
    base = anchor if confirmed else created
    assert got == (conf.effective(c, kind, base, now) if kind in conf.DECAY else c)
    assert under == conf.DECAY.get(kind, (0.0, 0.0))[1]


def test_a_quoted_name_that_is_no_operator_is_a_phrase(agentlog_home: Path, mems: dict[str, S.Memory]) -> None:
    """``rule:"ruff format"`` is an attribute match (above); a quoted phrase after a name that is no
    operator stays text, so ``word:"…"`` in free text still finds the phrase."""
    from agentlog.memory.search import parse

    q = parse('rule:"ruff format" note:"make target"')
    assert q.args == ["rule", "ruff format"] and q.text == ['note:"make target"']
    assert ids(agentlog_home, 'nothing:"make target"') == {mems["tests"].id}


T0 = 1_790_000_000_000_000
SEC = 1_000_000


def _record_an_attempt(root: str) -> tuple[str, list[str]]:
    """One session through the hook path (a prompt, an edit that worked): its attempt's id and
    its events' ids (UUIDv7s recorded together: their first 8 hex digits are the same)."""
    import json

    from agentlog.capture.hook import build, record
    from agentlog.operations.refresh import run_sql

    def hook(at: int, **payload: object) -> None:
        body = {"session_id": "s-evidence", "cwd": "/nonexistent/repo", **payload}
        record(build("claude-code", json.dumps(body).encode(), 0, [], captured_at=at), root, "relaxed")

    edit = {"file_path": "/nonexistent/repo/a.py", "old_string": "a", "new_string": "b"}
    hook(T0, hook_event_name="UserPromptSubmit", prompt="fix it")
    hook(T0 + SEC, hook_event_name="PreToolUse", tool_name="Edit", tool_use_id="t1", tool_input=edit)
    hook(T0 + 2 * SEC, hook_event_name="PostToolUse", tool_name="Edit", tool_use_id="t1", tool_input=edit,
         tool_response={"filePath": "a.py"})
    hook(T0 + 3 * SEC, hook_event_name="Stop")
    (attempt,), = run_sql(root, "SELECT attempt_id FROM attempts").rows
    events = [r[0] for r in run_sql(root, "SELECT event_id FROM events ORDER BY event_id").rows]
    return attempt, events


def test_short_ids_work_as_evidence_and_in_the_evidence_operator(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(agentlog_home)
    attempt, events = _record_an_attempt(root)
    short = "att_" + attempt[:8]  # as `agentlog timeline` and `failures` print it
    m = S.create(root, "pitfall", "Edits to a.py", attributes={"symptom": "x", "avoid": "y"},
                 evidence=[{"type": "attempt", "value": short}])
    assert m.evidence == [{"type": "attempt", "value": attempt}]  # resolved to the full id when written
    # through the CLI, and as a proposal's evidence
    out = CliRunner().invoke(cli, ["memory", "add", "fact", "an edit worked", "--attr", "statement=yes",
                                   "--evidence", f"attempt:{short}", "--json"], env={"AGENTLOG_HOME": root})
    assert out.exit_code == 0, out.output
    cli_made = json.loads(out.output)
    assert cli_made["evidence"] == [{"type": "attempt", "value": attempt}]
    from agentlog.memory import proposals as P

    p = P.open_proposal(root, [{"op": "add_evidence", "memory": m.id, "evidence": {"type": "event",
                                                                                  "value": "ev_" + events[0][:13]}}],
                        title="more evidence")
    assert p.changes[0]["evidence"]["value"] == events[0]
    P.approve(root, p.id)
    # a prefix several recorded things share: refused, naming them
    assert events[0][:8] == events[1][:8]
    with pytest.raises(InvalidMemory, match="is ambiguous: it matches ev_"):
        S.add_evidence(root, m.id, {"type": "event", "value": "ev_" + events[0][:8]})
    with pytest.raises(InvalidMemory, match="not in the recorded history"):
        S.add_evidence(root, m.id, {"type": "attempt", "value": "att_" + ("0" if attempt[0] != "0" else "1") * 8})
    bad = CliRunner().invoke(cli, ["memory", "edit", m.slug, "--evidence", "attempt:att_zz"], env={"AGENTLOG_HOME": root})
    assert bad.exit_code == 2 and bad.output.count("\n") == 1 and "not in the recorded history" in bad.output
    # the operator: the full id, the short form, a bare prefix; not another prefix, not another type's
    both = {m.id, cli_made["id"]}
    other = ("0" if attempt[0] != "0" else "1") + attempt[1:8]
    cases = [(f"evidence:{attempt}", both), (f"evidence:{short}", both), (f"evidence:{attempt[:6]}", both),
             (f"evidence:att_{attempt[:13]}", both), (f"evidence:att_{other}", set()),
             (f"evidence:ev_{attempt[:8]}", set()), (f"evidence:ev_{events[0][:8]}", {m.id}),
             (f"evidence:{short} kind:fact", {cli_made['id']})]
    for q, want in cases:
        assert ids(agentlog_home, q) == want, q


def test_pinned_lifetime_and_visibility_are_set_through_the_write_path(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli
    from agentlog.memory import store

    root = str(agentlog_home)
    r = CliRunner()
    env = {"AGENTLOG_HOME": root}
    out = r.invoke(cli, ["memory", "add", "fact", "pinned from the start", "--attr", "statement=x", "--pin",
                         "--until", "2030-01-01T00:00:00Z", "--allow", "claude-code", "--json"], env=env)
    assert out.exit_code == 0, out.output
    made = json.loads(out.output)
    assert made["pinned"] and made["version"] == 2
    assert made["lifetime"] == {"policy": "until", "until": "2030-01-01T00:00:00Z"}
    assert made["visibility"] == {"visibility": "restricted", "allowed_actors": ["claude-code"]}
    assert ids(agentlog_home, "is:pinned") == {made["id"]}
    S.archive(root, made["id"])  # pin, lifetime and visibility change on an archived memory too; text does not
    out = r.invoke(cli, ["memory", "edit", made["slug"], "--unpin", "--lifetime", "permanent", "--visibility",
                         "private", "--json"], env=env)
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert (got["pinned"], got["lifetime"], got["visibility"], got["version"]) == (
        False, {"policy": "permanent", "until": None}, {"visibility": "private", "allowed_actors": []}, 5)
    assert ids(agentlog_home, "is:pinned is:archived") == set()
    history = [h["change"] for h in S.history(root, made["id"])]
    assert history == ["created", "pinned", "archived", "edited", "pinned"]
    same = r.invoke(cli, ["memory", "edit", made["slug"], "--unpin", "--json"], env=env)  # no change: no event
    assert json.loads(same.output)["version"] == 5
    refused = r.invoke(cli, ["memory", "edit", made["slug"], "--title", "new"], env=env)
    assert refused.exit_code == 2 and "archived" in refused.output
    for args, message in ((["--lifetime", "until"], "needs an until time"),
                          (["--visibility", "shared", "--allow", "x"], "allowed actors go only with"),
                          (["--until", "soon"], "ISO 8601")):
        bad = r.invoke(cli, ["memory", "edit", made["slug"], *args], env=env)
        assert bad.exit_code == 2 and message in bad.output and bad.output.count("\n") == 1, args
    # the events replay to the same read model
    con = store.connect(root)
    live = store.dump(con)
    store.rebuild(root)
    assert store.dump(store.connect(root)) == live


def test_file_evidence_with_a_line_range_and_a_commit_from_the_cli(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    env = {"AGENTLOG_HOME": str(agentlog_home)}
    out = CliRunner().invoke(cli, ["memory", "add", "pitfall", "x", "--attr", "symptom=s", "--attr", "avoid=a",
                                   "--evidence", "file:src/x.py#L10-20@ABC1234", "--evidence", "file:src/y.py#L7",
                                   "--evidence", "file:node_modules/@types/z.d.ts", "--json"], env=env)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["evidence"] == [
        {"type": "file", "value": "src/x.py", "line_start": 10, "line_end": 20, "commit": "abc1234"},
        {"type": "file", "value": "src/y.py", "line_start": 7, "line_end": 7},
        {"type": "file", "value": "node_modules/@types/z.d.ts"}]
    text = CliRunner().invoke(cli, ["memory", "show", json.loads(out.output)["slug"]], env=env).output
    assert "evidence file: src/x.py#L10-20@abc1234" in text and "evidence file: src/y.py#L7\n" in text
    bad = CliRunner().invoke(cli, ["memory", "add", "pitfall", "y", "--attr", "symptom=s", "--attr", "avoid=a",
                                   "--evidence", "file:src/x.py#L20-10"], env=env)
    assert bad.exit_code == 2 and "line_end is before line_start" in bad.output


def test_a_bad_search_date_is_one_line_and_exit_2_in_a_real_process(agentlog_home: Path,
                                                                    mems: dict[str, S.Memory]) -> None:
    import os
    import subprocess
    import sys

    for q, bad in (("updated:>yesterday", "yesterday"), ("updated:>2026-13-45", "2026-13-45"),
                   ("updated:<=2026-02-30T99", "2026-02-30T99")):
        r = subprocess.run([sys.executable, "-m", "agentlog", "memory", "search", q], capture_output=True, text=True,
                           env={**os.environ, "AGENTLOG_HOME": str(agentlog_home)}, timeout=60)
        assert r.returncode == 2 and r.stdout == "", q
        assert r.stderr.strip().splitlines() == [f"Error: updated: needs a date or an ISO time, not {bad!r}"]


@pytest.mark.parametrize(("args", "code", "message"), [
    (["search", "updated:yesterday"], 2, "updated: needs a date"),
    (["add", "bogus", "x"], 2, "unknown kind 'bogus'"),
    (["add", "pitfall", "x"], 2, "pitfall.avoid is required"),  # its symptom comes from the title (issue 27, 9)
    (["add", "fact", " ", "--attr", "statement=x"], 2, "a memory needs a title"),
    (["add", "fact", "x", "--attr", "statement=x", "--slug", "Not A Slug"], 2, "a slug is lower-case"),
    (["add", "preference", "x", "--attr", "polarity=likes", "--attr", "strength=lots"], 2,
     "preference.strength must be a number"),
    (["add", "relationship", "x", "--attr", "subject_id=me", "--attr", "predicate=knows", "--attr", "object_id=you"],
     2, "relationship.subject_id must be a UUID"),
    (["add", "event", "x", "--attr", "occurred_at=2026-13-45"], 2, "event.occurred_at must be an ISO 8601 time"),
    (["add", "fact", "x", "--attr", "statement=x", "--evidence", "rumour:x"], 2, "evidence type must be one of"),
    (["add", "fact", "x", "--attr", "statement=x", "--evidence", "url:nowhere"], 2, "url evidence must be a URL"),
    (["add", "fact", "x", "--attr", "statement=x", "--evidence", "event:ev_"], 2, "not in the recorded history"),
    (["add", "fact", "x", "--attr", "statement=x", "--evidence", "session:not-an-id"], 2,
     "not in the recorded history"),
    (["add", "fact", "x", "--attr", "statement=x", "--until", "tomorrow"], 2, "lifetime.until must be an ISO 8601"),
    (["edit", "SLUG", "--attr", "statement="], 2, "fact.statement must be a non-empty string"),
    (["edit", "SLUG", "--version", "9", "--title", "y"], 1, "based on version 9"),
    (["edit", "nope", "--title", "y"], 1, "no memory 'nope'"),
    (["link", "SLUG", "about", "SLUG"], 2, "cannot link to itself"),
    (["link", "SLUG", "about", "nope"], 1, "no memory 'nope'"),
    (["show", "nope"], 1, "no memory 'nope'"),
    (["confirm", "nope"], 1, "no memory 'nope'"),
    (["contradict", "SLUG", "--version", "0"], 1, "based on version 0"),
    (["archive", "nope"], 1, "no memory 'nope'"),
    (["delete", "nope"], 1, "no memory 'nope'"),
    (["export", "/proc/agentlog-cannot-write-here"], 1, "cannot write the export"),
])
def test_bad_input_to_any_memory_command_is_one_line_never_a_traceback(agentlog_home: Path, args: list[str],
                                                                      code: int, message: str) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    m = S.create(str(agentlog_home), "fact", "the one", attributes={"statement": "x"})
    args = [m.slug if a == "SLUG" else a for a in args]
    r = CliRunner().invoke(cli, ["memory", *args], env={"AGENTLOG_HOME": str(agentlog_home)})
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == code and message in r.output and r.output.count("\n") == 1, r.output
