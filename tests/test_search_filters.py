"""``agentlog search``'s filters and surfaces on a store built for them: the outcome filter is
exact however far down its hits rank, ``--session`` takes the ids the hits show, a long output is
searchable to its end, every CLI flag keeps and drops what it should, stored fields are printed
terminal-safe, and the dashboard, its pager and the MCP tool show where each hit belongs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from scenario import write

from agentlog.cli import cli
from agentlog.search import service
from agentlog.search.service import SearchResult, SearchSyntaxError


def search(root: str, text: str, **kw: Any) -> SearchResult:
    """Search by words alone, as these tests' rankings assume (hybrid, the default with the
    semantic extra, adds events near in meaning: tests/test_search_semantic.py)."""
    return service.search(root, text, **{"mode": "lexical", **kw})
from agentlog.store.ingest import ingest

T0 = 1_793_000_000_000_000
"""2026-10-26T09:33:20Z in µs: the built store's first event."""
SECOND = 1_000_000
DAY = 86_400 * SECOND
FAILED_N = 120
"""Failing ``tests`` commands ranked above the one that succeeded."""
PASSED_N = 300
"""Succeeding ``tests`` calls (their ends ``tool_call_finished``) ranked above the superseded one."""
FILLER = " ".join(f"line{i} of the long and unremarkable report" for i in range(60))
CANARY = "zebracanary"


class Built:
    root: str
    succeeded: str
    """The one event holding ``tests`` whose attempt succeeded (ranked below every failing one)."""
    superseded: str
    """The one ``tool_call_finished`` holding ``tests`` whose attempt was superseded."""
    tail: str
    """A 21 KB output whose last word is :data:`CANARY`."""
    prompt: str
    """The prompt of the ``busy`` session (2026-11-05)."""


def _emit(root: str, sid: str, cwd: str, at: int, payload: dict[str, Any]) -> str:
    return write(root, "claude-code", {"session_id": sid, "cwd": cwd, "permission_mode": "default", **payload}, at, cwd)


