"""The incremental memory check: which memories what happened since the last check can touch.

A check keeps a *watermark* in the read model (``meta`` key ``check_watermark``): how far
it had read each session log (the store's ingest position of each: offset and seq), the
``HEAD`` it saw in each repository, the size of the purge record, and the memories it
selected but had no time to check (``pending``, a check bounded in time). The next
incremental check reads only the frames between the watermark and the store's current
positions, straight from the logs (no query engine: ``lines_from`` from the saved offset),
and derives from them what was touched:

- the paths of finished file edits and writes → the pitfalls that name them;
- the commands of finished shell calls → the procedures whose ``command`` (else a step)
  is exactly one of them;
- any correction or retraction, or a purge (the purge record grew) → every memory with
  recorded evidence (a retraction of a session retracts its events: the mapping from a
  target to the evidence it reaches is left to the check itself);
- a repository whose ``HEAD`` moved → the memories whose file evidence names a path the
  move changed (``git diff --name-only OLD NEW``, renames on both sides), those whose last
  file finding was not clean (changed, deleted, unverifiable: a change anywhere in the
  tree can resolve them, as a touched block is looked for in the whole tree), and the
  decisions whose chosen or alternative word appears in the move's diff; when the old
  ``HEAD`` is unknown or gone, every memory with file evidence and every decision.

The finished edits, writes and shell calls read are kept too (``Activity.done``): the
rules' counts of the touched memories are folded from them (:mod:`.rule_state`), so a run
costs by the new events, not by the history.

Whatever happened, memories never checked, and memories changed since the last run started
(edited, confirmed, given evidence: their ``updated_at``) or whose rule proposal a person
decided since, are selected too. The watermark lives in the read model,
which a rebuild replaces: the first check after a rebuild finds none and checks every
memory (replay-safe: nothing is skipped because of a state the log does not hold).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Final

WATERMARK_KEY: Final = "check_watermark"
DIFF_MAX_BYTES: Final = 8 << 20
"""A ``HEAD`` move whose diff is longer than this selects every decision (its words are not searched)."""
MEMORY_LOG: Final = "agentlog/memory"
"""The memory log's id: its own events touch nothing (read by the read model, not here)."""
_DONE: Final = ("tool_call_finished", "tool_call_failed")
DONE_MAX: Final = 200_000
"""Finished tool calls kept for the rules' counts (:mod:`.rule_state`); past that many, the
touched memories' counts are computed again from the store."""
_RULE_KEY: Final = re.compile(r"\[rule \w+ on ([0-9a-f-]{36})\]")


@dataclass
class Watermark:
    logs: dict[str, list[int]] = field(default_factory=dict)
    """log id (``provider/key``) → [offset, seq] read so far."""
    heads: dict[str, str] = field(default_factory=dict)
    """repository top → the ``HEAD`` its memories were last checked against."""
    purges: int = -1
    """The purge record's size when last read (-1: none)."""
    pending: list[str] = field(default_factory=list)
    """Memories selected by a check that ran out of time."""
    at: int = 0
    """When the run that saved it started (µs since the epoch): memories changed since are checked."""

    def to_json(self) -> str:
        return json.dumps({"logs": self.logs, "heads": self.heads, "purges": self.purges, "pending": self.pending,
                           "at": self.at}, sort_keys=True)


def load(con: sqlite3.Connection) -> Watermark | None:
    row = con.execute("SELECT value FROM meta WHERE key = ?", (WATERMARK_KEY,)).fetchone()
    if row is None:
        return None
    try:
        d = json.loads(row[0])
        return Watermark({str(k): [int(v[0]), int(v[1])] for k, v in d["logs"].items()},
                         {str(k): str(v) for k, v in d["heads"].items()}, int(d["purges"]),
                         [str(p) for p in d.get("pending") or []], int(d.get("at") or 0))
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def save(con: sqlite3.Connection, wm: Watermark) -> None:
    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (WATERMARK_KEY, wm.to_json()))


