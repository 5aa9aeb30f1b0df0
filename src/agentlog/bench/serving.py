"""A dashboard to time: ``agentlog serve`` started as a child process, a signed-in
HTTP client for it, and every route timed over loopback.

Shared by the ``web`` step (every page and API route) and the ``memory`` step
(the memory pages at engram's scale).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any, Final

from agentlog.bench.common import describe

RUNS: Final = 7
"""Timed requests per route, after one untimed one."""


def serve(root: str, live: bool) -> tuple[subprocess.Popen[str], str]:
    """``agentlog serve`` over ``root`` on a free port (``--no-live`` unless ``live``):
    the process and the sign-in address it printed."""
    argv = [sys.executable, "-m", "agentlog", "serve", "--port", "0"] + ([] if live else ["--no-live"])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "AGENTLOG_HOME": root})
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise RuntimeError("agentlog serve did not print its address")
    return proc, url


def client(url: str) -> Any:
    """An ``httpx.Client`` signed in with the one-time address ``url`` (waits for the server)."""
    import httpx

    base = url.split("/?", 1)[0]
    c = httpx.Client(base_url=base, timeout=300)
    for _ in range(100):
        try:
            r = c.get(url[len(base):], follow_redirects=False)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        raise RuntimeError("the server did not answer")
    c.cookies.set("agentlog_session", r.cookies["agentlog_session"])
    return c


def stop(proc: subprocess.Popen[str]) -> None:
    """Stop a server started by :func:`serve` (terminate, then kill after 20 s)."""
    proc.terminate()
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def time_routes(client: Any, routes: list[str]) -> dict[str, dict[str, float]]:
    """Each route: one untimed request (``first``, its milliseconds), then :data:`RUNS` timed;
    a status other than 200 raises."""
    out = {}
    for path in routes:
        t = time.perf_counter()
        client.get(path)  # the first: computed (nothing remembered yet for this store)
        first = (time.perf_counter() - t) * 1000
        runs = []
        for _ in range(RUNS):
            t = time.perf_counter()
            r = client.get(path)
            runs.append((time.perf_counter() - t) * 1000)
            if r.status_code != 200:
                raise RuntimeError(f"{path}: HTTP {r.status_code}")
        out[path] = {**describe(runs), "first": first}
    return out


__all__ = ["RUNS", "client", "serve", "stop", "time_routes"]
