"""Which native hook clients the agents' configs still name.

A client binary (``<data root>/bin/agentlog-hook-<key>``) must never be removed
while a config runs it: the agent would get exit 127 and the event would be lost
(two agentlog installations sharing a data root, or a project-scope install made
by an older release, name binaries of other keys). So the build's cleanup keeps
every binary that some known config names, and removes only the others.

The configs looked at: the user-scope config of every agent, every file in the
install ledger, and every file ``install`` ever wrote the native form into
(``<state_dir>/hook-configs.json``; the ledger forgets a file whose entries were
edited by hand). They are scanned as bytes for ``agentlog-hook-<16 hex>``, so a
config that no longer parses still protects its binary. A config that exists
but cannot be read makes the answer unknown: then nothing is removed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from agentlog.core import paths
from agentlog.install.agents import AGENTS, default_home
from agentlog.install.files import atomic_write, locked, read_ledger

CONFIGS_FILE = "hook-configs.json"
_NAMED = re.compile(rb"agentlog-hook-[0-9a-f]{16}(?![0-9a-f])")


def configs_path(root: str) -> Path:
    """``<state_dir>/hook-configs.json``: the configs install wrote the native form into."""
    return Path(paths.state_dir(root)) / CONFIGS_FILE


def recorded_configs(root: str) -> list[str]:
    try:
        obj = json.loads(configs_path(root).read_bytes())
    except (OSError, ValueError):
        return []
    files = obj.get("files") if isinstance(obj, dict) else None
    return [f for f in files if isinstance(f, str)] if isinstance(files, list) else []


def record_config(root: str, config: Path) -> None:
    """Remember that ``config`` (a real path) names a native client of ``root``."""
    path = configs_path(root)
    paths.ensure_dir(str(path.parent))
    with locked(path):
        files = recorded_configs(root)
        if str(config) in files:
            return
        doc = {"version": 1, "files": sorted({*files, str(config)})}
        atomic_write(path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"), paths.FILE_MODE)


def candidate_configs(root: str, environ: Mapping[str, str]) -> list[str]:
    """Every config file that may name one of ``root``'s clients."""
    home = default_home(None, environ)
    found = [str(spec.config_path("user", home=home, project_dir=None, environ=environ)) for spec in AGENTS.values()]
    found += list(read_ledger(root)) + recorded_configs(root)
    return list(dict.fromkeys(found))


def named_clients(root: str, environ: Mapping[str, str] | None = None) -> set[str] | None:
    """File names (``agentlog-hook-<key>``) of the clients some config names; None when a config
    exists but cannot be read (then no binary may be removed)."""
    env = os.environ if environ is None else environ
    names: set[str] = set()
    for config in candidate_configs(root, env):
        try:
            with open(config, "rb") as fh:
                data = fh.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        except OSError:
            return None
        names.update(m.decode("ascii") for m in _NAMED.findall(data))
    return names
