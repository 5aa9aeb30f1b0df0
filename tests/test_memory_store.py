"""The memory's log and read model: replay equals live, concurrent writers, crash
recovery, redaction, search that cannot be injected, evidence that must exist."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.memory import service as S
from agentlog.memory import store
from import_support import record_prompt
from agentlog.memory.model import InvalidMemory


def _dump(root: str) -> dict[str, Any]:
    con = store.connect(root)
    try:
        return store.dump(con)
    finally:
        con.close()


def _fixed_history(root: str) -> None:
    a = S.create(root, "procedure", "Run the tests", content="Use the script, not pytest directly.",
                 attributes={"goal": "run the tests", "steps": ["./scripts/test.sh"]}, tags=["CI", "tests"])
    b = S.create(root, "pitfall", "Edits to config.py fail", actor="agent",
                 attributes={"symptom": "string_mismatch on config.py", "avoid": "read the file first"})
    c = S.create(root, "decision", "Use DuckDB", attributes={"chosen": "duckdb", "alternatives": ["sqlite"]},
                 evidence=[{"type": "url", "value": "https://duckdb.org"}])
    S.confirm(root, b.id, actor="agent")
    S.contradict(root, c.slug)
    S.edit(root, a.id, title="Run the whole test suite", tags=["ci"])
    S.link(root, b.id, "relates_to", a.id)
    S.add_evidence(root, b.id, {"type": "file", "path": "src/config.py", "line_start": 3, "line_end": 9})
    S.archive(root, c.id)
    S.archive(root, c.id, restore=True)
    S.delete(root, c.id)


def test_rebuilding_from_the_log_gives_the_live_read_model(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    _fixed_history(root)
    live = _dump(root)
    assert len(live["memories"]) == 3 and len(live["links"]) == 1 and len(live["evidence"]) == 2
    assert store.rebuild(root) == 11
    assert _dump(root) == live
    # the read model is private
    assert stat.S_IMODE(os.stat(store.db_path(root)).st_mode) == 0o600
    # a deleted memory is gone from listings and search, its events stay in the log
    assert [m.title for m in S.list_memories(root)] == ["Edits to config.py fail", "Run the whole test suite"]
    assert S.search(root, "DuckDB") == []
    with pytest.raises(store.NotFound):
        S.get(root, "use-duckdb")


_OPS = st.lists(st.tuples(st.sampled_from(["create", "confirm", "contradict", "edit", "archive", "restore", "delete",
                                           "link", "evidence"]), st.integers(0, 5), st.integers(0, 5)),
                min_size=1, max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_any_history_replays_to_the_same_read_model(ops: list[tuple[str, int, int]],
                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    root = str(tmp_path_factory.mktemp("mem"))
    ids: list[str] = []
    for op, i, j in ops:
        try:
            if op == "create" or not ids:
                ids.append(S.create(root, "fact", f"fact {len(ids)}", attributes={"statement": f"s{i}"},
                                    tags=[f"t{j}"]).id)
            elif op == "confirm":
                S.confirm(root, ids[i % len(ids)], actor="agent" if j % 2 else "person")
            elif op == "contradict":
                S.contradict(root, ids[i % len(ids)])
            elif op == "edit":
                S.edit(root, ids[i % len(ids)], content=f"text {j}", attributes={"statement": f"s{j}"})
            elif op in ("archive", "restore"):
                S.archive(root, ids[i % len(ids)], restore=op == "restore")
            elif op == "delete":
                S.delete(root, ids[i % len(ids)])
            elif op == "link":
                S.link(root, ids[i % len(ids)], "relates_to", ids[j % len(ids)])
            elif op == "evidence":
                S.add_evidence(root, ids[i % len(ids)], {"type": "quote", "value": f"q{j}"})
        except (InvalidMemory, store.NotFound):
            pass  # a refused change writes nothing
    _assert_at_the_logs_end(root)
    live = _dump(root)
    store.rebuild(root)
    assert _dump(root) == live


def _assert_at_the_logs_end(root: str) -> None:
    """The read model has applied the whole log, by its recorded offset (a write folds its own
    frames without reading them back: the offset it records must still be the log's end)."""
    con = store.connect(root)
    assert store._applied(con) == os.path.getsize(store.log_path(root))
    store._forget(root)  # as a new process: nothing left to apply
    assert store.catch_up(root, store.connect(root)) == 0


_WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
from agentlog.memory import service as S
from agentlog.memory.store import VersionConflict
root, ident, version = sys.argv[2], sys.argv[3], int(sys.argv[4])
try:
    S.confirm(root, ident, expected_version=version)
    print("won")
except VersionConflict:
    print("conflict")
"""

_CREATOR = """
import sys
sys.path.insert(0, sys.argv[1])
from agentlog.memory import service as S
for i in range(int(sys.argv[4])):
    S.create(sys.argv[2], "fact", f"{sys.argv[3]} {i}", attributes={"statement": "x"})
"""


def test_concurrent_writers_one_memory_one_wins_different_memories_all_succeed(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    src = str(Path(S.__file__).resolve().parents[2])
    m = S.create(root, "fact", "contested", attributes={"statement": "x"})
    for round_ in range(3):
        version = S.get(root, m.id).version
        procs = [subprocess.Popen([sys.executable, "-c", _WRITER, src, root, m.id, str(version)],
                                  stdout=subprocess.PIPE, text=True) for _ in range(4)]
        outcomes = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
        assert outcomes == ["conflict", "conflict", "conflict", "won"], round_
        assert S.get(root, m.id).version == version + 1
    procs = [subprocess.Popen([sys.executable, "-c", _CREATOR, src, root, f"writer{k}", "15"]) for k in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert len(S.list_memories(root, limit=1000)) == 1 + 45
    _assert_at_the_logs_end(root)
    live = _dump(root)
    store.rebuild(root)
    assert _dump(root) == live


def test_threads_of_one_process_write_as_processes_do(agentlog_home: Path) -> None:
    """Each thread keeps its own lock file open (``flock`` excludes other open files only) and
    its own connection: threads of one process serialise as processes do."""
    import threading

    root = str(agentlog_home)
    m = S.create(root, "fact", "contested", attributes={"statement": "x"})
    for round_ in range(3):
        version = S.get(root, m.id).version
        outcomes: list[str] = []
        barrier = threading.Barrier(4)

        def confirm() -> None:
            barrier.wait()
            try:
                S.confirm(root, m.id, expected_version=version)
                outcomes.append("won")
            except store.VersionConflict:
                outcomes.append("conflict")

        threads = [threading.Thread(target=confirm) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(outcomes) == ["conflict", "conflict", "conflict", "won"], round_
        assert S.get(root, m.id).version == version + 1

    def create(k: int) -> None:
        for i in range(15):
            S.create(root, "fact", f"thread{k} {i}", attributes={"statement": "x"})

    threads = [threading.Thread(target=create, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(S.list_memories(root, limit=1000)) == 1 + 45
    _assert_at_the_logs_end(root)
    live = _dump(root)
    store.rebuild(root)
    assert _dump(root) == live


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
@pytest.mark.parametrize("fork_holding", [False, True])
def test_a_forked_child_does_not_share_its_parents_lock(agentlog_home: Path, fork_holding: bool) -> None:
    """A child inherits the parent's open lock file — the same open file, which its ``flock``
    would not exclude — and, forked under the lock, the parent's note that it holds it: the
    child opens its own and waits for the parent."""
    import select

    root = str(agentlog_home)
    S.create(root, "fact", "before the fork", attributes={"statement": "x"})  # the lock file is open now
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()

    def child() -> None:  # pragma: no cover - runs in the child
        try:
            os.read(go_r, 1)
            with store.locked(root):
                os.write(done_w, b"locked")
        finally:
            os._exit(0)

    pid = -1
    if not fork_holding:
        pid = os.fork()
        if pid == 0:
            child()
    with store.locked(root):
        if fork_holding:
            pid = os.fork()
            if pid == 0:
                child()
        os.write(go_w, b"g")
        assert select.select([done_r], [], [], 0.5)[0] == []  # the child waits while the parent holds it
    assert select.select([done_r], [], [], 30)[0] and os.read(done_r, 16) == b"locked"
    assert os.waitpid(pid, 0)[1] == 0
    for fd in (go_r, go_w, done_r, done_w):
        os.close(fd)


def test_a_lock_file_removed_is_opened_again(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    S.create(root, "fact", "first", attributes={"statement": "x"})
    lock = os.path.join(root, "state", store.LOCK_FILE)
    os.remove(lock)
    m = S.create(root, "fact", "second", attributes={"statement": "x"})
    assert os.path.exists(lock) and S.get(root, m.id).title == "second"


def test_a_process_writing_to_many_roots_keeps_a_few_lock_files_open(tmp_path: Path) -> None:
    roots = [str(tmp_path / f"root{k}") for k in range(store._OPEN_LOCKS + 4)]
    for root in roots + roots[:2]:
        S.create(root, "fact", "one", attributes={"statement": "x"})
    assert len(store._HELD.fds) == store._OPEN_LOCKS
    assert [len(S.list_memories(root)) for root in roots] == [2, 2] + [1] * (len(roots) - 2)


def test_a_refused_write_writes_nothing_and_keeps_what_it_caught_up(agentlog_home: Path) -> None:
    """The write is one SQLite transaction: a conflict rolls back nothing the log holds (a
    catch-up of frames another writer left unapplied is kept) and leaves none open."""
    from agentlog.core.fastjson import dumps_bytes
    from agentlog.log.writer import SessionLog

    root = str(agentlog_home)
    m = S.create(root, "fact", "first", attributes={"statement": "x"})
    ev = store.new_event("memory_confirmed", m.id, 2, "person", {"confidence": 0.99})
    SessionLog(root, store.PROVIDER, store.LOG_KEY, session_id=store.LOG_KEY).append([dumps_bytes(ev)])
    size = os.path.getsize(store.log_path(root))
    with pytest.raises(store.VersionConflict):
        S.edit(root, m.id, title="stale", expected_version=1)
    assert os.path.getsize(store.log_path(root)) == size
    assert not store.connect(root).in_transaction
    got = S.get(root, m.id)
    assert (got.version, got.confidence, got.title) == (2, 0.99, "first")
    _assert_at_the_logs_end(root)


def test_a_changed_durability_setting_takes_effect_at_the_next_write(agentlog_home: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The log's writer is kept per setting: a change of ``config.toml`` or of the variable
    gives the next write a writer with the new one."""
    root = str(agentlog_home)
    monkeypatch.delenv("AGENTLOG_DURABILITY", raising=False)
    S.create(root, "fact", "first", attributes={"statement": "x"})
    assert store._writer(root).durability == "strict"
    monkeypatch.setenv("AGENTLOG_DURABILITY", "relaxed")
    assert store._writer(root).durability == "relaxed"
    monkeypatch.delenv("AGENTLOG_DURABILITY")
    with open(os.path.join(root, "config.toml"), "a") as f:
        f.write('\ndurability = "relaxed"\n')
    assert store._writer(root).durability == "relaxed"
    S.create(root, "fact", "second", attributes={"statement": "y"})
    _assert_at_the_logs_end(root)


_TEXT = st.text(st.characters(whitelist_categories=("L", "N", "P", "Zs")), min_size=1, max_size=40).filter(str.strip)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=_TEXT, content=st.text(max_size=60), tags=st.lists(_TEXT, max_size=4),
       steps=st.lists(_TEXT, min_size=1, max_size=3), evidence=st.lists(st.one_of(
           st.builds(lambda q: {"type": "quote", "value": q}, _TEXT),
           st.builds(lambda p, a, b: {"type": "file", "path": p, "line_start": a, "line_end": a + b},
                     _TEXT, st.integers(1, 99), st.integers(0, 9))), max_size=2),
       lifetime=st.sampled_from(["permanent", "standard", "ephemeral"]),
       visibility=st.sampled_from(["shared", "private"]))
