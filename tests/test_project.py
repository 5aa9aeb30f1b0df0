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


# -- a hostile repository (issue 27, finding 13) -------------------------------------------------

SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
HEX_SECRET = "0123456789abcdef0123456789abcdef01234567"


def _hostile(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A work tree with a hand-made .git, and a secret file outside it."""
    secret = tmp_path / f"{name}-credentials"
    secret.write_text(SECRET + "\n")
    repo = tmp_path / name
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    return repo, secret


def _captured(repo: Path) -> str:
    """Everything a real hook records for a prompt typed in ``repo``."""
    import json

    from agentlog.capture.hook import build

    payload = json.dumps({"session_id": "s-hostile", "hook_event_name": "UserPromptSubmit", "prompt": "hi",
                          "cwd": str(repo)}).encode()
    captured = build("claude-code", payload, len(payload), [], environ={}, cwd=str(repo))
    return json.dumps(captured.event)


def test_a_hostile_head_never_reads_a_file_outside_the_git_dir(tmp_path: Path) -> None:
    import os

    cases = []
    repo, secret = _hostile(tmp_path, "abs")
    (repo / ".git" / "HEAD").write_text(f"ref: {secret}\n")  # ref: /abs/path
    cases.append(repo)
    repo, secret = _hostile(tmp_path, "dotdot")
    (repo / ".git" / "HEAD").write_text("ref: ../../dotdot-credentials\n")
    cases.append(repo)
    repo, secret = _hostile(tmp_path, "refdotdot")
    (repo / ".git" / "HEAD").write_text("ref: refs/../../refdotdot-credentials\n")
    cases.append(repo)
    repo, secret = _hostile(tmp_path, "headlink")  # HEAD itself a symlink to the secret
    os.symlink(secret, repo / ".git" / "HEAD")
    cases.append(repo)
    repo, secret = _hostile(tmp_path, "reflink")  # the named ref a symlink to the secret
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    os.symlink(secret, repo / ".git" / "refs" / "heads" / "main")
    cases.append(repo)
    repo, secret = _hostile(tmp_path, "dirlink")  # refs/heads a symlink to a directory outside
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "main").write_text(HEX_SECRET + "\n")
    (repo / ".git" / "refs" / "heads").rmdir()
    os.symlink(outside, repo / ".git" / "refs" / "heads")
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    cases.append(repo)
    repo, secret = _hostile(tmp_path, "detached")  # a "detached head" that is not an object id
    (repo / ".git" / "HEAD").write_text(SECRET + "\n")
    cases.append(repo)
    for repo in cases:
        info = project_info(str(repo))
        assert info is not None and "head" not in info, (repo.name, info)
        recorded = _captured(repo)
        assert "wJalrXUtnFEMI" not in recorded and HEX_SECRET not in recorded, repo.name


def test_a_valid_head_and_branch_are_still_read_and_project_text_is_redacted(tmp_path: Path) -> None:
    repo, _ = _hostile(tmp_path, "ok")
    sha = "a" * 40
    (repo / ".git" / "refs" / "heads" / "main").write_text(sha + "\n")
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert project_info(str(repo))["head"] == sha
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    (repo / ".git" / "refs" / "heads" / token).write_text(sha + "\n")
    (repo / ".git" / "HEAD").write_text(f"ref: refs/heads/{token}\n")
    assert project_info(str(repo))["branch"] == token
    recorded = _captured(repo)
    assert token not in recorded and sha in recorded
