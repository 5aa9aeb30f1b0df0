"""Where each session's log lives.

``<root>/logs/<provider>/<key>.jsonl`` holds the frames and
``<key>.head`` the last frame's ``seq``, hash and the log size after it.
``key`` is the provider's session id when it is a safe file name, else a
hash of it; a payload without any session id goes to ``_unknown``.
Standard library only (hook path).
"""

from __future__ import annotations

from .. import _oslite as os

from ..paths import logs_dir

LOG_SUFFIX = ".jsonl"
HEAD_SUFFIX = ".head"
UNKNOWN_SESSION = "_unknown"
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_MAX_KEY = 120


def session_key(session_id: str | None) -> str:
    """A file-name-safe key for a provider session id (stable, collision-free)."""
    if not session_id:
        return UNKNOWN_SESSION
    if len(session_id) <= _MAX_KEY and session_id[0] not in "._-" and _SAFE.issuperset(session_id):
        return session_id
    from .frame import sha256

    return "h-" + str(sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest())[:40]


def provider_dir(root: str, provider: str) -> str:
    return os.path.join(logs_dir(root), provider)


def log_path(root: str, provider: str, key: str) -> str:
    return os.path.join(provider_dir(root, provider), key + LOG_SUFFIX)


def head_path(log_file: str) -> str:
    return log_file[: -len(LOG_SUFFIX)] + HEAD_SUFFIX


def split_log_path(log_file: str) -> tuple[str, str]:
    """(provider, key) of a log file path."""
    provider = os.path.basename(os.path.dirname(log_file))
    name = os.path.basename(log_file)
    return provider, name[: -len(LOG_SUFFIX)] if name.endswith(LOG_SUFFIX) else name


def iter_logs(root: str) -> list[str]:
    """Every session log under the data root, sorted."""
    base = logs_dir(root)
    out: list[str] = []
    try:
        providers = sorted(os.listdir(base))
    except FileNotFoundError:
        return out
    for p in providers:
        d = os.path.join(base, p)
        try:
            names = sorted(os.listdir(d))
        except (NotADirectoryError, FileNotFoundError):
            continue
        out.extend(os.path.join(d, n) for n in names if n.endswith(LOG_SUFFIX))
    return out
