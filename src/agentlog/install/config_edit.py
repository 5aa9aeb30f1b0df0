"""One agent config file changed in place: lock, read, edit, diff, back up, write.

What ``install --mcp`` (:mod:`.mcp_register`) and ``install --otel``
(:mod:`.otel_register`) share: the edit is a function of the file's bytes that
returns the new bytes (the same bytes: nothing to do) or raises
:class:`~agentlog.install.errors.InstallError` to leave the file untouched.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from agentlog.install.errors import InstallError
from agentlog.install.files import atomic_write, backup, file_mode, locked, read_bytes
from agentlog.install.jsonedit import unified_diff


@dataclass
class ConfigResult:
    agent: str
    path: str
    outcome: str
    """The change's name (registered, configured, removed), unchanged, absent, skipped, failed."""
    reason: str = ""
    diff: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "path": self.path, "outcome": self.outcome, "reason": self.reason}


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


def apply_edit(agent: str, path: Path, edit: Callable[[bytes | None], bytes | None], *, dry_run: bool,
               remove: bool, changed: str) -> ConfigResult:
    """Run ``edit`` over ``path`` (under its lock) and write the result unless ``dry_run``;
    ``changed`` names the outcome of a change that is not a removal."""
    try:
        if not dry_run:
            path.parent.mkdir(parents=True, exist_ok=True)
        with locked(path) if path.parent.is_dir() else _nothing():
            raw = read_bytes(path)
            new = edit(raw)
            if new == raw or new is None:
                return ConfigResult(agent, str(path), "absent" if remove else "unchanged")
            diff = unified_diff(raw, new, path)
            if not dry_run:
                mode = file_mode(path)
                if raw is not None:
                    backup(path, raw, mode)
                atomic_write(path, new, mode if mode is not None else 0o600)
            return ConfigResult(agent, str(path), "removed" if remove else changed, diff=diff)
    except InstallError as e:
        return ConfigResult(agent, str(path), "failed", str(e))
