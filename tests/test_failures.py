"""Failure classes from the tools' own signals (capture/failures), against labelled real errors.

The labelled sets (tests/data/failures):
- ``labelled.json``: every tool error in ../shared/fixtures (Claude Code
  transcripts and hook payloads others captured), each labelled by hand with
  the reason, read end to end through our parsers; and the agents' own tool
  messages as they print them.
- ``runners/*.json``: real outputs of pytest, unittest, go, cargo, tsc, jest,
  vitest, mocha, node --test, eslint, mypy, pyright, ruff, gcc, make, git
  and shell commands, run on this machine (runners/README.md), labelled by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.capture.adapters import claude_code
from agentlog.capture.classify import classify_command, command_programs
from agentlog.capture.failures import CLASSES, LEGACY, canonical, classify, classify_event, describe, summarize
from agentlog.operations.fixtures import missing, shared_dir
from import_support import parse_claude_transcript

pytestmark = pytest.mark.quick

DATA = Path(__file__).parent / "data" / "failures"
LABELLED = json.loads((DATA / "labelled.json").read_text(encoding="utf-8"))
RUNNERS = sorted((DATA / "runners").glob("*.json"))
_SHARED = shared_dir()
FIXTURES = _SHARED / "fixtures" if _SHARED is not None else Path("/nonexistent")


def shell_verdict(text: str, command: str, exit_code: int | None = None) -> dict[str, Any]:
    facts = classify_command(command)
    return classify(text, category="shell", command=command, command_category=facts.get("command_category"),
                    command_subcategory=facts.get("command_subcategory"), programs=command_programs(command),
                    exit_code=exit_code)


# -- the labelled sets -----------------------------------------------------------


@pytest.mark.parametrize("case", RUNNERS, ids=lambda p: p.stem)
def test_real_runner_outputs_get_their_label_and_summary(case: Path) -> None:
    d = json.loads(case.read_text(encoding="utf-8"))
    want = d.get("summary") or {}
    got = summarize(d["output"]) or {}
    if d["exit_code"] == 0:
        assert d["label"] == "success"
    else:
        verdict = shell_verdict(f"Exit code {d['exit_code']}\n" + d["output"], d["command"], d["exit_code"])
        assert verdict["class"] == d["label"], (verdict, d["why"])
        got = verdict.get("summary") or got
    for key in ("passed", "failed", "skipped", "errors", "first_error"):
        if key in want and not (key == "errors" and d["command"].startswith(("go ", "make"))):
            assert got.get(key) == want[key], (key, got)
    for name in want.get("failing", []):
        assert any(str(ours) in name or name in str(ours) for ours in got.get("failing", [])), (name, got)


def _claude_transcript_errors(path: Path) -> dict[str, dict[str, Any]]:
    events, _ = parse_claude_transcript(path)
    return {ev["tool"]["call_id"]: ev for ev in events
            if ev["kind"] in ("tool_call_failed", "permission_denied") and ev.get("tool", {}).get("call_id")}


def _hook_errors(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for element in json.loads(path.read_text(encoding="utf-8")):
        payload = element.get("raw_input") if isinstance(element.get("raw_input"), dict) else element
        ev = claude_code.normalise(payload, [])
        if ev["kind"] == "tool_call_failed":
            out[ev["tool"]["call_id"]] = ev
    return out


@pytest.mark.skipif(not FIXTURES.is_dir(), reason=missing(_SHARED and FIXTURES))
def test_every_tool_error_in_the_shared_fixtures_is_labelled_and_classified_as_labelled() -> None:
    by_file: dict[str, dict[str, dict[str, Any]]] = {}
    for case in (c for c in LABELLED if "fixture" in c):
        path = FIXTURES / case["fixture"]
        if case["fixture"] not in by_file:
            by_file[case["fixture"]] = (_claude_transcript_errors(path) if path.suffix == ".jsonl" else _hook_errors(path))
    labelled = {(c["fixture"], c["call_id"]): c for c in LABELLED if "fixture" in c}
    # every error the parsers see in those files has a label (nothing skipped), and no label is stale
    seen = {(f, cid) for f, errs in by_file.items() for cid in errs}
    assert seen == set(labelled)
    wrong = []
    for (f, cid), case in labelled.items():
        got = by_file[f][cid]["outcome"]["class"]
        if got != case["label"]:
            wrong.append((f, cid, case["label"], got, case["why"]))
    assert wrong == []


@pytest.mark.parametrize("case", [c for c in LABELLED if "text" in c], ids=lambda c: f"{c['agent']}-{c['label']}")
def test_agent_tool_messages_get_their_label(case: dict[str, Any]) -> None:
    command = case.get("command")
    if command:
        verdict = shell_verdict(case["text"], command)
    else:
        verdict = classify(case["text"], category=case["category"])
    assert verdict["class"] == case["label"], (verdict, case["why"])


def test_every_class_is_documented_and_old_names_still_read() -> None:
    doc = (Path(__file__).parents[1] / "docs" / "failures.md").read_text(encoding="utf-8")
    for name in CLASSES:
        assert f"`{name}`" in doc, name
    for old, new in LEGACY.items():
        assert canonical(old) == new and new in CLASSES
    for name in ("string_mismatch", "file_not_found", "permission_denied", "timeout", "interrupted", "nonzero_exit"):
        assert canonical(name) == name and name in CLASSES
    assert {c["label"] for c in LABELLED} <= set(CLASSES)


# -- signals in order of trust ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "code", "expected"),
    [
        ("Exit code 127\n(eval):1: command not found: python", "python -m pytest -x", None, "dependency_missing"),
        ("Exit code 127\nbash: ./run.sh: No such file or directory", "./run.sh", None, "file_not_found"),
        ("Exit code 126\nbash: ./run.sh: Permission denied", "./run.sh", None, "permission_denied"),
        ("Exit code 124", "timeout 5 make test", None, "timeout"),
        ("Exit code 130", "npm run dev", None, "interrupted"),
        ("Exit code 1\ncat: notes.txt: No such file or directory", "cat notes.txt", None, "file_not_found"),
        ("Exit code 2\nls: cannot access 'x': No such file or directory", "ls x", None, "file_not_found"),
        ("Exit code 1\nTraceback (most recent call last):\n  File \"a.py\", line 1\nModuleNotFoundError: No module named 'yaml'", "python a.py", None, "dependency_missing"),
        ("Exit code 1\nTraceback (most recent call last):\n  File \"a.py\", line 3, in <module>\nKeyError: 'x'", "python a.py", None, "nonzero_exit"),
        ("Exit code 1\n  File \"a.py\", line 3\n    def f(\n         ^\nSyntaxError: '(' was never closed", "python a.py", None, "syntax_error"),
        ("Exit code 128\nfatal: not a git repository (or any of the parent directories): .git", "git status", None, "git_error"),
        ("Exit code 1\nAuto-merging a.py\nCONFLICT (content): Merge conflict in a.py\nAutomatic merge failed; fix conflicts and then commit the result.", "git merge feature", None, "merge_conflict"),
        ("Exit code 128\nfatal: unable to access 'https://example.invalid/x.git/': Could not resolve host: example.invalid", "git fetch", None, "network_error"),
        ("Exit code 6\ncurl: (6) Could not resolve host: example.invalid", "curl https://example.invalid", None, "network_error"),
        ("Exit code 1\nERROR: Could not find a version that satisfies the requirement nopkg\nERROR: No matching distribution found for nopkg", "pip install nopkg", None, "dependency_missing"),
        ("Exit code 1", "grep -r needle src", None, "nonzero_exit"),
        ("Exit code 1\nsomething broke", "make", None, "build_error"),
        ("Exit code 3", "exit 3", None, "nonzero_exit"),
        ("boom", "echo", None, "unknown"),
        ("Process exited with code 2\nOutput:\nerror: no such thing", "exit 2", None, "nonzero_exit"),
        ("", "false", 1, "nonzero_exit"),
    ],
)
def test_shell_signals(text: str, command: str, code: int | None, expected: str) -> None:
    assert shell_verdict(text, command, code)["class"] == expected


def test_structured_hints_win_and_weak_ones_do_not() -> None:
    text = "Exit code 1\nFAILED tests/t.py::test_x\n1 failed in 0.1s"
    assert classify(text, category="shell", command="pytest", hint="interrupted")["class"] == "interrupted"
    assert classify(text, category="shell", command="pytest", hint="nonzero_exit",
                    command_category="test")["class"] == "test_failure"
    ev = {"tool": {"name": "Bash", "category": "shell"}, "content": {"error": "x", "command": "ls"},
          "attrs": {"interrupted": True}, "outcome": {"status": "failure"}}
    assert classify_event(ev)["class"] == "interrupted"
    ev = {"tool": {"name": "Bash", "category": "shell"}, "content": {"error": "Exit code 1\nno"},
          "outcome": {"status": "denied"}}
    assert classify_event(ev)["class"] == "policy_denied"


def test_summaries_read_each_runner_and_checker_format() -> None:
    cases = {
        "FAILED tests/a.py::test_x - assert 1\n==== 1 failed, 4 passed, 2 skipped in 0.31s ====\n":
            ("pytest", {"failed": 1, "passed": 4, "skipped": 2}),
        "Ran 4 tests in 0.001s\n\nFAILED (failures=1, errors=1)\n": ("unittest", {"failed": 1, "errors": 1, "passed": 2}),
        "Tests:       1 failed, 2 passed, 3 total\n": ("jest", {"failed": 1, "passed": 2}),
        "      Tests  1 failed | 2 passed (3)\n": ("vitest", {"failed": 1, "passed": 2}),
        "  2 passing (4ms)\n  1 failing\n": ("mocha", {"passed": 2, "failed": 1}),
        "--- FAIL: TestX (0.00s)\nFAIL\nFAIL\tpkg\t0.01s\n": ("go test", {"failed": 1}),
        "test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s\n":
            ("cargo test", {"passed": 2, "failed": 1, "skipped": 1}),
        "3 examples, 1 failure, 1 pending\n": ("rspec", {"failed": 1, "skipped": 1, "passed": 1}),
        "Tests: 5, Assertions: 9, Failures: 1, Errors: 1, Skipped: 1.\n": ("phpunit", {"failed": 1, "errors": 1, "passed": 2}),
        "Failed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3, Duration: 45 ms\n":
            ("dotnet test", {"failed": 1, "passed": 2}),
        "[ERROR] Tests run: 5, Failures: 1, Errors: 0, Skipped: 1\n[INFO] BUILD FAILURE\n": ("maven", {"failed": 1, "passed": 3}),
        "5 tests completed, 1 failed, 1 skipped\n": ("gradle", {"failed": 1, "passed": 3}),
        "     Summary [   0.010s] 3 tests run: 2 passed, 1 failed, 0 skipped\n": ("cargo test", {"passed": 2, "failed": 1}),
    }
    for text, (runner, counts) in cases.items():
        got = summarize(text)
        assert got is not None and got["runner"] == runner, (text, got)
        for k, v in counts.items():
            assert got.get(k) == v, (text, k, got)
    checks = {
        "src/a.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.\n": ("tsc", "type_error", "src/a.ts:3"),
        "a.py:3: error: Incompatible types  [assignment]\nFound 1 error in 1 file (checked 2 source files)\n": ("mypy", "type_error", "a.py:3"),
        "error[E0308]: mismatched types\n --> src/main.rs:2:18\n\nerror: could not compile `x` (bin \"x\") due to 1 previous error\n": ("rustc", "compile_error", "src/main.rs:2"),
        "x.c:3:5: error: 'y' undeclared (first use in this function)\n": ("cc", "compile_error", "x.c:3"),
        "/p/a.js\n  1:7  error  'x' is assigned a value but never used  no-unused-vars\n\n✖ 1 problem (1 error, 0 warnings)\n": ("eslint", "lint_error", "/p/a.js:1"),
        "a.py:1:8: F401 [*] `os` imported but unused\nFound 1 error.\n": ("ruff", "lint_error", "a.py:1"),
    }
    for text, (checker, klass, first) in checks.items():
        got = summarize(text)
        assert got is not None and (got["checker"], got["class"], got.get("first_error")) == (checker, klass, first), got
    assert describe(summarize(cases_text := "FAILED t.py::a - x\nFAILED t.py::b - y\n== 2 failed, 210 passed in 3s ==\n")) \
        == "2 of 212 tests failed: t.py::a, t.py::b", cases_text


# -- properties ---------------------------------------------------------------------------

_WORDS = ("timeout", "timed_out", "not_found", "no_such_file", "permission_denied", "interrupted", "cancelled",
          "denied", "conflict", "syntax", "network", "connection_refused", "module_not_found", "merge")
_VERDICTS = [
    ("pytest", "FAILED tests/test_{w}.py::test_{w} - AssertionError\n===== 1 failed, 3 passed in 0.20s =====", "test_failure"),
    ("cat {w}.txt", "cat: {w}.txt: No such file or directory", "file_not_found"),
    ("python {w}.py", "Traceback (most recent call last):\n  File \"{w}.py\", line 1, in <module>\nModuleNotFoundError: No module named 'yaml'", "dependency_missing"),
    ("npx tsc", "src/{w}.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'.", "type_error"),
    ("cargo test", "test tests::{w} ... FAILED\n\ntest result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s", "test_failure"),
    ("go vet ./...", "# example/{w}\nvet: ./{w}.go:3:2: unreachable code", "lint_error"),
]
# Output that says nothing about the verdict: progress and log lines in tools' words.
_NEUTRAL = ("INFO", "DEBUG", "compiling", "downloading", "step", "done", "ok", "building", "cache", "hit",
            "worker", "started", "42", "0.31s", "src/app/main.py", "[1/3]", "=>", "v1.2.3", "listening", "on",
            "port", "8080", "loaded", "config", "from", "./.env.example", "warming", "up")
_UNRELATED = st.lists(
    st.lists(st.sampled_from(_NEUTRAL), min_size=1, max_size=8).map(" ".join), min_size=0, max_size=40,
).map("\n".join)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_VERDICTS), st.sampled_from(_WORDS), _UNRELATED, _UNRELATED)
def test_class_ignores_names_and_unrelated_output(verdict: tuple[str, str, str], word: str, before: str,
                                                   after: str) -> None:
    command, output, expected = verdict
    command = command.format(w=word)
    output = output.format(w=word)
    assert shell_verdict("Exit code 1\n" + output, command)["class"] == expected
    noisy = "Exit code 1\n" + (before + "\n" if before else "") + output + ("\n" + after if after else "")
    assert shell_verdict(noisy, command)["class"] == expected
    # the command echoed into the output (set -x) changes nothing either
    assert shell_verdict("Exit code 1\n+ " + command + " # " + word.replace("_", " ") + "\n" + output, command)["class"] == expected


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.sampled_from(["shell", "file_edit", "file_read", "web", "mcp", "other", ""]),
       st.one_of(st.none(), st.integers(-300, 300)), st.one_of(st.none(), st.text(max_size=40)))
def test_classify_is_total(text: str, category: str, code: int | None, command: str | None) -> None:
    verdict = classify(text, text[::-1], category=category, command=command, exit_code=code,
                       programs=command_programs(command) if command else ())
    assert verdict["class"] in CLASSES
    assert verdict["exit_code"] is None or isinstance(verdict["exit_code"], int)
    assert isinstance(verdict["evidence"], str)


# -- the benchmark ------------------------------------------------------------------------------


def test_bench_classify_reports_accuracy_confusion_and_cost(tmp_path: Path) -> None:
    """``agentlog bench classify`` scores every labelled case through the real capture path
    (and the replaced keyword classifier on the same cases) and times the classifier."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "agentlog", "bench", "classify", "--runs", "20", "--hook-rounds", "2",
                        "--out", str(tmp_path), "--json"], capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[1])
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    acc = result["accuracy"]
    runners = len([p for p in RUNNERS if json.loads(p.read_text(encoding="utf-8"))["exit_code"] != 0])
    assert acc["n"] == len([c for c in LABELLED if "text" in c or FIXTURES.is_dir()]) + runners
    assert acc["agree"] == sum(c["label"] == c["class"] for c in result["cases"])
    assert sum(c["count"] for c in acc["confusion"]) == acc["n"]
    assert {c["label"] for c in result["cases"]} <= set(CLASSES)
    assert [c["shape"] for c in result["cost"]] == ["pytest failure", "traceback after a log", "log, no verdict",
                                                    "edit echoing its old text"]
    assert all(c["p50_us"] > 0 and c["class"] in CLASSES for c in result["cost"])
    assert [h["variant"] for h in result["hook"]] == ["call finished", "call failed (classified)"]
    assert all(h["runs"] == 2 and h["p50_ms"] > 0 for h in result["hook"])
    assert (tmp_path / "classify.md").read_text(encoding="utf-8").startswith("# agentlog bench classify")
    bad = subprocess.run([sys.executable, "-m", "agentlog", "bench", "classify", "--data", str(tmp_path / "none"),
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
