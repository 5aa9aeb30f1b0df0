"""The tree's event-id index (integrity/leaf_ids.py): which leaf holds an event, found
without the store, through runs merged as a binary counter."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.integrity.leaf_ids import LeafIds, frame_key, id_key
from agentlog.integrity.tree import FrameTree, tree_dir
from agentlog.store.ingest import ingest
from tests.prove_support import hook

pytestmark = pytest.mark.quick


def _index(tmp_path: Path, runs: list[list[int | None]]) -> tuple[LeafIds, dict[int, set[tuple[int, int]]]]:
    """An index written run after run as the tree writes it; and what it must answer."""
    ids = LeafIds(str(tmp_path / "tree"), durable=False)
    expected: dict[int, set[tuple[int, int]]] = {}
    size = 0
    for keys in runs:
        offsets = [1000 * (size + i) for i in range(len(keys))]
        ids.prepare(size)
        ids.write(size, size + len(keys), keys, offsets)
        ids.merge()
        for i, k in enumerate(keys):
            if k is not None:
                expected.setdefault(k, set()).add((size + i, offsets[i]))
        size += len(keys)
    return ids, expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.integers(0, 40), st.integers(0, 2**48 - 1)), max_size=60),
                min_size=1, max_size=25))
def test_every_key_finds_every_leaf_that_carries_it(tmp_path_factory: pytest.TempPathFactory,
                                                    runs: list[list[int | None]]) -> None:
    ids, expected = _index(tmp_path_factory.mktemp("ids"), runs)
    size = sum(map(len, runs))
    assert ids.covered(size) == size
    for key, hits in expected.items():
        assert ids.lookup(key, size) == sorted(hits)
        cut = size // 2  # a reader of an older, smaller tree sees only its leaves
        assert ids.lookup(key, cut) == sorted(h for h in hits if h[0] < cut)
    assert ids.lookup(2**48, size) == []


def test_runs_stay_few_and_merged(tmp_path: Path) -> None:
    rng = random.Random(29)
    runs = [[rng.randrange(2**48) for _ in range(rng.randint(1, 9))] for _ in range(300)]
    ids, expected = _index(tmp_path, runs)
    size = sum(map(len, runs))
    assert len(ids.runs()) <= 2 * size.bit_length()
    keys_in_files = sum(os.path.getsize(os.path.join(ids.directory, r.name)) for r in ids.runs()) // 20
    assert keys_in_files == size  # each key once: merged runs replaced the runs they hold
    for key in rng.sample(sorted(expected), 50):
        assert ids.lookup(key, size) == sorted(expected[key])


def test_what_a_crash_left_is_removed_and_a_cut_merge_answers_once(tmp_path: Path) -> None:
    ids, expected = _index(tmp_path, [[1, 2, 3], [4, 5, 6]])  # merged: one run 0-6
    [whole] = ids.runs()
    # a merge cut before it removed what it replaced: the two old runs are back beside the merged one
    ids.write(0, 3, [1, 2, 3], [0, 1000, 2000])
    ids.write(3, 6, [4, 5, 6], [3000, 4000, 5000])
    assert ids.lookup(5, 6) == [(4, 4000)]
    # a commit cut after its run was written: a run beyond the committed size
    ids.write(6, 9, [7, 8, 9], [0, 0, 0])
    assert ids.lookup(7, 6) == []
    ids.prepare(6)
    assert ids.runs() == [whole]
    assert ids.lookup(9, 6) == []


def test_ids_and_frames_give_the_same_key() -> None:
    eid = "019bab07-7aea-7011-b2a4-88f6a79a886b"
    frame = b'{"v":1,"prev":"' + b"0" * 64 + b'","seq":3,"event":{"event_id":"' + eid.encode() + b'","kind":"x"}'
    at = frame.index(b'{"event_id"')
    assert frame_key(frame, at) == id_key(eid) == id_key(f"  {eid.upper()} ") == 0x88F6A79A886B
    assert frame_key(frame, at + 1) is None and frame_key(frame, -1) is None
    for odd in ("", "ev_123", eid[:-1], eid[:-1] + "g", eid[:23] + "_" + eid[24:], eid[:24] + "+ab_cd 12345"):
        assert id_key(odd) is None


def _events(root: Path) -> list[tuple[str, str, int, int]]:
    """(event id, log id, seq, offset) of every event in the logs."""
    from agentlog.log.layout import iter_logs, split_log_path

    out = []
    for path in iter_logs(str(root)):
        provider, key = split_log_path(path)
        offset = 0
        for line in Path(path).read_bytes().splitlines(keepends=True):
            frame = json.loads(line)
            out.append((frame["event"]["event_id"], f"{provider}/{key}", frame["seq"], offset))
            offset += len(line)
    return out


def test_ingest_indexes_every_event_and_an_older_tree_is_indexed_once(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "home"
    for i in range(5):
        for sid in ("s-a", "s-b"):
            hook(root, sid, i)
    ingest(str(root), batch_bytes=2048)
    tree = FrameTree(str(root))
    events = _events(root)
    assert len(events) == tree.size == 10
    for event_id, log, seq, offset in events:
        [(leaf, at)] = tree.event_leaves(event_id) or [(-1, -1)]
        assert tree.leaf_at(leaf) == (log, seq) and at == offset
    # a tree grown before the index: the next ingest indexes what the tree holds, from the logs
    shutil.rmtree(os.path.join(tree_dir(str(root)), "ids"))
    assert FrameTree(str(root)).event_leaves(events[0][0]) is None
    hook(root, "s-c", 0)
    ingest(str(root))
    tree = FrameTree(str(root))
    for event_id, log, seq, offset in _events(root):
        [(leaf, at)] = tree.event_leaves(event_id) or [(-1, -1)]
        assert tree.leaf_at(leaf) == (log, seq) and at == offset


def test_prove_finds_an_event_without_the_store_and_proves_the_same(tmp_path: Path) -> None:
    """With the tree current, `prove ev_…` reads neither DuckDB nor Delta (the whole process stays
    far under 300 ms at 1.45 M events; docs/benchmarks.md); its bundle is the store path's."""
    import shutil

    from agentlog.operations.proofs import _indexed_event, prove

    root = tmp_path / "home"
    for i in range(3):
        hook(root, "s-p", i)
    ingest(str(root))
    event_id = _events(root)[1][0]
    code = ("import sys, json; from agentlog.operations.proofs import prove; "
            "b = prove(sys.argv[1], sys.argv[2]); "
            "print(json.dumps([sorted(m for m in sys.modules if m.split('.')[0] in "
            "('duckdb', 'deltalake', 'pyarrow')), b['entries']]))")
    r = subprocess.run([sys.executable, "-c", code, str(root), f"ev_{event_id}"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "AGENTLOG_HOME": str(root)})
    assert r.returncode == 0, r.stderr
    heavy, fast_entries = json.loads(r.stdout)
    assert heavy == []
    shutil.rmtree(os.path.join(tree_dir(str(root)), "ids"))  # the index cannot answer: the store is asked
    assert prove(str(root), f"ev_{event_id}")["entries"] == fast_entries
    # an id sharing the event's index key (its last 12 digits) is not taken for it
    impostor = "00000000-0000-7000-8000-" + event_id[24:]
    assert _indexed_event(str(root), impostor, FrameTree(str(root))) is None
