#!/usr/bin/env python3
"""Write ``src/agentlog/operations/demo_data/claude-code-sessions.jsonl``: four sessions
of Claude Code 2.1 hook payloads for ``agentlog demo`` where the shared fixtures are absent.

The payloads have the fields and shapes of real Claude Code 2.1 hook stdin (as
captured in the shared fixtures: ``permission_mode``, ``tool_use_id``,
``tool_response`` per tool, ``PostToolUseFailure``'s ``error``/``is_interrupt``,
``SubagentStart``/``SubagentStop`` with ``agent_id``/``agent_type``/
``agent_transcript_path``, ``notification_type``, ``PreCompact``'s
``trigger``); the projects, prompts, files and outputs are made up here. Two
made-up projects: a Python CLI (``tidewater``) and a Node web app
(``harbor-web``). Deterministic: running it again writes the same bytes.

    python scripts/make_demo_sessions.py          # rewrite the packaged file
    python scripts/make_demo_sessions.py --check  # exit 1 when the packaged file differs
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "src" / "agentlog" / "operations" / "demo_data" / "claude-code-sessions.jsonl"
MODEL = "claude-sonnet-4-5-20250929"
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class Session:
    """Builds one session's payloads in order."""

    def __init__(self, session_id: str, project: str) -> None:
        self.sid = session_id
        self.cwd = f"/home/dev/src/{project}"
        self.transcript = f"/home/dev/.claude/projects/-home-dev-src-{project}/{session_id}.jsonl"
        self.mode = "default"
        self.out: list[dict[str, Any]] = []
        self._n = 0

    def _base(self, event: str, *, mode: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {"session_id": self.sid, "transcript_path": self.transcript, "cwd": self.cwd}
        if mode:
            d["permission_mode"] = self.mode
        d["hook_event_name"] = event
        return d

    def _tool_use_id(self) -> str:
        self._n += 1
        digest = hashlib.sha256(f"{self.sid}/{self._n}".encode()).digest()
        return "toolu_01" + "".join(_B62[b % 62] for b in digest[:22])

    def path(self, rel: str) -> str:
        return f"{self.cwd}/{rel}"

    def start(self, source: str = "startup") -> None:
        d = self._base("SessionStart", mode=False)
        d.update(source=source, model=MODEL)
        self.out.append(d)

    def prompt(self, text: str) -> None:
        self.out.append({**self._base("UserPromptSubmit"), "prompt": text})

    def tool(self, name: str, tool_input: dict[str, Any], response: dict[str, Any] | None = None, *,
             error: str | None = None, interrupt: bool = False) -> str:
        """PreToolUse, then PostToolUse with ``response`` or PostToolUseFailure with ``error``."""
        tid = self._tool_use_id()
        self.out.append({**self._base("PreToolUse"), "tool_name": name, "tool_input": tool_input, "tool_use_id": tid})
        if error is None:
            post = {**self._base("PostToolUse"), "tool_name": name, "tool_input": tool_input,
                    "tool_response": response or {}, "tool_use_id": tid}
        else:
            post = {**self._base("PostToolUseFailure"), "tool_name": name, "tool_input": tool_input,
                    "tool_use_id": tid, "error": error, "is_interrupt": interrupt}
        self.out.append(post)
        return tid

    def bash(self, command: str, description: str, stdout: str = "", *, error: str | None = None,
             interrupt: bool = False) -> None:
        response = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}
        self.tool("Bash", {"command": command, "description": description}, response, error=error, interrupt=interrupt)

    def read(self, rel: str, content: str) -> None:
        lines = content.count("\n")
        self.tool("Read", {"file_path": self.path(rel)}, {"type": "text", "file": {
            "filePath": self.path(rel), "content": content, "numLines": lines, "startLine": 1, "totalLines": lines}})

    def edit(self, rel: str, old: str, new: str, original: str = "", *, error: str | None = None) -> None:
        response = {"filePath": self.path(rel), "oldString": old, "newString": new, "originalFile": original,
                    "structuredPatch": [{"oldStart": 1, "oldLines": old.count("\n") + 1, "newStart": 1,
                                         "newLines": new.count("\n") + 1,
                                         "lines": [f"-{ln}" for ln in old.splitlines()] + [f"+{ln}" for ln in new.splitlines()]}],
                    "userModified": False, "replaceAll": False}
        self.tool("Edit", {"file_path": self.path(rel), "old_string": old, "new_string": new, "replace_all": False},
                  response, error=error)

    def write(self, rel: str, content: str) -> None:
        self.tool("Write", {"file_path": self.path(rel), "content": content},
                  {"type": "create", "filePath": self.path(rel), "content": content, "structuredPatch": [],
                   "originalFile": None})

    def grep(self, pattern: str, rel: str, content: str) -> None:
        self.tool("Grep", {"pattern": pattern, "path": self.path(rel), "output_mode": "content"},
                  {"mode": "content", "numFiles": 0, "filenames": [], "content": content,
                   "numLines": content.count("\n") + 1})

    def permission(self, command: str, description: str) -> None:
        self.out.append({**self._base("PermissionRequest"), "tool_name": "Bash",
                         "tool_input": {"command": command, "description": description},
                         "permission_suggestions": [{"type": "addRules", "rules": [
                             {"toolName": "Bash", "ruleContent": command.split()[0] + " " + command.split()[1] + ":*"}],
                             "behavior": "allow", "destination": "localSettings"}]})
        self.notify("Claude needs your permission to use Bash", "permission_prompt")

    def notify(self, message: str, kind: str) -> None:
        self.out.append({**self._base("Notification", mode=False), "message": message, "notification_type": kind})

    def subagent(self, agent_id: str, agent_type: str, description: str, prompt: str, answer: str,
                 inner: list[tuple[str, str, str]]) -> None:
        """A Task call whose subagent runs ``inner`` greps (pattern, path, content) and answers ``answer``."""
        tid = self._tool_use_id()
        task_input = {"description": description, "prompt": prompt, "subagent_type": agent_type}
        self.out.append({**self._base("PreToolUse"), "tool_name": "Task", "tool_input": task_input, "tool_use_id": tid})
        self.out.append({**self._base("SubagentStart", mode=False), "agent_id": agent_id, "agent_type": agent_type})
        for pattern, rel, content in inner:
            self.grep(pattern, rel, content)
        self.out.append({**self._base("SubagentStop"), "stop_hook_active": False, "agent_id": agent_id,
                         "agent_transcript_path": self.transcript[:-len(".jsonl")] + f"/subagents/agent-{agent_id}.jsonl",
                         "agent_type": agent_type})
        self.out.append({**self._base("PostToolUse"), "tool_name": "Task", "tool_input": task_input,
                         "tool_response": {"content": [{"type": "text", "text": answer}], "totalDurationMs": 18420,
                                           "totalTokens": 21877, "totalToolUseCount": len(inner),
                                           "usage": {"input_tokens": 6, "cache_creation_input_tokens": 4120,
                                                     "cache_read_input_tokens": 17338, "output_tokens": 413,
                                                     "service_tier": "standard"}},
                         "tool_use_id": tid})

    def compact(self) -> None:
        self.out.append({**self._base("PreCompact", mode=False), "trigger": "auto", "custom_instructions": None})
        self.start("compact")

    def stop(self, message: str) -> None:
        self.out.append({**self._base("Stop"), "stop_hook_active": False, "last_assistant_message": message})

    def end(self, reason: str = "prompt_input_exit") -> None:
        self.out.append({**self._base("SessionEnd", mode=False), "reason": reason})


