"""Now and Failures as a person uses them, in a real headless Chromium over a real server.

The data root holds the scripted demo session, the real Claude Code transcripts of
shared/fixtures (``agentlog import``), the real hook payloads of a session whose failed
commands the Failures page once missed (replayed through the real hook), and hostile
sessions whose commands and errors carry markup. A live session is then scripted through
the real hook while the server runs.

Screenshots of the pages at 1400×1000 and 390×844 are kept under the test's output
directory (``<pytest tmp>/…/now-shots``; copied to ``$AGENTLOG_SCREENSHOTS`` when set), and
no page may be wider than the window.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentlog.operations import demo
from agentlog.operations.fixtures import missing, payload_stdin, shared_dir
from agentlog.operations.reader import Source
from test_web import XSS_OUTPUT, XSS_PROMPT, _hook
from browser_support import chrome, keep_screenshots, need_browser, serving
from browser_support import wait as _wait

SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
FIXTURES = SHARED / "fixtures"
needs_fixtures = pytest.mark.skipif(not (FIXTURES / "claude-code").is_dir(), reason=missing(FIXTURES))

HOSTILE_CMD = "make check NAME='<script>alert(\"cmd\")</script>' X='\"><img src=x onerror=alert(3)>'"
HOSTILE_ERR = "Exit code 2\n<script>alert('err')</script> error: \"><img src=x onerror=alert(4)> not found"
ASKING_CMD = "rm -rf build/<svg onload=alert(5)>"
LIVE_CMD = "pytest -q tests/test_slow_suite.py"
LIVE_ERR = ("Exit code 1\nFAILED tests/test_slow_suite.py::test_big - AssertionError: 3 != 4\n"
            "1 failed, 9 passed in 2.10s")
GUARDRAILS_FAILURES = FIXTURES / "claude-code-hooks" / "claude-agentic-framework__guardrails-logs-post_tool_use_failure.json"


def _base(sid: str, cwd: str) -> dict[str, Any]:
    return {"session_id": sid, "cwd": cwd, "transcript_path": f"/tmp/{sid}.jsonl"}


def _failing(root: str, sid: str, cwd: str, tid: str, cmd: str, err: str) -> None:
    b = _base(sid, cwd)
    _hook(root, {**b, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": tid,
                 "tool_input": {"command": cmd}})
    _hook(root, {**b, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_use_id": tid,
                 "tool_input": {"command": cmd}, "error": err, "is_interrupt": False})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("now") / "home"
    mp = pytest.MonkeyPatch()
    mp.setattr(demo, "claude_hook_fixtures", lambda: [])
    root = demo.run_demo(str(home)).home
    mp.undo()
    env = {**os.environ, "AGENTLOG_HOME": root}
    transcripts = sorted(str(p) for p in (FIXTURES / "claude-code").glob("*.jsonl"))
    r = subprocess.run([sys.executable, "-m", "agentlog", "import", "claude-code", *transcripts], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    from agentlog.capture.command import hook_argv

    for element in json.loads(GUARDRAILS_FAILURES.read_text(encoding="utf-8")):  # real payloads, real hook
        r2 = subprocess.run(hook_argv("claude-code"), input=payload_stdin(element), capture_output=True, timeout=60,
                            env=env)
        assert r2.returncode == 0, r2.stderr
    # hostile text: the same failing command in two sessions (a recurring failure), a request to run another
    for sid in ("now-xss-1", "now-xss-2"):
        _hook(root, {**_base(sid, "/tmp/xss-now"), "hook_event_name": "UserPromptSubmit", "prompt": XSS_PROMPT})
        _failing(root, sid, "/tmp/xss-now", "t1", HOSTILE_CMD, HOSTILE_ERR)
    b = _base("now-xss-2", "/tmp/xss-now")
    _hook(root, {**b, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t2",
                 "tool_input": {"command": ASKING_CMD}})
    _hook(root, {**b, "hook_event_name": "Notification", "notification_type": "permission_prompt",
                 "message": "Claude needs your permission to use Bash " + XSS_OUTPUT})
    # a request whose session then ended: it does not wait any more
    e = _base("now-ended", "/tmp/ended-project")
    _hook(root, {**e, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t1",
                 "tool_input": {"command": "git push --force"}})
    _hook(root, {**e, "hook_event_name": "Notification", "notification_type": "permission_prompt",
                 "message": "Claude needs your permission to use Bash"})
    _hook(root, {**e, "hook_event_name": "SessionEnd", "reason": "logout"})
    yield root


def _now(root: str, at_us: int | None = None) -> dict[str, Any]:
    from agentlog.api import dashboard_now

    src = Source(root)
    try:
        out: dict[str, Any] = src.read(lambda e: dashboard_now(e, root, now_us=at_us))
        return out
    finally:
        src.close()


@needs_fixtures
def test_needs_you_holds_only_what_still_waits_grouped_per_session(world: str) -> None:
    got = _now(world)
    assert set(got) >= {"needs_you", "live", "failures", "today", "bounds"}
    waiting = {n["session_id"]: n for n in got["needs_you"]}
    asking = [n for n in got["needs_you"] if n["command"] == ASKING_CMD]
    assert len(asking) == 1, got["needs_you"]  # the tool call that asked, and its command
    assert asking[0]["tool_name"] == "Bash" and asking[0]["signal_type"] == "permission_prompt"
    # one row per session (the ended session's request is not waiting)
    assert len(waiting) == len(got["needs_you"])
    assert not any(n["command"] == "git push --force" for n in got["needs_you"])
    # the session that asked is running (waiting on a person), and its current call is the one that asked
    live = {s["session_id"]: s for s in got["live"]}
    sid = asking[0]["session_id"]
    assert live[sid]["waiting"] and live[sid]["doing"]["command"] == ASKING_CMD
    assert live[sid]["doing"]["status"] == "running"
    # the last hour's failures carry their commands and first error lines
    hostile = [f for f in got["failures"] if f["command"] == HOSTILE_CMD]
    assert len(hostile) == 2 and all("error:" in (f["error_line"] or "") for f in hostile)
    assert hostile[0]["error_line"].startswith("<script>alert('err')</script> error:")

    # later: past the bounds, nothing waits and nothing runs (measured against the clock, not the data)
    from agentlog.query.now import NEEDS_YOU_WITHIN, RUNNING_SILENCE

    raised = asking[0]["raised_at"]
    from datetime import datetime

    at = int(datetime.fromisoformat(raised.replace("Z", "+00:00")).timestamp() * 1_000_000)
    within = _now(world, at + NEEDS_YOU_WITHIN - 60_000_000)
    assert sid in {n["session_id"] for n in within["needs_you"]}
    assert sid in {s["session_id"] for s in within["live"]}
    assert all(s["waiting"] for s in _now(world, at + RUNNING_SILENCE + 60_000_000)["live"])
    late = _now(world, at + NEEDS_YOU_WITHIN + 60_000_000)
    assert sid not in {n["session_id"] for n in late["needs_you"]}
    assert sid not in {s["session_id"] for s in late["live"]}
    assert late["failures"] == []  # nothing in the hour before


@needs_fixtures
def test_every_failed_call_of_the_imported_and_replayed_sessions_is_on_failures(world: str) -> None:
    from starlette.testclient import TestClient

    from agentlog.web.app import create_app
    from agentlog.web.security import Guard
    from test_web import _signed_in

    guard = Guard(port=8765)
    with _signed_in(create_app(world, guard, live=False), guard) as c:
        expected = {r[0]: r[1] for r in c.get("/api/sql", params={
            "q": "select tool_call_id, tool_name from tool_calls where outcome_status in ('failure', 'denied')"}
        ).json()["result"]["rows"]}
        seen: dict[str, dict[str, Any]] = {}
        page = 0
        while True:
            got = c.get("/api/failures", params={"page": page}).json()
            seen.update({f["tool_call_id"]: f for f in got["failures"]})
            if not got["more"]:
                break
            page += 1
            assert page < 50
        assert len(expected) >= 20 and set(seen) == {f"tc_{k}" for k in expected}
        # the real replayed session: each of its failed commands, with the line that says why
        real = [json.loads(payload_stdin(e)) for e in json.loads(GUARDRAILS_FAILURES.read_text(encoding="utf-8"))]
        for p in real:
            mine = [f for f in seen.values() if f["command"] == p["tool_input"]["command"]]
            assert mine, p["tool_input"]["command"]
            assert all(f["error_line"] or f["summary"] for f in mine)
        assert any("command not found: python" in (f["error_line"] or "") for f in seen.values())
        # the real imported transcripts: their failed shell commands, with their commands
        go = [f for f in seen.values() if (f["command"] or "").startswith(("go test", "golangci-lint", "mise run"))]
        assert go and all(f["error_line"] or f["summary"] for f in go), go
        # recurring: the hostile command failed in two sessions
        html = c.get("/failures").text
        groups = c.get("/api/failures").json()["groups"]
        hostile = [g for g in groups if g["command"] == HOSTILE_CMD]
        assert hostile and hostile[0]["count"] == 2 and hostile[0]["sessions"] == 2
        assert 'id="recurring"' in html
        # escaped in the markup, on both pages
        for text in (html, c.get("/").text):
            assert "<script>alert" not in text and "<img src=x" not in text and "<svg onload" not in text
            assert "&lt;script&gt;alert(" in text


# -- the browser ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(world: str) -> Iterator[str]:
    need_browser()
    with serving(world) as url:
        yield url


@pytest.fixture(scope="module")
def browser(served: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chrome(tmp_path_factory.mktemp("chromium")) as driver:
        driver.get(served)  # the one-time token, exchanged for a cookie
        base = served.split("/?", 1)[0]
        _wait("the sign-in", lambda: driver.current_url.rstrip("/") == base)
        yield driver


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("now-shots")
    yield d
    keep_screenshots(d)


def _base_url(browser: Any) -> str:
    return "/".join(str(browser.current_url).split("/", 3)[:3])


def _viewport(browser: Any, width: int, height: int) -> None:
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                                   "deviceScaleFactor": 1, "mobile": width < 600})


def _no_overflow(browser: Any, what: str) -> None:
    wide = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth];")
    assert wide[0] <= wide[1], f"{what} is {wide[0]} px wide in a {wide[1]} px window"


def _escaped(browser: Any, what: str) -> None:
    """No markup from captured text became an element or ran."""
    found = browser.execute_script(
        "return [document.querySelectorAll('script:not([src])').length, "
        "document.querySelectorAll('#main img, #main svg[onload], [onerror], [onload]').length, "
        "window.__xss === undefined];")
    assert found == [0, 0, True], (what, found)


@needs_fixtures
def test_now_and_failures_in_the_browser_live(world: str, served: str, browser: Any, shots: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    base = _base_url(browser)
    _viewport(browser, 1400, 1000)
    browser.get(base + "/")
    _wait("Now", lambda: browser.find_element(By.CSS_SELECTOR, "#main h1").text == "Now")
    _escaped(browser, "Now")
    needs = browser.find_element(By.ID, "needs-you").text
    assert ASKING_CMD in needs and "git push --force" not in needs  # escaped text, shown as text
    assert HOSTILE_CMD in browser.find_element(By.ID, "recent-failures").text
    # ids: whole in the title and the markup, with a copy button that copies the whole id
    idcode = browser.find_element(By.CSS_SELECTOR, "#needs-you code.id")
    whole = idcode.get_attribute("title")
    assert whole and whole.startswith("ses_") and idcode.get_attribute("textContent") == whole
    button = browser.find_element(By.CSS_SELECTOR, "#needs-you button.copy")
    assert button.is_displayed()
    button.click()
    _wait("the copy", lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-copied") == whole)
    # dates on one line
    heights = browser.execute_script("return Array.from(document.querySelectorAll('#main time.when'))"
                                     ".map(t => t.getClientRects().length);")
    assert heights and all(h == 1 for h in heights), heights

    # a live agent, scripted through the real hook while the page is open
    browser.execute_script("window.__notReloaded = true;")
    _wait("the live stream", lambda: "on" in (browser.find_element(By.ID, "live").get_attribute("class") or ""), 15)
    b = _base("now-live-1", "/tmp/live-project")
    _hook(world, {**b, "hook_event_name": "SessionStart", "source": "startup"})
    _hook(world, {**b, "hook_event_name": "UserPromptSubmit", "prompt": "run the slow suite"})
    _hook(world, {**b, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "L1",
                  "tool_input": {"command": LIVE_CMD}})
    _wait("the running agent and its command", lambda: LIVE_CMD in browser.find_element(By.ID, "running").text, 20)
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "#running tbody tr") if LIVE_CMD in r.text][0]
    assert "live-project" in row.text and "running" in row.text
    _hook(world, {**b, "hook_event_name": "Notification", "notification_type": "permission_prompt",
                  "message": "Claude needs your permission to use Bash"})
    _wait("the request, with the command that asked", lambda: LIVE_CMD in browser.find_element(By.ID, "needs-you").text,
          20)
    browser.save_screenshot(str(shots / "now-1400.png"))
    _hook(world, {**b, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_use_id": "L1",
                  "tool_input": {"command": LIVE_CMD}, "error": LIVE_ERR, "is_interrupt": False})
    _wait("the answered request gone", lambda: LIVE_CMD not in browser.find_element(By.ID, "needs-you").text, 20)
    _wait("the failure listed", lambda: LIVE_CMD in browser.find_element(By.ID, "recent-failures").text, 20)
    assert browser.execute_script("return window.__notReloaded === true;")

    # from Now to why the latest failed attempt failed: one click
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "#recent-failures tbody tr") if LIVE_CMD in r.text][0]
    assert "1 of 10 tests failed" in row.text or "AssertionError" in row.text, row.text
    clicks = 0
    row.find_element(By.CSS_SELECTOR, "a.attempt").click()
    clicks += 1
    why = _wait("why it failed", lambda: browser.find_element(By.ID, "why-failed").text)
    assert LIVE_CMD in why and ("AssertionError: 3 != 4" in why or "1 of 10 tests failed" in why), why
    assert clicks <= 3
    _no_overflow(browser, "the attempt page")
    browser.save_screenshot(str(shots / "attempt-1400.png"))
    attempt_url = browser.current_url

    # find a failing command and its error: Failures, one click from the navigation
    browser.find_element(By.CSS_SELECTOR, "nav a[href='/failures']").click()
    _wait("Failures", lambda: browser.find_element(By.CSS_SELECTOR, "#main h1").text == "Failures")
    _escaped(browser, "Failures")
    calls = browser.find_element(By.ID, "failed-calls").text
    assert LIVE_CMD in calls and HOSTILE_CMD in calls
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "#failed-calls tbody tr") if LIVE_CMD in r.text][0]
    why = row.find_element(By.CSS_SELECTOR, "td.why").text  # the command's error, on its row
    assert "1 of 10 tests failed" in why or "AssertionError: 3 != 4" in why, row.text
    recurring = browser.find_element(By.ID, "recurring").text
    assert HOSTILE_CMD in recurring
    # keyboard: "/" focuses the filter, j and k walk the rows
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("/")
    assert browser.switch_to.active_element.get_attribute("name") == "project"
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    body.send_keys("j")
    body.send_keys("j")
    body.send_keys("k")
    rows = browser.find_elements(By.CSS_SELECTOR, "#main [data-row]")
    assert "cursor" in (rows[0].get_attribute("class") or "")
    assert browser.switch_to.active_element.tag_name == "a"
    browser.save_screenshot(str(shots / "failures-1400.png"))

    # every page at 1400×1000 and at 390×844: photographed, no wider than the window, and axe-core in
    # the page finds no serious or critical accessibility violation
    from agentlog.memory import service

    from axe_support import SIZES, check_page

    made = service.create(world, "fact", "The slow suite needs " + XSS_OUTPUT,
                          attributes={"statement": "it runs for minutes " + XSS_PROMPT})
    memory_one = "/memory/" + made.id
    every = (("now", "/"), ("failures", "/failures"), ("attempt", attempt_url.split(base, 1)[1]),
             ("timeline", "/timeline"), ("search", "/search?q=pytest"), ("memory", "/memory"),
             ("memory-one", memory_one), ("proposals", "/proposals?status=all"), ("sql", "/sql?q=select+1"),
             ("usage", "/usage"), ("integrity", "/integrity"))
    problems: list[str] = []
    for name, path in every:
        problems += check_page(browser, base + path, f"page-{name}", shots)
        _escaped(browser, path)  # captured text (the memory's title and statement too) stays text
    assert problems == [], "\n".join(problems)
    assert len(list(shots.glob("page-*.png"))) == len(every) * len(SIZES)


def test_first_error_line_and_compact_dates() -> None:
    from agentlog.api import first_error_line
    from agentlog.web.routes.common import compact_time

    assert first_error_line("Exit code 127\n(eval):1: command not found: python", None) == \
        "(eval):1: command not found: python"
    assert first_error_line("<tool_use_error>File has not been read yet.</tool_use_error>", None) == \
        "File has not been read yet."
    assert first_error_line(None, "compiling\nsrc/a.rs:3: error[E0308]: mismatched types\nmore") == \
        "src/a.rs:3: error[E0308]: mismatched types"
    assert first_error_line("Exit code 1", "") is None
    assert first_error_line("x" * 1000, None) == "x" * 239 + "…"
    assert compact_time("2026-12-07T15:04:05.123456Z", today="2026-12-07") == "15:04:05"
    assert compact_time("2019-01-02T03:04:05Z") == "2019-01-02"
    assert compact_time("not a time") == "not a time"
    assert compact_time(None) == ""


def test_first_error_line_reads_through_tracebacks_and_colours() -> None:
    from agentlog.api import first_error_line

    tb = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    import yaml\n"
          "ModuleNotFoundError: No module named 'yaml'\n")
    assert first_error_line(tb, None) == "ModuleNotFoundError: No module named 'yaml'"
    assert first_error_line("\x1b[0;31m✗ CLI test failed\x1b[0m", None) == "✗ CLI test failed"
