"""The real agent CLIs (pinned npm releases) driven end to end by a scripted model.

Each scenario × release runs the real CLI in a scratch home with agentlog's hooks
installed, against a model server on 127.0.0.1 (src/agentlog/bench/agents). The
truth is what the CLI sent back to the model; the record must match it, from
the hooks alone (for Codex, with the rollout import its Stop hook starts), and
after ``agentlog import`` of the same session's transcript; a second import
writes nothing; no secret canary is on any file under the data root or in the
store's text.

The releases install once into ``$AGENTLOG_AGENT_CACHE`` (default
``~/.cache/agentlog/agents``) from the npm registry; without node and npm the
module is skipped (scripts/test.sh installs them). Not in the quick tier.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from agentlog.bench.agents import npm
from agentlog.bench.agents.check import check
from agentlog.bench.agents.drivers import RELEASES, run_scenario, wait_for_sync
from agentlog.bench.agents.npm import Release
from agentlog.bench.agents.scenarios import Scenario, load_all, parse
from agentlog.bench.agents.truth import real_calls, record
from agentlog.sandbox.landlock import abi_version

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not npm.npm_available(), reason="node and npm are needed (scripts/test.sh installs them)"),
]

SCENARIOS = load_all()

# Facts the record still gets wrong, each with the issue that fixes it. A strict
# xfail: the test fails as soon as the fact comes right, so the list stays true.
KNOWN_GAPS: dict[tuple[str, str], str] = {}

# Facts an agent release does not deliver (or only sometimes): tolerated, every other fact still checked.
UNDELIVERED: dict[tuple[str, str], tuple[str, str]] = {
    ("claude-code@2.1.197", "hook_timeout"): (
        "session state:", "Claude Code 2.1.197 sometimes runs no SessionEnd hook after other hooks timed out "
                          "(2.1.332 always does): the session is then never told closed"),
    **{("codex@0.142.2", sc): ("session state:", "Codex 0.142.2 has no SessionEnd hook (0.171.0 has): nothing tells "
                                                 "agentlog the session closed")
       for sc in SCENARIOS},
}


def _gap(release: Release, scenario: Scenario) -> str | None:
    return KNOWN_GAPS.get((release.label, scenario.name)) or KNOWN_GAPS.get((release.agent, scenario.name))

CASES = [
    pytest.param(r, s, id=f"{r.label}-{s.name}",
                 marks=[pytest.mark.xfail(reason=str(_gap(r, s)), strict=True)] if _gap(r, s) else [])
    for r in RELEASES for s in SCENARIOS.values() if s.applies_to(r.agent)
]


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    # Codex will not put its helper binaries under /tmp: the scratch home goes in /var/tmp.
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else tmp_path
    d = base / f"agentlog-agents-{tmp_path.parent.name}-{tmp_path.name}"
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("release,scenario", CASES)
def test_record_equals_truth(release: Release, scenario: Scenario, scratch: Path) -> None:
    result = check(release.label, scenario, scratch, cache=npm.cache_dir())
    tolerated = UNDELIVERED.get((release.label, scenario.name))
    if tolerated is not None:
        result.from_hooks = [f for f in result.from_hooks if not f.startswith(tolerated[0])]
        result.after_import = [f for f in result.after_import if not f.startswith(tolerated[0])]
    assert not result.timed_out and result.returncode == 0, result.stderr_tail
    assert result.calls_made == result.calls_scripted, "the CLI did not run every scripted call"
    assert result.from_hooks == [], "from hooks:\n" + "\n".join(result.from_hooks)
    assert result.transcripts > 0, "the agent wrote no transcript"
    assert result.after_import == [], "after import:\n" + "\n".join(result.after_import)
    assert result.reimport_new_events == 0, "a second import wrote events"
    assert result.canary_files == [], "secrets on disk"
    if release.agent == "codex":
        assert result.sync_s is not None, "the background import of the rollout did not finish"
    assert result.ok


@pytest.mark.parametrize("release", [r for r in RELEASES if r.label == "codex@0.171.0"], ids=lambda r: r.label)
def test_codex_closes_the_session_and_counts_tokens(release: Release, scratch: Path) -> None:
    run = run_scenario(release, SCENARIOS["nonzero_exit"], scratch, cache=npm.cache_dir())
    assert run.returncode == 0, run.stderr[-600:]
    wait_for_sync(run)
    rec = record(str(run.data_root))
    assert [s["state"] for s in rec["sessions"]] == ["closed"]
    from agentlog.api import run_sql

    usage = run_sql(str(run.data_root), "select count(*) as n from usage").records()[0]
    requests = sum(1 for r in run.model.requests if r.path.rstrip("/").endswith("/responses"))
    assert usage["n"] == requests  # one usage row per model request, not one from hooks and one from the rollout


def _netns_available() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    proc = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=30)
    return proc.returncode == 0


@pytest.mark.skipif(not _netns_available(), reason="unprivileged network namespaces are not allowed here")
@pytest.mark.parametrize("release", [r for r in RELEASES if r.version in ("2.1.332", "0.171.0", "0.61.0")],
                         ids=lambda r: r.label)
def test_passes_with_only_loopback(release: Release, scratch: Path) -> None:
    """In a network namespace whose only interface is loopback (no route, no DNS
    anywhere else), the CLI, its hooks and agentlog record the same truth."""
    npm.installed_binary(release)  # installed outside: the namespace has no registry
    script = (f"ip link set lo up && exec {sys.executable} -m agentlog.bench.agents.check "
              f"{release.label} success {scratch}")
    proc = subprocess.run(["unshare", "-rn", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-800:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"], result


def test_bench_agents_reports_every_way(tmp_path: Path) -> None:
    """``agentlog bench agents`` runs the CLI with the native hook (a daemon answering), the
    Python hook and no hook, and says what each hook adds."""
    out = tmp_path / "bench"
    proc = subprocess.run([sys.executable, "-m", "agentlog", "bench", "agents", "--agent", "claude-code",
                           "--scenario", "nonzero_exit", "--rounds", "1", "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-800:]
    result = json.loads(proc.stdout)
    (row,) = result["runs"]
    assert row["release"] == "claude-code@2.1.332" and row["tool_calls"] == 2 and row["failed_runs"] == 0
    assert row["native_s"]["n"] == row["python_s"]["n"] == row["without_hooks_s"]["n"] == 1
    assert row["native_added_per_call_ms"] is not None and row["python_added_per_call_ms"] is not None
    assert row["queryable_after_exit_s"]["n"] == 1
    assert row["native_acknowledged"] > 0  # the native run's hooks went through the daemon
    assert (out / "agents.md").read_text().count("claude-code@2.1.332") == 1
    bad = subprocess.run([sys.executable, "-m", "agentlog", "bench", "agents", "--scenario", "nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown scenario 'nope'" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("release", [r for r in RELEASES if r.agent == "codex"], ids=lambda r: r.label)
def test_codex_hook_trust_is_told_truly(release: Release, scratch: Path) -> None:
    """Without trust records Codex runs no hook and doctor says so; the records
    ``agentlog install codex --trust-codex-hooks`` writes are the ones Codex honours."""
    scenario = SCENARIOS["success"]
    run = run_scenario(release, scenario, scratch, cache=npm.cache_dir(), bypass_trust=False)
    assert run.returncode == 0, run.stderr[-600:]
    logs = [p.name for p in (run.data_root / "logs").rglob("*.jsonl") if "capture-test" not in p.name]
    assert logs == [], "Codex ran hooks nobody trusted"
    doctor = subprocess.run([sys.executable, "-m", "agentlog", "doctor", "--json"], env=run.env(),
                            capture_output=True, text=True, timeout=120)
    assert "not trusted yet" in doctor.stdout and "--trust-codex-hooks" in doctor.stdout

    run = run_scenario(release, scenario, scratch, cache=npm.cache_dir(), bypass_trust=False,
                       install_args=("--trust-codex-hooks",))
    assert run.returncode == 0, run.stderr[-600:]
    assert "agentlog hooks trusted" in run.extra["install"]
    rec = record(str(run.data_root))
    assert len(rec["calls"]) == scenario.action_count
    doctor = subprocess.run([sys.executable, "-m", "agentlog", "doctor", "--json"], env=run.env(),
                            capture_output=True, text=True, timeout=120)
    assert "have a matching trust record" in doctor.stdout


SANDBOXED = {"name": "sandboxed", "about": "a write in the project, one into agentlog's data root, one into the "
                                            "project's agent settings",
             "prompt": "run the three commands", "final": "Done.",
             "steps": [[{"shell": "echo inside > inside.txt"}],
                       [{"shell": "echo planted > \"$AGENTLOG_HOME/planted\""}],
                       [{"shell": "echo '{}' > .claude/settings.local.json"}]]}


@pytest.mark.skipif(abi_version() < 6, reason="the kernel's Landlock ABI is below 6: agentlog run refuses")
@pytest.mark.parametrize("release", [r for r in RELEASES if r.version in ("2.1.332", "0.171.0", "0.61.0")],
                         ids=lambda r: r.label)
def test_under_agentlog_run(release: Release, scratch: Path) -> None:
    """The CLI finishes its scenario under ``agentlog run`` (the daemon recording its hooks): the
    write into the project lands, the ones into the data root and the project's agent settings are
    denied; every shell command goes through the broker, each recorded, the denied ones as denied
    by policy."""
    scenario = parse(SANDBOXED, "inline")
    run = run_scenario(release, scenario, scratch, cache=npm.cache_dir(), daemon=True, sandbox=True)
    assert not run.timed_out and run.returncode == 0, run.stderr[-800:]
    assert len(real_calls(run)) == scenario.action_count
    assert (scratch / "proj" / "inside.txt").read_text() == "inside\n"
    assert not (run.data_root / "planted").exists()
    rec = record(str(run.data_root))
    assert len([c for c in rec["calls"] if c.get("provider") != "agentlog"]) >= scenario.action_count
    (log,) = (run.data_root / "logs" / "agentlog").glob("sandbox-*.jsonl")
    events = [json.loads(line)["event"] for line in log.read_text().splitlines() if line.strip()]
    ends = [e for e in events if e["kind"] in ("tool_call_finished", "tool_call_failed")]
    assert [e["content"]["tool_input"]["command"] for e in ends] == [a.arg for step in scenario.steps for a in step]
    assert [e["outcome"]["status"] for e in ends] == ["success", "denied", "denied"]
    assert ends[1]["outcome"]["class"] == ends[2]["outcome"]["class"] == "policy_denied"
    assert not (scratch / "proj" / ".claude").exists()  # the run's read-only mount point, gone with it
