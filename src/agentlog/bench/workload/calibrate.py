"""How close a sample comes to the seed document's calibration."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

from agentlog.core.fastjson import dumps_bytes
from agentlog.bench.workload import model as M
from agentlog.bench.workload.canonical import Canonicalizer
from agentlog.bench.workload.generator import DEFAULT_SEED, generate
from agentlog.bench.workload.transcripts import EXTRA_KINDS


def calibrate(
    events: int,
    seed: int = DEFAULT_SEED,
    on_event: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Generate ``events`` samples, canonicalise them, and measure them.

    Returns mean JSON bytes per canonical event (the compact JSON the log
    stores), the zstd level-3 ratio of the events as JSONL (one streaming
    frame, as ``zstd -3`` on the file), kind counts and shares next to the
    seed's, per-profile sizes, the share of reconstructed events, the
    fixture chain's failing edits, and the generation rate (samples/s for the
    generator alone, events/s for generation plus the capture path — the
    hook's for hook samples, the shipped importer's for transcript samples).
    Hook samples' events are taken in stream order, the transcript samples'
    after them, as the importer wrote them (see :class:`Canonicalizer`);
    ``kind_mismatches`` leaves out the kinds the importer adds beyond the
    sample's (:data:`.transcripts.EXTRA_KINDS`).
    ``on_event(sample, event)`` is called for every canonical event (tests
    use it to check each one without a second pass; a transcript sample comes
    without its line).
    """
    import zstandard

    cctx = zstandard.ZstdCompressor(level=3).compressobj()
    kinds: Counter[str] = Counter()
    providers: Counter[str] = Counter()
    prof_n: Counter[str] = Counter()
    prof_bytes: Counter[str] = Counter()
    reconstructed = 0
    redacted_events = 0
    chain_failed = 0
    chain_paths: set[str] = set()
    mismatched = 0
    total_bytes = 0
    zbytes = 0
    n_events = 0
    n_samples = 0
    t_gen = 0.0
    t_canon = 0.0
    pending: list[bytes] = []

    def take(sample: dict[str, Any], ev: dict[str, Any]) -> None:
        nonlocal total_bytes, n_events, reconstructed, redacted_events, chain_failed, mismatched, zbytes
        if on_event is not None:
            on_event(sample, ev)
        line = dumps_bytes(ev)
        size = len(line)
        total_bytes += size
        n_events += 1
        kinds[ev["kind"]] += 1
        providers[ev["provider"]] += 1
        tool = ev.get("tool")
        profile = ev["kind"] + ("/" + tool["category"] if tool else "")
        prof_n[profile] += 1
        prof_bytes[profile] += size
        attrs = ev.get("attrs", {})
        if attrs.get("reconstructed"):
            reconstructed += 1
        if attrs.get("redactions"):
            redacted_events += 1
        if ev.get("provider_session_id") == M.CHAIN_SESSION_ID and ev["kind"] == "tool_call_failed":
            chain_failed += 1
            chain_paths.update(ev.get("paths", []))
        if ev["kind"] != sample.get("kind") and ev["kind"] not in EXTRA_KINDS:
            mismatched += 1
        pending.append(line)
        pending.append(b"\n")
        if len(pending) >= 1024:
            zbytes += len(cctx.compress(b"".join(pending)))
            pending.clear()

    it = generate(events, seed)
    clock = time.perf_counter
    with Canonicalizer(keep_samples=True) as canon:
        while True:
            t0 = clock()
            sample = next(it, None)
            t1 = clock()
            t_gen += t1 - t0
            if sample is None:
                break
            n_samples += 1
            evs = canon(sample)
            t_canon += clock() - t1
            for ev in evs:
                take(sample, ev)
        # the transcript samples' events: the importer's, once their files are written
        t0 = clock()
        canon.import_transcripts()
        t_canon += clock() - t0
        for known, ev in canon.logged():
            take(known if known is not None else {"source": "transcript"}, ev)
    if pending:
        zbytes += len(cctx.compress(b"".join(pending)))
    zbytes += len(cctx.flush())
    total_lines = total_bytes + n_events
    shares = {k: 100.0 * v / n_events for k, v in kinds.items()} if n_events else {}
    return {
        "events": events,
        "seed": seed,
        "samples": n_samples,
        "canonical_events": n_events,
        "json_bytes": total_bytes,
        "mean_json_bytes": total_bytes / n_events if n_events else 0.0,
        "target_mean_json_bytes": M.SEED_MEAN_JSON_BYTES.value,
        "jsonl_bytes": total_lines,
        "zstd3_bytes": zbytes,
        "zstd3_ratio": total_lines / zbytes if zbytes else 0.0,
        "target_zstd3_ratio": M.SEED_ZSTD_RATIO.value,
        "kinds": {k: {"count": v, "share": round(shares[k], 3), "seed_share": M.SEED_KIND_SHARES.get(k)}
                  for k, v in kinds.most_common()},
        "providers": {k: round(100.0 * v / n_events, 2) for k, v in providers.most_common()},
        "profiles": {k: {"count": v, "share": round(100.0 * v / n_events, 3),
                         "mean_json_bytes": round(prof_bytes[k] / v, 1)} for k, v in prof_n.most_common()},
        "reconstructed_share": 100.0 * reconstructed / n_events if n_events else 0.0,
        "redacted_events": redacted_events,
        "kind_mismatches": mismatched,
        "chain": {"failed_edits": chain_failed, "paths": sorted(chain_paths)},
        "generation": {
            "seconds": round(t_gen, 3),
            "samples_per_s": round(n_samples / t_gen, 1) if t_gen else 0.0,
        },
        "capture": {
            "seconds": round(t_canon, 3),
            "events_per_s": round(n_events / t_canon, 1) if t_canon else 0.0,
        },
        "events_per_s": round(n_events / (t_gen + t_canon), 1) if t_gen + t_canon else 0.0,
    }
