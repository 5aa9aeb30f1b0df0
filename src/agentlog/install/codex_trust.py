"""Codex's hook trust: which of agentlog's hooks Codex will run, and trusting them on request.

Codex (0.14x–0.17x) runs a hook from ``hooks.json`` only when
``$CODEX_HOME/config.toml`` holds a trust record for it:
``[hooks.state."<hooks.json path>:<event in snake_case>:<group index>:<handler index>"]``
with ``trusted_hash`` = the hash below. A user makes those records by reviewing
the hooks in Codex's TUI (``/hooks``); without them ``codex exec`` runs no hook
and says nothing. ``tests/test_real_agents.py`` checks against the real 0.171
binary that records written here make its hooks run, and that without them none do.

agentlog writes records only when asked (``agentlog install codex
--trust-codex-hooks``), and only for its own handlers.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

from agentlog.install.errors import InstallError
from agentlog.install.jsonedit import JSONObject, is_our_handler

TRUST_FLAG = "--trust-codex-hooks"


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def codex_trust_hash(event: str, group: JSONObject | None, handler: JSONObject) -> str:
    """The hash Codex keys a hook's trust record on: SHA-256 of compact, key-sorted
    JSON of the event label, the group's matcher (only when present) and the
    handler with defaults filled in."""
    timeout = handler.get("timeout", 600)
    obj: JSONObject = {
        "event_name": snake(event),
        "hooks": [
            {
                "async": bool(handler.get("async", False)),
                "command": handler.get("command"),
                "timeout": timeout,
                "type": handler.get("type", "command"),
            }
        ],
    }
    if group is not None and "matcher" in group:
        obj["matcher"] = group["matcher"]
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def our_trust_keys(config_path: Path, data: JSONObject) -> list[tuple[str, str]]:
    """(state key, expected hash) of each agentlog handler in the hooks file ``data``."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    keys: list[tuple[str, str]] = []
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            inner = group["hooks"]
            assert isinstance(inner, list)
            for hi, handler in enumerate(inner):
                if is_our_handler(handler):
                    assert isinstance(handler, dict)
                    keys.append((f"{config_path}:{snake(event)}:{gi}:{hi}", codex_trust_hash(event, group, handler)))
    return keys


def _trust_state(codex_home: Path) -> dict[str, object]:
    try:
        with open(codex_home / "config.toml", "rb") as fh:
            loaded = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    hooks_table = loaded.get("hooks")
    state = hooks_table.get("state", {}) if isinstance(hooks_table, dict) else {}
    return state if isinstance(state, dict) else {}


def untrusted(config_path: Path, data: JSONObject, codex_home: Path) -> tuple[int, int]:
    """(agentlog handlers Codex would not run, agentlog handlers) for the hooks file ``data``."""
    keys = our_trust_keys(config_path, data)
    state = _trust_state(codex_home)
    trusted = 0
    for key, expected in keys:
        record = state.get(key)
        if isinstance(record, dict) and record.get("trusted_hash") == expected and record.get("enabled", True):
            trusted += 1
    return len(keys) - trusted, len(keys)


def codex_trust_notes(config_path: Path, data: JSONObject, codex_home: Path) -> list[str]:
    """Whether Codex has trust records for our hooks (read-only)."""
    missing, total = untrusted(config_path, data, codex_home)
    if total == 0:
        return []
    if missing == 0:
        return [f"Codex: all {total} agentlog hooks have a matching trust record"]
    return [
        f"Codex runs new or changed hooks only after you trust them ({missing} of {total} agentlog hooks not "
        f"trusted yet, so `codex exec` records nothing): start codex and review them with /hooks, or run "
        f"`agentlog install codex {TRUST_FLAG}`"
    ]


def trust_our_hooks(config_path: Path, data: JSONObject, codex_home: Path) -> int:
    """Write Codex trust records for agentlog's own handlers into ``$CODEX_HOME/config.toml``
    (everything else in the file kept as it is); how many were written or replaced."""
    import os
    import time

    import tomlkit

    from agentlog.core.fileio import write_atomic
    from agentlog.core.locks import open_locked

    keys = our_trust_keys(config_path, data)
    if not keys:
        return 0
    path = codex_home / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_locked(str(path) + ".agentlog-lock", 10.0)
    if fd is None:
        raise InstallError(f"{path} is being changed by another agentlog process; try again")
    try:
        try:
            raw: bytes | None = path.read_bytes()
        except FileNotFoundError:
            raw = None
        try:
            doc = tomlkit.parse(raw.decode("utf-8")) if raw else tomlkit.document()
        except (UnicodeDecodeError, tomlkit.exceptions.ParseError) as e:
            raise InstallError(f"{path}: not valid TOML ({e}); fix it, then run the command again") from None
        hooks = doc.setdefault("hooks", tomlkit.table(is_super_table=True))
        state = hooks.setdefault("state", tomlkit.table(is_super_table=True))
        written = 0
        for key, expected in keys:
            record = state.get(key)
            if isinstance(record, dict) and record.get("trusted_hash") == expected:
                continue
            entry = tomlkit.table()
            entry["trusted_hash"] = expected
            state[key] = entry
            written += 1
        if written:
            mode = path.stat().st_mode & 0o777 if raw is not None else 0o600
            if raw is not None:  # the file as it was, beside it
                write_atomic(f"{path}.agentlog-bak-{time.strftime('%Y%m%dT%H%M%S')}", raw, mode)
            write_atomic(str(path), tomlkit.dumps(doc).encode("utf-8"), mode)
    finally:
        os.close(fd)
    return written