UNITS_V1 = "FEET_PER_METRE = 3.28084\n\n\ndef to_metres(feet):\n    return feet / FEET_PER_METRE\n"
STATIONS = "from dataclasses import dataclass\n\n\n@dataclass\nclass Station:\n    code: str\n    name: str\n"
PYTEST_RED = ("Exit code 1\n============================= test session starts ==============================\n"
              "collected 12 items\n\ntests/test_cli.py ...F\ntests/test_units.py ........\n\n"
              "=================================== FAILURES ===================================\n"
              "FAILED tests/test_cli.py::test_forecast_metric - AssertionError: assert '1.19 m' in 'High tide 1.1887 m'\n"
              "========================= 1 failed, 11 passed in 0.41s =========================")
JEST_RED_1 = ("Exit code 1\nFAIL src/format.test.js\n  ● formatDay › prints the weekday in the user's locale\n\n"
              "    expect(received).toBe(expected)\n\n    Expected: \"Dienstag\"\n    Received: \"Tuesday\"\n\n"
              "  ● formatDay › falls back to English for an unknown locale\n\n"
              "    RangeError: locale must contain localize property\n\n"
              "Test Suites: 1 failed, 1 total\nTests:       2 failed, 4 passed, 6 total\n"
              "Snapshots:   0 total\nTime:        2.184 s\nRan all test suites matching /src\\/format.test.js/i.")