def test_the_created_memory_is_the_memory_read_back(agentlog_home: Path, title: str, content: str, tags: list[str],
                                                     steps: list[str], evidence: list[dict[str, Any]], lifetime: str,
                                                     visibility: str) -> None:
    """``create`` returns the memory built from its event as folded, without reading it back:
    the memory ``get`` reads (but for the effective confidence, which is of another instant)."""
    root = str(agentlog_home)
    made = S.create(root, "procedure", title, content=content, tags=tags, evidence=evidence,
                    attributes={"goal": title, "steps": steps}, lifetime=lifetime, visibility=visibility).to_dict()
    read = S.get(root, made["id"]).to_dict()
    assert abs(made.pop("effective_confidence") - read.pop("effective_confidence")) < 1e-6
    assert made == read and json.dumps(made) == json.dumps(read)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=12))
def test_a_json_column_reads_as_json_reads_it(value: Any) -> None:
    text = json.dumps(value)
    assert S._loads(text) == json.loads(text) and json.dumps(S._loads(text)) == text
    assert math.isnan(S._loads(json.dumps({"n": float("nan")}))["n"])  # what strict JSON refuses, json reads


def test_an_event_appended_but_not_applied_is_applied_by_the_next_write(agentlog_home: Path) -> None:
    """A crash between appending and updating SQLite loses nothing."""
    from agentlog.core.fastjson import dumps_bytes
    from agentlog.log.writer import SessionLog

    root = str(agentlog_home)
    m = S.create(root, "fact", "first", attributes={"statement": "x"})
    ev = store.new_event("memory_confirmed", m.id, 2, "person", {"confidence": 0.99})
    SessionLog(root, store.PROVIDER, store.LOG_KEY, session_id=store.LOG_KEY).append([dumps_bytes(ev)])
    S.create(root, "fact", "second", attributes={"statement": "y"})
    assert S.get(root, m.id).confidence == 0.99 and S.get(root, m.id).version == 2


