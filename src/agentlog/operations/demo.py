"""``agentlog demo``: replay real hook payloads through the real hook, then verify.

Each payload of ``shared/fixtures/claude-code-hooks`` (real Claude Code hook
stdin captured by other people) is fed to the installed hook command as a
separate process, in the order the logger saved them, sessions in parallel.
Where the shared fixtures are absent (an installed package, a clone that has
not fetched them) four sessions shipped in ``demo_data/claude-code-sessions.jsonl``
stand in for them: payloads in the shape of real Claude Code 2.1 hook stdin,
with made-up projects and content (``scripts/make_demo_sessions.py`` writes
them) — two projects, a missing test runner, failing pytest and jest runs and
their fixes, edits whose text is not found retried after a read, a subagent, a
compaction, permission prompts, an interrupted command. A small synthetic
session shipped in ``demo_data`` is replayed too, in both cases: a
failing test run, the failing test run alone (failing again), an edit whose
text to replace is not found, the edit retried and the whole suite passing — so the timeline always has a failed attempt
and a superseded one with its retry.

After replaying, the logs are verified and ingested, the projection is
brought up to date, and the demo reads back the timeline (sessions → turns
→ attempts) and the failed and superseded attempts (:mod:`.query.views`),
then opens the memories the activity suggests (:mod:`.memory.suggest`: the
synthetic session's test command failed twice before another form of it
passed) as proposals and shows each with its evidence.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agentlog.core import AgentlogError
from agentlog.capture.command import hook_argv
from agentlog.operations.fixtures import claude_hook_fixtures, payload_stdin
from agentlog.log.layout import iter_logs, split_log_path
from agentlog.log.verify import verify_logs

MARKER = ".agentlog-demo"


class DemoError(AgentlogError):
    """The demo cannot run (e.g. the target directory holds other data)."""


@dataclass
class SessionSummary:
    provider: str
    session: str
    frames: int
    kinds: dict[str, int]
    tools: dict[str, int]
    failures: int
    redactions: int
    verify: str


@dataclass
class DemoResult:
    home: str
    source: str
    payloads: int
    hook_failures: int
    stderr_lines: int
    sessions: list[SessionSummary] = field(default_factory=list)
    store_events: int = 0
    """Events the columnar store holds after the demo's ingest."""
    store_tools: list[dict[str, Any]] = field(default_factory=list)
    """Tool calls per tool, read back from the store with DuckDB."""
    timeline: list[dict[str, Any]] = field(default_factory=list)
    """Sessions → turns → attempts of what was recorded (``query.views.timeline``)."""
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Failed and superseded attempts, each with its retry (``query.views.failures``)."""
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    """Memories suggested from the activity (``memory.suggest``), opened as proposals:
    id, title, kind, note and each piece of evidence resolved (a tool call's status)."""


def _demo_data(name: str) -> list[bytes]:
    data = Path(__file__).with_name("demo_data") / name
    return [ln.encode("utf-8") for ln in data.read_text(encoding="utf-8").splitlines() if ln.strip()]


def shipped_payloads() -> list[bytes]:
    """The synthetic session shipped in ``demo_data`` (stdin bytes, in order)."""
    return _demo_data("claude-code-session.jsonl")


def real_shaped_payloads() -> list[bytes]:
    """The four sessions in the shape of real Claude Code 2.1 hook payloads shipped in
    ``demo_data`` (stdin bytes, in order), replayed where the shared fixtures are absent."""
    return _demo_data("claude-code-sessions.jsonl")


def load_payloads() -> tuple[str, list[bytes]]:
    """(source description, stdin bytes of each payload in replay order): the real
    captures when the shared fixtures are there, else the shipped real-shaped sessions;
    then the shipped synthetic session."""
    files = claude_hook_fixtures()
    shipped = shipped_payloads()
    if files:
        out: list[bytes] = []
        for f in files:
            for element in json.loads(f.read_text(encoding="utf-8")):
                out.append(payload_stdin(element))
        return (f"{len(files)} real Claude Code hook captures ({files[0].parent}) and the synthetic session "
                "shipped with agentlog", out + shipped)
    return ("4 sessions shaped like real Claude Code 2.1 hook payloads and the synthetic session, shipped with "
            "agentlog (the shared real captures were not found)", real_shaped_payloads() + shipped)


def prepare_home(home: str) -> None:
    """Create a fresh data root, refusing to wipe anything the demo did not create."""
    p = Path(home)
    if p.exists() and any(p.iterdir()):
        if not (p / MARKER).exists():
            raise DemoError(f"{home} exists and was not created by `agentlog demo`; choose another --home")
        shutil.rmtree(p)
    p.mkdir(parents=True, exist_ok=True, mode=0o700)
    (p / MARKER).write_text("created by agentlog demo; safe to delete\n")


def _session_of(stdin: bytes) -> str:
    try:
        obj = json.loads(stdin)
        return str(obj.get("session_id") or obj.get("conversation_id") or "")
    except (ValueError, AttributeError):
        return ""


def run_demo(home: str, *, workers: int = 4, progress: Callable[[int], None] | None = None) -> DemoResult:
    """Replay, verify and summarise. ``progress`` is called once per payload replayed."""
    home = os.path.abspath(home)
    prepare_home(home)
    source, payloads = load_payloads()
    by_session: dict[str, list[bytes]] = defaultdict(list)
    for p in payloads:
        by_session[_session_of(p)].append(p)
    env = {**os.environ, "AGENTLOG_HOME": home}
    argv = hook_argv("claude-code")
    failures = 0
    stderr_lines = 0

    def replay(items: list[bytes]) -> tuple[int, int]:
        bad = errs = 0
        for stdin in items:
            r = subprocess.run(argv, input=stdin, env=env, capture_output=True, timeout=60, cwd=home)
            bad += r.returncode != 0
            errs += len(r.stderr.splitlines())
            if progress:
                progress(1)
        return bad, errs

    with ThreadPoolExecutor(max_workers=workers) as ex:
        for bad, errs in ex.map(replay, by_session.values()):
            failures += bad
            stderr_lines += errs

    result = DemoResult(home=home, source=source, payloads=len(payloads), hook_failures=failures, stderr_lines=stderr_lines)
    logs = iter_logs(home)
    reports = {r.path: r for r in verify_logs(logs)}
    for path in logs:
        provider, key = split_log_path(path)
        kinds: Counter[str] = Counter()
        tools: Counter[str] = Counter()
        fails = redactions = 0
        with open(path, "rb") as f:
            for line in f:
                ev = json.loads(line)["event"]
                kinds[ev["kind"]] += 1
                if "tool" in ev:
                    tools[ev["tool"]["name"]] += 1
                if ev["kind"] == "tool_call_failed":
                    fails += 1
                redactions += int(ev.get("attrs", {}).get("redactions", 0))
        rep = reports[path]
        result.sessions.append(
            SessionSummary(provider, key, rep.frames, dict(kinds.most_common()), dict(tools.most_common()), fails, redactions, rep.status)
        )
    _ingest_and_query(result)
    return result


def _ingest_and_query(result: DemoResult) -> None:
    """Ingest the recorded logs into the store and read a summary back through DuckDB."""
    import duckdb

    from agentlog.store.ingest import ingest
    from agentlog.store.schema import read_events

    rep = ingest(result.home)
    result.store_events = rep.events
    events = read_events(result.home, columns=["kind", "tool_name", "event"])  # noqa: F841 - DuckDB reads it by name
    con = duckdb.connect()
    rows = con.execute(
        "select tool_name, count(*) filter (where kind = 'tool_call_finished') as ok, "
        "count(*) filter (where kind = 'tool_call_failed') as failed, "
        "max(length(json_extract(event, '$.content'))) as largest_content "
        "from events where tool_name is not null and kind in ('tool_call_finished', 'tool_call_failed') "
        "group by tool_name order by ok + failed desc, tool_name"
    ).fetchall()
    con.close()
    result.store_tools = [
        {"tool": t, "ok": int(ok), "failed": int(failed), "largest_content": int(big or 0)} for t, ok, failed, big in rows
    ]
    _read_timeline(result)


def _read_timeline(result: DemoResult) -> None:
    """Bring the projection up to date and read the timeline and the failures back."""
    from agentlog.operations.refresh import open_current
    from agentlog.query.scope import Scope
    from agentlog.query.views import failures, timeline

    engine, _ = open_current(result.home)
    with engine:
        result.timeline = timeline(engine, Scope(project_label="all projects"))
        result.failures = failures(engine, Scope(project_label="all projects"))
    _suggest(result)


def _suggest(result: DemoResult) -> None:
    """Open the memories the activity suggests as proposals, with their evidence resolved."""
    from agentlog.memory.service import resolve_evidence
    from agentlog.memory.suggest import suggest

    for p in suggest(result.home):
        for change in p.changes:
            result.suggestions.append({
                "proposal_id": p.id, "title": p.title, "note": p.note, "kind": change.get("kind"),
                "attributes": change.get("attributes") or {},
                "evidence": resolve_evidence(result.home, change.get("evidence") or []),
            })


def result_dict(result: DemoResult) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(result)
