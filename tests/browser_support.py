"""A dashboard server over a given data root, for browser tests (``agentlog serve --port 0`` in a
child process), and the sign-in through its one-time address."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Iterator


@contextlib.contextmanager
def serve(root: str) -> Iterator[str]:
    """The server's one-time sign-in address, while it runs over ``root``; stopped after."""
    proc = subprocess.Popen([sys.executable, "-m", "agentlog", "serve", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "AGENTLOG_HOME": root})
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "?token=" in url, url
        base = url.split("/?", 1)[0]
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(base + "/static/app.css", timeout=1)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


__all__ = ["serve"]
