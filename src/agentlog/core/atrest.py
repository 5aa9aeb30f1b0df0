"""Encryption at rest: where its files are, and whether it is on (docs/encryption.md).

Standard library only: the hook path asks :func:`key_id` on every append (one small read).

- ``<root>/state/keys/at-rest.id`` holds the data key's id (32 hex digits). It is there
  exactly when encryption at rest is on: new frames' ``content`` and ``raw`` are sealed.
- ``<root>/state/keys/at-rest.json`` holds the data key wrapped by key-encryption keys
  (``core/atrest_keys.py``); never the data key itself.
- The *unlocked* data key lives outside the data root, in memory-backed storage
  (:func:`runtime_dir`): ``<runtime>/<key id>-<root id>/data-key``, 0600, 32 bytes. It is written by
  ``agentlog keys init --at-rest`` and ``agentlog keys unlock`` and read by whatever writes
  frames (the hook, the capture server) or reads content (ingest). A reboot forgets it.
- The derived stores (Delta tables, projection, search and memory indexes) of a root with
  encryption at rest on live beside it, in ``<runtime>/<key id>-<root id>/derived/`` (:func:`derived_root`):
  captured text is kept there in plain form, but never on disk, and they are rebuilt from the
  (encrypted) logs after a reboot.
"""

from __future__ import annotations

from agentlog.core import AgentlogError
from agentlog.core import oslite as os
from agentlog.core.paths import DIR_MODE, FILE_MODE, ensure_dir

TYPE_CHECKING = False

KEYS_DIR = "keys"
ID_FILE = "at-rest.id"
WRAPS_FILE = "at-rest.json"
DATA_KEY_FILE = "data-key"
KEY_BYTES = 32
RUNTIME_ENV = "AGENTLOG_RUNTIME_DIR"
"""Overrides where unlocked keys and derived stores go (tests; a RAM disk of the user's choice)."""


class AtRestLockedError(AgentlogError):
    """Encryption at rest is on and the data key is not unlocked (the message says what to run)."""


def keys_dir(root: str) -> str:
    return os.path.join(root, "state", KEYS_DIR)


def id_path(root: str) -> str:
    return os.path.join(keys_dir(root), ID_FILE)


def wraps_path(root: str) -> str:
    return os.path.join(keys_dir(root), WRAPS_FILE)


def key_id(root: str) -> str | None:
    """The data key's id when encryption at rest is on for ``root``, else None."""
    try:
        fd = os.open(id_path(root), os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        text = os.read(fd, 128).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return text or None


def runtime_base(environ: dict[str, str] | None = None) -> str:
    """Memory-backed storage of the user's: ``$AGENTLOG_RUNTIME_DIR``, else ``/run/user/<uid>/agentlog``
    (systemd's per-user tmpfs, named by path so that a hook whose environment lacks
    ``XDG_RUNTIME_DIR`` finds the same place), else ``$XDG_RUNTIME_DIR/agentlog``, else
    ``/dev/shm/agentlog-<uid>``."""
    env = os.environ if environ is None else environ
    chosen = env.get(RUNTIME_ENV, "")
    if chosen:
        return os.path.abspath(chosen)
    uid = os.getuid()
    if os.path.isdir(f"/run/user/{uid}"):
        return f"/run/user/{uid}/agentlog"
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if xdg and os.path.isdir(xdg):
        return os.path.join(xdg, "agentlog")
    if os.path.isdir("/dev/shm"):
        return f"/dev/shm/agentlog-{uid}"
    raise AgentlogError("encryption at rest needs memory-backed storage for the unlocked key and the derived "
                        f"stores: set {RUNTIME_ENV} to a RAM disk (no /run/user, XDG_RUNTIME_DIR or /dev/shm here)")


def runtime_dir(root: str, kid: str, environ: dict[str, str] | None = None) -> str:
    """``<runtime base>/<key id>-<root id>``: the unlocked key and the derived stores of one data
    root (the root's path is in the name: a snapshot restored elsewhere has the same key id)."""
    if TYPE_CHECKING:
        from hashlib import sha256
    else:
        try:
            from _sha256 import sha256
        except ImportError:  # Python >= 3.12
            from _sha2 import sha256
    rid = sha256(os.path.abspath(root).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return os.path.join(runtime_base(environ), f"{kid}-{rid}")


def derived_root(root: str, *, create: bool = True) -> str:
    """Where ``root``'s derived stores live: ``root`` itself, or with encryption at rest on,
    ``<runtime>/<key id>-<root id>/derived`` (made 0700 on first use)."""
    kid = key_id(root)
    if kid is None:
        return root
    path = os.path.join(runtime_dir(root, kid), "derived")
    if create and not os.path.isdir(path):
        check_runtime_base()
        ensure_dir(path)
    return path


def derived_state_dir(root: str) -> str:
    """``state/`` of the derived stores (the search and memory indexes, ingest's offsets)."""
    return os.path.join(derived_root(root), "state")


def data_key_path(root: str, kid: str) -> str:
    return os.path.join(runtime_dir(root, kid), DATA_KEY_FILE)


def unlocked_key(root: str) -> tuple[str, bytes] | None:
    """(key id, data key) when encryption at rest is on and the key is unlocked; None when
    it is off. Raises :class:`AtRestLockedError` when it is on and the key is locked."""
    kid = key_id(root)
    if kid is None:
        return None
    try:
        fd = os.open(data_key_path(root, kid), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise AtRestLockedError(locked_message(root)) from None
    try:
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise AtRestLockedError(f"the unlocked data key of {root} is damaged: {locked_message(root)}")
    return kid, key


def data_keys(root: str) -> dict[str, bytes]:
    """The unlocked data keys by id, for opening sealed events (``{}`` when encryption at rest is
    off). Raises :class:`AtRestLockedError` when it is on and locked."""
    got = unlocked_key(root)
    return {} if got is None else {got[0]: got[1]}


def locked_message(root: str) -> str:
    return (f"captured content under {root} is encrypted at rest and its key is locked: run "
            "`agentlog keys unlock` (the OS keyring or your passphrase opens it)")


def store_unlocked_key(root: str, kid: str, key: bytes) -> str:
    """Write the unlocked data key (0600, in a 0700 directory of memory-backed storage)."""
    import os as _os  # not on the hook path

    d = runtime_dir(root, kid)
    check_runtime_base()
    ensure_dir(d)
    _os.chmod(d, DIR_MODE)
    path = _os.path.join(d, DATA_KEY_FILE)
    tmp = path + ".tmp"
    fd = _os.open(tmp, _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC | _os.O_CLOEXEC | _os.O_NOFOLLOW, FILE_MODE)
    try:
        _os.fchmod(fd, FILE_MODE)
        _os.write(fd, key)
    finally:
        _os.close(fd)
    _os.replace(tmp, path)
    return path


def forget_unlocked_key(root: str, kid: str) -> bool:
    """Remove the unlocked data key; whether there was one."""
    import os as _os

    try:
        _os.unlink(data_key_path(root, kid))
        return True
    except FileNotFoundError:
        return False


def check_runtime_base() -> None:
    """Refuse a runtime base that is a symbolic link or not the user's own 0700 directory (on
    shared ``/dev/shm`` another user could have made it first). Made when missing."""
    import os as _os
    import stat

    base = runtime_base()
    ensure_dir(base)
    st = _os.lstat(base)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != _os.getuid():
        raise AgentlogError(f"{base} is not a directory of this user's own: refusing to keep an unlocked key there "
                            f"(remove it, or set {RUNTIME_ENV})")
    if st.st_mode & 0o077:
        _os.chmod(base, DIR_MODE)
