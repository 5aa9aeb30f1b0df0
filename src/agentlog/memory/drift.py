"""Evidence drift: is what a memory cites still there, as it was?

File evidence (``file:src/x.py#L10-20@abc1234``) is compared by git itself — never a diff of
our own: ``git diff -M --name-status`` says whether the file was renamed or deleted between
the cited commit and ``HEAD``; ``git diff -U0`` gives the hunks, and the cited lines are
unchanged when no hunk touches them (moved when hunks above them shifted them, or the file
was renamed); a touched block is looked for, verbatim, in the file at ``HEAD`` and then in the
whole tree (``git grep -F``), so lines moved within the file or to another file are followed.
The result is one of:

- ``unchanged``: the same lines at the same place;
- ``moved``: the same lines elsewhere (other line numbers, or another file): the citation
  is updated to where they are now, at ``HEAD``;
- ``changed``: the lines were edited (the commits that touched the file since are named);
- ``deleted``: the file is gone and its lines are nowhere else;
- ``present`` / ``deleted`` for a file cited without a commit (only its existence can be known);
- ``unverifiable``: the commit is not in the repository (another repository, or rebased and
  collected) or the file was not at that commit.

Everything read is at ``HEAD`` (committed), not the work tree: uncommitted edits do not count.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import Any, Final

from agentlog.core import AgentlogError

GIT_TIMEOUT_S: Final = 30.0
_HUNK: Final = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)


class GitUnavailable(AgentlogError, RuntimeError):
    """The directory is not in a git repository (or git is missing)."""


@dataclass
class Drift:
    """One evidence reference checked: its status, what was found, and its new reference when moved."""

    status: str
    detail: str
    moved_to: dict[str, Any] | None = None


@dataclass
class Repo:
    """A git repository at its ``HEAD``, with what a check run asks more than once kept."""

    top: str
    head: str
    _renames: dict[str, dict[str, str | None]] = field(default_factory=dict)
    _files: dict[tuple[str, str], list[str] | None] = field(default_factory=dict)
    _commits: dict[str, str | None] = field(default_factory=dict)
    _hunks: dict[tuple[str, str, str], list[tuple[int, int, int, int]]] = field(default_factory=dict)
    _logs: dict[tuple[str, str], str] = field(default_factory=dict)
    _changed: dict[str, set[str]] = field(default_factory=dict)
    _naming: dict[str, list[str]] = field(default_factory=dict)

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", self.top, *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, errors="replace")

    def commit(self, rev: str) -> str | None:
        """The full id of commit ``rev``, None when the repository has no such commit."""
        if rev not in self._commits:
            p = self.git("rev-parse", "--verify", "-q", f"{rev}^{{commit}}")
            self._commits[rev] = p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None
        return self._commits[rev]

    def lines(self, commit: str, path: str) -> list[str] | None:
        """The file ``path`` at ``commit`` as lines, None when it is not there."""
        key = (commit, path)
        if key not in self._files:
            p = self.git("show", f"{commit}:{path}")
            self._files[key] = p.stdout.split("\n") if p.returncode == 0 else None
        return self._files[key]

    def naming(self, word: str) -> list[str]:
        """The files at ``HEAD`` that name ``word`` (a whole word, any case: ``git grep -w -i``)."""
        key = word.strip().lower()
        if key not in self._naming:
            p = self.git("grep", "-l", "-w", "-F", "-i", "-e", word.strip(), self.head, "--")
            self._naming[key] = [line.split(":", 1)[1] for line in p.stdout.splitlines()] if p.returncode == 0 else []
        return self._naming[key]

    def prefetch(self, wanted: list[tuple[str, str]]) -> None:
        """Read the files ``wanted`` ((commit, path) each) in one ``git cat-file --batch`` (rather
        than a ``git show`` each), for :meth:`lines`."""
        todo = sorted({w for w in wanted if w not in self._files and "\n" not in w[1] and "\r" not in w[1]})
        if not todo:
            return
        try:
            p = subprocess.run(["git", "-C", self.top, "cat-file", "--batch"], capture_output=True,
                               timeout=GIT_TIMEOUT_S * 4, input="".join(f"{c}:{path}\n" for c, path in todo).encode())
        except (OSError, subprocess.TimeoutExpired):
            return  # (each is read on its own when asked)
        out, at = p.stdout, 0
        for key in todo:
            nl = out.find(b"\n", at)
            if nl < 0:
                return
            head = out[at:nl].split(b" ")
            if len(head) == 3 and head[1] == b"blob" and head[2].isdigit():
                size = int(head[2])
                text = out[nl + 1:nl + 1 + size].decode("utf-8", "replace")
                # (as ``git show`` read in text mode gives it: universal newlines)
                self._files[key] = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
                at = nl + 1 + size + 1
            elif head[-1] == b"missing" or head[-1] == b"ambiguous":
                self._files[key] = None
                at = nl + 1
            else:  # (a tree, a submodule: what ``git show`` would give is not a blob's lines)
                return

    def prefetch_hunks(self, commit: str, paths: list[str]) -> None:
        """:meth:`hunks` of each of ``paths`` (changed since ``commit``, not renamed) from one
        ``git diff`` per 200 of them; a path whose section cannot be read back is asked alone."""
        todo = sorted({p for p in paths if p in self.changed(commit) and p not in self.renames(commit)
                       and (commit, p, p) not in self._hunks})
        for i in range(0, len(todo), 200):
            part = todo[i:i + 200]
            d = self.git("--literal-pathspecs", "-c", "core.quotePath=false", "diff", "-U0", "--no-renames",
                         "--no-color", "--no-ext-diff", "--src-prefix=a/", "--dst-prefix=b/", commit, self.head, "--",
                         *part)
            if d.returncode != 0:
                continue
            got: dict[str, list[tuple[int, int, int, int]]] = {}
            current: str | None = None
            for line in d.stdout.split("\n"):
                if line.startswith("diff --git "):
                    current = None
                elif line.startswith("--- a/"):
                    current = line[len("--- a/"):].removesuffix("\t")
                    got[current] = []
                elif line.startswith("@@") and current is not None:
                    m = _HUNK.match(line)
                    if m:
                        s, c, t, n = m.groups()
                        got[current].append((int(s), int(c) if c else 1, int(t), int(n) if n else 1))
            for path in part:
                if path in got:
                    self._hunks[(commit, path, path)] = got[path]

    def changed(self, commit: str) -> set[str]:
        """The paths changed between ``commit`` and ``HEAD`` (both sides of a rename)."""
        self.renames(commit)
        return self._changed[commit]

    def hunks(self, commit: str, path: str, now_path: str) -> list[tuple[int, int, int, int]]:
        """``git diff -U0``'s hunks of ``path`` (``now_path`` at ``HEAD``) from ``commit`` to ``HEAD``:
        (old start, old count, new start, new count) each; none, without asking git, for a path
        that did not change."""
        key = (commit, path, now_path)
        if path == now_path and path not in self.changed(commit):
            return []
        if key not in self._hunks:
            diff = self.git("diff", "-U0", "-M", commit, self.head, "--", *dict.fromkeys((path, now_path)))
            self._hunks[key] = [(int(s), int(c) if c else 1, int(t), int(d) if d else 1)
                                for s, c, t, d in _HUNK.findall(diff.stdout)]
        return self._hunks[key]

    def since(self, commit: str, path: str) -> str:
        """`` (commits since: …)``: the last five commits that touched ``path`` after ``commit``."""
        key = (commit, path)
        if key not in self._logs:
            ids = self.git("log", "--format=%h", "-n", "5", f"{commit}..{self.head}", "--", path).stdout.split()
            self._logs[key] = f" (commits since: {', '.join(ids)})" if ids else ""
        return self._logs[key]

    def renames(self, commit: str) -> dict[str, str | None]:
        """Per path changed between ``commit`` and ``HEAD``: its path at ``HEAD`` (None: deleted)."""
        if commit not in self._renames:
            p = self.git("diff", "-M", "--name-status", "-z", commit, self.head)
            parts = p.stdout.split("\0")
            out: dict[str, str | None] = {}
            changed: set[str] = set()
            i = 0
            while i < len(parts) - 1:
                st = parts[i]
                if st.startswith(("R", "C")):
                    if st.startswith("R"):
                        out[parts[i + 1]] = parts[i + 2]
                    changed.update(parts[i + 1:i + 3])
                    i += 3
                    continue
                if st.startswith("D"):
                    out[parts[i + 1]] = None
                changed.add(parts[i + 1])
                i += 2
            if p.returncode != 0:  # (unknown: every path is asked about)
                changed = _Everything()
            self._renames[commit] = out
            self._changed[commit] = changed
        return self._renames[commit]


class _Everything(set[str]):
    """A set holding every path (what changed is not known)."""

    def __contains__(self, item: object) -> bool:
        return True


def relative(repo: Repo, value: str) -> str:
    """A cited path as the repository names it (an absolute path in it, or ``./x``, made relative)."""
    path = str(value)
    if path.startswith(repo.top + "/"):
        path = path[len(repo.top) + 1:]
    return path.removeprefix("./")


def open_repo(directory: str) -> Repo:
    """The git repository ``directory`` is in, at its ``HEAD``."""
    try:
        top = subprocess.run(["git", "-C", directory, "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=GIT_TIMEOUT_S)
        head = subprocess.run(["git", "-C", directory, "rev-parse", "--verify", "-q", "HEAD"], capture_output=True,
                              text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise GitUnavailable(f"git could not be run in {directory}: {e}") from None
    if top.returncode != 0 or head.returncode != 0:
        raise GitUnavailable(f"{directory} is not in a git repository with a commit (file evidence is checked "
                             "against one: run in the project, or give --repo)")
    return Repo(top.stdout.strip(), head.stdout.strip())


def _shifted(hunks: list[tuple[int, int, int, int]], a: int, b: int) -> int | None:
    """The offset the hunks give lines ``a``..``b`` (old numbering), None when one touches them."""
    off = 0
    for s, c, _t, d in hunks:
        if c == 0:  # an insertion after old line s
            if a <= s < b:
                return None
            if s < a:
                off += d
        else:
            if s <= b and s + c - 1 >= a:
                return None
            if s + c - 1 < a:
                off += d - c
    return off


def _find_block(repo: Repo, block: list[str], prefer: str | None) -> tuple[str, int] | None:
    """Where ``block`` (lines) stands verbatim at ``HEAD``: in ``prefer`` first, else anywhere
    (``git grep -F`` for its longest line, each hit checked whole); None when nowhere."""
    needle = max(block, key=lambda s: len(s.strip()))
    if not needle.strip():
        return None

    def match_in(path: str) -> int | None:
        cur = repo.lines(repo.head, path)
        if cur is None:
            return None
        for i in range(len(cur) - len(block) + 1):
            if cur[i:i + len(block)] == block:
                return i + 1
        return None

    if prefer is not None:
        at = match_in(prefer)
        if at is not None:
            return prefer, at
    p = repo.git("grep", "-l", "-F", "-e", needle, repo.head, "--")
    for line in p.stdout.splitlines() if p.returncode == 0 else []:
        path = line.split(":", 1)[1] if line.startswith(repo.head + ":") else line
        if path == prefer:
            continue
        at = match_in(path)
        if at is not None:
            return path, at
    return None


def file_drift(repo: Repo, ref: dict[str, Any]) -> Drift:
    """``ref`` (file evidence) against ``repo`` at ``HEAD``."""
    path = relative(repo, ref["value"])  # (cited by its absolute path in this repository, or ./x)
    rev = ref.get("commit")
    if rev is None:
        if repo.lines(repo.head, path) is not None:
            return Drift("present", f"{path} is in the repository (cited without a commit: only its existence is known)")
        return Drift("deleted", f"{path} is not in the repository at HEAD")
    commit = repo.commit(str(rev))
    if commit is None:
        return Drift("unverifiable", f"commit {rev} is not in this repository (another repository, or rebased away)")
    old = repo.lines(commit, path)
    if old is None:
        return Drift("unverifiable", f"{path} was not in commit {rev}")
    now_path = repo.renames(commit).get(path, path)
    a = ref.get("line_start")
    if a is None:  # the whole file
        if now_path is None:
            return Drift("deleted", f"{path} was deleted since {rev}{repo.since(commit, path)}")
        if repo.lines(repo.head, now_path) == old:
            if now_path == path:
                return Drift("unchanged", f"{path} is as it was at {rev}")
            return Drift("moved", f"{path} was renamed to {now_path}",
                         {**ref, "value": now_path, "commit": repo.head})
        return Drift("changed", f"{now_path} changed since {rev}{repo.since(commit, path)}")
    b = int(ref.get("line_end") or a)
    if b > len(old):
        return Drift("unverifiable", f"{path} had {len(old)} lines at {rev}, not {b}")
    block = old[a - 1:b]
    if now_path is not None:
        off = _shifted(repo.hunks(commit, path, now_path), a, b)
        if off is not None:
            if off == 0 and now_path == path:
                return Drift("unchanged", f"lines {a}-{b} of {path} are as they were at {rev}")
            return _moved(repo, ref, now_path, a + off, b + off, f"{path}#L{a}-{b}")
    found = _find_block(repo, block, now_path)
    if found is not None:
        return _moved(repo, ref, found[0], found[1], found[1] + len(block) - 1, f"{path}#L{a}-{b}")
    if now_path is None:
        return Drift("deleted", f"{path} was deleted since {rev} and its lines {a}-{b} are nowhere in the "
                                f"repository{repo.since(commit, path)}")
    return Drift("changed", f"lines {a}-{b} of {path} were edited since {rev}{repo.since(commit, path)}")


def _moved(repo: Repo, ref: dict[str, Any], path: str, start: int, end: int, was: str) -> Drift:
    new = {**ref, "value": path, "line_start": start, "commit": repo.head}
    if "line_end" in ref or end != start:
        new["line_end"] = end
    return Drift("moved", f"{was} now stands at {path}#L{start}-{end} (HEAD {repo.head[:12]})", new)
