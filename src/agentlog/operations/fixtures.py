"""Locating the shared real-agent fixtures (tests, demo, benchmarks).

They live in ``shared/fixtures`` beside the repository clone; ``AGENTLOG_SHARED``
overrides (and is then the only place looked at). A local clone of that checkout (``git clone . /tmp/x``, as a CI
dry run does) finds them beside the checkout it was cloned from. Returns None
when they are not there (an installed package). ``scripts/fetch_fixtures.py``
fetches them from their public sources (``tests/fixtures-manifest.json``: each
file's repository, commit and SHA-256) into ``shared/`` beside the checkout.
"""

from __future__ import annotations

import os
from pathlib import Path


FETCH_HINT = "fetch them with `python scripts/fetch_fixtures.py`, or set AGENTLOG_SHARED to a directory holding fixtures/"
"""How to get the shared fixtures, for a message that says they are missing."""


def missing(where: Path | str | None = None) -> str:
    """A skip or failure reason: the shared fixtures (at ``where``) are not there, and how to get them."""
    at = f" at {where}" if where else ""
    return f"shared fixtures not found{at}: {FETCH_HINT}"


def shared_dir() -> Path | None:
    """The shared directory (holding ``fixtures/``), or None. When ``AGENTLOG_SHARED`` is set it is the
    only place looked at: pointing it at an empty directory is how to run as a clone without them."""
    env = os.environ.get("AGENTLOG_SHARED")
    if env:
        return Path(env) if (Path(env) / "fixtures").is_dir() else None
    here = Path(__file__).resolve()
    candidates = [p / "shared" for p in here.parents]
    candidates += [p / "shared" for p in Path.cwd().resolve().parents] + [Path.cwd() / "shared"]
    candidates += [p / "shared" for p in _local_origins(here)]
    for c in candidates:
        if (c / "fixtures").is_dir():
            return c
    return None


def _local_origins(here: Path) -> list[Path]:
    """Parents of the checkout this clone was made from, when its ``origin`` is a local directory."""
    for repo in here.parents:
        config = repo / ".git" / "config"
        if config.is_file():
            break
    else:
        return []
    origin = None
    section = ""
    for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == '[remote "origin"]' and line.startswith("url") and "=" in line:
            origin = line.split("=", 1)[1].strip()
    if not origin or "://" in origin or ":" in origin.split("/", 1)[0]:
        return []  # not a local path (https://…, git@host:…)
    path = Path(origin)
    if not path.is_absolute():
        path = (repo / path)
    return list(path.resolve().parents) if path.is_dir() else []


def claude_hook_fixtures() -> list[Path]:
    """The Claude Code hook payload files (each a JSON array), sorted; [] when absent."""
    base = shared_dir()
    if base is None:
        return []
    return sorted((base / "fixtures" / "claude-code-hooks").glob("*.json"))


def payload_stdin(element: object) -> bytes:
    """The exact stdin bytes of one fixture element.

    The guardrails logger wrapped PostToolUseFailure payloads as
    with their own fields plus ``raw_input``, the original stdin, which is
    what is replayed. Every other element *is* the payload (re-serialised
    by its logger).
    """
    import json

    if isinstance(element, dict) and isinstance(element.get("raw_input"), str):
        try:
            inner = json.loads(element["raw_input"])
        except ValueError:
            inner = None
        if isinstance(inner, dict) and "hook_event_name" in inner:
            return str(element["raw_input"]).encode("utf-8")
    return json.dumps(element, ensure_ascii=False).encode("utf-8")
