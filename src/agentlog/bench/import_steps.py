"""``import``: importing a transcript corpus (MB/s, events/s, peak RSS, a no-op re-import).

The corpus is the real transcripts of ``shared/fixtures`` (Claude Code,
Codex, Gemini CLI, Cursor) replicated until it reaches the run's size —
:data:`BYTES_PER_EVENT` bytes per ``--events`` event, so about 1 GB at the
default 1.45 M — each copy with its session, message and tool-use ids made
its own (otherwise every copy after the first would be recognised as the
same history and not written). Not timed. Then two child processes run
``agentlog.importer.run.import_paths`` over it: the first imports everything
(wall clock, spawn to exit, and its peak RSS), the second finds every file
unchanged.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Final

from .harness import StepContext

#: corpus bytes per --events event (1.45 M events → ~1 GB)
BYTES_PER_EVENT: Final = 700
AGENT_DIRS: Final = {"claude-code": "claude-code", "codex": "codex", "gemini-cli": "gemini-cli", "cursor": "cursor"}
_SRC: Final = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUN: Final = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from agentlog.importer.run import import_paths
root, corpus = sys.argv[2], sys.argv[3]
t = time.perf_counter()
totals = {}
for agent in ("claude-code", "codex", "gemini-cli", "cursor"):
    r = import_paths(root, [agent], [corpus + "/" + agent])
    for k, v in r.totals().items():
        totals[k] = totals.get(k, 0) + v
totals["seconds"] = time.perf_counter() - t
print(json.dumps(totals))
"""
_IDS: Final = re.compile(rb'("(?:sessionId|session_id|id|uuid|parentUuid|promptId|call_id|tool_use_id|'
                         rb'turn_id)":")([^"]{6,})(")')


def _copy(data: bytes, k: int) -> bytes:
    """``data`` with every id made copy ``k``'s own."""
    tag = b"-c%d" % k
    out = _IDS.sub(lambda m: m.group(1) + m.group(2) + tag + m.group(3), data)
    return out.replace(b'"toolu_', b'"toolu_c%d_' % k).replace(b'"msg_', b'"msg_c%d_' % k)


def build_corpus(fixtures: str, out: str, target_bytes: int) -> dict[str, Any]:
    """Replicate the fixture transcripts under ``out/<agent>/`` until ``target_bytes``."""
    sources: list[tuple[str, str, bytes]] = []
    for agent, sub in AGENT_DIRS.items():
        d = os.path.join(fixtures, sub)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                if name.endswith(".jsonl"):
                    with open(os.path.join(d, name), "rb") as fh:
                        sources.append((agent, name, fh.read()))
    if not sources:
        raise FileNotFoundError(f"no transcripts under {fixtures}")
    written = 0
    files = 0
    k = 0
    while written < target_bytes:
        for agent, name, data in sources:
            # laid out as each agent keeps them (the importer looks for those shapes)
            d = os.path.join(out, agent, {"claude-code": "projects", "codex": "archived_sessions",
                                          "gemini-cli": "tmp/h/chats",
                                          "cursor": "projects/p/agent-transcripts"}[agent], f"c{k:05d}")
            os.makedirs(d, exist_ok=True)
            body = _copy(data, k)
            stem = name.rsplit(".", 1)[0]
            with open(os.path.join(d, f"{stem}-c{k}.jsonl"), "wb") as fh:
                fh.write(body)
            written += len(body)
            files += 1
        k += 1
    return {"bytes": written, "files": files, "copies": k, "sources": len(sources)}


def import_(ctx: StepContext) -> dict[str, Any]:
    """Import a transcript corpus of ~700 B per --events event; then import it again (a no-op)."""
    from ..fixtures import shared_dir
    from .projection_steps import _child

    shared = shared_dir()
    fixtures = os.path.join(str(shared), "fixtures") if shared else ""
    if not fixtures or not os.path.isdir(fixtures):
        return {"tables": [], "metrics": {}, "skipped": "the shared fixtures (real transcripts) are not on this machine"}
    target = max(1 << 20, ctx.events * BYTES_PER_EVENT)
    work = ctx.tmpdir()
    corpus = os.path.join(work, "corpus")
    ctx.progress(f"building a {target / 1e6:,.0f} MB corpus from the fixtures (not timed)")
    built = build_corpus(fixtures, corpus, target)
    root = os.path.join(work, "home")
    env = {**os.environ, "AGENTLOG_HOME": root}
    ctx.progress(f"importing {built['bytes'] / 1e6:,.0f} MB in {built['files']:,} files")
    first = _child([sys.executable, "-c", RUN, _SRC, root, corpus], env)
    done = json.loads(first["stdout"])
    ctx.progress("importing it again (nothing new)")
    second = _child([sys.executable, "-c", RUN, _SRC, root, corpus], env)
    again = json.loads(second["stdout"])
    mb = done["bytes_read"] / 1e6
    metrics: dict[str, Any] = {
        "corpus_bytes": built["bytes"], "files": built["files"], "events": done["events"],
        "mb_per_s": mb / first["secs"], "events_per_s": done["events"] / first["secs"],
        "mb_per_s_in_process": mb / done["seconds"] if done["seconds"] else 0.0,
        "peak_rss_bytes": first["rss"], "noop_secs": second["secs"], "noop_in_process_secs": again["seconds"],
        "noop_events": again["events"], "problems": done["problems"], "errors": done["errors"],
        "logs_bytes": sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(root, "logs"))
                          for f in fs),
    }
    table = {
        "title": f"Import a transcript corpus of {built['bytes'] / 1e6:,.0f} MB ({built['files']:,} files)",
        "columns": ["run", "wall (spawn to exit)", "MB/s", "events/s", "events written", "peak RSS"],
        "rows": [
            ["first import", f"{first['secs']:.1f} s", f"{metrics['mb_per_s']:.1f}", f"{metrics['events_per_s']:,.0f}",
             f"{done['events']:,}", f"{first['rss'] / 2**20:,.0f} MiB"],
            ["again (no-op)", f"{second['secs']:.2f} s", "—", "—", f"{again['events']:,}",
             f"{second['rss'] / 2**20:,.0f} MiB"],
        ],
        "note": f"The real transcripts of shared/fixtures ({built['sources']} files: Claude Code, Codex, Gemini CLI, "
                f"Cursor) copied {built['copies']:,} times, each copy's ids made its own (not timed). Each run is a "
                "child process calling `agentlog.importer.run.import_paths` for the four agents, interpreter start "
                "included; it parses, maps, redacts, merges with the logs and appends hash-chained frames "
                f"(relaxed durability). Logs written: {metrics['logs_bytes'] / 1e6:,.0f} MB. Targets: ≥ 50 MB/s, "
                "≤ 500 MiB peak RSS, no-op re-import of 1 GB ≤ 2 s.",
    }
    return {"tables": [table], "metrics": metrics, "corpus": built}


IMPORT_STEPS: Final = {"import": import_}
