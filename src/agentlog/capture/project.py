"""The project an event happened in, read from the file system.

Walks up from the working directory to the git work tree (a ``.git``
directory, or a ``.git`` file pointing elsewhere for worktrees and
submodules), then reads ``HEAD``, the ref it names (loose or packed) and the
``origin`` URL from the repository config. Never runs ``git``: a hook must
not spawn processes. Standard library only (hook path).
"""

from __future__ import annotations

from agentlog.core import oslite as os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_MAX_READ = 1 << 20


_HEX = frozenset("0123456789abcdef")
_MAX_SYMREF_DEPTH = 5


def _read(path: str, limit: int = _MAX_READ) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _read_inside(base: str, rel: str, limit: int = 4096) -> str | None:
    """The file ``rel`` below the directory ``base``, never outside it: ``rel`` has no
    ``..``, ``.`` or empty part and is not absolute, and every component is opened
    without following a symlink (a planted ``refs -> ~`` or ``HEAD -> ~/.ssh/id_ed25519``
    reads nothing)."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") or "\0" in p for p in parts):
        return None
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
        ffd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            return os.read(ffd, limit).decode("utf-8", "replace")
        finally:
            os.close(ffd)
    except OSError:
        return None
    finally:
        os.close(fd)


def is_object_id(value: str) -> bool:
    """A commit id as git writes one: 40 (SHA-1) or 64 (SHA-256) lower-case hex digits."""
    return len(value) in (40, 64) and all(ch in _HEX for ch in value)


def is_ref_name(ref: str) -> bool:
    """A ref HEAD may name: ``refs/…``, no ``..``, no leading ``/``, no control characters."""
    return (ref.startswith("refs/") and len(ref) < 1024 and ".." not in ref and "//" not in ref
            and all(ch >= " " and ch not in "\\:?*[~^" for ch in ref))


_S_IFMT, _S_IFDIR, _S_IFREG = 0o170000, 0o040000, 0o100000


def _file_type(path: str) -> int:
    """The ``S_IFMT`` bits of ``path`` (symlinks followed), 0 when it cannot be stat'ed: one
    ``stat`` answers both ``os.path.isdir`` and ``os.path.isfile``."""
    try:
        return os.stat(path).st_mode & _S_IFMT
    except (OSError, ValueError):
        return 0


def find_git(start: str) -> tuple[str, str, str] | None:
    """(work tree root, git dir, common dir) for ``start``, or None outside a repository."""
    d = os.path.abspath(start)
    while True:
        dot = d + ".git" if d.endswith("/") else d + "/.git"  # os.path.join(d, ".git")
        kind = _file_type(dot)
        if kind == _S_IFDIR:
            return d, dot, dot
        if kind == _S_IFREG:
            text = _read(dot, 4096) or ""
            if text.startswith("gitdir:"):
                gitdir = text[len("gitdir:") :].strip()
                if not os.path.isabs(gitdir):
                    gitdir = os.path.normpath(os.path.join(d, gitdir))
                common = gitdir
                rel = _read_inside(gitdir, "commondir")
                if rel:
                    rel = rel.strip()
                    common = rel if os.path.isabs(rel) else os.path.normpath(os.path.join(gitdir, rel))
                return d, gitdir, common
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _resolve_ref(gitdir: str, common: str, ref: str, depth: int = 0) -> str | None:
    """The commit id a ref names (loose, then packed), read inside the git directories only;
    None for anything that is not a ref name or not an object id."""
    if depth > _MAX_SYMREF_DEPTH or not is_ref_name(ref):
        return None
    for base in (gitdir, common):
        text = _read_inside(base, ref)
        if text:
            value = text.strip()
            if value.startswith("ref:"):
                return _resolve_ref(gitdir, common, value[4:].strip(), depth + 1)
            return value if is_object_id(value) else None
    packed = _read_inside(common, "packed-refs", _MAX_READ)
    if packed:
        for line in packed.splitlines():
            if line.endswith(" " + ref) and not line.startswith(("#", "^")):
                value = line.split(" ", 1)[0]
                return value if is_object_id(value) else None
    return None


def origin_url(common: str) -> str | None:
    """The ``url`` of ``[remote "origin"]`` (else the first remote), credentials stripped."""
    text = _read_inside(common, "config", _MAX_READ)
    if not text:
        return None
    section = None
    urls: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]").strip()
            continue
        if section and section.startswith("remote ") and "=" in line:
            key, _, value = line.partition("=")
            if key.strip().lower() == "url":
                name = section[len("remote ") :].strip().strip('"')
                urls.setdefault(name, value.strip().strip('"'))
    url = urls.get("origin") or (next(iter(urls.values())) if urls else None)
    return strip_credentials(url) if url else None


def strip_credentials(url: str) -> str:
    """``https://user:token@host/x`` → ``https://host/x`` (scp-style ``git@host:x`` is kept)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    hostpart, slash, path = rest.partition("/")
    if "@" in hostpart:
        hostpart = hostpart.rsplit("@", 1)[1]
    return scheme + "://" + hostpart + slash + path


def project_info(cwd: str | None) -> dict[str, Any] | None:
    """The wire-form ``project`` object for a working directory."""
    if not cwd:
        return None
    found = find_git(cwd)
    if found is None:
        root = os.path.abspath(cwd)
        return {"root": root, "name": os.path.basename(root.rstrip("/")) or root}
    root, gitdir, common = found
    info: dict[str, Any] = {"root": root, "name": os.path.basename(root) or root}
    remote = origin_url(common)
    if remote:
        info["remote"] = remote
        tail = remote.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        if tail.endswith(".git"):
            tail = tail[:-4]
        if tail:
            info["name"] = tail
    head = (_read_inside(gitdir, "HEAD") or "").strip()
    if head.startswith("ref:"):
        ref = head[4:].strip()
        if not is_ref_name(ref):
            return info  # "ref: /etc/passwd", "ref: ../../x": not a ref; nothing more is read
        if ref.startswith("refs/heads/"):
            info["branch"] = ref[len("refs/heads/") :]
        sha = _resolve_ref(gitdir, common, ref)
        if sha:
            info["head"] = sha
    elif is_object_id(head):
        info["head"] = head
    return info


def relative_path(path: str, root: str | None, cwd: str | None = None) -> str:
    """``path`` relative to the project root when inside it, else as reported.

    Relative paths are taken relative to ``cwd`` first.
    """
    if not root or not path:
        return path
    p = path
    if not os.path.isabs(p):
        if not cwd:
            return path
        p = os.path.join(cwd, p)
    p = os.path.normpath(p)
    r = root.rstrip("/") or "/"
    if p == r:
        return "."
    if p.startswith(r + "/"):
        return p[len(r) + 1 :]
    return path


def attach_project(event: dict[str, Any], project: dict[str, Any] | None, cwd: str | None) -> None:
    """``project`` on ``event`` (when there is one), the event's paths made relative to its root."""
    if project is None:
        return
    if "paths" in event:
        event["paths"] = [relative_path(p, project["root"], cwd) for p in event["paths"]]
    event["project"] = project
