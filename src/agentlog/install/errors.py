"""Errors raised by the installer library.

The library never prints or exits: callers (the CLI) turn these into
messages and exit codes. Per-agent problems during `install`/`uninstall`
are caught and reported as a ``failed`` result instead of propagating.
"""

from __future__ import annotations

from pathlib import Path

from agentlog.core import AgentlogError


class InstallError(AgentlogError):
    """Base class: something the installer refuses to do or could not do."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def __str__(self) -> str:
        if self.path is not None:
            return f"{self.path}: {self.message}"
        return self.message


class UnknownAgentError(InstallError):
    """An agent name that is not one of the supported agents."""


class ConfigError(InstallError):
    """An existing agent config file that agentlog will not rewrite."""


class InvalidJSONError(ConfigError):
    """The config file is not valid JSON (left untouched)."""


class JSONWithCommentsError(ConfigError):
    """The config file holds comments (JSONC); rewriting would lose them."""


class ConfigShapeError(ConfigError):
    """Valid JSON, but not the shape the agent documents (e.g. ``hooks`` is a list)."""


class LockTimeoutError(InstallError):
    """Another agentlog process holds the config file's lock for too long."""
