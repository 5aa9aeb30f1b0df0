"""Signing keys and the witness registry on disk, under ``<dir>/keys/`` (``dir`` is the caller's
state directory).

Files, all in a directory private to the user (0700)::

    keys/<name>.key                     the current signer key (PRIVATE+KEY+…), 0600
    keys/<name>.retired                 verifier keys of the retired signers, one per line
    keys/retired/<name>.<key id>.key    the retired signer keys themselves, 0600
    keys/witnesses                      witness verifier keys (signature type 0x04), one per line
    keys/.lock                          taken while rotating or changing the witness list

``<name>`` is the key name percent-encoded (a key name such as
``example.com/log`` holds a slash).

A key is made the first time :func:`load_or_create_signer` asks for it: a temp
file opened exclusively with mode 0600 is linked into place, so two processes
racing to make it agree on one key. Reading a signer key opens it without
following a symbolic link and refuses a file that is not a regular file, not
the user's, or readable or writable by group or others, and a keys directory
that is not the user's or open to group or others; the error says which and
how to fix it. No message and no ``repr`` here ever holds private key material.

Rotation (:func:`rotate`) makes a new key and keeps the old one's verifier key
in ``<name>.retired``, so checkpoints signed before still open
(:func:`verifiers` lists the current key and the retired ones). The old private
key is *moved* to ``keys/retired/``, never deleted: deleting a key is the
user's decision (and the right one after a compromise), not a side effect of
rotating. :class:`Rotation` says where it went.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from typing import Iterator, NamedTuple, TypeAlias
from urllib.parse import quote

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.locks import Busy, open_locked
from agentlog.core.paths import DIR_MODE, FILE_MODE, ensure_dir, fsync_path
from agentlog.integrity.checkpoint import CosignatureSigner, CosignatureVerifier
from agentlog.integrity.note import NoteError, Signer, Verifier, check_name

KEYS_DIR = "keys"
WITNESSES_FILE = "witnesses"
LOCK_TIMEOUT_S = 10.0
MAX_KEY_FILE = 4096
MAX_LIST_FILE = 1 << 20


class KeyStoreError(AgentlogError):
    """A key file or directory that is missing, unsafe, or does not hold what it should: exit 1."""


class KeysBusy(Busy):
    """Another process is rotating a key or changing the witness list."""


class Rotation(NamedTuple):
    """What :func:`rotate` did: the new signer, the retired key's verifier, and where its private key went."""

    signer: Signer
    retired: Verifier
    retired_key_file: str


PathLike: TypeAlias = "str | os.PathLike[str]"


def keys_dir(dir: PathLike) -> str:
    return os.path.join(os.fspath(dir), KEYS_DIR)


def _file_stem(name: str) -> str:
    stem = quote(check_name(name), safe="")
    if len(stem) > 200:
        raise KeyStoreError(f"key name {name!r} is too long for a file name")
    return stem


def _private_dir(path: str, create: bool) -> bool:
    """Make ``path`` (0700) when ``create`` and it is missing; check it is the user's own, private
    directory. False when it is missing and not made."""
    if create:
        ensure_dir(os.path.dirname(path))
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            pass
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        raise KeyStoreError(f"{path} is not a directory (a symbolic link or a file); refusing to keep keys there")
    if st.st_uid != os.geteuid():
        raise KeyStoreError(f"{path} belongs to another user (uid {st.st_uid}); refusing to use its keys")
    if st.st_mode & 0o077:
        raise KeyStoreError(
            f"{path} is open to group or others (mode {stat.S_IMODE(st.st_mode):04o}); run `chmod 700 {path}`"
        )
    return True