def purge_size(root: str) -> int:
    from agentlog.log.purge_record import purge_log_path

    try:
        return os.stat(purge_log_path(root)).st_size
    except OSError:
        return -1


def positions(root: str) -> dict[str, list[int]]:
    """The store's ingest position of every log (what the projection can answer for): its
    cache, written after each ingest commit (so never ahead of the store; a cache behind it
    only delays what the next run reads), else the table's history."""
    from agentlog.store.ingest import cached_positions, load_positions

    got = cached_positions(root)
    if got is None:
        got, _, _ = load_positions(root)
    return {name: [p.offset, p.seq] for name, p in got.items()}


@dataclass
class Activity:
    """What the frames since the watermark touched."""

    events: int = 0
    paths: set[str] = field(default_factory=set)
    commands: set[str] = field(default_factory=set)
    recorded: bool = False
    """A correction or retraction was recorded (or a purge made)."""
    projects: set[str] = field(default_factory=set)
    """The project roots the events name (the repositories the daemon checks against)."""
    unreadable: bool = False
    """A log could not be read from the watermark: select every memory."""
    done: list[Any] = field(default_factory=list)
    """The finished edits, writes and shell calls read (:data:`.rule_state.Done` each), for the rules' counts."""
    overflow: bool = False
    """More than :data:`DONE_MAX` of them: ``done`` is not whole."""


def read_since(root: str, since: dict[str, list[int]], now: dict[str, list[int]]) -> Activity:
    """The activity of the frames between ``since`` and ``now`` (log id → [offset, seq])."""
    from agentlog.core.jsonio import loads
    from agentlog.log.frame import FrameError, event_bytes, is_purged
    from agentlog.log.layout import log_path
    from agentlog.log.segments import lines_from

    act = Activity()
    for name, (end, seq) in sorted(now.items()):
        start, seen = since.get(name, [0, -1])
        if name == MEMORY_LOG:
            continue
        if seq <= seen:
            if seq < seen or end != start:
                act.unreadable = True  # (rewritten since: read again from scratch)
            continue
        if end < start:
            act.unreadable = True
            continue
        provider, _, key = name.partition("/")
        try:
            for off, line in lines_from(log_path(root, provider, key), start):
                if off >= end:
                    break
                if is_purged(line):
                    continue
                ev = loads(event_bytes(line))
                if isinstance(ev, dict):
                    _note(act, ev)
        except (OSError, ValueError, FrameError):
            act.unreadable = True
    return act


def _note(act: Activity, ev: dict[str, Any]) -> None:
    kind = ev.get("kind")
    if kind == "memory":
        return
    act.events += 1
    project = ev.get("project") or {}
    if isinstance(project, dict) and isinstance(project.get("root"), str):
        act.projects.add(project["root"])
    if kind in ("correction", "retraction"):
        act.recorded = True
        return
    if kind not in _DONE:
        return
    category = (ev.get("tool") or {}).get("category")
    paths: tuple[str, ...] = ()
    command = ""
    if category in ("file_edit", "file_write"):
        paths = tuple(p for p in ev.get("paths") or () if isinstance(p, str))
        act.paths.update(paths)
    elif category == "shell":
        text = (ev.get("content") or {}).get("command")
        command = text.strip() if isinstance(text, str) else ""
        if command:
            act.commands.add(command)
    else:
        return
    if ev.get("provider") == "agentlog" or act.overflow:
        return
    if len(act.done) >= DONE_MAX:
        act.overflow, act.done = True, []
        return
    outcome = ev.get("outcome") or {}
    at = ev.get("observed_at")
    act.done.append((at if isinstance(at, int) else 0, str(ev.get("event_id") or ""), category, paths, command,
                     outcome.get("status") if isinstance(outcome, dict) else None,
                     outcome.get("class") if isinstance(outcome, dict) else None))


def _ends_with(path: str, name: str) -> bool:
    name = name.lstrip("/").removeprefix("./")
    return bool(name) and (path == name or path.endswith("/" + name))


