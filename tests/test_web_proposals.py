"""Approving a memory proposal as a person does it, in a real headless Chromium over a real server.

The data root holds the scripted demo, a real Claude Code transcript of shared/fixtures
(``agentlog import``) and a live session scripted through the real hook, whose test run
fails. The agent of that session then proposes a memory over the real MCP server
(``agentlog mcp`` on stdio, driven by the SDK's client), citing the failed attempt as its
evidence, with markup in its title and statement.

From Now a person finds the proposal waiting, opens it, approves it and sees that it took
effect: the proposal approved, the memory it wrote (its evidence, and its history naming the
proposal), and Now no longer listing it. Approving is a POST carrying the page's CSRF token:
the browser's own GET of the action and a POST without the token change nothing. axe-core
runs in every page the walk visits, each photographed at 1400×1000 and 390×844 and no wider
than the window.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentlog.operations import demo
from agentlog.operations.fixtures import missing, shared_dir
from agentlog.operations.reader import Source
from axe_support import check_page, viewport
from browser_support import chrome, keep_screenshots, need_browser, serving, wait
from test_web import _hook

SHARED = shared_dir() or Path(__file__).resolve().parents[2] / "shared"
TRANSCRIPT = SHARED / "fixtures" / "claude-code" / "entireio-cli__ckpt-5c-1039ad85f4-0__full.jsonl"
needs_fixture = pytest.mark.skipif(not TRANSCRIPT.is_file(), reason=missing(TRANSCRIPT))

LIVE = {"session_id": "proposals-live-1", "cwd": "/tmp/proposals-project", "transcript_path": "/tmp/p.jsonl"}
FAILING_CMD = "pytest -q tests/test_parser.py"
FAILING_ERR = "Exit code 1\nFAILED tests/test_parser.py::test_utf8 - UnicodeDecodeError\n1 failed, 4 passed in 0.31s"
TITLE = 'Run the parser tests with -X utf8 <script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'
STATEMENT = "The parser tests fail without UTF-8 mode: </pre><script>window.__xss=3</script>"


def _failed_attempt(root: str) -> str:
    """The display id of the live session's failed attempt (the store caught up first)."""
    from agentlog.api import dashboard_now

    src = Source(root)
    try:
        now: dict[str, Any] = src.read(lambda e: dashboard_now(e, root))
    finally:
        src.close()
    (f,) = [f for f in now["failures"] if f["command"] == FAILING_CMD]
    assert f["attempt_id"], f
    return str(f["attempt_id"])


