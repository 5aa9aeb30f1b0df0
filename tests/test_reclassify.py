"""Re-classification: events an older classifier classified get today's class in the
projection (``agentlog project --full`` after an upgrade, and the incremental path for
old events ingested late), with the evidence, summaries and the class they had before;
``agentlog failures --reclassified`` lists them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from agentlog.capture.failures import CLASSIFIER_VERSION
from agentlog.cli import cli as main
from agentlog.operations.refresh import run_sql
from agentlog.projection.persist import refresh
from agentlog.store.ingest import ingest
from projection_support import deliver, event_id, wire

P = "claude_code"
T0 = 1_790_000_000_000_000
PYTEST_OUT = (
    "Exit code 1\n============================= test session starts ==============================\n"
    "collected 2 items\n\ntests/test_net.py::test_connect_timeout FAILED\ntests/test_net.py::test_ok PASSED\n\n"
    "FAILED tests/test_net.py::test_connect_timeout - AssertionError: assert 3 == 2\n"
    "========================= 1 failed, 1 passed in 0.12s ========================="
)


def call(seed: int, psid: str, n: int, at: int, command: str, error: str, old_class: str,
         attrs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A started and failed Bash call as an old version recorded it (its class, no classified_by)."""
    tool = {"name": "Bash", "category": "shell", "call_id": f"c{n}"}
    return [
        wire(event_id(seed, 2 * n), "tool_call_started", P, psid, T0 + at, tool=tool,
             content={"command": command}, attrs={"command_category": "test"}),
        wire(event_id(seed, 2 * n + 1), "tool_call_failed", P, psid, T0 + at + 10, tool=tool,
             outcome={"status": "failure", "class": old_class, "exit_code": 1},
             content={"command": command, "error": error}, attrs={"command_category": "test", **(attrs or {})}),
    ]


def rows(root: str) -> dict[str, dict[str, Any]]:
    r = run_sql(root, "select provider_call_id, outcome_class, reclassified_from, result_summary, tests_failed, "
                      "tests_passed, failing_tests, failure_evidence from tool_calls")
    return {row[0]: dict(zip(r.columns, row)) for row in r.rows}


