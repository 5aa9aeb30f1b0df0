"""Accessibility and layout checks of a page open in a real browser (selenium), for any dashboard test.

- :func:`axe_violations` runs axe-core (the npm package, installed once into a test cache
  directory with npm, :func:`axe_script`) inside the page and returns its violations of the
  impacts asked for (serious and critical by default);
- :func:`viewport` sets the browser's viewport exactly (Chromium's device metrics), phone
  widths included;
- :func:`check_page` does what every page test wants at both sizes: a screenshot kept as an
  artifact, no horizontal overflow, and no serious or critical axe violation.

The cache directory is ``$AGENTLOG_TEST_CACHE`` (else ``~/.cache/agentlog-tests``); the
screenshots go where the caller says and are copied to ``$AGENTLOG_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable

AXE_VERSION = "4.14.1"
SIZES: tuple[tuple[int, int], ...] = ((1400, 1000), (390, 844))
"""Desktop and phone viewports every page is checked at."""


def cache_dir() -> Path:
    return Path(os.environ.get("AGENTLOG_TEST_CACHE") or Path.home() / ".cache" / "agentlog-tests")


@functools.cache
def axe_script() -> str:
    """The text of axe.min.js, ``npm install``-ed into the cache directory when missing."""
    prefix = cache_dir() / f"axe-core-{AXE_VERSION}"
    path = prefix / "node_modules" / "axe-core" / "axe.min.js"
    if not path.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise AssertionError("npm is needed to install axe-core for the accessibility checks")
        prefix.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
                            f"axe-core@{AXE_VERSION}"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and path.is_file(), f"npm install axe-core failed: {r.stderr[-2000:]}"
    return path.read_text(encoding="utf-8")


def axe_violations(driver: Any, impacts: Iterable[str] = ("serious", "critical")) -> list[dict[str, Any]]:
    """axe-core's violations on the page open in ``driver`` whose impact is one of ``impacts``:
    each as {id, impact, help, nodes: [the offending elements' HTML, first 5]}."""
    driver.execute_script(axe_script())
    driver.set_script_timeout(60)
    got = driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(function (r) { done(r.violations); })"
        ".catch(function (e) { done({error: String(e)}); });")
    assert isinstance(got, list), f"axe failed in the page: {got}"
    wanted = set(impacts)
    return [{"id": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [n.get("html", "")[:300] for n in v.get("nodes", [])[:5]]}
            for v in got if v.get("impact") in wanted]


def viewport(driver: Any, width: int, height: int) -> None:
    """The page's viewport exactly ``width`` × ``height`` CSS pixels (a phone's honours the meta viewport)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def overflow(driver: Any) -> int:
    """How many CSS pixels the page is wider than its viewport (0: no horizontal scrolling)."""
    return int(driver.execute_script(
        "return Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) - window.innerWidth;"))


def check_page(driver: Any, url: str, name: str, shots: Path, ready: str = "#main h1") -> list[str]:
    """Open ``url`` at each of :data:`SIZES`: a screenshot ``shots/<name>-<w>x<h>.png``, the
    horizontal overflow and axe's serious or critical violations. Returns what is wrong (empty: fine)."""
    from selenium.webdriver.common.by import By

    shots.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    for w, h in SIZES:
        viewport(driver, w, h)
        driver.get(url)
        driver.find_element(By.CSS_SELECTOR, ready)
        file = shots / f"{name}-{w}x{h}.png"
        driver.save_screenshot(str(file))
        wide = overflow(driver)
        if wide > 0:
            problems.append(f"{name} at {w}x{h}: {wide} px wider than the viewport")
        for v in axe_violations(driver):
            problems.append(f"{name} at {w}x{h}: axe {v['impact']} {v['id']} ({v['help']}): {v['nodes']}")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    target = os.environ.get("AGENTLOG_SCREENSHOTS")
    if target:
        os.makedirs(target, exist_ok=True)
        for p in shots.glob(f"{name}-*.png"):
            shutil.copy(p, os.path.join(target, p.name))
    return problems


__all__ = ["AXE_VERSION", "SIZES", "axe_script", "axe_violations", "cache_dir", "check_page", "overflow", "viewport"]
