"""The command line an agent's hook configuration runs.

Installed hooks run ``<python> -I -S <package>/_hook.py <agent>``: the same
code as ``agentlog hook <agent>`` without the cost of ``site``; or, where
``agentlog install`` could build it, the native client
``<data root>/bin/agentlog-hook-<key> <agent>`` (install/native_build.py),
which falls back to that same Python command. Standard library only.
"""

from __future__ import annotations

import os
import shlex
import sys


def hook_script() -> str:
    """Absolute path of the fast hook entry script."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_hook.py")


def interpreter_argv() -> list[str]:
    """The interpreter and flags the installed hook uses (also the benchmark's floor)."""
    return [sys.executable, "-I", "-S"]


def hook_argv(agent: str) -> list[str]:
    """argv of the installed hook for ``agent`` (``claude-code``, ``codex``, ``cursor``, ``gemini-cli``)."""
    return [*interpreter_argv(), hook_script(), agent]


def hook_command(agent: str) -> str:
    """The hook as one POSIX shell string, each part single-quoted when needed."""
    return " ".join(shlex.quote(part) for part in hook_argv(agent))


NATIVE_PREFIX = "agentlog-hook-"
NATIVE_KEY_DIGITS = 16


def is_native_client(part: str) -> bool:
    """Whether ``part`` names a native hook client, ``…/bin/agentlog-hook-<16 hex>``, of any data root."""
    head, _, name = part.replace("\\", "/").rpartition("/")
    key = name[len(NATIVE_PREFIX):]
    return (name.startswith(NATIVE_PREFIX) and len(key) == NATIVE_KEY_DIGITS
            and all(c in "0123456789abcdef" for c in key) and (head == "bin" or head.endswith("/bin")))


def native_command(binary: str, agent: str) -> str:
    """The native client's hook command (exec form: the binary itself, then the agent), shell-quoted."""
    return f"{shlex.quote(binary)} {shlex.quote(agent)}"


def is_our_command(command: str) -> bool:
    """Whether a hook command string in an agent's config is one of ours.

    Recognises the fast form (``…/agentlog/_hook.py <agent>``) from any
    install location, the native client (``…/bin/agentlog-hook-<key> <agent>``)
    from any data root, and ``agentlog hook <agent>`` (console script).
    """
    try:
        parts = shlex.split(command)
    except ValueError:
        return False
    for i, part in enumerate(parts):
        if part.replace("\\", "/").endswith("agentlog/_hook.py") or is_native_client(part):
            return True
        if os.path.basename(part) == "agentlog" and i + 1 < len(parts) and parts[i + 1] == "hook":
            return True
    return False
