"""Benchmark steps of the store: ingest (strict and relaxed), a polling reader
beside ingest, compaction beside ingest, read cost against file count, and
disk use.

Every step works on logs written by ``bench load`` (the real capture path).
Loading is the slow part (~1,500 events/s), so the logs of one size and seed
are loaded once per ``bench run`` into ``<out>/.workload-cache/`` and shared
by the steps that only read them (ingest reads logs, never writes them); the
run removes the cache when it ends. A step that changes logs (``disk`` seals
them) copies them first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

from agentlog.bench.common import describe
from agentlog.bench.context import StepContext, StepFn
from agentlog.bench.measure import du_files, files_under
from agentlog.bench.roots import FULL_EVENTS, SRC, loaded_logs, root_over

SMALL_BATCH_EVENTS = 100
"""attemptdb's batch latency is per 100-event batch; ours are measured the same way where it matters."""


def _fmt_lat(d: dict[str, float]) -> str:
    return f"{d['median']:.0f} / {d['p95']:.0f} / {d['p99']:.0f}"


def _io() -> dict[str, int]:
    """This process's I/O counters (``/proc/self/io``; empty where absent)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/io", encoding="ascii") as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k.strip()] = int(v)
    except OSError:
        pass
    return out


# --------------------------------------------------------------------------- ingest


def _ingest_step(size: int, durability: str) -> StepFn:
    label = "full" if size == FULL_EVENTS else f"{size // 1000}k"

    def step(ctx: StepContext) -> dict[str, Any]:
        from agentlog.api import events_path, ingest
        from agentlog.bench.workload.load import default_jobs

        if ctx.events < size:
            return {"tables": [], "metrics": {}, "skipped": f"--events {ctx.events:,} is below {size:,}"}
        logs_root, t_load = loaded_logs(ctx, size)
        root = root_over(ctx, logs_root)
        ctx.progress(f"ingesting ({durability})")
        t1 = time.perf_counter()
        report = ingest(root, durability=durability)
        t_ingest = time.perf_counter() - t1
        parquet = files_under(events_path(root), ".parquet")
        store_bytes = sum(os.path.getsize(p) for p in parquet)
        log_bytes = du_files(os.path.join(logs_root, "logs"))[0]
        lat = describe(report.commit_ms)
        metrics = {
            "events": report.events,
            "events_per_s": report.events / t_ingest,
            "wall_events_per_s": report.events / (t_load + t_ingest),
            "mb_per_s": report.bytes / t_ingest / 1e6,
            "commits": report.commits,
            "commit_p50_ms": lat["median"],
            "commit_p95_ms": lat["p95"],
            "commit_p99_ms": lat["p99"],
            "parquet_files": len(parquet),
            "store_bytes_per_event": store_bytes / max(1, report.events),
            "log_bytes_per_event": log_bytes / max(1, report.events),
            "breaks": len(report.breaks),
        }
        table = {
            "title": f"Ingest of {size:,} generated events, {durability} (one process, fresh store)",
            "columns": ["events", "ingest events/s", "wall events/s (incl. generation)", "MB/s of frames", "commits",
                        "commit p50 / p95 / p99 ms", "Parquet files", "store B/event", "log B/event"],
            "rows": [[report.events, metrics["events_per_s"], metrics["wall_events_per_s"], metrics["mb_per_s"],
                      report.commits, _fmt_lat(lat), len(parquet), metrics["store_bytes_per_event"],
                      metrics["log_bytes_per_event"]]],
            "note": "Ingest: `agentlog.store.ingest.ingest` over logs written by `bench load` (the capture path, "
            f"{default_jobs()} workers); wall includes that generation and loading ({t_load:.1f} s, shared by the "
            "steps of one size). A commit is one batch of up to 64 MiB of frames (~5,500 events): Arrow conversion "
            "+ Parquet (zstd 3) + Delta commit, on its own thread while the next batch is parsed. strict fsyncs "
            "each commit's files and the commit; relaxed leaves flushing to the OS. The logs are unsealed here "
            "(see `disk`).",
        }
        return {"tables": [table], "metrics": metrics}

    step.__doc__ = (f"Ingest {size:,} generated events ({durability}) into a fresh store: events/s, commit latency, "
                    "files, bytes/event.")
    step.__name__ = f"ingest_{durability}_{label}"
    return step


# --------------------------------------------------------------------------- reader beside ingest

READER = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
root, out_file, stop_file = sys.argv[2], sys.argv[3], sys.argv[4]
import duckdb
from deltalake import DeltaTable
from agentlog.store.schema import events_path, read_events
path = events_path(root)
con = duckdb.connect()
with open(out_file, "a", encoding="utf-8") as out:
    print(json.dumps({"ready": True}), file=out, flush=True)
    while not os.path.exists(stop_file):
        t0 = time.perf_counter()
        rec = {}
        try:
            if DeltaTable.is_deltatable(path):
                version = DeltaTable(path).version()
                t1 = time.perf_counter()
                t = read_events(root, columns=["event_id", "kind", "log_key"])
                n = con.execute("select count(*), count(distinct event_id), "
                                "count(*) filter (where kind = 'tool_call_failed') from t").fetchone()
                t2 = time.perf_counter()
                del t
                rec = {"version": version, "open_ms": (t1 - t0) * 1e3, "scan_ms": (t2 - t1) * 1e3,
                       "rows": n[0], "unique": n[1], "failed": n[2]}
            else:
                rec = {"empty": True}
        except Exception as e:
            rec = {"error": f"{type(e).__name__}: {e}"}
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    rec[line.split(":")[0]] = int(line.split()[1]) * 1024
        print(json.dumps(rec), file=out, flush=True)
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
os._exit(0)
"""


