"""The benchmark steps ``agentlog bench run`` ships, and the registry that lists them.

Adding a step is one function ``name(ctx: StepContext) -> dict`` and one line
in :data:`STEPS`. The function returns ``tables`` (title, columns, rows, note),
``metrics`` (flat ``{key: number}``, the keys the anchors and targets in
``anchors.json`` name) and any raw numbers worth keeping. Latency tables give
p50/p95/p99 and the sample count; throughput that involves generating the
workload is given both excluding and including generation. Heavy imports stay
inside the functions so that listing the steps costs nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentlog.bench.context import StepContext, StepFn
from agentlog.bench.import_steps import IMPORT_STEPS
from agentlog.bench.memory_steps import MEMORY_STEPS
from agentlog.bench.proof_steps import PROOF_STEPS
from agentlog.bench.projection_steps import PROJECTION_STEPS
from agentlog.bench.search_steps import SEARCH_STEPS
from agentlog.bench.store_steps import STORE_STEPS
from agentlog.bench.web_steps import WEB_STEPS

ZSTD_LEVEL = 3
HOOK_SIZES = (1000, 10000, 50000)
VERIFY_SIZES = (1000, 10000, 50000)


# --------------------------------------------------------------------------- size_by_kind


@dataclass
class _Bytes:
    """Events, JSON bytes and streamed JSONL+zstd bytes of one group of events.

    Each group has its own compressor: a ``ZstdCompressor`` runs one
    operation at a time, and interleaved streams on one context corrupt each
    other's counts.
    """

    events: int = 0
    json_bytes: int = 0
    zstd_bytes: int = 0
    jsonl_bytes: int = 0
    _obj: Any = None
    _pending: list[bytes] = field(default_factory=list)
    _pending_bytes: int = 0

    def add(self, line: bytes) -> None:
        self.events += 1
        self.json_bytes += len(line) - 1  # the event's JSON, without the newline
        self.jsonl_bytes += len(line)
        self._pending.append(line)
        self._pending_bytes += len(line)
        if self._pending_bytes >= 1 << 20:
            self._push()

    def _push(self) -> None:
        if self._obj is None:
            import zstandard

            self._obj = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
        if self._pending:
            self.zstd_bytes += len(self._obj.compress(b"".join(self._pending)))
            self._pending.clear()
            self._pending_bytes = 0

    def finish(self) -> None:
        self._push()
        if self._obj is None:
            return
        self.zstd_bytes += len(self._obj.flush())

    def row(self) -> dict[str, float]:
        n = max(1, self.events)
        return {
            "events": self.events,
            "json_bytes": self.json_bytes,
            "zstd_bytes": self.zstd_bytes,
            "json_bytes_per_event": self.json_bytes / n,
            "zstd_bytes_per_event": self.zstd_bytes / n,
            "ratio": self.jsonl_bytes / self.zstd_bytes if self.zstd_bytes else 0.0,
        }


def event_profile(event: dict[str, Any]) -> str:
    """``kind/category`` for events with a tool (as the seed's size table), the kind otherwise."""
    kind = str(event.get("kind"))
    tool = event.get("tool")
    if isinstance(tool, dict) and tool.get("category"):
        return f"{kind}/{tool['category']}"
    return kind


def size_by_kind(ctx: StepContext) -> dict[str, Any]:
    """JSON and JSONL+zstd(3) bytes per event kind and profile; the generator's calibration."""
    from agentlog.core.fastjson import dumps_bytes
    from agentlog.bench.anchors import load_anchors
    from agentlog.bench.workload import Canonicalizer, generate
    from agentlog.bench.workload.model import CHAIN_SESSION_ID

    total = _Bytes()
    kinds: dict[str, _Bytes] = {}
    profiles: dict[str, _Bytes] = {}
    sources: dict[str, _Bytes] = {}
    providers: dict[str, _Bytes] = {}
    t_gen = t_capture = t_measure = 0.0
    samples = reconstructed = chain_failed = 0

    def measure(ev: dict[str, Any], source: str) -> None:
        nonlocal reconstructed, chain_failed
        line = dumps_bytes(ev) + b"\n"
        total.add(line)
        if (ev.get("attrs") or {}).get("reconstructed"):
            reconstructed += 1
        if ev.get("kind") == "tool_call_failed" and ev.get("provider_session_id") == CHAIN_SESSION_ID:
            chain_failed += 1
        for groups, key in (
            (kinds, str(ev.get("kind"))),
            (profiles, event_profile(ev)),
            (sources, source),
            (providers, str(ev.get("provider"))),
        ):
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Bytes()
            g.add(line)

    # the capture path: the hook's for hook samples; transcript samples are written as
    # Claude Code transcript files and imported by the shipped importer after the stream
    with Canonicalizer() as sample_events:
        t_start = time.perf_counter()
        it = iter(generate(ctx.events, ctx.seed))
        report_every = max(1000, ctx.events // 10)
        while True:
            a = time.perf_counter()
            sample = next(it, None)
            b = time.perf_counter()
            t_gen += b - a
            if sample is None:
                break
            events = sample_events(sample)
            c = time.perf_counter()
            t_capture += c - b
            source = str(sample.get("source", "?"))
            for ev in events:
                measure(ev, source)
            t_measure += time.perf_counter() - c
            samples += 1
            if samples % report_every == 0:
                ctx.progress(f"{samples:,} samples, {total.events:,} events")
            if samples % 1000 == 0 and ctx.over_budget():
                ctx.cap(f"size_by_kind stopped at the time cap after {samples:,} of {ctx.events:,} samples")
                break
        if sample_events.files.pending:
            ctx.progress(f"importing {sample_events.files.pending:,} transcript lines")
        c = time.perf_counter()
        sample_events.import_transcripts()
        d = time.perf_counter()
        t_capture += d - c
        for _, ev in sample_events.logged():
            measure(ev, "transcript")
        t_measure += time.perf_counter() - d
    c = time.perf_counter()
    for g in [total, *kinds.values(), *profiles.values(), *sources.values(), *providers.values()]:
        g.finish()
    t_measure += time.perf_counter() - c
    wall = time.perf_counter() - t_start

    anchors = load_anchors()
    seed_mix = anchors.get("kind_mix", {}).get("kinds", {})
    seed_profiles = anchors.get("size_by_profile", {}).get("profiles", {})
    n_events = max(1, total.events)
    tot = total.row()

    kind_rows = []
    share_diffs: dict[str, float] = {}
    for k in sorted(set(kinds) | set(seed_mix), key=lambda k: -(kinds[k].events if k in kinds else 0)):
        row = kinds[k].row() if k in kinds else None
        share = 100.0 * (row["events"] if row else 0) / n_events
        seed = seed_mix.get(k, {})
        seed_share = seed.get("published_share_pct")
        diff = share - seed_share if seed_share is not None else None
        if diff is not None:
            share_diffs[k] = diff
        kind_rows.append(
            [k, int(row["events"]) if row else 0, share, seed_share, seed.get("sampled_share_pct"), diff,
             row["json_bytes_per_event"] if row else None, row["zstd_bytes_per_event"] if row else None,
             row["ratio"] if row else None]
        )  # fmt: skip
    profile_rows = []
    for p in sorted(profiles, key=lambda p: -profiles[p].json_bytes):
        r = profiles[p].row()
        theirs = seed_profiles.get(p, {})
        tj, tz = theirs.get("json_bytes_per_event"), theirs.get("zstd_bytes_per_event")
        profile_rows.append(
            [p, int(r["events"]), 100.0 * r["events"] / n_events, 100.0 * r["json_bytes"] / max(1, total.json_bytes),
             r["json_bytes_per_event"], r["zstd_bytes_per_event"], r["ratio"], tj,
             r["json_bytes_per_event"] / tj if tj else None, tz, r["zstd_bytes_per_event"] / tz if tz else None]
        )  # fmt: skip
    source_rows = [
        [s, int(g.row()["events"]), g.row()["json_bytes_per_event"], g.row()["zstd_bytes_per_event"], g.row()["ratio"]]
        for s, g in sorted(sources.items(), key=lambda kv: -kv[1].events)
    ]
    provider_rows = [
        [p, int(g.row()["events"]), 100.0 * g.events / n_events, g.row()["json_bytes_per_event"], g.row()["ratio"]]
        for p, g in sorted(providers.items(), key=lambda kv: -kv[1].events)
    ]
    gen_rate = total.events / (t_gen + t_capture) if t_gen + t_capture else 0.0
    calib = anchors.get("calibration", {})
    max_diff = max((abs(d) for d in share_diffs.values()), default=0.0)
    metrics: dict[str, Any] = {
        "samples": samples,
        "events": total.events,
        "json_bytes_total": total.json_bytes,
        "zstd_bytes_total": total.zstd_bytes,
        "json_bytes_per_event": tot["json_bytes_per_event"],
        "zstd_bytes_per_event": tot["zstd_bytes_per_event"],
        "zstd_ratio": tot["ratio"],
        "max_share_diff_pts": max_diff,
        "reconstructed_pct": 100.0 * reconstructed / n_events,
        "chain_failed_edits": chain_failed,
        "generation_events_per_s": gen_rate,
        "generate_secs": t_gen,
        "capture_secs": t_capture,
        "measure_secs": t_measure,
        "measure_events_per_s_excl_generation": total.events / t_measure if t_measure else 0.0,
        "measure_events_per_s_incl_generation": total.events / wall if wall else 0.0,
        "wall_secs": wall,
    }
    for k, d in share_diffs.items():
        metrics[f"share_diff_pts.{k}"] = d
    for k, g in kinds.items():
        metrics[f"share_pct.{k}"] = 100.0 * g.events / n_events
    for p, g in profiles.items():
        r = g.row()
        metrics[f"json_bytes_per_event.{p}"] = r["json_bytes_per_event"]
        metrics[f"zstd_bytes_per_event.{p}"] = r["zstd_bytes_per_event"]
    metrics_reconstructed = metrics["reconstructed_pct"]
    tables = [
        {
            "title": f"Generator calibration ({total.events:,} events from {samples:,} samples, seed {ctx.seed})",
            "columns": ["figure", "ours", "attemptdb's generator", "target"],
            "rows": [
                ["mean JSON bytes per event", tot["json_bytes_per_event"], calib.get("json_bytes_per_event"), "within 10 % of 11.7 KB"],
                ["JSONL+zstd(3) ratio", tot["ratio"], calib.get("zstd_ratio"), "7.5 to 10"],
                ["largest kind share difference vs the seed, points", max_diff, None, "<= 1.5"],
                ["reconstructed (transcript) events, %", metrics_reconstructed, None, None],
                ["failing edits in the fixture chain session", chain_failed, 200, "200 (fewer below 2,000 events)"],
                ["generation events/s (generate + capture path)", gen_rate, None, None],
                ["  of which generate s / capture path s", f"{t_gen:.2f} / {t_capture:.2f}", None, None],
            ],
            "note": "Bytes are the canonical events as the product makes them: hook samples through the hook's "
            "own build, transcript samples written as Claude Code transcript files and imported by the importer "
            "`agentlog import` runs (its events as the logs hold them, `raw` line and `usage` events included); "
            "serialised as the log writes them (compact JSON, UTF-8), without the log's frame. "
            "attemptdb's figures: a 40,000-event sample of its generator (../shared/seeds/000_fac8648d9997f365.txt).",
        },
        {
            "title": "Events and bytes per kind, with the seed's kind mix",
            "columns": ["kind", "events", "share %", "seed share %", "seed sampled %", "diff (points)", "JSON B/event", "zstd B/event", "ratio"],
            "rows": kind_rows,
            "note": "seed share: the Share column of the seed's kind table (attemptdb's 1.45 M-event run); seed sampled: its live database. "
            "zstd: each kind's events as one JSONL stream, zstd level 3.",
        },
        {
            "title": "Bytes per profile (kind/tool category), next to attemptdb's",
            "columns": ["profile", "events", "share of events %", "share of JSON bytes %", "JSON B/event", "zstd B/event",
                        "ratio", "attemptdb JSON B/event", "ours ÷ theirs", "attemptdb zstd B/event", "ours ÷ theirs (zstd)"],
            "rows": profile_rows,
            "note": "attemptdb: the JSON and JSONL+zstd(3) columns of its size table (1.45 M events, same seed document).",
        },  # fmt: skip
        {
            "title": "Bytes by sample source",
            "columns": ["source", "events", "JSON B/event", "zstd B/event", "ratio"],
            "rows": source_rows,
        },
        {
            "title": "Events by provider",
            "columns": ["provider", "events", "share %", "JSON B/event", "ratio"],
            "rows": provider_rows,
        },
        {
            "title": "Throughput of this step",
            "columns": ["phase", "seconds", "events/s"],
            "rows": [
                ["generate (samples)", t_gen, total.events / t_gen if t_gen else None],
                ["capture path (sample_events)", t_capture, total.events / t_capture if t_capture else None],
                ["serialise + zstd (excluding generation)", t_measure, metrics["measure_events_per_s_excl_generation"]],
                ["whole step (including generation)", wall, metrics["measure_events_per_s_incl_generation"]],
            ],
        },
    ]
    return {
        "tables": tables,
        "metrics": metrics,
        "totals": tot,
        "by_kind": {k: g.row() for k, g in kinds.items()},
        "by_profile": {p: g.row() for p, g in profiles.items()},
        "by_source": {s: g.row() for s, g in sources.items()},
        "by_provider": {p: g.row() for p, g in providers.items()},
    }


# --------------------------------------------------------------------------- hook


def hook(ctx: StepContext) -> dict[str, Any]:
    """Hook wall time as the agent waits for it, vs /usr/bin/true and the interpreter floor."""
    from agentlog.bench.hookbench import run_hook_bench

    runs = min(200, max(30, ctx.events // 1000))
    sizes = [s for s in HOOK_SIZES if s <= ctx.events] or [max(1, ctx.events)]
    concurrent = 50
    ctx.progress(f"hook: {runs} rounds, sessions of {', '.join(f'{s:,}' for s in sizes)} frames")
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if time.monotonic() - last[0] > 10:
            last[0] = time.monotonic()
            ctx.progress(f"hook: {done:,} of {total:,} processes")

    res = run_hook_bench(runs=runs, sizes=sizes, concurrent=concurrent, concurrent_rounds=5, durability="strict",
                         progress=progress, should_stop=ctx.over_budget)
    if res.get("capped"):
        ctx.cap(f"hook stopped after {res['runs']} of {runs} rounds at the time cap")
    stats: dict[str, dict[str, float]] = res["stats_ms"]
    true_p50 = stats["/usr/bin/true"]["median"]
    floor_p50 = stats["interpreter floor"]["median"]
    metrics: dict[str, Any] = {
        "runs": res["runs"],
        "true_p50_ms": true_p50,
        "floor_p50_ms": floor_p50,
        "floor_above_true_p50_ms": floor_p50 - true_p50,
    }
    rows = []
    p50s = []
    for name, d in stats.items():
        above = d.get("net_of_floor_median")
        rows.append([name, int(d["n"]), d["median"], d["p95"], d["p99"], d["max"], d["median"] - true_p50, above if name.startswith("hook") else None])
    for n in sizes:
        d = stats[f"hook, {n:,}-frame session"]
        p50s.append(d["median"])
        metrics[f"p50_ms.{n}"] = d["median"]
        metrics[f"p95_ms.{n}"] = d["p95"]
        metrics[f"p99_ms.{n}"] = d["p99"]
        metrics[f"above_floor_p50_ms.{n}"] = d["net_of_floor_median"]
        metrics[f"net_of_true_p50_ms.{n}"] = d["median"] - true_p50
    largest = stats[f"hook, {max(sizes):,}-frame session"]
    metrics.update(
        p50_ms=largest["median"],
        p95_ms=largest["p95"],
        p99_ms=largest["p99"],
        above_floor_p50_ms=largest["net_of_floor_median"],
        net_of_true_p50_ms=largest["median"] - true_p50,
        worst_p95_ms=max(stats[f"hook, {n:,}-frame session"]["p95"] for n in sizes),
        worst_above_floor_p50_ms=max(stats[f"hook, {n:,}-frame session"]["net_of_floor_median"] for n in sizes),
        flatness_p50_ms=max(p50s) - min(p50s),
        largest_session_frames=max(sizes),
    )
    in_proc = res.get("hook_us_in_process") or {}
    if in_proc.get("n"):
        metrics.update(in_process_p50_us=in_proc["median"], in_process_p95_us=in_proc["p95"], in_process_p99_us=in_proc["p99"])
    tables = [
        {
            "title": f"Hook wall time, ms (durability strict, {res['runs']} interleaved rounds)",
            "columns": ["variant", "n", "p50", "p95", "p99", "max", "p50 net of /usr/bin/true", "p50 above interpreter floor"],
            "rows": rows,
            "note": "Whole process, timed from the parent as the agent waits for it (fork/exec, stdin piping, "
            "an fsync per event). Net of /usr/bin/true: median minus that median (nd7's 'net of spawn'). "
            "Above the floor: median of the per-round differences from the same interpreter running an empty script. "
            f"Session frames average {', '.join(f'{b:,.0f} B' for b in res['frame_bytes'].values())}. "
            + (f"In-process time the hook measured of itself (attrs.hook_us) in the {max(sizes):,}-frame session: "
               f"p50 {in_proc['median']:.0f} µs, p95 {in_proc['p95']:.0f} µs, p99 {in_proc['p99']:.0f} µs over {int(in_proc['n'])} events."
               if in_proc.get("n") else ""),
        }  # fmt: skip
    ]
    conc = res.get("concurrent")
    if conc:
        metrics.update(
            concurrent_hooks=conc["hooks"],
            concurrent_total_ms=conc["total_ms"],
            concurrent_per_hook_ms=conc["total_ms"] / max(1, conc["hooks"]),
            concurrent_intact=1 if conc["verify"] == "intact" and conc["dense"] and not conc["exit_codes_nonzero"] else 0,
        )
        tables.append(
            {
                "title": f"{conc['hooks']} hooks started at once into one session",
                "columns": ["hooks", "total wall ms", "ms per hook", "nonzero exits", "frames written", "verify", "seq dense"],
                "rows": [[conc["hooks"], conc["total_ms"], conc["total_ms"] / max(1, conc["hooks"]), conc["exit_codes_nonzero"], conc["frames"], conc["verify"], conc["dense"]]],
            }
        )
    _native_metrics(res, sizes, metrics, tables)
    return {"tables": tables, "metrics": metrics, "hook": {k: v for k, v in res.items() if k not in ("tables", "machine")}}


def _native_metrics(res: dict[str, Any], sizes: list[int], metrics: dict[str, Any], tables: list[dict[str, Any]]) -> None:
    """The native client's rows (issue 29): p50/p95 above /usr/bin/true by session size, the
    daemon's own time per event, 50 at once."""
    native = res.get("native") or {}
    if not native.get("client"):
        if native:
            tables.append({"title": "Native hook", "columns": ["why not measured"], "rows": [[native.get("missing")]]})
        return
    stats = res["stats_ms"]
    true = stats["/usr/bin/true"]
    rows = []
    for n in sizes:
        d = stats[f"native hook, {n:,}-frame session"]
        metrics[f"native_p50_ms.{n}"] = d["median"]
        metrics[f"native_above_true_p50_ms.{n}"] = d["median"] - true["median"]
        metrics[f"native_above_true_p95_ms.{n}"] = d["p95"] - true["p95"]
        rows.append([f"{n:,}", d["median"], d["p95"], d["median"] - true["median"], d["p95"] - true["p95"]])
    daemon = native.get("daemon_us") or {}
    metrics.update(native_daemon_p50_us=daemon.get("server_us_p50"), native_daemon_p95_us=daemon.get("server_us_p95"))
    tables.append({
        "title": "Native hook (agentlog-hook + the daemon's capture server), ms",
        "columns": ["session frames", "p50", "p95", "p50 above /usr/bin/true", "p95 above /usr/bin/true's p95"],
        "rows": rows,
        "note": "Interleaved with the rows above, into the same sessions; goals: p50 ≤ true + 1.5 ms, "
                "p95 ≤ true + 3 ms, flat from 1k to 50k frames. The daemon's own time per event "
                f"(request read → answer sent, after the fsync): p50 {daemon.get('server_us_p50')} µs, "
                f"p95 {daemon.get('server_us_p95')} µs (goal ≤ 1 ms p50).",
    })
    conc = res.get("concurrent_native")
    if conc:
        metrics.update(native_concurrent_total_ms=conc["total_ms"],
                       native_concurrent_intact=1 if conc["verify"] == "intact" and conc["dense"]
                       and not conc["exit_codes_nonzero"] else 0)
        spawner = res.get("concurrent_true") or {}
        tables.append({
            "title": f"{conc['hooks']} native hooks started at once into one session ({conc['rounds']} rounds)",
            "columns": ["hooks", "total wall ms, median", "p95", "nonzero exits", "frames written", "verify", "seq dense"],
            "rows": [[conc["hooks"], conc["total_ms"], conc["total_ms_p95"], conc["exit_codes_nonzero"], conc["frames"],
                      conc["verify"], conc["dense"]]],
            "note": "Goal: ≤ 60 ms in all. The same spawner starting as many /usr/bin/true took "
                    f"{spawner.get('total_ms', float('nan')):.1f} ms (median) in the same rounds.",
        })


# --------------------------------------------------------------------------- verify


def verify(ctx: StepContext) -> dict[str, Any]:
    """Verify throughput (MB/s), in process and as a whole command, jobs 1 and 2."""
    from agentlog.bench.verifybench import run_verify_bench

    sizes = [s for s in VERIFY_SIZES if s <= ctx.events] or [max(1, ctx.events)]
    repeat = 9 if ctx.events >= 100_000 else 5
    res = run_verify_bench(sizes=sizes, repeat=repeat, should_stop=ctx.over_budget, progress=ctx.progress)
    if res.get("capped"):
        ctx.cap(f"verify stopped at the time cap after sizes {res['sizes']}")
    metrics: dict[str, Any] = {}
    lat_rows = []
    for n in res["sizes"]:
        r = res["results"][str(n)]
        mb = r["bytes"] / 1e6
        ms = r["ms"]
        metrics[f"hash_only_mb_s.{n}"] = mb / (ms["hash"]["median"] / 1000)
        metrics[f"in_process_vs_hash_only.{n}"] = r["in_process_1_vs_hash_only"]
        metrics[f"frame_bytes.{n}"] = r["bytes"] / n
        for jobs in (1, 2):
            ip, cm = ms[f"in{jobs}"], ms[f"cmd{jobs}"]
            metrics[f"in_process_mb_s.j{jobs}.{n}"] = mb / (ip["median"] / 1000)
            metrics[f"command_mb_s.j{jobs}.{n}"] = mb / (cm["median"] / 1000)
            metrics[f"command_ms.j{jobs}.{n}"] = cm["median"]
            metrics[f"command_p99_ms.j{jobs}.{n}"] = cm["p99"]
            metrics[f"command_us_per_frame.j{jobs}.{n}"] = cm["median"] * 1000 / n
            for label, d in (("in process", ip), ("command", cm)):
                lat_rows.append([f"{n:,}", jobs, label, int(d["n"]), d["median"], d["p95"], d["p99"], mb / (d["median"] / 1000)])
    if res["sizes"]:
        big = max(res["sizes"])
        metrics.update(
            largest_frames=big,
            in_process_mb_s=metrics[f"in_process_mb_s.j1.{big}"],
            in_process_mb_s_j2=metrics[f"in_process_mb_s.j2.{big}"],
            command_mb_s=metrics[f"command_mb_s.j1.{big}"],
            hash_only_mb_s=metrics[f"hash_only_mb_s.{big}"],
        )
    tables = list(res["tables"])
    tables.append(
        {
            "title": "Verify latency per size, ms",
            "columns": ["frames", "jobs", "how", "n", "p50", "p95", "p99", "MB/s at p50"],
            "rows": lat_rows,
            "note": "MB = 10^6 bytes, as nd7 counts them.",
        }
    )
    return {"tables": tables, "metrics": metrics, "verify": {k: v for k, v in res.items() if k not in ("tables", "machine")}}


#: Every step ``agentlog bench run`` runs, in order. One line per step.
STEPS: dict[str, StepFn] = {
    "size_by_kind": size_by_kind,
    "hook": hook,
    "verify": verify,
    **STORE_STEPS,
    **PROJECTION_STEPS,
    **IMPORT_STEPS,
    **MEMORY_STEPS,
    **WEB_STEPS,
    **SEARCH_STEPS,
    **PROOF_STEPS,
}

__all__ = ["STEPS", "event_profile", "size_by_kind", "hook", "verify"]
