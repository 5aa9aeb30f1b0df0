"""The data roots the benchmark steps work on, built once per run and shared.

Loading the workload into logs is the slow part (~1,500 events/s), so the logs
of one size and seed are loaded once per ``bench run`` into
``<out>/.workload-cache/`` (:func:`loaded_logs`) and shared by the steps that
only read them; the run removes the cache when it ends (``--cache-dir`` keeps
it). On top of them, per size and seed:

- :func:`store_root`: the store ingested (a child process, relaxed);
- :func:`built_root`: and the projection built (a child process);
- :func:`served_root`: a copy of that with the store compacted, as a running
  agentlog keeps it (what the dashboard, MCP server and search read).

Each is cached under ``built-<size>-<seed>-<format>/`` beside the logs, with a marker
file holding what building it took; setup never counts in a figure. A step
that changes its root works on :func:`clone` (or :func:`root_over`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from typing import Any

from agentlog.bench.context import StepContext
from agentlog.bench.measure import child

FULL_EVENTS = 1_450_000
CACHE_DIR = ".workload-cache"
CACHE_DIR_ENV = "AGENTLOG_BENCH_CACHE_DIR"
"""Set (by ``bench run --cache-dir``): the loaded logs and built stores live
there instead, and are kept after the run for the next one to reuse."""
WORKLOAD_FORMAT = "w2"
"""Part of every cached root's name: changed when ``bench load`` writes other logs for
one size and seed (w2: the transcript samples imported by the shipped importer), so
that a kept cache of the old ones is not reused."""

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The directory holding the ``agentlog`` package (the child scripts put it first on their path)."""
STORE_MARKER = ".bench-store.json"
PROJECTION_MARKER = ".bench-projection.json"
SERVED_MARKER = ".bench-served.json"

BUILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
root, what = sys.argv[2], sys.argv[3]
if what == "ingest":
    from agentlog.store.ingest import ingest
    t0 = time.perf_counter()
    r = ingest(root, durability="relaxed")
    out = {"events": r.events, "ingest_secs": time.perf_counter() - t0, "breaks": len(r.breaks)}
else:
    from agentlog.projection.persist import refresh
    r = refresh(root, full=True)
    out = {"projection_secs": r.seconds, "projection_mode": r.mode, "projection_counts": r.counts}
print(json.dumps(out))
"""

COMPACT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from agentlog.store.compact import compact
r = compact(sys.argv[2], grace_hours=0)
print(json.dumps({"compact_secs": r.seconds, "files_before": r.files_before, "files_after": r.files_after,
                  "bytes_before": r.bytes_before, "bytes_after": r.bytes_after}))
"""


def cache_root(ctx: StepContext) -> str | None:
    """Where loaded logs and built stores are cached: ``$AGENTLOG_BENCH_CACHE_DIR``
    (kept), else ``<out>/.workload-cache`` (removed when the run ends), else
    nowhere (a step run on its own uses its scratch directory)."""
    kept = os.environ.get(CACHE_DIR_ENV)
    if kept:
        return os.path.abspath(kept)
    return os.path.join(ctx.out_dir, CACHE_DIR) if ctx.out_dir else None


def loaded_logs(ctx: StepContext, size: int) -> tuple[str, float]:
    """A data root whose ``logs`` hold ``size`` generated events (loaded once
    per run and shared), and the seconds loading took (0 when cached: the
    first load's time is reused)."""
    from agentlog.bench.workload.load import default_jobs, load

    root = cache_root(ctx)
    if root:
        cache = os.path.join(root, f"{size}-{ctx.seed}-{WORKLOAD_FORMAT}")
    else:
        cache = os.path.join(ctx.tmpdir(), "workload")
    marker = os.path.join(cache, "complete.json")
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            return cache, float(json.load(f)["load_secs"])
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache, exist_ok=True)
    ctx.progress(f"loading {size:,} events into logs (cached for the other steps of this run)")
    t0 = time.perf_counter()
    load(size, ctx.seed, root=cache, jobs=default_jobs())
    secs = time.perf_counter() - t0
    with open(marker, "w", encoding="utf-8") as f:
        json.dump({"load_secs": secs, "events": size, "seed": ctx.seed}, f)
    return cache, secs


def root_over(ctx: StepContext, logs_root: str) -> str:
    """A fresh data root that reads the logs of ``logs_root`` (symlinked) and has its own store."""
    root = ctx.tmpdir()
    os.symlink(os.path.abspath(os.path.join(logs_root, "logs")), os.path.join(root, "logs"))
    return root


def _cache_path(ctx: StepContext, size: int) -> str:
    name = f"built-{size}-{ctx.seed}-{WORKLOAD_FORMAT}"
    root = cache_root(ctx)
    return os.path.join(root, name) if root else os.path.join(ctx.tmpdir(), name)


