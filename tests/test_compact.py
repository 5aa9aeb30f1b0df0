"""`agentlog compact`: fewer files, same rows, replaced files vacuumed after the grace period."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.store.compact import compact
from agentlog.store.ingest import ingest, load_positions
from agentlog.store.rebuild import differential_verify

from test_rebuild import rows
from test_status import _write


def _many_small_ingests(home: Path, n: int = 12) -> None:
    for i in range(n):
        _write(home, f"s{i % 3}", i * 100, 3)
        ingest(str(home))


def test_compact_reduces_files_keeps_rows_and_positions(agentlog_home: Path) -> None:
    _many_small_ingests(agentlog_home)
    before_rows = rows(agentlog_home)
    positions_before = load_positions(str(agentlog_home))[0]
    dry = compact(str(agentlog_home), dry_run=True, grace_hours=0)
    assert dry.files_before >= 12 and dry.files_after == dry.files_before and dry.files_vacuumed == 0
    data_files = lambda: len(list((agentlog_home / "store").rglob("*.parquet")))  # noqa: E731
    on_disk_before = data_files()
    report = compact(str(agentlog_home), grace_hours=0)
    assert report.files_after < report.files_before
    assert report.files_rewritten >= report.files_before - 1
    assert report.files_vacuumed >= report.files_rewritten  # grace 0: replaced files deleted now
    assert data_files() < on_disk_before
    assert rows(agentlog_home) == before_rows
    # positions survive: they live in the ingest commits, which compaction keeps
    Path(agentlog_home, "state", "ingest-offsets.json").unlink()
    assert load_positions(str(agentlog_home))[0] == positions_before
    assert ingest(str(agentlog_home)).events == 0
    assert differential_verify(str(agentlog_home)).ok


def test_grace_period_keeps_replaced_files(agentlog_home: Path) -> None:
    _many_small_ingests(agentlog_home, 6)
    report = compact(str(agentlog_home), grace_hours=1)
    assert report.files_rewritten >= 5 and report.files_vacuumed == 0  # replaced just now: kept


def test_cli_compact_json(agentlog_home: Path) -> None:
    _many_small_ingests(agentlog_home, 4)
    r = CliRunner().invoke(cli, ["compact", "--grace-hours", "0", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["files_after"] <= out["files_before"] and out["dry_run"] is False


READER = r"""
import sys, time, json
sys.path.insert(0, sys.argv[1])
from agentlog.store.schema import read_events
root, stop_file = sys.argv[2], sys.argv[3]
import os
print(json.dumps({"ready": True}), flush=True)
while not os.path.exists(stop_file):
    try:
        ids = read_events(root, columns=["event_id"]).column("event_id").to_pylist()
        print(json.dumps({"n": len(ids), "unique": len(set(ids))}), flush=True)
    except Exception as e:
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
    time.sleep(0.02)
os._exit(0)
"""


def test_a_reader_never_sees_errors_partial_or_duplicated_rows(agentlog_home: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    from conftest import REPO

    _write(agentlog_home, "seed", 0, 3)
    ingest(str(agentlog_home))  # the table exists before the reader starts
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(REPO / "src"), str(agentlog_home), str(stop)],
        stdout=subprocess.PIPE, text=True,
    )
    # wait until the reader has imported everything and is reading: on a
    # loaded machine its start-up can outlast the whole write loop below
    assert reader.stdout is not None
    assert json.loads(reader.stdout.readline()) == {"ready": True}
    first = json.loads(reader.stdout.readline())
    committed = {3}
    total = 3
    for i in range(15):
        _write(agentlog_home, f"s{i % 4}", 1000 + i * 10, 4)
        ingest(str(agentlog_home))
        total += 4
        committed.add(total)
        if i % 5 == 4:
            # the default grace period: files a reader may still be reading stay
            assert compact(str(agentlog_home)).files_rewritten > 0
    stop.write_text("")
    out, _ = reader.communicate(timeout=60)
    reads = [first] + [json.loads(line) for line in out.splitlines()]
    assert len(reads) >= 5
    assert [r for r in reads if "error" in r] == []
    counts = [r["n"] for r in reads]
    assert all(r["n"] == r["unique"] for r in reads)  # never a duplicated row
    assert set(counts) <= committed  # never a partial commit
    assert counts == sorted(counts)  # never going back


COMPACTOR = r"""
import sys, os, json
sys.path.insert(0, sys.argv[1])
from agentlog.store.compact import compact
root, stop_file = sys.argv[2], sys.argv[3]
n = 0
while not os.path.exists(stop_file):
    r = compact(root, grace_hours=1)
    n += 1
print(json.dumps({"compactions": n}), flush=True)
os._exit(0)
"""


def test_compaction_runs_beside_ingest_without_losing_or_duplicating(agentlog_home: Path, tmp_path: Path) -> None:
    """Compaction takes its own lock: an ingest lands while it runs, Delta's
    optimistic commits order the two, and the positions stay right."""
    import subprocess
    import sys

    from conftest import REPO

    from agentlog.store.ingest import load_positions
    from agentlog.store.rebuild import differential_verify

    root = str(agentlog_home)
    _write(agentlog_home, "seed", 0, 3)
    ingest(root)
    stop = tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, "-c", COMPACTOR, str(REPO / "src"), root, str(stop)],
                            stdout=subprocess.PIPE, text=True)
    try:
        for i in range(20):
            _write(agentlog_home, f"s{i % 3}", 1000 + i * 10, 5)
            rep = ingest(root, lock_timeout=30)
            assert not rep.busy and rep.breaks == [] and rep.events == 5
    finally:
        stop.write_text("")
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert json.loads(out)["compactions"] >= 1
    cmp = differential_verify(root)
    assert cmp.ok and cmp.live_rows == 103, cmp
    positions, _, _ = load_positions(root)
    assert positions["claude_code/s0"].seq >= 0
    assert ingest(root).events == 0