JEST_RED_2 = ("Exit code 1\nFAIL src/format.test.js\n  ● formatRange › joins two days with an en dash\n\n"
              "    TypeError: locale.formatDistance is not a function\n\n"
              "Test Suites: 1 failed, 1 total\nTests:       1 failed, 5 passed, 6 total\n"
              "Snapshots:   0 total\nTime:        2.031 s\nRan all test suites matching /src\\/format.test.js/i.")
JEST_GREEN = "PASS src/format.test.js\nPASS src/api.test.js\nPASS src/tides.test.js\nPASS src/app.test.js\n\n" \
             "Test Suites: 4 passed, 4 total\nTests:       21 passed, 21 total\nSnapshots:   0 total\nTime:        2.107 s"


def tidewater_metric() -> Session:
    s = Session("3b9e6f2a-8c41-4d7e-b5a0-91c2e4f7a163", "tidewater")
    s.start()
    s.prompt("Add a --metric flag to `tide forecast` that prints heights in metres instead of feet.")
    s.grep("def forecast", "src", "src/tidewater/cli.py:41:def forecast(station: str, days: int = 1) -> None:")
    s.read("src/tidewater/cli.py", "import click\n\nfrom tidewater.units import to_metres\n\n\n@click.command()\n"
           "def forecast(station: str, days: int = 1) -> None:\n    ...\n")
    s.edit("src/tidewater/cli.py", "def forecast(station: str, days: int = 1) -> None:",
           "@click.option(\"--metric\", is_flag=True, help=\"heights in metres\")\n"
           "def forecast(station: str, days: int = 1, metric: bool = False) -> None:")
    s.bash("pytest -q", "Run the test suite", error="Exit code 127\n/bin/bash: line 1: pytest: command not found")
    s.bash("python -m pytest -q", "Run the test suite with the project's interpreter", error=PYTEST_RED)
    s.read("src/tidewater/units.py", UNITS_V1)
    s.edit("src/tidewater/units.py", "    return feet / FEET_PER_METRE", "    return round(feet / FEET_PER_METRE, 2)",
           error="String to replace not found in file.\nString:     return feet / FEET_PER_METRE")
    s.read("src/tidewater/units.py", UNITS_V1.replace("feet / FEET", "feet  / FEET"))
    s.edit("src/tidewater/units.py", "    return feet  / FEET_PER_METRE", "    return round(feet / FEET_PER_METRE, 2)",
           UNITS_V1)
    s.bash("python -m pytest -q", "Run the test suite", "............\n12 passed in 0.38s")
    s.permission("git commit -am 'forecast: --metric prints heights in metres'", "Commit the change")
    s.bash("git commit -am 'forecast: --metric prints heights in metres'", "Commit the change",
           "[main 5e1d0c2] forecast: --metric prints heights in metres\n 3 files changed, 14 insertions(+), 3 deletions(-)")
    s.stop("`tide forecast --metric` now prints heights in metres, rounded to centimetres; the 12 tests pass.")
    s.end()
    return s


