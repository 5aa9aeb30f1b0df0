"""Run the daemon as a login service: ``agentlog daemon install|uninstall``.

``install`` writes one file that tells the platform's service manager to run
``<this interpreter> -m agentlog daemon run`` with ``AGENTLOG_HOME`` pinned to
the current data root, at login, and again if it dies:

- Linux: a systemd user unit, ``$XDG_CONFIG_HOME/systemd/user/agentlog.service``
  (default ``~/.config/systemd/user``), then ``systemctl --user daemon-reload``
  and ``systemctl --user enable --now agentlog.service``.
- macOS: a launchd agent, ``~/Library/LaunchAgents/dev.agentlog.daemon.plist``,
  then ``launchctl bootstrap gui/<uid> <plist>`` (``launchctl load -w`` as a
  fallback).

The daemon ends cleanly on SIGTERM after one last ingest and exits 0, so the
service is restarted only after a failure, and the stop timeout leaves room
for that last ingest (or a compaction in progress).

The file carries a marker (:data:`MARKER`) so that a file somebody else wrote
at the same path is never replaced or removed without ``force``. Installing
the same content again is a no-op ("unchanged"); replacing our own file with
different content (another interpreter, another data root) also needs
``force``. Files are written 0644, atomically (temp file, fsync, rename).

When the service manager cannot be reached (no ``systemctl`` on PATH, no user
manager in a container or CI, no ``launchctl``) the file is still written and
the result says so, with the commands to run later (``next_steps``); a
reachable manager whose command fails makes the result not ``ok``. The
library never prints and never exits.
"""

from __future__ import annotations

import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.paths import data_root as default_data_root
from agentlog.core.paths import ensure_dir, fsync_path, state_dir

Platform = Literal["linux", "darwin"]
Outcome = Literal["installed", "replaced", "unchanged", "removed", "not_installed"]
ManagerState = Literal["applied", "unreachable", "failed", "skipped"]

PLATFORMS: tuple[Platform, ...] = ("linux", "darwin")
UNIT_NAME = "agentlog.service"
LABEL = "dev.agentlog.daemon"
FILE_MODE = 0o644
RESTART_SEC = 5
# systemd sends SIGKILL after this long; the daemon's last ingest (or an
# hourly compaction that was running when SIGTERM came) must fit in it.
STOP_TIMEOUT_SEC = 300
COMMAND_TIMEOUT = 60.0
MARKER = "agentlog-managed:"
_MARKER_TEXT = f"{MARKER} written by `agentlog daemon install`; `agentlog daemon uninstall` removes it."
# The same file as ``store.daemon.log_path`` (not imported: that module pulls
# in the whole ingest stack).
DAEMON_LOG_NAME = "daemon.log"


