"""`agentlog bench ship` at tiny sizes: it runs end to end against a real vault, writes
ship.json and ship.md, and every number it measured is positive. Behaviour only: no
time threshold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

# Differences of two medians (a noisy machine may make them negative); every other cell is a measurement.
DIFFERENCE_COLUMNS = {"µs per session above the floor"}


def test_bench_ship_runs_and_reports_positive_numbers(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": SRC, "AGENTLOG_HOME": str(tmp_path / "home")}
    env.pop("AGENTLOG_DEBUG", None)
    r = subprocess.run([sys.executable, "-m", "agentlog", "bench", "ship", "--mb", "0.2", "--rounds", "1",
                        "--sessions-idle", "5", "--requests", "10", "--out", str(out), "--json"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "bench ship: ship round 1/1" in r.stderr  # progress goes to stderr
    printed = json.loads(r.stdout)
    saved = json.loads((out / "ship.json").read_text())
    assert printed["summary"] == saved["summary"]
    assert (out / "ship.md").read_text().startswith("# agentlog bench ship")

    assert set(saved["summary"]) == {
        "ship_one_mb_s", "ship_four_mb_s", "pull_mb_s", "zstd_mb_s", "aead_mb_s", "seal_mb_s", "open_mb_s",
        "head_rps_1", "head_rps_4", "post_rps_1", "post_rps_4", "vault_bytes_per_log_byte",
        "idle_pass_ms_in_process", "idle_pass_ms_whole_process",
    }
    assert all(isinstance(v, (int, float)) and v > 0 for v in saved["summary"].values()), saved["summary"]
    titles = [t["title"] for t in saved["tables"]]
    assert len(titles) == 4 and titles[0].startswith("Frame bytes shipped per second")
    for table in saved["tables"]:
        assert table["rows"]
        for row in table["rows"]:
            assert len(row) == len(table["columns"])
            for column, cell in zip(table["columns"], row):
                if isinstance(cell, (int, float)) and column not in DIFFERENCE_COLUMNS:
                    assert cell > 0, (table["title"], column, row)
    # what was shipped is what the vault was sent and the admin pulled: 5 sessions in the round
    assert saved["shipped_bytes"] == sum(saved["throughput"]["bytes"]["pull"]) > 5 * 0.2 * (1 << 20)
    assert saved["stored"]["blobs"] > 0 and saved["stored"]["database"] > 0
