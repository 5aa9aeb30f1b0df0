"""The ``proofs`` step (issue 28): what the Merkle tree costs and how fast its proofs are.

- Ingest with the tree against without it: the same loaded logs ingested into
  fresh stores, the two variants alternating round by round (this machine is
  noisy), events/s each, and the tree's own share of the run (``tree_secs``).
- The tree's bytes per frame (level files, leaf index, event-id index, log list, cursors).
- Inclusion and consistency proofs from the tiles, in process: the first after
  opening the tree (cold) and then 1,000 of each at random (p50/p95/p99), and
  their size.
- Signing a checkpoint.
- Whole processes, when the commands exist: ``agentlog prove EVENT`` and the
  standalone verifier on a 100-event bundle (``python -I``), 10 runs each.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from typing import Any

from agentlog.bench.common import describe
from agentlog.core.fileio import dir_usage
from agentlog.bench.context import StepContext
from agentlog.bench.roots import loaded_logs, root_over

PROOF_SAMPLES = 1000
PROCESS_RUNS = 10


def _ingests(ctx: StepContext, logs_root: str, rounds: int) -> dict[str, Any]:
    from agentlog.api import ingest, tree_dir

    rates: dict[str, list[float]] = {"without": [], "with": []}
    tree_share: list[float] = []
    tree_cpu: list[float] = []
    kept: str | None = None
    for r in range(rounds):
        order = ("without", "with") if r % 2 == 0 else ("with", "without")
        for variant in order:
            root = root_over(ctx, logs_root)
            ctx.progress(f"ingest round {r + 1}/{rounds}, {variant} the tree")
            t0 = time.perf_counter()
            report = ingest(root, durability="relaxed", tree=variant == "with")
            secs = time.perf_counter() - t0
            rates[variant].append(report.events / secs)
            if variant == "with":
                if report.tree_error:
                    ctx.cap(f"the tree did not grow: {report.tree_error}")
                tree_share.append(report.tree_secs / secs)
                tree_cpu.append(report.tree_cpu_secs)
                if kept is None:
                    kept = root
                    continue
            shutil.rmtree(os.path.join(root, "store"), ignore_errors=True)
            shutil.rmtree(tree_dir(root), ignore_errors=True)
    return {"rates": rates, "tree_share": tree_share, "tree_cpu": tree_cpu, "root": kept}


def _proof_times(root: str) -> dict[str, Any]:
    from agentlog.api import FrameTree, verify_consistency, verify_inclusion

    t0 = time.perf_counter()
    tree = FrameTree(root)
    size = tree.size
    rng = random.Random(28)
    first_inclusion = tree.tiles.inclusion_proof(rng.randrange(size))
    cold_ms = (time.perf_counter() - t0) * 1000
    inclusion, consistency, sizes = [], [], []
    for _ in range(PROOF_SAMPLES):
        i = rng.randrange(size)
        t = time.perf_counter()
        proof = tree.tiles.inclusion_proof(i)
        inclusion.append((time.perf_counter() - t) * 1000)
        sizes.append(len(proof) * 32)
    root_hash = tree.root_hash()
    consistency_sizes = []
    for _ in range(PROOF_SAMPLES):
        old = rng.randrange(1, size + 1)
        t = time.perf_counter()
        proof = tree.tiles.consistency_proof(old, size)
        consistency.append((time.perf_counter() - t) * 1000)
        consistency_sizes.append(len(proof) * 32)
    # a sample checked, so that the timed proofs are known to be right
    i = rng.randrange(size)
    leaf = tree.tiles.hash_at(0, i)
    ok = verify_inclusion(leaf, i, size, tree.tiles.inclusion_proof(i), root_hash)
    old = rng.randrange(1, size + 1)
    ok = ok and verify_consistency(old, size, tree.root_hash(old), root_hash, tree.tiles.consistency_proof(old, size))
    return {"size": size, "cold_ms": cold_ms, "inclusion": describe(inclusion), "consistency": describe(consistency),
            "inclusion_bytes": describe([float(s) for s in sizes]),
            "consistency_bytes": describe([float(s) for s in consistency_sizes]), "checked": ok,
            "first_proof_len": len(first_inclusion)}


def _signing(root: str) -> dict[str, float]:
    """Signing the tree head as a checkpoint (the first `checkpoint` also makes the key)."""
    from agentlog.operations.checkpoints import Checkpoint, checkpoint, origin, sign_checkpoint, signer

    checkpoint(root)
    key = signer(root)
    from agentlog.api import FrameTree

    tree = FrameTree(root)
    head = Checkpoint(origin(root), tree.size, tree.root_hash())
    times = []
    for _ in range(200):
        t = time.perf_counter()
        sign_checkpoint(head, key)
        times.append((time.perf_counter() - t) * 1000)
    return describe(times)


def _process_times(ctx: StepContext, root: str) -> dict[str, Any]:
    """Whole-process `agentlog prove EVENT`, and the standalone verifier (`python -I`) on a
    bundle of 100 events, when those commands exist in this build."""
    env = {**os.environ, "AGENTLOG_HOME": root}
    out: dict[str, Any] = {}
    probe = subprocess.run([sys.executable, "-m", "agentlog", "prove", "--help"], capture_output=True, env=env,
                           timeout=120)
    if probe.returncode != 0:
        out["missing"] = "agentlog prove is not in this build"
        return out
    from agentlog.api import read_events

    table = read_events(root, columns=["event_id", "log_provider", "log_key"])
    rng = random.Random(7)
    ids = table.column("event_id").to_pylist()
    times = []
    for event_id in rng.sample(ids, min(PROCESS_RUNS, len(ids))):
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "agentlog", "prove", str(event_id)], capture_output=True, env=env,
                           timeout=300)
        times.append((time.perf_counter() - t) * 1000)
        if r.returncode != 0:
            out["prove_error"] = r.stderr.decode("utf-8", "replace")[-300:]
            return out
    out["prove_ms"] = describe(times)
    # a session of at least 100 events, its bundle, the standalone verifier on it
    counts: dict[tuple[str, str], int] = {}
    for provider, key in zip(table.column("log_provider").to_pylist(), table.column("log_key").to_pylist()):
        counts[(provider, key)] = counts.get((provider, key), 0) + 1
    big = [k for k, n in counts.items() if n >= 100]
    if not big:
        out["standalone"] = "no session of 100 events"
        return out
    work = ctx.tmpdir()
    bundle, script = os.path.join(work, "bundle.json"), os.path.join(work, "verify_bundle.py")
    r = subprocess.run([sys.executable, "-m", "agentlog", "prove", big[0][1], "--out", bundle], capture_output=True,
                       env=env, timeout=600)
    s = subprocess.run([sys.executable, "-m", "agentlog", "verify-proof", "--print-script"], capture_output=True,
                       env=env, timeout=120)
    if r.returncode != 0 or s.returncode != 0:
        out["standalone"] = (r.stderr or s.stderr).decode("utf-8", "replace")[-300:]
        return out
    with open(script, "wb") as fh:
        fh.write(s.stdout)
    with open(bundle, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["entries"] = (doc.get("entries") or [])[:100]  # each entry stands alone: a bundle of 100 of them
    entries = len(doc["entries"])
    with open(bundle, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    times = []
    for _ in range(PROCESS_RUNS):
        t = time.perf_counter()
        v = subprocess.run([sys.executable, "-I", script, bundle], capture_output=True, timeout=300)
        times.append((time.perf_counter() - t) * 1000)
        if v.returncode != 0:
            out["standalone"] = v.stdout.decode("utf-8", "replace")[-300:]
            return out
    out["standalone_ms"] = describe(times)
    out["standalone_entries"] = entries
    out["bundle_bytes"] = os.path.getsize(bundle)
    return out


def proofs(ctx: StepContext) -> dict[str, Any]:
    """The Merkle tree: ingest with it against without, bytes per frame, proof times and sizes, signing."""
    logs_root, _t_load = loaded_logs(ctx, ctx.events)
    rounds = 3  # the two variants differ by a few per cent, and one run of either varies by ±10 % here
    ing = _ingests(ctx, logs_root, rounds)
    root = ing["root"]
    tables: list[dict[str, Any]] = []
    without, with_ = describe(ing["rates"]["without"]), describe(ing["rates"]["with"])
    share = describe([s * 100 for s in ing["tree_share"]])
    slower = (1 - with_["median"] / without["median"]) * 100
    metrics: dict[str, Any] = {"ingest_without_events_per_s": without["median"],
                               "ingest_with_events_per_s": with_["median"], "ingest_slower_pct": slower,
                               "tree_share_pct": share["median"],
                               "tree_worker_cpu_secs": describe(ing["tree_cpu"])["median"] if ing["tree_cpu"] else None}
    tables.append({
        "title": f"Ingest of {ctx.events:,} events with the Merkle tree and without",
        "columns": ["variant", "rounds", "events/s (median)", "tree's share of the run"],
        "rows": [["without the tree", rounds, f"{without['median']:,.0f}", "—"],
                 ["with the tree", rounds, f"{with_['median']:,.0f}", f"{share['median']:.1f} %"],
                 ["difference", "", f"{slower:+.1f} % slower", "goal ≤ 5 %"]],
        "note": "`ingest(root, durability='relaxed', tree=…)` over the same loaded logs into fresh stores, the "
                "variants alternating by round. The tree's share is the wall time ingest spent on it "
                "(`IngestReport.tree_secs`: growing it on its main thread, or, in a long run, handing it to the "
                "tree worker process and waiting for it at the end). The worker's own CPU time (it reads and "
                "hashes every frame again, on the other core): "
                + (f"{describe(ing['tree_cpu'])['median']:.1f} s (median of the rounds)." if ing["tree_cpu"] else
                   "not recorded."),
    })
    if root is None:
        return {"tables": tables, "metrics": metrics}
    from agentlog.api import tree_dir

    tree_bytes, tree_files = dir_usage(tree_dir(root))
    times = _proof_times(root)
    per_frame = tree_bytes / max(1, times["size"])
    metrics.update({"tree_bytes_per_frame": per_frame, "tree_files": tree_files,
                    "inclusion_p50_ms": times["inclusion"]["median"], "inclusion_p95_ms": times["inclusion"]["p95"],
                    "consistency_p50_ms": times["consistency"]["median"],
                    "consistency_p95_ms": times["consistency"]["p95"], "proofs_checked": times["checked"]})
    inc, con = times["inclusion"], times["consistency"]
    tables.append({
        "title": f"The tree of {times['size']:,} frames: size and proofs",
        "columns": ["what", "p50", "p95", "p99", "goal"],
        "rows": [["tree bytes per frame", f"{per_frame:.1f} B", "", "", "≤ 70 B"],
                 ["first inclusion proof after opening (cold)", f"{times['cold_ms']:.2f} ms", "", "", ""],
                 ["inclusion proof", f"{inc['median']:.3f} ms", f"{inc['p95']:.3f} ms", f"{inc['p99']:.3f} ms",
                  "≤ 2 ms p95"],
                 ["consistency proof (random old size → now)", f"{con['median']:.3f} ms", f"{con['p95']:.3f} ms",
                  f"{con['p99']:.3f} ms", ""],
                 ["inclusion proof size", f"{times['inclusion_bytes']['median']:.0f} B", "", "", ""],
                 ["consistency proof size", f"{times['consistency_bytes']['median']:.0f} B", "", "", ""]],
        "note": f"In process, from the level files on disk ({tree_files:,} files under state/tree, the event-id "
                f"index included), "
                f"{PROOF_SAMPLES:,} random leaves and old sizes; one of each checked with the RFC 9162 verifiers "
                f"({'ok' if times['checked'] else 'FAILED'}).",
    })
    sign = _signing(root)
    metrics["checkpoint_p50_ms"] = sign["median"]
    proc = _process_times(ctx, root)
    rows = [["checkpoint (sign and keep; the same head is not signed twice)", f"{sign['median']:.2f} ms",
             f"{sign['p95']:.2f} ms", ""]]
    if "prove_ms" in proc:
        p = proc["prove_ms"]
        metrics["prove_process_p50_ms"] = p["median"]
        rows.append(["`agentlog prove EVENT`, whole process", f"{p['median']:.0f} ms", f"{p['p95']:.0f} ms",
                     "≤ 300 ms"])
    else:
        ctx.cap(proc.get("missing") or proc.get("prove_error") or "prove not measured")
    if "standalone_ms" in proc:
        v = proc["standalone_ms"]
        metrics["standalone_verify_p50_ms"] = v["median"]
        rows.append([f"standalone verifier, a bundle of {proc['standalone_entries']} frames "
                     f"({proc['bundle_bytes']:,} B), `python -I`, whole process", f"{v['median']:.0f} ms",
                     f"{v['p95']:.0f} ms", "≤ 100 ms (100 events)"])
    elif "standalone" in proc:
        ctx.cap(f"standalone verification not measured: {proc['standalone']}")
    tables.append({"title": "Checkpoints and whole processes", "columns": ["what", "p50", "p95", "goal"],
                   "rows": rows, "note": f"Whole processes: {PROCESS_RUNS} runs each, random events; the "
                                         "bundle is a whole session's (its first session of at least 100 events)."})
    return {"tables": tables, "metrics": metrics}


PROOF_STEPS = {"proofs": proofs}

__all__ = ["PROOF_STEPS", "proofs"]
