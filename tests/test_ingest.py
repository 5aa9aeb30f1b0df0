"""`agentlog ingest`: session logs → the Delta table `events`."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentlog.core.fastjson import dumps_bytes
from agentlog.log.writer import open_session_log
from agentlog.store.ingest import OFFSETS_NAME, ingest
from agentlog.store.schema import EVENTS_SCHEMA, read_events

T0 = 1_780_000_000_000_000  # µs


def wire(sid: str, i: int, provider: str = "claude_code") -> dict[str, Any]:
    return {
        "event_id": f"{sid}-{i:06d}",
        "schema_version": 1,
        "kind": "tool_call_finished",
        "provider": provider,
        "provider_event_name": "PostToolUse",
        "observed_at": T0 + i * 3_600_000_000,  # an hour apart: several day partitions
        "captured_at": T0 + i * 3_600_000_000 + 5,
        "capture_mode": "full",
        "agentlog_version": "0.1.0",
        "provider_session_id": sid,
        "tool": {"name": "Bash", "category": "shell", "call_id": f"call-{i}"},
        "paths": [f"src/f{i}.py", "README.md"],
        "outcome": {"status": "failure", "class": "nonzero_exit", "exit_code": i % 7},
        "duration_ms": i * 10,
        "project": {"root": "/p", "name": "p", "branch": "main"},
        "attrs": {"n": i},
        "content": {"command": f"echo {i:04d}", "tool_output": "é" * (i % 5)},
        "raw": {"tool_input": {"command": f"echo {i:04d}"}},
    }


def append(root: str, sid: str, start: int, n: int) -> None:
    log = open_session_log(root, "claude_code", sid, durability="relaxed")
    log.append([dumps_bytes(wire(sid, i)) for i in range(start, start + n)])


def log_file(root: str, sid: str) -> Path:
    return Path(root, "logs", "claude_code", f"{sid}.jsonl")


def frames(root: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for f in sorted(Path(root, "logs").glob("*/*.jsonl")):
        for line in f.read_bytes().splitlines():
            out.append((f.stem, json.loads(line)))
    return out


def rows(root: str) -> list[dict[str, Any]]:
    return sorted(read_events(root).to_pylist(), key=lambda r: (r["log_key"], r["seq"]))


@pytest.fixture
def root(agentlog_home: Path) -> str:
    return str(agentlog_home)


def test_ingest_twice_equals_once(root: str) -> None:
    append(root, "sa", 0, 40)
    append(root, "sb", 0, 25)
    first = ingest(root)
    assert (first.events, first.logs_seen, first.logs_advanced, first.commits) == (65, 2, 2, 1)
    assert first.breaks == [] and not first.busy
    before = rows(root)
    assert len(before) == 65
    second = ingest(root)
    assert (second.events, second.commits, second.logs_advanced) == (0, 0, 0)
    assert second.table_version == first.table_version
    assert rows(root) == before


def test_grown_log_ingests_only_new_frames(root: str) -> None:
    append(root, "sa", 0, 30)
    append(root, "sb", 0, 10)
    assert ingest(root).events == 40
    append(root, "sa", 30, 17)
    rep = ingest(root, batch_bytes=4096)  # small batches: several commits
    assert rep.events == 17 and rep.logs_advanced == 1 and rep.commits > 1
    got = rows(root)
    assert len(got) == len(frames(root)) == 57
    assert len({r["event_id"] for r in got}) == 57
    for key, n in (("sa", 47), ("sb", 10)):
        assert [r["seq"] for r in got if r["log_key"] == key] == list(range(n))
    # log_offset points at each frame's first byte
    data = log_file(root, "sa").read_bytes()
    for r in got[:47]:
        line = data[r["log_offset"] : data.index(b"\n", r["log_offset"])]
        assert json.loads(line)["hash"] == r["frame_hash"]


def test_torn_tail_waits(root: str) -> None:
    append(root, "sa", 0, 5)
    with open(log_file(root, "sa"), "ab") as f:
        f.write(b'{"v":1,"prev":"')
    rep = ingest(root)
    assert rep.events == 5 and rep.breaks == []


def test_rows_equal_events_field_by_field(root: str) -> None:
    import duckdb

    from agentlog.bench.workload.load import load

    loaded = load(400, root=root)  # 400 samples; the importer adds usage events to the transcripts'
    assert loaded["samples"] == 400 and loaded["events"] >= 400
    rep = ingest(root)
    assert rep.breaks == [] and rep.events == loaded["events"]
    table = read_events(root)
    assert table.num_rows == loaded["events"]
    by_id = {r["event_id"]: r for r in table.to_pylist()}
    evs = {fr["event"]["event_id"]: (key, fr) for key, fr in frames(root)}
    assert set(by_id) == set(evs)
    rng = random.Random(7)
    for eid in rng.sample(sorted(evs), 60):
        key, fr = evs[eid]
        ev, r = fr["event"], by_id[eid]
        assert r["log_key"] == key and r["seq"] == fr["seq"] and r["frame_hash"] == fr["hash"]
        for name in ("kind", "provider", "provider_event_name", "capture_mode", "agentlog_version",
                     "provider_version", "provider_session_id", "provider_turn_id", "duration_ms"):
            assert r[name] == ev.get(name), name
        assert r["schema_version"] == ev["schema_version"]
        assert int(r["observed_at"].timestamp() * 1_000_000) == ev["observed_at"]
        assert int(r["captured_at"].timestamp() * 1_000_000) == ev["captured_at"]
        assert str(r["observed_date"]) == r["observed_at"].date().isoformat()
        for col, (obj, sub) in {"agent_id": ("agent", "agent_id"), "agent_type": ("agent", "agent_type"),
                                "model": ("agent", "model"), "tool_name": ("tool", "name"),
                                "tool_category": ("tool", "category"), "tool_call_id": ("tool", "call_id"),
                                "outcome_status": ("outcome", "status"), "outcome_class": ("outcome", "class"),
                                "exit_code": ("outcome", "exit_code"), "project_root": ("project", "root"),
                                "project_name": ("project", "name"), "project_remote": ("project", "remote"),
                                "project_branch": ("project", "branch"),
                                "project_head": ("project", "head")}.items():
            assert r[col] == (ev.get(obj) or {}).get(sub), col
        assert r["paths"] == ev.get("paths", [])
        assert (None if r["attrs"] is None else json.loads(r["attrs"])) == ev.get("attrs")
        # the event column holds the event exactly as the frame does (the bytes its hash covers)
        (log,) = Path(root, "logs").glob(f"*/{key}.jsonl")
        line = next(l for l in log.read_bytes().splitlines(keepends=True)
                    if f'"seq":{fr["seq"]},'.encode() in l[:100])
        assert r["event"].encode("utf-8") == line[line.index(b',"event":') + 9 : line.rindex(b',"hash":"')]

    arrow = table  # noqa: F841 - duckdb finds it by name
    got = duckdb.sql(
        "select event_id, json_extract_string(event, '$.content.command') as cmd from arrow"
    ).fetchall()
    expect = {eid: ((fr["event"].get("content") or {}).get("command")) for eid, (_, fr) in evs.items()}
    assert dict(got) == expect
    assert any(v is not None for v in expect.values())
    n = duckdb.sql("select count(*) from arrow where tool_category = 'shell' and exit_code is not null").fetchall()
    assert n[0][0] == sum(
        1 for _, fr in evs.values()
        if (fr["event"].get("tool") or {}).get("category") == "shell"
        and (fr["event"].get("outcome") or {}).get("exit_code") is not None
    )
    assert set(EVENTS_SCHEMA.names) == set(table.schema.names)


def flip(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert data.count(old) == 1 and len(old) == len(new)
    path.write_bytes(data.replace(old, new))


def test_tampered_frame_breaks_that_log_only(root: str) -> None:
    append(root, "sa", 0, 20)
    append(root, "sb", 0, 20)
    flip(log_file(root, "sa"), b'"content":{"command":"echo 0007"', b'"content":{"command":"echo 0x07"')
    rep = ingest(root)
    assert rep.events == 27
    assert [(b["log"], b["seq"], b["line"], b["reason"]) for b in rep.breaks] == [
        ("claude_code/sa", 7, 8, "bad_hash")
    ]
    data = log_file(root, "sa").read_bytes()
    assert rep.breaks[0]["offset"] == len(b"".join(data.splitlines(keepends=True)[:7]))
    saved = json.loads(Path(root, "state", "ingest-breaks.json").read_text())
    assert saved == rep.breaks
    got = rows(root)
    assert [r["seq"] for r in got if r["log_key"] == "sa"] == list(range(7))
    assert [r["seq"] for r in got if r["log_key"] == "sb"] == list(range(20))
    # the other log keeps ingesting; the broken one stays stopped and reported
    append(root, "sb", 20, 5)
    again = ingest(root)
    assert again.events == 5 and [b["seq"] for b in again.breaks] == [7]
    env = {**os.environ, "AGENTLOG_HOME": root}
    proc = subprocess.run([sys.executable, "-m", "agentlog", "ingest", "--json"], env=env,
                          capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["breaks"][0]["reason"] == "bad_hash"


def test_ingested_prefix_edited_is_reported(root: str) -> None:
    append(root, "sa", 0, 12)
    append(root, "sb", 0, 12)
    assert ingest(root).events == 24
    flip(log_file(root, "sa"), b'"content":{"command":"echo 0011"', b'"content":{"command":"echo 0x11"')
    append(root, "sb", 12, 3)
    rep = ingest(root)
    assert rep.events == 3
    assert [(b["log"], b["seq"], b["reason"]) for b in rep.breaks] == [
        ("claude_code/sa", 11, "ingested_prefix_changed")
    ]
    # a log cut shorter than what was ingested
    log_file(root, "sb").write_bytes(b"")
    rep = ingest(root)
    assert {(b["log"], b["reason"]) for b in rep.breaks} == {
        ("claude_code/sa", "ingested_prefix_changed"), ("claude_code/sb", "log_shorter_than_ingested")
    }


def test_offsets_cache_rebuilt_from_delta_history(root: str) -> None:
    append(root, "sa", 0, 30)
    ingest(root, batch_bytes=2000)
    cache = Path(root, "state", OFFSETS_NAME)
    good = json.loads(cache.read_text())
    cache.unlink()
    append(root, "sa", 30, 3)
    assert ingest(root).events == 3
    # a cache that is stale by version (crash between commit and cache write)
    stale = {"version": 0, "logs": {"claude_code/sa": good["logs"]["claude_code/sa"][:2] + ["0" * 64]}}
    cache.write_text(json.dumps(stale))
    append(root, "sa", 33, 2)
    rep = ingest(root)
    assert rep.events == 2 and rep.breaks == []
    got = rows(root)
    assert [r["seq"] for r in got] == list(range(35))


def test_busy_lock_returns_quickly(root: str) -> None:
    import fcntl

    append(root, "sa", 0, 3)
    os.makedirs(Path(root, "state"), exist_ok=True)
    with open(Path(root, "state", "ingest.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        rep = ingest(root, lock_timeout=0.2)
    assert rep.busy and rep.events == 0
    assert ingest(root).events == 3


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_and_duplicates_nothing(root: str, tmp_path: Path) -> None:
    rng = random.Random(20261130)
    env = {**os.environ, "AGENTLOG_HOME": root}
    argv = [sys.executable, "-m", "agentlog", "ingest", "--json", "--batch-bytes", "3000"]
    sids = ["s0", "s1", "s2", "s3"]
    counts = dict.fromkeys(sids, 0)
    cache = Path(root, "state", OFFSETS_NAME)
    killed = 0
    # at least 100 rounds and 20 kills mid-ingest (how many ingests a sleep outlasts
    # depends on the machine's speed and load: more rounds where they finish early)
    for rnd in range(300):
        if rnd >= 100 and killed >= 20:
            break
        for sid in rng.sample(sids, 2):
            n = rng.randint(1, 12)
            append(root, sid, counts[sid], n)
            counts[sid] += n
        if rnd % 5 == 3 and cache.exists():
            cache.unlink()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.15, 0.9))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=30)
    assert killed >= 20
    final = subprocess.run([sys.executable, "-m", "agentlog", "ingest", "--json"], env=env,
                           capture_output=True, timeout=60)
    assert final.returncode == 0, final.stderr
    fresh = str(tmp_path / "fresh")
    shutil.copytree(Path(root, "logs"), Path(fresh, "logs"))
    assert ingest(fresh).breaks == []
    live, ref = rows(root), rows(fresh)
    total = sum(counts.values())
    assert len(live) == len(ref) == total
    assert sorted(r["event_id"] for r in live) == sorted(r["event_id"] for r in ref)
    assert len({r["event_id"] for r in live}) == total


def append_raw(root: str, sid: str, events: list[dict[str, Any]]) -> None:
    log = open_session_log(root, "claude_code", sid, durability="relaxed")
    log.append([dumps_bytes(ev) for ev in events])


def test_wrongly_typed_field_breaks_that_frame_on_the_careful_path(root: str) -> None:
    """A wrong type in an optional field is caught by Arrow for the whole batch;
    ingest then redoes the run row by row and names the frame."""
    bad = wire("sa", 5)
    bad["duration_ms"] = "12"  # a string where an integer belongs
    append_raw(root, "sa", [wire("sa", i) for i in range(5)] + [bad] + [wire("sa", 6)])
    append(root, "sb", 0, 8)
    rep = ingest(root)
    assert rep.careful
    assert [(b["log"], b["seq"], b["reason"]) for b in rep.breaks] == [("claude_code/sa", 5, "duration_ms is not an integer")]
    got = rows(root)
    assert [r["seq"] for r in got if r["log_key"] == "sa"] == list(range(5))
    assert [r["seq"] for r in got if r["log_key"] == "sb"] == list(range(8))
    assert rep.events == 13


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda ev: ev.pop("kind"), "missing_required_field"),
        (lambda ev: ev.update(observed_at=True), "missing_required_field"),
        (lambda ev: ev.update(paths="src/a.py"), "paths is not a list"),
        (lambda ev: ev.update(attrs=[1]), "attrs is not an object"),
        (lambda ev: ev.update(tool={"name": 7}), "tool.name is not a string"),
        (lambda ev: ev.update(schema_version=1 << 20), "schema_version is out of range"),
    ],
)
def test_bad_fields_are_named(root: str, mutate: Any, reason: str) -> None:
    bad = wire("sa", 1)
    mutate(bad)
    append_raw(root, "sa", [wire("sa", 0), bad])
    rep = ingest(root)
    assert [(b["seq"], b["reason"]) for b in rep.breaks] == [(1, reason)]
    assert [r["seq"] for r in rows(root)] == [0]


def test_nested_keys_named_like_the_tail_do_not_fool_the_head_parser(root: str) -> None:
    """``attrs`` holding keys called content/raw: the cut lands inside attrs,
    the head does not parse, the whole event is parsed instead."""
    ev = wire("sa", 0)
    ev["attrs"] = {"content": {"x": 1}, "raw": 2, "s": ',"content":'}
    no_tail = wire("sa", 1)
    del no_tail["content"], no_tail["raw"]
    only_raw = wire("sa", 2)
    del only_raw["content"]
    append_raw(root, "sa", [ev, no_tail, only_raw])
    rep = ingest(root)
    assert rep.breaks == [] and not rep.careful
    got = rows(root)
    assert [json.loads(r["attrs"]) for r in got] == [ev["attrs"], no_tail["attrs"], only_raw["attrs"]]
    assert [r["tool_name"] for r in got] == ["Bash"] * 3
    assert [json.loads(r["event"]) for r in got] == [ev, no_tail, only_raw]


def test_lone_surrogates_in_head_fields_are_cleaned(root: str) -> None:
    ev = {}
    for k, v in wire("sa", 0).items():  # canonical key order: the turn id before content
        ev[k] = v
        if k == "provider_session_id":
            ev["provider_turn_id"] = "turn-\ud800"
    ev["content"] = {"command": "x\udfff"}
    append_raw(root, "sa", [ev])
    rep = ingest(root)
    assert rep.breaks == []
    (r,) = rows(root)
    assert r["provider_turn_id"] == "turn-\ufffd"
    assert json.loads(r["event"])["content"]["command"] == "x\udfff"  # the event keeps its exact bytes


def test_store_of_another_format_is_rebuilt(root: str) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from agentlog.store.schema import events_path

    append(root, "sa", 0, 4)
    write_deltalake(events_path(root), pa.table({"event_id": ["x"], "content": ["old"]}))
    rep = ingest(root)
    assert rep.store_reset and "another version" in rep.store_reset
    assert [r["seq"] for r in rows(root)] == [0, 1, 2, 3]
    assert not [p for p in os.listdir(Path(root)) if p.startswith("store.old")]


def test_ingest_reads_across_sealed_segments(root: str) -> None:
    """Positions are logical offsets: sealing never moves them, and a
    session that exists only as sealed segments ingests from them."""
    from agentlog.log.seal import seal_log
    from agentlog.store.rebuild import differential_verify

    append(root, "sa", 0, 10)
    append(root, "sb", 0, 6)
    assert ingest(root).events == 16
    assert seal_log(str(log_file(root, "sa"))).status == "sealed"
    assert log_file(root, "sa").stat().st_size == 0
    rep = ingest(root)  # nothing new, and no break for the emptied active file
    assert (rep.events, rep.breaks) == (0, [])
    append(root, "sa", 10, 5)  # resumes the chain in the active file
    append(root, "sc", 0, 7)
    assert seal_log(str(log_file(root, "sc"))).status == "sealed"  # never ingested: only sealed
    rep = ingest(root)
    assert rep.breaks == [] and rep.events == 12
    got = rows(root)
    for key, n in (("sa", 15), ("sb", 6), ("sc", 7)):
        assert [r["seq"] for r in got if r["log_key"] == key] == list(range(n))
    # the log offset of a sealed frame is its logical offset: the same as before sealing
    sa = [r["log_offset"] for r in got if r["log_key"] == "sa"]
    assert sa == sorted(sa) and sa[0] == 0
    assert differential_verify(root).ok


def test_daemon_seals_only_what_the_store_has_ingested(root: str) -> None:
    from agentlog.operations.daemon import ingested_through
    from agentlog.log.segments import logical_size

    append(root, "sa", 0, 4)
    append(root, "sb", 0, 4)
    ingest(root)
    append(root, "sb", 4, 2)
    may = ingested_through(root)
    assert may("claude_code", "sa", logical_size(str(log_file(root, "sa"))))
    assert not may("claude_code", "sb", logical_size(str(log_file(root, "sb"))))
    assert not may("claude_code", "never", 1)


def test_cli_careful_and_relaxed(root: str) -> None:
    append(root, "sa", 0, 6)
    env = {**os.environ, "AGENTLOG_HOME": root}
    proc = subprocess.run([sys.executable, "-m", "agentlog", "ingest", "--careful", "--durability", "relaxed", "--json"],
                          env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["events"] == 6 and out["breaks"] == [] and not out["careful"]  # asked for, not forced by an error
    assert [r["seq"] for r in rows(root)] == list(range(6))


def test_catch_up_does_not_wait_for_a_running_ingest(root: str) -> None:
    from agentlog.store.ingest import acquire_lock, catch_up

    append(root, "sa", 0, 3)
    lock = acquire_lock(root, 1.0)
    try:
        t0 = time.monotonic()
        rep = catch_up(root)
        assert rep.busy and time.monotonic() - t0 < 1.0
    finally:
        assert lock is not None
        os.close(lock)
    assert catch_up(root).events == 3


def test_store_and_projection_files_are_private_whatever_the_umask(agentlog_home: Path) -> None:
    """Issue 27, finding 21: the store's Parquet files were 0644 in 0755 directories (private
    only because store/ itself is 0700). Everything ingest, refresh and compact create is
    0600/0700 even under umask 022."""
    import stat

    from agentlog.projection.persist import refresh
    from agentlog.store.compact import compact
    from import_support import record_prompt

    root = str(agentlog_home)
    for i in range(3):
        record_prompt(root, f"private-{i}", f"prompt {i}")
    old = os.umask(0o022)
    try:
        ingest(root, durability="relaxed")
        refresh(root)
        compact(root, grace_hours=0)
    finally:
        os.umask(old)
    loose = []
    for base in ("store", "projection"):
        for dirpath, dirs, files in os.walk(os.path.join(root, base)):
            for name in dirs + files:
                mode = stat.S_IMODE(os.stat(os.path.join(dirpath, name)).st_mode)
                if mode & 0o077:
                    loose.append((os.path.join(dirpath, name), oct(mode)))
    assert loose == []


def test_times_centuries_away_are_ingested_with_their_day(root: str) -> None:
    """An event time beyond ±2^53 µs of 1970 (an imported transcript's year 1194, a correction)
    once failed the whole batch converting it to a day through float64 (found by the fuzz pass)."""
    events = [wire("sfar", i) for i in range(3)]
    events[0]["observed_at"] = events[0]["captured_at"] = -24_490_957_174_999_826
    events[1]["observed_at"] = events[1]["captured_at"] = 9_007_199_254_740_993 * 10
    append_raw(root, "sfar", events)
    report = ingest(root)
    assert report.events == 3 and report.breaks == []
    days = {r["seq"]: r["observed_date"] for r in rows(root)}
    import datetime as dt

    assert days[0] == dt.date(1970, 1, 1) + dt.timedelta(days=-24_490_957_174_999_826 // 86_400_000_000)
    assert days[1] == dt.date(1970, 1, 1) + dt.timedelta(days=9_007_199_254_740_993 * 10 // 86_400_000_000)
