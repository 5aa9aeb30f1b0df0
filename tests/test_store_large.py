"""A store of >= 300k benchmark events with large content: filtered and
unfiltered queries both succeed (attemptdb crashed with "byte array offset
overflow" on any filtered query past ~400k events).

By construction no string column can overflow: ``event`` and ``attrs`` are
``large_string`` (64-bit offsets) in the table schema and in what
``read_events`` returns. The test also builds the case: the event column of
the whole store is combined into ONE Arrow chunk holding more than 2 GiB and
queried through DuckDB, and DuckDB's own Parquet reader scans the files.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from agentlog.log.layout import iter_logs, split_log_path
from agentlog.log.writer import open_session_log
from agentlog.store.ingest import ingest
from agentlog.store.schema import EVENTS_SCHEMA, events_path, read_events

TARGET_EVENTS = 300_000
TWO_GIB = 2**31


def test_string_columns_have_64_bit_offsets() -> None:
    assert EVENTS_SCHEMA.field("event").type == pa.large_string()
    assert EVENTS_SCHEMA.field("attrs").type == pa.large_string()


def _replicate(src: str, dst: str, copies: int) -> int:
    """Write ``copies`` renamed copies of every session of ``src`` into ``dst`` (fresh ids, re-chained)."""
    n = 0
    for log in iter_logs(src):
        provider, key = split_log_path(log)
        events = []
        with open(log, "rb") as f:
            for line in f:
                j = line.index(b',"event":') + len(b',"event":')
                events.append(orjson.loads(line[j : line.rindex(b',"hash":"')]))
        for c in range(copies):
            batch = []
            for ev in events:
                ev = dict(ev)
                ev["event_id"] = f"{ev['event_id']}-c{c}"
                if ev.get("provider_session_id"):
                    ev["provider_session_id"] = f"{ev['provider_session_id']}-c{c}"
                batch.append(orjson.dumps(ev))
            sink = open_session_log(dst, provider, f"{key}-c{c}", durability="relaxed")
            for i in range(0, len(batch), 2000):
                sink.append(batch[i : i + 2000])
            n += len(batch)
    return n


@pytest.mark.slow
def test_queries_over_300k_events_past_2_gib(tmp_path: Path) -> None:
    import duckdb

    from agentlog.bench.workload.load import load

    seed_root, root = str(tmp_path / "seed"), str(tmp_path / "root")
    load(20_000, root=seed_root, jobs=2)
    written = _replicate(seed_root, root, copies=16)
    assert written >= TARGET_EVENTS
    rep = ingest(root, durability="relaxed")
    assert rep.breaks == [] and rep.events == written

    # unfiltered, all in one chunk of more than 2 GiB
    table = read_events(root, columns=["event_id", "kind", "event"])
    assert table.num_rows == written
    assert table.schema.field("event").type == pa.large_string()
    event = table.column("event").combine_chunks()
    import pyarrow.compute as pc

    assert event.type == pa.large_string()
    assert pc.sum(pc.binary_length(event)).as_py() > TWO_GIB  # one chunk holding more than 2 GiB of text
    one = pa.table({"kind": table.column("kind").combine_chunks(), "event": event})
    del table, event
    con = duckdb.connect()
    con.register("one", one)
    total, nbytes = con.execute("select count(*), sum(strlen(event)) from one").fetchall()[0]
    assert total == written and nbytes > TWO_GIB
    # filtered, with the JSON of the large events read
    failed, commands = con.execute(
        "select count(*), count(json_extract_string(event, '$.content.command')) from one "
        "where kind in ('tool_call_failed', 'tool_call_finished') and json_extract_string(event, '$.tool.category') = 'shell'"
    ).fetchall()[0]
    assert failed > 1000 and commands > 0
    del one
    con.unregister("one")

    # DuckDB's own Parquet reader over the store's files, filtered and not
    files = [os.path.join(d, f) for d, _, fs in os.walk(events_path(root)) for f in fs if f.endswith(".parquet")]
    scan = f"read_parquet({files!r}, hive_partitioning = true)"
    n, big = con.execute(f"select count(*), sum(strlen(event)) from {scan}").fetchall()[0]
    assert n == written and big > TWO_GIB
    hits = con.execute(
        f"select count(*) from {scan} where kind = 'tool_call_failed' and event like '%\"exit_code\"%'"
    ).fetchall()[0][0]
    assert hits > 0
