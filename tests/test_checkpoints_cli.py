"""Checkpoints, keys and witnesses from the command line (issue 28), and what `verify` sees
beyond each chain once a checkpoint covers the old state: a forged chain, a cut tail, two
sessions swapped, a session dropped, a rebuilt tree, a tile changed, a forked history.

The data comes from the real hook (a subprocess, as an agent runs it) and a real ingest;
publishing to a git repository runs real git."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from agentlog.capture.command import hook_argv
from agentlog.cli import cli
from agentlog.integrity.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from agentlog.integrity.note import Verifier
from agentlog.integrity.tree import FrameTree, tree_dir
from agentlog.log import frame
from agentlog.log.layout import head_path
from agentlog.log.writer import Tip, format_head
from agentlog.operations import checkpoints
from agentlog.store.ingest import ingest
from prove_support import events_of, log_of, reseal


def _hook(root: Path, sid: str, i: int) -> None:
    payload = {"session_id": sid, "cwd": "/tmp/cp-project", "hook_event_name": "UserPromptSubmit",
               "prompt": f"prompt {i} of {sid}"}
    r = subprocess.run(hook_argv("claude-code"), input=json.dumps(payload).encode(), capture_output=True,
                       timeout=60, env={**os.environ, "AGENTLOG_HOME": str(root)})
    assert r.returncode == 0, r.stderr


def _record(root: Path, sessions: tuple[str, ...] = ("s-a", "s-b"), frames: int = 3, start: int = 0) -> None:
    for i in range(start, start + frames):
        for sid in sessions:
            _hook(root, sid, i)


def _cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _json(*args: str) -> Any:
    r = _cli(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


_log, _events, _reseal = log_of, events_of, reseal


def _verify() -> tuple[int, dict[str, Any]]:
    r = _cli("verify", "--json")
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(r.stdout)


def _trust_breaks(doc: dict[str, Any]) -> list[dict[str, str]]:
    breaks: list[dict[str, str]] = doc["trust"]["breaks"]
    return breaks


@pytest.fixture
def recorded(agentlog_home: Path) -> Path:
    """Two sessions of three frames, ingested and covered by a checkpoint."""
    _record(agentlog_home)
    assert _cli("checkpoint").exit_code == 0
    return agentlog_home


# -- signing, keys ---------------------------------------------------------------------------


def test_checkpoint_ingests_signs_and_opens_with_the_shown_key(agentlog_home: Path) -> None:
    _record(agentlog_home)  # not ingested yet: `checkpoint` ingests first
    r = _cli("checkpoint")
    assert r.exit_code == 0, r.output
    note = r.stdout
    key = _cli("keys", "show").stdout.strip()
    cp = open_checkpoint(note, Verifier.from_key_string(key))
    tree = FrameTree(str(agentlog_home))
    assert cp.size == tree.size == 6 and cp.root == tree.root_hash()
    assert cp.origin == key.split("+")[0] == _json("keys", "show")["origin"]
    # nothing new: the same checkpoint, not another one
    doc = _json("checkpoint")
    assert doc["new"] is False and doc["note"] == note and doc["size"] == 6 and doc["key"] == key
    _record(agentlog_home, frames=1, start=3)
    doc = _json("checkpoint")
    assert doc["new"] is True and doc["size"] == 8 and doc["ingested_events"] == 2
    listed = _json("checkpoint", "--list")
    assert [c["size"] for c in listed] == [6, 8] and all(c["witnesses"] == [] for c in listed)
    assert "000000000006-" in _cli("checkpoint", "--list").stdout


def test_rotate_keeps_old_checkpoints_verifiable(recorded: Path) -> None:
    old_key = _cli("keys", "show").stdout.strip()
    [first] = _json("checkpoint", "--list")
    r = _cli("keys", "rotate")  # not a terminal, no --yes: asks nobody, changes nothing
    assert r.exit_code == 2 and "--yes" in r.output and "Traceback" not in r.output
    assert _cli("keys", "show").stdout.strip() == old_key
    done = _json("keys", "rotate", "--yes")
    assert done["retired"] == old_key and done["key"] != old_key
    assert os.stat(done["retired_key_file"]).st_mode & 0o777 == 0o600
    shown = _json("keys", "show")
    assert shown["key"] == done["key"] and shown["retired"] == [old_key]
    _record(recorded, frames=1, start=3)
    new = _json("checkpoint")
    assert open_checkpoint(new["note"], Verifier.from_key_string(done["key"])).size == 8
    old_note = Path(first["path"]).read_text()
    assert open_checkpoint(old_note, Verifier.from_key_string(old_key)).size == 6
    assert [c["size"] for c in _json("checkpoint", "--list")] == [6, 8]
    code, doc = _verify()
    assert code == 0 and doc["trust"]["checkpoints"] == 2 and doc["trust"]["ok"]


def test_witness_add_list_remove(agentlog_home: Path, tmp_path: Path) -> None:
    made = _json("witness", "keygen", "alice", str(tmp_path / "alice.key"))
    assert os.stat(tmp_path / "alice.key").st_mode & 0o777 == 0o600
    assert made["key"].startswith("alice+") and "PRIVATE" not in json.dumps(made)
    (tmp_path / "bob.pub").write_text(_cli("witness", "keygen", "bob", str(tmp_path / "bob.key")).stdout)
    assert _cli("witness", "list").exit_code == 0
    assert _json("witness", "list") == []
    assert _json("witness", "add", "alice", made["key"]) == made
    assert _json("witness", "add", "bob", str(tmp_path / "bob.pub"))["name"] == "bob"
    assert [w["name"] for w in _json("witness", "list")] == ["alice", "bob"]
    r = _cli("witness", "add", "carol", made["key"])  # alice's key under another name
    assert r.exit_code == 1 and "alice" in r.output and len(r.output.strip().splitlines()) == 1
    r = _cli("witness", "add", "alice", "not-a-key")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert _json("witness", "remove", "alice")["name"] == "alice"
    assert [w["name"] for w in _json("witness", "list")] == ["bob"]
    r = _cli("witness", "remove", "alice")
    assert r.exit_code == 1 and "no witness 'alice'" in r.output
    r = _cli("witness", "keygen", "bob", str(tmp_path / "bob.key"))  # never over an existing key
    assert r.exit_code == 1 and "exists" in r.output


def _witness(tmp_path: Path, name: str = "alice", register: bool = True) -> Path:
    key = tmp_path / f"{name}.key"
    made = _json("witness", "keygen", name, str(key))
    if register:
        _json("witness", "add", name, made["key"])
    return key


def test_cosign_verifies_and_is_counted_by_verify(recorded: Path, tmp_path: Path) -> None:
    r = _cli("checkpoint", "--cosign")
    assert r.exit_code == 2 and "--witness-key" in r.output
    key = _witness(tmp_path)
    done = _json("checkpoint", "--cosign", "--witness-key", str(key))
    assert done["registered"] and done["size"] == 6 and done["previous"] is None
    assert done["path"].endswith(".cosigned") and "\u2014 alice " in Path(done["path"]).read_text()
    assert _json("checkpoint", "--list")[0]["witnesses"] == ["alice"]
    code, doc = _verify()
    assert code == 0 and doc["trust"]["witnessed"]["witnesses"] == ["alice"]
    # a later checkpoint, cosigned: the witness checks it extends the one it cosigned before
    _record(recorded, frames=1, start=3)
    _json("checkpoint")
    again = _json("checkpoint", "--cosign", "--witness-key", str(key))
    assert again["size"] == 8 and again["previous"] and again["previous"].startswith("000000000006-")
    assert _verify()[1]["trust"]["witnessed"]["size"] == 8
    # an unregistered witness may cosign, but verify does not count it (and the CLI says so)
    other = _witness(tmp_path, "bob", register=False)
    r = _cli("checkpoint", "--cosign", "--witness-key", str(other))
    assert r.exit_code == 0 and "not a registered witness" in r.stderr
    os.chmod(other, 0o644)  # a private key others can read is refused
    r = _cli("checkpoint", "--cosign", "--witness-key", str(other))
    assert r.exit_code == 1 and "chmod 600" in r.output


def test_a_bad_cosignature_is_a_break(recorded: Path, tmp_path: Path) -> None:
    done = _json("checkpoint", "--cosign", "--witness-key", str(_witness(tmp_path)))
    path = Path(done["path"])
    text = path.read_text()
    last = text.rstrip("\n").rsplit(" ", 1)
    sig = bytearray(base64.b64decode(last[1]))
    sig[-1] ^= 1
    path.write_text(last[0] + " " + base64.b64encode(bytes(sig)).decode() + "\n")
    code, doc = _verify()
    assert code == 1
    assert [(b["kind"], b["where"]) for b in _trust_breaks(doc)] == [("witness", path.name)]


def test_publish_to_a_directory(recorded: Path, tmp_path: Path) -> None:
    dest = tmp_path / "published"
    done = _json("checkpoint", "--publish", str(dest))
    [note] = [n for n in done["written"] if n.endswith(".note")]
    assert done["git_commit"] is None and "verifier-keys" in done["written"]
    key = (dest / "verifier-keys").read_text().strip()
    assert open_checkpoint((dest / note).read_text(), Verifier.from_key_string(key)).size == 6
    assert _json("checkpoint", "--publish", str(dest))["written"] == []  # only what is not there yet
    _json("checkpoint", "--cosign", "--witness-key", str(_witness(tmp_path)))
    _record(recorded, frames=1, start=3)
    _json("checkpoint")
    again = _json("checkpoint", "--publish", str(dest))
    assert sorted(n.rsplit(".", 1)[1] for n in again["written"]) == ["cosigned", "note"]
    (dest / note).write_text("something else\n")  # never overwritten
    r = _cli("checkpoint", "--publish", str(dest))
    assert r.exit_code == 1 and "refusing to overwrite" in r.output and "Traceback" not in r.output


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_publish_to_a_git_repository_commits(recorded: Path, tmp_path: Path) -> None:
    repo = tmp_path / "transparency"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    _git(repo, "config", "user.email", "log@example.org")
    _git(repo, "config", "user.name", "Log Keeper")
    (repo / "unrelated.txt").write_text("staged, not ours\n")
    _git(repo, "add", "unrelated.txt")
    dest = repo / "agentlog"
    done = _json("checkpoint", "--publish", str(dest))
    assert done["git_repository"] == str(repo) and done["git_commit"]
    assert _git(repo, "rev-parse", "HEAD").strip() == done["git_commit"]
    message = _git(repo, "log", "-1", "--format=%s")
    assert message.startswith("agentlog: publish 1 checkpoint (tree size 6) of agentlog.local/")
    files = _git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(files) == sorted(f"agentlog/{n}" for n in done["written"])  # only ours, not the staged file
    assert _json("checkpoint", "--publish", str(dest))["git_commit"] is None  # nothing new: no commit
    _record(recorded, frames=1, start=3)
    _json("checkpoint")
    second = _json("checkpoint", "--publish", str(dest))
    assert second["git_commit"] and second["git_commit"] != done["git_commit"]
    assert "tree size 8" in _git(repo, "log", "-1", "--format=%s")
    assert len(_git(repo, "log", "--format=%H").split()) == 2


# -- the daemon's periodic checkpoint ----------------------------------------------------------


def test_periodic_checkpoint_only_when_the_tree_grew(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    now = [100.0]
    periodic = checkpoints.Periodic(60.0, clock=lambda: now[0])
    assert periodic.tick(root) is None  # no tree yet: nothing signed, nothing made
    assert not os.path.exists(checkpoints.checkpoints_dir(root))
    _record(agentlog_home, frames=1)
    assert ingest(root).tree_leaves == 2
    periodic.grew()
    first = periodic.tick(root)
    assert first is not None and first.checkpoint.size == 2
    _record(agentlog_home, frames=1, start=1)
    ingest(root)
    periodic.grew()
    now[0] += 30
    assert periodic.tick(root) is None  # within the interval
    now[0] += 31
    second = periodic.tick(root)
    assert second is not None and second.checkpoint.size == 4
    now[0] += 61
    assert periodic.tick(root) is None  # the tree did not grow
    assert [k.checkpoint.size for k in checkpoints.stored(root)] == [2, 4]
    assert checkpoints.Periodic(0.0).tick(root) is None  # 0: off


def test_the_daemon_signs_checkpoints_while_frames_arrive(agentlog_home: Path) -> None:
    from agentlog.operations.daemon import start, stop

    (agentlog_home / "config.toml").write_text("checkpoint_minutes = 0.01\n")  # 0.6 s
    start(str(agentlog_home), interval=0.05)
    try:
        _record(agentlog_home, sessions=("s-d",), frames=2)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not checkpoints.kept_paths(str(agentlog_home)):
            time.sleep(0.05)
        assert checkpoints.kept_paths(str(agentlog_home)), (agentlog_home / "state" / "daemon.log").read_text()
        _record(agentlog_home, sessions=("s-d",), frames=1, start=2)
    finally:
        stop(str(agentlog_home))
    newest = checkpoints.latest(str(agentlog_home))
    assert newest is not None and newest.checkpoint.size == 3  # the last one, on the way out
    assert "checkpoint: tree size" in (agentlog_home / "state" / "daemon.log").read_text()
    assert _verify()[0] == 0


# -- verify: the attacks -------------------------------------------------------------------------


def test_untouched_tree_and_checkpoints_verify(recorded: Path) -> None:
    code, doc = _verify()
    assert code == 0 and doc["ok"] and doc["trust"]["ok"]
    trust = doc["trust"]
    assert trust["tree_size"] == 6 and trust["frames_checked"] == 6 and trust["logs"] == 2
    assert trust["checkpoints"] == 1 and trust["newest"]["size"] == 6
    r = _cli("verify")
    assert r.exit_code == 0 and "are the tree's 6 leaves" in r.stderr


def test_sealed_and_purged_logs_still_match_the_tree(recorded: Path) -> None:
    """A seal (frames move into a zstd segment) and a purge (content gone, hashes kept) change
    the files, not the frames the tree holds: no break."""
    assert _cli("seal", "--session", "s-a", "--idle-hours", "0").exit_code == 0
    assert Path(str(_log(recorded, "s-a"))[: -len(".jsonl")] + ".sealed").is_dir()
    assert _cli("purge", "--session", "s-b", "--yes").exit_code == 0
    _record(recorded, sessions=("s-a",), frames=1, start=3)  # the sealed session resumes
    assert _json("checkpoint")["size"] >= 7
    code, doc = _verify()
    assert code == 0, _trust_breaks(doc)
    assert doc["purged"] == 3 and doc["sealed_frames"] == 3
    assert doc["trust"]["frames_checked"] == doc["trust"]["tree_size"] == doc["frames"]  # every frame, in the tree


def test_a_forged_self_consistent_chain_is_reported(recorded: Path) -> None:
    path = _log(recorded, "s-a")
    events = _events(path)
    events[1] = events[1].replace(b"prompt 1 of s-a", b"prompt X of s-a")
    _reseal(path, events)
    code, doc = _verify()
    assert code == 1
    assert all(r["status"] == "intact" for r in doc["reports"])  # the chain alone sees nothing
    [b] = _trust_breaks(doc)
    assert (b["kind"], b["reason"]) == ("frame", "not_in_tree") and b["where"].endswith("s-a frame 1")
    r = _cli("verify")
    assert r.exit_code == 1 and "s-a frame 1" in r.stdout and "Traceback" not in r.output


def test_a_cut_tail_with_a_fixed_head_is_reported(recorded: Path) -> None:
    path = _log(recorded, "s-b")
    lines = path.read_bytes().splitlines(keepends=True)[:2]
    path.write_bytes(b"".join(lines))
    _seq, _prev, digest = frame.parse_envelope(lines[-1])
    Path(head_path(str(path))).write_bytes(format_head(Tip(1, digest, len(b"".join(lines)))))
    code, doc = _verify()
    assert code == 1 and all(r["status"] == "intact" for r in doc["reports"])
    [b] = _trust_breaks(doc)
    assert (b["kind"], b["reason"]) == ("log", "truncated") and b["where"].endswith("s-b frame 2")


def test_two_sessions_swapped_are_reported(recorded: Path) -> None:
    a, b = _log(recorded, "s-a"), _log(recorded, "s-b")
    events_a, events_b = _events(a), _events(b)
    _reseal(a, events_b)  # each resealed under the other's name: both chains check out
    _reseal(b, events_a)
    code, doc = _verify()
    assert code == 1 and all(r["status"] == "intact" for r in doc["reports"])
    wheres = sorted(x["where"].split("/")[-1] for x in _trust_breaks(doc))
    assert wheres == ["s-a frame 0", "s-b frame 0"]


def test_a_dropped_session_is_reported(recorded: Path) -> None:
    path = _log(recorded, "s-b")
    path.unlink()
    Path(head_path(str(path))).unlink()
    code, doc = _verify()
    assert code == 1 and [r["session"] for r in doc["reports"]] == [_log(recorded, "s-a").stem]
    [b] = _trust_breaks(doc)
    assert (b["kind"], b["reason"]) == ("log", "missing") and b["where"].endswith("s-b")


def test_a_rebuilt_tree_over_forged_logs_contradicts_the_checkpoint(recorded: Path) -> None:
    """The attacker forges a chain and rebuilds the tree from it: the tree then matches the
    logs, but not the checkpoint that signed the old state, and no new one is signed over it."""
    path = _log(recorded, "s-a")
    events = _events(path)
    events[0] = events[0].replace(b"prompt 0 of s-a", b"prompt Y of s-a")
    _reseal(path, events)
    for name in os.listdir(tree_dir(str(recorded))):
        if name not in ("checkpoints", "origin"):
            target = os.path.join(tree_dir(str(recorded)), name)
            shutil.rmtree(target) if os.path.isdir(target) else os.unlink(target)
    ingest(str(recorded))
    assert FrameTree(str(recorded)).size == 6
    code, doc = _verify()
    assert code == 1
    [b] = _trust_breaks(doc)
    assert (b["kind"], b["reason"]) == ("checkpoint", "inconsistent") and b["where"].startswith("000000000006-")
    r = _cli("checkpoint")
    assert r.exit_code == 1 and "does not extend checkpoint" in r.output


def test_a_flipped_tile_byte_is_reported(recorded: Path) -> None:
    tile = Path(tree_dir(str(recorded))) / "level" / "0"
    data = bytearray(tile.read_bytes())
    data[40] ^= 0x01  # leaf 1's hash
    tile.write_bytes(bytes(data))
    code, doc = _verify()
    assert code == 1
    reasons = {(b["kind"], b["reason"]) for b in _trust_breaks(doc)}
    assert ("tree", "root") in reasons and ("frame", "not_in_tree") in reasons
    # the Integrity page's data: the last check's result and what broke
    from agentlog.web.data import integrity

    trust = integrity(str(recorded))["trust"]
    assert trust["ok"] is False and {(b["kind"], b["reason"]) for b in trust["breaks"]} == reasons


def test_a_fork_after_the_witness_saw_it_is_reported(recorded: Path, tmp_path: Path) -> None:
    """Even with the log's own key, history a witness cosigned cannot be replaced: a newer
    checkpoint over a rewritten tree does not extend the witnessed one."""
    _json("checkpoint", "--cosign", "--witness-key", str(_witness(tmp_path)))
    root = str(recorded)
    path = _log(recorded, "s-b")
    events = _events(path)
    events[2] = events[2].replace(b"prompt 2 of s-b", b"prompt Z of s-b")
    _reseal(path, events)
    for name in ("level", "ids", "leaves", "logs", "cursors", "tree-size"):
        target = os.path.join(tree_dir(root), name)
        shutil.rmtree(target) if os.path.isdir(target) else os.unlink(target)
    _record(recorded, sessions=("s-c",), frames=1)
    ingest(root)
    tree = FrameTree(root)
    forged = sign_checkpoint(Checkpoint(checkpoints.origin(root), tree.size, tree.root_hash()), checkpoints.signer(root))
    name = f"{tree.size:012d}-{time.time_ns() // 1000}.note"
    Path(checkpoints.checkpoints_dir(root), name).write_text(forged)
    code, doc = _verify()
    assert code == 1
    found = {(b["kind"], b["reason"], b["where"]) for b in _trust_breaks(doc)}
    assert ("witness", "fork", name) in found
    assert any(kind == "checkpoint" and reason == "inconsistent" for kind, reason, _w in found)


def test_verify_with_a_session_checks_the_chain_only(recorded: Path) -> None:
    path = _log(recorded, "s-b")
    path.unlink()
    Path(head_path(str(path))).unlink()
    r = _cli("verify", "--session", "s-a", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["trust"] is None
