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
from typing import Any

import pytest

from agentlog.core.fastjson import dumps_bytes
from agentlog.log.seal import seal_log
from agentlog.log.writer import SessionLog
from agentlog.vault import VaultError
from agentlog.vault.chains import ChainState, Diverged, local_chains, pending, pending_batches, read_head
from agentlog.vault.ship import prune

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
    assert entries[0].entry.at == 1_700_000_000_000_000
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
    st = ChainState(str(tmp_path), chain_of())
    entries = pending(log.path, st, None, None)
    size = entries[0].length
    cut = list(pending_batches(log.path, st, None, None, limit=3 * size + 10))
    assert [len(b.entries) for b in cut] == [3, 3, 3, 1]
    assert b"".join(b.data for b in cut) == Path(log.path).read_bytes()
    assert [len(b.entries) for b in pending_batches(log.path, st, None, None, limit=10)] == [1] * 10  # oversize: alone


@pytest.mark.parametrize("chunk", [7, 333, 4096])
def test_batches_hold_the_bytes_they_index_across_read_chunks_and_sealed_segments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Frames are read once, in chunks that cut lines anywhere: every batch's bytes are
    exactly its frames' lines, whichever chunk, segment or batch boundary they cross."""
    import agentlog.log.segments as segments
    import agentlog.vault.chains as chains

    log = make_log(tmp_path, n=30, pad=200)
    seal_log(log.path, level=3)
    log.append([event(30 + i, pad=i * 7) for i in range(12)])
    whole = b"".join(line for _off, line in segments.lines_from(log.path, 0))
    real = segments.read_from
    monkeypatch.setattr(chains, "read_from", lambda path, off: real(path, off, chunk))
    st = ChainState(str(tmp_path), chain_of())
    for limit in (1, 900, 2500, 1 << 20):
        cut = list(pending_batches(log.path, st, None, None, limit=limit))
        assert [e.seq for b in cut for e in b.entries] == list(range(42))
        assert b"".join(b.data for b in cut) == whole
        for b in cut:
            assert len(b.data) == sum(e.length for e in b.entries)
            assert len(b.entries) == 1 or len(b.data) <= limit
    shipped = st.record_shipped(pending(log.path, st, None, 17))
    rest = list(pending_batches(log.path, st, shipped, 25, limit=900))
    assert [e.seq for b in rest for e in b.entries] == list(range(18, 26))
    assert b"".join(b.data for b in rest) == whole[shipped.offset:rest[-1].entries[-1].offset + rest[-1].entries[-1].length]


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


