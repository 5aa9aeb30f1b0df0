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
from typing import Callable

from agentlog.core.fileio import dir_usage
from agentlog.integrity import merkle

PROOFS = 1000


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def timed(samples: list[float], fn: Callable[[], object]) -> object:
    t = time.perf_counter()
    out = fn()
    samples.append((time.perf_counter() - t) * 1000)
    return out


def inputs(leaves: int) -> list[bytes]:
    rng = random.Random(7)
    return [rng.randbytes(32) for _ in range(leaves)]


def report(name: str, leaves: int, append_s: float, size_bytes: int, files: int, root: bytes,
           first_ms: float, inclusion: list[float], consistency: list[float]) -> None:
    print(f"impl                  {name}")
    print(f"leaves                {leaves:,}")
    print(f"append                {append_s:.2f} s = {leaves / append_s:,.0f} leaves/s = {append_s / leaves * 1e6:.2f} µs/leaf")
    print(f"on disk               {size_bytes:,} B in {files:,} files = {size_bytes / leaves:.2f} B/leaf")
    print(f"root                  {root.hex()}")
    print(f"first proof (cold)    {first_ms:.2f} ms")
    print(f"inclusion p50 / p95   {pct(inclusion, 0.5):.3f} / {pct(inclusion, 0.95):.3f} ms (n={len(inclusion)})")
    print(f"consistency p50 / p95 {pct(consistency, 0.5):.3f} / {pct(consistency, 0.95):.3f} ms (n={len(consistency)})")
    print(f"inclusion mean        {statistics.fmean(inclusion):.3f} ms")


def run_ours(work: str, leaves: int, batch: int, durable: bool) -> None:
    from agentlog.integrity.tiles import TileStore

    data = inputs(leaves)
    store = TileStore(os.path.join(work, "tree"), durable=durable)
    leaf_hash = merkle.leaf_hash
    t = time.perf_counter()
    for i in range(0, leaves, batch):
        store.append([leaf_hash(d) for d in data[i : i + batch]])
    append_s = time.perf_counter() - t
    size_bytes, files = dir_usage(os.path.join(work, "tree"))

    store = TileStore(os.path.join(work, "tree"), durable=durable)  # reopened: cold caches
    root = store.root()
    rng = random.Random(11)
    first: list[float] = []
    timed(first, lambda: store.inclusion_proof(rng.randrange(leaves)))
    inclusion: list[float] = []
    consistency: list[float] = []
    for _ in range(PROOFS):
        index = rng.randrange(leaves)
        path = timed(inclusion, lambda: store.inclusion_proof(index))
        assert merkle.verify_inclusion(leaf_hash(data[index]), index, leaves, path, root)  # type: ignore[arg-type]
    for _ in range(PROOFS):
        old = rng.randrange(1, leaves)
        proof = timed(consistency, lambda: store.consistency_proof(old))
        assert merkle.verify_consistency(old, leaves, store.root(old), root, proof)  # type: ignore[arg-type]
    report(f"agentlog TileStore (durable={durable}, batch={batch:,})", leaves, append_s, size_bytes, files, root,
           first[0], inclusion, consistency)


def run_pymerkle(work: str, leaves: int, batch: int) -> None:
    from pymerkle import SqliteTree  # type: ignore[import-not-found]

    data = inputs(leaves)
    db = os.path.join(work, "tree.db")
    tree = SqliteTree(db)
    t = time.perf_counter()
    for i in range(0, leaves, batch):
        tree.append_entries(data[i : i + batch])
    append_s = time.perf_counter() - t
    tree.close()
    size_bytes, files = dir_usage(work)

    tree = SqliteTree(db)  # reopened: cold caches
    root = tree.get_root()
    rng = random.Random(11)
    first: list[float] = []
    timed(first, lambda: tree.prove_inclusion(rng.randrange(leaves) + 1))
    inclusion: list[float] = []
    consistency: list[float] = []
    for _ in range(PROOFS):
        index = rng.randrange(leaves)
        proof = timed(inclusion, lambda: tree.prove_inclusion(index + 1))  # pymerkle counts from 1
        path = proof.path[1:]  # type: ignore[attr-defined]  # its path starts with the leaf itself
        assert merkle.verify_inclusion(merkle.leaf_hash(data[index]), index, leaves, path, root)
    for _ in range(PROOFS):
        old = rng.randrange(1, leaves)
        proof = timed(consistency, lambda: tree.prove_consistency(old))
        # its consistency path is not RFC 9162's (other subtrees, and bits to combine them): its own verifier
        proof.verify(tree.get_root(old), root)  # type: ignore[attr-defined]
    tree.close()
    report(f"pymerkle SqliteTree (batch={batch:,})", leaves, append_s, size_bytes, files, root, first[0],
           inclusion, consistency)


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
