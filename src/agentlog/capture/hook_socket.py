"""Where the capture server listens, and who may talk to it (docs/hook-path.md, "Where the socket is").

``<data root>/run/hook.sock``: the run directory is the user's own, 0700, never a symbolic
link; a socket a dead server left there is replaced, a live one is not; every peer's uid
is read from the kernel (SO_PEERCRED) and compared with ours. ``probe`` tells whether a
server reads the socket, without recording anything.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys

from agentlog.capture import wire
from agentlog.core import AgentlogError
from agentlog.core.paths import ensure_dir

RUN_DIR = "run"
SOCKET_NAME = "hook.sock"


class CaptureServerError(AgentlogError):
    """The capture server cannot serve: an unsafe run directory, another server answering…"""


def run_dir(root: str) -> str:
    return os.path.join(root, RUN_DIR)


def socket_path(root: str) -> str:
    return os.path.join(run_dir(root), SOCKET_NAME)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (None when it cannot be told)."""
    try:
        if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
            data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return int(struct.unpack("3i", data)[1])
        if sys.platform == "darwin":  # LOCAL_PEERCRED on SOL_LOCAL: struct xucred {version, uid, …}; untested here
            data = sock.getsockopt(0, 0x001, 76)
            return int(struct.unpack_from("2I", data)[1])
    except OSError:
        pass
    return None


def prepare_run_dir(root: str) -> str:
    """``<root>/run``, made 0700 if missing; refused (CaptureServerError) when it is a symbolic
    link, not a directory, or another user's."""
    ensure_dir(root)
    d = run_dir(root)
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode):
        raise CaptureServerError(f"{d} is a symbolic link: refusing to serve hooks there (remove it; the daemon "
                                 "makes the directory itself)")
    if not stat.S_ISDIR(st.st_mode):
        raise CaptureServerError(f"{d} is not a directory: refusing to serve hooks there")
    if st.st_uid != os.getuid():
        raise CaptureServerError(f"{d} belongs to uid {st.st_uid}, not to this user: refusing to serve hooks there")
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise CaptureServerError(f"{d} changed while it was checked: refusing to serve hooks there")
        if now.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return d


def remove_stale(path: str) -> None:
    """Remove a socket left by a server that is gone; refuse to displace one that answers."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISSOCK(st.st_mode):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(0.5)
        try:
            s.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            pass  # nobody listens: stale
        except OSError as e:
            raise CaptureServerError(f"{path}: a server may still be there ({e})") from e
        else:
            raise CaptureServerError(f"another capture server is answering on {path}")
        finally:
            s.close()
    elif not stat.S_ISLNK(st.st_mode):
        raise CaptureServerError(f"{path} is not a socket: refusing to replace it")
    os.unlink(path)


def probe(root: str, timeout: float = 1.0) -> bool:
    """Whether a server reads ``hook.sock`` and answers: it must close ``wire.PROBE`` (a request
    of no fields, which records nothing) within ``timeout``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(socket_path(root))
        s.sendall(wire.PROBE)  # closed unanswered
        got = s.recv(16)
        return got == b"" or got.startswith(wire.RESPONSE_MAGIC)  # closed, or answered 'F' when full
    except OSError:
        return False
    finally:
        s.close()
