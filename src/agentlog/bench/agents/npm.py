"""Pinned agent CLIs from the npm registry, installed once into a cache.

The cache is ``$AGENTLOG_AGENT_CACHE`` or ``~/.cache/agentlog/agents``; each
release gets its own folder (``<package>@<version>``, '/' spelled '+'),
written under a temporary name and renamed when complete, under a lock so
parallel test workers install each release once.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agentlog.core import AgentlogError


class AgentInstallError(AgentlogError):
    """npm could not install an agent release."""


@dataclass(frozen=True)
class Release:
    agent: str
    """agentlog's name for the agent (``claude-code``, ``codex``, ``gemini-cli``)."""
    package: str
    version: str
    binary: str

    @property
    def label(self) -> str:
        return f"{self.agent}@{self.version}"


def cache_dir() -> Path:
    env = os.environ.get("AGENTLOG_AGENT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "agentlog" / "agents"


def npm_available() -> bool:
    return shutil.which("npm") is not None and shutil.which("node") is not None


def installed_binary(release: Release, root: Path | None = None) -> Path:
    """The release's executable, installing the release first when it is not cached."""
    base = (root or cache_dir())
    folder = base / f"{release.package.replace('/', '+')}@{release.version}"
    exe = folder / "node_modules" / ".bin" / release.binary
    if exe.exists():
        return exe
    if not npm_available():
        raise AgentInstallError("node and npm are needed to install the agent CLIs (apt-get install nodejs npm)")
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists():
            return exe
        tmp = folder.with_name(folder.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        proc = subprocess.run(
            ["npm", "install", "--prefix", str(tmp), "--no-audit", "--no-fund", "--loglevel=error",
             f"{release.package}@{release.version}"],
            capture_output=True, text=True, timeout=900,
        )
        if proc.returncode != 0 or not (tmp / "node_modules" / ".bin" / release.binary).exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise AgentInstallError(f"npm install {release.package}@{release.version} failed: {' | '.join(tail)}")
        shutil.rmtree(folder, ignore_errors=True)
        os.rename(tmp, folder)
    return exe