def _read_checked(path: str, secret: bool, limit: int) -> str | None:
    """The text of ``path`` (None when missing), opened without following a symbolic link. It must be
    a regular file of the user's; a ``secret`` one must not be readable or writable by group or
    others, any other must not be writable by them."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        if os.path.islink(path):
            raise KeyStoreError(f"{path} is a symbolic link; refusing to read a key through it") from None
        raise KeyStoreError(f"cannot open {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyStoreError(f"{path} is not a regular file; refusing to read it")
        if st.st_uid != os.geteuid():
            raise KeyStoreError(f"{path} belongs to another user (uid {st.st_uid}); refusing to use it")
        mode = stat.S_IMODE(st.st_mode)
        if mode & (0o077 if secret else 0o022):
            what = "readable or writable" if secret else "writable"
            fix = "600" if secret else "go-w"
            raise KeyStoreError(f"{path} is {what} by group or others (mode {mode:04o}); run `chmod {fix} {path}`")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise KeyStoreError(f"{path} is larger than a key file can be")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise KeyStoreError(f"{path} is not UTF-8 text") from None


def _create_exclusive(path: str, data: bytes) -> bool:
    """Write ``data`` to a new 0600 file at ``path`` atomically; False (and nothing written) when
    ``path`` already exists."""
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            os.fchmod(fd, FILE_MODE)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        os.unlink(tmp)
    fsync_path(directory)
    return True


@contextmanager
def _locked(directory: str) -> Iterator[None]:
    fd = open_locked(os.path.join(directory, ".lock"), LOCK_TIMEOUT_S)
    if fd is None:
        raise KeysBusy(f"another process is changing the keys in {directory}; try again")
    try:
        yield
    finally:
        os.close(fd)


def _parse_signer(text: str, name: str, path: str) -> Signer:
    try:
        signer = Signer.from_private_key_string(text.strip())
    except NoteError as e:
        raise KeyStoreError(f"{path} does not hold a usable signer key ({e})") from None
    if signer.name != name:
        raise KeyStoreError(f"{path} holds the key of {signer.name!r}, not {name!r}")
    return signer


def load_signer(dir: PathLike, name: str) -> Signer:
    """The current signer key ``name``; :class:`KeyStoreError` when there is none or it is unsafe."""
    directory = keys_dir(dir)
    path = os.path.join(directory, _file_stem(name) + ".key")
    text = _read_checked(path, True, MAX_KEY_FILE) if _private_dir(directory, create=False) else None
    if text is None:
        raise KeyStoreError(f"no signer key {name!r} in {directory}")
    return _parse_signer(text, name, path)


def load_or_create_signer(dir: PathLike, name: str) -> Signer:
    """The signer key ``name``, made (Ed25519, from the system's CSPRNG) the first time."""
    directory = keys_dir(dir)
    _private_dir(directory, create=True)
    path = os.path.join(directory, _file_stem(name) + ".key")
    text = _read_checked(path, True, MAX_KEY_FILE)
    if text is None:
        signer = Signer.generate(name)
        if _create_exclusive(path, (signer.private_key_string() + "\n").encode("utf-8")):
            return signer
        text = _read_checked(path, True, MAX_KEY_FILE)  # another process made it first
        if text is None:
            raise KeyStoreError(f"{path} vanished while it was being made")
    return _parse_signer(text, name, path)


def verifier_key_string(dir: PathLike, name: str, *, create: bool = False) -> str:
    """The current verifier key string of signer ``name`` (to publish; no secret in it). With
    ``create``, the key is made if missing."""
    signer = load_or_create_signer(dir, name) if create else load_signer(dir, name)
    return signer.verifier_key_string()


def _read_lines(path: str) -> list[str]:
    text = _read_checked(path, False, MAX_LIST_FILE)
    return [] if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def retired_verifiers(dir: PathLike, name: str) -> list[Verifier]:
    """The verifiers of ``name``'s retired keys, oldest first."""
    directory = keys_dir(dir)
    if not _private_dir(directory, create=False):
        return []
    path = os.path.join(directory, _file_stem(name) + ".retired")
    out: list[Verifier] = []
    for number, line in enumerate(_read_lines(path), 1):
        try:
            verifier = Verifier.from_key_string(line)
        except NoteError as e:
            raise KeyStoreError(f"{path}:{number}: {e}") from None
        if verifier.name != name:
            raise KeyStoreError(f"{path}:{number}: a key of {verifier.name!r}, not {name!r}")
        out.append(verifier)
    return out


def verifiers(dir: PathLike, name: str) -> list[Verifier]:
    """Every verifier of ``name``: the current key's first, then the retired ones (for old checkpoints)."""
    current = load_signer(dir, name).verifier()
    return [current, *(v for v in retired_verifiers(dir, name) if v != current)]


def rotate(dir: PathLike, name: str) -> Rotation:
    """Replace signer ``name`` by a new key. The old verifier key is added to ``<name>.retired`` and
    the old private key is moved to ``keys/retired/`` (not deleted), both before the new key takes
    its place, so a crash midway leaves the old key current and nothing lost."""
    directory = keys_dir(dir)
    _private_dir(directory, create=True)
    stem = _file_stem(name)
    with _locked(directory):
        old = load_signer(dir, name)
        new = Signer.generate(name)
        retired_list = os.path.join(directory, stem + ".retired")
        lines = _read_lines(retired_list)
        old_key = old.verifier_key_string()
        if old_key not in lines:
            write_atomic(retired_list, "".join(line + "\n" for line in [*lines, old_key]).encode("utf-8"), FILE_MODE)
        retired_dir = os.path.join(directory, "retired")
        _private_dir(retired_dir, create=True)
        kept = os.path.join(retired_dir, f"{stem}.{old.key_id:08x}.key")
        secret = (old.private_key_string() + "\n").encode("utf-8")
        if not _create_exclusive(kept, secret) and _read_checked(kept, True, MAX_KEY_FILE) != secret.decode("utf-8"):
            raise KeyStoreError(f"{kept} already holds another key; move it away and rotate again")
        write_atomic(os.path.join(directory, stem + ".key"), (new.private_key_string() + "\n").encode("utf-8"))
    return Rotation(new, old.verifier(), kept)


def _witness_key(key: str | os.PathLike[str]) -> CosignatureVerifier:
    """A witness verifier key given as its string, or as the path of a file that holds it."""
    if isinstance(key, str):
        try:
            return CosignatureVerifier.from_key_string(key.strip())
        except NoteError as e:
            if not os.path.isfile(key):
                raise KeyStoreError(f"not a witness verifier key, nor a file holding one: {e}") from None
    path = os.fspath(key)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_KEY_FILE + 1)
    except OSError as e:
        raise KeyStoreError(f"cannot read {path}: {e.strerror}") from None
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    if len(data) > MAX_KEY_FILE or len(lines) != 1:
        raise KeyStoreError(f"{path} must hold one witness verifier key on one line")
    try:
        return CosignatureVerifier.from_key_string(lines[0])
    except NoteError as e:
        raise KeyStoreError(f"{path}: {e}") from None


