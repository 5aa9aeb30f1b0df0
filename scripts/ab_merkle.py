#!/usr/bin/env python3
"""Our tiled Merkle tree against pymerkle's SQLite tree, at a given number of leaves.

    python scripts/ab_merkle.py ours [LEAVES] [BATCH] [--not-durable]
    python scripts/ab_merkle.py pymerkle [LEAVES] [BATCH]

Each leaf's input is a 32-byte frame hash (random); the leaf hash is
SHA-256(0x00 ‖ input), which both sides compute inside the timed append. The
leaves are appended in batches of BATCH (default 10,000: an ingest cycle's
worth), LEAVES in all (default 1,450,000). Then the store is reopened in the
same process (cold caches) and the script times the first inclusion proof,
then 1,000 inclusion proofs of random leaves against the whole tree and 1,000
consistency proofs from random older sizes, and prints p50 / p95; every proof
is verified (outside the timing) with ``agentlog.integrity.merkle``, and the
root is printed so the two sides can be compared. It also prints the bytes on
disk per leaf.

pymerkle is not a dependency: run the pymerkle side from a scratch
virtualenv that has ``pymerkle==7.0.0`` with ``PYTHONPATH=src`` (agentlog's
integrity and core packages use the standard library only). Scratch under
/tmp, removed at the end.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, TypeVar

from agentlog.core.fileio import dir_usage
from agentlog.integrity import merkle

PROOFS = 1000
T = TypeVar("T")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def timed(samples: list[float], fn: Callable[[], T], cpu: list[float] | None = None) -> T:
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    samples.append((time.perf_counter() - t) * 1000)
    if cpu is not None:
        cpu.append((time.process_time() - c) * 1000)
    return out


def inputs(leaves: int) -> list[bytes]:
    rng = random.Random(7)
    return [rng.randbytes(32) for _ in range(leaves)]


class Timings:
    def __init__(self) -> None:
        self.append_wall = self.append_cpu = 0.0
        self.first: list[float] = []
        self.inclusion: list[float] = []
        self.inclusion_cpu: list[float] = []
        self.consistency: list[float] = []
        self.consistency_cpu: list[float] = []


def report(name: str, leaves: int, t: Timings, size_bytes: int, files: int, root: bytes) -> None:
    def line(label: str, xs: list[float]) -> str:
        return f"{label:<22}{pct(xs, 0.5):.3f} / {pct(xs, 0.95):.3f} ms (mean {statistics.fmean(xs):.3f}, n={len(xs)})"

    print(f"impl                  {name}")
    print(f"leaves                {leaves:,}")
    for label, secs in (("append (wall)", t.append_wall), ("append (cpu)", t.append_cpu)):
        print(f"{label:<22}{secs:.2f} s = {leaves / secs:,.0f} leaves/s = {secs / leaves * 1e6:.2f} µs/leaf")
    print(f"on disk               {size_bytes:,} B in {files:,} files = {size_bytes / leaves:.2f} B/leaf")
    print(f"root                  {root.hex()}")
    print(f"first proof (cold)    {t.first[0]:.2f} ms")
    print(line("inclusion p50/p95", t.inclusion))
    print(line("  cpu", t.inclusion_cpu))
    print(line("consistency p50/p95", t.consistency))
    print(line("  cpu", t.consistency_cpu))


def run_ours(work: str, leaves: int, batch: int, durable: bool) -> None:
    from agentlog.integrity.tiles import TileStore

    data = inputs(leaves)
    store = TileStore(os.path.join(work, "tree"), durable=durable)
    leaf_hash = merkle.leaf_hash
    t = Timings()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, leaves, batch):
        store.append([leaf_hash(d) for d in data[i : i + batch]])
    t.append_wall, t.append_cpu = time.perf_counter() - wall, time.process_time() - cpu
    size_bytes, files = dir_usage(os.path.join(work, "tree"))

    store = TileStore(os.path.join(work, "tree"), durable=durable)  # reopened: cold caches
    root = store.root()
    rng = random.Random(11)
    timed(t.first, lambda: store.inclusion_proof(rng.randrange(leaves)))
    for _ in range(PROOFS):
        index = rng.randrange(leaves)
        path = timed(t.inclusion, lambda: store.inclusion_proof(index), t.inclusion_cpu)
        assert merkle.verify_inclusion(leaf_hash(data[index]), index, leaves, path, root)
    for _ in range(PROOFS):
        old = rng.randrange(1, leaves)
        proof = timed(t.consistency, lambda: store.consistency_proof(old), t.consistency_cpu)
        assert merkle.verify_consistency(old, leaves, store.root(old), root, proof)
    report(f"agentlog TileStore (durable={durable}, batch={batch:,})", leaves, t, size_bytes, files, root)


def run_pymerkle(work: str, leaves: int, batch: int) -> None:
    from pymerkle import SqliteTree  # type: ignore[import-not-found]

    data = inputs(leaves)
    db = os.path.join(work, "tree.db")
    tree = SqliteTree(db)
    t = Timings()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, leaves, batch):
        tree.append_entries(data[i : i + batch])
    t.append_wall, t.append_cpu = time.perf_counter() - wall, time.process_time() - cpu
    tree.close()
    size_bytes, files = dir_usage(work)

    tree = SqliteTree(db)  # reopened: cold caches
    root = tree.get_root()
    rng = random.Random(11)
    timed(t.first, lambda: tree.prove_inclusion(rng.randrange(leaves) + 1))
    for _ in range(PROOFS):
        index = rng.randrange(leaves)
        proof = timed(t.inclusion, lambda: tree.prove_inclusion(index + 1), t.inclusion_cpu)  # pymerkle counts from 1
        path = proof.path[1:]  # its path starts with the leaf itself
        assert merkle.verify_inclusion(merkle.leaf_hash(data[index]), index, leaves, path, root)
    for _ in range(PROOFS):
        old = rng.randrange(1, leaves)
        proof = timed(t.consistency, lambda: tree.prove_consistency(old), t.consistency_cpu)
        # its consistency path is not RFC 9162's (other subtrees, and bits to combine them): its own verifier
        proof.verify(tree.get_root(old), root)
    tree.close()
    report(f"pymerkle SqliteTree (batch={batch:,})", leaves, t, size_bytes, files, root)


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    impl = args[0]
    leaves = int(args[1]) if len(args) > 1 else 1_450_000
    batch = int(args[2]) if len(args) > 2 else 10_000
    work = tempfile.mkdtemp(prefix="ab-merkle-")
    try:
        if impl == "ours":
            run_ours(work, leaves, batch, durable="--not-durable" not in argv)
        elif impl == "pymerkle":
            run_pymerkle(work, leaves, batch)
        else:
            raise SystemExit(f"unknown implementation {impl!r}: ours or pymerkle")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
