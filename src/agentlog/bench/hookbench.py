"""``agentlog bench hook``: what a hook costs the agent, measured as the agent feels it.

Every timed run is a whole process started the way an agent starts the
installed hook (argv from ``capture.command``), with a ~1.5 KB PostToolUse
payload on stdin, into sessions already holding 1k, 10k and 50k frames of
~1.5 KB. Each round runs every variant once, in a rotating order, beside two
baselines: ``/usr/bin/true`` (process start alone) and the interpreter floor
(the same interpreter and flags running an empty script). Reported: median,
p95, p99 of wall time, and the hook's cost above the floor (medians of the
per-round differences, which cancels most machine noise).

With ``native`` (the default) the native client (``agentlog-hook``, built here with
the system compiler) runs beside them, into the same sessions, with a real
``agentlog daemon run`` answering on the data root's socket; the daemon's own time
per event (request read → answer sent, ``state/hook-server.json``) is reported too.
Without a compiler the native rows say why they are missing.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from agentlog.capture.command import hook_argv, interpreter_argv
from agentlog.core.fastjson import dumps_bytes
from agentlog.api import SessionLog, verify_log
from agentlog.bench.common import describe, machine, start_daemon, stop_daemon, write_results

__all__ = ["run_hook_bench", "write_results", "bench_payload", "build_session"]

_OUTPUT = ("collected 12 items\n\ntests/test_parser.py ............ [100%]\n" * 20)[:420]


def bench_payload(session_id: str, i: int = 0) -> bytes:
    """A realistic Claude Code PostToolUse (Bash) payload of ~1.5 KB."""
    return json.dumps(
        {
            "session_id": session_id,
            "transcript_path": f"/home/dev/.claude/projects/-home-dev-project/{session_id}.jsonl",
            "cwd": "/home/dev/project",
            "permission_mode": "default",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "python -m pytest tests/test_parser.py -q", "description": "Run the parser tests"},
            "tool_response": {"stdout": _OUTPUT, "stderr": "", "interrupted": False, "isImage": False},
            "tool_use_id": f"toolu_bench_{i:08d}",
        }
    ).encode()


def _event_json(session_id: str, i: int) -> bytes:
    payload = json.loads(bench_payload(session_id, i))
    now = time.time_ns() // 1000
    return dumps_bytes(
        {
            "event_id": f"01900000-0000-7000-8000-{i:012d}",
            "schema_version": 1,
            "kind": "tool_call_finished",
            "provider": "claude_code",
            "provider_event_name": "PostToolUse",
            "observed_at": now,
            "captured_at": now,
            "capture_mode": "full",
            "agentlog_version": "bench",
            "provider_session_id": session_id,
            "tool": {"name": "Bash", "category": "shell", "call_id": payload["tool_use_id"]},
            "outcome": {"status": "success"},
            "attrs": {"command_category": "test"},
            "content": {"command": payload["tool_input"]["command"]},
            "raw": payload,
        }
    )


def build_session(root: str, session_id: str, frames: int) -> str:
    """A session log of ``frames`` ~1.5 KB frames (written in batches, relaxed)."""
    log = SessionLog(root, "claude_code", session_id, session_id=session_id, durability="relaxed")
    batch = 1000
    for start in range(0, frames, batch):
        log.append([_event_json(session_id, i) for i in range(start, min(frames, start + batch))])
    return log.path


def _time(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter_ns()
    r = subprocess.run(argv, input=stdin, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter_ns() - t0) / 1e6
    if r.returncode != 0 or r.stderr:
        raise RuntimeError(f"{argv[-1]} failed: rc={r.returncode} stderr={r.stderr[:300]!r}")
    return elapsed


def run_hook_bench(
    *,
    runs: int = 200,
    sizes: list[int] | None = None,
    concurrent: int = 50,
    concurrent_rounds: int = 10,
    durability: str = "strict",
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    native: bool = True,
) -> dict[str, Any]:
    """Time the hook as a whole process (see the module docstring).

    ``should_stop`` is asked after every round (from the fifth on): when it
    says yes the rounds end early and the result records ``runs_done`` and
    ``capped``.
    """
    sizes = sizes or [1000, 10000, 50000]
    tmp = tempfile.mkdtemp(prefix="agentlog-bench-hook-")
    daemon: subprocess.Popen[bytes] | None = None
    try:
        root = os.path.join(tmp, "home")
        env = {**os.environ, "AGENTLOG_HOME": root, "AGENTLOG_DURABILITY": durability}
        env.pop("AGENTLOG_CAPTURE_MODE", None)
        empty = os.path.join(tmp, "empty.py")
        open(empty, "w").close()
        sessions = {n: f"bench-{n}" for n in sizes}
        frame_bytes: dict[int, float] = {}
        for n, sid in sessions.items():
            path = build_session(root, sid, n)
            frame_bytes[n] = os.path.getsize(path) / n
        variants: list[tuple[str, list[str], bytes]] = [
            ("/usr/bin/true", ["/usr/bin/true"], b""),
            ("interpreter floor", [*interpreter_argv(), empty], b""),
        ]
        for n, sid in sessions.items():
            variants.append((f"hook, {n:,}-frame session", hook_argv("claude-code"), bench_payload(sid)))
        client, native_missing = None, None
        if native:
            client, native_missing = _native_client(root, env)
        if client is not None:
            daemon = start_daemon(root, env)
            for n, sid in sessions.items():
                variants.append((f"native hook, {n:,}-frame session", [client, "claude-code"], bench_payload(sid, 1)))
        times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        total = runs * len(variants)
        done = 0
        for _warm in range(3):
            for _name, argv, stdin in variants:
                _time(argv, stdin, env)
        runs_done = 0
        for r in range(runs):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for name, argv, stdin in order:
                times[name].append(_time(argv, stdin, env))
                done += 1
            runs_done = r + 1
            if progress:
                progress(done, total)
            if should_stop is not None and runs_done >= 5 and runs_done < runs and should_stop():
                break
        capped = runs_done < runs
        runs = runs_done
        floor = times["interpreter floor"]
        rows = []
        stats: dict[str, Any] = {}
        for name, _argv, _stdin in variants:
            d = describe(times[name])
            net = [t - f for t, f in zip(times[name], floor)]
            d["net_of_floor_median"] = statistics.median(net)
            stats[name] = d
            rows.append([name, d["median"], d["p95"], d["p99"], d["net_of_floor_median"]])
        true_p50 = stats["/usr/bin/true"]["median"]
        for name in stats:
            if name.startswith("native"):
                stats[name]["above_true_median"] = statistics.median(
                    [t - f for t, f in zip(times[name], times["/usr/bin/true"])])
        # what the hook measured of itself (attrs.hook_us), for the largest session
        largest = max(sizes)
        in_process = _hook_us(os.path.join(root, "logs", "claude_code", f"{sessions[largest]}.jsonl"), runs)
        tables = [
            {
                "title": f"Hook wall time, ms ({runs} interleaved runs per row, durability {durability})",
                "columns": ["variant", "p50", "p95", "p99", "p50 above floor"],
                "rows": rows,
                "note": "Whole process, as the agent waits for it, timed from the parent (includes fork/exec and "
                f"stdin piping). Frames in the sessions average {', '.join(f'{frame_bytes[n]:,.0f} B' for n in sizes)}. "
                f"The hook's own in-process time (attrs.hook_us) in the {largest:,}-frame session: "
                f"median {in_process['median']:.0f} µs, p95 {in_process['p95']:.0f} µs. "
                + (f"Native rows: no native client ({native_missing})." if native and client is None else
                   f"/usr/bin/true p50 {true_p50:.2f} ms; the native client's p50 above it: "
                   + ", ".join(f"{stats[n]['above_true_median']:.2f} ms" for n in stats if n.startswith("native"))
                   + "." if client is not None else ""),
            }
        ]
        result: dict[str, Any] = {
            "machine": machine(),
            "runs": runs,
            "capped": capped,
            "durability": durability,
            "frame_bytes": frame_bytes,
            "stats_ms": stats,
            "hook_us_in_process": in_process,
            "tables": tables,
        }
        if native:
            result["native"] = {"client": client, "missing": native_missing}
        if client is not None:
            result["native"]["daemon_us"] = _daemon_us(root)
            d = result["native"]["daemon_us"]
            tables.append({
                "title": "The daemon's own time per native hook (request read → answer sent)",
                "columns": ["answers", "p50 µs", "p95 µs"],
                "rows": [[d.get("window"), d.get("server_us_p50"), d.get("server_us_p95")]],
                "note": "From state/hook-server.json, the last 1,000 answers of the run's daemon "
                        f"(durability {durability}: each answer waits for the fsync that covers its frame when strict).",
            })
        if concurrent:
            paths = [("/usr/bin/true (the spawner alone)", ["/usr/bin/true"], ""),
                     ("python hook", hook_argv("claude-code"), "bench-concurrent")]
            if client is not None:
                paths.append(("native hook", [client, "claude-code"], "bench-concurrent-native"))
            got = _concurrent_rounds(root, env, concurrent, concurrent_rounds, paths,
                                     settle=lambda: _wait_idle(daemon.pid if daemon is not None else None))
            result["concurrent_true"], result["concurrent"] = got[paths[0][0]], got["python hook"]
            if client is not None:
                result["concurrent_native"] = got["native hook"]
            rows_c = [[name, concurrent, got[name]["total_ms"], got[name]["total_ms_p95"], got[name].get("frames", ""),
                       got[name].get("verify", ""), got[name].get("dense", "")] for name, _, _ in paths]
            tables.append(
                {
                    "title": f"{concurrent} hooks started at once into one session ({concurrent_rounds} rounds)",
                    "columns": ["path", "hooks", "total wall ms, median", "p95", "frames written", "verify", "dense seq"],
                    "rows": rows_c,
                    "note": "Each round starts the batches in a rotating order, each hook batch into a "
                            "session of its own, each once the daemon has used no CPU for 0.3 s (it ingests what "
                            "the batch before wrote); frames, verify and dense seq cover every round's session.",
                }
            )
        return result
    finally:
        if daemon is not None:
            stop_daemon(daemon)
        shutil.rmtree(tmp, ignore_errors=True)


def _native_client(root: str, env: dict[str, str]) -> tuple[str | None, str | None]:
    """(the native client built for ``root``, None) or (None, why there is none)."""
    from agentlog.api import build_native_hook

    built = build_native_hook(root, environ=env)
    return (built.path, None) if built.path else (None, built.reason)


def _daemon_us(root: str) -> dict[str, Any]:
    """The daemon's latest server-time numbers (it writes them every poll)."""
    from agentlog.api import hook_server_stats_path as stats_path

    time.sleep(1.5)  # one more poll, so the file covers the last answers
    try:
        with open(stats_path(root), encoding="utf-8") as fh:
            doc: dict[str, Any] = json.load(fh)
            return doc
    except (OSError, ValueError):
        return {}


