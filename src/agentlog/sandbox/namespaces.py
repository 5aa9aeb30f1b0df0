"""The run's own PID and mount namespaces (docs/sandbox.md "Namespaces").

Two things Landlock cannot do, done with namespaces:

- **Nothing outlives the run, even a SIGKILL of it.** ``agentlog run`` (the *keeper*) forks the
  run's init: PID 1 of a new PID namespace, with ``PR_SET_PDEATHSIG`` = SIGKILL. When the keeper
  dies, however it dies, the init gets SIGKILL, and when a PID namespace's init dies the kernel
  kills every process in it: the agent, its commands, their daemons (``setsid`` and double forks
  do not leave a PID namespace).
- **The agents' project-level hook and settings directories are read-only.** Landlock grants a
  whole subtree and cannot take ``<project>/.claude`` back out of a writable project without
  taking away every new entry at the project's top level (see :mod:`agentlog.sandbox.policy`). In
  the init's own mount namespace those directories are bind-mounted read-only over themselves;
  a missing one is first made (empty) as the mount point, so it cannot be created either, and
  removed again when the run ends. Landlock forbids a confined process to unmount or remount.

A user who is not root gets a user namespace first, mapping only their own uid and gid onto
themselves (so files keep their owner, ``id`` shows the same uid); the capabilities it gives are
dropped at the agent's exec. Everything here is ctypes over libc: Python 3.11 has no
``os.unshare``.
"""

from __future__ import annotations

import ctypes
import errno
import os

from agentlog.core import AgentlogError

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
PR_SET_PDEATHSIG = 1

_ST_TO_MS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
             (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
"""A bind mount's flags that must be kept when it is remounted (a user namespace locks them)."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_libc.unshare.argtypes = [ctypes.c_int]


class NamespaceError(AgentlogError):
    """A namespace or mount the run needs could not be made."""


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise NamespaceError(f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def disabled() -> bool:
    """``AGENTLOG_RUN_NO_NAMESPACES=1``: run without them (the fallback, also what a kernel
    without user namespaces gets)."""
    return os.environ.get("AGENTLOG_RUN_NO_NAMESPACES", "") not in ("", "0")


def enter_pid_namespace() -> None:
    """Make this process's next child the init of a new PID namespace (in a user namespace of
    its own first when this is not root). Call with one thread, before any other fork.
    :class:`NamespaceError` when the kernel refuses (nothing changed then)."""
    uid, gid = os.getuid(), os.getgid()
    if os.geteuid() == 0 and _libc.unshare(CLONE_NEWPID) == 0:
        return
    # a user, or root without CAP_SYS_ADMIN
    _check(_libc.unshare(CLONE_NEWPID | CLONE_NEWUSER), "unshare (a user and a PID namespace)")
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as e:  # past the unshare there is no way back: refuse rather than run half-made
        raise AgentlogError(f"agentlog run: mapping the user namespace failed: {e}") from e


def die_with_parent(keeper_alive_fd: int) -> None:
    """In the init: SIGKILL when the keeper dies; exit now if it already has (``keeper_alive_fd``
    is the read end of a pipe whose write end only the keeper holds)."""
    import select
    import signal

    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    p = select.poll()
    p.register(keeper_alive_fd, select.POLLIN)
    if p.poll(0):
        os._exit(137)


def isolate_mounts(read_only: list[str]) -> None:
    """In the init: a private mount namespace, a ``/proc`` of the new PID namespace (the broker
    reads its peers' ancestry there), and each path of ``read_only`` bind-mounted read-only over
    itself."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare (a mount namespace)")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mounting /proc")
    for path in read_only:
        target = os.fsencode(path)
        _check(_libc.mount(target, target, None, MS_BIND, None), f"bind-mounting {path}")
        kept = 0
        f_flag = os.statvfs(path).f_flag
        for st, ms in _ST_TO_MS:
            if f_flag & st:
                kept |= ms
        _check(_libc.mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | kept, None),
               f"making {path} read-only")


def mount_points(paths: list[str], file_names: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The paths to mount read-only, and those of them made here: a missing one is made as an
    empty directory (its mount point), unless its name is one of ``file_names`` (a file is guarded
    only when it exists). A dangling symbolic link is refused (its target would be made wherever
    it points)."""
    for p in paths:
        if os.path.islink(p) and not os.path.exists(p):
            raise NamespaceError(f"{p} is a dangling symbolic link; remove it (or make its target) and start again")
    guard: list[str] = []
    made: list[str] = []
    for p in paths:
        if not os.path.lexists(p):
            if os.path.basename(p) in file_names:
                continue
            try:
                os.mkdir(p, 0o755)
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                    continue  # what this user cannot make, the agent (the same user, confined) cannot either
                for m in made:
                    os.rmdir(m)
                raise NamespaceError(f"cannot make the mount point {p}: {e.strerror}") from e
            made.append(p)
        guard.append(p)
    return guard, made
