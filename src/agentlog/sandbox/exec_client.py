"""The command a run's shell commands are rewritten to: the native client, else the Python one.

The native client (``native/agentlog_exec.c``) is compiled with the machine's C compiler
(``$CC``, ``cc``, ``gcc``, ``clang``) into ``<data root>/bin/agentlog-exec-<key>``, the key
being the SHA-256 prefix of the source and the compiler; a later run reuses it. A Python
interpreter's start costs ~20-30 ms per command, the native client ~1 ms (docs/sandbox.md).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys

from agentlog.core.paths import ensure_dir

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native", "agentlog_exec.c")
PY_CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client.py")
FLAGS = ("-O2", "-std=c11", "-Wall", "-Wextra")


def _compiler() -> list[str] | None:
    cc = os.environ.get("CC", "").strip()
    words = shlex.split(cc) if cc else []
    if words and shutil.which(words[0]):
        return words
    for name in ("cc", "gcc", "clang"):
        exe = shutil.which(name)
        if exe:
            return [exe]
    return None


def native_client(root: str) -> str | None:
    """The built native client (building it when missing); None without a working compiler."""
    cc = _compiler()
    if cc is None:
        return None
    with open(SOURCE, "rb") as fh:
        source = fh.read()
    key = hashlib.sha256(source + "\0".join(cc + list(FLAGS)).encode()).hexdigest()[:16]
    bindir = os.path.join(root, "bin")
    target = os.path.join(bindir, f"agentlog-exec-{key}")
    if os.path.isfile(target) and os.access(target, os.X_OK):
        return target
    ensure_dir(bindir)
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        r = subprocess.run([*cc, *FLAGS, "-o", tmp, SOURCE], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None
    os.chmod(tmp, 0o700)
    os.replace(tmp, target)
    return target


def client_argv(root: str) -> list[str]:
    """argv prefix of ``agentlog exec`` for this run: the native client, else the Python one."""
    native = native_client(root)
    if native is not None:
        return [native]
    return [sys.executable, "-I", "-S", PY_CLIENT]


def rewrite(argv: list[str], command: str) -> str:
    """The shell command that runs ``command`` through the broker."""
    return " ".join(shlex.quote(a) for a in argv) + " -c " + shlex.quote(command)
