"""The two hook paths of issue 29, for tests that run a hook as an agent does.

- ``python``: ``<python> -I -S <package>/_hook.py <agent>`` (what ``conftest.run_hook`` runs);
- ``native``: the C client ``agentlog-hook`` (built once per test session with
  ``build_client``) with a real ``CaptureServer`` serving the test's data root in this
  process, so the payload is recorded by the daemon's code, not by a fallback.

The ``hook_path`` fixture (tests/conftest.py) yields a :class:`HookPath` for each, so a test
written once runs through both: ``hook_path.run(stdin, agent, *args, env=…)`` returns the
``CompletedProcess``. On the native path a run must be answered by the server (the client
did not fall back) unless the test says ``served=False``.

One difference is by design: the Python hook prints its diagnostic line on stderr, while a
client the server answered prints nothing but the reply (the server writes the line to
``state/hook-errors.log``, as the Python hook also does). :meth:`HookPath.said` gives a
run's diagnostic lines on either path.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from agentlog.capture.server import CaptureServer
from agentlog.core.paths import diagnostics_log

from conftest import hook_argv

PATHS = ("python", "native")
ACK_MS = "30000"
"""The native client's bound on the server's answer in these tests: long, so that a loaded
machine makes no run fall back by accident (the tests that want a fallback say so)."""


class HookPath:
    """One way of running the hook against the data root ``root``."""

    def __init__(self, name: str, root: Path, binary: str | None = None, server: CaptureServer | None = None) -> None:
        self.name = name
        self.root = root
        self.binary = binary
        self.server = server
        self._log_at = 0  # size of the diagnostics log when the last run began

    def __repr__(self) -> str:
        return f"HookPath({self.name!r})"

    def argv(self, agent: str = "claude-code", *extra: str) -> list[str]:
        if self.binary is None:
            return hook_argv(agent, *extra)
        return [self.binary, agent, *extra]

    def run(self, stdin: bytes | None, agent: str = "claude-code", *extra: str, env: dict[str, str] | None = None,
            cwd: str | None = None, served: bool = True) -> subprocess.CompletedProcess[bytes]:
        """Run the hook as an agent does (``stdin`` None: /dev/null); on the native path, with
        ``served``, check that the capture server answered it."""
        full_env = {**os.environ, **(env or {})}
        if self.binary is not None:
            full_env.setdefault("AGENTLOG_HOOK_ACK_MS", ACK_MS)
        before = self._acknowledged()
        self._log_at = self._log_size()
        r = subprocess.run(self.argv(agent, *extra), input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                           capture_output=True, env=full_env, timeout=120, cwd=cwd)
        if self.server is not None:
            assert self.server.wait_idle(), "the capture server is still appending"
            if served:
                assert self._acknowledged() == before + 1, f"the native client fell back: {r.stderr!r}"
        return r

    def said(self, r: subprocess.CompletedProcess[bytes]) -> list[bytes]:
        """The diagnostic lines of the run ``r`` (the last one): its stderr on the Python path
        or after a fallback; for a run the server answered, whose stderr must be empty, the
        lines the server added to ``state/hook-errors.log``."""
        if r.stderr or self.server is None:
            return r.stderr.splitlines()
        path = diagnostics_log(str(self.root))
        try:
            with open(path, "rb") as f:
                f.seek(self._log_at)
                added = f.read()
        except FileNotFoundError:
            return []
        return [json.loads(line)["message"].encode() for line in added.splitlines()]

    def _acknowledged(self) -> int:
        return self.server.stats()["acknowledged"] if self.server is not None else 0

    def _log_size(self) -> int:
        try:
            return os.path.getsize(diagnostics_log(str(self.root)))
        except OSError:
            return 0