def witnesses(dir: PathLike) -> list[CosignatureVerifier]:
    """The registered witnesses' verifiers, in the order they were added."""
    directory = keys_dir(dir)
    if not _private_dir(directory, create=False):
        return []
    path = os.path.join(directory, WITNESSES_FILE)
    out: list[CosignatureVerifier] = []
    for number, line in enumerate(_read_lines(path), 1):
        try:
            out.append(CosignatureVerifier.from_key_string(line))
        except NoteError as e:
            raise KeyStoreError(f"{path}:{number}: {e}") from None
    return out


def add_witness(
    dir: PathLike, name: str, key: str | os.PathLike[str], *, replace: bool = False
) -> CosignatureVerifier:
    """Register witness ``name`` by its verifier key (``<name>+<id>+<base64(0x04 || key)>``, or a file
    holding it). Adding the same key again changes nothing; a different key under a registered name
    is refused unless ``replace`` (cosignatures by the replaced key stop verifying)."""
    verifier = _witness_key(key)
    if verifier.name != name:
        raise KeyStoreError(f"the key is witness {verifier.name!r}'s, not {name!r}'s")
    directory = keys_dir(dir)
    _private_dir(directory, create=True)
    path = os.path.join(directory, WITNESSES_FILE)
    with _locked(directory):
        current = witnesses(dir)
        if verifier in current:
            return verifier
        same_name = [w for w in current if w.name == name]
        if same_name and not replace:
            raise KeyStoreError(f"witness {name!r} is registered with another key; pass replace to change it")
        kept = [w for w in current if w.name != name]
        lines = [w.key_string() for w in [*kept, verifier]]
        write_atomic(path, "".join(line + "\n" for line in lines).encode("utf-8"), FILE_MODE)
    return verifier


def remove_witness(dir: PathLike, name: str) -> CosignatureVerifier:
    """Unregister witness ``name`` (its cosignatures stop counting); :class:`KeyStoreError` when no
    witness of that name is registered."""
    directory = keys_dir(dir)
    if not _private_dir(directory, create=False):
        raise KeyStoreError(f"no witness {name!r} is registered")
    path = os.path.join(directory, WITNESSES_FILE)
    with _locked(directory):
        current = witnesses(dir)
        gone = [w for w in current if w.name == name]
        if not gone:
            raise KeyStoreError(f"no witness {name!r} is registered")
        lines = [w.key_string() for w in current if w.name != name]
        write_atomic(path, "".join(line + "\n" for line in lines).encode("utf-8"), FILE_MODE)
    return gone[0]


def create_witness_key(path: PathLike, name: str) -> CosignatureSigner:
    """Make a new witness key (signature type 0x04) and write its private key string to ``path``
    (a new file, 0600; an existing one is never replaced)."""
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(directory):
        raise KeyStoreError(f"{directory} is not a directory")
    witness = CosignatureSigner.generate(check_name(name))
    if not _create_exclusive(os.path.abspath(target), (witness.private_key_string() + "\n").encode("utf-8")):
        raise KeyStoreError(f"{target} exists already; refusing to replace a key file")
    return witness


def load_witness_key(path: PathLike) -> CosignatureSigner:
    """A witness's private key (``PRIVATE+KEY+<name>+<id>+<base64(0x04 || seed)>``) from ``path``: a
    regular file of the user's, not readable by group or others."""
    target = os.fspath(path)
    text = _read_checked(target, True, MAX_KEY_FILE)
    if text is None:
        raise KeyStoreError(f"no witness key file {target}")
    try:
        return CosignatureSigner.from_private_key_string(text.strip())
    except NoteError as e:
        raise KeyStoreError(f"{target} does not hold a witness signing key ({e})") from None


__all__ = [
    "KeyStoreError", "KeysBusy", "Rotation", "add_witness", "create_witness_key", "keys_dir", "load_or_create_signer",
    "load_signer", "load_witness_key", "remove_witness", "retired_verifiers", "rotate", "verifier_key_string",
    "verifiers", "witnesses",
]
