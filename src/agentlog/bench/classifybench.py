"""``agentlog bench classify``: the failure classifier's accuracy on the labelled set, and its cost.

Accuracy: every case of the labelled set (tests/data/failures: the tool errors of
shared/fixtures labelled by hand, the agents' own tool messages, real runner
outputs) goes through the real capture path (``capture_hook_payload``): a
hook payload as recorded, or, for a transcript's tool error and a runner's
output, the Claude Code ``PostToolUseFailure`` payload carrying the same
tool, input and error text. The class the event gets is compared with the label;
the confusion table lists every (label, class) pair. The same cases are also
classified by the keyword classifier this one replaced (kept here, as it was,
as the baseline), so the two numbers come from one run on one machine.

Cost: ``classify_failure_event`` on 30 KB outputs of several shapes (a
failing pytest run, a traceback, a long log with no verdict, an edit error
echoing a long old text), median/p95/p99 over many calls, in-process: what a
hook adds to its run when a call failed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from agentlog import api
from agentlog.bench.common import describe, machine

# -- the baseline: the keyword classifier of stops ≤ 39 (first rule wins over the whole text) --

_OLD_RULES = (
    ("string_mismatch", ("string to replace not found", "old_string")),
    ("file_not_found", ("no such file", "not found", "enoent", "does not exist")),
    ("permission_denied", ("permission denied", "eacces", "eperm")),
    ("timeout", ("timed out", "timeout")),
    ("interrupted", ("interrupted", "cancelled", "canceled", "aborted")),
)


def baseline_class(text: str, exit_code: int | None) -> str:
    low = text.lower()
    for klass, needles in _OLD_RULES:
        if any(n in low for n in needles):
            return klass
    return "nonzero_exit" if exit_code or "non-zero" in low or "nonzero" in low else "unknown"


# -- the labelled set as hook payloads ------------------------------------------------------


def find_data(start: str | None = None) -> Path | None:
    """tests/data/failures of the checkout holding ``start`` (default: the working directory)."""
    here = Path(start or os.getcwd()).resolve()
    for p in [here, *here.parents, *Path(__file__).resolve().parents]:
        if (p / "tests" / "data" / "failures" / "labelled.json").is_file():
            return p / "tests" / "data" / "failures"
    return None


def _failure_payload(tool: str, tool_input: dict[str, Any], error: str, call_id: str) -> dict[str, Any]:
    return {"session_id": "bench-classify", "hook_event_name": "PostToolUseFailure", "tool_name": tool,
            "tool_input": tool_input, "tool_use_id": call_id, "error": error, "cwd": "/nonexistent/bench"}


def _transcript_errors(path: Path) -> dict[str, tuple[str, dict[str, Any], str]]:
    """Tool-use id → (tool, input, error text) of a Claude Code transcript's failed results."""
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    out: dict[str, tuple[str, dict[str, Any], str]] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            msg = rec.get("message") if isinstance(rec, dict) else None
            blocks = msg.get("content") if isinstance(msg, dict) else None
            for b in blocks if isinstance(blocks, list) else ():
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "tool_use":
                    given = b.get("input")
                    uses[str(b.get("id"))] = (str(b.get("name")), given if isinstance(given, dict) else {})
                elif b.get("type") == "tool_result" and b.get("is_error"):
                    content = b.get("content")
                    text = content if isinstance(content, str) else "\n".join(
                        str(x.get("text", "")) for x in content or [] if isinstance(x, dict))
                    tool, tool_input = uses.get(str(b.get("tool_use_id")), ("unknown", {}))
                    out[str(b.get("tool_use_id"))] = (tool, tool_input, text)
    return out


_TOOL_NAMES = {"shell": "Bash", "file_edit": "Edit", "file_read": "Read", "web": "WebFetch", "mcp": "mcp__x__y"}


