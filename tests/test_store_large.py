"""A store of 200k benchmark events holding more than 2 GiB of event text: filtered and
unfiltered queries both succeed (attemptdb crashed with "byte array offset
overflow" on any filtered query past ~400k events, which is where its events
passed 2 GiB).

By construction no string column can overflow: ``event`` and ``attrs`` are
``large_string`` (64-bit offsets) in the table schema and in what
``read_events`` returns. The test also builds the case: the event column of
the whole store is put into ONE Arrow chunk holding more than 2 GiB and
queried through DuckDB, and DuckDB's own Parquet reader scans the files.

The chunk is built from the store's batches one at a time, so the test holds
the column once (2.3 GiB), not the table and a combined copy beside it (it
peaked at 8 GiB that way, the whole suite's high-water mark).
"""

from __future__ import annotations

import os
from array import array
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from agentlog.log.layout import iter_logs, split_log_path
from agentlog.log.writer import open_session_log
from agentlog.store.ingest import ingest
from agentlog.store.schema import EVENTS_SCHEMA, events_dataset, events_path, read_events

TARGET_EVENTS = 200_000
COPIES = 10
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


def _one_chunk(dataset: Any, rows: int) -> tuple[pa.Array, pa.Array]:
    """``kind`` and ``event`` of every row, each ONE array: ``event`` a large_string array
    whose data buffer grows batch by batch (a bytearray, so growing it remaps rather
    than copies), each batch dropped once copied."""
    data = bytearray()
    offsets = array("q", [0])
    kinds: list[pa.Array] = []
    for batch in dataset.to_batches(columns=["kind", "event"]):
        col = batch.column("event")
        assert col.type == pa.large_string() and col.null_count == 0
        _, off_buf, val_buf = col.buffers()
        off = array("q")
        off.frombytes(memoryview(off_buf)[col.offset * 8 : (col.offset + len(col) + 1) * 8])
        start, base = off[0], len(data)
        data += memoryview(val_buf)[start : off[-1]]
        offsets.extend(x - start + base for x in off[1:])
        kinds.append(batch.column("kind"))
        del batch, col, off_buf, val_buf
    assert len(offsets) == rows + 1
    event = pa.Array.from_buffers(pa.large_string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    event.validate(full=False)
    return pa.concat_arrays(kinds), event


@pytest.mark.slow
def test_queries_over_200k_events_past_2_gib(tmp_path: Path) -> None:
    import duckdb

    from agentlog.bench.workload.load import load

    seed_root, root = str(tmp_path / "seed"), str(tmp_path / "root")
    load(20_000, root=seed_root, jobs=2)
    written = _replicate(seed_root, root, copies=COPIES)
    assert written >= TARGET_EVENTS
    rep = ingest(root, durability="relaxed")
    assert rep.breaks == [] and rep.events == written
    pa.default_memory_pool().release_unused()  # what ingest's batches left in Arrow's pool

    # what read_events returns is widened (checked on a small column: the bulky ones are the same cast)
    assert read_events(root, columns=["attrs"]).schema.field("attrs").type == pa.large_string()

    # unfiltered, all in one chunk of more than 2 GiB
    kind, event = _one_chunk(events_dataset(root), written)
    assert isinstance(event, pa.LargeStringArray)  # one array: one chunk
    assert pc.sum(pc.binary_length(event)).as_py() > TWO_GIB  # one chunk holding more than 2 GiB of text
    one = pa.table({"kind": kind, "event": event})
    del event
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
    con.unregister("one")
    del one
    pa.default_memory_pool().release_unused()

    # DuckDB's own Parquet reader over the store's files, filtered and not
    files = [os.path.join(d, f) for d, _, fs in os.walk(events_path(root)) for f in fs if f.endswith(".parquet")]
    scan = f"read_parquet({files!r}, hive_partitioning = true)"
    n, big = con.execute(f"select count(*), sum(strlen(event)) from {scan}").fetchall()[0]
    assert n == written and big > TWO_GIB
    hits = con.execute(
        f"select count(*) from {scan} where kind = 'tool_call_failed' and event like '%\"exit_code\"%'"
    ).fetchall()[0][0]
    assert hits > 0
