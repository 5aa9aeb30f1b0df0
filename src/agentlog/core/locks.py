"""Exclusive file locks with a deadline, and :class:`Busy`, the error of every lock not had in time.

Every lock agentlog takes between processes is a ``flock`` on a file under the data
root's ``state/`` (or beside a config file). Each layer raises its own subclass of
:class:`Busy` so a message can say who is busy (``SealBusy``, ``ProjectionBusy``,
``RebuildBusy`` …); a caller that only needs "try again later" catches ``Busy``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time

from agentlog.core import AgentlogError

POLL_S = 0.05
"""How often a waiter tries the lock again."""


class Busy(AgentlogError, RuntimeError):
    """Another process holds a lock this one needed, for longer than it would wait: exit 1."""


def try_flock(fd: int, deadline: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, trying until ``deadline`` (``time.monotonic``);
    False when it was not had in time. Errors other than "held by another" propagate."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def open_locked(path: str, timeout: float, mode: int = 0o600) -> int | None:
    """An fd of ``path`` (created when missing) holding its exclusive lock, to close when done;
    None when another process held it for ``timeout`` seconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
    try:
        if try_flock(fd, time.monotonic() + timeout):
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None
