"""The Merkle tree over every frame (integrity/tree.py, issue 28): it grows in ingest, its
leaves are the logs' frames in ingest's order, each once, checked; it catches up a data
root recorded before it and a crash between the store's commit and its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentlog.capture.command import hook_argv
from agentlog.integrity import merkle
from agentlog.integrity.tree import FrameTree, frame_leaf_hash, leaf_data
from agentlog.log.layout import iter_logs, split_log_path
from agentlog.store.ingest import ingest


def _hook(root: Path, sid: str, i: int) -> None:
    payload = {"session_id": sid, "cwd": "/tmp/tree-project", "hook_event_name": "UserPromptSubmit",
               "prompt": f"prompt {i} of {sid}"}
    r = subprocess.run(hook_argv("claude-code"), input=json.dumps(payload).encode(), capture_output=True,
                       timeout=60, env={**os.environ, "AGENTLOG_HOME": str(root)})
    assert r.returncode == 0, r.stderr


def _frames(root: Path) -> dict[tuple[str, int], str]:
    """(log id, seq) → frame hash of every frame of every log."""
    out = {}
    for path in iter_logs(str(root)):
        provider, key = split_log_path(path)
        for line in Path(path).read_bytes().splitlines():
            frame = json.loads(line)
            out[(f"{provider}/{key}", frame["seq"])] = frame["hash"]
    return out


def _check(root: Path) -> FrameTree:
    """The tree holds every frame exactly once, and its root is the RFC 6962 root of them."""
    tree = FrameTree(str(root))
    frames = _frames(root)
    leaves = list(tree.leaves())
    assert sorted((log, seq) for _i, log, seq in leaves) == sorted(frames)
    hashes = [frame_leaf_hash(log, seq, frames[(log, seq)]) for _i, log, seq in leaves]
    assert tree.root_hash() == merkle.root_from_leaf_hashes(hashes)
    # each session's frames keep their order
    last: dict[str, int] = {}
    for _i, log, seq in leaves:
        assert seq == last.get(log, -1) + 1
        last[log] = seq
    return tree


def test_the_leaf_binds_log_seq_and_hash() -> None:
    data = leaf_data("claude_code/abc", 7, "ab" * 32)
    assert data == b"agentlog/frame/v1\nclaude_code/abc\n7\n" + b"ab" * 32 + b"\n"
    assert frame_leaf_hash("claude_code/abc", 7, "ab" * 32) == merkle.leaf_hash(data)
    assert frame_leaf_hash("claude_code/abc", 8, "ab" * 32) != frame_leaf_hash("claude_code/abc", 7, "ab" * 32)
    assert frame_leaf_hash("claude_code/abd", 7, "ab" * 32) != frame_leaf_hash("claude_code/abc", 7, "ab" * 32)


def test_ingest_grows_the_tree_with_every_frame_once(tmp_path: Path) -> None:
    root = tmp_path / "home"
    for i in range(3):
        for sid in ("s-a", "s-b"):
            _hook(root, sid, i)
    report = ingest(str(root))
    assert report.tree_leaves == 6 and report.tree_error is None
    tree = _check(root)
    assert tree.size == 6
    old_root = tree.root_hash()
    assert ingest(str(root)).tree_leaves == 0  # nothing new: nothing added
    _hook(root, "s-a", 3)
    _hook(root, "s-c", 0)
    assert ingest(str(root)).tree_leaves == 2
    tree = _check(root)
    assert tree.size == 8
    proof = tree.tiles.consistency_proof(6, 8)
    assert merkle.verify_consistency(6, 8, old_root, tree.root_hash(), proof)
    frames = _frames(root)
    for index, log, seq in tree.leaves():
        assert tree.leaf_index(log, seq) == index
        assert merkle.verify_inclusion(frame_leaf_hash(log, seq, frames[(log, seq)]), index, 8,
                                       tree.tiles.inclusion_proof(index), tree.root_hash())


def test_a_data_root_from_before_the_tree_is_caught_up(tmp_path: Path) -> None:
    """The store already holds the frames (ingested before the tree existed): the next ingest
    reads them from the logs, checked, into the tree."""
    import shutil

    from agentlog.integrity.tree import tree_dir

    root = tmp_path / "home"
    for i in range(4):
        _hook(root, "s-old", i)
    ingest(str(root))
    shutil.rmtree(tree_dir(str(root)))
    assert ingest(str(root)).tree_leaves == 4
    assert _check(root).size == 4


def test_a_tampered_frame_never_enters_the_tree(tmp_path: Path) -> None:
    import shutil

    from agentlog.integrity.tree import tree_dir

    root = tmp_path / "home"
    for i in range(4):
        _hook(root, "s-t", i)
    ingest(str(root))
    shutil.rmtree(tree_dir(str(root)))
    [path] = iter_logs(str(root))
    lines = Path(path).read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"prompt 2", b"prompt X")
    Path(path).write_bytes(b"".join(lines))
    tree = FrameTree(str(root))
    assert tree.catch_up_all() == 2  # frames 0 and 1; frame 2's hash does not check out
    assert [seq for _i, _log, seq in tree.leaves()] == [0, 1]


def test_a_killed_ingest_leaves_a_tree_that_agrees_with_the_logs(tmp_path: Path) -> None:
    """kill -9 at random moments of ingests growing the tree; after the next ingest the tree
    holds every frame once (bounded: a few rounds)."""
    root = tmp_path / "home"
    env = {**os.environ, "AGENTLOG_HOME": str(root)}
    code = "import sys; from agentlog.store.ingest import ingest; ingest(sys.argv[1], batch_bytes=2048)"
    for round_ in range(4):
        for i in range(6):
            _hook(root, f"s-k{round_ % 2}", round_ * 6 + i)
        proc = subprocess.Popen([sys.executable, "-c", code, str(root)], env=env)
        time.sleep(0.25 + 0.15 * round_)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    ingest(str(root))
    _check(root)


def test_rebuilding_the_store_keeps_the_tree(tmp_path: Path) -> None:
    """The tree is a commitment (checkpoints sign its roots), not a derived table: `rebuild`
    drops and refills the store, and the tree stays as it was, no frame added twice."""
    from agentlog.store.rebuild import rebuild

    root = tmp_path / "home"
    for i in range(3):
        _hook(root, "s-r", i)
    ingest(str(root))
    before = FrameTree(str(root)).root_hash()
    assert rebuild(str(root)).tree_leaves == 0
    tree = _check(root)
    assert tree.size == 3 and tree.root_hash() == before


def test_the_batched_leaf_hashes_are_the_leaf_hashes() -> None:
    from agentlog.integrity.tree import Segment, _leaf_hashes

    pending = [Segment("claude_code/a", [(0, b"ab" * 32)], [None], [0]),
               Segment("codex/b é%d", [(12, b"cd" * 32), (13, b"01" * 32)], [1, 2], [0, 9]),
               Segment("claude_code/a", [(1, b"ef" * 32)], [3], [5])]
    assert _leaf_hashes(pending) == [frame_leaf_hash(seg.log, seq, h.decode()) for seg in pending
                                     for seq, h in seg.frames]


def test_a_long_ingest_grows_the_tree_in_a_worker_process(tmp_path: Path) -> None:
    """A run that fills a batch hands the tree to a child process (integrity/tree_worker.py),
    which reads and checks the frames itself; the tree holds every frame once."""
    root = tmp_path / "home"
    for i in range(6):
        for sid in ("s-w1", "s-w2"):
            _hook(root, sid, i)
    report = ingest(str(root), batch_bytes=2048)
    assert report.tree_worker and report.tree_error is None
    assert report.tree_leaves == 12 and report.tree_cpu_secs > 0
    assert _check(root).size == 12
    small = ingest(str(root))  # nothing new, one batch: no worker
    assert not small.tree_worker and small.tree_leaves == 0


def test_two_writers_of_one_tree_take_turns_and_read_what_the_other_wrote(tmp_path: Path) -> None:
    """A tree object opened before another process grew the tree reads it again under the
    writer lock before growing: no frame is added twice, none is lost."""
    root = tmp_path / "home"
    for i in range(3):
        _hook(root, "s-x", i)
    stale = FrameTree(str(root))  # opened on an empty tree
    assert FrameTree(str(root)).catch_up_all() == 3
    _hook(root, "s-x", 3)
    assert stale.catch_up_all() == 1
    assert _check(root).size == 4
