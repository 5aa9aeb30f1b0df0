"""The command line an agent's hook configuration runs.

Installed hooks run ``<python> -I -S <package>/_hook.py <agent>``: the same
code as ``agentlog hook <agent>`` without the cost of ``site``. Standard
library only.
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


def is_our_command(command: str) -> bool:
    """Whether a hook command string in an agent's config is one of ours.

    Recognises the fast form (``…/agentlog/_hook.py <agent>``) from any
    install location, and ``agentlog hook <agent>`` (console script).
    """
    try:
        parts = shlex.split(command)
    except ValueError:
        return False
    for i, part in enumerate(parts):
        if part.replace("\\", "/").endswith("agentlog/_hook.py"):
            return True
        if os.path.basename(part) == "agentlog" and i + 1 < len(parts) and parts[i + 1] == "hook":
            return True
    return False