class ServiceError(AgentlogError):
    """Something ``daemon install``/``uninstall`` refuses to do or could not do."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class ServiceConflict(ServiceError):
    """A different or foreign file is where ours goes; ``force`` replaces or removes it."""


@dataclass(frozen=True)
class ServiceSpec:
    """What ``install`` writes, and where."""

    platform: Platform
    path: str
    data_root: str
    program_arguments: tuple[str, ...]
    content: bytes


@dataclass
class CommandRun:
    """One service-manager command and how it went (output trimmed)."""

    argv: list[str]
    returncode: int
    output: str


@dataclass
class ServiceResult:
    """What ``install``/``uninstall`` did.

    ``outcome`` is about the file; ``service_manager`` about telling the
    manager: ``applied`` (install: enabled and started; uninstall: stopped and
    disabled), ``unreachable`` (not available here: see ``detail`` and run
    ``next_steps``), ``failed`` (a command failed: see ``commands``) or
    ``skipped`` (nothing to tell it, or asked not to).
    """

    action: Literal["install", "uninstall"]
    platform: Platform
    path: str
    outcome: Outcome
    data_root: str
    program_arguments: list[str]
    service_manager: ManagerState = "skipped"
    detail: str = ""
    next_steps: list[str] = field(default_factory=list)
    commands: list[CommandRun] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.service_manager != "failed"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        key = "activated" if self.action == "install" else "deactivated"
        out[key] = self.service_manager == "applied"
        out["ok"] = self.ok
        return out


# --- where and what -------------------------------------------------------


def current_platform(name: str | None = None) -> Platform:
    """``linux`` or ``darwin`` from ``sys.platform`` (or ``name``)."""
    name = sys.platform if name is None else name
    if name.startswith("linux"):
        return "linux"
    if name == "darwin":
        return "darwin"
    raise ServiceError(f"daemon install supports Linux (systemd) and macOS (launchd), not {name!r}")


def _home(env: Mapping[str, str]) -> str:
    home = env.get("HOME", "") or os.path.expanduser("~")
    if not os.path.isabs(home):
        raise ServiceError(f"cannot locate the home directory (HOME={home!r})")
    return home


def service_path(platform: Platform, environ: Mapping[str, str] | None = None) -> str:
    """Where the unit (Linux) or agent plist (macOS) goes."""
    env = os.environ if environ is None else environ
    if platform == "darwin":
        return os.path.join(_home(env), "Library", "LaunchAgents", f"{LABEL}.plist")
    config = env.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(config):  # the XDG spec: a relative value is ignored
        config = os.path.join(_home(env), ".config")
    return os.path.join(config, "systemd", "user", UNIT_NAME)


def program_arguments(python: str | None = None) -> list[str]:
    """``<absolute interpreter> -m agentlog daemon run``.

    The interpreter path is kept as it is, not resolved: a virtualenv's
    ``bin/python`` is a symlink, and resolving it would leave the venv.
    """
    exe = sys.executable if python is None else python
    if not exe:
        raise ServiceError("cannot tell which Python interpreter is running (sys.executable is empty)")
    return [os.path.abspath(exe), "-m", "agentlog", "daemon", "run"]


def daemon_log(root: str) -> str:
    return os.path.join(state_dir(root), DAEMON_LOG_NAME)


_SYSTEMD_SAFE = re.compile(r"[A-Za-z0-9_%+=:,./-]+")
_SYSTEMD_UNSAFE_EXE = re.compile(r"[\x00-\x1f\x7f'\"\\]")
_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def systemd_word(value: str, *, exec_arg: bool = False) -> str:
    """Quote ``value`` as one word of a systemd setting (``systemd.syntax(7)``).

    ``%`` starts a specifier in every setting, quoted or not, so it is doubled.
    In ``Exec*=`` lines ``$`` starts a variable (``$$`` is a literal one);
    ``Environment=`` gives ``$`` no meaning. A word that is not plain is put in
    double quotes, inside which systemd reads C escapes: ``\\`` and ``"`` are
    escaped, control characters written as escapes.
    """
    if "\x00" in value:
        raise ServiceError(f"a NUL character cannot be written into a systemd unit: {value!r}")
    out = value.replace("%", "%%")
    if exec_arg:
        out = out.replace("$", "$$")
    if value and _SYSTEMD_SAFE.fullmatch(value):
        return out
    chars = []
    for ch in out:
        if ch in _C_ESCAPES:
            chars.append(_C_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            chars.append(f"\\x{ord(ch):02x}")
        else:
            chars.append(ch)
    return '"' + "".join(chars) + '"'


def _exec_line(argv: Sequence[str]) -> str:
    exe, *args = argv
    if not os.path.isabs(exe):
        raise ServiceError(f"ExecStart needs an absolute path, not {exe!r}")
    if _SYSTEMD_UNSAFE_EXE.search(exe):
        # systemd's string_is_safe(): quoting would round-trip such a path,
        # and systemd would then refuse the unit ("Executable name contains
        # special characters").
        raise ServiceError(
            f"systemd refuses to run an executable whose path holds a quote, a backslash or a control character: {exe!r}; "
            "install agentlog under a path without them"
        )
    if "$" in exe:
        # The path systemd executes gets no $-substitution but argv[0] does,
        # so "$$" cannot be right for both: "@" gives argv[0] separately.
        return " ".join(["@" + systemd_word(exe), systemd_word(exe, exec_arg=True), *(systemd_word(a, exec_arg=True) for a in args)])
    return " ".join([systemd_word(exe), *(systemd_word(a, exec_arg=True) for a in args)])


def render_systemd_unit(argv: Sequence[str], root: str) -> str:
    """The systemd user unit running ``argv`` with ``AGENTLOG_HOME=root``."""
    return "\n".join(
        [
            f"# {_MARKER_TEXT}",
            "[Unit]",
            "Description=agentlog ingest daemon (session logs to the columnar store)",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={_exec_line(argv)}",
            f"Environment={systemd_word('AGENTLOG_HOME=' + root)}",
            "Restart=on-failure",
            f"RestartSec={RESTART_SEC}",
            "KillSignal=SIGTERM",
            f"TimeoutStopSec={STOP_TIMEOUT_SEC}",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def render_launchd_plist(argv: Sequence[str], root: str) -> bytes:
    """The launchd agent running ``argv`` with ``AGENTLOG_HOME=root``."""
    log = daemon_log(root)
    body = plistlib.dumps(
        {
            "Label": LABEL,
            "ProgramArguments": list(argv),
            "EnvironmentVariables": {"AGENTLOG_HOME": root},
            "RunAtLoad": True,
            "KeepAlive": {"SuccessfulExit": False},
            "StandardOutPath": log,
            "StandardErrorPath": log,
            # launchd sends SIGKILL 20 s after SIGTERM by default.
            "ExitTimeOut": STOP_TIMEOUT_SEC,
        },
        fmt=plistlib.FMT_XML,
    )
    # plistlib writes no comments; the marker goes right before <plist>.
    head, sep, tail = body.partition(b"<plist")
    return head + f"<!-- {_MARKER_TEXT} -->\n".encode() + sep + tail


def service_spec(
    platform: Platform | None = None, *, environ: Mapping[str, str] | None = None, python: str | None = None
) -> ServiceSpec:
    """The file ``install`` would write for this interpreter and data root."""
    env = os.environ if environ is None else environ
    plat = current_platform() if platform is None else current_platform(platform)
    root = default_data_root(dict(env))
    argv = program_arguments(python)
    if plat == "darwin":
        content = render_launchd_plist(argv, root)
    else:
        try:
            content = render_systemd_unit(argv, root).encode("utf-8")
        except UnicodeEncodeError:
            raise ServiceError(f"a path is not valid UTF-8 and cannot go into a systemd unit: {argv[0]!r} or {root!r}") from None
    return ServiceSpec(platform=plat, path=service_path(plat, env), data_root=root, program_arguments=tuple(argv), content=content)


# --- files ----------------------------------------------------------------


def is_ours(content: bytes) -> bool:
    """Whether a service file carries our marker."""
    return MARKER.encode() in content


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ServiceError(f"{path} is a directory, expected a file", path) from None


def _remove(path: str) -> None:
    os.unlink(path)
    fsync_path(os.path.dirname(path))


# --- the service managers -------------------------------------------------


def _run(argv: list[str], env: Mapping[str, str], *, keep_stdout: bool = True) -> CommandRun:
    try:
        proc = subprocess.run(
            argv,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if keep_stdout else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            timeout=COMMAND_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return CommandRun(argv=argv, returncode=-1, output=f"timed out after {COMMAND_TIMEOUT:.0f} s")
    except OSError as e:
        return CommandRun(argv=argv, returncode=-1, output=str(e))
    output = ((proc.stdout or "") + (proc.stderr or "")).strip()
    return CommandRun(argv=argv, returncode=proc.returncode, output=output[-2000:])


def _shell(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def _failed(result: ServiceResult, run: CommandRun) -> None:
    result.service_manager = "failed"
    result.detail = f"`{_shell(run.argv)}` failed (exit {run.returncode}): {run.output or 'no output'}"


def _systemctl(env: Mapping[str, str], result: ServiceResult) -> str | None:
    """The systemctl binary when a user manager answers; else record why not."""
    exe = shutil.which("systemctl", path=env.get("PATH", os.defpath))
    if exe is None:
        result.service_manager = "unreachable"
        result.detail = "systemctl not found on PATH (no systemd here?)"
        return None
    # stdout is the manager's whole environment: not kept.
    probe = _run([exe, "--user", "show-environment"], env, keep_stdout=False)
    if probe.returncode != 0:
        result.service_manager = "unreachable"
        result.detail = f"no systemd user manager reachable ({probe.output or f'exit {probe.returncode}'})"
        return None
    return exe


def _systemd_activate(env: Mapping[str, str], result: ServiceResult) -> None:
    if result.outcome == "replaced":  # `enable --now` would leave the old definition running
        steps = [["daemon-reload"], ["enable", UNIT_NAME], ["restart", UNIT_NAME]]
    else:  # also when unchanged: a unit written where no manager was reachable gets started now
        steps = [["daemon-reload"], ["enable", "--now", UNIT_NAME]]
    result.next_steps = [_shell(["systemctl", "--user", *s]) for s in steps]
    exe = _systemctl(env, result)
    if exe is None:
        return
    for step in steps:
        run = _run([exe, "--user", *step], env)
        result.commands.append(run)
        if run.returncode != 0:
            _failed(result, run)
            return
    result.service_manager = "applied"
    result.next_steps = []


def _systemd_deactivate(env: Mapping[str, str], result: ServiceResult) -> None:
    # Run before the file is removed: `disable` needs the unit file.
    result.next_steps = [_shell(["systemctl", "--user", "stop", UNIT_NAME]), _shell(["systemctl", "--user", "daemon-reload"])]
    exe = _systemctl(env, result)
    if exe is None:
        return
    run = _run([exe, "--user", "disable", "--now", UNIT_NAME], env)
    result.commands.append(run)
    if run.returncode != 0:
        _failed(result, run)
        return
    result.service_manager = "applied"
    result.next_steps = []


def _systemd_after_remove(env: Mapping[str, str], result: ServiceResult) -> None:
    # `enable` links the unit from default.target.wants; without a manager
    # to `disable` it, that link would dangle once the unit is gone.
    link = os.path.join(os.path.dirname(result.path), "default.target.wants", UNIT_NAME)
    try:
        target = os.path.normpath(os.path.join(os.path.dirname(link), os.readlink(link)))
    except OSError:
        target = None
    if target == os.path.normpath(result.path):
        os.unlink(link)
    if result.service_manager == "applied":
        exe = shutil.which("systemctl", path=env.get("PATH", os.defpath))
        if exe is not None:
            run = _run([exe, "--user", "daemon-reload"], env)
            result.commands.append(run)
            if run.returncode != 0:
                _failed(result, run)


def _launchctl(env: Mapping[str, str], result: ServiceResult) -> str | None:
    exe = shutil.which("launchctl", path=env.get("PATH", os.defpath))
    if exe is None:
        result.service_manager = "unreachable"
        result.detail = "launchctl not found on PATH"
    return exe


def _launchd_loaded(exe: str, env: Mapping[str, str], domain: str) -> bool:
    # `print` exits non-zero when the label is not loaded; its output is long.
    return _run([exe, "print", f"{domain}/{LABEL}"], env, keep_stdout=False).returncode == 0


def _launchd_activate(env: Mapping[str, str], result: ServiceResult) -> None:
    domain = f"gui/{os.getuid()}"
    result.next_steps = [_shell(["launchctl", "bootstrap", domain, result.path])]
    exe = _launchctl(env, result)
    if exe is None:
        return
    loaded = _launchd_loaded(exe, env, domain)
    if loaded and result.outcome == "unchanged":
        result.service_manager = "applied"
        result.next_steps = []
        return
    if loaded:  # the old definition is loaded: take it out first
        result.commands.append(_run([exe, "bootout", f"{domain}/{LABEL}"], env))
    for attempt in range(3 if loaded else 1):
        # Right after a bootout, bootstrap can fail for a moment (EIO) while
        # launchd finishes removing the old job.
        if attempt:
            time.sleep(1.0)
        run = _run([exe, "bootstrap", domain, result.path], env)
        result.commands.append(run)
        if run.returncode == 0:
            break
    if run.returncode != 0:
        fallback = _run([exe, "load", "-w", result.path], env)
        result.commands.append(fallback)
        if fallback.returncode != 0:
            _failed(result, run)
            result.detail += f"; `{_shell(fallback.argv)}` also failed (exit {fallback.returncode}): {fallback.output or 'no output'}"
            return
    result.service_manager = "applied"
    result.next_steps = []


def _launchd_deactivate(env: Mapping[str, str], result: ServiceResult) -> None:
    domain = f"gui/{os.getuid()}"
    result.next_steps = [_shell(["launchctl", "bootout", f"{domain}/{LABEL}"])]
    exe = _launchctl(env, result)
    if exe is None:
        return
    if _launchd_loaded(exe, env, domain):
        run = _run([exe, "bootout", f"{domain}/{LABEL}"], env)
        result.commands.append(run)
        if run.returncode != 0:
            fallback = _run([exe, "unload", "-w", result.path], env)
            result.commands.append(fallback)
            if fallback.returncode != 0:
                _failed(result, run)
                result.detail += f"; `{_shell(fallback.argv)}` also failed (exit {fallback.returncode}): {fallback.output or 'no output'}"
                return
    result.service_manager = "applied"
    result.next_steps = []


# --- install / uninstall --------------------------------------------------


def install(
    platform: Platform | None = None,
    *,
    force: bool = False,
    activate: bool = True,
    environ: Mapping[str, str] | None = None,
    python: str | None = None,
) -> ServiceResult:
    """Write the service file (if needed) and enable and start the service.

    Raises :class:`ServiceConflict` when a different file, or one we did not
    write, is in the way and ``force`` is not set.
    """
    env = os.environ if environ is None else environ
    spec = service_spec(platform, environ=env, python=python)
    existing = _read(spec.path)
    if existing == spec.content:
        outcome: Outcome = "unchanged"
    elif existing is None:
        outcome = "installed"
    elif not force:
        if is_ours(existing):
            raise ServiceConflict(
                f"{spec.path} was written by agentlog with different content (another interpreter or data root?); "
                "rerun with --force to replace it",
                spec.path,
            )
        raise ServiceConflict(f"{spec.path} exists and was not written by agentlog; rerun with --force to replace it", spec.path)
    else:
        outcome = "replaced"
    result = ServiceResult(
        action="install",
        platform=spec.platform,
        path=spec.path,
        outcome=outcome,
        data_root=spec.data_root,
        program_arguments=list(spec.program_arguments),
    )
    if outcome != "unchanged":
        os.makedirs(os.path.dirname(spec.path), exist_ok=True)  # ordinary config directories: the umask decides
        write_atomic(spec.path, spec.content, FILE_MODE)
    # launchd opens the log before the daemon runs; the daemon would create the directory itself.
    ensure_dir(state_dir(spec.data_root))
    if activate:
        (_launchd_activate if spec.platform == "darwin" else _systemd_activate)(env, result)
    return result


def uninstall(
    platform: Platform | None = None,
    *,
    force: bool = False,
    deactivate: bool = True,
    environ: Mapping[str, str] | None = None,
) -> ServiceResult:
    """Stop and disable the service, then remove its file; a no-op when there is none.

    Raises :class:`ServiceConflict` when the file there is not ours and
    ``force`` is not set.
    """
    env = os.environ if environ is None else environ
    plat = current_platform() if platform is None else current_platform(platform)
    # Not service_spec(): nothing is rendered, so an interpreter path systemd
    # would refuse cannot stand in the way of removing the file.
    path = service_path(plat, env)
    existing = _read(path)
    result = ServiceResult(
        action="uninstall",
        platform=plat,
        path=path,
        outcome="not_installed" if existing is None else "removed",
        data_root=default_data_root(dict(env)),
        program_arguments=program_arguments(),
    )
    if existing is None:
        return result
    if not is_ours(existing) and not force:
        raise ServiceConflict(f"{path} was not written by agentlog; rerun with --force to remove it", path)
    if deactivate:
        (_launchd_deactivate if plat == "darwin" else _systemd_deactivate)(env, result)
    _remove(path)
    if plat == "linux":
        _systemd_after_remove(env, result)
    return result


__all__ = [
    "CommandRun",
    "LABEL",
    "MARKER",
    "PLATFORMS",
    "Platform",
    "ServiceConflict",
    "ServiceError",
    "ServiceResult",
    "ServiceSpec",
    "UNIT_NAME",
    "current_platform",
    "install",
    "is_ours",
    "program_arguments",
    "render_launchd_plist",
    "render_systemd_unit",
    "service_path",
    "service_spec",
    "systemd_word",
    "uninstall",
]
