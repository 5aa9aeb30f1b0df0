"""What the memory-check rows of ``agentlog bench memory`` build on: a repository's files and
its second commit, hook events of one agent session through the real capture path, and
durability relaxed while setting up (:mod:`.memory_truth_steps`, :mod:`.memory_truth_history`)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from contextlib import contextmanager
from typing import Any, Final, Iterator

LINES_PER_FILE: Final = 60


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, text=True,
                          timeout=120).stdout.strip()


def file_lines(f: int) -> list[str]:
    return [f"value_{f}_{i} = compute({f}, {i})" for i in range(LINES_PER_FILE)]


@contextmanager
def relaxed() -> Iterator[None]:
    """Durability relaxed meanwhile (the setup's writes, not what is measured)."""
    was = os.environ.get("AGENTLOG_DURABILITY")
    os.environ["AGENTLOG_DURABILITY"] = "relaxed"
    try:
        yield
    finally:
        if was is None:
            os.environ.pop("AGENTLOG_DURABILITY", None)
        else:
            os.environ["AGENTLOG_DURABILITY"] = was


class Agent:
    """Hook payloads of one Claude Code session through the real capture path."""

    def __init__(self, root: str, repo: str, sid: str) -> None:
        self.root, self.repo, self.sid = root, repo, sid
        self.t = time.time_ns() // 1000
        self.n = 0

    def _emit(self, payload: dict[str, Any]) -> None:
        from agentlog import api

        self.t += 1000
        data = json.dumps({"session_id": self.sid, "transcript_path": f"/tmp/{self.sid}.jsonl", "cwd": self.repo,
                           "permission_mode": "default", **payload}).encode()
        captured = api.capture_hook_payload("claude-code", data, len(data), [], environ={}, captured_at=self.t,
                                            cwd=self.repo)
        api.record_hook_event(captured, self.root, "relaxed")

    def calls(self, n: int) -> None:
        """``n`` events: tool calls (a start and an end each) — ``make test`` succeeding, edits of
        ``src/other.py`` succeeding, ``make lint`` failing — in turn."""
        for i in range(n // 2):
            self.n += 1
            cid = f"toolu_{self.sid}_{self.n:06d}"
            kind = i % 3
            if kind == 1:
                full = f"{self.repo}/src/other.py"
                inp: dict[str, Any] = {"file_path": full, "old_string": "a", "new_string": "b"}
                end: dict[str, Any] = {"hook_event_name": "PostToolUse", "tool_response": {
                    "filePath": full, "oldString": "a", "newString": "b", "originalFile": "a", "replaceAll": False,
                    "structuredPatch": [], "userModified": False}}
                name = "Edit"
            else:
                inp = {"command": "make test" if kind == 0 else "make lint", "description": "run"}
                end = {"hook_event_name": "PostToolUse", "tool_response": {
                    "stdout": "ok\n", "stderr": "", "interrupted": False, "isImage": False,
                    "noOutputExpected": False}} if kind == 0 else {
                    "hook_event_name": "PostToolUseFailure", "is_interrupt": False, "error": "Exit code 2"}
                name = "Bash"
            self._emit({"hook_event_name": "PreToolUse", "tool_name": name, "tool_input": inp, "tool_use_id": cid})
            self._emit({"tool_name": name, "tool_input": inp, "tool_use_id": cid, **end})


def second_commit(repo: str, files: int) -> None:
    """Lines inserted at the top of a third of the files (their citations move), a cited line
    edited in a tenth (changed), committed."""
    for f in range(files):
        lines = file_lines(f)
        if f % 3 == 0:
            lines = ["# moved down"] * 2 + lines
        if f % 10 == 1:
            lines[1] = "edited = True"
        with open(os.path.join(repo, f"m{f}.py"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
    git(repo, "commit", "-q", "-am", "second")
