"""How the benchmark steps measure: child processes timed spawn to exit with their
own peak RSS, repeated calls timed in process, this process's peak resident set,
and the bytes under a directory.

Statistics over the samples are :func:`agentlog.bench.common.describe`.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable


def child(argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``argv`` to its end: wall seconds (spawn to exit, as the caller waits), its own
    peak RSS (``wait4``), exit code and output. Raises when it fails."""
    scale = 1 if sys.platform == "darwin" else 1024
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        secs = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} … exited {proc.returncode}: "
                           f"{stderr.decode('utf-8', 'replace')[-1500:]}")
    return {"secs": secs, "rss": int(usage.ru_maxrss) * scale, "stdout": stdout, "stderr": stderr}


def fresh(argv: list[str], env: dict[str, str], n: int) -> tuple[list[float], list[int], bytes]:
    """``n`` fresh processes: wall ms of each, peak RSS of each, the last one's stdout."""
    ms, rss = [], []
    out = b""
    for _ in range(n):
        r = child(argv, env)
        ms.append(r["secs"] * 1e3)
        rss.append(r["rss"])
        out = r["stdout"]
    return ms, rss, out


def timed(fn: Callable[[], Any], n: int) -> tuple[list[float], Any]:
    """``fn`` run ``n`` times: milliseconds of each, and the last answer."""
    out: list[float] = []
    last: Any = None
    for _ in range(n):
        t0 = time.perf_counter()
        last = fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out, last


def peak_rss() -> dict[str, int | None]:
    """This process's peak resident set: getrusage (self, and its largest waited-for child) and VmHWM."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    hwm = None
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale,
        "vmhwm_bytes": hwm,
        "children_ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale,
    }


def reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current resident set (Linux ≥ 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def vmhwm() -> int | None:
    """This process's ``VmHWM`` (None where there is no /proc)."""
    return peak_rss()["vmhwm_bytes"]


def files_under(path: str, suffix: str = "") -> list[str]:
    """Every file under ``path`` whose name ends with ``suffix``."""
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(suffix)]


def du(path: str) -> int:
    """Bytes of the files under ``path`` (a file gone meanwhile counts nothing)."""
    total = 0
    for d, _, fs in os.walk(path):
        for f in fs:
            try:
                total += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    return total


def du_files(path: str) -> tuple[int, int]:
    """Bytes and number of the files under ``path``."""
    files = files_under(path)
    return sum(os.path.getsize(p) for p in files), len(files)


__all__ = ["child", "du", "du_files", "files_under", "fresh", "peak_rss", "reset_peak", "timed", "vmhwm"]
