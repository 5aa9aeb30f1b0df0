"""The seeded benchmark workload (issue 3): determinism, shape, calibration, loader."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from agentlog.bench.workload import Canonicalizer, calibrate, generate, load, sample_events
from agentlog.bench.workload import model as M
from agentlog.bench.workload.generator import chain_edits
from agentlog.bench.workload.transcripts import EXTRA_KINDS
from agentlog.bench.workload.text import GENRES, TextSource
from agentlog.capture.failures import classify
from agentlog.cli import cli
from agentlog.core.fastjson import dumps_bytes
from agentlog.log.verify import verify_log
from agentlog.core.model import Event

KEYS = ["n", "t", "provider", "agent", "source", "session", "kind", "profile"]
AGENTS = {"claude_code": "claude-code", "codex": "codex", "cursor": "cursor", "gemini_cli": "gemini-cli"}


def digest(samples: Iterator[dict[str, Any]]) -> str:
    h = hashlib.sha256()
    for s in samples:
        h.update(dumps_bytes(s) + b"\n")
    return h.hexdigest()


# -- shape of the stream ----------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 3, 9, 10, 57, 400])
def test_exactly_n_samples_in_order(n: int) -> None:
    samples = list(generate(n, seed=11))
    assert len(samples) == n
    last = 0
    for i, s in enumerate(samples):
        assert list(s)[: len(KEYS)] == KEYS
        assert list(s)[len(KEYS):] == (["payload"] if s["source"] == "hook" else ["line"])
        assert s["n"] == i
        assert s["t"] >= last and s["t"] % 1000 == 0
        last = s["t"]
        assert s["agent"] == AGENTS[s["provider"]]
        if s["source"] == "transcript":
            assert s["provider"] == "claude_code" and isinstance(s["line"], str)


def test_stream_starts_at_the_synthetic_epoch() -> None:
    first = next(generate(5, seed=3))
    assert first["t"] >= M.START_TIME_US  # 2026-01-05T09:00:00Z
    assert M.START_TIME_US == 1_767_603_600_000_000


def test_same_seed_same_bytes_different_seed_differs() -> None:
    a = digest(generate(700, seed=42))
    b = digest(generate(700, seed=42))
    c = digest(generate(700, seed=43))
    assert a == b
    assert a != c


def test_cli_sample_is_byte_identical_across_processes() -> None:
    cmd = [sys.executable, "-m", "agentlog", "bench", "sample", "--events", "300", "--seed", "5"]
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    one = subprocess.run(cmd, capture_output=True, check=True, env=env, timeout=120).stdout
    two = subprocess.run(cmd, capture_output=True, check=True, env=env, timeout=120).stdout
    assert hashlib.sha256(one).hexdigest() == hashlib.sha256(two).hexdigest()
    lines = one.splitlines()
    assert len(lines) == 300
    assert one == b"".join(dumps_bytes(s) + b"\n" for s in generate(300, seed=5))
    first = json.loads(lines[0])
    assert list(first)[: len(KEYS)] == KEYS
    assert b'": ' not in lines[0][:200]  # compact JSON


def test_cli_sample_canonical() -> None:
    r = CliRunner().invoke(cli, ["bench", "sample", "--events", "120", "--seed", "8", "--canonical"])
    assert r.exit_code == 0, r.output
    events = [json.loads(line) for line in r.stdout.splitlines()]
    # one event per sample, and the importer's own beside a transcript's (a usage event per API response)
    assert len([ev for ev in events if ev["kind"] not in EXTRA_KINDS]) == 120
    for ev in events:
        Event.from_wire(ev)
    again = CliRunner().invoke(cli, ["bench", "sample", "--events", "120", "--seed", "8", "--canonical"])
    assert again.stdout == r.stdout  # same seed, same events (the transcripts' scratch paths do not show)


# -- the capture path agrees ------------------------------------------------------


@pytest.fixture(scope="module")
def imported() -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """(sample, event) of every sample's own event, and of the importer's extra events
    (a transcript sample comes without its line)."""
    out = []
    extra = []
    with Canonicalizer(keep_samples=True) as canon:
        for s in generate(2500, seed=3):  # seed 3 has every provider and source within 500 samples
            evs = canon(s)
            if s["source"] == "hook":
                (ev,) = evs
                out.append((s, ev))
            else:
                assert evs == []  # its events come from the importer, once the files are written
        for known, ev in canon.imported():
            assert known is not None
            (extra if ev["kind"] in EXTRA_KINDS else out).append((known, ev))
    return out, extra


@pytest.fixture(scope="module")
def small(imported: tuple[list[Any], list[Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return imported[0]


def test_one_event_per_sample_and_a_usage_event_per_response(imported: tuple[list[Any], list[Any]]) -> None:
    own, extra = imported
    assert sorted(s["n"] for s, _ in own) == list(range(2500))
    assert extra and {ev["kind"] for _, ev in extra} == {"usage"}
    # each of the generator's assistant records is one API response: one usage event of it
    assert Counter(s["n"] for s, _ in extra) == Counter(
        s["n"] for s, ev in own if s["source"] == "transcript" and ev["provider_event_name"] in (
            "transcript:tool_use", "transcript:text"))
    for _, ev in extra:
        Event.from_wire(ev)
        assert ev["attrs"]["input_tokens"] >= 1 and ev["attrs"]["reconstructed"] is True


def test_every_sample_gives_the_kind_it_promises(small: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    for s, ev in small:
        assert ev["kind"] == s["kind"], (s["provider"], s["profile"], ev["kind"])
        Event.from_wire(ev)
        assert ev["provider"] == s["provider"]
        assert ev["captured_at"] == s["t"]
        assert ev["event_id"].split("-")[2].startswith("7")
        assert int(ev["event_id"].replace("-", "")[:12], 16) == s["t"] // 1000
        if s["source"] == "hook":
            assert ev["raw"] == s["payload"]  # nothing secret-shaped in the synthetic text
            assert "reconstructed" not in ev["attrs"]
        else:
            # the importer keeps the transcript line
            assert json.loads(ev["raw"]["line"])["sessionId"] == s["session"]
            assert ev["attrs"]["reconstructed"] is True
            assert ev["attrs"]["reconstructed_from"] == "claude_code_transcript"
            assert ev["attrs"]["source_file"].startswith(".claude/projects/")
            assert ev["provider_event_name"].startswith("transcript:")
        assert ev["attrs"].get("redactions") is None
        assert "unrecognised" not in ev["attrs"] or s["kind"] == "unknown"


def test_tool_profiles_match_categories_and_failure_classes(
    small: list[tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    cats = {"shell": "shell", "read": "file_read", "write": "file_write", "edit": "file_edit", "search": "search",
            "web": "web", "mcp": "mcp", "subagent": "subagent", "plan": "plan", "other": "other"}
    seen: Counter[str] = Counter()
    for s, ev in small:
        prefix, _, phase = s["profile"].rpartition("_")
        if phase in ("started", "finished", "failed", "denied") and s["kind"].startswith(("tool_", "permission_")):
            assert ev["tool"]["category"] == cats[prefix], s["profile"]
            if ev["tool"]["category"] != "subagent" or s["source"] == "hook":
                assert ev["content"].get("tool_input") is not None
        if s["kind"] == "tool_call_failed":
            cls = ev["outcome"]["class"]
            seen[cls] += 1
            if prefix == "shell":
                assert cls not in ("string_mismatch", "edit_conflict", "tool_usage_error", "policy_denied")
            else:
                assert prefix == "edit" and cls == "string_mismatch"
    assert seen["string_mismatch"] >= 150  # the chain


def test_provider_rules(small: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    by: dict[str, Counter[str]] = {}
    for s, ev in small:
        by.setdefault(s["provider"], Counter())[s["kind"]] += 1
        if s["provider"] == "claude_code" and s["source"] == "hook" and "agent_id" in s["payload"]:
            assert ev["agent"]["agent_id"] == s["payload"]["agent_id"]
    cursor = by["cursor"]
    assert cursor["tool_call_finished"] > 0
    assert cursor["tool_call_started"] == 0 and cursor["subagent_started"] == 0 and cursor["subagent_stopped"] == 0
    gemini = by["gemini_cli"]
    assert gemini["subagent_started"] == 0 and gemini["subagent_stopped"] == 0


def test_all_providers_and_sources_appear(small: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    seen = {(s["provider"], s["source"]) for s, _ in small}
    assert seen == {("claude_code", "hook"), ("claude_code", "transcript"), ("codex", "hook"), ("cursor", "hook"),
                    ("gemini_cli", "hook")}


@pytest.mark.parametrize("provider", ["claude_code", "codex", "cursor", "gemini_cli"])
@pytest.mark.parametrize("kind", ["capture_test", "unknown"])
def test_noise_sessions(provider: str, kind: str) -> None:
    import random

    from agentlog.bench.workload.generator import NoiseSession, Workload

    wl = Workload(10, 1)
    sess = NoiseSession(wl, random.Random(5), M.START_TIME_US, wl.world.projects[0], "noise-1", provider, kind)
    (item,) = list(sess.run())
    sample = Workload._sample(0, item[0], sess, item)
    (ev,) = sample_events(sample)
    assert ev["kind"] == kind == sample["kind"]
    assert ev["provider"] == provider
    Event.from_wire(ev)


def test_unpaired_transcript_result_is_imported_as_unpaired() -> None:
    for s in generate(600, seed=9):
        if s["source"] == "transcript" and s["kind"] == "tool_call_finished" and s["profile"] == "shell_finished":
            (ev,) = sample_events(s)  # a file of this line alone: its tool_use is not in it
            assert ev["kind"] == "tool_call_finished"
            assert ev["attrs"]["unpaired_result"] is True  # the importer does not guess the tool
            assert ev["tool"]["name"] == "unknown" and ev["tool"]["call_id"].startswith("toolu_")
            Event.from_wire(ev)
            return
    pytest.skip("no transcript shell result in this sample")


# -- the TRACE fixture ------------------------------------------------------------


def chain_positions(samples: list[dict[str, Any]]) -> list[int]:
    return [s["n"] for s in samples if s["session"] == M.CHAIN_SESSION_ID]


@pytest.mark.parametrize("n,edits", [(2000, 200), (2500, 200), (600, 60), (9, 0)])
def test_chain_session_at_the_midpoint(n: int, edits: int) -> None:
    samples = list(generate(n, seed=2))
    assert chain_edits(n) == edits
    pos = chain_positions(samples)
    if not edits:
        assert pos == []
        return
    assert len(pos) == 2 * edits + 2
    assert pos == list(range(pos[0], pos[0] + len(pos)))  # contiguous
    assert abs((pos[0] + pos[-1]) / 2 - n / 2) <= 1
    canon = Canonicalizer()
    fails = []
    for s in samples[pos[0]: pos[-1] + 1]:
        (ev,) = canon(s)
        if ev["kind"] == "tool_call_failed":
            fails.append(ev)
    assert len(fails) == edits
    assert {tuple(ev["paths"]) for ev in fails} == {tuple(fails[0]["paths"])}
    assert all(ev["outcome"]["class"] == "string_mismatch" for ev in fails)
    assert all(ev["content"]["error"].startswith("String to replace not found") for ev in fails)


# -- model and text ------------------------------------------------------------------


def test_every_table_records_its_provenance() -> None:
    tables = M.describe()
    assert len(tables) > 40
    for t in tables:
        assert t["provenance"].startswith(("seed doc:", "assumed")), t["name"]


def test_seed_numbers_are_in_the_model() -> None:
    assert M.PROVIDER_MIX.share("claude_code") == pytest.approx(0.70)
    assert M.CLAUDE_SOURCE.share("transcript") == pytest.approx(0.45)
    assert M.TOOL_MIX.share("shell") == pytest.approx(0.705)
    assert M.SHELL_OUTPUT.at(0.5) == 1200 and M.SHELL_OUTPUT.at(0.9) == 13600 and M.SHELL_OUTPUT.at(1.0) == 32000
    assert M.FILE_SIZE.at(0.5) == 11800 and M.FILE_SIZE.at(0.9) == 47000
    assert M.PROMPT.at(0.5) == 32 and M.PROMPT.at(0.9) == 5000 and M.PROMPT.at(1.0) == 11000
    assert M.DURATION_MS["shell"].at(0.5) == 40 and M.DURATION_MS["shell"].at(0.99) == 62000
    assert M.THINK_TIME_S.at(0.5) == 0.7 and M.THINK_TIME_S.at(0.99) == 80 and M.THINK_TIME_S.at(1.0) == 600
    assert M.TOOL_CALLS_PER_TURN.at(0.5) == 60 and M.TOOL_CALLS_PER_TURN.at(1.0) == 900
    assert M.EXTENSIONS.share("rs") == pytest.approx(0.82)
    assert M.PATH_DEPTH.share("4") == pytest.approx(0.91)


def test_quota_tracks_the_shares() -> None:
    import random

    q = M.PROVIDER_MIX.quota()
    rng = random.Random(1)
    counts = Counter(q.pick(rng) for _ in range(100))
    assert counts == Counter({"claude_code": 70, "codex": 20, "cursor": 7, "gemini_cli": 3})


def test_text_has_no_failure_or_secret_words() -> None:
    import random

    src = TextSource(123)
    rng = random.Random(0)
    for genre in GENRES:
        text = src.text(genre, 200_000, rng)
        low = text.lower()
        for bad in ("not found", "no such file", "timeout", "timed out", "interrupted", "cancel", "abort",
                    "denied", "exit code", "password", "secret", "token =", "token:", "api_key"):
            assert bad not in low, (genre, bad)
        assert classify(text[:5000], category="shell", command="make", command_category="build", exit_code=2)["class"] == "build_error"  # no line says more


def test_text_sizes() -> None:
    import random

    src = TextSource(1)
    rng = random.Random(2)
    for size in (0, 1, 40, 999, 12_345):
        assert len(src.text("shell", size, rng)) == size


# -- the loader ---------------------------------------------------------------------


def test_load_writes_verifiable_logs(agentlog_home: Path) -> None:
    result = load(500, 6, root=str(agentlog_home), batch=64)
    assert result["samples"] == 500 and result["events"] > 500  # the importer's usage events besides
    logs = sorted((agentlog_home / "logs").rglob("*.jsonl"))
    assert len(logs) == result["sessions"]
    frames = 0
    for p in logs:
        report = verify_log(str(p))
        assert report.status == "intact", report
        frames += report.frames
    assert frames == result["events"]
    assert result["bytes_written"] == sum(p.stat().st_size + p.with_suffix(".head").stat().st_size for p in logs)
    assert result["json_bytes"] == sum(len(dumps_bytes(json.loads(line)["event"])) for p in logs
                                       for line in p.read_bytes().splitlines())
    # the frames hold exactly the canonical events of the stream, in order per session: the hook's,
    # and the importer's of the transcript sessions
    want: dict[str, list[bytes]] = {}
    with Canonicalizer() as canon:
        for s in generate(500, 6):
            for ev in canon(s):
                want.setdefault(ev["provider_session_id"], []).append(dumps_bytes(ev))
        for _, ev in canon.imported():
            want.setdefault(ev["provider_session_id"], []).append(dumps_bytes(ev))
    assert any(e["attrs"].get("reconstructed") for evs in want.values() for e in map(json.loads, evs))
    for p in logs:
        got = [json.loads(line)["event"] for line in p.read_bytes().splitlines()]
        assert [dumps_bytes(e) for e in got] == want[got[0]["provider_session_id"]]


def test_load_with_workers_writes_the_same_logs(tmp_path: Path) -> None:
    one = load(300, 12, root=str(tmp_path / "one"), batch=50, jobs=1)
    two = load(300, 12, root=str(tmp_path / "two"), batch=50, jobs=2)
    assert one["events"] == two["events"] > 300 and one["sessions"] == two["sessions"]
    assert one["json_bytes"] == two["json_bytes"] and one["bytes_written"] == two["bytes_written"]
    # the logs; not the import's offsets (state/import.json: each process's scratch files, inodes, times)
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one" / "logs").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "two") for p in (tmp_path / "two" / "logs").rglob("*")
                           if p.is_file())
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes(), f


def test_cli_load_refuses_a_data_root_with_logs(agentlog_home: Path) -> None:
    r = CliRunner().invoke(cli, ["bench", "load", "--events", "40", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["samples"] == 40 and data["events"] >= 40 and data["bytes_written"] > 0
    r = CliRunner().invoke(cli, ["bench", "load", "--events", "40"])
    assert r.exit_code == 2 and "--append" in r.output
    r = CliRunner().invoke(cli, ["bench", "load", "--events", "40", "--append", "--seed", "3"])
    assert r.exit_code == 0, r.output
    assert "events/s" in r.stdout


# -- calibration on 40,000 events (the targets) ------------------------------


@pytest.fixture(scope="module")
def calibration() -> dict[str, Any]:
    problems: list[str] = []

    def check(sample: dict[str, Any], ev: dict[str, Any]) -> None:
        try:
            Event.from_wire(ev)
        except Exception as e:  # collect, do not stop the pass
            problems.append(f"{sample['n']}: {e}")
        if ev["kind"] != sample["kind"] and ev["kind"] not in EXTRA_KINDS:
            problems.append(f"{sample['n']}: {sample['profile']} gave {ev['kind']}, promised {sample['kind']}")

    result = calibrate(40_000, on_event=check)
    result["problems"] = problems
    return result


@pytest.mark.slow
def test_40k_every_event_valid_and_as_promised(calibration: dict[str, Any]) -> None:
    kinds = calibration["kinds"]
    assert calibration["canonical_events"] - sum(kinds.get(k, {}).get("count", 0) for k in EXTRA_KINDS) == 40_000
    assert calibration["problems"] == []
    assert calibration["kind_mismatches"] == 0


@pytest.mark.slow
def test_40k_kind_mix_within_1_5_points_of_the_seed(calibration: dict[str, Any]) -> None:
    kinds = calibration["kinds"]
    # the kinds the samples promise (the seed's reconstructions made no usage events: the importer's
    # are left out of the shares, as they are of attemptdb's)
    promised = sum(v["count"] for k, v in kinds.items() if k not in EXTRA_KINDS)
    for kind, seed_share in M.SEED_KIND_SHARES.items():
        share = 100.0 * kinds.get(kind, {}).get("count", 0) / promised
        assert abs(share - seed_share) <= 1.5, (kind, share, seed_share)


@pytest.mark.slow
def test_40k_bytes_per_event_and_zstd_ratio(calibration: dict[str, Any]) -> None:
    assert abs(calibration["mean_json_bytes"] - 11_700) <= 1_170, calibration["mean_json_bytes"]
    assert 7.5 <= calibration["zstd3_ratio"] <= 10, calibration["zstd3_ratio"]


@pytest.mark.slow
def test_40k_chain_exactly_once(calibration: dict[str, Any]) -> None:
    assert calibration["chain"]["failed_edits"] == 200
    assert len(calibration["chain"]["paths"]) == 1
