"""The machine side of the vault (issue 30): enrolment, the ship pass, prune.

Local parts (chain state, pending frames, divergence, sealed logs, prune rules)
are tested directly; everything that talks to a vault runs against the real
vault server (vault-core's Starlette app under uvicorn on a free loopback port,
see vault_support.py) and, where the issue says so, real client processes
(``python -m agentlog enroll/ship``).
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from agentlog.core.fastjson import dumps_bytes
from agentlog.log.seal import seal_log
from agentlog.log.writer import SessionLog
from agentlog.vault import VaultError
from agentlog.vault.chains import ChainState, Diverged, local_chains, pending, read_head
from agentlog.vault.ship import batches, prune

PROVIDER = "test"


def event(i: int, pad: int = 0) -> bytes:
    return dumps_bytes({"kind": "tool_call", "i": i, "captured_at": 1_700_000_000_000_000 + i,
                        "text": f"frame {i} secret-canary-{i} " + "x" * pad})


def make_log(root: Path, key: str = "s1", n: int = 10, start: int = 0, pad: int = 0) -> SessionLog:
    log = SessionLog(str(root), PROVIDER, key, durability="relaxed")
    if n:
        log.append([event(start + i, pad) for i in range(n)])
    return log


def chain_of(key: str = "s1") -> str:
    return f"{PROVIDER}~{key}"


# -- local: pending frames ----------------------------------------------------------------

def test_pending_reads_every_frame_and_continues_after_shipped(tmp_path: Path) -> None:
    log = make_log(tmp_path, n=10)
    st = ChainState(str(tmp_path), chain_of())
    entries = pending(log.path, st, None, None)
    assert [e.seq for e in entries] == list(range(10))
    assert entries[0].at == 1_700_000_000_000_000
    shipped = st.record_shipped(entries[:4])
    assert (shipped.seq, shipped.hash) == (3, entries[3].hash)
    assert st.shipped() == shipped
    assert [e.seq for e in pending(log.path, st, shipped, None)] == list(range(4, 10))
    assert [e.seq for e in pending(log.path, st, shipped, 6)] == [4, 5, 6]
    assert read_head(log.path) == (9, entries[9].hash)
    assert stat.S_IMODE(os.stat(os.path.join(st.dir, "shipped")).st_mode) == 0o600


def test_pending_reads_sealed_segments_and_the_open_file(tmp_path: Path) -> None:
    log = make_log(tmp_path, n=20, pad=500)
    seal_log(log.path, level=3)
    log.append([event(20 + i) for i in range(5)])
    st = ChainState(str(tmp_path), chain_of())
    entries = pending(log.path, st, None, None)
    assert [e.seq for e in entries] == list(range(25))
    shipped = st.record_shipped(entries[:12])  # inside the sealed segment
    assert [e.seq for e in pending(log.path, st, shipped, None)] == list(range(12, 25))


def _rewrite(path: str, old: bytes, new: bytes) -> None:
    data = Path(path).read_bytes()
    assert old in data
    Path(path).write_bytes(data.replace(old, new, 1))


def test_a_tampered_unshipped_frame_is_named_by_its_seq(tmp_path: Path) -> None:
    log = make_log(tmp_path, n=10)
    st = ChainState(str(tmp_path), chain_of())
    shipped = st.record_shipped(pending(log.path, st, None, None)[:5])
    _rewrite(log.path, b"frame 7 ", b"frame X ")
    with pytest.raises(Diverged) as e:
        pending(log.path, st, shipped, None)
    assert e.value.seq == 7


def test_a_rewritten_shipped_frame_is_named_by_the_first_diverging_seq(tmp_path: Path) -> None:
    """A rewrite that re-chains everything after it still differs from what was shipped."""
    log = make_log(tmp_path, n=10)
    st = ChainState(str(tmp_path), chain_of())
    shipped = st.record_shipped(pending(log.path, st, None, None)[:8])
    os.unlink(log.path)
    os.unlink(log.head_file)
    log2 = SessionLog(str(tmp_path), PROVIDER, "s1", durability="relaxed")
    log2.append([event(i) if i != 3 else event(333) for i in range(10)])
    with pytest.raises(Diverged) as e:
        pending(log.path, st, shipped, None)
    assert e.value.seq == 3


def test_batches_cut_at_frame_boundaries(tmp_path: Path) -> None:
    log = make_log(tmp_path, n=10, pad=1000)
    entries = pending(log.path, ChainState(str(tmp_path), chain_of()), None, None)
    size = entries[0].length
    cut = batches(entries, limit=3 * size + 10)
    assert [len(b) for b in cut] == [3, 3, 3, 1]
    assert [len(b) for b in batches(entries, limit=10)] == [1] * 10  # an oversize frame is a batch of its own


def test_local_chains_lists_open_and_sealed_logs(tmp_path: Path) -> None:
    make_log(tmp_path, "a", 3)
    b = make_log(tmp_path, "b", 3)
    seal_log(b.path, level=3)
    assert [c for c, _ in local_chains(str(tmp_path))] == [chain_of("a"), chain_of("b")]


# -- local: prune rules ----------------------------------------------------------------------

def test_prune_keeps_partly_shipped_and_stopped_and_removes_complete_idle(tmp_path: Path) -> None:
    root = str(tmp_path)
    full = make_log(tmp_path, "full", 5)
    part = make_log(tmp_path, "part", 5)
    stop = make_log(tmp_path, "stop", 5)
    seal_log(full.path, level=3)
    for log, key, k in ((full, "full", 5), (part, "part", 3), (stop, "stop", 5)):
        st = ChainState(root, chain_of(key))
        st.record_shipped(pending(log.path, st, None, None)[:k])
        st.new_chain_key(b"k" * 32)
    ChainState(root, chain_of("stop")).stop("test", 2)
    later = time.time() + 3600
    assert not prune(root, chain_of("full"), full.path, 7200, later)  # not idle long enough
    assert not prune(root, chain_of("part"), part.path, 60, later)
    assert not prune(root, chain_of("stop"), stop.path, 60, later)
    assert prune(root, chain_of("full"), full.path, 60, later)
    assert not os.path.exists(full.path) and not os.path.exists(full.head_file)
    assert not os.path.exists(full.path[: -len(".jsonl")] + ".sealed")
    assert ChainState(root, chain_of("full")).chain_key() is None
    assert ChainState(root, chain_of("full")).shipped() is not None
    assert os.path.exists(part.path) and os.path.exists(stop.path)
    assert [c for c, _ in local_chains(root)] == [chain_of("part"), chain_of("stop")]


def test_not_enrolled_is_one_clear_error(tmp_path: Path) -> None:
    from agentlog.vault.machine import load

    with pytest.raises(VaultError, match="not enrolled"):
        load(str(tmp_path))


def test_state_files_are_json_and_private(tmp_path: Path) -> None:
    st = ChainState(str(tmp_path), chain_of())
    st.stop("diverges", 4)
    d = st.stopped()
    assert d is not None and d["seq"] == 4 and d["reason"] == "diverges"
    assert json.loads(Path(st.dir, "stopped").read_text())["seq"] == 4
    assert stat.S_IMODE(os.stat(st.dir).st_mode) == 0o700
