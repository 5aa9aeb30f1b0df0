"""Shared parts of the benchmarks: statistics, machine facts, result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

from .. import __version__


def percentile(xs: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return s[k]


def describe(xs: list[float]) -> dict[str, float]:
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "p95": percentile(xs, 95),
        "p99": percentile(xs, 99),
        "mean": statistics.fmean(xs),
        "min": min(xs),
        "max": max(xs),
    }


def machine() -> dict[str, Any]:
    commit = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        ).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "agentlog": __version__,
        "commit": commit,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.2f}"
        return str(v)

    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def write_results(result: dict[str, Any], out_dir: str, name: str) -> str:
    """Write ``<name>.json`` and ``<name>.md`` into ``out_dir``; return the Markdown."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    parts = [f"# agentlog bench {name}", "", f"Machine: {result['machine']['platform']}, {result['machine']['cpus']} CPUs, "
             f"Python {result['machine']['python']}, {result['machine']['when']} (commit {result['machine']['commit']})", ""]
    for table in result["tables"]:
        parts += [f"## {table['title']}", "", markdown_table(table["columns"], table["rows"]), ""]
        if table.get("note"):
            parts += [table["note"], ""]
    md = "\n".join(parts)
    with open(os.path.join(out_dir, f"{name}.md"), "w", encoding="utf-8") as f:
        f.write(md)
    return md
