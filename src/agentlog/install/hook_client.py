"""Which hook command the agents' configs get, and which one they have (issue 29).

``install`` writes the native client, ``<data root>/bin/agentlog-hook-<key> <agent>``,
when it can build it (install/native_build.py), and the Python hook
(``<python> -I -S …/_hook.py <agent>``) when there is no compiler, when the build
fails, or when the user asks for it (``--python-hook``, or the setting
``hook_client = "python"``). The choice is made once per run and used for every
agent, and the output says which it was and why.

``doctor`` reads it back: per agent, which path the installed commands use, whether
the binary they name exists and is the one this agentlog would build now (the key
covers the C source, the compiler and the Python paths, so an upgrade makes it
stale), and whether the daemon's capture server answers.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentlog.capture.command import hook_command, is_native_client, native_command
from agentlog.install import native_build

HookPath = Literal["native", "python", "other"]
CHOSEN_PYTHON = 'the Python hook was asked for (--python-hook, or the setting hook_client = "python")'


@dataclass(frozen=True)
class HookChoice:
    """The hook command form ``install`` writes, for every agent of one run."""

    path: Literal["native", "python"]
    binary: str | None = None
    """The native client (native only)."""
    reason: str = ""
    """Why the Python hook (no compiler, a failed build, asked for)."""
    warnings: str = ""
    """Set when the client was built without -Werror."""
    cached: bool = False
    """The binary was built by an earlier run."""
    planned: bool = False
    """A dry run: the binary is what a build would make; it is not built yet."""

    def command(self, agent: str) -> str:
        if self.path == "native" and self.binary is not None:
            return native_command(self.binary, agent)
        return hook_command(agent)

    def summary(self) -> str:
        """One sentence for install's output."""
        if self.path == "python":
            return f"hooks: the Python hook ({self.reason})" if self.reason else "hooks: the Python hook"
        state = "to be built" if self.planned else ("already built" if self.cached else "built")
        text = f"hooks: the native client {self.binary} ({state})"
        return f"{text}; {self.warnings}" if self.warnings else text

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "binary": self.binary, "reason": self.reason, "warnings": self.warnings,
                "cached": self.cached, "planned": self.planned}


def python_hook_setting(root: str, environ: Mapping[str, str]) -> bool:
    """Whether config.toml asks for the Python hook (a bad config.toml counts as no)."""
    from agentlog.core.config import ConfigError, load

    try:
        return bool(load(root, dict(environ))["hook_client"] == "python")
    except (ConfigError, OSError):
        return False


def choose_hook(
    root: str, environ: Mapping[str, str] | None = None, *, python_hook: bool | None = None, build: bool = True
) -> HookChoice:
    """The form to install under data root ``root``. ``python_hook`` None means the setting decides.
    Without ``build`` (a dry run) nothing is written: an existing binary is named, else the one
    a build would make (``planned``)."""
    env = os.environ if environ is None else environ
    if python_hook is None:
        python_hook = python_hook_setting(root, env)
    if python_hook:
        return HookChoice("python", reason=CHOSEN_PYTHON)
    if build:
        built = native_build.build_client(root, environ=env)
        if built.path is None:
            return HookChoice("python", reason=built.reason)
        return HookChoice("native", built.path, warnings=built.warnings, cached=built.cached)
    names, why = native_build.current_names(environ=env)
    if not names:
        return HookChoice("python", reason=why)
    for name in names:
        path = os.path.join(root, "bin", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return HookChoice("native", path, cached=True)
    return HookChoice("native", os.path.join(root, "bin", names[0]), planned=True)


def command_path(command: str) -> tuple[HookPath, str | None]:
    """Which path one of our hook commands takes, and the native binary it names."""
    try:
        parts = shlex.split(command)
    except ValueError:
        return "other", None
    for i, part in enumerate(parts):
        if is_native_client(part):
            return "native", part
        if part.replace("\\", "/").endswith("agentlog/_hook.py"):
            return "python", None
        if os.path.basename(part) == "agentlog" and i + 1 < len(parts) and parts[i + 1] == "hook":
            return "python", None
    return "other", None


@dataclass
class HookReport:
    """What doctor says about one agent's installed hook command."""

    path: HookPath | None
    """None when no agentlog hook is installed; ``other`` for mixed forms."""
    binary: str | None = None
    binary_exists: bool | None = None
    in_data_root: bool | None = None
    """Whether the binary is in this data root's ``bin/`` (else another installation's)."""
    binary_current: bool | None = None
    """None when it cannot be told (no compiler to ask, or the binary is another data root's)."""
    current_binary: str | None = None
    """The binary this agentlog would build now."""
    daemon_answering: bool = False
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def label(self) -> str:
        """Short text for doctor's table."""
        if self.path != "native":
            return self.path or "—"
        if not self.binary_exists:
            return "native (missing)"
        return {True: "native", False: "native (stale)", None: "native (?)"}[self.binary_current]

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "binary": self.binary, "binary_exists": self.binary_exists,
                "in_data_root": self.in_data_root, "binary_current": self.binary_current, "current_binary": self.current_binary,
                "daemon_answering": self.daemon_answering}


class CurrentClient:
    """What doctor compares against, worked out once per run: the names a build would give the
    client now (asks the compiler its version, only when a config names a binary) and whether
    the capture server answers."""

    def __init__(self, root: str, environ: Mapping[str, str]) -> None:
        self.root = root
        self.environ = environ
        self._names: tuple[tuple[str, ...], str] | None = None
        self._answering: bool | None = None

    def names(self) -> tuple[tuple[str, ...], str]:
        if self._names is None:
            self._names = native_build.current_names(environ=self.environ)
        return self._names

    def answering(self) -> bool:
        if self._answering is None:
            from agentlog.capture.hook_socket import probe

            self._answering = probe(self.root)
        return self._answering


def hook_report(commands: list[str], current: CurrentClient) -> HookReport:
    """The report for one agent whose installed agentlog commands are ``commands``."""
    report = HookReport(None, daemon_answering=current.answering())
    forms = {command_path(c) for c in commands}
    if not forms:
        return report
    if len(forms) > 1:
        report.path = "other"
        return report
    ((report.path, report.binary),) = forms
    if report.path == "python" or report.binary is None:
        return report
    binary = report.binary
    report.binary_exists = os.path.isfile(binary) and os.access(binary, os.X_OK)
    names, why = current.names()
    if names:  # the one built, else the one a build would make (-Werror first)
        built = [os.path.join(current.root, "bin", n) for n in names]
        report.current_binary = next((b for b in built if os.path.isfile(b)), built[0])
    report.in_data_root = os.path.dirname(os.path.abspath(binary)) == os.path.join(current.root, "bin")
    if not report.in_data_root:
        report.notes.append(f"the hooks run the native client of another data root: {binary}")
    elif not names:
        report.notes.append(f"cannot tell whether {binary} is current: {why}")
    else:
        report.binary_current = os.path.basename(binary) in names
        if not report.binary_current and report.binary_exists:
            report.problems.append(f"the hooks run a stale native client {binary} (built from another source, "
                                   "compiler or Python path): `agentlog doctor --fix` rebuilds it")
    if report.binary_exists and not report.daemon_answering:
        report.notes.append("the daemon's capture server does not answer, so the native client runs the Python "
                            "hook each time (`agentlog daemon start`)")
    return report
