"""Project facts from .git files, without running git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentlog.capture.project import project_info, relative_path, strip_credentials


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "myrepo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    git(r, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "one")
    git(r, "remote", "add", "origin", "https://user:s3cret@git.example.invalid/team/widget.git")
    return r


def test_repo_facts_match_git(repo: Path) -> None:
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    info = project_info(str(sub))
    assert info is not None
    assert info["root"] == str(repo)
    assert info["branch"] == "main"
    assert info["head"] == git(repo, "rev-parse", "HEAD")
    assert info["remote"] == "https://git.example.invalid/team/widget.git"  # credentials stripped
    assert info["name"] == "widget"


def test_packed_refs_and_detached_head(repo: Path) -> None:
    git(repo, "pack-refs", "--all")
    assert project_info(str(repo))["head"] == git(repo, "rev-parse", "HEAD")  # type: ignore[index]
    git(repo, "checkout", "-q", "--detach")
    info = project_info(str(repo))
    assert info is not None and "branch" not in info and info["head"] == git(repo, "rev-parse", "HEAD")


def test_worktree(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(wt))
    info = project_info(str(wt))
    assert info is not None
    assert info["root"] == str(wt) and info["branch"] == "feature"
    assert info["head"] == git(wt, "rev-parse", "HEAD")
    assert info["remote"].endswith("team/widget.git")


def test_outside_a_repo(tmp_path: Path) -> None:
    info = project_info(str(tmp_path))
    assert info == {"root": str(tmp_path), "name": tmp_path.name}


def test_relative_paths() -> None:
    assert relative_path("/r/src/a.py", "/r") == "src/a.py"
    assert relative_path("/r", "/r") == "."
    assert relative_path("/other/a.py", "/r") == "/other/a.py"
    assert relative_path("/rx/a.py", "/r") == "/rx/a.py"
    assert relative_path("src/../b.py", "/r", "/r") == "b.py"


def test_strip_credentials() -> None:
    assert strip_credentials("https://tok@github.com/a/b") == "https://github.com/a/b"
    assert strip_credentials("git@github.com:a/b.git") == "git@github.com:a/b.git"
