"""The parts of ``os`` the hook path uses, without importing ``os``.

``import os`` costs about 2 ms on our CI machine (it loads
``_collections_abc``, ``posixpath``, ``stat`` …), which is most of the hook's
budget above a bare interpreter. In a process that has not loaded ``os`` (the
hook, started with ``-I -S``) this module serves the same calls from the
built-in ``posix`` module with small POSIX-only path helpers. Anywhere ``os``
is already loaded (the CLI, tests), or off POSIX, the names below *are* the
``os`` ones, so behaviour cannot differ where both are used.

Usage on the hook path: ``from agentlog.core import oslite as os``.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False

__all__ = [
    "O_APPEND", "O_CLOEXEC", "O_CREAT", "O_DIRECTORY", "O_EXCL", "O_NOFOLLOW", "O_RDONLY", "O_RDWR", "O_TRUNC", "O_WRONLY",
    "close", "environ", "fdatasync", "fstat", "fsync", "ftruncate", "getcwd", "getpid", "getuid",
    "listdir", "mkdir", "open", "path", "posix_spawn", "POSIX_SPAWN_OPEN", "pread", "pwrite", "read", "replace",
    "stat", "urandom", "write", "LEAN",
]

if TYPE_CHECKING or "os" in sys.modules or "posix" not in sys.builtin_module_names:
    import os as _os
    from os import (
        POSIX_SPAWN_OPEN,
        O_APPEND,
        O_CLOEXEC,
        O_CREAT,
        O_DIRECTORY,
        O_EXCL,
        O_NOFOLLOW,
        O_RDONLY,
        O_RDWR,
        O_TRUNC,
        O_WRONLY,
        close,
        fdatasync,
        fstat,
        fsync,
        ftruncate,
        getcwd,
        getpid,
        getuid,
        listdir,
        mkdir,
        posix_spawn,
        pread,
        pwrite,
        read,
        replace,
        stat,
        urandom,
        write,
    )
    from os import open as open  # noqa: A004 - same name as os.open on purpose

    environ = _os.environ
    path = _os.path
    LEAN = False
else:
    import posix as _p

    O_APPEND = _p.O_APPEND
    O_CLOEXEC = getattr(_p, "O_CLOEXEC", 0)
    O_CREAT = _p.O_CREAT
    O_DIRECTORY = _p.O_DIRECTORY
    O_EXCL = _p.O_EXCL
    O_NOFOLLOW = _p.O_NOFOLLOW
    O_RDONLY = _p.O_RDONLY
    O_RDWR = _p.O_RDWR
    O_TRUNC = _p.O_TRUNC
    O_WRONLY = _p.O_WRONLY
    close = _p.close
    fdatasync = getattr(_p, "fdatasync", _p.fsync)  # macOS has no fdatasync
    fstat = _p.fstat
    fsync = _p.fsync
    ftruncate = _p.ftruncate
    getcwd = _p.getcwd
    getpid = _p.getpid
    getuid = _p.getuid
    listdir = _p.listdir
    mkdir = _p.mkdir
    open = _p.open  # noqa: A001
    posix_spawn = _p.posix_spawn
    POSIX_SPAWN_OPEN = _p.POSIX_SPAWN_OPEN
    pread = _p.pread
    pwrite = _p.pwrite
    read = _p.read
    replace = _p.replace
    stat = _p.stat
    urandom = _p.urandom
    write = _p.write

    environ = {
        k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape") for k, v in _p.environ.items()
    }
    LEAN = True

    class _Path:
        """POSIX path helpers with ``os.path`` semantics for the calls we make."""

        sep = "/"

        @staticmethod
        def join(a: str, *parts: str) -> str:
            out = a
            for b in parts:
                if b.startswith("/"):
                    out = b
                elif not out or out.endswith("/"):
                    out += b
                else:
                    out += "/" + b
            return out

        @staticmethod
        def split(p: str) -> tuple[str, str]:
            i = p.rfind("/") + 1
            head, tail = p[:i], p[i:]
            if head and head != "/" * len(head):
                head = head.rstrip("/")
            return head, tail

        @staticmethod
        def dirname(p: str) -> str:
            return _Path.split(p)[0]

        @staticmethod
        def basename(p: str) -> str:
            return p[p.rfind("/") + 1 :]

        @staticmethod
        def isabs(p: str) -> bool:
            return p.startswith("/")

        @staticmethod
        def normpath(p: str) -> str:
            if not p:
                return "."
            initial = 2 if p.startswith("//") and not p.startswith("///") else 1 if p.startswith("/") else 0
            comps: list[str] = []
            for c in p.split("/"):
                if c in ("", "."):
                    continue
                if c != ".." or (not initial and not comps) or (comps and comps[-1] == ".."):
                    comps.append(c)
                elif comps:
                    comps.pop()
            out = "/" * initial + "/".join(comps)
            return out or "."

        @staticmethod
        def abspath(p: str) -> str:
            if not p.startswith("/"):
                p = _Path.join(_p.getcwd(), p)
            return _Path.normpath(p)

        @staticmethod
        def expanduser(p: str) -> str:
            if not p.startswith("~"):
                return p
            i = p.find("/", 1)
            if i < 0:
                i = len(p)
            if i != 1:  # ~user: leave it to the real os.path
                import os.path as real

                return real.expanduser(p)
            home = environ.get("HOME")
            if home is None:
                import os.path as real

                return real.expanduser(p)
            home = home.rstrip("/") or "/"
            return (home + p[i:]) or "/"

        @staticmethod
        def _mode(p: str) -> int | None:
            try:
                return _p.stat(p).st_mode
            except (OSError, ValueError):
                return None

        @staticmethod
        def isdir(p: str) -> bool:
            m = _Path._mode(p)
            return m is not None and (m & 0o170000) == 0o040000

        @staticmethod
        def isfile(p: str) -> bool:
            m = _Path._mode(p)
            return m is not None and (m & 0o170000) == 0o100000

        @staticmethod
        def exists(p: str) -> bool:
            return _Path._mode(p) is not None

    path = _Path()  # type: ignore[assignment]
