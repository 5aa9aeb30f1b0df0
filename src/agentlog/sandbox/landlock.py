"""Landlock through its three system calls (ctypes), no third-party package.

Why not the PyPI ``landlock`` package: at the time of writing it is a 1.0.0 dev
pre-release with few users, and we need exactly what it does not promise: the
net rules (ABI 4), the signal and abstract-socket scopes (ABI 6), and a ruleset
built in one process (the broker) and applied in another between fork and exec.
The kernel interface is three syscalls and three small structs
(Documentation/userspace-api/landlock.rst); this module is that, nothing more.

A ruleset is built once (:class:`Ruleset`) and its file descriptor applied by
:func:`restrict_self` in a child after ``fork``: that function only calls
``prctl`` and one syscall, with every ctypes object made beforehand.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from dataclasses import dataclass

from agentlog.core import AgentlogError

# Same numbers on every architecture (the generic syscall table).
SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1

# Filesystem access rights, by the ABI that brought them.
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FS_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
"""The rights a rule on a non-directory may carry (any other is EINVAL)."""


def fs_rights(abi: int) -> int:
    """Every filesystem right the kernel of ``abi`` knows."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    if abi >= 5:
        rights |= FS_IOCTL_DEV
    return rights


FS_WRITE = fs_rights(5) & ~FS_READ & ~(FS_MAKE_CHAR | FS_MAKE_BLOCK)
"""Every right that changes the filesystem (masked by the ABI when a ruleset is made), but making
device nodes: no agent needs one, and one made by root would reach the disk around any policy."""


class LandlockUnavailable(AgentlogError):
    """The kernel has no Landlock (or it is disabled): agentlog run refuses rather than run unconfined."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if platform.system() != "Linux":
        return 0
    r = _syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return int(r) if r > 0 else 0


def require_abi(minimum: int = 1) -> int:
    """The ABI version, or :class:`LandlockUnavailable` with what to do about it."""
    abi = abi_version()
    if abi < minimum:
        raise LandlockUnavailable(
            "this kernel has no usable Landlock (Linux 5.13+ with landlock in the `lsm=` boot list is needed; "
            f"found ABI {abi}); agentlog run will not start the agent unconfined")
    return abi


def _raise(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"landlock {what}: {os.strerror(err)}")


@dataclass
class Ruleset:
    """An open Landlock ruleset: add rules, then apply it with :func:`restrict_self` (any number of times)."""

    fd: int
    abi: int
    handled_fs: int
    handled_net: int
    rules: int = 0

    @classmethod
    def create(cls, abi: int, *, net_access: int, scoped: bool = True) -> Ruleset:
        """A ruleset handling every filesystem right of ``abi``, the TCP rights ``net_access``
        (NET_BIND_TCP, NET_CONNECT_TCP; ABI 4+), and the signal and abstract-socket scopes when
        ``scoped`` (ABI 6+)."""
        handled_fs = fs_rights(abi)
        handled_net = net_access if abi >= 4 else 0
        scope = (SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET) if scoped and abi >= 6 else 0
        attr = _RulesetAttr(handled_fs, handled_net, scope)
        size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
        fd = _syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
        if fd < 0:
            _raise("create_ruleset")
        os.set_inheritable(int(fd), False)
        return cls(int(fd), abi, handled_fs, handled_net)

    def add_path(self, path: str, access: int, *, is_dir: bool) -> bool:
        """Allow ``access`` beneath ``path`` (never following a final symbolic link). False when
        the path vanished or is not what ``is_dir`` says."""
        access &= self.handled_fs if is_dir else (self.handled_fs & FS_FILE_ONLY)
        if not access:
            return False
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_DIRECTORY if is_dir else 0))
        except OSError:
            return False
        try:
            attr = _PathBeneath(access, pfd)
            r = _syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(self.fd), ctypes.c_int(RULE_PATH_BENEATH),
                         ctypes.byref(attr), ctypes.c_uint32(0))
            if r < 0:
                if ctypes.get_errno() in (errno.EINVAL, errno.EBADFD):  # a symlink or special file raced in
                    return False
                _raise(f"add_rule {path!r}")
        finally:
            os.close(pfd)
        self.rules += 1
        return True

    def add_port(self, port: int, access: int) -> None:
        """Allow ``access`` (NET_BIND_TCP / NET_CONNECT_TCP) on TCP ``port``."""
        access &= self.handled_net
        if not access:
            return
        attr = _NetPort(access, port)
        r = _syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(self.fd), ctypes.c_int(RULE_NET_PORT),
                     ctypes.byref(attr), ctypes.c_uint32(0))
        if r < 0:
            _raise(f"add_rule port {port}")
        self.rules += 1

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def preexec(self, parent_death_signal: int = 0) -> _Apply:
        """A callable for ``subprocess.Popen(preexec_fn=…)`` that confines the child with this ruleset
        (and, given a signal, has the kernel send it to the child when its parent dies)."""
        return _Apply(self.fd, parent_death_signal)


_signal = _libc.signal
_signal.restype = ctypes.c_void_p
_signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
DEFAULT_SIGNALS = (2, 3, 15, 1)
"""SIGINT, SIGQUIT, SIGTERM, SIGHUP: back to their default in the child (``agentlog run`` ignores
SIGINT, and an ignored signal stays ignored across exec)."""


class _Apply:
    """Confine the calling process: default signal dispositions, no_new_privs, then
    landlock_restrict_self. Made in the parent; called in the child between fork and exec (in
    any thread: libc's ``signal``, not Python's), where it does system calls and nothing else."""

    def __init__(self, fd: int, parent_death_signal: int = 0) -> None:
        self._pdeath = (ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(parent_death_signal), ctypes.c_ulong(0),
                        ctypes.c_ulong(0), ctypes.c_ulong(0)) if parent_death_signal else None
        self._args = (ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0))
        self._nnp = (ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                     ctypes.c_ulong(0))

    def __call__(self) -> None:
        for sig in DEFAULT_SIGNALS:
            _signal(sig, None)
        if self._pdeath is not None:
            _prctl(*self._pdeath)
        if _prctl(*self._nnp) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if _syscall(*self._args) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")


def restrict_self(ruleset: Ruleset) -> None:
    """Confine this process (and every process it starts) with ``ruleset``; irreversible."""
    ruleset.preexec()()