def ingest_200k_reader(ctx: StepContext) -> dict[str, Any]:
    """A reader opening, scanning and counting the store once a second while 200k events are ingested."""
    from agentlog.api import ingest

    size = 200_000
    if ctx.events < size:
        return {"tables": [], "metrics": {}, "skipped": f"--events {ctx.events:,} is below {size:,}"}
    logs_root, _ = loaded_logs(ctx, size)
    src = SRC

    # the same ingest without a reader first: the reader's effect on ingest
    ctx.progress("ingest without a reader (baseline)")
    base_root = root_over(ctx, logs_root)
    t0 = time.perf_counter()
    base = ingest(base_root)
    base_secs = time.perf_counter() - t0
    shutil.rmtree(os.path.join(base_root, "store"), ignore_errors=True)

    root = root_over(ctx, logs_root)
    out_file = os.path.join(ctx.tmpdir(), "reader.jsonl")
    stop = out_file + ".stop"
    proc = subprocess.Popen([sys.executable, "-c", READER, src, root, out_file, stop])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (os.path.exists(out_file) and os.path.getsize(out_file)):
            time.sleep(0.05)
        ctx.progress("ingest with the reader polling once a second")
        t1 = time.perf_counter()
        rep = ingest(root)
        secs = time.perf_counter() - t1
        time.sleep(2.5)  # two more reads of the finished store
    finally:
        with open(stop, "w"):
            pass
        proc.wait(timeout=60)
    with open(out_file, encoding="utf-8") as f:
        reads = [json.loads(line) for line in f if line.strip()][1:]
    ok = [r for r in reads if "rows" in r]
    errors = [r["error"] for r in reads if "error" in r]
    dup = sum(1 for r in ok if r["rows"] != r["unique"])
    backwards = sum(1 for a, b in zip(ok, ok[1:]) if b["rows"] < a["rows"])
    open_lat, scan_lat = describe([r["open_ms"] for r in ok]), describe([r["scan_ms"] for r in ok])
    hwm = max((r.get("VmHWM", 0) for r in reads), default=0)
    metrics = {
        "reads": len(reads),
        "errors": len(errors),
        "duplicated_reads": dup,
        "backward_reads": backwards,
        "open_p50_ms": open_lat["median"], "open_p99_ms": open_lat["p99"],
        "scan_p50_ms": scan_lat["median"], "scan_p99_ms": scan_lat["p99"],
        "reader_peak_rss_bytes": hwm,
        "reader_peak_rss_mib": hwm / 2**20,
        "ingest_events_per_s": rep.events / secs,
        "ingest_events_per_s_without_reader": base.events / base_secs,
        "ingest_slowdown": (base.events / base_secs) / (rep.events / secs) if rep.events else 0.0,
        "final_rows": ok[-1]["rows"] if ok else 0,
    }
    table = {
        "title": "A reader polling once a second beside an ingest of 200,000 events",
        "columns": ["reads", "errors", "duplicated / going back", "open p50 / p99 ms", "scan+count p50 / p99 ms",
                    "reader peak RSS MiB", "ingest events/s with / without reader"],
        "rows": [[len(reads), len(errors), f"{dup} / {backwards}", f"{open_lat['median']:.0f} / {open_lat['p99']:.0f}",
                  f"{scan_lat['median']:.0f} / {scan_lat['p99']:.0f}", hwm / 2**20,
                  f"{rep.events / secs:,.0f} / {base.events / base_secs:,.0f}"]],
        "note": "The reader is its own process: each second it loads the Delta table (open), reads event_id, kind and "
        "log_key of every row through pyarrow and counts rows, distinct ids and failed calls with DuckDB (scan). "
        "Its peak RSS is VmHWM. The baseline ingest runs first, alone, over the same logs."
        + (f" Errors: {errors[:3]}" if errors else ""),
    }
    return {"tables": [table], "metrics": metrics}