def tidewater_py39() -> Session:
    s = Session("c4a1d857-2f06-4b93-8e1c-7d5a0b6e92f4", "tidewater")
    s.start()
    s.prompt("CI fails on Python 3.9 with a TypeError at import time. Find what breaks there and fix it.")
    s.subagent("a7c31e9", "Explore", "Find 3.10-only syntax",
               "List every use of syntax newer than Python 3.9 in src/ (X | Y unions in annotations evaluated at "
               "runtime, match statements, parenthesised context managers).",
               "Two runtime-evaluated `X | None` annotations: src/tidewater/stations.py:12 and :27. No match "
               "statements, no parenthesised context managers.",
               [("\\| None", "src", "src/tidewater/stations.py:12:def find(code: str) -> Station | None:\n"
                                    "src/tidewater/stations.py:27:    cache: dict[str, Station | None] = {}"),
                ("^\\s*match ", "src", "")])
    s.read("src/tidewater/stations.py", STATIONS)
    s.edit("src/tidewater/units.py", "def to_metres(feet):", "def to_metres(feet: float) -> float:",
           error="String to replace not found in file.\nString: def to_metres(feet):")
    s.edit("src/tidewater/stations.py", "from dataclasses import dataclass",
           "from __future__ import annotations\n\nfrom dataclasses import dataclass", STATIONS)
    s.bash("python -m pytest -q", "Run the test suite", "............\n12 passed in 0.36s")
    s.bash("uvx --python 3.9 --with-editable . python -c 'import tidewater'", "Import the package under Python 3.9")
    s.stop("`from __future__ import annotations` in stations.py keeps its `X | None` annotations unevaluated, "
           "so the package imports on 3.9 again.")
    s.end()
    return s


def harbor_dates() -> Session:
    s = Session("e81f3c06-95ab-4c2d-a7e4-0b6d18f5c239", "harbor-web")
    s.start()
    s.prompt("src/format.test.js is red since the date-fns upgrade. Make it green without pinning the old version.")
    s.bash("npm test -- src/format.test.js", "Run the failing test file", error=JEST_RED_1)
    s.read("src/format.js", "import { format } from 'date-fns';\nimport { de } from 'date-fns/locale';\n\n"
           "export const formatDay = (d, locale) => format(d, 'EEEE', { locale });\n")
    s.edit("src/format.js", "import { de } from 'date-fns/locale';", "import { de, enGB } from 'date-fns/locale';")
    s.bash("npm test -- src/format.test.js", "Run the test file again", error=JEST_RED_2)
    s.compact()
    s.grep("formatDistance", "src", "src/format.js:19:  return locale.formatDistance(a, b);")
    s.edit("src/format.js", "  return locale.formatDistance(a, b);", "  return formatDistance(a, b, { locale });")
    s.bash("npm test", "Run the whole test suite", JEST_GREEN)
    s.stop("The locale objects lost their methods in date-fns 4; format.js now calls formatDistance with "
           "`{ locale }`. All 21 tests pass.")
    s.notify("Claude is waiting for your input", "idle_prompt")
    s.end()
    return s


def harbor_changelog() -> Session:
    s = Session("19d7b4e2-6a3f-4f80-9c15-e2b8a07d4c61", "harbor-web")
    s.mode = "acceptEdits"
    s.start()
    s.prompt("Add a CHANGELOG entry for the date-fns fix, then start the dev server so I can check the calendar.")
    s.bash("git log --oneline -3", "Recent commits",
           "9f2c41a format: pass the locale to formatDistance\n0b7e3d5 deps: date-fns 4\n6a1c9e8 calendar: week view")
    s.write("CHANGELOG.md", "## Unreleased\n\n- Dates: weekday and range labels follow the user's locale again "
            "after the date-fns 4 upgrade.\n")
    s.bash("npm run dev", "Start the dev server",
           error="Interrupted by user\n> harbor-web@0.9.0 dev\n> vite\n\n  VITE v6.2.1  ready in 412 ms", interrupt=True)
    s.stop("CHANGELOG.md has the entry; the dev server was stopped before it finished starting.")
    s.end("clear")
    return s


def payload_lines() -> list[str]:
    lines: list[str] = []
    for build in (tidewater_metric, tidewater_py39, harbor_dates, harbor_changelog):
        lines += [json.dumps(p, ensure_ascii=False) for p in build().out]
    return lines


def main(argv: list[str]) -> int:
    text = "\n".join(payload_lines()) + "\n"
    if argv[1:] == ["--check"]:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT}: {'up to date' if same else 'differs; run scripts/make_demo_sessions.py'}")
        return 0 if same else 1
    if argv[1:]:
        print("usage: make_demo_sessions.py [--check]", file=sys.stderr)
        return 2
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {text.count(chr(10))} payloads")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