async def _propose(root: str, args: dict[str, Any]) -> Any:
    """``memory_propose`` through ``agentlog mcp`` (a child process on stdio), as an agent calls it."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "agentlog", "mcp"],
                                   env={**os.environ, "AGENTLOG_HOME": root})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await session.call_tool("memory_propose", args)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("proposals") / "home"
    mp = pytest.MonkeyPatch()
    mp.setattr(demo, "claude_hook_fixtures", lambda: [])
    root = demo.run_demo(str(home)).home
    mp.undo()
    r = subprocess.run([sys.executable, "-m", "agentlog", "import", "claude-code", str(TRANSCRIPT)],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "AGENTLOG_HOME": root})
    assert r.returncode == 0, r.stderr
    # the live session: a prompt, a failing test run
    _hook(root, {**LIVE, "hook_event_name": "SessionStart", "source": "startup"})
    _hook(root, {**LIVE, "hook_event_name": "UserPromptSubmit", "prompt": "make the parser tests pass"})
    _hook(root, {**LIVE, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "p1",
                 "tool_input": {"command": FAILING_CMD}})
    _hook(root, {**LIVE, "hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_use_id": "p1",
                 "tool_input": {"command": FAILING_CMD}, "error": FAILING_ERR, "is_interrupt": False})
    attempt = _failed_attempt(root)
    # the agent proposes what it learned, citing the failed attempt
    res = asyncio.run(_propose(root, {"kind": "fact", "title": TITLE, "statement": STATEMENT,
                                      "evidence": [f"attempt:{attempt}"]}))
    assert not res.is_error, res.content
    proposal = res.structured_content
    assert proposal and proposal["status"] == "open" and proposal["actor"] == "agent", proposal
    yield {"root": root, "attempt": attempt, "proposal": str(proposal["id"])}


@pytest.fixture(scope="module")
def browser(world: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    need_browser()
    with serving(world["root"]) as url, chrome(tmp_path_factory.mktemp("chromium")) as driver:
        driver.get(url)  # the one-time token, exchanged for a cookie
        base = url.split("/?", 1)[0]
        wait("the sign-in", lambda: driver.current_url.rstrip("/") == base)
        yield driver, base


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("proposal-shots")
    yield d
    keep_screenshots(d)


def _escaped(driver: Any, what: str) -> None:
    """No markup of the captured title or statement became an element or ran."""
    found = driver.execute_script(
        "return [document.querySelectorAll('script:not([src])').length, "
        "document.querySelectorAll('#main img, [onerror], [onload]').length, window.__xss === undefined];")
    assert found == [0, 0, True], (what, found)


def _fetch(driver: Any, method: str, path: str) -> int:
    """The status of ``method path`` sent by the page itself (its cookie, its origin), without a CSRF token."""
    status: int = driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "fetch(arguments[1], {method: arguments[0], credentials: 'same-origin', redirect: 'manual'})"
        ".then(function (r) { done(r.status); }).catch(function (e) { done(-1); });", method, path)
    return status


@needs_fixture
def test_approve_a_memory_proposal_from_now(world: dict[str, str], browser: tuple[Any, str], shots: Path) -> None:
    from selenium.webdriver.common.by import By

    from agentlog.memory import proposals as P
    from agentlog.memory import service as S

    driver, base = browser
    root, pid, attempt = world["root"], world["proposal"], world["attempt"]
    stored = attempt.split("_", 1)[1]  # the evidence keeps the bare id
    problems: list[str] = []

    # Now and Proposals with the proposal waiting: photographed, axe, no overflow
    problems += check_page(driver, base + "/", "now-waiting", shots)
    problems += check_page(driver, base + "/proposals", "proposals-open", shots)
    viewport(driver, 1400, 1000)
    driver.get(base + "/")
    wait("Now", lambda: driver.find_element(By.CSS_SELECTOR, "#main h1").text == "Now")
    _escaped(driver, "Now")

    # each read of the page is one retried step: the live stream may swap <main> between a find and a look
    def now_page() -> tuple[str, str, list[tuple[str, str]]]:
        waiting = driver.find_element(By.ID, "proposals-waiting")
        links = [(a.text, a.get_attribute("href") or "") for a in waiting.find_elements(By.CSS_SELECTOR, "a.proposal")]
        return waiting.text, driver.find_element(By.ID, "today").text, links

    waiting_text, strip, all_links = wait("the Now page", now_page)
    assert "window.__xss=1" in waiting_text  # the title, as text
    assert "to review" in strip, strip
    links = [href for text, href in all_links if text.startswith("Run the parser")]
    assert len(links) == 1 and links[0].endswith(f"/proposals#p-{pid}")

    # the action is a POST with the page's CSRF token: the page's own GET and token-less POST change nothing
    assert _fetch(driver, "GET", f"/proposals/{pid}/approve") == 405
    assert _fetch(driver, "POST", f"/proposals/{pid}/approve") == 403
    assert P.get(root, pid).status == "open"

    # the walk: Now → the proposal (1) → Approve (2) → the memory it wrote (3). Each click is retried
    # while the live stream swaps the page's <main> under it (a decision is a change it reports).
    def click(css: str, text: str = "") -> bool:
        target = driver.find_element(By.CSS_SELECTOR, css)
        assert text in target.text, target.text
        target.click()
        return True

    clicks = 0
    wait("the click on the proposal", lambda: click(f"#proposals-waiting a.proposal[href$='#p-{pid}']", "Run the"))
    clicks += 1
    def card() -> tuple[str, str]:
        found = driver.find_element(By.ID, f"p-{pid}")
        return found.find_element(By.TAG_NAME, "h2").text, found.text

    heading, card_text = wait("the proposal", card)
    assert driver.current_url.endswith(f"/proposals#p-{pid}")
    assert "open" in heading
    assert f"evidence attempt: {stored}" in card_text, card_text  # its evidence, in the readable diff
    _escaped(driver, "the proposals")
    wait("the click on Approve", lambda: click(f"#p-{pid} button.approve", "Approve"))
    clicks += 1
    wait("the approved proposal", lambda: "status=merged" in driver.current_url)
    assert driver.current_url.endswith(f"#p-{pid}")
    wait("the proposal approved", lambda: "approved" in driver.find_element(By.CSS_SELECTOR, f"#p-{pid} h2").text)
    merged_url = driver.current_url
    wait("the click on the memory it wrote", lambda: click(f"#p-{pid} a.memory", "Run the parser tests"))
    clicks += 1
    wait("the memory", lambda: driver.find_element(By.CSS_SELECTOR, "#main h1").text.startswith("Run the parser"))
    _escaped(driver, "the memory")
    body = wait("the memory's page", lambda: driver.find_element(By.ID, "main").text)
    assert "window.__xss=3" in body  # the statement, as text
    assert stored in body and pid in body  # its evidence, and its history naming the proposal
    memory_url = driver.current_url
    # the live stream may swap <main> between the find and the look, so both are one retried step
    wait("the evidence link shown", lambda: driver.find_element(By.CSS_SELECTOR, f"#main a[href='/attempts/{stored}']").is_displayed())
    assert clicks <= 3

    # it took effect: in the memory's own store, and Now no longer lists it
    assert P.get(root, pid).status == "merged"
    mine = [m for m in S.list_memories(root, limit=1000) if m.title == TITLE]
    assert len(mine) == 1 and mine[0].kind == "fact" and memory_url.endswith(f"/memory/{mine[0].id}")
    assert [(e["type"], e["value"]) for e in S.get(root, mine[0].id).evidence or []] == [("attempt", stored)]
    driver.get(base + "/")
    wait("Now", lambda: driver.find_element(By.CSS_SELECTOR, "#main h1").text == "Now")
    assert pid not in driver.page_source

    # the pages the walk reached: photographed, axe, no overflow
    problems += check_page(driver, merged_url, "proposals-approved", shots)
    problems += check_page(driver, memory_url, "memory-approved", shots)
    problems += check_page(driver, base + "/", "now-after", shots)
    assert problems == [], "\n".join(problems)
    assert len(list(shots.glob("*.png"))) == 10
