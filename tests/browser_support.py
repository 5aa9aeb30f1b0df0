"""A dashboard server and a headless Chromium, for the tests that drive the dashboard in a real browser."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def wait(what: str, check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """``check()`` once it is truthy (a page swapped by the live stream meanwhile counts as not yet)."""
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            got = check()
        except StaleElementReferenceException:  # the live stream swapped the page's <main> meanwhile
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def need_browser() -> None:
    """Fail (skip with ``AGENTLOG_SKIP_BROWSER=1``) without chromium and chromedriver."""
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("AGENTLOG_SKIP_BROWSER") == "1":
            pytest.skip("AGENTLOG_SKIP_BROWSER=1")
        pytest.fail("chromium and chromedriver are needed (Debian: apt-get install chromium chromium-driver; "
                    "scripts/test.sh installs them)")


@contextlib.contextmanager
def serving(root: str) -> Iterator[str]:
    """``agentlog serve --port 0`` over ``root`` in a child process, answering: its printed URL (with the token)."""
    proc = subprocess.Popen([sys.executable, "-m", "agentlog", "serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "AGENTLOG_HOME": root})
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "?token=" in url, url
        base = url.split("/?", 1)[0]

        def up() -> bool:
            try:
                urllib.request.urlopen(base + "/static/app.css", timeout=1)
                return True
            except (urllib.error.URLError, ConnectionError):
                return False

        wait("the server", up, 20)
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)  # waits, and closes the pipes
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@contextlib.contextmanager
def chrome(profile: Path) -> Iterator[Any]:
    """A headless Chromium (1400×1000) with its profile in ``profile``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={profile}", "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def keep_screenshots(shots: Path) -> None:
    """Copy the screenshots in ``shots`` to ``$AGENTLOG_SCREENSHOTS`` when it is set; print where they are."""
    target = os.environ.get("AGENTLOG_SCREENSHOTS")
    if target:
        os.makedirs(target, exist_ok=True)
        for p in shots.iterdir():
            shutil.copy(p, os.path.join(target, p.name))
    print("screenshots:", shots)
