"""Memory checked against its evidence: file evidence through git in real repositories made
here (lines edited, moved within the file, moved to another file, the file renamed or
deleted, the repository rebased), the check as events that replay, and the doubtful ones."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.memory import drift, store, truth
from agentlog.memory import service as S

LINES = [f"line {i:02d} = compute({i})" for i in range(1, 31)]


def git(repo: Path, *args: str) -> str:
    p = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
                        "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def write(repo: Path, name: str, lines: list[str]) -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text("\n".join(lines) + "\n")


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def new_repo(tmp: Path) -> tuple[Path, str]:
    repo = tmp / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, "src/a.py", LINES)
    write(repo, "README.md", ["# proj"])
    return repo, commit(repo, "first")


def cite(root: str, c1: str, path: str = "src/a.py", start: int = 10, end: int = 12) -> S.Memory:
    return S.create(root, "fact", "compute is called for 10 to 12", attributes={"statement": "compute(10..12)"},
                    evidence=[{"type": "file", "path": path, "line_start": start, "line_end": end, "commit": c1[:10]}])


def _edit_line(repo: Path) -> None:
    write(repo, "src/a.py", [*LINES[:10], "line 11 = compute(eleven)", *LINES[11:]])


def _insert_above(repo: Path) -> None:
    write(repo, "src/a.py", ["# header"] * 5 + LINES)


def _move_within(repo: Path) -> None:
    write(repo, "src/a.py", [*LINES[:9], *LINES[12:], *LINES[9:12]])


def _move_to_other(repo: Path) -> None:
    write(repo, "src/a.py", [*LINES[:9], *LINES[12:]])
    write(repo, "src/b.py", ["# moved here", "", *LINES[9:12]])


def _rename(repo: Path) -> None:
    git(repo, "mv", "src/a.py", "src/c.py")


def _delete(repo: Path) -> None:
    git(repo, "rm", "-q", "src/a.py")


def _delete_keep_elsewhere(repo: Path) -> None:
    git(repo, "rm", "-q", "src/a.py")
    write(repo, "lib/keep.py", LINES[9:12])


CASES = [
    ("untouched", lambda repo: write(repo, "README.md", ["# proj", "more"]), "unchanged", None),
    ("edited", _edit_line, "changed", None),
    ("inserted-above", _insert_above, "moved", ("src/a.py", 15, 17)),
    ("moved-within", _move_within, "moved", ("src/a.py", 28, 30)),
    ("moved-to-other-file", _move_to_other, "moved", ("src/b.py", 3, 5)),
    ("renamed", _rename, "moved", ("src/c.py", 10, 12)),
    ("deleted", _delete, "deleted", None),
    ("deleted-but-lines-live-on", _delete_keep_elsewhere, "moved", ("lib/keep.py", 1, 3)),
]


@pytest.mark.parametrize("name,change,status,where", CASES, ids=[c[0] for c in CASES])
def test_file_evidence_drift_through_git(agentlog_home: Path, tmp_path: Path, name: str, change: Any, status: str,
                                         where: tuple[str, int, int] | None) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    m = cite(root, c1)
    change(repo)
    head = commit(repo, name)
    report = truth.check(root, repo_dir=str(repo))
    assert report.checked == 1 and report.written == 1
    got = S.get(root, m.id)
    (finding,) = [r for r in truth.last(store.connect(root), m.id)["results"] if r["on"] == "evidence"]
    assert finding["status"] == status, finding
    ref = got.evidence[0]
    if where is None:  # the citation stays as it was
        assert (ref["value"], ref["line_start"], ref["line_end"], ref["commit"]) == ("src/a.py", 10, 12, c1[:10])
    else:  # a moved citation follows its lines, at HEAD
        assert (ref["value"], ref["line_start"], ref["line_end"], ref["commit"]) == (*where, head)
        shown = git(repo, "show", f"HEAD:{where[0]}").split("\n")[where[1] - 1:where[2]]
        assert shown == LINES[9:12]
    weight = truth.WEIGHTS[status]
    assert got.truth_factor == weight and got.doubtful == (weight < 1.0)
    assert got.effective_confidence == pytest.approx(S.list_memories(root)[0].effective_confidence)
    if weight < 1.0:
        assert [d.id for d in truth.doubtful(root)] == [m.id]
        assert got.doubts and got.doubts[0]["status"] == status
    # a second check finds what the first found: no event (a moved citation is unchanged now)
    again = truth.check(root, repo_dir=str(repo), everything=True)
    assert again.written == (1 if status == "moved" else 0)
    assert truth.check(root, repo_dir=str(repo), everything=True).written == 0
    if status == "moved":
        assert truth.last(store.connect(root), m.id)["results"][0]["status"] == "unchanged"


def test_a_rebased_repository(agentlog_home: Path, tmp_path: Path) -> None:
    """The cited commit is rebased onto a main that inserted lines above the cited ones: the
    old commit is still in the object store, so git follows the lines to the rebased HEAD; a
    commit the repository does not have is unverifiable (and lowers nothing)."""
    root = str(agentlog_home)
    repo, _ = new_repo(tmp_path)
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo, "src/a.py", [*LINES, "tail = 1"])
    cited = commit(repo, "feature work")
    git(repo, "checkout", "-q", "main")
    write(repo, "src/a.py", ["import os", "import sys", *LINES])
    commit(repo, "main work")
    git(repo, "checkout", "-q", "feature")
    git(repo, "rebase", "-q", "main")
    head = git(repo, "rev-parse", "HEAD")
    assert head != cited
    m = cite(root, cited)
    other = cite(root, "0123456789abcdef0123")
    truth.check(root, repo_dir=str(repo))
    ref = S.get(root, m.id).evidence[0]
    assert (ref["value"], ref["line_start"], ref["line_end"], ref["commit"]) == ("src/a.py", 12, 14, head)
    assert S.get(root, other.id).doubts == [] and S.get(root, other.id).truth_factor == 1.0
    found = truth.last(store.connect(root), other.id)["results"][0]
    assert found["status"] == "unverifiable" and "not in this repository" in found["detail"]


def test_checks_replay_to_the_same_confidences_and_flags(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    edited, moved, kept = cite(root, c1), cite(root, c1, start=20, end=21), cite(root, c1, start=1, end=2)
    S.add_evidence(root, kept.id, {"type": "url", "value": "https://example.invalid/doc"})
    write(repo, "src/a.py", ["# header", *LINES[:10], "changed", *LINES[11:19], *LINES[19:]])
    commit(repo, "edit")
    truth.check(root, repo_dir=str(repo))
    _delete(repo)
    commit(repo, "delete")
    truth.check(root, repo_dir=str(repo))

    def state() -> tuple[Any, ...]:
        ms = {m.id: m for m in S.list_memories(root, now_us=10**17)}
        return (store.dump(store.connect(root)),
                {i: (m.effective_confidence, m.truth_factor, m.doubtful, m.doubts) for i, m in ms.items()})

    live = state()
    assert live[1][edited.id][2] and live[1][moved.id][2] and live[1][kept.id][2]  # all deleted now
    assert live[1][edited.id][1] == truth.WEIGHTS["deleted"]
    store.rebuild(root)
    assert state() == live
    assert store.verify(root)["ok"]
    assert [h["change"] for h in S.history(root, edited.id)] == ["created", "checked", "checked"]


def test_memory_show_explains_each_factor(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    m = cite(root, c1)
    con = store.connect(root)
    assert [f["factor"] for f in truth.explain(con, S.get(root, m.id))] == ["confidence", "decay", "truth"]
    _edit_line(repo)
    commit(repo, "edit")
    truth.check(root, repo_dir=str(repo))
    got = S.get(root, m.id)
    factors = truth.explain(con, got)
    assert [f["factor"] for f in factors] == ["confidence", "decay", "evidence: changed", "truth"]
    assert factors[2]["value"] == 0.5 and "lines 10-12 of src/a.py were edited" in factors[2]["why"]
    product = factors[0]["value"] * factors[1]["value"] * factors[3]["value"]
    assert got.effective_confidence == pytest.approx(product, rel=1e-3)


def test_without_a_repository_file_evidence_is_unverifiable(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    m = cite(root, "abcdef1234")
    report = truth.check(root, repo_dir=str(tmp_path))
    assert report.skipped and "not in a git repository" in report.skipped[0]
    assert S.get(root, m.id).doubtful is False
    with pytest.raises(drift.GitUnavailable):
        drift.open_repo(str(tmp_path))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(["other", "below", "readme", "newfile", "activity"]),
                                st.integers(0, 5)), min_size=1, max_size=4),
       span=st.tuples(st.integers(1, 20), st.integers(0, 5)))
def test_untouched_evidence_is_never_flagged(agentlog_home: Path, tmp_path_factory: pytest.TempPathFactory,
                                             edits: list[tuple[str, int]], span: tuple[int, int]) -> None:
    """Histories that never touch the cited lines (edits below them, other files, new files)
    and whose recorded activity contradicts nothing (edits of other paths, succeeding or
    failing; other commands failing; the procedure's command succeeding): no memory is ever
    doubtful, the citation stays, no proposal is opened."""
    from test_memory_outcomes import Session

    from agentlog.memory import proposals

    # A fresh root for every example: the function-scoped home is shared by all of them, and
    # git gives two examples' first commits the same hash within one second, so an earlier
    # example's memory would cite (and be flagged in) this example's repository.
    root = str(tmp_path_factory.mktemp("root"))
    repo, c1 = new_repo(tmp_path_factory.mktemp("h"))
    start, length = span
    end = start + length
    m = cite(root, c1, start=start, end=end)
    S.create(root, "pitfall", "pit.py edits fail", attributes={"symptom": "s", "avoid": "a", "paths": ["src/pit.py"]})
    S.create(root, "procedure", "check", attributes={"goal": "check", "steps": ["make check"], "command": "make check"})
    S.create(root, "decision", "Use uv", attributes={"chosen": "uv", "alternatives": ["poetry"]})
    write(repo, "README.md", ["# proj", "uses uv"])
    commit(repo, "uv")
    session = Session(root, repo, f"prop-{c1[:8]}")
    lines = list(LINES)
    for i, (what, n) in enumerate(edits):
        if what == "activity":
            session.edit(["src/a.py", "src/other.py", "pit.py.bak"][n % 3], ok=n % 2 == 0)
            session.bash("make other", ok=False)
            session.bash("make check", ok=True)
            truth.check(root, repo_dir=str(repo))
            continue
        if what == "below":
            lines = [*lines[:end + n], f"added {i}", *lines[end + n:]]
            write(repo, "src/a.py", lines)
        elif what == "other":
            write(repo, "src/other.py", [f"x = {i}"] * (n + 1))
        elif what == "readme":
            write(repo, "README.md", ["# proj", "uses uv", f"v{i}"])
        else:
            write(repo, f"new{i}.txt", [str(n)])
        commit(repo, f"edit {i}")
        truth.check(root, repo_dir=str(repo))
    truth.check(root, repo_dir=str(repo), everything=True)
    got = S.get(root, m.id)
    assert not got.doubtful and got.truth_factor == 1.0 and truth.doubtful(root) == []
    assert proposals.list_proposals(root, status=None) == []
    assert (got.evidence[0]["line_start"], got.evidence[0]["commit"]) == (start, c1[:10])


def test_the_cli_and_the_mcp_tools_show_doubt_and_why(agentlog_home: Path, tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from agentlog.cli import cli
    from agentlog.mcp import tools as T

    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    m = cite(root, c1)
    fine = S.create(root, "fact", "compute is fine", attributes={"statement": "compute is fine"})
    _edit_line(repo)
    commit(repo, "edit")
    r = CliRunner()
    env = {"AGENTLOG_HOME": root}
    out = r.invoke(cli, ["memory", "check", "--repo", str(repo), "--json"], env=env)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["doubtful"] == [m.id]
    listed = r.invoke(cli, ["memory", "review", "--doubtful", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.output)
    assert row["id"] == m.id and "src/a.py: changed" in row["why"][0]
    assert "src/a.py: changed" in r.invoke(cli, ["memory", "review", "--doubtful"], env=env).output
    shown = r.invoke(cli, ["memory", "show", m.id], env=env).output
    assert "doubtful, because:" in shown and "×0.50  evidence: changed file src/a.py" in shown
    shown_json = json.loads(r.invoke(cli, ["memory", "show", m.id, "--json"], env=env).output)
    assert [f["value"] for f in shown_json["confidence_factors"]][-1] == 0.5
    assert r.invoke(cli, ["memory", "review"], env=env).exit_code == 2  # neither a proposal nor --doubtful
    # the MCP tools mark it, and say why
    text, data = T.memory_get(root, ident=m.id)
    assert "DOUBTFUL" in text and "lines 10-12 of src/a.py were edited" in text and data["doubtful"]
    text, data = T.memory_get(root, ident=fine.id)
    assert "DOUBTFUL" not in text and not data["doubtful"]
    _, found = T.memory_search(root, query="compute")
    by_id = {f["id"]: f for f in found["memories"]}
    assert by_id[m.id]["doubtful"] and "changed" in by_id[m.id]["doubt"]
    assert not by_id[fine.id]["doubtful"] and by_id[fine.id]["doubt"] == ""


def test_the_bench_rows_of_the_memory_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from agentlog.bench.context import StepContext
    from agentlog.bench.memory_truth_steps import truth_checks

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("AGENTLOG_HOME", str(tmp_path / "unused"))
    ctx = StepContext("memory", 1000, 1)
    try:
        table, metrics = truth_checks(ctx, sizes=(20,), full=(60, 300), new_events=40, runs=2, full_incremental=40)
    finally:
        ctx.cleanup()
    row, full, inc = table["rows"]
    assert row[0] == "20 / 2" and "(10 moved, 1 doubtful)" in row[1], row
    assert "(1 checked)" in row[5], row  # the events ran `make test`: the procedure, only
    assert "(10 checked)" in row[6] or "(11 checked)" in row[6], row  # the memories citing the file committed
    assert metrics["check.20.incremental_ms"] > 0 and metrics["check.20.per_memory_ms"] > 0
    assert metrics["check.20.after_events_ms"] > 0 and metrics["check.20.after_commit_ms"] > 0
    assert full[0] == "60 against 300 events" and metrics["check.full.60.300.first_ms"] > 0, full
    assert "proposals; load" in full[1] and metrics["check.full.60.300.again_ms"] > 0
    # the incremental check over the workload's history: only the new frames read, not the store
    assert inc[0] == "42 over 300 events" and "store not read" in inc[5], inc
    assert metrics["check.history.300.store_read"] is False


def test_a_file_cited_by_its_absolute_path_or_dot_slash_is_checked(agentlog_home: Path, tmp_path: Path) -> None:
    root = str(agentlog_home)
    repo, c1 = new_repo(tmp_path)
    top = git(repo, "rev-parse", "--show-toplevel")
    a = cite(root, c1, path=f"{top}/src/a.py")
    b = cite(root, c1, path="./src/a.py")
    _insert_above(repo)
    head = commit(repo, "insert")
    truth.check(root, repo_dir=str(repo))
    for m in (a, b):
        ref = S.get(root, m.id).evidence[0]
        assert (ref["value"], ref["line_start"], ref["commit"]) == ("src/a.py", 15, head)
