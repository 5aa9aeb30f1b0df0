"""The reference scenario: two agent sessions in one repository, as real hook payloads.

A test-support module (not a test file). :func:`build_reference` creates a
small git work tree (plain files: ``.git/HEAD`` and a loose ref, which is all
the capture path reads), then pushes native Claude Code and Codex hook
payloads through the real capture pipeline (``hook.build`` + ``hook.record``)
with a synthetic clock, into session logs under a data root. It does not
ingest: callers run ``ingest``/``catch_up`` themselves.

Timeline (offsets from :data:`BASE_US`, 2026-11-02T10:00:00Z):

Claude Code session ``claude-ref-session``

====  =========================================================================
 0s   SessionStart
 5s   turn 1 prompt "Fix the parser crash on empty input"
10s   Read src/parser.rs (start) / 11s (end)
20s   Edit src/parser.rs (start) / 21s PostToolUseFailure: string_mismatch
30s   Stop
60s   turn 2 prompt "Try again, the old_string has tabs"
65s   Edit src/parser.rs (start) / 66s (end, success)
70s   Bash ``cargo test`` (start) / 80s (end, success)
90s   Stop
120s  turn 3 prompt "Update the README"
125s  Edit README.md (start) / 126s (end, success)
130s  Stop
150s  turn 4 prompt "Commit it"
155s  Bash ``git commit -am "Fix parser"`` (start, head = sha_before)
      -- the branch ref moves to sha_after --
157s  Bash end (success, head = sha_after)
160s  Stop
170s  SessionEnd
====  =========================================================================

Codex session ``codex-ref-session`` (same work tree), three minutes later

====  =========================================================================
350s  SessionStart
355s  turn 1 prompt "Add a test for the empty-input case"
360s  apply_patch updating src/parser.rs (start) / 361s (end, success)
370s  PermissionRequest for Bash ``cargo test`` -- left pending, nothing after
====  =========================================================================
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from agentlog.capture import hook

BASE_US = int(datetime(2026, 11, 2, 10, 0, 0, tzinfo=timezone.utc).timestamp()) * 1_000_000
"""The synthetic clock's origin: 2026-11-02T10:00:00Z in µs since the epoch."""

SECOND = 1_000_000

CLAUDE_SESSION = "claude-ref-session"
CODEX_SESSION = "codex-ref-session"
CODEX_TURN = "codex-ref-turn-1"
REPO_NAME = "parser-project"
CLAUDE_MODEL = "claude-sonnet-4-5-20250929"
CODEX_MODEL = "gpt-5-codex"

SHA_BEFORE = hashlib.sha1(b"agentlog reference scenario: before").hexdigest()
SHA_AFTER = hashlib.sha1(b"agentlog reference scenario: after").hexdigest()

PARSER_RS = """\
pub fn parse(input: &str) -> Result<Vec<Token>, ParseError> {
\tlet first = input.chars().next().unwrap();
\ttokenize(first, input)
}
"""
PARSER_OLD = "\tlet first = input.chars().next().unwrap();"
PARSER_NEW = "\tlet Some(first) = input.chars().next() else {\n\t\treturn Ok(Vec::new());\n\t};"
README_MD = "# parser-project\n\nA small tokenizer.\n"
README_OLD = "A small tokenizer.\n"
README_NEW = "A small tokenizer. Empty input parses to no tokens.\n"

CODEX_PATCH = (
    "*** Begin Patch\n"
    "*** Update File: src/parser.rs\n"
    "@@ mod tests {\n"
    "+    #[test]\n"
    "+    fn empty_input_gives_no_tokens() {\n"
    "+        assert_eq!(parse(\"\").unwrap(), vec![]);\n"
    "+    }\n"
    "*** End Patch\n"
)


