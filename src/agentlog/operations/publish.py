"""Publishing checkpoints: copy every kept checkpoint (and its cosigned copy) to a directory
or a git repository, so that others hold the data root's history too (docs/proofs.md).

Someone who can write the data root can replace its logs, its tree and its
checkpoints together; a copy of the checkpoints elsewhere (a shared directory,
a git remote, a witness) is what they cannot reach. ``publish`` copies each
checkpoint not there yet (``<size>-<unix µs>.note``), each cosigned copy that is
new or carries more cosignatures (``.cosigned``), and ``verifier-keys`` (the
data root's current and retired verifier keys, one a line). A file of the same
name that says something else is never overwritten. When the destination is in
a git work tree, the new files are committed there (only them), with real git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from agentlog.core import AgentlogError
from agentlog.core.fileio import write_atomic
from agentlog.core.paths import state_dir
from agentlog.integrity import keys
from agentlog.integrity.note import parse_note
from agentlog.operations.checkpoints import CheckpointFailed, origin, stored

KEYS_FILE = "verifier-keys"
PUBLIC_MODE = 0o644
GIT_TIMEOUT_S = 60.0


class PublishFailed(AgentlogError):
    """The checkpoints could not be published (the message says why): exit 1."""


@dataclass
class Published:
    """What ``publish`` did."""

    destination: str
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    git_commit: str | None = None
    git_repository: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"destination": self.destination, "written": self.written, "unchanged": self.unchanged,
                "git_repository": self.git_repository, "git_commit": self.git_commit}


def _git(dest: str, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["git", "-C", dest, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise PublishFailed("git is not installed, and the destination is a git repository") from None
    except subprocess.TimeoutExpired:
        raise PublishFailed(f"git {args[0]} in {dest} took longer than {GIT_TIMEOUT_S:.0f} s") from None


def git_toplevel(dest: str) -> str | None:
    """The top of the git work tree ``dest`` is in, or None (not in one, or no git)."""
    if not os.path.isdir(dest) or shutil.which("git") is None:
        return None
    r = _git(dest, "rev-parse", "--show-toplevel")
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _plan(root: str, dest: str) -> tuple[list[tuple[str, bytes]], int]:
    """The files to write (name, bytes) and how many are there already."""
    out: list[tuple[str, bytes]] = []
    unchanged = 0
    for kept in stored(root):
        ours = kept.note.encode("utf-8")
        theirs = _read(os.path.join(dest, kept.name))
        if theirs is None:
            out.append((kept.name, ours))
        elif theirs == ours:
            unchanged += 1
        else:
            raise PublishFailed(f"{os.path.join(dest, kept.name)} holds another note than our checkpoint "
                                f"{kept.name}; refusing to overwrite it")
        cosigned = _read(kept.cosigned_path)
        if cosigned is None:
            continue
        name = os.path.basename(kept.cosigned_path)
        there = _read(os.path.join(dest, name))
        if there == cosigned:
            continue
        if there is not None:
            try:
                same = parse_note(there).text == parse_note(cosigned).text
                more = len(parse_note(cosigned).signatures) >= len(parse_note(there).signatures)
            except AgentlogError:
                same = more = False
            if not (same and more):
                raise PublishFailed(f"{os.path.join(dest, name)} holds another cosigned note; refusing to overwrite it")
        out.append((name, cosigned))
    keys_text = "".join(v.key_string() + "\n" for v in keys.verifiers(state_dir(root), origin(root))).encode("utf-8")
    if _read(os.path.join(dest, KEYS_FILE)) != keys_text:
        out.append((KEYS_FILE, keys_text))
    return out, unchanged


def publish(root: str, dest: str) -> Published:
    """Copy every checkpoint not yet in ``dest`` there (see the module docstring)."""
    if not stored(root):
        raise CheckpointFailed("no checkpoint to publish: run `agentlog checkpoint` first")
    dest = os.path.abspath(dest)
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise PublishFailed(f"{dest} is not a directory")
    os.makedirs(dest, exist_ok=True)
    top = git_toplevel(dest)
    files, unchanged = _plan(root, dest)
    done = Published(dest, unchanged=unchanged, git_repository=top)
    for name, data in files:
        write_atomic(os.path.join(dest, name), data, PUBLIC_MODE)
        done.written.append(name)
    if top is None or not done.written:
        return done
    add = _git(dest, "add", "--", *done.written)
    if add.returncode != 0:
        raise PublishFailed(f"git add in {dest} failed: {_first_line(add.stderr)}")
    notes = [n for n in done.written if n.endswith(".note")]
    sizes = sorted(int(n.split("-", 1)[0]) for n in notes)
    what = (f"{len(notes)} checkpoint{'s' if len(notes) != 1 else ''} (tree size {sizes[0]}"
            f"{f' to {sizes[-1]}' if sizes[-1] != sizes[0] else ''})" if notes else "cosignatures and keys")
    message = f"agentlog: publish {what} of {origin(root)}"
    commit = _git(dest, "commit", "--quiet", "-m", message, "--", *done.written)
    if commit.returncode != 0:
        raise PublishFailed(f"git commit in {dest} failed (the files are written and staged): "
                            f"{_first_line(commit.stderr or commit.stdout)}")
    head = _git(dest, "rev-parse", "HEAD")
    done.git_commit = head.stdout.strip() or None
    return done


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no message"


__all__ = ["KEYS_FILE", "PublishFailed", "Published", "git_toplevel", "publish"]
