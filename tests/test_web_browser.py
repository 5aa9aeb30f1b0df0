"""The dashboard in a real headless Chromium: it renders, updates live, and a click approves a proposal.

Needs Debian's chromium and chromium-driver (the README's test command installs
them). Screenshots of the main pages are saved under the test's output
directory (and copied to ``$AGENTLOG_SCREENSHOTS`` when that is set).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentlog.operations import demo
from agentlog.capture.command import hook_argv
from browser_support import CHROMEDRIVER, CHROMIUM, chrome, keep_screenshots, need_browser, serving, wait

__all__ = ["CHROMEDRIVER", "CHROMIUM", "PAGES", "browser", "served"]

PAGES = ("/", "/timeline", "/failures", "/search?q=parser", "/memory", "/proposals", "/sql?q=select+kind%2C+count(*)+"
         "as+n+from+events+group+by+1", "/usage", "/integrity")
_wait = wait


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    need_browser()
    mp = pytest.MonkeyPatch()
    mp.setattr(demo, "claude_hook_fixtures", lambda: [])
    root = demo.run_demo(str(tmp_path / "home")).home
    mp.undo()
    with serving(root) as url:
        yield root, url


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[Any]:
    with chrome(tmp_path / "chromium-profile") as driver:
        yield driver


def test_the_dashboard_in_a_real_browser(served: tuple[str, str], browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    root, url = served
    base = url.split("/?", 1)[0]
    shots = tmp_path / "screenshots"
    shots.mkdir()

    browser.get(url)  # the one-time token, exchanged for a cookie
    _wait("the redirect", lambda: browser.current_url.rstrip("/") == base)
    assert "?token=" not in browser.current_url

    # every main page renders, without a console error from the CSP, and is photographed
    for i, path in enumerate(PAGES):
        browser.get(base + path)
        _wait(f"the heading of {path}", lambda: browser.find_element(By.CSS_SELECTOR, "#main h1").text)
        name = "now" if path == "/" else path.strip("/").split("?")[0].replace("/", "-")
        browser.save_screenshot(str(shots / f"{i:02d}-{name}.png"))

    # the timeline: the scripted session with its attempts and a superseded one
    browser.get(base + "/timeline")
    _wait("the sessions", lambda: browser.find_elements(By.CSS_SELECTOR, "article.session"))
    assert "superseded" in browser.page_source
    assert browser.find_elements(By.CSS_SELECTOR, "svg.bar rect.seg.failure")

    # live: a hook in another process records a new session; it appears without a reload
    browser.execute_script("window.__notReloaded = true;")
    _wait("the live stream", lambda: "on" in (browser.find_element(By.ID, "live").get_attribute("class") or ""))
    payload = {"session_id": "browser-live-1", "cwd": "/tmp/browser-project", "hook_event_name": "UserPromptSubmit",
               "prompt": "a prompt typed while the page was open"}
    started = time.monotonic()
    r = subprocess.run(hook_argv("claude-code"), input=json.dumps(payload).encode(), capture_output=True, timeout=60,
                       env={**os.environ, "AGENTLOG_HOME": root})
    assert r.returncode == 0, r.stderr
    _wait("the new session on the page", lambda: "browser-project" in browser.find_element(By.ID, "main").text, 15)
    took = time.monotonic() - started
    assert browser.execute_script("return window.__notReloaded === true;")
    browser.save_screenshot(str(shots / "10-timeline-live.png"))
    print(f"hook to browser: {took:.2f} s")

    # search as you type: results swap in while the page (and the box's focus) stays
    browser.get(base + "/search")
    browser.execute_script("window.__notReloaded = true;")
    _wait("typing into the search box",
          lambda: browser.find_element(By.CSS_SELECTOR, "input[name=q]").send_keys("parser") or True)
    _wait("search results as you type", lambda: browser.find_elements(By.CSS_SELECTOR, "#results mark"))
    assert browser.execute_script("return window.__notReloaded === true;")
    assert "q=parser" in browser.current_url
    # each hit where it belongs: its session, turn and attempt, as links and ids
    assert [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#results th")][-3:] == ["session", "turn",
                                                                                            "attempt"]
    assert browser.find_elements(By.CSS_SELECTOR, "#results td code[title^='trn_']")
    browser.save_screenshot(str(shots / "12-search-as-you-type.png"))

    # a proposal approved by a click
    browser.get(base + "/proposals")
    title = _wait("the proposal", lambda: browser.find_element(By.CSS_SELECTOR, "article.proposal h2").text)
    _wait("the click on Approve", lambda: browser.find_element(By.CSS_SELECTOR, "button.approve").click() or True)
    try:
        _wait("the merged list", lambda: "status=merged" in browser.current_url)
    except AssertionError:
        raise AssertionError(browser.current_url + "\n" + browser.page_source[:3000]) from None
    browser.get(base + "/memory")
    approved = title.split(" by ")[0].strip()  # the h2 reads "<title> by <who> · <status>"
    _wait(f"the approved memory ({approved}) listed", lambda: approved in browser.find_element(By.ID, "main").text)
    browser.save_screenshot(str(shots / "11-memory-after-approve.png"))

    saved = sorted(p.name for p in shots.iterdir())
    assert len(saved) == len(PAGES) + 3
    keep_screenshots(shots)