def test_an_append_waiting_on_prune_goes_to_a_new_log_not_the_removed_one(tmp_path: Path) -> None:
    """A hook that opened the log just before prune took its lock waits, then finds the file
    gone from its path: its frame goes to a log begun again there (seq 0), never to the
    removed file (where nothing would ever read it)."""
    import fcntl
    import threading

    root = str(tmp_path)
    log = make_log(tmp_path, "race", 4)
    st = ChainState(root, chain_of("race"))
    st.record_shipped(pending(log.path, st, None, None))
    st.new_chain_key(b"k" * 32)
    fd = os.open(log.path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # prune's lock, held while the hook arrives
    done: list[object] = []
    hook = threading.Thread(target=lambda: done.append(make_log(tmp_path, "race", 0).append([event(99)])))
    hook.start()
    time.sleep(0.3)
    assert not done  # waiting for the lock
    os.unlink(log.path)  # what prune does under the lock
    os.unlink(log.head_file)
    st.drop_chain_key()
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    hook.join(10)
    assert done and done[0].seqs == [0]  # type: ignore[attr-defined]
    lines = Path(log.path).read_bytes().splitlines()
    assert len(lines) == 1 and b"frame 99 " in lines[0]
    assert read_head(log.path) is not None and read_head(log.path)[0] == 0  # type: ignore[index]


def test_a_session_written_again_after_prune_is_kept_not_stopped(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    log = make_log(home, "again", 5)
    vault.enroll(home)
    assert ship(home)["rc"] == 0
    assert prune(str(home), chain_of("again"), log.path, 60, time.time() + 3600)
    make_log(home, "again", 3, start=50)  # the session resumed: its log begins again at seq 0
    r = ship(home)
    c = r["by_chain"][chain_of("again")]
    assert r["rc"] == 0 and c["status"] == "kept" and c["shipped_seq"] == 4, r
    assert "stay on this machine" in c["message"]
    assert ChainState(str(home), chain_of("again")).stopped() is None


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


# -- against a real vault --------------------------------------------------------------------

import random  # noqa: E402
import signal  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from typing import Iterator  # noqa: E402

from vault_support import SRC, Vault, agentlog, env_for, restart, start_vault  # noqa: E402


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vault]:
    v = start_vault(tmp_path_factory.mktemp("vault"))
    yield v
    v.stop()


def vault_batches(v: Vault, chain: str | None = None) -> list[tuple[str, str, int, int]]:
    """(machine, chain, first, last) of every batch the vault stores."""
    db = sqlite3.connect(f"file:{v.data / 'vault.db'}?mode=ro", uri=True)
    try:
        cols = [r[1] for r in db.execute("PRAGMA table_info(batches)")]
        rows = db.execute(f"SELECT machine_id, chain, first_seq, last_seq FROM batches ORDER BY first_seq").fetchall()
    finally:
        db.close()
    assert "first_seq" in cols
    return [tuple(r) for r in rows if chain is None or r[1] == chain]  # type: ignore[misc]


def pulled(v: Vault, into: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    return v.admin("pull", "--into", str(into), check=check)


def ship(home: Path, *args: str) -> dict:  # type: ignore[type-arg]
    r = agentlog(home, "ship", "--json", *args)
    out = json.loads(r.stdout) if r.stdout.strip() else {}
    out["rc"] = r.returncode
    out["stderr"] = r.stderr
    out["by_chain"] = {c["chain"]: c for c in out.get("chains", [])}
    return out


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []


def test_enroll_refuses_used_expired_and_mismatched_tokens_writing_nothing(vault: Vault, tmp_path: Path) -> None:
    tok = vault.token()
    ok = tmp_path / "ok"
    agentlog(ok, "enroll", vault.url, tok, "--host", "h-used-1", check=True)
    vdir = ok / "vault"
    for name in ("machine.key", "machine.id", "server", "recipients.json", "host"):
        assert stat.S_IMODE(os.stat(vdir / name).st_mode) == 0o600, name
    assert stat.S_IMODE(os.stat(vdir).st_mode) == 0o700
    assert len((vdir / "machine.key").read_bytes()) == 32
    again = agentlog(ok, "enroll", vault.url, vault.token(), "--host", "h-used-1b")
    assert again.returncode == 1 and "already enrolled" in again.stderr
    used = agentlog(tmp_path / "used", "enroll", vault.url, tok, "--host", "h-used-2")
    assert used.returncode == 1 and "refused" in used.stderr and used.stderr.count("\n") == 1
    assert files_under(tmp_path / "used" / "vault") == []
    # an expired token (made directly in the vault's store: the CLI only makes live ones)
    from agentlog.vault.storage import Storage

    fp = tok.split(".")[0]
    st = Storage(str(vault.data))
    now = int(time.time())
    st.add_token("enroll", "expired-secret", now - 7200, now - 3600, set_fp=fp)
    st.close()
    exp = agentlog(tmp_path / "exp", "enroll", vault.url, f"{fp}.expired-secret", "--host", "h-exp")
    assert exp.returncode == 1 and files_under(tmp_path / "exp" / "vault") == []
    # a token naming another recipient set: the vault answers, the machine refuses
    wrong = "0" * 64 + "." + vault.token().split(".", 1)[1]
    mis = agentlog(tmp_path / "mis", "enroll", vault.url, wrong, "--host", "h-mis")
    assert mis.returncode == 1 and "not the one the token names" in mis.stderr
    assert files_under(tmp_path / "mis" / "vault") == []
    plain = agentlog(tmp_path / "plain", "enroll", "http://example.com", tok)
    assert plain.returncode == 1 and "plain http" in plain.stderr


def test_ship_50_frames_then_more_and_pull_byte_identical(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    log = make_log(home, "s50", 50)
    vault.enroll(home)
    r = ship(home)
    assert r["rc"] == 0, r
    assert r["by_chain"][chain_of("s50")]["frames"] == 50
    assert ship(home)["by_chain"][chain_of("s50")]["status"] == "up to date"
    log.append([event(50 + i) for i in range(20)])
    r = ship(home)
    assert r["by_chain"][chain_of("s50")]["frames"] == 20 and r["by_chain"][chain_of("s50")]["shipped_seq"] == 69
    mine = [b for b in vault_batches(vault, chain_of("s50"))]
    assert [(b[2], b[3]) for b in mine] == [(0, 49), (50, 69)]
    into = tmp_path / "pulled"
    p = pulled(vault, into)
    assert "FAILED" not in p.stderr
    assert (into / "logs" / PROVIDER / "s50.jsonl").read_bytes() == Path(log.path).read_bytes()
    side = [json.loads(x) for x in (into / "vault-pull" / "chains.jsonl").read_text().splitlines()]
    assert any(s["chain"] == chain_of("s50") and s["host"] and s["machine_id"] for s in side)
    # the pulled root is an ordinary data root
    v = agentlog(into, "verify")
    assert v.returncode == 0, v.stdout + v.stderr


def test_lost_acknowledgement_is_recovered_with_one_409(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    log = make_log(home, "lost", 13)
    vault.enroll(home)
    assert ship(home)["rc"] == 0
    st = ChainState(str(home), chain_of("lost"))
    entries = pending(log.path, st, None, None)
    (Path(st.dir) / "shipped").write_bytes(f"4 {entries[4].hash} {entries[4].offset + entries[4].length}\n".encode())
    log.append([event(100 + i) for i in range(3)])
    r = ship(home)
    c = r["by_chain"][chain_of("lost")]
    assert r["rc"] == 0 and c["status"] == "shipped" and c["shipped_seq"] == 15, r
    assert [(b[2], b[3]) for b in vault_batches(vault, chain_of("lost"))] == [(0, 12), (13, 15)]
    receipts = sqlite3.connect(f"file:{vault.data / 'vault.db'}?mode=ro", uri=True)
    try:
        statuses = [s for (s,) in receipts.execute("SELECT status FROM receipts WHERE chain = ?", (chain_of("lost"),))]
    finally:
        receipts.close()
    assert statuses.count(409) == 1, statuses


def test_a_local_rewrite_after_shipping_stops_the_session(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    log = make_log(home, "rw", 10)
    other = make_log(home, "fine", 3)
    vault.enroll(home)
    assert ship(home)["rc"] == 0
    before = vault_batches(vault, chain_of("rw"))
    log.append([event(10 + i) for i in range(5)])
    _rewrite(log.path, b"frame 12 ", b"frame Y ")
    other.append([event(3)])
    r = ship(home)
    c = r["by_chain"][chain_of("rw")]
    assert r["rc"] == 1 and c["status"] == "stopped" and c["seq"] == 12, r
    assert "diverges at seq 12" in c["message"]
    assert r["by_chain"][chain_of("fine")]["status"] == "shipped"  # other sessions go on
    assert vault_batches(vault, chain_of("rw")) == before
    r = ship(home)  # stays stopped: never resolved automatically
    assert r["by_chain"][chain_of("rw")]["status"] == "stopped" and r["rc"] == 1


def _ship_in_process(home: Path, monkeypatch: pytest.MonkeyPatch, batch_bytes: int) -> Any:
    """One pass in this process with small batches, so that the pipeline holds many."""
    import agentlog.vault.ship as ship_mod

    monkeypatch.setattr(ship_mod, "BATCH_BYTES", batch_bytes)
    return ship_mod.run_once(str(home))


def test_a_pass_of_many_batches_ships_each_once_in_order(vault: Vault, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "m"
    log = make_log(home, "many", 41, pad=900)
    vault.enroll(home)
    res = _ship_in_process(home, monkeypatch, 4000)  # ~4 frames a batch
    assert res.status == "ok" and [(c.status, c.frames, c.shipped_seq) for c in res.chains] == [("shipped", 41, 40)]
    got = [(b[2], b[3]) for b in vault_batches(vault, chain_of("many"))]
    assert len(got) >= 10 and got[0][0] == 0 and got[-1][1] == 40
    assert all(b[0] == a[1] + 1 for a, b in zip(got, got[1:]))  # dense, no batch twice
    log.append([event(41 + i, pad=900) for i in range(9)])
    res = _ship_in_process(home, monkeypatch, 4000)
    assert [(c.frames, c.shipped_seq) for c in res.chains] == [(9, 49)]
    pulled = tmp_path / "pulled"
    vault.admin("pull", "--into", str(pulled))
    assert (pulled / "logs" / PROVIDER / "many.jsonl").read_bytes() == Path(log.path).read_bytes()


def test_a_frame_failing_its_check_mid_pass_ships_the_batches_before_it(vault: Vault, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline has batches out when a later frame fails: they are answered and
    recorded, the chain stops at that frame's seq, and nothing after it is sent."""
    home = tmp_path / "m"
    log = make_log(home, "mid", 40, pad=900)
    vault.enroll(home)
    _rewrite(log.path, b"frame 29 ", b"frame Z ")
    res = _ship_in_process(home, monkeypatch, 4000)
    (c,) = res.chains
    assert c.status == "stopped" and c.seq == 29, c
    got = [(b[2], b[3]) for b in vault_batches(vault, chain_of("mid"))]
    last = got[-1][1]
    assert got[0][0] == 0 and last < 29 and all(b[0] == a[1] + 1 for a, b in zip(got, got[1:]))
    st = ChainState(str(home), chain_of("mid"))
    shipped = st.shipped()
    assert shipped is not None and shipped.seq == last  # what the vault holds is recorded as shipped
    assert _ship_in_process(home, monkeypatch, 4000).chains[0].status == "stopped"


def test_a_lost_acknowledgement_mid_stream_is_recovered(vault: Vault, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine forgets that the vault holds seqs 0-20 (a crash after the vault stored them):
    the next pass sends from 0 with batches cut elsewhere, is told where the vault is, and goes on."""
    home = tmp_path / "m"
    log = make_log(home, "lostmid", 21, pad=900)
    vault.enroll(home)
    assert _ship_in_process(home, monkeypatch, 1 << 20).chains[0].shipped_seq == 20
    st = ChainState(str(home), chain_of("lostmid"))
    for name in ("shipped", "hashes"):
        os.unlink(os.path.join(st.dir, name))
    log.append([event(21 + i, pad=900) for i in range(12)])
    res = _ship_in_process(home, monkeypatch, 4000)
    (c,) = res.chains
    assert c.status == "shipped" and c.shipped_seq == 32, c
    got = [(b[2], b[3]) for b in vault_batches(vault, chain_of("lostmid"))]
    assert got[0] == (0, 20) and got[-1][1] == 32 and all(b[0] == a[1] + 1 for a, b in zip(got, got[1:]))


def test_a_recipient_set_signed_by_a_stranger_stops_shipping(vault: Vault, tmp_path: Path) -> None:
    from agentlog.vault.crypto import AdminKey, RecipientSet, SignedRecipientSet

    home = tmp_path / "m"
    make_log(home, "x", 3)
    vault.enroll(home)
    pinned = home / "vault" / "recipients.json"
    stranger = AdminKey.generate()
    forged = SignedRecipientSet.sign(RecipientSet((stranger.public,), 99), stranger)
    pinned.write_text(json.dumps(forged.to_json()))  # the vault's real set is not signed by this pinned admin
    r = ship(home)
    assert r["rc"] == 1 and "not acceptable" in r["stderr"] and "nothing shipped" in r["stderr"]
    assert vault_batches(vault, chain_of("x")) == [] or all(b[0] for b in vault_batches(vault, chain_of("x")))
    assert not (home / "vault" / "chains" / chain_of("x") / "shipped").exists()


def test_prune_keeps_stopped_and_partly_shipped_sessions(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    done = make_log(home, "done", 5)
    bad = make_log(home, "bad", 5)
    vault.enroll(home)
    assert ship(home)["rc"] == 0
    bad.append([event(5), event(6)])
    _rewrite(bad.path, b"frame 6 ", b"frame Z ")
    r = ship(home, "--prune-after", "0s")
    assert r["by_chain"][chain_of("done")]["status"] == "pruned"
    assert r["by_chain"][chain_of("bad")]["status"] == "stopped"
    assert not os.path.exists(done.path) and os.path.exists(bad.path)


def test_sealed_logs_ship(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    log = make_log(home, "sealed", 30, pad=300)
    seal_log(log.path, level=3)
    log.append([event(30 + i) for i in range(4)])
    vault.enroll(home)
    r = ship(home)
    assert r["by_chain"][chain_of("sealed")]["shipped_seq"] == 33, r
    into = tmp_path / "pulled"
    pulled(vault, into)
    from agentlog.log.segments import read_from

    whole = b"".join(d for _o, d in read_from(log.path, 0))
    assert (into / "logs" / PROVIDER / "sealed.jsonl").read_bytes() == whole


def test_unreachable_vault_ends_the_pass_and_the_next_pass_resumes(tmp_path: Path) -> None:
    v = start_vault(tmp_path)
    try:
        home = tmp_path / "m"
        log = make_log(home, "u", 5)
        v.enroll(home)
        assert ship(home)["rc"] == 0
        v.stop()
        log.append([event(5)])
        r = ship(home)
        assert r["rc"] == 1 and r["status"] == "unreachable"
        v = restart(v, tmp_path)
        r = ship(home)
        assert r["rc"] == 0 and r["by_chain"][chain_of("u")]["shipped_seq"] == 5
    finally:
        v.stop()


def test_two_machines_ship_concurrently_and_one_pull_verifies_both(vault: Vault, tmp_path: Path) -> None:
    homes = [tmp_path / "a", tmp_path / "b"]
    logs = []
    for i, h in enumerate(homes):
        logs.append([make_log(h, f"two-{k}", 20 + k, pad=200) for k in range(3)])
        logs[-1].append(make_log(h, "shared-id", 5 + i))  # the same session id on both machines
        vault.enroll(h)
    procs = [subprocess.Popen([sys.executable, "-m", "agentlog", "ship", "--json"], env=env_for(h),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for h in homes]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    into = tmp_path / "pulled"
    p = pulled(vault, into)
    assert "FAILED" not in p.stderr
    side = {(s["host"], s["chain"]): s for s in
            (json.loads(x) for x in (into / "vault-pull" / "chains.jsonl").read_text().splitlines())}
    for h, hl in zip(homes, logs):
        host = (h / "vault" / "host").read_text().strip()
        for log in hl:
            s = side[(host, chain_of(log.key))]
            assert not os.path.isabs(s["root"])  # relative: the pulled directory can move
            got = into / s["root"] / "logs" / PROVIDER / f"{log.key}.jsonl"
            assert got.read_bytes() == Path(log.path).read_bytes()
    assert agentlog(into, "verify").returncode == 0


def test_a_tampered_blob_on_the_vault_fails_pull_loudly(tmp_path: Path) -> None:
    v = start_vault(tmp_path)
    try:
        home = tmp_path / "m"
        make_log(home, "t", 8)
        v.enroll(home)
        assert ship(home)["rc"] == 0
        blobs = [p for p in files_under(v.data) if "blob" in str(p.relative_to(v.data))]
        assert blobs, files_under(v.data)
        data = bytearray(blobs[0].read_bytes())
        data[len(data) // 2] ^= 1
        blobs[0].write_bytes(bytes(data))
        r = pulled(v, tmp_path / "pulled", check=False)
        assert r.returncode == 1 and "FAILED" in r.stderr and chain_of("t") in r.stderr and "seq 0" in r.stderr
        report = (tmp_path / "pulled" / "vault-pull" / "report.jsonl").read_text()
        assert chain_of("t") in report
    finally:
        v.stop()


def _kill_rounds(tmp_path: Path, rounds: int, seed: int) -> None:
    """kill -9 of `ship` at a random moment, again and again; then one clean pass:
    every frame is on the vault exactly once."""
    rng = random.Random(seed)
    v = start_vault(tmp_path)
    try:
        home = tmp_path / "m"
        logs = [make_log(home, f"k{i}", 5) for i in range(4)]
        v.enroll(home)
        n = 5
        for _ in range(rounds):
            for log in logs:
                log.append([event(n + j, pad=rng.randrange(0, 20000)) for j in range(rng.randrange(1, 30))])
            n += 30
            p = subprocess.Popen([sys.executable, "-m", "agentlog", "ship"], env=env_for(home),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.05, 0.6))
            p.send_signal(signal.SIGKILL)
            p.wait()
        r = ship(home)
        assert r["rc"] == 0, r
        v.assert_exactly_once(logs, PROVIDER)
        v.pull_matches(tmp_path / "pulled", logs, PROVIDER)
    finally:
        v.stop()


def test_kill_9_of_ship_mid_pass_ships_everything_exactly_once(tmp_path: Path) -> None:
    _kill_rounds(tmp_path, rounds=4, seed=30)


@pytest.mark.slow
def test_kill_9_of_ship_50_rounds(tmp_path: Path) -> None:
    _kill_rounds(tmp_path, rounds=50, seed=3050)


def test_idle_pass_over_many_shipped_sessions_is_cheap(tmp_path: Path) -> None:
    """The idle cost with no requests beyond the recipient set: head vs shipped per chain."""
    from agentlog.vault.chains import local_chains as lc

    home = tmp_path / "m"
    root = str(home)
    for i in range(300):
        log = make_log(home, f"idle{i}", 2)
        st = ChainState(root, chain_of(f"idle{i}"))
        st.record_shipped(pending(log.path, st, None, None))
    t = time.perf_counter()
    n = 0
    for chain, path in lc(root):
        st = ChainState(root, chain)
        s = st.shipped()
        assert s is not None and read_head(path) == (s.seq, s.hash)
        n += 1
    per = (time.perf_counter() - t) / n
    assert n == 300 and per < 0.0005, per  # < 50 ms per 1,000 sessions (measured ~0.03 ms here)


def test_status_shows_what_is_shipped_and_doctor_the_vault(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    log = make_log(home, "st", 4)
    make_log(home, "st2", 2)
    vault.enroll(home)
    assert ship(home)["rc"] == 0
    log.append([event(4)])
    r = agentlog(home, "status", "--no-ingest", "--json")
    states = {c["chain"]: (c["state"], c["shipped_seq"], c["head_seq"]) for c in json.loads(r.stdout)["vault"]}
    assert states == {chain_of("st"): ("pending", 3, 4), chain_of("st2"): ("shipped", 1, 1)}
    assert "1 pending, 1 shipped" in agentlog(home, "status", "--no-ingest").stdout
    d = agentlog(home, "doctor")
    assert f"vault: {vault.url} reachable" in d.stderr
    assert "vault:" not in agentlog(tmp_path / "other", "doctor").stderr


def test_the_vault_stores_no_plaintext_and_no_key_from_a_real_ship(tmp_path: Path) -> None:
    v = start_vault(tmp_path)
    try:
        home = tmp_path / "m"
        log = make_log(home, "canary", 30, pad=100)
        v.enroll(home)
        r = agentlog(home, "ship")
        assert r.returncode == 0
        v.stop()  # checkpoint the WAL into the database file
        seed = (home / "vault" / "machine.key").read_bytes()
        chain_key = (home / "vault" / "chains" / chain_of("canary") / "chain.key").read_bytes()
        admin_seed = (v.admin_dir / "admin.key").read_bytes()
        stored = b"".join(p.read_bytes() for p in files_under(v.data)) + v.log.read_bytes()
        assert stored
        for needle in (b"secret-canary", b"frame 7 ", seed, chain_key, admin_seed, seed.hex().encode(),
                       chain_key.hex().encode(), Path(log.path).read_bytes()[200:260]):
            assert needle not in stored
        assert seed.hex() not in r.stdout + r.stderr and chain_key.hex() not in r.stdout + r.stderr
    finally:
        v.stop()