def _hook_us(path: str, last: int) -> dict[str, float]:
    with open(path, "rb") as f:
        lines = f.readlines()[-last:]
    us = [float(json.loads(l)["event"]["attrs"]["hook_us"]) for l in lines if b'"hook_us"' in l]
    return describe(us) if us else {"median": float("nan"), "p95": float("nan")}


PIPE_BUF_SAFE = 60_000
"""Stdin up to this size fits a pipe's buffer (64 KiB on Linux): written without waiting."""


def _start_all(argv: list[str], stdins: list[bytes], env: dict[str, str]) -> tuple[list[int], float]:
    """One process of ``argv`` per stdin, all started, then all fed, as an agent's event loop
    does (Node spawns in one tick and writes each child's stdin after): (their exit codes, the
    whole batch's wall ms). Small stdins are written from this thread (they fit the pipe);
    larger ones from a thread each."""
    t0 = time.perf_counter_ns()
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=env) for _ in stdins]

    def feed(pair: tuple[subprocess.Popen[bytes], bytes]) -> int:
        p, data = pair
        p.communicate(data)
        return p.returncode

    if all(len(d) <= PIPE_BUF_SAFE for d in stdins):
        for p, data in zip(procs, stdins):
            assert p.stdin is not None
            try:
                p.stdin.write(data)
                p.stdin.close()
            except BrokenPipeError:  # it exited before reading: its exit code says how
                pass
        codes = [p.wait() for p in procs]
    else:
        with ThreadPoolExecutor(max_workers=len(procs)) as ex:
            codes = list(ex.map(feed, zip(procs, stdins)))
    return codes, (time.perf_counter_ns() - t0) / 1e6


