"""`agentlog rebuild` and `status --verify`: the store is derived and checkable."""

from __future__ import annotations

import json
import random
from pathlib import Path

from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.store.ingest import ingest
from agentlog.store.rebuild import differential_verify, rebuild
from agentlog.store.schema import events_path, read_events

from test_status import _write

KEYS = ["log_provider", "log_key", "seq", "event_id", "frame_hash", "event", "observed_at"]


def rows(root: Path) -> list[tuple]:
    t = read_events(str(root), columns=KEYS)
    return sorted(zip(*[t.column(c).to_pylist() for c in KEYS]))


def test_rebuild_equals_incremental_ingest_in_any_order_of_arrival(agentlog_home: Path) -> None:
    rng = random.Random(5)
    counts = {s: 0 for s in ("s1", "s2", "s3", "s4")}
    base = {"s1": 0, "s2": 1000, "s3": 2000, "s4": 3000}
    for _ in range(12):  # logs grow in random order, ingest at random moments
        sid = rng.choice(list(counts))
        n = rng.randint(1, 6)
        _write(agentlog_home, sid, base[sid] + counts[sid], n)
        counts[sid] += n
        if rng.random() < 0.5:
            ingest(str(agentlog_home))
    ingest(str(agentlog_home))
    incremental = rows(agentlog_home)
    assert len(incremental) == sum(counts.values())
    report = rebuild(str(agentlog_home))
    assert report.events == sum(counts.values()) and report.breaks == []
    assert rows(agentlog_home) == incremental
    assert not list(agentlog_home.glob("store.rebuild-*"))  # the old store is gone


def test_status_verify_passes_then_catches_missing_and_extra_rows(agentlog_home: Path) -> None:
    _write(agentlog_home, "a", 0, 6)
    _write(agentlog_home, "b", 100, 4)
    r = CliRunner().invoke(cli, ["status", "--verify", "--json"])
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)["verify"]
    assert v == {"ok": True, "live_rows": 10, "rebuilt_rows": 10, "missing": 0, "extra": 0, "examples": []}

    from deltalake import DeltaTable, write_deltalake

    path = events_path(str(agentlog_home))
    DeltaTable(path).delete("seq = 2")  # two rows lost (one per log)
    comparison = differential_verify(str(agentlog_home))
    assert not comparison.ok and comparison.missing == 2 and comparison.extra == 0

    dup = read_events(str(agentlog_home)).slice(0, 1)
    write_deltalake(path, dup, mode="append", partition_by=["observed_date"])  # one row twice
    r = CliRunner().invoke(cli, ["status", "--verify", "--no-ingest", "--json"])
    assert r.exit_code == 1
    v = json.loads(r.stdout)["verify"]
    assert v["missing"] == 2 and v["extra"] == 1 and {e["problem"] for e in v["examples"]} == {"missing", "extra"}

    r = CliRunner().invoke(cli, ["rebuild", "--json"])  # and a rebuild mends it
    assert r.exit_code == 0, r.output
    assert differential_verify(str(agentlog_home)).ok