# --------------------------------------------------------------------------- compaction beside ingest

COMPACTOR = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from agentlog.store.compact import compact
from agentlog.operations.daemon import lower_priority
root, out_file, stop_file = sys.argv[2], sys.argv[3], sys.argv[4]
lower_priority()  # as the daemon's background thread runs it
runs = []
while not os.path.exists(stop_file):
    t0 = time.perf_counter()
    try:
        r = compact(root, grace_hours=1, lock_timeout=1.0)
        runs.append({"secs": time.perf_counter() - t0, "rewritten": r.files_rewritten})
    except Exception as e:
        runs.append({"error": f"{type(e).__name__}: {e}"})
    time.sleep(0.2)
with open(out_file, "w") as f:
    json.dump(runs, f)
os._exit(0)
"""


def ingest_compaction(ctx: StepContext) -> dict[str, Any]:
    """Daemon-like 100-event ingests with and without a compactor looping beside them: the stall compaction adds."""
    from agentlog.api import events_path, ingest

    size = min(ctx.events, 20_000)
    logs_root, _ = loaded_logs(ctx, size)
    src = SRC
    avg = du_files(os.path.join(logs_root, "logs"))[0] / size
    batch_bytes = max(1, int(avg * SMALL_BATCH_EVENTS))

    def run(compacting: bool) -> tuple[list[float], dict[str, Any]]:
        root = root_over(ctx, logs_root)
        extra: dict[str, Any] = {}
        proc = None
        out_file = os.path.join(ctx.tmpdir(), "compactor.json")
        stop = out_file + ".stop"
        if compacting:
            proc = subprocess.Popen([sys.executable, "-c", COMPACTOR, src, root, out_file, stop])
        t0 = time.perf_counter()
        rep = ingest(root, batch_bytes=batch_bytes)
        extra["secs"] = time.perf_counter() - t0
        extra["events"] = rep.events
        if proc is not None:
            with open(stop, "w"):
                pass
            proc.wait(timeout=600)
            with open(out_file, encoding="utf-8") as f:
                runs = json.load(f)
            extra["compactions"] = len([r for r in runs if "secs" in r])
            extra["compaction_errors"] = [r["error"] for r in runs if "error" in r][:3]
        extra["files"] = len(files_under(events_path(root), ".parquet"))
        return rep.commit_ms, extra

    ctx.progress(f"{size:,} events in ~{SMALL_BATCH_EVENTS}-event commits, alone")
    alone, a = run(False)
    ctx.progress("the same with a compactor looping beside")
    beside, b = run(True)
    la, lb = describe(alone), describe(beside)
    metrics = {
        "batch_p50_ms": la["median"], "batch_p95_ms": la["p95"], "batch_p99_ms": la["p99"],
        "compacting_batch_p50_ms": lb["median"], "compacting_batch_p95_ms": lb["p95"],
        "compacting_batch_p99_ms": lb["p99"],
        "stall_p99_ms": lb["p99"] - la["p99"],
        "compactions": b.get("compactions", 0),
        "compaction_errors": len(b.get("compaction_errors", [])),
    }
    table = {
        "title": f"{SMALL_BATCH_EVENTS}-event ingest commits, alone and with compaction running beside",
        "columns": ["run", "commits", "commit p50 / p95 / p99 ms", "events/s", "compactions", "files at end"],
        "rows": [
            ["alone", la["n"], _fmt_lat(la), a["events"] / a["secs"], 0, a["files"]],
            ["compactor beside", lb["n"], _fmt_lat(lb), b["events"] / b["secs"], b.get("compactions", 0), b["files"]],
        ],
        "note": f"{size:,} events ingested {SMALL_BATCH_EVENTS} at a time (batch_bytes ≈ {batch_bytes:,}), strict, as "
        "the daemon does after each burst of hooks. The compactor is another process looping `compact` (OPTIMIZE at "
        "zstd 9 + vacuum) on its own lock, at nice 19 as the daemon runs it; the difference in p99 is the stall it causes on this 2-core machine "
        "(CPU contention: it never holds ingest's lock)."
        + (f" Compaction errors: {b['compaction_errors']}" if b.get("compaction_errors") else ""),
    }
    return {"tables": [table], "metrics": metrics}


# --------------------------------------------------------------------------- read cost vs files

def _read_costs(root: str, repeat: int = 5) -> dict[str, float]:
    import duckdb
    from deltalake import DeltaTable

    from agentlog.api import events_path, read_events

    opens, counts, filtered = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        DeltaTable(events_path(root)).version()
        t1 = time.perf_counter()
        t = read_events(root, columns=["event_id"])
        n = t.num_rows
        t2 = time.perf_counter()
        ev = read_events(root, columns=["kind", "event"])
        con = duckdb.connect()
        con.execute("select count(*), sum(length(json_extract_string(event, '$.content.command'))) "
                    "from ev where kind = 'tool_call_failed'").fetchone()
        t3 = time.perf_counter()
        del t, ev
        opens.append((t1 - t0) * 1e3)
        counts.append((t2 - t1) * 1e3)
        filtered.append((t3 - t2) * 1e3)
    return {"rows": n, "open_ms": describe(opens)["median"], "count_ms": describe(counts)["median"],
            "filtered_ms": describe(filtered)["median"]}


def segments_100k(ctx: StepContext) -> dict[str, Any]:
    """Read cost against file count: 100k events ingested 100 at a time, before and after compaction."""
    from agentlog.api import compact, events_path, ingest

    size = 100_000
    if ctx.events < size:
        return {"tables": [], "metrics": {}, "skipped": f"--events {ctx.events:,} is below {size:,}"}
    logs_root, _ = loaded_logs(ctx, size)
    root = root_over(ctx, logs_root)
    avg = du_files(os.path.join(logs_root, "logs"))[0] / size
    ctx.progress(f"ingesting {size:,} events ~{SMALL_BATCH_EVENTS} at a time")
    rep = ingest(root, batch_bytes=int(avg * SMALL_BATCH_EVENTS), durability="relaxed")
    path = events_path(root)
    before_files = len(files_under(path, ".parquet"))
    before_log = du_files(os.path.join(path, "_delta_log"))
    ctx.progress("reading before compaction")
    before = _read_costs(root)
    ctx.progress("compacting")
    t0 = time.perf_counter()
    c = compact(root, grace_hours=0)
    compact_secs = time.perf_counter() - t0
    after_files = len(files_under(path, ".parquet"))
    after_log = du_files(os.path.join(path, "_delta_log"))
    ctx.progress("reading after compaction")
    after = _read_costs(root)
    metrics = {
        "commits": rep.commits,
        "files_before": before_files, "files_after": after_files,
        "open_ms_before": before["open_ms"], "open_ms_after": after["open_ms"],
        "count_ms_before": before["count_ms"], "count_ms_after": after["count_ms"],
        "filtered_ms_before": before["filtered_ms"], "filtered_ms_after": after["filtered_ms"],
        "txlog_bytes": after_log[0], "txlog_files": after_log[1],
        "compact_secs": compact_secs,
        "store_bytes_before": c.bytes_before, "store_bytes_after": c.bytes_after,
    }
    table = {
        "title": f"Read cost against file count ({size:,} events in {rep.commits:,} commits)",
        "columns": ["", "Parquet files", "open ms", "count ms", "filtered scan ms", "data bytes", "transaction log"],
        "rows": [
            ["before compaction", before_files, before["open_ms"], before["count_ms"], before["filtered_ms"],
             c.bytes_before, f"{before_log[1]} files, {before_log[0]:,} B"],
            ["after compaction", after_files, after["open_ms"], after["count_ms"], after["filtered_ms"],
             c.bytes_after, f"{after_log[1]} files, {after_log[0]:,} B"],
        ],
        "note": "open: load the Delta table; count: read the event_id column of every row; filtered scan: DuckDB "
        "over kind and the event JSON, failed calls and the length of their commands. Medians of 5. Compaction: "
        f"OPTIMIZE to 128 MiB files at zstd 9, then vacuum with no grace period ({compact_secs:.1f} s). Commits "
        "stay in the transaction log (ingest's positions live there); Delta checkpoints every 100 commits.",
    }
    return {"tables": [table], "metrics": metrics}


# --------------------------------------------------------------------------- disk

def disk(ctx: StepContext) -> dict[str, Any]:
    """Bytes per event under the data root by component and kind, sealed and compacted; write amplification."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from agentlog.api import COMPACT_ZSTD_LEVEL, compact, events_path, ingest, iter_logs, read_events
    from agentlog.core.paths import logs_dir, state_dir

    size = min(ctx.events, 200_000)
    logs_root, _ = loaded_logs(ctx, size)
    root = ctx.tmpdir()
    ctx.progress("copying the logs (sealing changes them)")
    shutil.copytree(os.path.join(logs_root, "logs"), logs_dir(root))
    logs_unsealed = du_files(logs_dir(root))
    io0 = _io()
    ctx.progress("ingesting")
    rep = ingest(root)
    io1 = _io()
    sealed_note = ""
    seal_secs = 0.0
    try:
        from agentlog.api import seal_log  # sealing ships with the log layer
    except ImportError:
        seal_log = None  # type: ignore[assignment]
    if seal_log is not None:
        ctx.progress("sealing every log")
        t0 = time.perf_counter()
        for log in iter_logs(root):
            seal_log(log)
        seal_secs = time.perf_counter() - t0
    else:
        sealed_note = " Sealing is not available in this build: logs are unsealed."
    io2 = _io()
    ctx.progress("compacting")
    t0 = time.perf_counter()
    compact(root, grace_hours=0)
    compact_secs = time.perf_counter() - t0
    io3 = _io()
    components = {
        "logs": du_files(logs_dir(root)),
        "store data": du_files(os.path.join(events_path(root))),
        "store transaction log": du_files(os.path.join(events_path(root), "_delta_log")),
        "state": du_files(state_dir(root)),
    }
    sd = components["store data"]
    components["store data"] = (sd[0] - components["store transaction log"][0], sd[1] - components["store transaction log"][1])
    total = du_files(root)
    n = max(1, rep.events)
    json_bytes = rep.bytes
    rows = [[k, v[1], v[0], v[0] / n] for k, v in components.items()]
    rows.append(["everything", total[1], total[0], total[0] / n])

    # by kind: the store's event column for each kind, written as the compacted store writes it
    ctx.progress("sizes by kind")
    t = read_events(root, columns=["kind", "event"])
    kinds = sorted(set(t.column("kind").to_pylist()))
    kind_rows = []
    scratch = ctx.tmpdir()
    for kind in kinds:
        part = t.filter(pc.equal(t.column("kind"), kind))
        file = os.path.join(scratch, "k.parquet")
        pq.write_table(part.select(["event"]), file, compression="zstd", compression_level=COMPACT_ZSTD_LEVEL,
                       use_dictionary=False, write_statistics=False)
        ev_bytes = sum(len(x) for x in part.column("event").to_pylist())
        kind_rows.append([kind, part.num_rows, ev_bytes / part.num_rows, os.path.getsize(file) / part.num_rows])
    del t

    def wchar(a: dict[str, int], b: dict[str, int]) -> int:
        return b.get("wchar", 0) - a.get("wchar", 0)

    amp = {
        "ingest": wchar(io0, io1) / max(1, json_bytes),
        "seal": wchar(io1, io2) / max(1, json_bytes),
        "compact": wchar(io2, io3) / max(1, json_bytes),
    }
    amp["logs (one write per frame)"] = logs_unsealed[0] / max(1, json_bytes)
    amp["all"] = sum(amp.values())
    metrics = {
        "events": rep.events,
        "bytes_per_event": total[0] / n,
        "kib_per_event": total[0] / n / 1024,
        "log_bytes_per_event": components["logs"][0] / n,
        "log_unsealed_bytes_per_event": logs_unsealed[0] / n,
        "store_bytes_per_event": components["store data"][0] / n,
        "txlog_bytes_per_event": components["store transaction log"][0] / n,
        "files": total[1],
        "write_amplification": amp["all"],
        "seal_secs": seal_secs,
        "compact_secs": compact_secs,
    }
    tables = [
        {
            "title": f"Everything under the data root, {rep.events:,} events, logs sealed, store compacted",
            "columns": ["component", "files", "bytes", "bytes/event"],
            "rows": rows,
            "note": f"Unsealed logs were {logs_unsealed[0] / n:,.0f} B/event. Sealing {seal_secs:.1f} s, compaction "
            f"{compact_secs:.1f} s.{sealed_note}",
        },
        {
            "title": "Store bytes by kind (the event column alone, as the compacted store compresses it)",
            "columns": ["kind", "events", "event JSON B/event", "zstd Parquet B/event"],
            "rows": kind_rows,
            "note": f"Each kind's events written on their own at zstd {COMPACT_ZSTD_LEVEL}: mixed in one file they "
            "compress a little better. The typed columns add the rest of `store data`.",
        },
        {
            "title": "Write amplification: bytes written per byte of event JSON",
            "columns": ["stage", "bytes written / event JSON byte"],
            "rows": [[k, v] for k, v in amp.items()],
            "note": "Measured as wchar (bytes handed to write(2)) of this process from /proc/self/io around each "
            "stage; the logs' own writes are counted as their file size (each frame is written once; head "
            "rewrites excluded). Device-level writes (journal, page cache) are not measured.",
        },
    ]
    return {"tables": tables, "metrics": metrics}


STORE_STEPS: dict[str, StepFn] = {
    "ingest_strict_10k": _ingest_step(10_000, "strict"),
    "ingest_relaxed_10k": _ingest_step(10_000, "relaxed"),
    "ingest_strict_100k": _ingest_step(100_000, "strict"),
    "ingest_relaxed_100k": _ingest_step(100_000, "relaxed"),
    "ingest_strict_200k": _ingest_step(200_000, "strict"),
    "ingest_relaxed_200k": _ingest_step(200_000, "relaxed"),
    "ingest_200k_reader": ingest_200k_reader,
    "ingest_compaction": ingest_compaction,
    "segments_100k": segments_100k,
    "disk": disk,
    "ingest_strict_full": _ingest_step(FULL_EVENTS, "strict"),
    "ingest_relaxed_full": _ingest_step(FULL_EVENTS, "relaxed"),
}
