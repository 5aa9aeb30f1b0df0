#!/usr/bin/env python3
"""A/B of whole-process start-up between two installs, interleaved, in one session.

    python scripts/ab_startup.py BASE_AGENTLOG NEW_AGENTLOG [RUNS] [EVENTS]

BASE_AGENTLOG and NEW_AGENTLOG are the ``agentlog`` console scripts of two
virtualenvs (each an editable install of one source tree). A data root of
EVENTS seeded benchmark events (``agentlog bench load``, default 5,000) is
written once and caught up (store and projection) by each version in turn;
then each round runs ``agentlog --help``, ``agentlog status`` and
``agentlog timeline`` with both versions, the order alternating per round,
and the script prints p50 / p95 / mean wall milliseconds per command and
version over RUNS rounds (default 20), and new / base of the medians.

Bytecode is cached as an installed package has it (``PYTHONDONTWRITEBYTECODE``
is dropped and one untimed run of each command writes the caches), so the
numbers are what a user's second and later commands cost. Scratch under
/tmp, removed at the end.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = (("--help",), ("status",), ("timeline",))


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main(base: str, new: str, runs: int, events: int) -> None:
    work = tempfile.mkdtemp(prefix="ab-startup-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["AGENTLOG_HOME"] = os.path.join(work, "home")
    cwd = os.path.join(work, "cwd")
    os.makedirs(cwd)
    try:
        subprocess.run([base, "bench", "load", "--events", str(events)], env=env, check=True, capture_output=True,
                       cwd=cwd)
        for exe in (base, new):  # catch up, and write each tree's bytecode caches
            for cmd in COMMANDS:
                subprocess.run([exe, *cmd], env=env, check=True, capture_output=True, cwd=cwd)
        times: dict[tuple[str, str], list[float]] = {}
        for r in range(runs):
            order = ((("base", base), ("new", new)) if r % 2 == 0 else (("new", new), ("base", base)))
            for cmd in COMMANDS:
                for name, exe in order:
                    t = time.perf_counter()
                    subprocess.run([exe, *cmd], env=env, check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, cwd=cwd)
                    times.setdefault((" ".join(cmd), name), []).append((time.perf_counter() - t) * 1000)
        print(f"{runs} rounds, {events:,} events; wall ms of the whole process")
        print(f"{'command':<12} {'version':<5} {'p50':>8} {'p95':>8} {'mean':>8}")
        for cmd in COMMANDS:
            c = " ".join(cmd)
            for name in ("base", "new"):
                xs = times[(c, name)]
                print(f"{c:<12} {name:<5} {statistics.median(xs):8.1f} {pct(xs, 0.95):8.1f} {statistics.fmean(xs):8.1f}")
            ratio = statistics.median(times[(c, "new")]) / statistics.median(times[(c, "base")])
            print(f"{c:<12} new/base of the medians: {ratio:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 20,
         int(sys.argv[4]) if len(sys.argv) > 4 else 5000)
