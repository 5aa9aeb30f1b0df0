"""The benchmark harness: one process per step, caps, crash-safe results, the report.

The misbehaving steps live in tests/bench_steps_fixture.py and are added with
--steps-module; caps are tiny so that these tests take seconds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentlog.bench.anchors import check_targets, compare, load_anchors
from agentlog.bench.harness import SETTLE_MAX_SECS, select
from agentlog.bench.report import fmt_value, render_markdown

FIXTURE = str(Path(__file__).with_name("bench_steps_fixture.py"))


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentlog", "bench", *args], capture_output=True, text=True, timeout=timeout
    )


def run(out: Path, *args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    r = bench("run", "--steps-module", FIXTURE, "--out", str(out), *args, timeout=timeout)
    data = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    return r, data


def steps(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in data["steps"]}


def test_rss_cap_kills_the_step_and_the_run_goes_on(tmp_path: Path) -> None:
    r, data = run(tmp_path, "--only", "quick,hog,after", "--rss-cap-gb", "0.2", "--time-cap-secs", "20")
    assert r.returncode == 0, r.stderr
    s = steps(data)
    assert [x["name"] for x in data["steps"]] == ["quick", "hog", "after"]
    assert s["quick"]["status"] == "ok" and s["after"]["status"] == "ok"
    hog = s["hog"]
    assert hog["status"] == "killed" and hog["result"] is None
    assert "RSS cap" in hog["reason"]
    assert hog["process"]["signal"] == signal.SIGKILL
    assert hog["peak_rss"]["observed_group_bytes"] > 0.2 * (1 << 30)
    assert hog["wall_secs"] < 15  # killed long before its 60 s sleep
    assert data["run"]["status"] == "complete"
    # the child's own peak RSS and the parent's observation are both recorded
    q = s["quick"]["peak_rss"]
    assert q["ru_maxrss_bytes"] > 1 << 20 and q["vmhwm_bytes"] > 1 << 20
    assert s["quick"]["result"]["metrics"] == {"events": 200000, "half": 100000.0}
    assert s["quick"]["result"]["raw"]["extra"]["pid"] == s["quick"]["process"]["pid"]
    assert (tmp_path / "step-quick.json").exists() and not (tmp_path / "step-hog.json").exists()
    # the disk is flushed before every step, outside its wall time, and the report says how long it took
    assert all(isinstance(x["disk_flush_secs"], float) and 0 <= x["disk_flush_secs"] < x["wall_secs"] + 60
               for x in data["steps"])
    # then waited for the disks to go quiet (bounded), also outside its wall time
    assert all(isinstance(x["disk_settle_secs"], float) and 0 <= x["disk_settle_secs"] <= SETTLE_MAX_SECS + 1
               for x in data["steps"])
    md = (tmp_path / "results.md").read_text()
    assert "| Disk flush / settle before |" in md and "the parent's `sync` before the step starts, then its wait" in md
    assert "## Slow and unflattering" in md
    assert "`hog` did not run to a result: killed: resident set" in md
    assert "hog" in r.stderr and "killed" in r.stderr  # one progress line per step


def test_time_caps_crashes_and_soft_budget(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r, data = run(tmp_path, "--only", "sleeper,polite,crasher,after", "--time-cap-secs", "1")
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    s = steps(data)
    sleeper = s["sleeper"]
    assert sleeper["status"] == "killed" and "twice the time cap of 1 s" in sleeper["reason"]
    assert 2.0 <= sleeper["wall_secs"] < 6
    assert "sleeping" in sleeper["process"]["output_tail"]
    polite = s["polite"]
    assert polite["status"] == "capped" and polite["result"]["capped"] is True
    assert "polite stopped after" in polite["reason"] and polite["result"]["metrics"]["rounds"] > 0
    crasher = s["crasher"]
    assert crasher["status"] == "failed" and crasher["process"]["exit_code"] == 1
    assert "crasher step failed on purpose" in crasher["reason"]
    assert "RuntimeError: crasher step failed on purpose" in crasher["process"]["output_tail"]
    assert s["after"]["status"] == "ok"
    assert elapsed < 40
    md = (tmp_path / "results.md").read_text()
    assert "`polite` hit its soft time cap" in md
    assert "`crasher` did not run to a result: crashed: exit code 1" in md


def test_a_killed_run_leaves_a_valid_results_json(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "agentlog", "bench", "run", "--steps-module", FIXTURE, "--out", str(tmp_path),
            "--only", "quick,sleeper,after", "--time-cap-secs", "60"]  # fmt: skip
    parent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = tmp_path / "results.json"
    child_pid = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.exists():
            data = json.loads(results.read_text())  # every version on disk parses
            sl = steps(data)["sleeper"]
            if sl["status"] == "running" and sl.get("process"):
                child_pid = sl["process"]["pid"]
                break
        time.sleep(0.05)
    assert child_pid, "the sleeper step never started"
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    data = json.loads(results.read_text())
    s = steps(data)
    assert data["run"]["status"] == "running" and data["run"]["finished"] is None
    assert s["quick"]["status"] == "ok" and s["quick"]["result"]["metrics"]["events"] == 200000
    assert s["sleeper"]["status"] == "running" and s["after"]["status"] == "pending"
    # the orphaned step notices its parent is gone and kills itself
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(child_pid):
        time.sleep(0.1)
    assert not _alive(child_pid)
    # and the partial file still renders
    r = bench("report", str(results))
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "results.md").read_text()
    assert "status **running**" in md and "`sleeper` was running when the run stopped." in md


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_only_and_skip(tmp_path: Path) -> None:
    r, data = run(tmp_path / "a", "--only", "quick,after,crasher", "--skip", "crasher")
    assert r.returncode == 0, r.stderr
    assert [s["name"] for s in data["steps"]] == ["quick", "after"]  # registry order, not --only order
    assert data["run"]["only"] == ["quick", "after", "crasher"] and data["run"]["skip"] == ["crasher"]
    assert {"size_by_kind", "hook", "verify", "quick", "hog"} <= set(data["run"]["known_steps"])
    r, data = run(tmp_path / "b", "--only", "after", "--time-cap-secs", "5")
    assert [s["name"] for s in data["steps"]] == ["after"]
    r, _ = run(tmp_path / "c", "--only", "quick,nosuchstep")
    assert r.returncode == 2 and "nosuchstep" in r.stderr
    assert not (tmp_path / "c" / "results.json").exists()
    r, _ = run(tmp_path / "d", "--skip", "nosuchstep")
    assert r.returncode == 2
    r = bench("run", "--steps-module", FIXTURE, "--list")
    assert r.returncode == 0
    names = [line.split("\t")[0] for line in r.stdout.splitlines()]
    assert names[:3] == ["size_by_kind", "hook", "verify"] and "sleeper" in names
    assert select(["a", "b", "c"], [], ["b"]) == ["a", "c"]
    assert select(["a", "b", "c"], ["c", "a"], []) == ["a", "c"]
    with pytest.raises(ValueError):
        select(["a"], ["z"], [])


def test_steps_keep_their_bytecode_even_where_the_caller_forbids_writing_it(tmp_path: Path) -> None:
    """A step's Python (and what it starts) compiles each module once per run, into a scratch cache
    removed at the end — not on every process start because PYTHONDONTWRITEBYTECODE is set."""
    r = subprocess.run([sys.executable, "-m", "agentlog", "bench", "run", "--steps-module", FIXTURE, "--out",
                        str(tmp_path), "--only", "quick"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "results.json").read_text())
    prefix, forbid = steps(data)["quick"]["result"]["raw"]["extra"]["bytecode"]
    assert prefix and os.path.basename(prefix).startswith("agentlog-bench-bytecode-") and forbid is None
    assert not os.path.exists(prefix)
    assert data["run"]["bytecode"] == {"cached": True, "caller_forbade_writing": True}
    assert "Bytecode: the steps and the processes they start compile each module once per run" in \
        (tmp_path / "results.md").read_text()


def test_steps_module_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLOG_BENCH_STEPS_MODULE", FIXTURE)
    r = bench("step", "quick", "--events", "123", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["status"] == "ok" and result["metrics"]["events"] == 123
    assert result["peak_rss"]["ru_maxrss_bytes"] > 0
    r = bench("step", "quick", "--events", "7", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "step-quick.json").read_text())["metrics"]["half"] == 3.5
    r = bench("step", "nosuchstep")
    assert r.returncode == 2


def _fake_results(**metrics: dict[str, float]) -> dict[str, Any]:
    def entry(name: str, m: dict[str, float]) -> dict[str, Any]:
        return {
            "name": name, "status": "ok", "reason": None, "wall_secs": 1.5,
            "peak_rss": {"ru_maxrss_bytes": 50 << 20, "vmhwm_bytes": 50 << 20, "observed_bytes": 49 << 20, "observed_group_bytes": 60 << 20},
            "result": {"metrics": m, "tables": [{"title": f"{name} table", "columns": ["a", "b"], "rows": [[1, 2.5]]}], "raw": {}},
        }  # fmt: skip

    return {
        "format": 1,
        "run": {"status": "complete", "events": 1000, "seed": 1, "time_cap_secs": 600, "rss_cap_bytes": 1 << 30,
                "started": "2026-01-01T00:00:00Z", "finished": "2026-01-01T00:01:00Z", "wall_secs": 60.0,
                "known_steps": ["size_by_kind", "hook", "verify"]},
        "machine": {"cpu_model": "Test CPU", "logical_cpus": 2, "usable_cpus": 2, "memory_bytes": 8 << 30,
                    "disk": {"path": "/x"}, "git": {"commit": "abc", "short": "abc", "clean": True}},
        "steps": [entry(n, m) for n, m in metrics.items()],
    }  # fmt: skip


def test_report_puts_our_figures_next_to_the_anchors() -> None:
    results = _fake_results(
        hook={"p50_ms": 7.54, "p95_ms": 9.0, "p99_ms": 12.0, "true_p50_ms": 1.0, "floor_p50_ms": 5.0, "above_floor_p50_ms": 2.5,
              "worst_p95_ms": 11.0, "worst_above_floor_p50_ms": 2.5, "flatness_p50_ms": 0.1, "concurrent_intact": 1},
        verify={"in_process_mb_s": 400.0, "hash_only_mb_s": 800.0, "command_mb_s.j1.1000": 442.6},
    )  # fmt: skip
    comps = {c.anchor["id"]: c for c in compare(results)}
    p50 = comps["attemptdb.hook.p50"]
    assert p50.ours == 7.54 and p50.ratio == pytest.approx(2.0) and p50.verdict() == "2.00× worse" and p50.worse
    nd7 = comps["nd7.verify_1000.mb_s"]  # 442.6 vs 221.3 MB/s, higher is better
    assert nd7.verdict() == "2.00× better" and not nd7.worse
    assert comps["nd7.verify_50000.mb_s"].why == "not measured at this size"
    assert comps["attemptdb.ingest_strict_full.events_per_s"].why == "not measured yet (issue 4)"
    assert comps["engram.proposal_undo.mean"].why == "not measured yet (issue 7)"
    assert comps["attemptdb.size.json_bytes_per_event"].why == "step size_by_kind not run in this run"
    targets = {t.target["id"]: t for t in check_targets(results)}
    assert targets["hook.p95"].met is False and targets["hook.above_floor"].met is True
    assert targets["verify.in_process"].met is False
    md = render_markdown(results)
    for heading in ("## Machine", "## Steps", "## Step `hook`", "### hook table", "## Anchors side by side", "## Targets", "## Slow and unflattering"):
        assert heading in md
    assert "Apple M5 Pro" in md and "Apple M1 Pro" in md and "Windows" in md
    assert "while ours come from this 2-core Test CPU" in md
    assert "| attemptdb | hook, no daemon (spool append, no sync), wall p50 | 3.77 ms | 7.54 ms | 2 | 2.00× worse |" in md
    slow = md.split("## Slow and unflattering", 1)[1]
    assert "Target missed — verify >= 500 MB/s in one process" in slow
    assert "Target missed — hook p95 below 10 ms" in slow
    assert "Behind attemptdb by 2.00× — hook, no daemon (spool append, no sync), wall p50" in slow
    assert "Verify in one process reaches 400 MB/s, 50 % of hashing" in slow
    assert "not measured yet (issue 4)" in md


def test_report_command_renders_results_json(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_fake_results(hook={"p50_ms": 3.0})))
    r = bench("report", str(path))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "results.md").read_text().startswith("# agentlog benchmark results")
    r = bench("report", str(path), "--out", "-")
    assert r.stdout.startswith("# agentlog benchmark results")
    r = bench("report", str(path), "--out", str(tmp_path / "other.md"))
    assert (tmp_path / "other.md").exists()
    path.write_text("{not json")
    assert bench("report", str(path)).returncode == 1


def test_anchors_file_is_well_formed() -> None:
    data = load_anchors()
    ids = [a["id"] for a in data["anchors"]]
    assert len(ids) == len(set(ids))
    for a in data["anchors"]:
        assert a["project"].split()[0] in ("attemptdb", "nd7", "engram")
        assert isinstance(a["value"], (int, float)) and a["published"] and a["what"]
        assert a["better"] in ("lower", "higher", "match", "baseline")
        assert a["source"].startswith("seeds/") or a["source"].startswith("issue ")
        assert a["ours"] is None or (a["ours"]["step"] and a["ours"]["metric"])
        fmt_value(a["value"], a["unit"])
    published = {a["id"]: a["value"] for a in data["anchors"]}
    # spot checks against the seed documents
    assert published["nd7.record_1000.p50"] == 5.005 and published["nd7.record_1000.net"] == 1.6
    assert published["nd7.verify_50000.mb_s"] == 470.4
    assert published["attemptdb.hook.p50"] == 3.77
    assert published["attemptdb.ingest_strict_full.events_per_s"] == 8592
    assert published["engram.append_create.mean"] == 40.2 and published["engram.rebuild"] == 82.7
    assert published["engram.search.mean"] == 310.7 and published["engram.proposal_undo.mean"] == 1725.8
    assert published["engram.export"] == 22.3
    mix = data["kind_mix"]["kinds"]
    assert sum(k["share_pct"] for k in mix.values()) == pytest.approx(100, abs=0.01)
    for t in data["targets"]:
        assert t["op"] in ("<", "<=", ">", ">=", "==", "between")


def test_formatting() -> None:
    assert fmt_value(0.124, "ms") == "124 µs"
    assert fmt_value(3.77, "ms") == "3.77 ms"
    assert fmt_value(8960, "ms") == "8.96 s"
    assert fmt_value(160, "s") == "2 min 40 s"
    assert fmt_value(11700, "B") == "11,700 B"
    assert fmt_value(4.28 * (1 << 30), "B") == "4.28 GiB"
    assert fmt_value(8592, "events/s") == "8,592 events/s"


@pytest.mark.slow
def test_bench_run_at_20k_events(tmp_path: Path) -> None:
    """What CI runs so the harness cannot rot: every shipped step, small sizes."""
    out = tmp_path / "run"
    env = {**os.environ, "AGENTLOG_HOME": str(tmp_path / "home")}
    env.pop("AGENTLOG_BENCH_STEPS_MODULE", None)
    r = subprocess.run(
        [sys.executable, "-m", "agentlog", "bench", "run", "--events", "20000", "--out", str(out), "--time-cap-secs", "240"],
        capture_output=True, text=True, timeout=1800, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    assert data["run"]["status"] == "complete" and data["run"]["events"] == 20000
    s = steps(data)
    from agentlog.bench.steps import STEPS

    assert list(s) == list(STEPS)
    big = [n for n in s if any(x in n for x in ("100k", "200k", "300k", "400k", "500k", "full"))]
    assert "ingest_200k_reader" in big and "segments_100k" in big and "ingest_relaxed_full" in big
    assert {"projection_500k", "engine_100k", "engine_400k", "engine_full"} <= set(big)
    for name in big:  # sizes above --events are skipped, as attemptdb's curve
        assert s[name]["status"] == "ok" and "below" in s[name]["result"]["raw"]["skipped"], name
        s.pop(name)
    for name in ("ingest_strict_10k", "ingest_relaxed_10k"):
        ing = s[name]["result"]["metrics"]
        # 10,000 samples; the importer adds a usage event per API response of the transcript sessions
        assert 10000 < ing["events"] < 12000 and ing["events_per_s"] > 0 and ing["breaks"] == 0
    comp = s["ingest_compaction"]["result"]["metrics"]
    assert comp["batch_p99_ms"] > 0 and comp["compacting_batch_p99_ms"] > 0 and comp["compaction_errors"] == 0
    disk = s["disk"]["result"]["metrics"]
    assert 20000 < disk["events"] < 24000 and 0 < disk["bytes_per_event"] < disk["log_unsealed_bytes_per_event"]
    for name, entry in s.items():
        assert entry["status"] == "ok", (name, entry.get("reason"), (entry.get("process") or {}).get("output_tail"))
        metrics = entry["result"]["metrics"]
        assert metrics and all(isinstance(v, (int, float)) for v in metrics.values()), name
        assert entry["result"]["tables"], name
        assert entry["peak_rss"]["ru_maxrss_bytes"] > 0 and entry["wall_secs"] > 0
    proj = s["projection_10k"]["result"]["metrics"]
    assert 10000 < proj["events"] < 12000 and proj["secs"] > 0 and proj["attempts"] > 0 and proj["edges"] > proj["tool_calls"] > 0
    trace = s["trace_chain"]["result"]["metrics"]
    assert trace["chain_attempts"] == 200 and trace["depth200_reaches_first"] == 1 and trace["depth1_reaches_first"] == 0
    assert trace["depth10_p50_ms"] > 0 and trace["depth1_rows"] < trace["depth10_rows"] < trace["depth200_rows"]
    state = s["state_at"]["result"]["metrics"]
    assert state["p50_ms"] > 0 and state["diff_p50_ms"] > 0 and state["rows_latest"] > 0 and "p50_ms.20000" in state
    timeline = s["recent_timeline"]["result"]["metrics"]
    assert timeline["window_events"] > 0 and timeline["timeline_rows"] > 0 and timeline["show_failed_p50_ms"] > 0
    refresh = s["refresh"]["result"]["metrics"]
    assert refresh["not_incremental"] == 0 and refresh["secs"] > 0 and refresh["fresh_secs"] > 0
    size = s["size_by_kind"]["result"]["metrics"]
    assert size["events"] >= 20000 * 0.9 and size["json_bytes_per_event"] > 0 and size["zstd_ratio"] > 1
    hook = s["hook"]["result"]["metrics"]
    assert hook["runs"] == 30 and hook["p50_ms"] > 0 and "p50_ms.10000" in hook and "p50_ms.50000" not in hook
    ver = s["verify"]["result"]["metrics"]
    assert ver["in_process_mb_s"] > 0 and ver["largest_frames"] == 10000
    _every_anchor_and_target_finds_its_metric(data)
    md = (out / "results.md").read_text()
    for heading in ("## Machine", "## Step `size_by_kind`", "## Step `hook`", "## Step `verify`", "## Anchors side by side", "## Slow and unflattering"):
        assert heading in md


def test_default_seed_is_the_generators() -> None:
    from agentlog.bench.harness import DEFAULT_SEED
    from agentlog.bench.workload import DEFAULT_SEED as GENERATOR_SEED

    assert DEFAULT_SEED == GENERATOR_SEED
    r = bench("run", "--help")
    assert f"default: {GENERATOR_SEED}" in " ".join(r.stdout.split())


@pytest.mark.slow
def test_engine_step_at_10k(tmp_path: Path) -> None:
    """The engine steps start at 100k events; the fixture's engine_10k is the same step at 10k."""
    r, data = run(tmp_path, "--events", "10000", "--only", "engine_10k,engine_100k", "--time-cap-secs", "300", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    s = steps(data)
    assert "below" in s["engine_100k"]["result"]["raw"]["skipped"]
    entry = s["engine_10k"]
    assert entry["status"] == "ok", (entry.get("reason"), (entry.get("process") or {}).get("output_tail"))
    m = entry["result"]["metrics"]
    # 10,000 samples; the importer adds a usage event per API response of the transcript sessions
    assert 10000 < m["events"] < 12000 and m["first_statement_secs"] > 0 and m["peak_rss_bytes"] > 1 << 20
    assert m["first_aql_secs"] > 0 and m["rows.failed_attempts"] > 0 and m["rows.group_by"] > 10
    for name in ("group_by", "count_tool_calls", "count_events", "count_edges", "failed_attempts"):
        assert 0 < m[f"{name}_p50_ms"] <= m[f"{name}_p99_ms"], name
    md = (tmp_path / "results.md").read_text()
    assert "## Step `engine_10k`" in md and "SHOW FAILED ATTEMPTS LIMIT 50" in md


def _every_anchor_and_target_finds_its_metric(data: dict[str, Any]) -> None:
    """Each figure of ours that an anchor or a target names is a metric its step reports (a
    metric keyed by a store size, ``1450000.x``, at the size this run measured): a misspelt
    metric would leave the report saying 'not measured at this size' for a figure it has."""
    ran = {e["name"]: (e["result"] or {}).get("metrics") or {} for e in data["steps"]
           if e["status"] == "ok" and not ((e["result"] or {}).get("raw") or {}).get("skipped")}  # (below its size)
    anchors = load_anchors()
    named = [(a["id"], a["ours"]["step"], a["ours"]["metric"]) for a in anchors["anchors"] if a.get("ours")]
    named += [(t["id"], t["step"], t["metric"]) for t in anchors["targets"]]
    checked = 0
    for ident, step, metric in named:
        if step not in ran or metric == "peak_rss_bytes":
            continue
        sized = re.fullmatch(r"\d+\.(.+)", metric) or re.fullmatch(r"(.+)\.\d+", metric)
        if sized:  # the same figure at the sizes this run measured (N.x or x.N)
            same = re.escape(sized.group(1))
            assert any(re.fullmatch(rf"\d+\.{same}|{same}\.\d+", k) for k in ran[step]), (ident, step, metric)
        else:
            assert metric in ran[step], (ident, step, metric, sorted(ran[step]))
        checked += 1
    assert checked >= 30


def test_scratch_directories_live_in_the_steps_own_spread_directory(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A step's scratch directories are made in one directory of its own, marked (where the file
    system has the flag) to place each of them in a block group the file system picks; cleanup
    removes it whole."""
    import array
    import fcntl
    import tempfile

    from agentlog.bench.common import FS_IOC_GETFLAGS, FS_TOPDIR_FL, spread_directories
    from agentlog.bench.context import StepContext

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ctx = StepContext("memory", 1000, 1)
    a, b = ctx.tmpdir(), ctx.tmpdir()
    assert a != b and os.path.dirname(a) == os.path.dirname(b) != str(tmp_path)
    base = os.path.dirname(a)
    assert os.path.basename(base).startswith("agentlog-bench-memory-")
    assert isinstance(ctx.spread_scratch, bool)
    fd = os.open(base, os.O_RDONLY)
    try:
        flags = array.array("i", [0])
        try:
            fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
            has_flag: bool | None = bool(flags[0] & FS_TOPDIR_FL)
        except OSError:
            has_flag = None  # a file system without inode flags
    finally:
        os.close(fd)
    assert ctx.spread_scratch == bool(has_flag)
    assert spread_directories(str(tmp_path / "missing")) is False
    ctx.cleanup()
    assert not os.path.exists(base) and not os.path.exists(a)


def test_the_memory_growth_table_gives_each_step_and_the_exponent() -> None:
    from agentlog.bench.memory_steps import _growth_table

    def size(n: int, linear: float, flat: float) -> dict[str, object]:
        st = {"median": flat, "p95": flat}
        return {"memories": n, "append": st, "tag_update": st, "rebuild_ms": linear, "verify_ms": linear * n / 1000,
                "search": {"q": st}, "proposal_open": st, "merge": st, "undo": st, "export_ms": linear,
                "export_floor_ms": linear, "restore_ms": linear, "machine_loop_ms": 30.0}

    table = _growth_table([size(1000, 10.0, 0.5), size(10_000, 100.0, 0.5), size(100_000, 1000.0, 0.5)])
    assert table["columns"][1:] == ["1,000 memories", "10,000 memories", "100,000 memories", "grew 10× larger",
                                    "grew 10× larger", "exponent", "less the machine's drift"]
    rows = {r[0]: r[1:] for r in table["rows"]}
    assert rows["rebuild"] == ["10.00 ms", "100.00 ms", "1,000.00 ms", "10.0×", "10.0×", "1.00", "1.00"]
    assert rows["append p50"][-2] == "0.00" and rows["differential verify"][-2] == "2.00"  # constant; quadratic
    assert rows["a fixed Python loop (the machine's speed)"] == ["30.00 ms"] * 3 + ["1.0×"] * 2 + ["0.00"] * 2
    # a machine that slowed 10× over the run: the loop's exponent is taken from each
    slowed = [size(1000, 10.0, 0.5), size(10_000, 300.0, 0.5), size(100_000, 10_000.0, 0.5)]
    slowed[-1]["machine_loop_ms"] = 300.0
    rows = {r[0]: r[1:] for r in _growth_table(slowed)["rows"]}
    assert rows["rebuild"][-2:] == ["1.50", "1.00"] and rows["a fixed Python loop (the machine's speed)"][-2:] == \
        ["0.50", "0.00"]