def _cpu_ms(pid: int) -> float | None:
    """CPU time a process has used so far (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _wait_idle(pid: int | None, quiet_s: float = 0.3, limit_s: float = 15.0) -> None:
    """Wait until process ``pid`` (the daemon) used no CPU for ``quiet_s`` (at most ``limit_s``;
    a fixed 1 s where its CPU time cannot be read): the daemon ingests what a batch wrote
    once the logs are still, and a batch timed meanwhile would measure that ingest."""
    if pid is None:
        return
    deadline = time.monotonic() + limit_s
    last = _cpu_ms(pid)
    if last is None:
        time.sleep(1.0)
        return
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = _cpu_ms(pid)
        if now is None or now == last:
            return
        last = now


def _concurrent_rounds(root: str, env: dict[str, str], n: int, rounds: int,
                       paths: list[tuple[str, list[str], str]],
                       settle: Callable[[], None] = lambda: None) -> dict[str, dict[str, Any]]:
    """``rounds`` rounds of ``n`` processes of each path started at once (rotating order);
    for a hook path (a session name given) each round appends to a session of its own,
    checked afterwards. ``settle`` is called before each batch. Per path: median and p95 of
    the batch's wall ms."""
    totals: dict[str, list[float]] = {name: [] for name, _, _ in paths}
    codes_bad: dict[str, int] = {name: 0 for name, _, _ in paths}
    for r in range(rounds):
        for name, argv, sid in paths[r % len(paths):] + paths[: r % len(paths)]:
            settle()
            stdins = [bench_payload(f"{sid}-{r}", i) for i in range(n)] if sid else [b""] * n
            codes, total_ms = _start_all(argv, stdins, env)
            totals[name].append(total_ms)
            codes_bad[name] += sum(1 for c in codes if c)
    out: dict[str, dict[str, Any]] = {}
    for name, _argv, sid in paths:
        d = describe(totals[name])
        out[name] = {"processes": n, "rounds": rounds, "total_ms": d["median"], "total_ms_p95": d["p95"],
                     "all_ms": totals[name], "exit_codes_nonzero": codes_bad[name]}
        if sid:
            out[name].update(hooks=n, **_sessions_intact(root, [f"{sid}-{r}" for r in range(rounds)]))
    return out


def _sessions_intact(root: str, sids: list[str]) -> dict[str, Any]:
    """Frames in the sessions, whether every chain verifies and every seq is dense."""
    frames, intact, dense = 0, True, True
    for sid in sids:
        path = os.path.join(root, "logs", "claude_code", f"{sid}.jsonl")
        rep = verify_log(path)
        with open(path, "rb") as f:
            seqs = [json.loads(l)["seq"] for l in f]
        frames += rep.frames
        intact = intact and rep.status == "intact"
        dense = dense and seqs == list(range(len(seqs)))
    return {"frames": frames, "verify": "intact" if intact else "broken", "dense": dense}