def test_a_write_after_a_torn_frame_reads_back_what_the_writer_repaired(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    m = S.create(root, "fact", "first", attributes={"statement": "x"})
    with open(store.log_path(root), "ab") as f:
        f.write(b'{"v":1,"prev":"')  # a crash mid-frame
    S.confirm(root, m.id)  # the writer cuts it and records a gap frame first
    assert S.get(root, m.id).version == 2
    _assert_at_the_logs_end(root)
    live = _dump(root)
    store.rebuild(root)
    assert _dump(root) == live


def test_secrets_in_a_memory_are_redacted_before_they_are_written(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    m = S.create(root, "procedure", "Deploy", content=f"export GITHUB_TOKEN={token}",
                 attributes={"goal": "deploy", "steps": ["push"]})
    assert token not in m.content
    assert token.encode() not in Path(store.log_path(root)).read_bytes()


@pytest.mark.parametrize("query", ['"unbalanced', "NEAR(a b)", "a OR", "-x", "title:x", "*", "a AND NOT b",
                                   "x" * 10_000, "\x00\x1b[31m", "'; DROP TABLE memories; --", "(", "^foo", "{a b}"])
def test_hostile_search_text_never_errors(agentlog_home: Path, query: str) -> None:
    root = str(agentlog_home)
    S.create(root, "fact", "the build uses make", attributes={"statement": "make"})
    assert isinstance(S.search(root, query), list)


def test_search_finds_words_and_prefixes_and_ranks_by_confidence(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    strong = S.create(root, "convention", "Parse configs with tomllib", attributes={"rule": "use tomllib"})
    weak = S.create(root, "convention", "Parse configs by hand", actor="agent", attributes={"rule": "by hand"})
    for _ in range(3):
        S.contradict(root, weak.id)
    got = [m.id for m, _ in S.search(root, "parse configs")]
    assert got == [strong.id, weak.id]
    assert [m.id for m, _ in S.search(root, "toml*")] == [strong.id]
    assert S.search(root, "yaml") == []


def test_evidence_must_name_something_recorded(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    event_id = record_prompt(root, "s-ev")
    m = S.create(root, "fact", "a prompt was typed", attributes={"statement": "yes"},
                 evidence=[{"type": "event", "value": f"ev_{event_id}"}])
    assert m.evidence == [{"type": "event", "value": event_id}]
    with pytest.raises(InvalidMemory, match="not in the recorded history"):
        S.create(root, "fact", "made up", attributes={"statement": "no"},
                 evidence=[{"type": "event", "value": "0190a8f0-0000-7000-8000-000000000000"}])


def test_the_cli(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    r = CliRunner()
    env = {"AGENTLOG_HOME": str(agentlog_home)}
    add = r.invoke(cli, ["memory", "add", "procedure", "Run the tests", "--attr", "goal=run the tests",
                         "--attr", "steps=./scripts/test.sh", "--tag", "ci", "--json"], env=env)
    assert add.exit_code == 0, add.output
    m = json.loads(add.output)
    assert m["attributes"] == {"goal": "run the tests", "steps": ["./scripts/test.sh"]} and m["version"] == 1
    assert json.loads(r.invoke(cli, ["memory", "list", "--json"], env=env).output)[0]["id"] == m["id"]
    assert json.loads(r.invoke(cli, ["memory", "search", "tests", "--json"], env=env).output)[0]["id"] == m["id"]
    # for people: plain columns under a header (no rich: the command's whole process stays small)
    listed = r.invoke(cli, ["memory", "list"], env=env).output.splitlines()
    assert listed[0].split() == ["slug", "kind", "title", "confidence", "tags"]
    # piped (not a terminal): tab-separated, whole values (issue 27, finding 6)
    assert listed[1].split("\t")[:2] == [m["slug"], "procedure"]
    assert listed[1].endswith("0.95\tci")
    found = r.invoke(cli, ["memory", "search", "tests"], env=env).output.splitlines()
    assert found[0].split() == ["slug", "kind", "title", "score"] and "Run the tests" in found[1]
    assert r.invoke(cli, ["memory", "search", "nothing-like-it"], env=env).output.strip() == "no memory matches"
    stale = r.invoke(cli, ["memory", "confirm", m["slug"], "--version", "7"], env=env)
    assert stale.exit_code == 1 and "based on version 7" in stale.output
    ok = r.invoke(cli, ["memory", "confirm", m["id"][:12], "--json"], env=env)
    assert ok.exit_code == 0 and json.loads(ok.output)["version"] == 2
    bad = r.invoke(cli, ["memory", "add", "project", "x", "--attr", "name=x", "--attr", "status=bogus"], env=env)
    assert bad.exit_code == 2 and "project.status must be one of" in bad.output
    missing = r.invoke(cli, ["memory", "show", "nope"], env=env)
    assert missing.exit_code == 1 and "no memory" in missing.output


def test_show_resolves_evidence_and_lists_the_history(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.capture.hook import build, record
    from agentlog.cli import cli

    root = str(agentlog_home)
    payload = {"session_id": "s-show", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "tu_1",
               "tool_input": {"command": "make test"}, "tool_response": {"stdout": "ok"}, "cwd": "/nonexistent"}
    captured = build("claude-code", json.dumps(payload).encode(), 0, [])
    record(captured, root, "relaxed")
    m = S.create(root, "procedure", "Run the tests", attributes={"goal": "run the tests", "steps": ["make test"]},
                 evidence=[{"type": "event", "value": captured.event["event_id"]}])
    S.confirm(root, m.id)
    out = CliRunner().invoke(cli, ["memory", "show", m.slug, "--json"], env={"AGENTLOG_HOME": root})
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)
    (ev,) = shown["evidence"]
    assert ev["resolved"]["kind"] == "tool_call_finished" and ev["resolved"]["tool_name"] == "Bash"
    assert [(h["version"], h["change"]) for h in shown["history"]] == [(1, "created"), (2, "confirmed")]
    # evidence whose event has left the history shows as gone, not as an error
    gone = S.resolve_evidence(root, [{"type": "event", "value": "0190a8f0-0000-7000-8000-000000000009"}])
    assert gone[0]["resolved"]["gone"] is True
    text = CliRunner().invoke(cli, ["memory", "show", m.slug], env={"AGENTLOG_HOME": root})
    assert "→ kind tool_call_finished" in text.output and "v2  confirmed  by person" in text.output


def test_status_verify_and_rebuild_cover_the_memory(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(agentlog_home)
    _fixed_history(root)
    env = {"AGENTLOG_HOME": root}
    ok = CliRunner().invoke(cli, ["status", "--verify", "--json"], env=env)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["memory_verify"]["ok"] is True
    # the read model edited behind the log's back: verify says so
    con = store.connect(root)
    con.execute("UPDATE memories SET title = 'tampered' WHERE kind = 'procedure'")
    con.close()
    bad = CliRunner().invoke(cli, ["status", "--verify", "--json"], env=env)
    assert bad.exit_code == 1 and json.loads(bad.output)["memory_verify"]["differences"]["memories"] == \
        {"only_live": 1, "only_replayed": 1}
    rebuilt = CliRunner().invoke(cli, ["rebuild", "--json"], env=env)
    assert rebuilt.exit_code == 0 and json.loads(rebuilt.output)["memory_events"] == 11
    assert "tampered" not in [m.title for m in S.list_memories(root)]
    assert store.verify(root)["ok"]


def test_verify_finds_each_kind_of_difference(agentlog_home: Path) -> None:
    """A row missing, a row added and a value of another storage type (the same bytes as a
    blob) are each a difference, in the table they are in; the live file is not changed."""
    root = str(agentlog_home)
    _fixed_history(root)
    assert store.verify(root) == {**store.verify(root), "ok": True, "differences": {}}
    con = store.connect(root)
    con.execute("DELETE FROM history WHERE n = (SELECT max(n) FROM history)")
    con.execute("INSERT INTO links VALUES ('nobody', 'about', 'nothing')")
    con.execute("UPDATE evidence SET ref = CAST(ref AS BLOB) WHERE rowid = (SELECT min(rowid) FROM evidence)")
    before = store.dump(con)
    con.close()
    v = store.verify(root)
    assert not v["ok"]
    assert v["differences"] == {"history": {"only_live": 0, "only_replayed": 1},
                                "links": {"only_live": 1, "only_replayed": 0},
                                "evidence": {"only_live": 1, "only_replayed": 1}}
    assert v["rows"] == sum(len(rows) for rows in before.values())
    assert store.dump(store.connect(root)) == before


def test_edit_and_link_from_the_cli(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    root = str(agentlog_home)
    a = S.create(root, "convention", "Old way", attributes={"rule": "tabs"})
    b = S.create(root, "convention", "New way", attributes={"rule": "spaces"})
    r = CliRunner()
    env = {"AGENTLOG_HOME": root}
    out = r.invoke(cli, ["memory", "edit", b.slug, "--attr", "scope=python", "--tag", "style",
                         "--evidence", "url:https://peps.python.org/pep-0008/", "--json"], env=env)
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert got["attributes"] == {"rule": "spaces", "scope": "python"} and got["tags"] == ["style"]
    assert got["evidence"] == [{"type": "url", "value": "https://peps.python.org/pep-0008/"}]
    linked = r.invoke(cli, ["memory", "link", b.slug, "supersedes", a.slug, "--json"], env=env)
    assert linked.exit_code == 0 and json.loads(linked.output)["links"] == [["supersedes", a.id]]
    bad = r.invoke(cli, ["memory", "edit", b.slug, "--attr", "colour=red"], env=env)
    assert bad.exit_code == 2 and "has no attribute 'colour'" in bad.output


def test_plain_columns_are_terminal_safe_and_one_line_per_row(capsys: pytest.CaptureFixture[str]) -> None:
    from agentlog.cli.output import print_columns

    print_columns([{"a": "x\x1b[31mred", "b": "two\nlines"}, {"a": "", "b": None}], ["a", "b"])
    out = capsys.readouterr().out.splitlines()  # piped: tab-separated, nothing cut or padded
    assert out == ["a\tb", "x\\x1b[31mred\ttwo lines", "\t"]


def test_slugs_are_unique_default_ones_suffixed_explicit_ones_refused(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    # two memories of one title within the same ~65 s: the id's first 8 hex digits are the same
    a = S.create(root, "fact", "same title", attributes={"statement": "a"})
    b = S.create(root, "fact", "same title", attributes={"statement": "b"})
    c = S.create(root, "convention", "same title", attributes={"rule": "c"})  # unique across kinds too
    assert a.id[:8] == b.id[:8] == c.id[:8]
    assert (b.slug, c.slug) == (a.slug + "-2", a.slug + "-3")
    assert S.get(root, b.slug).id == b.id
    with pytest.raises(InvalidMemory, match=f"slug '{a.slug}' is taken by memory {a.id}"):
        S.create(root, "fact", "other", attributes={"statement": "x"}, slug=a.slug)
    with pytest.raises(InvalidMemory, match="is taken"):
        S.edit(root, b.id, slug=a.slug)
    assert S.edit(root, b.id, slug=b.slug).version == b.version  # its own slug: no change
    # a tombstone keeps its slug (undo can bring it back); the slug of a memory given another is free
    S.delete(root, a.id)
    with pytest.raises(InvalidMemory, match="is taken"):
        S.create(root, "fact", "other", attributes={"statement": "x"}, slug=a.slug)
    S.edit(root, c.id, slug="renamed")
    assert S.create(root, "fact", "other", attributes={"statement": "x"}, slug=a.slug + "-3").slug == a.slug + "-3"
    # every slug names one memory: linked: finds it
    S.link(root, c.id, "relates_to", b.id)
    assert [m.id for m, _ in S.search(root, "linked:" + b.slug)] == [c.id]


def test_proposals_get_unique_slugs_at_merge(agentlog_home: Path) -> None:
    from agentlog.memory import proposals as P

    root = str(agentlog_home)
    taken = S.create(root, "fact", "taken", attributes={"statement": "x"}, slug="wanted")
    p = P.open_proposal(root, [{"op": "create", "kind": "fact", "title": "one", "slug": "wanted",
                                "attributes": {"statement": "1"}},
                               {"op": "create", "kind": "fact", "title": "two", "slug": "wanted",
                                "attributes": {"statement": "2"}},
                               {"op": "create", "kind": "fact", "title": "taken", "attributes": {"statement": "3"}},
                               {"op": "create", "kind": "fact", "title": "taken", "attributes": {"statement": "4"}}],
                        title="four", actor="agent")
    P.approve(root, p.id)
    slugs = sorted(m.slug for m in S.list_memories(root))
    assert len(set(slugs)) == 5 and {"wanted", "wanted-2", "wanted-3"} <= set(slugs)
    # an edit to a slug another memory has: refused when opened, and at merge when taken since
    with pytest.raises(InvalidMemory, match="is taken"):
        P.open_proposal(root, [{"op": "edit", "memory": taken.id, "fields": {"slug": "wanted-2"}}], title="x")
    rename = P.open_proposal(root, [{"op": "edit", "memory": taken.id, "fields": {"slug": "later"}}], title="y")
    S.create(root, "fact", "first", attributes={"statement": "x"}, slug="later")
    with pytest.raises(P.StaleProposal, match="'later' is taken"):
        P.approve(root, rename.id)
    # undo that would put back a slug another memory took since: refused
    free = P.open_proposal(root, [{"op": "edit", "memory": taken.id, "fields": {"slug": "moved"}}], title="z")
    P.approve(root, free.id)
    S.create(root, "fact", "squatter", attributes={"statement": "x"}, slug="wanted")
    with pytest.raises(P.StaleProposal, match="took the slug 'wanted'"):
        P.undo(root, free.id)


def test_a_duplicate_slug_from_the_cli_is_one_line_and_exit_2(agentlog_home: Path) -> None:
    from click.testing import CliRunner

    from agentlog.cli import cli

    env = {"AGENTLOG_HOME": str(agentlog_home)}
    r = CliRunner()
    first = json.loads(r.invoke(cli, ["memory", "add", "fact", "same", "--attr", "statement=x", "--json"],
                                env=env).output)
    second = json.loads(r.invoke(cli, ["memory", "add", "fact", "same", "--attr", "statement=y", "--json"],
                                 env=env).output)
    assert second["slug"] == first["slug"] + "-2"
    shown = r.invoke(cli, ["memory", "show", first["slug"], "--json"], env=env)
    assert shown.exit_code == 0 and json.loads(shown.output)["id"] == first["id"]
    dup = r.invoke(cli, ["memory", "add", "fact", "other", "--attr", "statement=z", "--slug", first["slug"]], env=env)
    assert dup.exit_code == 2 and dup.output.count("\n") == 1 and "is taken by memory" in dup.output


_SLUG_OPS = st.lists(st.tuples(st.sampled_from(["add", "add-slug", "rename", "delete"]),
                               st.sampled_from(["same", "Same!", "other title", "x" * 90]),
                               st.sampled_from(["same", "same-2", "other", "x" * 80])), min_size=1, max_size=15)


def _slug_op(root: str, made: list[str], op: str, title: str, slug: str) -> None:
    """One write of the slug property below; a refusal it may meet is one the rules give."""
    try:
        if op in ("add", "add-slug") or not made:
            made.append(S.create(root, "fact", title, attributes={"statement": "s"},
                                 slug=slug if op == "add-slug" else None).id)
        elif op == "rename":
            S.edit(root, made[-1], slug=slug)
        else:
            S.delete(root, made[-1])
    except InvalidMemory as e:
        assert "is taken by memory" in str(e)
    except store.NotFound:  # a change to the memory just deleted
        assert op in ("rename", "delete")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_SLUG_OPS)
def test_no_history_of_writes_gives_two_memories_one_slug(ops: list[tuple[str, str, str]],
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    root = str(tmp_path_factory.mktemp("slugs"))
    made: list[str] = []
    for op, title, slug in ops:
        _slug_op(root, made, op, title, slug)
    slugs = [r[0] for r in store.connect(root).execute("SELECT slug FROM memories")]
    assert len(slugs) == len(set(slugs)) == len(made) and all(len(s) <= 80 for s in slugs)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)


@given(_JSON_VALUES)
def test_the_folds_json_columns_are_json_dumps_text(value: object) -> None:
    """The fold's encoders write exactly what ``json.dumps`` writes (a read model folded by an
    older agentlog compares equal to a replay by this one)."""
    assert store.dumps(value) == json.dumps(value)
    assert store.dumps_sorted(value) == json.dumps(value, sort_keys=True)


def test_memory_add_takes_the_main_attribute_from_the_title_or_content(agentlog_home: Path) -> None:
    """Issue 27, finding 9: a fact needed --attr statement=… even when its title says it all."""
    from click.testing import CliRunner

    from agentlog.cli import cli

    env = {"AGENTLOG_HOME": str(agentlog_home)}
    r = CliRunner().invoke(cli, ["memory", "add", "fact", "The API runs on port 8080", "--json"], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["attributes"]["statement"] == "The API runs on port 8080"
    assert "fact.statement was not given: taken from the title" in r.stderr
    r = CliRunner().invoke(cli, ["memory", "add", "decision", "Use uv", "--content", "uv, not pip", "--json"], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["attributes"]["chosen"] == "uv, not pip"
    r = CliRunner().invoke(cli, ["memory", "add", "pitfall", "Flaky port", "--json"], env=env)
    assert r.exit_code != 0 and "avoid" in r.output  # a second required attribute is still asked for