def by_activity(con: sqlite3.Connection, act: Activity) -> set[str]:
    """The memories ``act`` touches (outcome rules, recorded evidence)."""
    out: set[str] = set()
    ran = {" ".join(c.split()) for c in act.commands}
    if act.paths or act.commands:
        for mid, kind, attrs in con.execute("SELECT id, kind, attributes FROM memories WHERE kind IN "
                                            "('pitfall', 'procedure') AND deleted = 0 AND archived = 0"):
            a = json.loads(attrs)
            if kind == "pitfall":
                names = [p for p in a.get("paths") or [] if isinstance(p, str)]
                if any(_ends_with(x, p) for p in names for x in act.paths):
                    out.add(mid)
            else:  # (blanks collapsed, as the rule matches them: rule_state.command_key)
                cmd = a.get("command")
                wanted = {" ".join(cmd.split())} if isinstance(cmd, str) and cmd.strip() else \
                    {" ".join(s.split()) for s in a.get("steps") or [] if isinstance(s, str)}
                if wanted & ran:
                    out.add(mid)
    if act.recorded:
        out.update(r[0] for r in con.execute(
            "SELECT DISTINCT memory_id FROM evidence WHERE type IN ('event', 'attempt', 'session', 'tool_call')"))
    return out


def by_head(con: sqlite3.Connection, repo: Any, old: str | None) -> set[str]:
    """The memories a move of ``repo``'s ``HEAD`` from ``old`` (None: unknown) can touch."""
    files = con.execute("SELECT e.memory_id, e.value, coalesce(t.doubtful, 1), coalesce(instr(t.results, "
                        "'\"unverifiable\"'), 1) FROM evidence e LEFT JOIN truth t ON t.memory_id = e.memory_id "
                        "WHERE e.type = 'file'").fetchall()
    decisions = con.execute("SELECT id, attributes FROM memories WHERE kind = 'decision' AND deleted = 0 "
                            "AND archived = 0").fetchall()
    changed: set[str] | None = None
    diff: str | None = None
    if old is not None and repo.commit(old) is not None:
        p = repo.git("diff", "--name-status", "--no-renames", old, repo.head)
        if p.returncode == 0:
            changed = {line.split("\t", 1)[1] for line in p.stdout.splitlines() if "\t" in line}
        if decisions:
            d = repo.git("diff", "-U0", old, repo.head)
            if d.returncode == 0 and len(d.stdout) <= DIFF_MAX_BYTES:
                diff = d.stdout.lower()
    out: set[str] = set()
    for mid, value, doubtful, unclean in files:
        path = str(value)
        if path.startswith(repo.top + "/"):
            path = path[len(repo.top) + 1:]
        path = path.removeprefix("./")
        if changed is None or doubtful or unclean or path in changed:
            out.add(mid)
    for mid, attrs in decisions:
        a = json.loads(attrs)
        words = [str(w).strip().lower() for w in [a.get("chosen"), *(a.get("alternatives") or [])] if w]
        if diff is None or any(w and w in diff for w in words):
            out.add(mid)
    return out


def by_state(con: sqlite3.Connection, since_us: int) -> set[str]:
    """Memories never checked, changed since ``since_us`` (the last run's start: edited,
    confirmed, given evidence), or whose rule proposal a person decided since."""
    out = {r[0] for r in con.execute(
        "SELECT m.id FROM memories m LEFT JOIN truth t ON t.memory_id = m.id WHERE m.deleted = 0 AND m.archived = 0 "
        "AND (t.memory_id IS NULL OR m.updated_at >= ?)", (since_us,))}
    for note, in con.execute("SELECT note FROM proposals WHERE status != 'open' AND updated_at >= ? AND "
                             "instr(coalesce(note, ''), '[rule ') > 0", (since_us,)):
        m = _RULE_KEY.search(note or "")
        if m:
            out.add(m.group(1))
    return out
