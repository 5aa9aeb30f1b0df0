"""Build the native hook client ``agentlog-hook`` on the user's machine (issue 29).

The client is one C file shipped in the package
(``capture/native/agentlog_hook.c``), compiled here with whatever C compiler
the machine has: ``$CC``, ``cc``, ``gcc`` or ``clang`` on ``PATH``, else the
``ziglang`` package (``pip install 'agentlog[native]'``) through
``python -m ziglang cc``. The two paths of its fallback (this interpreter and
the package's ``_hook.py``, exactly what :func:`agentlog.capture.command.hook_argv`
runs today) are compiled in as C string literals.

The binary is cached as ``<data root>/bin/agentlog-hook-<key>``, the key being
the first 16 hex digits of the SHA-256 of everything that shapes it (the
source, the compiler's identity, the flags, the two paths): building again
with nothing changed reuses it, and any change gives a new name, never a
binary replaced under a running agent. Binaries of other keys are removed,
except those an agent's config still names (install/hook_refs.py): removing
one would make that agent's hook fail (exit 127) and lose its events. A
binary no config names is kept for :data:`RETIRE_AFTER_S` more (the first
cleanup that finds it unnamed notes the time in ``state/hook-retired.json``):
an agent reads its hooks when a session starts, so a session started before
``install`` rewrote the config still runs the old binary.

``-Werror`` is kept, but a newer compiler's new warning must not cost the
user the native client: when the build fails and the same command without
``-Werror`` succeeds, that build is used (its key differs) and the result
says so (``BuildResult.warnings``).

No compiler is not an error: :func:`build_client` then returns no path and a
plain reason, and the hooks stay on the Python path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentlog.capture.command import hook_script
from agentlog.core.fileio import write_atomic
from agentlog.core.paths import FILE_MODE, ensure_dir, state_dir
from agentlog.install.hook_refs import named_clients

SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "capture", "native",
                      "agentlog_hook.c")
FLAGS: tuple[str, ...] = ("-O2", "-std=c11", "-Wall", "-Wextra", "-Werror")
BINARY_PREFIX = "agentlog-hook-"
NO_COMPILER = "no C compiler found (cc, gcc, clang, ziglang)"
WITHOUT_WERROR = "the compiler warns about the client's source, so it was built without -Werror"
COMPILE_TIMEOUT_S = 120.0
ERROR_LINES = 6  # of the compiler's output, in a failed build's reason
_TEMP_PREFIX = ".agentlog-hook-"
_STALE_TEMP_S = 3600.0  # a temporary binary older than this is a build that died
RETIRE_AFTER_S = 7 * 86400.0
"""How long a binary no config names is kept: sessions started before the configs changed still run it."""
RETIRED_FILE = "hook-retired.json"


@dataclass(frozen=True)
class BuildResult:
    """The outcome of :func:`build_client`: a path, or why there is none."""

    path: str | None
    """The client binary, ready to run; None when it could not be built."""
    reason: str = ""
    """Why there is no path, in plain words (empty when there is one)."""
    compiler: tuple[str, ...] = ()
    """The compiler command used (or that failed)."""
    cached: bool = False
    """Whether an existing binary was reused."""
    warnings: str = ""
    """Set when the client was built without ``-Werror`` (the compiler's warnings, or why)."""


@dataclass(frozen=True)
class Compiler:
    command: tuple[str, ...]
    """argv prefix, e.g. ``("/usr/bin/cc",)`` or ``(python, "-m", "ziglang", "cc")``."""
    identity: str
    """What ``--version`` printed (part of the cache key)."""


def _identify(command: Sequence[str], environ: Mapping[str, str]) -> Compiler | None:
    try:
        r = subprocess.run([*command, "--version"], capture_output=True, timeout=60, env=dict(environ),
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return Compiler(tuple(command), r.stdout.decode("utf-8", "replace").strip())


def find_compiler(environ: Mapping[str, str] | None = None) -> Compiler | None:
    """The first C compiler that answers ``--version``: ``$CC``, ``cc``, ``gcc``, ``clang``, then ``ziglang``."""
    env = os.environ if environ is None else environ
    path = env.get("PATH")
    candidates: list[list[str]] = []
    cc_var = env.get("CC", "").strip()
    if cc_var:
        try:
            words = shlex.split(cc_var)
        except ValueError:
            words = []
        if words and (exe := shutil.which(words[0], path=path)):
            candidates.append([exe, *words[1:]])
    for name in ("cc", "gcc", "clang"):
        if exe := shutil.which(name, path=path):
            candidates.append([exe])
    for command in candidates:
        found = _identify(command, env)
        if found is not None:
            return found
    if sys.executable and importlib.util.find_spec("ziglang") is not None:
        return _identify([sys.executable, "-m", "ziglang", "cc"], env)
    return None


def c_string(value: str) -> str:
    """``value`` as a C string literal (quotes included), safe for any bytes: everything but
    letters, digits and ``/._-+,:@=%~ `` becomes a three-digit octal escape (no trigraph, no
    escape running into a following digit)."""
    out = ['"']
    for byte in os.fsencode(value):
        ch = chr(byte)
        if ch.isascii() and (ch.isalnum() or ch in "/._-+,:@=%~ "):
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    out.append('"')
    return "".join(out)


def cache_key(source: bytes, compiler: Compiler, flags: Sequence[str], python: str, hook: str) -> str:
    """16 hex digits naming one build."""
    h = hashlib.sha256()
    for part in (source, compiler.identity.encode(), "\0".join(compiler.command).encode(), "\0".join(flags).encode(),
                 os.fsencode(python), os.fsencode(hook)):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:16]


def _private_dir(path: str) -> str | None:
    """Make ``path`` a 0700 directory of ours; None, or why it cannot be."""
    try:
        ensure_dir(path)
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return f"{path} is not a directory of this user"
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
    except OSError as e:
        return f"cannot use {path}: {e.strerror or e}"
    return None


def _usable(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o100 != 0


def _read_retired(root: str) -> dict[str, float]:
    try:
        with open(os.path.join(state_dir(root), RETIRED_FILE), "rb") as f:
            obj = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(obj, dict):
        return {}
    return {k: float(v) for k, v in obj.items() if isinstance(k, str) and isinstance(v, (int, float))}


def remove_unused(root: str, keep: str = "", environ: Mapping[str, str] | None = None,
                  now: float | None = None) -> list[str]:
    """Remove ``root``'s client binaries that no config has named for :data:`RETIRE_AFTER_S`, never
    ``keep`` (none at all when a config cannot be read), and temporaries of builds that died; the
    names removed."""
    bin_dir = os.path.join(root, "bin")
    try:
        names = os.listdir(bin_dir)
    except OSError:
        return []
    named = named_clients(root, environ)
    now = time.time() if now is None else now
    retired = _read_retired(root)
    unnamed: dict[str, float] = {}
    removed: list[str] = []
    for name in names:
        path = os.path.join(bin_dir, name)
        try:
            if name.startswith(BINARY_PREFIX):
                if name == keep or named is None or name in named:
                    continue
                since = retired.get(name, now)
                if now - since < RETIRE_AFTER_S:
                    unnamed[name] = since
                    continue
                os.unlink(path)
                removed.append(name)
            elif name.startswith(_TEMP_PREFIX) and now - os.lstat(path).st_mtime > _STALE_TEMP_S:
                os.unlink(path)
        except OSError:
            pass
    if named is not None and unnamed != retired:
        try:
            ensure_dir(state_dir(root))
            write_atomic(os.path.join(state_dir(root), RETIRED_FILE), json.dumps(unnamed).encode(), FILE_MODE,
                         durable=False)
        except OSError:
            pass  # the times are noted again next time: a removal is only delayed
    return removed


def _first_lines(text: bytes) -> str:
    lines = [line.strip() for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
    return " | ".join(lines[:ERROR_LINES]) or "no output"


@dataclass(frozen=True)
class _Plan:
    compiler: Compiler
    strict: tuple[str, ...]
    """The flags with ``-Werror``."""
    lenient: tuple[str, ...]
    """The same without ``-Werror`` (tried when the strict build fails)."""
    names: dict[tuple[str, ...], str]
    """Binary file name per flag set."""


def _plan(python: str, hook: str, env: Mapping[str, str], extra_flags: Sequence[str]) -> _Plan | str:
    """What a build would use, or why there can be none."""
    if not python:
        return "this Python does not know its own interpreter path (sys.executable is empty)"
    try:
        with open(SOURCE, "rb") as f:
            source = f.read()
    except OSError as e:
        return f"the client's source is missing: {SOURCE}: {e.strerror or e}"
    compiler = find_compiler(env)
    if compiler is None:
        return NO_COMPILER
    strict = (*FLAGS, *extra_flags)
    lenient = tuple(f for f in strict if f != "-Werror")
    names = {flags: BINARY_PREFIX + cache_key(source, compiler, flags, python, hook) for flags in (strict, lenient)}
    return _Plan(compiler, strict, lenient, names)


def current_names(
    *, python: str | None = None, hook: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[tuple[str, ...], str]:
    """The file names a build would give the client now (with ``-Werror`` first, then without),
    or none and why (no compiler…). Reads the source and asks the compiler its version; builds nothing."""
    env = os.environ if environ is None else environ
    plan = _plan(sys.executable if python is None else python, hook_script() if hook is None else hook, env, ())
    if isinstance(plan, str):
        return (), plan
    return tuple(dict.fromkeys(plan.names[f] for f in (plan.strict, plan.lenient))), ""


def _compile(plan: _Plan, flags: tuple[str, ...], python: str, hook: str, out: str,
             env: Mapping[str, str]) -> subprocess.CompletedProcess[bytes]:
    argv = [*plan.compiler.command, *flags, f"-DAGENTLOG_PYTHON={c_string(python)}",
            f"-DAGENTLOG_HOOK_PY={c_string(hook)}", "-o", out, SOURCE]
    return subprocess.run(argv, capture_output=True, timeout=COMPILE_TIMEOUT_S, env=dict(env),
                          stdin=subprocess.DEVNULL)


def build_client(
    root: str,
    *,
    python: str | None = None,
    hook: str | None = None,
    environ: Mapping[str, str] | None = None,
    extra_flags: Sequence[str] = (),
) -> BuildResult:
    """Build (or reuse) the client for the data root ``root``.

    ``python`` and ``hook`` are the fallback's interpreter and script (default: this
    interpreter and the package's ``_hook.py``, as installed hooks run them today);
    ``extra_flags`` go to the compiler after the usual ones (both are part of the key).
    A build that fails with ``-Werror`` is tried once more without it (``warnings`` says so).
    Never raises for a missing or failing compiler: the result then has no path and a reason.
    """
    env = os.environ if environ is None else environ
    python = sys.executable if python is None else python
    hook = hook_script() if hook is None else hook
    plan = _plan(python, hook, env, extra_flags)
    if isinstance(plan, str):
        return BuildResult(None, plan)
    command = plan.compiler.command
    bin_dir = os.path.join(root, "bin")
    problem = _private_dir(bin_dir)
    if problem is not None:
        return BuildResult(None, problem, command)
    for flags in dict.fromkeys((plan.strict, plan.lenient)):  # a lenient build exists only where strict failed
        final = os.path.join(bin_dir, plan.names[flags])
        if _usable(final):
            remove_unused(root, plan.names[flags], env)
            return BuildResult(final, "", command, cached=True,
                               warnings="" if flags == plan.strict else WITHOUT_WERROR)

    try:
        fd, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".tmp", dir=bin_dir)
        os.close(fd)
    except OSError as e:
        return BuildResult(None, f"cannot write in {bin_dir}: {e.strerror or e}", command)
    flags, warnings = plan.strict, ""
    try:
        r = _compile(plan, flags, python, hook, temp, env)
        if r.returncode != 0 and plan.lenient != plan.strict:
            retry = _compile(plan, plan.lenient, python, hook, temp, env)
            if retry.returncode == 0:
                flags, warnings = plan.lenient, f"{WITHOUT_WERROR}: {_first_lines(r.stderr + r.stdout)}"
            r = retry
        if r.returncode != 0:
            return BuildResult(None, f"the C compiler failed: {_first_lines(r.stderr + r.stdout)}", command)
        final = os.path.join(bin_dir, plan.names[flags])
        os.chmod(temp, 0o700)
        os.replace(temp, final)
    except subprocess.TimeoutExpired:
        return BuildResult(None, f"the C compiler took over {COMPILE_TIMEOUT_S:.0f} s", command)
    except OSError as e:
        return BuildResult(None, f"could not build the client: {e.strerror or e}", command)
    finally:
        try:
            os.unlink(temp)
        except OSError:
            pass
    remove_unused(root, plan.names[flags], env)
    return BuildResult(final, "", command, warnings=warnings)