def _call(root: str, sid: str, cwd: str, at: int, call: str, name: str, tool_input: dict[str, Any],
          end: dict[str, Any]) -> tuple[str, str]:
    base = {"tool_name": name, "tool_input": tool_input, "tool_use_id": call}
    start = _emit(root, sid, cwd, at, {**base, "hook_event_name": "PreToolUse"})
    return start, _emit(root, sid, cwd, at + SECOND // 2, {**base, **end})


def _stop(root: str, sid: str, cwd: str, at: int) -> None:
    _emit(root, sid, cwd, at, {"hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "done"})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Three sessions: ``busy`` (120 failing ``tests tests tests`` commands, then one passing whose
    long output says ``tests`` once: ranked last), ``green`` (300 passing calls full of ``tests``)
    and ``retry`` (a read saying ``tests`` once, then a failing edit of the same file retried: the
    first attempt superseded), plus a 21 KB output ending in a canary."""
    b = Built()
    base = tmp_path_factory.mktemp("search-filters")
    b.root = root = str(base / "home")
    busy, green, retry = str(base / "busyproj"), str(base / "greenproj"), str(base / "retryproj")
    for d in (busy, green, retry):
        os.makedirs(d)
    t = T0 + 10 * DAY  # 2026-11-05
    b.prompt = _emit(root, "busy", busy, t, {"hook_event_name": "UserPromptSubmit", "prompt": "make the suite pass"})
    for i in range(FAILED_N):
        t += SECOND
        _call(root, "busy", busy, t, f"tu-busy-{i}", "Bash", {"command": f"pytest tests tests tests -k case{i}"},
              {"hook_event_name": "PostToolUseFailure", "error": "tests tests tests failed", "is_interrupt": False})
    t += SECOND
    _, b.succeeded = _call(root, "busy", busy, t, "tu-busy-ok", "Bash", {"command": "make check"},
                           {"hook_event_name": "PostToolUse", "tool_response": {"stdout": FILLER + " tests " + FILLER}})
    _stop(root, "busy", busy, t + SECOND)

    t = T0  # 2026-10-26
    _emit(root, "green", green, t, {"hook_event_name": "UserPromptSubmit", "prompt": "run the green suite"})
    for i in range(PASSED_N):
        t += SECOND
        _call(root, "green", green, t, f"tu-green-{i}", "Read", {"file_path": f"{green}/notes{i}.txt"},
              {"hook_event_name": "PostToolUse",
               "tool_response": {"type": "text", "file": {"content": "tests tests tests pass"}}})
    t += SECOND
    tail = "x" * 50 + " " + " ".join(f"row{i} quietly" for i in range(1400)) + f" final error {CANARY}"
    assert len(tail) > 14_000
    _, b.tail = _call(root, "green", green, t, "tu-green-long", "Bash", {"command": "cat build.log"},
                      {"hook_event_name": "PostToolUse", "tool_response": {"stdout": tail}})
    _stop(root, "green", green, t + SECOND)

    t = T0 + 20 * DAY  # 2026-11-15
    target = f"{retry}/src/app.py"
    _emit(root, "retry", retry, t, {"hook_event_name": "UserPromptSubmit", "prompt": "fix the app"})
    _, b.superseded = _call(root, "retry", retry, t + SECOND, "tu-retry-read", "Read", {"file_path": target},
                            {"hook_event_name": "PostToolUse",
                             "tool_response": {"type": "text", "file": {"content": FILLER + " tests " + FILLER}}})
    edit = {"file_path": target, "old_string": "a", "new_string": "b"}
    _call(root, "retry", retry, t + 2 * SECOND, "tu-retry-edit1", "Edit", edit,
          {"hook_event_name": "PostToolUseFailure", "error": "String to replace not found", "is_interrupt": False})
    _call(root, "retry", retry, t + 3 * SECOND, "tu-retry-edit2", "Edit", edit,
          {"hook_event_name": "PostToolUse", "tool_response": {"filePath": target, "oldString": "a", "newString": "b"}})
    _stop(root, "retry", retry, t + 4 * SECOND)
    ingest(root)
    return b


def _ids(query: str, root: str, **kw: Any) -> list[str]:
    """The hits' ids, ranked by words alone (hybrid, the default with the semantic extra, adds
    events near in meaning: tests/test_search_semantic.py)."""
    return [h.event_id for h in search(root, query, **kw).hits]


def test_the_outcome_filter_finds_a_hit_ranked_below_every_other(built: Built) -> None:
    root = built.root
    busy = {"project": ["busyproj"]}
    ranked = _ids("tests", root, limit=1000, filters=busy)
    assert ranked.index(built.succeeded) == len(ranked) - 1 == 2 * FAILED_N  # below every failing one
    for limit in (1, 5, 20):
        res = search(root, "tests", outcome="succeeded", limit=limit, filters=busy)
        assert [h.event_id for h in res.hits] == [built.succeeded] and not res.more and res.note is None
        assert res.hits[0].attempt_outcome == "succeeded" and res.hits[0].turn_id
    ranked = [h.event_id for h in search(root, "kind:tool_call_finished tests", limit=1000).hits]
    assert ranked.index(built.superseded) >= PASSED_N  # below every green call's end
    res = search(root, "kind:tool_call_finished tests", outcome="superseded", limit=5)
    assert [h.event_id for h in res.hits] == [built.superseded] and not res.more and res.note is None
    assert res.hits[0].superseded_by and res.hits[0].superseded_by.startswith("att_")
    failed = search(root, "tests", outcome="failed", limit=5)
    assert len(failed.hits) == 5 and failed.more and all(h.attempt_outcome == "failed" for h in failed.hits)
    # the pages of one outcome follow each other: offset 5 starts where the first page ended
    second = search(root, "tests", outcome="failed", limit=5, offset=5)
    all_failed = _ids("tests", root, outcome="failed", limit=10)
    assert [h.event_id for h in failed.hits + second.hits] == all_failed


def test_the_outcome_filter_says_when_its_bound_cut_the_search(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "OUTCOME_MAX", 100)
    res = search(built.root, "tests", outcome="succeeded", limit=5)
    assert built.succeeded not in [h.event_id for h in res.hits]
    assert res.note and "100" in res.note and "succeeded" in res.note
    r = _cli("tests", "--outcome", "succeeded", "--limit", "5", "--json", root=built.root)  # the note on stderr
    assert r.exit_code == 0 and "100" in r.stderr and isinstance(json.loads(r.stdout), list)


def test_a_session_is_found_by_the_ids_its_hits_show_and_by_the_provider_s(built: Built) -> None:
    root = built.root
    hit = search(root, "suite pass kind:prompt_submitted").hits[0]
    assert hit.event_id == built.prompt and hit.session_id and hit.session_id.startswith("ses_")
    full, bare = hit.session_id, hit.session_id.removeprefix("ses_")
    for value in (full, full[:12], bare, bare[:8], "busy", "bus"):
        assert _ids("suite pass", root, filters={"session": [value]}) == [built.prompt], value
        assert _ids(f"suite pass session:{value}", root) == [built.prompt], value
    assert not _ids("suite pass", root, filters={"session": ["ses_00000000"]})
    assert not _ids("suite pass", root, filters={"session": ["green"]})
    other = search(root, "green suite kind:prompt_submitted").hits[0].session_id
    assert other and not _ids("suite pass", root, filters={"session": [other]})


def test_the_end_of_a_long_output_is_searchable_and_its_snippet_shows_it(built: Built) -> None:
    hits = search(built.root, CANARY).hits
    assert [h.event_id for h in hits] == [built.tail]
    assert CANARY in hits[0].snippet and any(hits[0].snippet[a:b] == CANARY for a, b in hits[0].marks)
    assert [h.event_id for h in search(built.root, f'"final error {CANARY}"').hits] == [built.tail]
    # its head and tail are indexed (4,096 characters each); the middle is not: row700 lies 10,441 in
    assert [h.event_id for h in search(built.root, "row3 quietly").hits if h.event_id == built.tail]
    assert [h.event_id for h in search(built.root, "row1399").hits] == [built.tail]
    assert not search(built.root, "row700").hits


def test_an_event_s_text_is_indexed_by_its_head_and_its_tail_never_a_cut_word() -> None:
    from agentlog.search.text import HEAD_CHARS, TAIL_CHARS, head_and_tail

    short = "word " * ((HEAD_CHARS + TAIL_CHARS) // 5)
    assert head_and_tail(short) == short  # up to both ends' length: whole
    text = "start " + "abcdefg " * 3000 + "finish"
    head, tail = head_and_tail(text).split("\n")
    assert head.startswith("start ") and tail.endswith(" finish")
    assert len(head) <= HEAD_CHARS and len(tail) <= TAIL_CHARS
    assert set(head.split()) <= {"start", "abcdefg"} and set(tail.split()) <= {"abcdefg", "finish"}  # no stub
    assert head_and_tail("x" * 20_000) == "\n"  # one word longer than both ends is no word of either


def _cli(*args: str, root: str) -> Any:
    return CliRunner().invoke(cli, ["search", *args], env={"AGENTLOG_HOME": root, "COLUMNS": "300"},
                              catch_exceptions=False)


def _cli_ids(*args: str, root: str) -> list[str]:
    r = _cli(*args, "--json", root=root)
    assert r.exit_code == 0, r.output
    return [h["event_id"] for h in json.loads(r.stdout)]


def test_every_cli_flag_keeps_what_it_names_and_drops_the_rest(built: Built) -> None:
    root = built.root
    assert _cli_ids(CANARY, "--kind", "tool_call_finished", root=root) == [built.tail]
    assert not _cli_ids(CANARY, "--kind", "prompt_submitted", root=root)
    assert _cli_ids(CANARY, "--tool", "Bash", root=root) == [built.tail]
    assert not _cli_ids(CANARY, "--tool", "Read", root=root)
    assert _cli_ids(CANARY, "--project", "greenproj", root=root) == [built.tail]
    assert not _cli_ids(CANARY, "--project", "busyproj", root=root)
    assert _cli_ids(CANARY, "--session", "green", root=root) == [built.tail]
    assert not _cli_ids(CANARY, "--session", "busy", root=root)
    assert _cli_ids("suite", "--since", "2026-11-01", "--kind", "prompt_submitted", root=root) == [built.prompt]
    assert not _cli_ids(CANARY, "--since", "2026-11-01", root=root)
    assert _cli_ids(CANARY, "--until", "2026-11-01", root=root) == [built.tail]
    assert not _cli_ids(CANARY, "--until", "2026-10-01", root=root)
    assert _cli_ids("tests", "--outcome", "succeeded", "--limit", "5", "--project", "busyproj",
                    root=root) == [built.succeeded]
    assert not _cli_ids(CANARY, "--outcome", "failed", root=root)
    assert len(_cli_ids("tests", "--limit", "3", root=root)) == 3
    assert len(_cli_ids("tests", "--limit", "7", root=root)) == 7
    text = _cli("suite", "--kind", "prompt_submitted", "--since", "2026-11-01", root=root)
    assert text.exit_code == 0 and not text.stdout.lstrip().startswith("[")
    assert "make the suite pass" in text.stdout and "trn_" in text.stdout and "ses_" in text.stdout
    superseded = _cli("tests", "--kind", "tool_call_finished", "--outcome", "superseded", root=root)
    place = [line for line in superseded.stdout.splitlines() if "superseded" in line]
    assert place and "replaced by att_" in place[0] and "trn_" in place[0]
    shown = place[0].split()[0]  # the session as the line shows it: --session takes it
    assert shown.startswith("ses_") and len(shown) == 40  # whole (issue 27, finding 6)
    assert _cli_ids("tests", "--kind", "tool_call_finished", "--session", shown, root=root) == [built.superseded]


def test_an_over_long_query_is_refused_not_cut(built: Built) -> None:
    r = _cli("tests " * 400, root=built.root)
    assert r.exit_code == 2 and "2,000" in r.output and "Traceback" not in r.output
    assert _cli("tests " * 300, "--json", root=built.root).exit_code == 0  # 1,800 characters
    with pytest.raises(SearchSyntaxError):
        search(built.root, "tests " * 400)


def test_stored_fields_reach_the_terminal_without_their_escape_codes(tmp_path: Path) -> None:
    root = str(tmp_path / "home")
    hostile = "/tmp/\x1b[31mredproj"
    _call(root, "esc\x1b]0;title\x07", hostile, T0, "tu-esc", "Ba\x1b[2Jsh", {"command": "echo escquartz"},
          {"hook_event_name": "PostToolUse", "tool_response": {"stdout": "escquartz \x1b[1mbold\x1b[0m"}})
    ingest(root)
    hits = search(root, "escquartz").hits
    assert hits and any("\x1b" in (h.tool or "") + (h.project or "") for h in hits)  # stored as captured
    r = subprocess.run([sys.executable, "-m", "agentlog", "search", "escquartz"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "AGENTLOG_HOME": root, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "escquartz" in r.stdout and "redproj" in r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout, repr(r.stdout)


def test_the_dashboard_shows_each_hit_s_turn_and_replacement_and_its_pager_keeps_the_filters(built: Built) -> None:
    from starlette.testclient import TestClient

    from agentlog.web.app import create_app
    from agentlog.web.security import COOKIE, Guard

    guard = Guard(port=8765)
    with TestClient(create_app(built.root, guard, live=False), base_url=f"http://127.0.0.1:{guard.port}") as c:
        r = c.get(f"/?token={guard.token}", follow_redirects=False)
        c.cookies.set(COOKIE, r.cookies[COOKIE])
        page = c.get("/search", params={"q": "tests", "tool": "Bash", "outcome": "failed", "project": "busyproj",
                                        "kind": "tool_call_failed", "since": "2026-11-01"}).text
        assert "Nothing matches" not in page and 'title="trn_' in page
        nxt = [line for line in page.splitlines() if "older →" in line]
        assert nxt, page[-2000:]
        for piece in ("q=tests", "tool=Bash", "outcome=failed", "project=busyproj", "kind=tool_call_failed",
                      "since=2026-11-01", "page=1"):
            assert piece in nxt[0], (piece, nxt[0])
        following = c.get("/search", params={"q": "tests", "tool": "Bash", "outcome": "failed", "page": "1",
                                             "project": "busyproj", "kind": "tool_call_failed",
                                             "since": "2026-11-01"}).text
        assert "← newer" in following and "outcome=failed" in following
        replaced = c.get("/search", params={"q": "tests", "kind": "tool_call_finished", "outcome": "superseded"}).text
        assert "replaced by" in replaced and "/attempts/att_" in replaced
        too_long = c.get("/search", params={"q": "tests " * 400}).text
        assert "at most 2,000 characters" in too_long and "Nothing matches" in too_long
        api = c.get("/api/search", params={"q": CANARY}).json()
        assert [h["event_id"] for h in api["hits"]] == [built.tail] and api["hits"][0]["turn_id"].startswith("trn_")


def test_the_mcp_tool_gives_each_hit_s_place_and_takes_an_outcome(built: Built) -> None:
    from agentlog.mcp import tools as mcp_tools

    text, data = mcp_tools.search(built.root, query="tests", outcome="superseded", mode="lexical")
    assert [h["event_id"] for h in data["hits"]] == [built.superseded]
    line = [x for x in text.splitlines() if "superseded" in x and "att_" in x]
    assert line and "trn_" in line[0] and "replaced by att_" in line[0]
    with pytest.raises(mcp_tools.ToolError):
        mcp_tools.search(built.root, query="tests", outcome="sideways")
    text, data = mcp_tools.search(built.root, query=CANARY)
    assert [h["event_id"] for h in data["hits"]] == [built.tail] and CANARY in text and "trn_" in text


def test_a_session_prefix_that_names_two_sessions_is_refused(tmp_path: Path) -> None:
    from agentlog.projection.ids import derive

    seen: dict[str, str] = {}
    for i in range(100_000):  # two provider sessions whose ids (ours) share their first 4 hex digits
        sid = f"amb-{i}"
        head = derive("session", "claude_code", sid)[:4]
        if head in seen:
            pair = (seen[head], sid)
            break
        seen[head] = sid
    root, cwd = str(tmp_path / "home"), str(tmp_path)
    for n, sid in enumerate(pair):
        _emit(root, sid, cwd, T0 + n * SECOND, {"hook_event_name": "UserPromptSubmit", "prompt": "ambiquartz"})
    ingest(root)
    assert len(search(root, "ambiquartz").hits) == 2
    with pytest.raises(SearchSyntaxError, match="matches 2"):
        search(root, f"ambiquartz session:ses_{head}")
    r = _cli("ambiquartz", "--session", head, root=root)
    assert r.exit_code == 2 and "matches 2" in r.output
    longer = derive("session", "claude_code", pair[1])[:8]
    assert len(search(root, "ambiquartz", filters={"session": [longer]}).hits) == 1