def cases(data: Path, fixtures: Path | None) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(case id, label, Claude Code hook payload) of every labelled case."""
    cache: dict[str, Any] = {}
    for i, c in enumerate(json.loads((data / "labelled.json").read_text(encoding="utf-8"))):
        if "fixture" in c:
            if fixtures is None:
                continue
            path = fixtures / c["fixture"]
            if path.suffix == ".jsonl":
                errors = cache.setdefault(c["fixture"], _transcript_errors(path))
                tool, tool_input, text = errors[c["call_id"]]
                payload = _failure_payload(tool, tool_input, text, c["call_id"])
            else:
                elements = cache.setdefault(c["fixture"], json.loads(path.read_text(encoding="utf-8")))
                payload = next(e.get("raw_input", e) for e in elements if e.get("tool_use_id") == c["call_id"])
            yield f"fixture:{c['fixture'].split('/')[-1][:40]}:{c['call_id'][-6:]}", c["label"], payload
        else:
            tool = c["tool"] if c["agent"] == "claude_code" else _TOOL_NAMES.get(c["category"], c["tool"])
            tool_input = {"command": c["command"]} if c.get("command") else {}
            yield f"message:{c['agent']}:{i}", c["label"], _failure_payload(tool, tool_input, c["text"], f"m{i}")
    for path in sorted((data / "runners").glob("*.json")):
        d = json.loads(path.read_text(encoding="utf-8"))
        if d["exit_code"] == 0:
            continue
        error = f"Exit code {d['exit_code']}\n{d['output']}"
        yield f"runner:{path.stem}", d["label"], _failure_payload("Bash", {"command": d["command"]}, error, path.stem)


def classify_payload(payload: dict[str, Any]) -> tuple[str, str, int | None]:
    """(class, evidence, exit code) the capture path gives a payload."""
    data = json.dumps(payload).encode()
    event = api.capture_hook_payload("claude-code", data, len(data), []).event
    outcome = event.get("outcome") or {}
    return str(outcome.get("class")), str((event.get("attrs") or {}).get("failure_evidence", "")), outcome.get("exit_code")


def accuracy(data: Path, fixtures: Path | None) -> dict[str, Any]:
    rows = []
    for case_id, label, payload in cases(data, fixtures):
        got, evidence, code = classify_payload(payload)
        old = baseline_class(str(payload.get("error", "")), code)
        rows.append({"case": case_id, "label": label, "class": got, "evidence": evidence, "baseline": old})
    n = len(rows)
    right = sum(r["label"] == r["class"] for r in rows)
    old_right = sum(r["label"] == r["baseline"] for r in rows)
    confusion: dict[tuple[str, str], int] = {}
    for r in rows:
        confusion[(r["label"], r["class"])] = confusion.get((r["label"], r["class"]), 0) + 1
    return {"cases": rows, "n": n, "agree": right, "accuracy": right / n if n else 0.0,
            "baseline_agree": old_right, "baseline_accuracy": old_right / n if n else 0.0,
            "confusion": [{"label": k[0], "class": k[1], "count": v} for k, v in sorted(confusion.items())]}


# -- cost ------------------------------------------------------------------------------------


def _shapes(size: int) -> dict[str, dict[str, Any]]:
    log = "".join(f"[{i:05d}] INFO worker 3 processed batch {i} in 0.{i % 97:02d}s cache hit\n" for i in range(size // 55))
    tests = "".join(f"tests/test_mod{i // 40}.py::test_case_{i} PASSED\n" for i in range(size // 45))
    pytest_out = ("Exit code 1\n============================= test session starts ==============================\n"
                  + tests + "FAILED tests/test_net.py::test_connect_timeout - AssertionError\n"
                  "==== 1 failed, 611 passed in 12.31s ====\n")
    trace = ("Exit code 1\n" + log + "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n"
             "ModuleNotFoundError: No module named 'yaml'\n")
    old = "x = compute(a, b)\n" * (size // 18)
    shell = {"name": "Bash", "category": "shell"}
    return {
        "pytest failure": {"tool": shell, "content": {"command": "pytest -q", "error": pytest_out[:size]},
                           "attrs": {"command_category": "test"}, "outcome": {"status": "failure", "exit_code": 1}},
        "traceback after a log": {"tool": shell, "content": {"command": "python app.py", "error": trace[-size:]},
                                  "attrs": {"command_category": "run"}, "outcome": {"status": "failure"}},
        "log, no verdict": {"tool": shell, "content": {"command": "./deploy.sh", "error": "Exit code 3\n" + log[:size]},
                            "attrs": {"command_category": "run"}, "outcome": {"status": "failure"}},
        "edit echoing its old text": {"tool": {"name": "Edit", "category": "file_edit"},
                                      "content": {"error": "String to replace not found in file.\nString: " + old[:size]},
                                      "outcome": {"status": "failure"}},
    }


def cost(size: int, runs: int, progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    out = []
    shapes = _shapes(size)
    total = runs * len(shapes)
    done = 0
    for name, ev in shapes.items():
        text = ev["content"].get("error", "")
        times = []
        for _ in range(runs):
            t0 = time.perf_counter_ns()
            got = api.classify_failure_event(ev)
            times.append((time.perf_counter_ns() - t0) / 1000)
            done += 1
        if progress:
            progress(done, total)
        stats = describe(times)
        old_times = []
        for _ in range(max(10, runs // 4)):
            t0 = time.perf_counter_ns()
            baseline_class(text, None)
            old_times.append((time.perf_counter_ns() - t0) / 1000)
        out.append({"shape": name, "bytes": len(text.encode()), "class": got["class"],
                    "p50_us": round(stats["median"], 1), "p95_us": round(stats["p95"], 1), "p99_us": round(stats["p99"], 1),
                    "baseline_p50_us": round(describe(old_times)["median"], 1)})
    return out


def hook_cost(size: int, rounds: int, progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """The whole hook process (the command installed hooks run) for one Claude Code Bash call
    that finished and one that failed, each with a ``size``-byte output, interleaved round
    by round: what classifying a failure (importing the classifier included) adds to a hook."""
    import subprocess
    import tempfile

    from agentlog.capture.command import hook_argv

    log = "".join(f"[{i:05d}] INFO worker 3 processed batch {i} in 0.{i % 97:02d}s cache hit\n"
                  for i in range(size // 55))[:size]
    base = {"session_id": "bench-classify-hook", "transcript_path": "/nonexistent/t.jsonl", "cwd": "/nonexistent",
            "tool_name": "Bash", "tool_input": {"command": "./deploy.sh"}, "tool_use_id": "toolu_bench"}
    payloads = {
        "call finished": dict(base, hook_event_name="PostToolUse",
                              tool_response={"stdout": log, "stderr": "", "interrupted": False}),
        "call failed (classified)": dict(base, hook_event_name="PostToolUseFailure", error="Exit code 3\n" + log),
    }
    data = {k: json.dumps(v).encode() for k, v in payloads.items()}
    times: dict[str, list[float]] = {k: [] for k in payloads}
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-classify-") as home:
        env = dict(os.environ, AGENTLOG_HOME=home)
        argv = hook_argv("claude-code")
        for r in range(rounds + 3):
            for name, payload in data.items():
                t0 = time.perf_counter_ns()
                subprocess.run(argv, input=payload, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=False, timeout=60)
                if r >= 3:  # warm-up rounds not counted
                    times[name].append((time.perf_counter_ns() - t0) / 1e6)
            if progress:
                progress(r + 1, rounds + 3)
    out = []
    for name, xs in times.items():
        st = describe(xs)
        out.append({"variant": name, "runs": len(xs), "p50_ms": round(st["median"], 2), "p95_ms": round(st["p95"], 2),
                    "p99_ms": round(st["p99"], 2)})
    return out


def run_classify_bench(size: int = 30_000, runs: int = 2000, data_dir: str | None = None,
                       progress: Callable[[int, int], None] | None = None, hook_rounds: int = 0) -> dict[str, Any]:
    """The result object: accuracy (with the baseline and a confusion table) and cost."""
    data = Path(data_dir) if data_dir else find_data()
    if data is None:
        raise FileNotFoundError("tests/data/failures not found: run from an agentlog checkout or pass --data")
    from agentlog.operations.fixtures import shared_dir

    shared = shared_dir()
    acc = accuracy(data, shared / "fixtures" if shared is not None else None)
    costs = cost(size, runs, progress)
    wrong = [r for r in acc["cases"] if r["label"] != r["class"]]
    tables = [
        {"title": "Accuracy on the labelled set", "columns": ["classifier", "cases", "agree", "accuracy"],
         "rows": [["capture.failures (this build)", acc["n"], acc["agree"], f"{acc['accuracy']:.1%}"],
                  ["keyword classifier it replaced", acc["n"], acc["baseline_agree"], f"{acc['baseline_accuracy']:.1%}"]],
         "note": "Labelled set: tests/data/failures (shared/fixtures' tool errors labelled by hand, agents' messages, "
                 "real runner outputs). It is the set the classifier was built against; accuracy on errors it has not "
                 "seen is measured outside the project."},
        {"title": "Confusion (label → class, every pair)", "columns": ["label", "class", "count"],
         "rows": [[c["label"], c["class"], c["count"]] for c in acc["confusion"]]},
        {"title": "Disagreements", "columns": ["case", "label", "class", "evidence"],
         "rows": [[r["case"], r["label"], r["class"], r["evidence"]] for r in wrong] or [["(none)", "", "", ""]]},
        {"title": f"Cost per failed call ({size:,} B outputs, {runs} calls each, in process)",
         "columns": ["shape", "bytes", "class", "p50 µs", "p95 µs", "p99 µs", "keyword classifier p50 µs"],
         "rows": [[c["shape"], c["bytes"], c["class"], c["p50_us"], c["p95_us"], c["p99_us"], c["baseline_p50_us"]]
                  for c in costs]},
    ]
    hooks = hook_cost(size, hook_rounds, progress) if hook_rounds else []
    if hooks:
        tables.append({"title": f"The hook process, a call with a {size:,} B output ({hook_rounds} rounds, interleaved)",
                       "columns": ["variant", "runs", "p50 ms", "p95 ms", "p99 ms"],
                       "rows": [[h["variant"], h["runs"], h["p50_ms"], h["p95_ms"], h["p99_ms"]] for h in hooks]})
    return {"machine": machine(), "accuracy": {k: v for k, v in acc.items() if k != "cases"}, "cases": acc["cases"],
            "cost": costs, "hook": hooks, "tables": tables}