@dataclass
class Scenario:
    root: str
    """The data root the logs were written under."""
    repo: str
    """The git work tree (every payload's ``cwd``)."""
    events: dict[str, str] = field(default_factory=dict)
    """Role name -> event_id, for every event written."""
    times: dict[str, int] = field(default_factory=dict)
    """Role name -> captured_at (µs since the epoch)."""
    claude_session: str = CLAUDE_SESSION
    codex_session: str = CODEX_SESSION
    sha_before: str = SHA_BEFORE
    sha_after: str = SHA_AFTER
    captured: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Role name -> the wire event as ``build`` produced it (before ingest)."""

    @property
    def roles(self) -> list[str]:
        """Every role, in the order the events were written."""
        return list(self.events)

    def session_roles(self, prefix: str) -> list[str]:
        """The roles of one session (``"claude."`` or ``"codex."``), in order."""
        return [r for r in self.events if r.startswith(prefix)]


class ScenarioError(AssertionError):
    """A payload did not normalise cleanly (an adapter problem, not a test failure elsewhere)."""


def build_event(agent: str, payload: dict[str, Any], at_us: int, cwd: str | None) -> hook.Captured:
    """One payload through ``hook.build``, exactly as the hook would see it on stdin."""
    data = json.dumps(payload).encode("utf-8")
    captured = hook.build(agent, data, len(data), [], environ={}, captured_at=at_us, cwd=cwd)
    if captured.problem is not None:
        raise ScenarioError(f"{agent} {payload.get('hook_event_name')}: {captured.problem}")
    if captured.event["kind"] == "unknown":
        raise ScenarioError(f"{agent} {payload.get('hook_event_name')}: normalised to kind unknown")
    return captured


def write(root: str, agent: str, payload: dict[str, Any], at_us: int, cwd: str | None, *,
          durability: str = "relaxed") -> str:
    """Push one native payload through ``build`` + ``record`` under ``root``; return its event_id."""
    captured = build_event(agent, payload, at_us, cwd)
    hook.record(captured, root, durability)
    return str(captured.event["event_id"])


def make_repo(workdir: str, sha: str = SHA_BEFORE) -> str:
    """A git work tree on ``main`` at ``sha`` (files only: what the capture path reads)."""
    repo = os.path.join(os.path.abspath(workdir), REPO_NAME)
    os.makedirs(os.path.join(repo, ".git", "refs", "heads"), exist_ok=True)
    os.makedirs(os.path.join(repo, "src"), exist_ok=True)
    with open(os.path.join(repo, ".git", "HEAD"), "w") as f:
        f.write("ref: refs/heads/main\n")
    set_head(repo, sha)
    with open(os.path.join(repo, "src", "parser.rs"), "w") as f:
        f.write(PARSER_RS)
    with open(os.path.join(repo, "README.md"), "w") as f:
        f.write(README_MD)
    return repo


def set_head(repo: str, sha: str) -> None:
    """Move ``main`` to ``sha`` (what a commit does to the loose ref)."""
    path = os.path.join(repo, ".git", "refs", "heads", "main")
    tmp = path + ".lock"
    with open(tmp, "w") as f:
        f.write(sha + "\n")
    os.replace(tmp, path)


class _Session:
    """Writes one agent session's payloads and records roles and times."""

    def __init__(self, sc: Scenario, agent: str, prefix: str, base: dict[str, Any]) -> None:
        self.sc = sc
        self.agent = agent
        self.prefix = prefix
        self.base = base

    def emit(self, role: str, offset_s: float, payload: dict[str, Any]) -> str:
        name = self.prefix + role
        if name in self.sc.events:
            raise ScenarioError(f"duplicate role {name}")
        at = BASE_US + int(offset_s * SECOND)
        captured = build_event(self.agent, {**self.base, **payload}, at, self.sc.repo)
        hook.record(captured, self.sc.root, "relaxed")
        event_id = str(captured.event["event_id"])
        self.sc.events[name] = event_id
        self.sc.times[name] = at
        self.sc.captured[name] = captured.event
        return event_id


