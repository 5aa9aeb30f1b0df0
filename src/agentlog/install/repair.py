"""``agentlog doctor --fix``: rebuild the hook client and rewrite the hooks that are installed.

Only agents whose config already holds agentlog's hooks are touched (doctor never
installs into an agent that has none). For them the hook form is chosen again as
``install`` chooses it: the native client is rebuilt when it is missing or stale (an
upgrade of agentlog changes its key), or the Python hook is written when there is
no compiler or it was asked for. Then each config is rewritten as ``install`` would
(lock, backup, ledger), and client binaries no config names any more are removed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agentlog.core import paths
from agentlog.install.agents import Scope
from agentlog.install.doctor import diagnose
from agentlog.install.hook_client import HookChoice, choose_hook
from agentlog.install.installer import InstallResult, install


@dataclass
class FixReport:
    """What ``doctor --fix`` did."""

    hook: HookChoice | None
    """The form written (None when no agent had hooks to fix)."""
    results: list[InstallResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"hook": self.hook.to_dict() if self.hook is not None else None,
                "results": [r.to_dict() for r in self.results]}


def fix(
    home: Path | None = None,
    data_root: str | Path | None = None,
    *,
    scope: Scope = "user",
    project_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    python_hook: bool | None = None,
) -> FixReport:
    """Rebuild the client if needed and rewrite the hooks of every agent that has agentlog's hooks
    (``python_hook`` as for `install`: None lets the setting ``hook_client`` decide)."""
    env = os.environ if environ is None else environ
    root = paths.data_root(dict(env)) if data_root is None else os.path.abspath(str(data_root))
    health = diagnose(home, root, scope=scope, project_dir=project_dir, environ=env)
    agents = [h.agent for h in health if h.hook.get("path") is not None]
    if not agents:
        return FixReport(None)
    choice = choose_hook(root, env, python_hook=python_hook, build=True)
    results = install(agents, scope, project_dir, home=home, data_root=root, environ=env, hook=choice)
    return FixReport(choice, results)
