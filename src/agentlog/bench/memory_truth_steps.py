"""The memory check's rows of ``agentlog bench memory``: memories with file evidence checked
through git (:mod:`agentlog.memory.truth`), at growing numbers of memories."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Final

from agentlog.bench.context import StepContext

SIZES: Final = (100, 1000)
LINES_PER_FILE: Final = 60
CITES_PER_FILE: Final = 10


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()


def _lines(f: int) -> list[str]:
    return [f"value_{f}_{i} = compute({f}, {i})" for i in range(LINES_PER_FILE)]


def _one_size(ctx: StepContext, n: int) -> dict[str, Any]:
    """``n`` memories, each citing 3 lines of one of ``n / 10`` files at the first commit; a second
    commit inserts lines at the top of a third of the files (their citations move) and edits one
    cited line in a tenth (changed). Then: the first full check, a second (nothing new), and an
    incremental one (HEAD unchanged: selects none)."""
    from agentlog.api import check_memories, create_memory

    root, repo = ctx.tmpdir(), ctx.tmpdir()
    files = max(1, n // CITES_PER_FILE)
    _git(repo, "init", "-q", "-b", "main")
    for f in range(files):
        with open(os.path.join(repo, f"m{f}.py"), "w") as fh:
            fh.write("\n".join(_lines(f)) + "\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    first = _git(repo, "rev-parse", "HEAD")
    was = os.environ.get("AGENTLOG_DURABILITY")
    os.environ["AGENTLOG_DURABILITY"] = "relaxed"  # (the setup's writes, not what is measured)
    try:
        for i in range(n):
            f, k = divmod(i, CITES_PER_FILE)
            create_memory(root, "fact", f"m{i}", attributes={"statement": f"m{i}"},
                           evidence=[{"type": "file", "path": f"m{f % files}.py", "line_start": 5 * k + 1,
                                      "line_end": 5 * k + 3, "commit": first}])
    finally:
        if was is None:
            os.environ.pop("AGENTLOG_DURABILITY", None)
        else:
            os.environ["AGENTLOG_DURABILITY"] = was
    for f in range(files):
        lines = _lines(f)
        if f % 3 == 0:
            lines = ["# moved down"] * 2 + lines
        if f % 10 == 1:
            lines[1] = "edited = True"
        with open(os.path.join(repo, f"m{f}.py"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
    _git(repo, "commit", "-q", "-am", "second")
    out: dict[str, Any] = {"memories": n, "files": files}
    for name, everything in (("first", True), ("again", True), ("incremental", False)):
        t = time.perf_counter()
        report = check_memories(root, repo_dir=repo, everything=everything)
        out[name] = {"ms": (time.perf_counter() - t) * 1000, "checked": report.checked, "written": report.written,
                     "moved": report.moved, "doubtful": len(report.doubtful)}
    return out


def truth_checks(ctx: StepContext, sizes: tuple[int, ...] = SIZES) -> tuple[dict[str, Any], dict[str, Any]]:
    """The table and the metrics of the memory check at each of ``sizes``."""
    runs = [_one_size(ctx, n) for n in sizes]
    metrics: dict[str, Any] = {}
    rows = []
    for r in runs:
        n = r["memories"]
        first, again, inc = r["first"], r["again"], r["incremental"]
        metrics.update({f"check.{n}.first_ms": first["ms"], f"check.{n}.again_ms": again["ms"],
                        f"check.{n}.incremental_ms": inc["ms"], f"check.{n}.per_memory_ms": again["ms"] / n})
        rows.append([f"{n:,} / {r['files']:,}", f"{first['ms']:.0f} ms ({first['moved']} moved, {first['doubtful']} "
                     f"doubtful)", f"{again['ms']:.0f} ms", f"{again['ms'] / n:.2f} ms", f"{inc['ms']:.0f} ms"])
    table = {
        "title": "Memory checks through git (agentlog memory check)",
        "columns": ["memories / files cited", "first full check", "full check again", "per memory (again)",
                    "incremental, HEAD unchanged"],
        "rows": rows,
        "note": "Each memory cites 3 lines of one of memories/10 files at the first commit; the second commit moves "
                "the lines of a third of the files down (citations followed) and edits a cited line in a tenth. "
                "The first check writes a memory_checked event for each memory; the second finds the moved ones "
                "unchanged at their new place (events written again for them); the incremental one selects none "
                "(its cost is the projection's catch-up and one count). git is run per distinct (commit, file): "
                "per memory the cost falls as more memories cite one file. One run each (not a median).",
    }
    return table, metrics