def test_old_classes_are_rederived_in_full_and_incremental_projections(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    deliver(root, call(1, "s1", 1, 0, "pytest tests/test_net.py", PYTEST_OUT, "timeout"))
    # an event today's classifier wrote is trusted as it is (not read again)
    deliver(root, call(1, "s1", 2, 100, "pytest -x", "Exit code 1\nboom", "nonzero_exit",
                       {"classified_by": CLASSIFIER_VERSION}))
    ingest(root, durability="relaxed")
    assert refresh(root, full=True).mode == "full"
    got = rows(root)
    assert got["c1"]["outcome_class"] == "test_failure"
    assert got["c1"]["reclassified_from"] == "timeout"
    assert got["c1"]["failure_evidence"] == "pytest summary"
    assert (got["c1"]["tests_failed"], got["c1"]["tests_passed"]) == (1, 1)
    assert got["c1"]["failing_tests"] == "tests/test_net.py::test_connect_timeout"
    assert got["c1"]["result_summary"] == "1 of 2 tests failed: tests/test_net.py::test_connect_timeout"
    assert got["c2"]["outcome_class"] == "nonzero_exit" and got["c2"]["reclassified_from"] is None
    # an old event arriving later goes the incremental way and is re-derived too
    deliver(root, call(2, "s2", 3, 200, "cat missing.txt", "Exit code 1\ncat: missing.txt: No such file or directory",
                       "unknown"))
    ingest(root, durability="relaxed")
    assert refresh(root).mode == "incremental"
    got = rows(root)
    assert got["c3"]["outcome_class"] == "file_not_found" and got["c3"]["reclassified_from"] == "unknown"
    # attempts carry the new class
    r = run_sql(root, "select failure_class from attempts where failure_class is not null order by started_at")
    assert [row[0] for row in r.rows][:1] == ["test_failure"]

    out = CliRunner().invoke(main, ["failures", "--reclassified", "--json"])
    assert out.exit_code == 0, out.output
    listed = json.loads(out.output)
    assert {(x["class"], x["reclassified_from"]) for x in listed} == {("test_failure", "timeout"),
                                                                       ("file_not_found", "unknown")}
    out = CliRunner().invoke(main, ["failures", "--reclassified"])
    assert out.exit_code == 0 and "timeout" in out.output and "test_failure" in out.output


def test_a_failed_command_run_again_and_passing_is_the_retry_that_fixed_it(agentlog_home: Path) -> None:
    """Shell calls touch no paths, so no later attempt supersedes a failed test run; the same
    command passing later is its retry ("fixed by"), in tool_calls, edges and failures."""
    from agentlog.capture.adapters.common import command_key

    root = str(agentlog_home)
    cmd = "pytest tests/test_net.py"
    key = command_key(cmd)
    tool = {"name": "Bash", "category": "shell"}
    events = [
        wire(event_id(3, 0), "prompt_submitted", P, "s3", T0, content={"prompt": "make the tests pass"}),
        wire(event_id(3, 1), "tool_call_started", P, "s3", T0 + 10, tool={**tool, "call_id": "r1"},
             content={"command": cmd}, attrs={"command_category": "test", "command_key": key}),
        wire(event_id(3, 2), "tool_call_failed", P, "s3", T0 + 20, tool={**tool, "call_id": "r1"},
             outcome={"status": "failure", "class": "test_failure", "exit_code": 1},
             content={"command": cmd, "error": PYTEST_OUT},
             attrs={"command_category": "test", "command_key": key, "classified_by": CLASSIFIER_VERSION,
                    "result_summary": "1 of 2 tests failed: tests/test_net.py::test_connect_timeout",
                    "failure_evidence": "pytest summary"}),
        wire(event_id(3, 3), "tool_call_started", P, "s3", T0 + 30, tool={"name": "Edit", "category": "file_edit",
             "call_id": "e1"}, paths=["src/net.py"]),
        wire(event_id(3, 4), "tool_call_finished", P, "s3", T0 + 40, tool={"name": "Edit", "category": "file_edit",
             "call_id": "e1"}, paths=["src/net.py"], outcome={"status": "success"}),
        wire(event_id(3, 5), "tool_call_started", P, "s3", T0 + 50, tool={**tool, "call_id": "r2"},
             content={"command": "pytest  tests/test_net.py"}, attrs={"command_category": "test", "command_key": key}),
        wire(event_id(3, 6), "tool_call_finished", P, "s3", T0 + 60, tool={**tool, "call_id": "r2"},
             outcome={"status": "success"}, attrs={"command_category": "test", "command_key": key,
                                                   "result_summary": "2 tests passed"}),
        wire(event_id(3, 7), "turn_stopped", P, "s3", T0 + 70),
    ]
    deliver(root, events)
    ingest(root, durability="relaxed")
    refresh(root)
    r = run_sql(root, "select provider_call_id, fixed_by, tool_call_id from tool_calls order by started_at")
    by = {row[0]: row for row in r.rows}
    assert by["r1"][1] == by["r2"][2] and by["r2"][1] is None and by["e1"][1] is None
    r = run_sql(root, "select count(*) from edges where edge_kind = 'fixed_by'")
    assert r.rows[0][0] == 1
    out = CliRunner().invoke(main, ["failures", "--all-projects", "--json"])
    assert out.exit_code == 0, out.output
    (f,) = json.loads(out.output)
    assert f["failure_class"] == "test_failure"
    assert f["failing_call"]["result_summary"] == "1 of 2 tests failed: tests/test_net.py::test_connect_timeout"
    assert f["retry"]["how"] == "fixed_by" and f["retry"]["outcome"] == "succeeded"
    assert f["retry"]["fixed_by"]["result_summary"] == "2 tests passed"
    text = CliRunner().invoke(main, ["failures", "--all-projects"], env={"COLUMNS": "400"}).output
    assert "fixed by" in text and "1 of 2 tests failed" in text
    # the statement language sees the class and the failing call's counts
    from agentlog.operations.refresh import open_current
    from agentlog.query.aql import execute

    engine, _ = open_current(root)
    with engine:
        got = execute(engine, "SHOW FAILED ATTEMPTS WHERE class = 'test_failure' AND fixed_by IS NOT NULL")
        none = execute(engine, "SHOW FAILED ATTEMPTS WHERE class = 'timeout'")
    assert len(got.rows) == 1 and none.rows == []
    row = dict(zip(got.columns, got.rows[0]))
    assert row["result_summary"].startswith("1 of 2 tests failed") and row["fixed_by"] is not None
    from agentlog.query.state import why_failed

    engine, _ = open_current(root)
    with engine:
        (answer,) = why_failed(engine, row["attempt_id"].split("_", 1)[-1])
    assert "test_failure" in answer["claim"] and "1 of 2 tests failed" in answer["claim"]
    assert "the same command passed later" in answer["claim"] and "2 tests passed" in answer["claim"]
