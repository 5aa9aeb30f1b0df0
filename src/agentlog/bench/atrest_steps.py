"""The rows of ``agentlog bench share`` for encryption at rest (issue 34): the same work on a data
root without it and on one with it (``keys init --at-rest --passphrase``), as whole processes:

- the Python hook (``python -I -S …/_hook.py claude-code``), ``hooks`` runs of a ~1.5 KB
  PostToolUse payload each: median and p95 ms per hook;
- ``agentlog import`` of a generated Claude Code transcript (the bulk log writer: every frame
  sealed) and then ``agentlog ingest`` of its frames (every frame opened into the store): events/s.

The unlocked key and the derived stores go to a scratch directory under ``/dev/shm`` where there
is one (the memory-backed storage they use for real). Nothing passes or fails on time; the goal
(at most 10 % slower) is read from the numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Callable

from agentlog.capture.command import hook_argv
from agentlog.core import AgentlogError

PASSPHRASE = "bench passphrase, not a secret"


class AtRestBenchFailed(AgentlogError):
    """A process of the benchmark failed (the message has its command and standard error)."""


def _run(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=3600)
    secs = time.perf_counter() - t0
    if r.returncode != 0:
        raise AtRestBenchFailed(f"{' '.join(argv[-3:])} failed ({r.returncode}): {r.stderr[-2000:]!r}")
    return secs


def _payload(i: int) -> bytes:
    out = ("collected 12 items\n\ntests/test_parser.py ............ [100%]\n" * 20)[:420]
    return json.dumps({
        "session_id": "5e7a3d10-34aa-4c2b-9d1e-0b5c6a7d8e9f", "cwd": "/home/dev/project", "permission_mode": "default",
        "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": f"toolu_bench_{i:08d}",
        "tool_input": {"command": "python -m pytest tests/test_parser.py -q", "description": "Run the parser tests"},
        "tool_response": {"stdout": out, "stderr": "", "interrupted": False, "isImage": False},
    }).encode()


def _transcript(path: str, events: int) -> None:
    """A Claude Code transcript of about ``events`` events (a prompt, then Bash calls and results)."""
    sid = str(uuid.UUID(int=3403))
    parent: str | None = None
    t = 1_767_225_600.0
    with open(path, "w", encoding="utf-8") as fh:
        def rec(kind: str, message: dict[str, Any]) -> None:
            nonlocal parent, t
            t += 0.5
            u = str(uuid.uuid4())
            fh.write(json.dumps({"parentUuid": parent, "isSidechain": False, "userType": "external",
                                 "cwd": "/home/bench/proj", "sessionId": sid, "version": "2.0.76", "type": kind,
                                 "message": message, "uuid": u,
                                 "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".000Z"}) + "\n")
            parent = u

        n = i = 0
        while n < events:
            if i % 25 == 0:
                rec("user", {"role": "user", "content": f"Step {i}: fix the parser and run the tests"})
                n += 1
            tid = f"toolu_{i:020d}"
            use = {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": f"pytest -q tests/t{i % 40}.py"}}
            rec("assistant", {"model": "claude-opus-4-5", "id": f"msg_{i}", "type": "message", "role": "assistant",
                              "content": [{"type": "text", "text": f"Trying change {i}."}, use]})
            rec("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                                      "content": "3 passed in 0.1s\n" * 8, "is_error": False}]})
            n += 3
            i += 1


def _stats(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"median": round(statistics.median(s), 3), "p95": round(s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))], 3),
            "min": round(s[0], 3), "runs": len(s)}


def run_at_rest_bench(*, hooks: int, runs: int, events: int, note: Callable[[str], None]) -> dict[str, Any]:
    """Both roots' rows, and how much slower the one with encryption at rest is (%). The two
    roots take turns (a hook each, then an import and an ingest each per run), so that a machine
    whose load changes during the benchmark weighs on both alike."""
    agentlog = [sys.executable, "-m", "agentlog"]
    modes = ("plain", "at rest")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="agentlog-bench-atrest-") as tmp, \
            tempfile.TemporaryDirectory(prefix="agentlog-bench-runtime-", dir=shm) as runtime:
        transcript = os.path.join(tmp, "t.jsonl")
        _transcript(transcript, events)

        def env_of(root: str) -> dict[str, str]:
            return {**os.environ, "AGENTLOG_HOME": root, "AGENTLOG_RUNTIME_DIR": runtime}

        def make(root: str, at_rest: bool) -> dict[str, str]:
            env = env_of(root)
            if at_rest:
                _run([*agentlog, "keys", "init", "--at-rest", "--passphrase"], env, (PASSPHRASE + "\n").encode())
            return env

        envs = [make(os.path.join(tmp, m.replace(" ", "-")), m == "at rest") for m in modes]
        argv = hook_argv("claude-code")
        ms: list[list[float]] = [[], []]
        for i in range(hooks):
            if i % 50 == 0:
                note(f"hooks {i + 1}/{hooks} (each root in turn)")
            for k in (0, 1):
                ms[k].append(_run(argv, envs[k], _payload(i)) * 1000)
        note("native hooks: a daemon on each root, then the same hooks through the C client")
        native, native_missing = _native_hooks(envs, hooks, note)
        imports: list[list[float]] = [[], []]
        ingests: list[list[float]] = [[], []]
        counts = [0, 0]
        for r in range(runs):
            note(f"import and ingest, run {r + 1}/{runs} (each root in turn)")
            for k, mode in enumerate(modes):
                env = make(os.path.join(tmp, f"{mode.replace(' ', '-')}-run{r}"), mode == "at rest")
                imports[k].append(_run([*agentlog, "import", "claude-code", transcript], env))
                ingests[k].append(_run([*agentlog, "ingest"], env))
                if not counts[k]:
                    out = subprocess.run([*agentlog, "sql", "select count(*) from events", "--json"], env=env,
                                         capture_output=True, text=True, timeout=600)
                    counts[k] = int(json.loads(out.stdout)["rows"][0][0]) if out.returncode == 0 else 0
                if mode == "at rest":
                    _run([*agentlog, "keys", "lock"], env)
        _run([*agentlog, "keys", "lock"], envs[1])
        shutil.rmtree(runtime, ignore_errors=True)
    rows: list[dict[str, Any]] = [{"mode": mode, "hook_ms": _stats(ms[k]), "events": counts[k],
             "native_hook_ms": _stats(native[k]) if native else None,
             "import_events_per_s": _stats([counts[k] / x for x in imports[k]]) if counts[k] else None,
             "ingest_events_per_s": _stats([counts[k] / x for x in ingests[k]]) if counts[k] else None}
            for k, mode in enumerate(modes)]
    plain, sealed = rows

    def slower(key: str, per_s: bool) -> float | None:
        a, b = plain.get(key), sealed.get(key)
        if not a or not b:
            return None
        x, y = float(a["median"]), float(b["median"])
        return round(((x / y) - 1) * 100 if per_s else ((y / x) - 1) * 100, 1)

    return {"rows": rows, "runtime_on_shm": shm is not None, "load_average": list(os.getloadavg()),
            "native_missing": native_missing,
            "slower_pct": {"hook": slower("hook_ms", False), "native_hook": slower("native_hook_ms", False),
                           "import": slower("import_events_per_s", True),
                           "ingest": slower("ingest_events_per_s", True)}}


def _native_hooks(envs: list[dict[str, str]], hooks: int,
                  note: Callable[[str], None]) -> tuple[list[list[float]] | None, str | None]:
    """``hooks`` runs of the native client on each root in turn, each root's daemon serving it
    (with encryption at rest on, the daemon seals what the client hands it): the ms of each,
    or (None, why) when no client could be built."""
    from agentlog.api import build_native_hook
    from agentlog.bench.common import start_daemon, stop_daemon

    clients: list[str] = []
    for env in envs:
        built = build_native_hook(env["AGENTLOG_HOME"], environ=env)
        if not built.path:
            return None, built.reason
        clients.append(built.path)
    daemons = []
    try:
        for env in envs:
            daemons.append(start_daemon(env["AGENTLOG_HOME"], env))
        ms: list[list[float]] = [[], []]
        for i in range(hooks):
            if i % 50 == 0:
                note(f"native hooks {i + 1}/{hooks} (each root in turn)")
            for k in (0, 1):
                ms[k].append(_run([clients[k], "claude-code"], envs[k], _payload(hooks + i)) * 1000)
        return ms, None
    finally:
        for d in daemons:
            stop_daemon(d)


def markdown(result: dict[str, Any]) -> str:
    out = ["", "## Encryption at rest", "", "Whole processes; median (p95). Slower = how much the root with "
           "encryption at rest is slower than the one without (goal: at most 10 %).", "",
           "| root | Python hook ms | native hook ms | import events/s | ingest events/s |", "|---|---|---|---|---|"]
    for r in result["rows"]:
        h, nh = r["hook_ms"], r.get("native_hook_ms")
        imp, ing = r["import_events_per_s"] or {}, r["ingest_events_per_s"] or {}
        native = f"{nh['median']:.2f} ({nh['p95']:.2f})" if nh else "—"
        out.append(f"| {r['mode']} | {h['median']:.1f} ({h['p95']:.1f}) | {native} | {imp.get('median', 0):,.0f} "
                   f"| {ing.get('median', 0):,.0f} |")
    s = result["slower_pct"]
    out.append(f"| slower | {s['hook']} % | {s.get('native_hook')} % | {s['import']} % | {s['ingest']} % |")
    if result.get("native_missing"):
        out += ["", f"No native rows: {result['native_missing']}."]
    else:
        out += ["", "Native hook: the C client, its root's `agentlog daemon run` serving it (the daemon seals "
                "what it is handed when encryption at rest is on); the two roots' daemons run side by side."]
    return "\n".join(out) + "\n"


__all__ = ["AtRestBenchFailed", "markdown", "run_at_rest_bench"]
