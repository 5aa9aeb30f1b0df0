"""Corrections and retractions: written as events to the agentlog/meta log, applied by the projection.

Each test gets a fresh reference scenario (a Claude session whose failing
edit of src/parser.rs, attempt 1, is superseded by attempt 2; a Codex session
after it) and drives `agentlog correct` / `agentlog retract` and the read
commands through the real CLI with AGENTLOG_HOME set.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from agentlog.cli import cli
from agentlog.log.layout import log_path
from agentlog.log.verify import verify_logs
from agentlog.core.model import Event
from agentlog.projection.ids import derive
from agentlog.operations.corrections import MetaError, record_correction, write_correction, write_retraction
from agentlog.operations.refresh import open_current

from scenario import Scenario, build_reference

CLAUDE = derive("session", "claude_code", "claude-ref-session")
CODEX = derive("session", "codex", "codex-ref-session")
FAILED = derive("attempt", CLAUDE, "1", "0")
RETRY = derive("attempt", CLAUDE, "2", "0")
TURN1 = derive("turn", CLAUDE, "1")
META_LOG = ("agentlog", "meta")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """The scenario ingested and projected once; each test works on a copy of its data root."""
    base = tmp_path_factory.mktemp("meta")
    s = build_reference(str(base / "root"), str(base / "work"))
    engine, _ = open_current(s.root)
    engine.close()
    return s


@pytest.fixture()
def sc(template: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    root = str(tmp_path / "root")
    shutil.copytree(template.root, root, symlinks=True)
    s = dataclasses.replace(template, root=root)
    monkeypatch.setenv("AGENTLOG_HOME", s.root)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(s.repo)
    return s


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def js(r: Result) -> Any:
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def attempt_row(root: str, attempt_id: str) -> dict[str, Any]:
    engine, _ = open_current(root)
    with engine:
        res = engine.run("SELECT * FROM attempts WHERE attempt_id = ?", [attempt_id])
    return dict(zip(res.columns, res.rows[0]))


def meta_log(root: str) -> str:
    return log_path(root, *META_LOG)


def failures(*args: str) -> list[dict[str, Any]]:
    return list(js(run("failures", "--json", *args)))


def timeline_attempts(*args: str) -> list[str]:
    rows = js(run("timeline", "--json", *args))
    return [a["attempt_id"][4:] for s in rows for t in s["turns"] for a in t["attempts"]]


# -- corrections ---------------------------------------------------------------------------


def test_outcome_correction_keeps_what_was_inferred_and_the_latest_wins(sc: Scenario) -> None:
    r = run("correct", f"att_{FAILED[:8]}", "--outcome", "failed", "--class", "wrong_fix", "--note", "not a retry")
    assert r.exit_code == 0, r.output
    assert f"att_{FAILED}" in r.stdout and "outcome superseded (string_mismatch) → failed (wrong_fix)" in r.stdout
    row = attempt_row(sc.root, FAILED)
    assert (row["outcome"], row["failure_class"], row["note"]) == ("failed", "wrong_fix", "not a retry")
    assert (row["inferred_outcome"], row["inferred_failure_class"]) == ("superseded", "string_mismatch")
    assert row["correction_type"] == "attempt_outcome" and row["corrected_by"]
    assert row["superseded_by"] == RETRY  # corrections never re-run the structural rules
    (f,) = failures()
    assert (f["attempt_id"], f["outcome"], f["failure_class"], f["inferred_outcome"]) == \
        (f"att_{FAILED}", "failed", "wrong_fix", "superseded")
    assert "failed (wrong_fix) [corrected; inferred superseded]" in run("timeline").stdout

    # a later correction wins; what was inferred stays what the projector said
    out = js(run("correct", FAILED, "--outcome", "succeeded", "--json"))
    assert out["written"] and out["before"]["outcome"] == "failed" and out["attrs"]["outcome"] == "succeeded"
    row = attempt_row(sc.root, FAILED)
    assert (row["outcome"], row["failure_class"]) == ("succeeded", None)
    assert (row["inferred_outcome"], row["inferred_failure_class"]) == ("superseded", "string_mismatch")
    assert failures() == []
    statuses = js(run("sql", "select outcome, status from corrections order by corrected_at", "--json"))["rows"]
    assert statuses == [["failed", "applied"], ["succeeded", "applied"]]


def test_note_and_objective_corrections(sc: Scenario) -> None:
    assert run("correct", RETRY[:8], "--note", "the tabs were the problem").exit_code == 0
    r = run("correct", f"trn_{TURN1[:8]}", "--objective", "Make empty input parse")
    assert r.exit_code == 0, r.output
    assert "objective 'Fix the parser crash on empty input' → 'Make empty input parse'" in r.stdout
    rows = js(run("timeline", "--session", CLAUDE[:8], "--json"))
    turn1, turn2 = rows[0]["turns"][:2]
    assert turn1["objective"] == "Make empty input parse"
    assert turn1["inferred_objective"] == "Fix the parser crash on empty input"
    assert turn2["attempts"][0]["note"] == "the tabs were the problem"
    assert turn2["attempts"][0]["outcome"] == "succeeded"  # a note changes no outcome
    assert "note: the tabs were the problem" in run("timeline").stdout


def test_correcting_an_unknown_target_is_refused_at_write_time(sc: Scenario) -> None:
    r = run("correct", "att_ffffffff", "--outcome", "failed")
    assert r.exit_code == 1 and "no attempt" in r.output
    r = run("correct", "ffffffff-0000-0000-0000-000000000000", "--note", "x")
    assert r.exit_code == 1
    assert not os.path.exists(meta_log(sc.root))  # nothing written
    with pytest.raises(MetaError) as e:
        write_correction(sc.root, correction_type="attempt_outcome", target="att_ffffffff", outcome="failed")
    assert not e.value.usage
    assert not os.path.exists(meta_log(sc.root))


def test_correction_usage_errors(agentlog_home: Path) -> None:
    # bad values are refused before the store is even opened
    for args in [
        ("--outcome", "bogus"),  # not in the vocabulary
        ("--class", "x"),  # a class without an outcome
        (),  # nothing to correct
        ("--outcome", "succeeded", "--class", "wrong_fix"),  # a class with success
        ("--outcome", "failed", "--class", "Not A Token"),
        ("--objective", "x", "--outcome", "failed"),
        ("--objective", "   "),
    ]:
        r = run("correct", f"att_{FAILED[:8]}", *args)
        assert r.exit_code == 2, (args, r.output)
    assert not os.path.exists(meta_log(str(agentlog_home)))
    assert not os.path.exists(os.path.join(agentlog_home, "store"))


def test_correction_target_must_be_the_right_kind(sc: Scenario) -> None:
    assert run("correct", f"trn_{TURN1[:8]}", "--outcome", "failed").exit_code == 2  # a turn has no outcome
    assert run("correct", f"att_{FAILED[:8]}", "--objective", "x").exit_code == 2
    assert run("correct", TURN1[:8], "--outcome", "failed").exit_code == 1  # not an attempt id
    assert not os.path.exists(meta_log(sc.root))


def test_correction_event_on_the_wire(sc: Scenario) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    event_id = write_correction(sc.root, correction_type="attempt_outcome", target=f"att_{FAILED[:8]}",
                                outcome="abandoned", note=f"leaked {secret} here", at_us=sc.times["claude.end"])
    with open(meta_log(sc.root), "rb") as f:
        (line,) = f.read().splitlines()
    ev = json.loads(line)["event"]
    Event.from_wire(ev)
    assert ev["event_id"] == event_id
    assert (ev["kind"], ev["provider"], ev["provider_event_name"], ev["provider_session_id"]) == \
        ("correction", "agentlog", "Correction", "meta")
    assert ev["observed_at"] == sc.times["claude.end"]
    attrs = ev["attrs"]
    assert (attrs["correction_type"], attrs["target"], attrs["outcome"]) == \
        ("attempt_outcome", f"att_{FAILED}", "abandoned")
    assert attrs["note_chars"] == len(f"leaked {secret} here") and attrs["redactions"] == 1
    assert secret not in line.decode() and "[REDACTED:github_token]" in ev["content"]["note"]
    assert all(r.status == "intact" for r in verify_logs([meta_log(sc.root)]))
    assert attempt_row(sc.root, FAILED)["outcome"] == "abandoned"


def test_metadata_only_keeps_no_note(sc: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOG_CAPTURE_MODE", "metadata_only")
    out = js(run("correct", f"trn_{TURN1[:8]}", "--objective", "A secret objective", "--json"))
    assert out["note"] is None and out["capture_mode"] == "metadata_only"
    assert out["attrs"]["note_chars"] == len("A secret objective")
    with open(meta_log(sc.root), "rb") as f:
        data = f.read()
    assert b"A secret objective" not in data and b'"content"' not in data
    rows = js(run("timeline", "--session", CLAUDE[:8], "--json"))
    turn1 = rows[0]["turns"][0]
    assert turn1["corrected_by"] is not None and turn1["objective"] == "Fix the parser crash on empty input"


def test_dry_run_writes_nothing(sc: Scenario) -> None:
    r = run("correct", FAILED[:8], "--outcome", "failed", "--dry-run")
    assert r.exit_code == 0 and "would record (dry run)" in r.stdout
    assert run("retract", FAILED[:8], "--reason", "test", "--dry-run").exit_code == 0
    assert not os.path.exists(meta_log(sc.root))
    res = record_correction(sc.root, correction_type="attempt_note", target=FAILED, note="n", dry_run=True)
    assert not res.written and not os.path.exists(meta_log(sc.root))


# -- retractions ------------------------------------------------------------------------------


def test_retracting_the_retry_reverts_the_superseded_attempt_to_failed(sc: Scenario) -> None:
    r = run("retract", f"att_{RETRY[:8]}", "--reason", "test", "--note", "replayed by hand")
    assert r.exit_code == 0, r.output
    assert "retracted (test)" in r.stdout
    assert RETRY not in timeline_attempts()
    (f,) = failures()
    assert (f["attempt_id"], f["outcome"], f["retry"], f["superseded_by"]) == (f"att_{FAILED}", "failed", None, None)
    show = js(run("show", f"att_{RETRY}", "--json"))  # still found by id, marked
    assert show["entity"]["retracted"] is True
    r = run("retract", f"att_{RETRY[:8]}", "--reason", "test")
    assert r.exit_code == 1 and "already retracted" in r.output
    r = run("correct", f"att_{RETRY[:8]}", "--outcome", "failed")
    assert r.exit_code == 1 and "retracted" in r.output


def test_retracting_the_failed_attempt_hides_it(sc: Scenario) -> None:
    event_id = write_retraction(sc.root, target_type="attempt", target=FAILED, reason="mistaken_import")
    assert event_id
    assert FAILED not in timeline_attempts()
    assert failures() == []
    row = attempt_row(sc.root, RETRY)
    assert row["supersedes"] is None and row["outcome"] == "succeeded"


def test_session_retraction_hides_the_session(sc: Scenario) -> None:
    out = js(run("retract", "claude-ref-session", "--reason", "duplicate", "--json"))
    assert (out["target_type"], out["target"], out["attrs"]["reason"]) == ("session", f"ses_{CLAUDE}", "duplicate")
    assert [s["session_id"] for s in js(run("sessions", "--json"))] == [f"ses_{CODEX}"]
    assert [s["session_id"] for s in js(run("timeline", "--json"))] == [f"ses_{CODEX}"]
    assert failures() == []
    assert js(run("timeline", "--session", CODEX[:8], "--json"))[0]["turns"]
    r = run("retract", f"ses_{CLAUDE[:8]}", "--reason", "duplicate")
    assert r.exit_code == 1 and "already retracted" in r.output


def test_event_retraction_re_projects_without_it(sc: Scenario) -> None:
    failing = sc.events["claude.edit1.fail"]
    r = run("retract", f"ev_{failing}", "--reason", "test")
    assert r.exit_code == 0, r.output
    assert failures() == []  # without its failure the edit is an ordinary attempt
    r = run("retract", f"ev_{failing}", "--reason", "test")
    assert r.exit_code == 1 and "already retracted" in r.output


def test_retraction_errors(sc: Scenario) -> None:
    assert run("retract", f"att_{FAILED[:8]}").exit_code == 2  # --reason is required
    assert run("retract", f"att_{FAILED[:8]}", "--reason", "because").exit_code == 2
    assert run("retract", f"trn_{TURN1[:8]}", "--reason", "test").exit_code == 2  # turns cannot be retracted
    assert run("retract", "att_ffffffff", "--reason", "test").exit_code == 1
    assert not os.path.exists(meta_log(sc.root))
    write_correction(sc.root, correction_type="attempt_note", target=FAILED, note="n")
    (cid,) = [r[0] for r in js(run("sql", "select event_id from corrections", "--json"))["rows"]]
    r = run("retract", f"ev_{cid}", "--reason", "other")
    assert r.exit_code == 1 and "cannot be retracted" in r.output
