"""The vault server, over HTTP against a real `agentlog vault serve` on 127.0.0.1."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from agentlog.log.writer import SessionLog
from agentlog.vault import VaultCryptoError
from agentlog.vault import crypto as c
from agentlog.vault import protocol as p
from agentlog.vault.storage import secret_hash
from vault_support import stop_process

SRC = str(Path(__file__).resolve().parents[1] / "src")
CANARY = "canary-7f3a9c1e-plaintext-never-on-the-vault"


@dataclass
class Vault:
    url: str
    data: Path
    log: Path
    proc: subprocess.Popen[bytes]
    admins: list[c.AdminKey] = field(default_factory=list)
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30))

    def call(self, method: str, path: str, body: Any = None, *, key: c.MachineKey | c.AdminKey | None = None,
             who: str | None = None, skew: int = 0, raw: bytes | None = None) -> httpx.Response:
        data = raw if raw is not None else (b"" if body is None else p.dumps(body))
        headers = {"Content-Type": "application/json"}
        if key is not None:
            admin = isinstance(key, c.AdminKey)
            signer = who or (key.fingerprint if isinstance(key, c.AdminKey) else "")
            headers = c.request_headers(key, signer, method, path.split("?")[0], data, int(time.time()) + skew,
                                        admin=admin)
        return self.http.request(method, self.url + path, content=data, headers=headers)

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.data / "vault.db")

    def count(self, table: str) -> int:
        with self.db() as db:
            return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@dataclass
class Machine:
    key: c.MachineKey
    id: str
    host: str


def start_vault(tmp: Path) -> Vault:
    data, log = tmp / "vault", tmp / "vault.log"
    env = {**os.environ, "PYTHONPATH": SRC}
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "agentlog", "vault", "serve", "--data", str(data), "--port", "0"],
                                stdout=subprocess.PIPE, stderr=err, env=env)
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    assert url.startswith("http://127.0.0.1:"), log.read_text()
    v = Vault(url, data, log, proc)
    token = next(line.split(": ", 1)[1] for line in log.read_text().splitlines() if line.startswith("bootstrap-token: "))
    a = c.AdminKey.generate()
    signed = c.SignedRecipientSet.sign(c.RecipientSet((a.public,), 1), a)
    assert v.call("POST", "/v1/admin/bootstrap", {"token": "wrong", "recipients": signed.to_json()}).status_code == 401
    r = v.call("POST", "/v1/admin/bootstrap", {"token": token, "recipients": signed.to_json()})
    assert r.status_code == 201, r.text
    assert v.call("POST", "/v1/admin/bootstrap", {"token": token, "recipients": signed.to_json()}).status_code == 409
    b = c.AdminKey.generate()
    two = c.SignedRecipientSet.sign(c.RecipientSet((a.public, b.public), 2), a)
    r = v.call("PUT", "/v1/admin/recipients", two.to_json(), key=a)
    assert r.status_code == 200, r.text
    v.admins = [a, b]
    return v


def stop_vault(v: Vault) -> None:
    if v.proc.poll() is not None:
        return
    v.http.close()
    stop_process(v.proc)


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vault]:
    v = start_vault(tmp_path_factory.mktemp("vault"))
    yield v
    stop_vault(v)


@pytest.fixture
def fresh_vault(tmp_path: Path) -> Iterator[Vault]:
    v = start_vault(tmp_path)
    yield v
    stop_vault(v)


def token(v: Vault) -> str:
    r = v.call("POST", "/v1/admin/tokens", {}, key=v.admins[0])
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


_hosts = iter(range(10_000))


def enroll(v: Vault) -> Machine:
    key, host = c.MachineKey.generate(), f"host-{next(_hosts)}-{os.urandom(3).hex()}"
    tok = token(v)
    r = v.call("POST", "/v1/enroll", p.EnrollRequest(tok, key.public, host).to_json())
    assert r.status_code == 201, r.text
    signed = c.SignedRecipientSet.from_json(r.json()["recipients"])
    assert signed.set.fingerprint() == tok.split(".")[0]
    return Machine(key, r.json()["machine_id"], host)


def frames(tmp: Path, key: str, n: int, tag: str = "", start_pad: int = 0) -> bytes:
    log = SessionLog(str(tmp), "claude_code", key)
    log.append([json.dumps({"event_id": f"e{i}{tag}", "captured_at": 1_700_000_000_000_000 + i,
                            "text": f"{CANARY} {i} {tag}" + "y" * start_pad}).encode() for i in range(n)])
    return Path(log.path).read_bytes()


def batch(m: Machine, chain: str, data: bytes, ck: bytes, wraps: list[c.AdminKey] | None) -> p.FramesRequest:
    idx = p.PackedIndex.of(p.index_entries(data))
    aad = c.batch_aad(m.id, chain, m.host, idx.first_seq, idx.last_seq)
    nonce, ct = c.seal_batch(ck, data, aad)
    w = None if wraps is None else {a.fingerprint: c.wrap_chain_key(ck, a.public) for a in wraps}
    return p.FramesRequest(idx.first_seq, idx.last_seq, idx, nonce, ct, w)


def post(v: Vault, m: Machine, chain: str, req: p.FramesRequest | dict[str, Any], **kw: Any) -> httpx.Response:
    body = req.to_json() if isinstance(req, p.FramesRequest) else req
    return v.call("POST", p.chain_path(chain, "frames"), body, key=m.key, who=m.id, **kw)


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


# -- enrolment ---------------------------------------------------------------------------

def test_enroll_token_rules_write_nothing_on_failure(vault: Vault) -> None:
    key = c.MachineKey.generate()
    before = vault.count("machines")
    tok = token(vault)
    fp, secret = tok.split(".")
    assert vault.call("POST", "/v1/enroll", p.EnrollRequest(f"{fp}.forged", key.public, "h-x").to_json()).status_code == 401
    # expired: a token whose hour is over
    with vault.db() as db:
        db.execute("INSERT INTO tokens (secret_hash, kind, created_at, expires_at) VALUES (?, 'enroll', ?, ?)",
                   (secret_hash("old-secret"), 1, int(time.time()) - 1))
    r = vault.call("POST", "/v1/enroll", p.EnrollRequest(f"{fp}.old-secret", key.public, "h-x").to_json())
    assert r.status_code == 401
    assert vault.count("machines") == before
    r = vault.call("POST", "/v1/enroll", p.EnrollRequest(tok, key.public, "h-x").to_json())
    assert r.status_code == 201
    # used token
    r = vault.call("POST", "/v1/enroll", p.EnrollRequest(tok, c.MachineKey.generate().public, "h-y").to_json())
    assert r.status_code == 401 and vault.count("machines") == before + 1
    # a host already enrolled, without rotate: 409 and the token stays usable
    tok2 = token(vault)
    new_key = c.MachineKey.generate()
    assert vault.call("POST", "/v1/enroll", p.EnrollRequest(tok2, new_key.public, "h-x").to_json()).status_code == 409
    with vault.db() as db:
        assert db.execute("SELECT used_at FROM tokens WHERE secret_hash = ?",
                          (secret_hash(tok2.split(".")[1]),)).fetchone() == (None,)
    # rotate: same machine id, the old key stops working
    r2 = vault.call("POST", "/v1/enroll", p.EnrollRequest(tok2, new_key.public, "h-x", rotate=True).to_json())
    assert r2.status_code == 201
    mid = r2.json()["machine_id"]
    assert vault.call("GET", "/v1/recipients", key=key, who=mid).status_code == 401
    assert vault.call("GET", "/v1/recipients", key=new_key, who=mid).status_code == 200
    assert vault.count("machines") == before + 1
    assert vault.call("POST", "/v1/enroll", raw=b"{not json").status_code == 400


# -- frames ----------------------------------------------------------------------------------

def test_first_batch_carries_wraps_for_every_admin(vault: Vault, tmp_path: Path) -> None:
    m = enroll(vault)
    chain, ck = "claude_code~w1", c.new_chain_key()
    data = frames(tmp_path, "w1", 3)
    a, b = vault.admins
    for wraps, missing in ((None, {a.fingerprint, b.fingerprint}), ([a], {b.fingerprint})):
        r = post(vault, m, chain, batch(m, chain, data, ck, wraps))
        assert r.status_code == 409 and set(r.json()["missing_wraps"]) == missing
    assert vault.call("GET", p.chain_path(chain, "head"), key=m.key, who=m.id).status_code == 404
    stranger = c.AdminKey.generate()
    r = post(vault, m, chain, batch(m, chain, data, ck, [a, b, stranger]))
    assert r.status_code == 200 and r.json()["acked_seq"] == 2
    head = vault.call("GET", p.chain_path(chain, "head"), key=m.key, who=m.id).json()
    assert head == {"seq": 2, "hash": p.index_entries(data)[-1].hash, "epoch": 0}
    with vault.db() as db:  # the stranger's wrap is not kept
        fps = {r[0] for r in db.execute("SELECT admin_fp FROM wraps WHERE machine_id = ?", (m.id,))}
    assert fps == {a.fingerprint, b.fingerprint}
    # both admins can open it from the batches they page through
    for admin in (a, b):
        got = vault.call("GET", p.chain_path(chain, "batches", m.id), key=admin).json()
        one = got["batches"][0]
        key = admin.unwrap(one["wrap"])
        plain = c.open_batch(key, p.b64d(one["nonce"]), p.b64d(one["ciphertext"]),
                             c.batch_aad(m.id, chain, m.host, one["first_seq"], one["last_seq"]))
        assert plain == data and got["more"] is False


def test_moved_batches_rejected_replay_idempotent_divergence_logged(vault: Vault, tmp_path: Path) -> None:
    m, m2 = enroll(vault), enroll(vault)
    chain, ck = "claude_code~mv", c.new_chain_key()
    data = frames(tmp_path, "mv", 10)
    ls = lines(data)
    first = batch(m, chain, b"".join(ls[:5]), ck, vault.admins)
    assert post(vault, m, chain, first).status_code == 200
    # another chain: fails at its first frame (genesis)
    r = post(vault, m, "claude_code~other", first)
    assert r.status_code == 409 and r.json()["expected_seq"] == 0 and r.json()["genesis"] != first.index.prev(0)
    # another position: seqs 7..9 after head 4
    late = batch(m, chain, b"".join(ls[7:]), ck, None)
    r = post(vault, m, chain, late)
    assert r.status_code == 409 and r.json()["expected_seq"] == 5 and r.json()["head_hash"] == first.index.hash(len(first.index) - 1)
    # another host (machine): linkage holds for the same chain id, but the AAD does not open there
    assert post(vault, m2, chain, first).status_code == 200
    got = vault.call("GET", p.chain_path(chain, "batches", m2.id), key=vault.admins[0]).json()["batches"][0]
    key = vault.admins[0].unwrap(got["wrap"])
    with pytest.raises(VaultCryptoError):
        c.open_batch(key, p.b64d(got["nonce"]), p.b64d(got["ciphertext"]),
                     c.batch_aad(m2.id, chain, m2.host, 0, 4))
    # replay: 200, nothing stored
    n = vault.count("batches")
    r = post(vault, m, chain, first)
    assert r.status_code == 200 and r.json() == {"acked_seq": 4, "replay": True}
    assert vault.count("batches") == n
    # a lost acknowledgement: the machine re-sends 3..7 (3, 4 held): 409 naming what the vault has
    r = post(vault, m, chain, batch(m, chain, b"".join(ls[3:8]), ck, None))
    assert r.status_code == 409 and r.json()["expected_seq"] == 5 and "diverges_at" not in r.json()
    assert post(vault, m, chain, batch(m, chain, b"".join(ls[5:]), ck, None)).json() == {"acked_seq": 9}
    # a local rewrite after shipping: a different index for shipped seqs
    events = vault.count("events")
    rewritten = frames(tmp_path / "rw", "mv", 10, tag="rewritten")
    r = post(vault, m, chain, batch(m, chain, b"".join(lines(rewritten)[:3]), ck, None))
    assert r.status_code == 409 and r.json()["diverges_at"] == 0 and r.json()["expected_seq"] == 10
    assert vault.count("events") == events + 1
    ev = vault.call("GET", "/v1/admin/events", key=vault.admins[1]).json()["events"][-1]
    assert ev["kind"] == "divergence" and ev["machine_id"] == m.id and ev["seq"] == 0
    assert ev["vault_hash"] == p.index_entries(data)[0].hash and ev["sent_hash"] == p.index_entries(rewritten)[0].hash
    assert vault.count("batches") == n + 1


def test_broken_linkage_422_and_malformed_400(vault: Vault, tmp_path: Path) -> None:
    m = enroll(vault)
    chain, ck = "claude_code~lk", c.new_chain_key()
    data = frames(tmp_path, "lk", 6)
    good = batch(m, chain, data, ck, vault.admins)
    body = good.to_json()
    entries = p.index_entries(data)
    bad = entries[:3] + [entries[3]._replace(prev="0" * 64)] + entries[4:]
    r = post(vault, m, chain, {**body, "index": p.PackedIndex.of(bad).to_json()})
    assert r.status_code == 422 and r.json()["seq"] == 3
    r = post(vault, m, chain, {**body, "index": p.PackedIndex.of(entries[:5]).to_json()})
    assert r.status_code == 400  # the range does not match the index
    short = {**body["index"], "hash": p.b64e(good.index.hashes[:-1])}
    assert post(vault, m, chain, {**body, "index": short}).status_code == 400  # prevs and hashes differ in number
    big_at = {**body["index"], "at": [2**63] * 6}
    assert post(vault, m, chain, {**body, "index": big_at}).status_code == 400
    assert post(vault, m, chain, {**body, "nonce": "AAAA"}).status_code == 400
    assert vault.call("POST", "/v1/chains/no%20tilde/frames", body, key=m.key, who=m.id).status_code == 400
    assert vault.count("batches") >= 0 and vault.call(
        "GET", p.chain_path(chain, "head"), key=m.key, who=m.id).status_code == 404


def test_auth_skew_body_hash_and_403(vault: Vault, tmp_path: Path) -> None:
    m, other = enroll(vault), enroll(vault)
    chain = "claude_code~au"
    req = batch(m, chain, frames(tmp_path, "au", 2), c.new_chain_key(), vault.admins)
    r = post(vault, m, chain, req, skew=-301)
    assert r.status_code == 401 and r.json()["error"] == "clock skew" and abs(r.json()["server_time"] - time.time()) < 5
    assert post(vault, m, chain, req, skew=299).status_code == 200
    # a body that is not the signed one: 400
    path = p.chain_path(chain, "head")
    headers = c.request_headers(m.key, m.id, "GET", path, b"", int(time.time()), admin=False)
    assert vault.http.request("GET", vault.url + path, content=b"x", headers=headers).status_code == 400
    # a signature over another path, another machine's id, an unknown machine
    headers = c.request_headers(m.key, m.id, "GET", p.chain_path("claude_code~zz", "head"), b"", int(time.time()), admin=False)
    assert vault.http.get(vault.url + path, headers=headers).status_code == 401
    assert vault.call("GET", path, key=m.key, who=other.id).status_code == 401
    assert vault.call("GET", path, key=m.key, who="m-unknown").status_code == 401
    assert vault.call("GET", path).status_code == 401
    # chains are the signer's: another machine cannot see or extend m's chain
    assert vault.call("GET", path, key=other.key, who=other.id).status_code == 404
    # admin endpoints refuse machines and anyone outside the current set
    for ep in ("/v1/admin/machines", "/v1/admin/chains", "/v1/admin/events"):
        assert vault.call("GET", ep, key=m.key, who=m.id).status_code == 403
        assert vault.call("GET", ep, key=c.AdminKey.generate()).status_code == 403
        assert vault.call("GET", ep, key=vault.admins[0]).status_code == 200
    assert vault.call("POST", "/v1/admin/tokens", {}, key=m.key, who=m.id).status_code == 403
    chains = vault.call("GET", "/v1/admin/chains", key=vault.admins[0]).json()["chains"]
    assert any(ch["machine_id"] == m.id and ch["chain"] == chain and ch["head_seq"] == 1 for ch in chains)
    machines = vault.call("GET", "/v1/admin/machines", key=vault.admins[0]).json()["machines"]
    assert {m.id, other.id} <= {x["machine_id"] for x in machines}
    # older or same-version recipient sets are refused; one signed by a stranger too
    a, b = vault.admins
    same = c.SignedRecipientSet.sign(c.RecipientSet((a.public, b.public), 2), a)
    assert vault.call("PUT", "/v1/admin/recipients", same.to_json(), key=a).status_code == 409
    s = c.AdminKey.generate()
    forged = c.SignedRecipientSet.sign(c.RecipientSet((a.public, s.public), 9), s)
    assert vault.call("PUT", "/v1/admin/recipients", forged.to_json(), key=a).status_code == 403


def test_body_limit_413(vault: Vault) -> None:
    r = vault.http.post(vault.url + "/v1/enroll", content=b"x" * ((64 << 20) + 1))
    assert r.status_code == 413


def test_paging_rekey_and_removed_admin_loses_wraps(fresh_vault: Vault, tmp_path: Path) -> None:
    v = fresh_vault
    a, b = v.admins
    m = enroll(v)
    chain, ck = "claude_code~pg", c.new_chain_key()
    big = os.urandom(1_500_000).hex()
    log = SessionLog(str(tmp_path), "claude_code", "pg")
    log.append([json.dumps({"event_id": f"e{i}", "blob": big + str(i)}).encode() for i in range(4)])
    data = Path(log.path).read_bytes()
    ranges = p.split_batches(data, limit=len(data) // 4 + 10)
    assert len(ranges) == 4
    for i, (s, e) in enumerate(ranges):
        assert post(v, m, chain, batch(m, chain, data[s:e], ck, v.admins if i == 0 else None)).status_code == 200
    page = v.call("GET", p.chain_path(chain, "batches", m.id), key=a).json()
    assert page["more"] is True and 1 <= len(page["batches"]) < 4
    seen = [x["first_seq"] for x in page["batches"]]
    while page["more"]:
        page = v.call("GET", p.chain_path(chain, "batches", m.id) + f"?after={seen[-1]}", key=a).json()
        seen += [x["first_seq"] for x in page["batches"]]
    assert seen == [0, 1, 2, 3]
    # a rekey: a later batch carrying wraps starts epoch 1
    more = Path(log.path)
    log.append([b'{"event_id":"e4"}'])
    tail = more.read_bytes()[len(data):]
    ck2 = c.new_chain_key()
    assert post(v, m, chain, batch(m, chain, tail, ck2, v.admins)).status_code == 200
    assert v.call("GET", p.chain_path(chain, "head"), key=m.key, who=m.id).json()["epoch"] == 1
    # a re-wrap for an existing epoch (an added admin)
    r = v.call("POST", "/v1/admin/wraps", {"machine_id": m.id, "chain": chain, "epoch": 0,
                                           "wraps": {b.fingerprint: c.wrap_chain_key(ck, b.public)}}, key=a)
    assert r.status_code == 200
    r = v.call("POST", "/v1/admin/wraps", {"machine_id": m.id, "chain": chain, "epoch": 0,
                                           "wraps": {"ab" * 32: c.wrap_chain_key(ck, b.public)}}, key=a)
    assert r.status_code == 400
    # remove b: its wraps go, its requests are refused
    one = c.SignedRecipientSet.sign(c.RecipientSet((a.public,), 3), a)
    r = v.call("PUT", "/v1/admin/recipients", one.to_json(), key=a)
    assert r.status_code == 200 and r.json()["wraps_deleted"] == 2
    with v.db() as db:
        assert db.execute("SELECT count(*) FROM wraps WHERE admin_fp = ?", (b.fingerprint,)).fetchone()[0] == 0
    assert v.call("GET", p.chain_path(chain, "batches", m.id), key=b).status_code == 403
    recip = c.SignedRecipientSet.from_json(v.call("GET", "/v1/recipients", key=m.key, who=m.id).json())
    assert recip.set.version == 3 and recip.set.admins == (a.public,)
    # a chain started now needs a's wrap only
    assert post(v, m, "claude_code~after", batch(m, "claude_code~after", frames(tmp_path / "n", "after", 1), ck, [a])
                ).status_code == 200


def test_the_vault_stores_no_plaintext(fresh_vault: Vault, tmp_path: Path) -> None:
    v = fresh_vault
    m = enroll(v)
    chain, ck = "claude_code~cn", c.new_chain_key()
    data = frames(tmp_path, "cn", 30)
    assert post(v, m, chain, batch(m, chain, data, ck, v.admins)).status_code == 200
    v.call("GET", "/v1/admin/chains", key=v.admins[0])
    stop_vault(v)  # flush everything, then read every byte the vault wrote
    needles = [CANARY.encode(), b"rewritten", ck, ck.hex().encode(), p.b64e(ck).encode(), m.key.seed,
               v.admins[0].seed, v.admins[0].seed.hex().encode(), b'"event_id"']
    files = [f for f in v.data.rglob("*") if f.is_file()] + [v.log]
    assert any(f.name.endswith("-wal") or f.name == "vault.db" for f in files)
    assert sum(1 for f in files if "blobs" in f.parts) >= 1
    for f in files:
        blob = f.read_bytes()
        assert oct(f.stat().st_mode & 0o777) == oct(0o600) or f == v.log, f
        for needle in needles:
            assert needle not in blob, (f, needle[:20])
    for d in [v.data, *[x for x in v.data.rglob("*") if x.is_dir()]]:
        assert d.stat().st_mode & 0o777 == 0o700, d


def test_serve_refuses_remote_host_without_tls(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "agentlog", "vault", "serve", "--data", str(tmp_path / "v"),
                        "--host", "0.0.0.0"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC},
                       timeout=60)
    assert r.returncode == 2 and "loopback" in r.stderr and not (tmp_path / "v").exists()


def test_a_schema_1_vault_is_migrated_to_packed_indexes(tmp_path: Path) -> None:
    """A vault made at stop 43 kept a row per frame; opening it packs every batch's rows
    into the batch and drops the table, and what it holds reads the same."""
    from agentlog.vault.storage import Storage

    data = frames(tmp_path / "logs", "mig", 7)
    idx = p.PackedIndex.of(p.index_entries(data))
    s = Storage(str(tmp_path / "v"))
    assert s.store_batch("m-1", "claude_code~mig", idx, 0, b"n" * 24, b"ct", None, 1, None)
    with s.transaction() as db:  # back to schema 1: the frames table, no packed index
        db.execute("CREATE TABLE frames (machine_id TEXT NOT NULL, chain TEXT NOT NULL, seq INTEGER NOT NULL, "
                   "prev TEXT NOT NULL, hash TEXT NOT NULL, at INTEGER, batch_id INTEGER NOT NULL, "
                   "PRIMARY KEY (machine_id, chain, seq)) WITHOUT ROWID")
        (bid,), = db.execute("SELECT id FROM batches").fetchall()
        db.executemany("INSERT INTO frames VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [("m-1", "claude_code~mig", e.seq, e.prev, e.hash, e.at, bid) for e in idx.entries()])
        db.execute("UPDATE batches SET idx = NULL")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema'")
    s.close()
    s = Storage(str(tmp_path / "v"))
    try:
        assert s.stored_index("m-1", "claude_code~mig", 0, 6) == idx.entries()
        assert s.stored_index("m-1", "claude_code~mig", 2, 3) == idx.entries()[2:4]
        assert s.query("SELECT name FROM sqlite_master WHERE name = 'frames'") == []
        assert s.query("SELECT value FROM meta WHERE key = 'schema'") == [("2",)]
    finally:
        s.close()
