"""The full memory check against the benchmark workload's recorded history: ``memories`` memories
of every kind the check knows, made from what the history holds, checked against it.

The history is the one the other steps read (:func:`.roots.built_root` at the run's
``--events``: the workload loaded, ingested and projected; cached for the run), cloned (the
memory log and the read model are written). The memories, all created before the history
began (so that every recorded event is "since" them, the rules' worst case), are in turn:

- 40 % facts citing 3 lines of a file of a git repository made here (ten memories a file, as
  the other rows; a second commit moves a third of the files' lines and edits a cited line in
  a tenth);
- 10 % facts citing a recorded event, 10 % a recorded attempt (of the history);
- 15 % pitfalls naming a path the history's edits touched (its last two parts), 15 %
  procedures naming a command the history ran (the most frequent first);
- 5 % decisions (``uv`` over ``poetry``, and others the repository names or not);
- 5 % facts citing a URL.

(What the history lacks — no attempt, say — becomes a URL citation instead.)

Made through the memory log in batches of 500 events (``store.write``: the memories' creation
is the setup, not what is measured). Then the first full check (every memory's findings and
the rules' counts) and a second one (nothing changed) are timed.
"""

from __future__ import annotations

import os
import time
from typing import Any, Final

from agentlog.bench.context import StepContext

WRITE: Final = 500
DONE: Final = "('tool_call_finished', 'tool_call_failed')"
DECISIONS: Final = (("uv", ["poetry"]), ("pytest", ["nose"]), ("ruff", ["flake8"]), ("make", ["just"]))


