"""The "agent" ``agentlog bench sandbox`` starts under ``agentlog run``: it times a direct
``bash -c true`` against the same through the broker, and brokered output throughput, and
prints one JSON line. Standard library only (it runs as a script, under the floor)."""

import json
import os
import shlex
import subprocess
import sys
import time


def timed(argv: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, check=True)
        out.append((time.perf_counter() - t) * 1000)
    return out


def throughput(argv: list[str], size: int) -> float:
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE)
    got = 0
    assert p.stdout is not None
    while chunk := p.stdout.read(1 << 20):
        got += len(chunk)
    p.wait()
    return got / (1 << 20) / (time.perf_counter() - t)


def main() -> None:
    runs, size = int(sys.argv[1]), int(sys.argv[2])
    client = shlex.split(os.environ["AGENTLOG_RUN_EXEC"])
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    timed([shell, "-c", "true"], 5)
    timed([*client, "-c", "true"], 5)
    direct = timed([shell, "-c", "true"], runs)
    brokered = timed([*client, "-c", "true"], runs)
    cmd = f"head -c {size} /dev/zero"
    print(json.dumps({"direct_ms": direct, "brokered_ms": brokered,
                      "direct_mb_s": throughput([shell, "-c", cmd], size),
                      "brokered_mb_s": throughput([*client, "-c", cmd], size), "client": client[0]}))


if __name__ == "__main__":
    main()
