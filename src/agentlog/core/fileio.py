"""Replacing a file atomically (not on the hook path: it uses ``os`` and ``tempfile``)."""

from __future__ import annotations

import os
import tempfile

from agentlog.core.paths import fsync_path


def write_atomic(path: str, data: bytes, mode: int) -> None:
    """Replace ``path`` with ``data``: a temp file in the same directory, chmod
    ``mode``, fsync, rename over ``path``, fsync the directory. The temp file
    is removed on any failure."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".agentlog-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_path(directory)