def _history(root: str) -> dict[str, Any]:
    """What the memories cite, picked from the history: event and attempt ids, edited paths,
    commands run, and when the history began (µs)."""
    from agentlog.api import Engine

    with Engine(root) as engine:
        first = engine.arrow("SELECT epoch_us(min(observed_at)) AS t FROM events").column(0).to_pylist()[0]
        events = engine.arrow("SELECT event_id FROM events WHERE provider != 'agentlog' ORDER BY event_id "
                              "LIMIT 5000").column(0).to_pylist()
        attempts = engine.arrow("SELECT attempt_id FROM attempts ORDER BY attempt_id LIMIT 5000").column(0).to_pylist()
        paths = engine.arrow(f"SELECT p FROM (SELECT unnest(paths) AS p FROM events WHERE kind IN {DONE} AND "
                             "tool_category IN ('file_edit', 'file_write')) GROUP BY p ORDER BY count(*) DESC, p "
                             "LIMIT 2000").column(0).to_pylist()
        commands = engine.arrow(f"SELECT c FROM (SELECT trim(json_extract_string(event, '$.content.command')) AS c "
                                f"FROM events WHERE kind IN {DONE} AND tool_category = 'shell') WHERE c != '' "
                                "GROUP BY c ORDER BY count(*) DESC, c LIMIT 2000").column(0).to_pylist()
    return {"first": int(first or time.time_ns() // 1000), "events": events, "attempts": attempts,
            "paths": ["/".join(p.rstrip("/").split("/")[-2:]) for p in paths if p], "commands": commands}


def _memory(i: int, h: dict[str, Any], files: int, first: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """The ``i``-th memory: (kind, attributes, evidence)."""
    slot = i % 20
    if slot < 8:  # file evidence: 8 of each 10 memories' lines of one file in turn
        f, k = divmod(i, 10)
        return "fact", {"statement": f"m{i}"}, [{"type": "file", "path": f"m{f % files}.py", "line_start": 5 * k + 1,
                                                 "line_end": 5 * k + 3, "commit": first}]
    if slot < 10 and h["events"]:
        return "fact", {"statement": f"e{i}"}, [{"type": "event", "value": h["events"][i % len(h["events"])]}]
    if 10 <= slot < 12 and h["attempts"]:
        return "fact", {"statement": f"a{i}"}, [{"type": "attempt", "value": h["attempts"][i % len(h["attempts"])]}]
    if 12 <= slot < 15 and h["paths"]:
        return "pitfall", {"symptom": "s", "avoid": "a", "paths": [h["paths"][i % len(h["paths"])]]}, []
    if 15 <= slot < 18 and h["commands"]:
        c = h["commands"][i % len(h["commands"])]
        return "procedure", {"goal": "g", "steps": [c], "command": c}, []
    if slot == 18:
        chosen, alts = DECISIONS[i % len(DECISIONS)]
        return "decision", {"chosen": chosen, "alternatives": alts}, []
    return "fact", {"statement": f"u{i}"}, [{"type": "url", "value": f"https://example.invalid/{i}"}]


def _create(root: str, n: int, h: dict[str, Any], files: int, first: str) -> None:
    from agentlog.api import memory_prior, new_memory_event, validate_memory_attributes, validate_memory_evidence
    from agentlog.api import write_memory_events
    from agentlog.core.ids import uuid7

    at = h["first"] - 86_400_000_000  # a day before the history began
    batch: list[dict[str, Any]] = []
    expected: dict[str, int | None] = {}
    for i in range(n):
        kind, attrs, evidence = _memory(i, h, files, first)
        mid = uuid7()
        body = {"kind": kind, "title": f"bench memory {i}", "slug": f"bench-{i}", "content": "",
                "attributes": validate_memory_attributes(kind, attrs), "tags": [],
                "confidence": memory_prior("person"), "evidence": [validate_memory_evidence(r) for r in evidence],
                "lifetime": {"policy": "standard", "until": None},
                "visibility": {"visibility": "shared", "allowed_actors": []}}
        batch.append(new_memory_event("memory_created", mid, 1, "person", body, at_us=at + i))
        expected[mid] = None
        if len(batch) >= WRITE:
            write_memory_events(root, batch, expected)
            batch, expected = [], {}
    if batch:
        write_memory_events(root, batch, expected)


def history_check(ctx: StepContext, memories: int, events: int) -> dict[str, Any]:
    """``memories`` memories against the workload's history of ``events`` events: the first full
    check and a second, timed (with the load average when each ran)."""
    from agentlog.api import check_memories
    from agentlog.bench.memory_truth_setup import relaxed, second_commit
    from agentlog.bench.roots import built_root, clone

    built, _ = built_root(ctx, events)
    root = clone(ctx, built, link=True)
    repo, first, files = _repo(ctx, memories)
    second_commit(repo, files)
    ctx.progress(f"memory check: {memories:,} memories against {events:,} events")
    t = time.perf_counter()
    h = _history(root)
    with relaxed():
        _create(root, memories, h, files, first)
    setup_s = time.perf_counter() - t
    out: dict[str, Any] = {"memories": memories, "events": events, "setup_s": setup_s,
                           "kinds": {k: sum(1 for i in range(memories) if _memory(i, h, files, first)[0] == k)
                                     for k in ("fact", "pitfall", "procedure", "decision")}}
    for name in ("first", "again"):
        load = os.getloadavg()[0]
        t = time.perf_counter()
        r = check_memories(root, repo_dir=repo, everything=True, catch_up=False)
        out[name] = {"ms": (time.perf_counter() - t) * 1000, "checked": r.checked, "written": r.written,
                     "doubtful": len(r.doubtful), "moved": r.moved, "proposals": len(r.proposals),
                     "load": round(load, 2)}
    return out


def _repo(ctx: StepContext, memories: int) -> tuple[str, str, int]:
    """The git repository the file evidence cites (its first commit), and its files."""
    from agentlog.bench.memory_truth_setup import file_lines, git

    repo = ctx.tmpdir()
    files = max(1, memories * 2 // 50)
    git(repo, "init", "-q", "-b", "main")
    for f in range(files):
        with open(os.path.join(repo, f"m{f}.py"), "w") as fh:
            fh.write("\n".join(file_lines(f)) + "\n")
    with open(os.path.join(repo, "pyproject.toml"), "w") as fh:
        fh.write("[tool.poetry]\n# ruff\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    return repo, git(repo, "rev-parse", "HEAD"), files


def history_incremental(ctx: StepContext, memories: int, events: int, new_events: int, runs: int) -> dict[str, Any]:
    """``memories`` memories (the same mix, and a procedure ``make test`` and a pitfall on
    ``src/other.py`` that the new events touch) over the workload's history of ``events``
    events: a first full check (untimed), then ``runs`` times ``new_events`` new hook events
    recorded and ingested (untimed) and the incremental check the daemon runs after an ingest
    (timed: no catch-up; whether it read the store at all is reported)."""
    import statistics

    from agentlog.api import bring_up_to_date, check_memories, create_memory
    from agentlog.bench.memory_truth_setup import Agent, relaxed
    from agentlog.bench.roots import built_root, clone

    built, _ = built_root(ctx, events)
    root = clone(ctx, built)  # (copied: the new events are ingested into its store)
    repo, first, files = _repo(ctx, memories)
    h = _history(root)
    with relaxed():
        _create(root, memories, h, files, first)
        create_memory(root, "procedure", "Run the tests", attributes={"goal": "test", "steps": ["make test"],
                                                                      "command": "make test"})
        create_memory(root, "pitfall", "other.py edits fail", attributes={"symptom": "s", "avoid": "a",
                                                                         "paths": ["src/other.py"]})
    check_memories(root, repo_dir=repo, everything=True, catch_up=True)
    agent = Agent(root, repo, "bench-incremental")
    got = []
    for _ in range(runs):
        agent.calls(new_events)
        bring_up_to_date(root)
        load = os.getloadavg()[0]
        t = time.perf_counter()
        r = check_memories(root, repo_dir=repo, catch_up=False)
        got.append({"ms": (time.perf_counter() - t) * 1000, "checked": r.checked, "events_read": r.events_read,
                    "store_read": r.store_read, "load": round(load, 2)})
    return {"memories": memories + 2, "events": events, "new_events": new_events,
            "ms": statistics.median(g["ms"] for g in got), "runs": got}
