"""Where agentlog keeps its data.

One function decides the data root (`AGENTLOG_HOME`, else the platform data
directory); every other path is built from it. Standard library only: the
hook path imports this module.
"""

from __future__ import annotations

from agentlog.core import oslite as os
import sys

DIR_MODE = 0o700
FILE_MODE = 0o600
VAULT_DIR_NAME = "vault"
"""``<data root>/vault/``: this machine's enrolment with a vault (``vault/machine.py``)."""
VAULT_KEY_NAME = "machine.key"
"""The enrolment's machine key, written last: an enrolment is complete when it is there."""


def data_root(environ: dict[str, str] | None = None) -> str:
    """Return the data root: `$AGENTLOG_HOME`, else the platform data dir."""
    env = os.environ if environ is None else environ
    home = env.get("AGENTLOG_HOME", "")
    if home:
        return os.path.abspath(os.path.expanduser(home))
    if sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Application Support")
    else:
        base = env.get("XDG_DATA_HOME", "") or os.path.expanduser("~/.local/share")
    return os.path.join(base, "agentlog")


def logs_dir(root: str) -> str:
    """Directory holding one sub-directory of session logs per provider."""
    return os.path.join(root, "logs")


def config_file(root: str) -> str:
    return os.path.join(root, "config.toml")


def state_dir(root: str) -> str:
    """Small bookkeeping files (caches, install ledger, unrecognised shapes)."""
    return os.path.join(root, "state")


def vault_dir(root: str) -> str:
    return os.path.join(root, VAULT_DIR_NAME)


def vault_enrolled(root: str) -> bool:
    """Whether this data root is enrolled with a vault, by path only (the daemon asks
    before it ships; it does not import the vault package)."""
    return os.path.exists(os.path.join(vault_dir(root), VAULT_KEY_NAME))


def diagnostics_log(root: str) -> str:
    """Where the hook appends one line per problem (besides stderr)."""
    return os.path.join(root, "state", "hook-errors.log")


def ensure_dir(path: str) -> None:
    """Create ``path`` and any missing parents, each private to the user (0700).

    ``os.makedirs(path, mode)`` applies ``mode`` only to the last directory; the
    parents (the data root itself, ``logs/``) would get the umask default.
    Existing directories are left as they are.
    """
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        ensure_dir(parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        pass


def fsync_path(path: str) -> None:
    """Best-effort fsync of a file or directory by path (e.g. a directory after
    creating or renaming an entry in it). Some file systems refuse fsync on
    directories; a failure here never stops the caller."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def otel_receipts(root: str) -> str:
    """What ``agentlog otel serve`` last noted arriving, per agent (``agentlog doctor`` reads it)."""
    return os.path.join(state_dir(root), "otel-receipts.json")


def all_paths(root: str) -> dict[str, str]:
    """Every place agentlog reads or writes, by name (for `agentlog paths`)."""
    return {
        "data_root": root,
        "config": config_file(root),
        "logs": logs_dir(root),
        "state": state_dir(root),
        "hook_errors": diagnostics_log(root),
    }