def read_marker(path: str) -> dict[str, Any] | None:
    """A marker file's contents (None: not there or unreadable, i.e. not built)."""
    try:
        with open(path, encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
            return data
    except (OSError, ValueError):
        return None


def write_marker(path: str, data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


def store_root(ctx: StepContext, size: int) -> tuple[str, dict[str, Any]]:
    """A data root over ``size`` loaded events with the store ingested (in a child
    process, relaxed), cached for the run; and what building it took."""
    root = _cache_path(ctx, size)
    info = read_marker(os.path.join(root, STORE_MARKER))
    if info is not None:
        return root, info
    logs_root, load_secs = loaded_logs(ctx, size)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    os.symlink(os.path.abspath(os.path.join(logs_root, "logs")), os.path.join(root, "logs"))
    ctx.progress(f"ingesting {size:,} events into a store (a child process, not timed)")
    r = child([sys.executable, "-c", BUILD, SRC, root, "ingest"])
    info = dict(json.loads(r["stdout"]))
    info.update(load_secs=load_secs, ingest_peak_rss_bytes=r["rss"])
    write_marker(os.path.join(root, STORE_MARKER), info)
    return root, info


def built_root(ctx: StepContext, size: int) -> tuple[str, dict[str, Any]]:
    """:func:`store_root` with the projection built too (a child process), cached for the run."""
    root, info = store_root(ctx, size)
    proj = read_marker(os.path.join(root, PROJECTION_MARKER))
    if proj is None:
        ctx.progress(f"projecting {size:,} events (a child process, not timed)")
        r = child([sys.executable, "-c", BUILD, SRC, root, "refresh"])
        proj = dict(json.loads(r["stdout"]))
        proj["projection_peak_rss_bytes"] = r["rss"]
        write_marker(os.path.join(root, PROJECTION_MARKER), proj)
    return root, info | proj


def served_root(ctx: StepContext, size: int) -> tuple[str, dict[str, Any]]:
    """:func:`built_root` as a running agentlog keeps it: its store compacted (the daemon
    compacts every hour; one ingest batch leaves a file per day partition, so a store built
    by many batches holds thousands of small files until then). A copy (the store's and
    projection's files hard-linked — they are never written in place — the state copied),
    compacted by a child process, cached for the run; the steps that read what a user's
    dashboard, MCP server and search read use it."""
    built, info = built_root(ctx, size)
    root = built.rstrip(os.sep) + "-served"
    done = read_marker(os.path.join(root, SERVED_MARKER))
    if done is not None:
        return root, info | done
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    os.symlink(os.path.realpath(os.path.join(built, "logs")), os.path.join(root, "logs"))
    for name in ("store", "projection"):
        shutil.copytree(os.path.join(built, name), os.path.join(root, name), copy_function=os.link)
    shutil.copytree(os.path.join(built, "state"), os.path.join(root, "state"),
                    ignore=shutil.ignore_patterns("search*"))
    ctx.progress(f"compacting the store of {size:,} events (a child process, not timed)")
    r = child([sys.executable, "-c", COMPACT, SRC, root])
    done = dict(json.loads(r["stdout"]))
    write_marker(os.path.join(root, SERVED_MARKER), done)
    return root, info | done


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # (another file system)
        shutil.copy2(src, dst)


def clone(ctx: StepContext, built: str, link: bool = False) -> str:
    """A data root a step may change: its own log directories (each existing log linked,
    so new sessions' logs land here) and copies of the store, state and projection (with
    ``link``, the store's and projection's files hard-linked where they can be — they are
    never written in place — for a step that writes neither; its search indexes left out)."""
    root = ctx.tmpdir()
    src_logs = os.path.realpath(os.path.join(built, "logs"))
    dst_logs = os.path.join(root, "logs")
    os.makedirs(dst_logs)
    for name in os.listdir(src_logs):
        src = os.path.join(src_logs, name)
        if os.path.isdir(src):
            os.makedirs(os.path.join(dst_logs, name))
            for entry in os.listdir(src):
                os.symlink(os.path.join(src, entry), os.path.join(dst_logs, name, entry))
        else:
            os.symlink(src, os.path.join(dst_logs, name))
    for part in ("store", "state", "projection"):
        if os.path.isdir(os.path.join(built, part)):
            linked = link and part != "state"
            shutil.copytree(os.path.join(built, part), os.path.join(root, part),
                            copy_function=_link_or_copy if linked else shutil.copy2,
                            ignore=shutil.ignore_patterns("search*") if link and part == "state" else None)
    return root


__all__ = [
    "CACHE_DIR", "CACHE_DIR_ENV", "FULL_EVENTS", "PROJECTION_MARKER", "SERVED_MARKER", "SRC", "STORE_MARKER",
    "built_root", "cache_root", "clone", "loaded_logs", "read_marker", "root_over", "served_root", "store_root",
    "write_marker",
]
