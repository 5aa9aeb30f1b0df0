#!/usr/bin/env python3
"""A/B of the import between two source trees on one corpus, interleaved, in one session.

    python scripts/ab_import.py BASE_SRC NEW_SRC BYTES ROUNDS mixed|fixtures

Builds a corpus of about BYTES with the bench's builder (``mixed``: half the
shared fixtures, half generated Claude Code transcripts; ``fixtures``: the
fixtures only), then per round imports it into a fresh data root with each
tree's code (the bench's child, ``agentlog.bench.import_steps.RUN``), and
prints wall MB/s and CPU ms per MB (user + system of the child and its
workers). Scratch under /tmp, removed at the end.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from agentlog.bench.import_steps import RUN, build_corpus  # noqa: E402
from agentlog.operations.fixtures import shared_dir  # noqa: E402


def main(base: str, new: str, target: int, rounds: int, mode: str) -> None:
    shared = shared_dir()
    if shared is None:
        raise SystemExit("the shared fixtures are not on this machine")
    work = tempfile.mkdtemp(prefix="ab-import-")
    try:
        corpus = os.path.join(work, "corpus")
        built = build_corpus(os.path.join(str(shared), "fixtures"), corpus, target,
                             seed=20261130 if mode == "mixed" else None)
        print("corpus", json.dumps(built), flush=True)
        for r in range(rounds):
            for name, src in (("base", base), ("new", new)):
                home = os.path.join(work, f"home-{name}-{r}")
                os.sync()
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t = time.perf_counter()
                out = subprocess.run([sys.executable, "-c", RUN, src, home, corpus], capture_output=True, text=True,
                                     env={**os.environ, "AGENTLOG_HOME": home})
                wall = time.perf_counter() - t
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if out.returncode != 0:
                    raise SystemExit(f"{name}: {out.stderr[-2000:]}")
                cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                done = json.loads(out.stdout)
                mb = done["bytes_read"] / 1e6
                print(f"round {r} {name}: wall {wall:.1f} s, {mb / wall:.1f} MB/s, CPU {cpu:.1f} s, "
                      f"{cpu * 1000 / mb:.1f} ms/MB, events {done['events']:,}", flush=True)
                shutil.rmtree(home, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 6 or sys.argv[5] not in ("mixed", "fixtures"):
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
