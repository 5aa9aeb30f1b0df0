"""Which files an import reads: each agent's transcript locations and parser.

With no path, each agent's default locations are searched (honouring
``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME`` and ``CURSOR_HOME``
the way the agents do); a path may be a file or a directory (searched for the
agent's transcript files). Files are taken oldest first, so that a session's
earlier files are merged before its later ones.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterable

from agentlog.importers.base import Parser


@dataclass(frozen=True)
class Agent:
    """One agent whose transcripts can be imported."""

    name: str
    """As the CLI names it (``claude-code``)."""
    provider: str
    parser: str
    """``module:Class`` under ``agentlog.importers``."""
    suffixes: tuple[str, ...]

    def parser_class(self) -> Callable[..., Parser]:
        module, cls = self.parser.split(":")
        return getattr(importlib.import_module(f".{module}", __package__), cls)  # type: ignore[no-any-return]

    def default_roots(self, env: dict[str, str] | None = None) -> list[str]:
        env = dict(os.environ) if env is None else env
        home = env.get("HOME") or os.path.expanduser("~")
        if self.name == "claude-code":
            base = env.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
            return [os.path.join(base, "projects")]
        if self.name == "codex":
            base = env.get("CODEX_HOME") or os.path.join(home, ".codex")
            return [os.path.join(base, "sessions"), os.path.join(base, "archived_sessions")]
        if self.name == "gemini-cli":
            base = env.get("GEMINI_CLI_HOME") or home
            return [os.path.join(base, ".gemini", "tmp")]
        if self.name == "nd7":
            state = env.get("XDG_STATE_HOME") or os.path.join(home, ".local", "state")
            return [os.path.join(state, "nd7", "sessions")]
        if self.name == "attemptdb":
            return []  # its history is a file the user exports (`attempt events --json`)
        base = env.get("CURSOR_HOME") or os.path.join(home, ".cursor")
        return [os.path.join(base, "projects")]

    def wants(self, path: str) -> bool:
        """Whether a file found under a directory is one of this agent's transcripts."""
        name = os.path.basename(path)
        if not name.endswith(self.suffixes):
            return False
        parts = path.replace(os.sep, "/")
        if self.name == "codex":
            return name.startswith("rollout-") or "/archived_sessions/" in parts
        if self.name == "gemini-cli":
            return "/chats/" in parts
        if self.name == "cursor":
            return "/agent-transcripts/" in parts
        if self.name == "nd7":
            return name == "events.ndjson"
        return True


AGENTS: Final = {
    "claude-code": Agent("claude-code", "claude_code", "claude_code:ClaudeCodeParser", (".jsonl",)),
    "codex": Agent("codex", "codex", "codex:CodexParser", (".jsonl",)),
    "gemini-cli": Agent("gemini-cli", "gemini_cli", "gemini_cli:GeminiCliParser", (".jsonl", ".json")),
    "cursor": Agent("cursor", "cursor", "cursor:CursorParser", (".jsonl",)),
    "attemptdb": Agent("attemptdb", "attemptdb", "anchors:AttemptdbParser", (".jsonl", ".json", ".ndjson")),
    "nd7": Agent("nd7", "nd7", "anchors:Nd7Parser", (".ndjson",)),
}
#: the agents `agentlog import` reads when none is named (the anchors' histories only when named)
DEFAULT_AGENTS: Final = ("claude-code", "codex", "gemini-cli", "cursor")


#: files in an agent's directories that are not transcripts (a prompt index, a log)
NOT_TRANSCRIPTS: Final = frozenset({"history.jsonl", "logs.json", "meta.json", "settings.json"})


def find_files(agent: Agent, paths: Iterable[str], since_s: float | None = None, *,
               as_given: bool = False) -> list[str]:
    """The agent's transcript files under ``paths`` (files taken as given),
    modified at or after ``since_s`` (epoch seconds), oldest first. Under the
    agent's own locations only the files laid out as the agent keeps its
    transcripts are taken; under directories a person names (``as_given``),
    every file with the agent's suffix but the few known not to be transcripts.
    Symbolic links met while walking a directory are skipped (a file named
    itself is read)."""
    found: dict[str, float] = {}
    for p in paths:
        if os.path.isfile(p):
            try:
                found[p] = os.stat(p).st_mtime
            except OSError:
                continue
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames.sort()
            for name in filenames:
                full = os.path.join(dirpath, name)
                if os.path.islink(full):  # a planted link (x.jsonl -> ~/.ssh/id_ed25519) is never read
                    continue
                if agent.wants(full) or (as_given and name.endswith(agent.suffixes) and name not in NOT_TRANSCRIPTS
                                         and not name.endswith(".meta.json")):
                    try:
                        found[full] = os.stat(full).st_mtime
                    except OSError:
                        continue
    return sorted((f for f, m in found.items() if since_s is None or m >= since_s), key=lambda f: (found[f], f))


def session_hint(path: str) -> str:
    """The session id a file's name gives (its stem; ``agent-<id>`` files give the id)."""
    stem = os.path.basename(path)
    for suffix in (".jsonl", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    return stem


def make_parser(agent: Agent, path: str) -> Any:
    return agent.parser_class()(path, session_hint(path))
