"""Which release of each agent is installed, and which releases agentlog was tested with.

:data:`TESTED` is the range ``tests/test_real_agents.py`` runs end to end (the
pinned npm releases of ``agentlog.bench.agents``; docs/agents.md has the table).
The installed release is read from the ``package.json`` of the npm package the
launcher on ``PATH`` belongs to (no process started); failing that, from
``<launcher> --version`` with a short timeout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

TESTED: dict[str, tuple[str, str]] = {
    "claude-code": ("2.1.197", "2.1.332"),
    "codex": ("0.142.2", "0.171.0"),
    "gemini-cli": ("0.47.0", "0.61.0"),
}
PACKAGES: dict[str, str] = {
    "claude-code": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "gemini-cli": "@google/gemini-cli",
}
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse(version: str) -> tuple[int, int, int] | None:
    m = _VERSION.search(version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _from_package_json(exe: str, package: str) -> str | None:
    here = Path(os.path.realpath(exe)).parent
    for folder in (here, *here.parents):
        pj = folder / "package.json"
        if pj.is_file():
            try:
                meta = json.loads(pj.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict) and meta.get("name") == package and isinstance(meta.get("version"), str):
                return str(meta["version"])
        if folder.name == "node_modules":
            break
    return None


def installed_version(agent: str, launchers: tuple[str, ...], environ: Mapping[str, str]) -> str | None:
    """The installed release of ``agent`` (x.y.z), or None when it cannot be told."""
    package = PACKAGES.get(agent)
    for name in launchers:
        exe = shutil.which(name, path=environ.get("PATH"))
        if exe is None:
            continue
        if package is not None:
            found = _from_package_json(exe, package)
            if found is not None:
                return found
        try:
            proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=5,
                                  env=dict(environ), stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            continue
        v = parse(proc.stdout or "")
        if v is not None:
            return "%d.%d.%d" % v
    return None


def range_note(agent: str, version: str | None) -> str | None:
    """A warning when ``version`` is outside the tested range (None inside it, or when unknown)."""
    tested = TESTED.get(agent)
    v = parse(version) if version else None
    if tested is None or v is None:
        return None
    low, high = parse(tested[0]), parse(tested[1])
    assert low is not None and high is not None
    if v < low:
        return (f"{agent} {version} is older than the releases agentlog is tested with ({tested[0]}–{tested[1]}): "
                "some events or outcomes may be missing (docs/agents.md)")
    if v > high:
        return (f"{agent} {version} is newer than the releases agentlog is tested with ({tested[0]}–{tested[1]}): "
                "check `agentlog doctor` for new payload fields (docs/agents.md)")
    return None
