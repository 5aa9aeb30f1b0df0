"""Every real transcript in shared/fixtures, through the real import, ingest and projection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlog.operations.fixtures import missing, shared_dir
from agentlog.importers.run import import_paths

SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures"
needs_fixtures = pytest.mark.skipif(not (FIXTURES / "codex").is_dir(), reason=missing(FIXTURES))

#: per file: (lines read, events written, of those the lines kept on their own) — the event
#: counts are the parsers' goldens (tests/test_import_<agent>.py count them by kind) plus one
#: usage event per model response, plus a ``transcript_line`` event per line that no other
#: event holds (Claude Code: summary, file-history-snapshot, hook/bash progress, records of
#: thinking only, pr-link, system records that give nothing; Codex: turn_context,
#: task_started, response_item messages; Gemini CLI: the ``$set`` line)
GOLDEN = {
    ("claude-code", "entireio-cli__ckpt-03-82579310fc-0__full.jsonl"): (24, 30, 9),
    ("claude-code", "entireio-cli__ckpt-04-0b015eb1c2-0__full.jsonl"): (39, 46, 13),
    ("claude-code", "entireio-cli__ckpt-10-a740e118e0-0__full.jsonl"): (66, 80, 11),
    ("claude-code", "entireio-cli__ckpt-1e-868c83dbb7-0__full.jsonl"): (96, 116, 43),
    ("claude-code", "entireio-cli__ckpt-5c-1039ad85f4-0__full.jsonl"): (40, 45, 16),
    ("claude-code", "entireio-cli__ckpt-60-fd31fcf44f-0__full.jsonl"): (117, 147, 27),
    ("claude-code", "entireio-cli__ckpt-91-b42542f24f-1__full.jsonl"): (231, 287, 82),
    ("codex", "agent-history__real_sessions-codex-session-01.jsonl"): (11, 11, 6),
    ("gemini-cli", "agent-sessions__stage0-gemini-jsonl_v040.jsonl"): (5, 8, 1),
    ("cursor", "Cala-OpenAI__0-full.jsonl"): (17, 23, 0),
}
AGENTS = ("claude-code", "codex", "gemini-cli", "cursor")


@needs_fixtures
def test_every_fixture_imports_ingests_and_projects(agentlog_home: Path) -> None:
    from agentlog.projection.persist import refresh
    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest

    root = str(agentlog_home)
    got: dict[tuple[str, str], tuple[int, int, int]] = {}
    for agent in AGENTS:
        report = import_paths(root, [agent], [str(FIXTURES / agent)])
        for f in report.files:
            assert f.error is None and f.problem_count == 0 and not f.unknown, (f.path, f.problems, f.unknown)
            got[(agent, Path(f.path).name)] = (f.lines, f.events, f.kept_lines)
        assert report.totals()["kept_lines"] == sum(k for (a, _), (_, _, k) in GOLDEN.items() if a == agent)
    assert got == GOLDEN
    logs = {p: p.read_bytes() for p in (agentlog_home / "logs").rglob("*.jsonl")}
    for agent in AGENTS:  # again: nothing new
        assert import_paths(root, [agent], [str(FIXTURES / agent)]).totals()["events"] == 0
    assert {p: p.read_bytes() for p in (agentlog_home / "logs").rglob("*.jsonl")} == logs
    assert ingest(root).events == sum(e for _, e, _ in GOLDEN.values())
    refresh(root)
    with Engine(root) as engine:
        sessions = dict(engine.run("SELECT provider, count(*) FROM sessions GROUP BY 1").rows)
        assert sessions == {"claude_code": 7, "codex": 1, "gemini_cli": 1, "cursor": 1}
        calls = dict(engine.run("SELECT provider, count(*) FROM tool_calls GROUP BY 1").rows)
        assert calls["claude_code"] == 155 and calls["cursor"] == 6
        kinds = dict(engine.run("SELECT kind, count(*) FROM events WHERE json_extract(attrs, '$.reconstructed') "
                                "GROUP BY 1").rows)
        assert sum(kinds.values()) == sum(e for _, e, _ in GOLDEN.values())
        assert kinds["transcript_line"] == sum(k for _, _, k in GOLDEN.values())
        usage = engine.run("SELECT provider, count(*), sum(output_tokens) FROM usage GROUP BY 1 ORDER BY 1").rows
    assert [(p, n) for p, n, _ in usage] == [("claude_code", 138), ("codex", 1), ("gemini_cli", 2)]
    assert json.loads(json.dumps(usage))  # plain values


@needs_fixtures
@pytest.mark.parametrize("workers", [1, 2])
def test_batches_spanning_files_write_what_importing_file_by_file_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    """A worker's chunk of sessions is written in batches that span its files: the logs,
    the per-file counts and the offsets are those of importing each file on its own."""
    from agentlog.importers import run
    from agentlog.importers.sources import AGENTS, make_parser

    alone, chunked = str(tmp_path / "alone"), str(tmp_path / "chunked")
    files = sorted(str(p) for p in (FIXTURES / "claude-code").glob("*.jsonl"))
    state: dict[str, object] = {}
    counts = {f: run.import_file(alone, make_parser(AGENTS["claude-code"], f), state).events for f in files}
    monkeypatch.setattr(run, "CHUNK_BYTES", 600_000)  # chunks of several files
    report = run.import_paths(chunked, ["claude-code"], [str(FIXTURES / "claude-code")], workers=workers)
    assert {f.path: f.events for f in report.files} == counts
    assert all(f.sessions for f in report.files)

    def logs(root: str) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in Path(root, "logs").rglob("*.jsonl")}

    assert logs(chunked) == logs(alone)
    offsets = {k: (v["offset"], v["lines"]) for k, v in run.load_state(chunked).items()}
    assert offsets == {k: (v["offset"], v["lines"]) for k, v in state.items()}  # type: ignore[index]


@needs_fixtures
@pytest.mark.parametrize("agent", AGENTS)
def test_every_line_of_every_fixture_is_in_the_log_byte_for_byte(agentlog_home: Path, agent: str) -> None:
    """Lossless: each non-blank line of each file is the ``raw`` of exactly one event
    (its own, or a ``transcript_line`` when it gives none), byte for byte after
    redaction — so the transcript can be deleted."""
    from import_support import lines_held, source_lines

    files = sorted((FIXTURES / agent).glob("*.jsonl"))
    assert files
    from agentlog.core.model import Event
    from import_support import log_events

    import_paths(str(agentlog_home), [agent], [str(f) for f in files])
    assert lines_held(agentlog_home) == source_lines(files)
    for ev in log_events(agentlog_home):  # the events that keep lines are canonical events too
        if ev["kind"] == "transcript_line":
            Event.from_wire(ev)
    if agent != "cursor":  # (a Cursor transcript names no session: its file's name is the session's)
        # the records that name no session (at the top of Claude Code files) went to the session
        # the file names, not to one named after the file (these files are not named after theirs)
        logs = {p.stem for p in (agentlog_home / "logs").rglob("*.jsonl")}
        assert not logs & {f.stem for f in files}


@needs_fixtures
def test_the_lines_kept_change_nothing_the_projection_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same fixtures imported with and without the ``transcript_line`` events project
    to the same sessions, turns, tool calls, attempts and edges."""
    from agentlog.importers import base, run
    from agentlog.projection.persist import refresh
    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest

    def tables(root: Path) -> dict[str, list[tuple[object, ...]]]:
        for agent in AGENTS:
            run.import_paths(str(root), [agent], [str(FIXTURES / agent)])
        ingest(str(root))
        refresh(str(root))
        with Engine(str(root)) as engine:
            return {t: sorted(map(repr, engine.run(f"SELECT * FROM {t}").rows))  # type: ignore[misc]
                    for t in ("sessions", "turns", "tool_calls", "attempts", "edges")}

    with_lines = tables(tmp_path / "with")
    monkeypatch.setattr(base.Parser, "holds", lambda self, line: True)  # no line is kept on its own
    without = tables(tmp_path / "without")
    assert sum(len(rows) for rows in without.values()) > 300
    assert with_lines == without
