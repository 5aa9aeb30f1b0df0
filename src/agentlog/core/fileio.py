"""Replacing a file atomically, and measuring a directory (not on the hook path:
it uses ``os``; :mod:`agentlog.core.config` imports it only when
it rewrites its cache).

Every "write a temp file, rename it over the target" in agentlog goes through
:func:`atomic_writer` (or :func:`write_atomic` / :func:`write_json_atomic` on
top of it): a unique temp file in the target's directory (``mkstemp``, so two
writers never share one), ``chmod`` to ``mode``, the data, ``fsync``, rename,
``fsync`` of the directory. ``durable=False`` skips both fsyncs: for caches
and other files that are derived from data kept elsewhere, where a crash may
lose the new version (the old one, or none, stays whole) and the caller
recomputes it. Whatever goes wrong, the temp file is removed.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, BinaryIO, Final, Iterator

from agentlog.core.paths import FILE_MODE, fsync_path

TMP_SUFFIX: Final = ".agentlog-tmp"
"""The end of every temp file name :func:`atomic_writer` makes (unless told another)."""


class Discard(Exception):
    """Raise inside :func:`atomic_writer`'s block to leave the target as it is:
    the temp file is removed and the exception goes no further."""


@contextmanager
def atomic_writer(
    path: str, mode: int = FILE_MODE, durable: bool = True, *, suffix: str = TMP_SUFFIX
) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content to; on a normal exit it
    replaces ``path`` (fsynced with its directory when ``durable``), on an
    exception it is removed and ``path`` is left as it was.

    The temp file is ``.<name>.<random><suffix>`` beside ``path`` (a caller
    whose directory is swept for leftovers by name passes its own ``suffix``).
    The block must not close the file (a writer that wraps it may flush it)."""
    directory = os.path.dirname(path) or "."
    fd, tmp = _create_temp(directory, os.path.basename(path), suffix, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            yield fh
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except Discard:
        unlink_if_present(tmp)
        return
    except BaseException:
        unlink_if_present(tmp)
        raise
    if durable:
        fsync_path(directory)


def _create_temp(directory: str, name: str, suffix: str, mode: int) -> tuple[int, str]:
    """A new file ``.<name>.<random><suffix>`` in ``directory``, opened exclusively: what
    ``tempfile.mkstemp`` does, without importing ``tempfile`` (~3 ms with what it imports, in
    every short command whose catch-up rewrites a state file)."""
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {os.path.join(directory, name)}")


def write_atomic(path: str, data: bytes, mode: int = FILE_MODE, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` (see :func:`atomic_writer`)."""
    with atomic_writer(path, mode, durable) as fh:
        fh.write(data)


def write_json_atomic(
    path: str, obj: Any, mode: int = FILE_MODE, durable: bool = True, *, sort_keys: bool = False
) -> None:
    """Replace ``path`` with ``obj`` as compact JSON (:func:`agentlog.core.jsonio.dumps`)."""
    from agentlog.core.jsonio import dumps

    write_atomic(path, dumps(obj, sort_keys=sort_keys), mode, durable)


def dir_usage(path: str) -> tuple[int, int]:
    """(bytes, files) of the files under ``path`` (symbolic links counted as
    themselves, not followed; a file gone meanwhile is skipped; a missing
    ``path`` is (0, 0))."""
    total = files = 0
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
                files += 1
            except OSError:
                pass
    return total, files


def dir_size(path: str) -> int:
    """Bytes of the files under ``path`` (see :func:`dir_usage`)."""
    return dir_usage(path)[0]


def read_small(path: str, limit: int = 1 << 16) -> bytes | None:
    """The first ``limit`` bytes of a small file (a state or head file), None when it is
    not there: one open, one read, one close, without a buffered file object (a pass
    over a thousand sessions reads two such files each)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def unlink_if_present(path: str) -> None:
    """Remove ``path``; nothing when it is already gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


__all__ = ["Discard", "TMP_SUFFIX", "atomic_writer", "dir_size", "dir_usage", "unlink_if_present", "write_atomic", "write_json_atomic"]


@contextmanager
def private_files() -> Iterator[None]:
    """Files and directories created inside are private (umask 077): for writers that do not
    take a mode (deltalake, pyarrow). The umask is process-wide; it is restored after."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)
