"""Search recall on the Codex, Gemini CLI and Cursor fixtures: queries written from their content
(identifiers, error messages, file names, phrases) find the event they came from; a quoted
phrase's event ranks first."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentlog.operations.fixtures import missing, shared_dir
from agentlog.importers.run import import_paths
from agentlog.search import index
from agentlog.search.service import search
from agentlog.store.ingest import ingest
from agentlog.store.schema import read_events

FIXTURES = (shared_dir() or Path(__file__).resolve().parents[2] / "shared") / "fixtures"
AGENTS = ("codex", "gemini-cli", "cursor")
PROVIDER = {"codex": "codex", "gemini-cli": "gemini_cli", "cursor": "cursor"}
pytestmark = pytest.mark.skipif(not all((FIXTURES / a).is_dir() for a in AGENTS),
                                reason=missing(FIXTURES))

# (agent, query, what the source event's text holds, whether it is a phrase that must rank first)
HAND: list[tuple[str, str, str, bool]] = [
    ("cursor", '"reconcile divergent branches"', "reconcile divergent branches", True),
    ("cursor", "fatal: Need to specify how to reconcile divergent branches",
     "Need to specify how to reconcile divergent branches", False),  # an error message, as words
    ("cursor", '"forced update"', "forced update", True),
    ("cursor", "merge-base", "merge-base", False),  # identifiers of a command
    ("cursor", "rev-list", "rev-list", False),
    ("cursor", "SKILL.md", "SKILL.md", False),  # a file name
    ("cursor", "path:*SKILL.md", "SKILL.md", False),
    ("cursor", "terminals/1.txt", "terminals/1.txt", False),
    ("cursor", "f9d2f69", "f9d2f69", False),  # a commit
    ("cursor", '"git reset --hard origin/main"', "git reset --hard origin/main", True),
    ("gemini-cli", "run_shell_command", "run_shell_command", False),
    ("gemini-cli", "RunShellCommand", "run_shell_command", False),  # the same name, another spelling
    ("gemini-cli", "AgentSessions", "AgentSessions", False),
    ("gemini-cli", '"Say hello and list files"', "Say hello and list files", True),
    ("gemini-cli", '"List files in the current directory"', "List files in the current directory", True),
    ("codex", "REDACTED_PROMPT", "[REDACTED_PROMPT]", False),
    ("codex", "redacted assistant text", "[REDACTED_ASSISTANT_TEXT]", False),  # its publisher redacted the text
    ("codex", '"redacted prompt"', "[REDACTED_PROMPT]", True),
    ("codex", "RedactedAssistantText", "[REDACTED_ASSISTANT_TEXT]", False),
]


def _from_content(agent: str) -> list[tuple[str, str, str, bool]]:
    """Queries written from a fixture's own content: each user prompt's first words as a phrase,
    each tool call's longest identifier."""
    out: list[tuple[str, str, str, bool]] = []
    for path in sorted((FIXTURES / agent).glob("*.jsonl")):
        for line in path.read_text().splitlines():
            d = json.loads(line)
            if agent == "cursor" and d.get("role") == "user":
                text = d["message"]["content"][0]["text"]
                m = re.search(r"<user_query>\s*(.*?)\s*</user_query>", text, re.S)
                words = m.group(1).split()[:4] if m else []
                if len(words) >= 3 and all(re.fullmatch(r"[A-Za-z,']+", w) for w in words):
                    out.append((agent, '"' + " ".join(words) + '"', " ".join(words), True))
            if agent == "gemini-cli":
                for call in d.get("toolCalls") or []:
                    cmd = call["args"]["command"]  # quoted: ``ls -F`` unquoted excludes ``F``
                    out.append((agent, f'"{cmd}"', cmd, False))
            for block in ((d.get("message") or {}).get("content") or []) if isinstance(d.get("message"), dict) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    cmd = " ".join(v for v in (block.get("input") or {}).values() if isinstance(v, str))
                    names = sorted(re.findall(r"[A-Za-z][A-Za-z0-9_\-]{5,}", cmd), key=len, reverse=True)
                    if names:
                        out.append((agent, names[0], names[0], False))
    return list(dict.fromkeys(out))


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, tuple[str, str]]]:
    """The three fixtures imported, stored and indexed; every event's provider and text (its
    ``text`` and its whole JSON)."""
    root = str(tmp_path_factory.mktemp("providers") / "home")
    for agent in AGENTS:
        report = import_paths(root, [agent], [str(FIXTURES / agent)])
        assert report.files and all(f.events for f in report.files), agent
    ingest(root)
    index.catch_up(root)
    assert index.check(root)["ok"]
    t = read_events(root, columns=["event_id", "provider", "text", "event"])
    events = {e: (p, f"{x or ''}\n{j or ''}") for e, p, x, j in
              zip(*(t.column(c).to_pylist() for c in ("event_id", "provider", "text", "event")))}
    return root, events


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).lower()


@pytest.mark.parametrize("agent", AGENTS)
def test_queries_from_each_agent_s_content_find_their_source_event(
        imported: tuple[str, dict[str, tuple[str, str]]], agent: str) -> None:
    root, events = imported
    queries = [q for q in HAND + _from_content(agent) if q[0] == agent]
    assert len(queries) >= 3
    misses = []
    for _, query, needle, phrase in queries:
        hits = search(root, query, limit=20).hits

        def source(h: object) -> bool:
            provider, text = events[h.event_id]  # type: ignore[attr-defined]
            return provider == PROVIDER[agent] and _norm(needle) in _norm(text.replace("\\n", " "))

        if not any(source(h) for h in hits):
            misses.append((query, "not found"))
        elif phrase and not source(hits[0]):
            misses.append((query, f"ranked below {hits[0].snippet[:60]!r}"))
    assert not misses, misses


def test_a_phrase_out_of_order_is_not_an_exact_phrase_hit(imported: tuple[str, dict[str, tuple[str, str]]]) -> None:
    root, _ = imported
    assert not search(root, '"branches divergent reconcile"').hits
    assert search(root, "branches divergent reconcile").hits  # the words, in any order


def test_provider_filter_keeps_each_agent_apart(imported: tuple[str, dict[str, tuple[str, str]]]) -> None:
    root, events = imported
    for agent in AGENTS:
        hits = search(root, f"provider:{agent}", limit=100).hits
        assert hits and {events[h.event_id][0] for h in hits} == {PROVIDER[agent]}