def _claude(sc: Scenario) -> None:
    repo = sc.repo
    parser = os.path.join(repo, "src", "parser.rs")
    readme = os.path.join(repo, "README.md")
    slug = repo.replace("/", "-")
    s = _Session(
        sc,
        "claude-code",
        "claude.",
        {
            "session_id": sc.claude_session,
            "transcript_path": f"/home/dev/.claude/projects/{slug}/{sc.claude_session}.jsonl",
            "cwd": repo,
        },
    )
    mode = {"permission_mode": "default"}

    def stop(role: str, t: float, message: str) -> None:
        s.emit(role, t, {**mode, "hook_event_name": "Stop", "stop_hook_active": False,
                         "last_assistant_message": message})

    def prompt(role: str, t: float, text: str) -> None:
        s.emit(role, t, {**mode, "hook_event_name": "UserPromptSubmit", "prompt": text})

    def tool(role: str, t: float, name: str, call_id: str, tool_input: dict[str, Any], **extra: Any) -> None:
        s.emit(role, t, {**mode, "hook_event_name": extra.pop("event", "PreToolUse"), "tool_name": name,
                         "tool_input": tool_input, "tool_use_id": call_id, **extra})

    def bash_ok(stdout: str) -> dict[str, Any]:
        return {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False, "noOutputExpected": False}

    def edit_ok(path: str, old: str, new: str, original: str) -> dict[str, Any]:
        return {"filePath": path, "oldString": old, "newString": new, "originalFile": original,
                "replaceAll": False, "structuredPatch": [], "userModified": False}

    s.emit("start", 0, {"hook_event_name": "SessionStart", "source": "startup", "model": CLAUDE_MODEL})

    # Turn 1: a read, then an edit whose old_string does not match.
    prompt("prompt1", 5, "Fix the parser crash on empty input")
    read_input = {"file_path": parser}
    tool("read1.start", 10, "Read", "toolu_ref_read1", read_input)
    tool("read1.end", 11, "Read", "toolu_ref_read1", read_input, event="PostToolUse", tool_response={
        "type": "text",
        "file": {"filePath": parser, "content": PARSER_RS, "numLines": 4, "startLine": 1, "totalLines": 4},
    })
    bad_old = PARSER_OLD.replace("\t", "    ")  # spaces where the file has a tab
    edit1 = {"file_path": parser, "old_string": bad_old, "new_string": PARSER_NEW.replace("\t", "    ")}
    tool("edit1.start", 20, "Edit", "toolu_ref_edit1", edit1)
    tool("edit1.fail", 21, "Edit", "toolu_ref_edit1", edit1, event="PostToolUseFailure",
         error=f"String to replace not found in file.\nString: {bad_old}", is_interrupt=False)
    stop("stop1", 30, "The edit failed: the text to replace was not found in src/parser.rs.")

    # Turn 2: the edit with tabs succeeds, then cargo test passes.
    prompt("prompt2", 60, "Try again, the old_string has tabs")
    edit2 = {"file_path": parser, "old_string": PARSER_OLD, "new_string": PARSER_NEW}
    tool("edit2.start", 65, "Edit", "toolu_ref_edit2", edit2)
    tool("edit2.end", 66, "Edit", "toolu_ref_edit2", edit2, event="PostToolUse",
         tool_response=edit_ok(parser, PARSER_OLD, PARSER_NEW, PARSER_RS))
    test_input = {"command": "cargo test", "description": "Run the test suite"}
    tool("test1.start", 70, "Bash", "toolu_ref_test1", test_input)
    tool("test1.end", 80, "Bash", "toolu_ref_test1", test_input, event="PostToolUse",
         tool_response=bash_ok("running 12 tests\ntest result: ok. 12 passed; 0 failed; 0 ignored\n"))
    stop("stop2", 90, "Fixed: empty input now returns no tokens, and cargo test passes.")

    # Turn 3: documentation only.
    prompt("prompt3", 120, "Update the README")
    readme_input = {"file_path": readme, "old_string": README_OLD, "new_string": README_NEW}
    tool("readme.start", 125, "Edit", "toolu_ref_readme1", readme_input)
    tool("readme.end", 126, "Edit", "toolu_ref_readme1", readme_input, event="PostToolUse",
         tool_response=edit_ok(readme, README_OLD, README_NEW, README_MD))
    stop("stop3", 130, "README updated.")

    # Turn 4: the commit moves the branch between the call's start and end.
    prompt("prompt4", 150, "Commit it")
    commit_input = {"command": 'git commit -am "Fix parser"', "description": "Commit the parser fix"}
    tool("commit.start", 155, "Bash", "toolu_ref_commit1", commit_input)
    set_head(repo, sc.sha_after)
    tool("commit.end", 157, "Bash", "toolu_ref_commit1", commit_input, event="PostToolUse",
         tool_response=bash_ok(f"[main {sc.sha_after[:7]}] Fix parser\n 2 files changed, 4 insertions(+), 2 deletions(-)\n"))
    stop("stop4", 160, f"Committed as {sc.sha_after[:7]}.")
    s.emit("end", 170, {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"})


def _codex(sc: Scenario) -> None:
    s = _Session(
        sc,
        "codex",
        "codex.",
        {
            "session_id": sc.codex_session,
            "transcript_path": f"/home/dev/.codex/sessions/2026/11/02/rollout-2026-11-02T10-05-50-{sc.codex_session}.jsonl",
            "cwd": sc.repo,
            "model": CODEX_MODEL,
            "permission_mode": "default",
        },
    )
    turn = {"turn_id": CODEX_TURN}
    s.emit("start", 350, {"hook_event_name": "SessionStart", "source": "startup"})
    s.emit("prompt1", 355, {**turn, "hook_event_name": "UserPromptSubmit", "prompt": "Add a test for the empty-input case"})
    patch_input = {"command": CODEX_PATCH}
    s.emit("patch1.start", 360, {**turn, "hook_event_name": "PreToolUse", "tool_name": "apply_patch",
                                 "tool_use_id": "call_ref_patch1", "tool_input": patch_input})
    s.emit("patch1.end", 361, {**turn, "hook_event_name": "PostToolUse", "tool_name": "apply_patch",
                               "tool_use_id": "call_ref_patch1", "tool_input": patch_input,
                               "tool_response": "Success. Updated the following files:\nM src/parser.rs\n"})
    # Codex sends no tool_use_id with a permission request; nothing follows it.
    s.emit("permission1", 370, {**turn, "hook_event_name": "PermissionRequest", "tool_name": "Bash",
                                "tool_input": {"command": "cargo test"}})


def build_reference(root: str, workdir: str) -> Scenario:
    """Create the work tree under ``workdir`` and write the reference scenario's logs under ``root``."""
    repo = make_repo(workdir, SHA_BEFORE)
    sc = Scenario(root=os.path.abspath(root), repo=repo)
    _claude(sc)
    _codex(sc)
    return sc


CLAUDE_ROLES: tuple[str, ...] = (
    "claude.start",
    "claude.prompt1", "claude.read1.start", "claude.read1.end", "claude.edit1.start", "claude.edit1.fail", "claude.stop1",
    "claude.prompt2", "claude.edit2.start", "claude.edit2.end", "claude.test1.start", "claude.test1.end", "claude.stop2",
    "claude.prompt3", "claude.readme.start", "claude.readme.end", "claude.stop3",
    "claude.prompt4", "claude.commit.start", "claude.commit.end", "claude.stop4",
    "claude.end",
)
CODEX_ROLES: tuple[str, ...] = (
    "codex.start", "codex.prompt1", "codex.patch1.start", "codex.patch1.end", "codex.permission1",
)
ROLES: tuple[str, ...] = CLAUDE_ROLES + CODEX_ROLES
"""Every role :func:`build_reference` writes, in order."""


@contextmanager
def reference_engine(base: Path) -> Iterator[tuple[Scenario, Any]]:
    """The reference scenario recorded under ``base`` and an engine over it (closed after)."""
    from agentlog.operations.refresh import open_current

    root = str(base / "home")
    os.makedirs(root)
    sc = build_reference(root, str(base / "work"))
    engine, _ = open_current(root)
    try:
        yield sc, engine
    finally:
        engine.close()


def _ids() -> tuple[str, str, str, str, str]:
    from agentlog.projection.ids import derive

    claude = derive("session", "claude_code", CLAUDE_SESSION)
    codex = derive("session", "codex", CODEX_SESSION)
    return (claude, codex, derive("attempt", claude, "1", "0"), derive("attempt", claude, "2", "0"),
            derive("attempt", codex, "1", "0"))


CLAUDE, CODEX, FAILED_EDIT, RETRY, CODEX_ATTEMPT = _ids()
"""The reference sessions' ids; the failing edit (turn 1), the edit that worked and ``cargo test``
(turn 2), the Codex session's attempt."""
