"""`agentlog bench team` at a tiny size: it starts moto's S3 server, s3rver (from npm, where node
and npm are found) and a Ray cluster, publishes, writes the 2x tables, runs every query on every
engine at both sizes (and duckdb's on s3rver), writes results.json and results.md, and every number
it measured is positive. Behaviour only: no time threshold."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")

pytestmark = pytest.mark.slow  # a Ray cluster and ~40 whole processes: about two minutes

ENGINES = {"duckdb", "daft", "daft-ray"}
QUERIES = 6  # the five org queries and the floor


def _numbers_positive(table: dict[str, object], allow_none: set[str]) -> None:
    columns = table["columns"]
    assert isinstance(columns, list)
    rows = table["rows"]
    assert isinstance(rows, list) and rows, table["title"]
    for row in rows:
        assert len(row) == len(columns)
        for column, cell in zip(columns, row):
            if cell is None:
                assert column in allow_none, (table["title"], column, row)
            elif isinstance(cell, (int, float)) and not isinstance(cell, bool):
                assert cell > 0, (table["title"], column, row)


def test_bench_team_runs_and_reports_positive_numbers(tmp_path: Path) -> None:
    pytest.importorskip("daft")
    pytest.importorskip("ray")
    pytest.importorskip("moto")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": SRC, "AGENTLOG_HOME": str(tmp_path / "home")}
    env.pop("AGENTLOG_DEBUG", None)
    r = subprocess.run([sys.executable, "-m", "agentlog", "bench", "team", "--events", "3000", "--scale", "2",
                        "--rounds", "1", "--out", str(out)], env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    assert str(out / "results.json") in r.stderr  # where the results are is said
    data = json.loads((out / "results.json").read_text())
    assert data["run"]["status"] == "complete"
    [step] = data["steps"]
    assert step["name"] == "team" and step["status"] == "ok", step.get("reason")
    result = step["result"]
    tables = {t["title"].split(" (")[0].split(":")[0]: t for t in result["tables"]}

    ranged = shutil.which("npm") is not None and shutil.which("node") is not None
    assert (out / "results.md").read_text().count("### Org queries at") == (3 if ranged else 2)
    publish = next(t for t in result["tables"] if t["title"].startswith("Publishing"))
    assert [row[0] for row in publish["rows"]] == ["S3 (moto's server on loopback)", "file:// (local directory)",
                                                   *(["S3 (s3rver on loopback)"] if ranged else [])]
    _numbers_positive(publish, set())
    assert {row[1] for row in publish["rows"]} == {result["metrics"]["events_1x"]}
    assert result["metrics"]["events_1x"] > 3000

    sizes = next(t for t in result["tables"] if t["title"].startswith("The 1x and 2x"))
    events = next(row for row in sizes["rows"] if row[0] == "events")
    assert events[4] == 2 * events[1]  # two machines' worth
    _numbers_positive({**sizes, "rows": [r for r in sizes["rows"] if r[0] != "memories"]}, set())

    for scale in ("1x", "2x"):
        table = next(t for t in result["tables"] if t["title"].startswith(f"Org queries at {scale} ("))
        assert len(table["rows"]) == QUERIES * len(ENGINES)
        assert {row[1] for row in table["rows"]} == ENGINES
        _numbers_positive(table, {"Ray workers peak MiB"})
        for row in table["rows"]:
            assert row[2] is not None, row  # ran: a time, not an error
            assert (row[5] is not None) == (row[1] == "daft-ray"), row
            if row[1] != "duckdb":
                assert row[7] == "yes", row  # the same rows as duckdb's
    growth = next(t for t in result["tables"] if t["title"].startswith("Growth"))
    assert len(growth["rows"]) == QUERIES * len(ENGINES)
    _numbers_positive(growth, set())
    on_s3rver = [t for t in result["tables"] if t["title"].startswith("Org queries at 1x on s3rver")]
    assert len(on_s3rver) == (1 if ranged else 0), result["raw"]["s3rver"] if "raw" in result else result
    for table in on_s3rver:
        assert len(table["rows"]) == QUERIES
        _numbers_positive(table, set())
        assert all(row[5] == "yes" for row in table["rows"]), table["rows"]  # the same rows as on moto
    goals = tables["Goals"]
    assert len(goals["rows"]) == (4 if ranged else 2) and all(isinstance(row[2], bool) for row in goals["rows"])
    assert result["metrics"]["publish_s3_events_per_s"] > 0 and result["metrics"]["publish_s3_mb_per_s"] > 0
