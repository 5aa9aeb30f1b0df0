"""The admin side of the vault (issue 30): admin key, tokens, add/remove, listings, pull.

Against the real vault server (tests/vault_support.py) with the admin and
machine commands run as processes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from agentlog.core.fastjson import dumps_bytes
from agentlog.log.writer import SessionLog
from vault_support import Vault, agentlog, tamper_index_hash, vault  # noqa: F401  (the fixture)

PROVIDER = "test"


def make_log(root: Path, key: str, n: int) -> SessionLog:
    log = SessionLog(str(root), PROVIDER, key, durability="relaxed")
    log.append([dumps_bytes({"kind": "tool_call", "i": i, "captured_at": 1_700_000_000_000_000 + i,
                             "text": f"{key} frame {i}"}) for i in range(n)])
    return log


def db_rows(v: Vault, sql: str, *args: object) -> list[tuple[object, ...]]:
    return v.rows(sql, *args)


def test_admin_key_is_private_and_listings_have_json(vault: Vault, tmp_path: Path) -> None:
    key = vault.admin_dir / "admin.key"
    assert len(key.read_bytes()) == 32 and stat.S_IMODE(os.stat(key).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(vault.admin_dir).st_mode) == 0o700
    home = tmp_path / "m"
    make_log(home, "s", 4)
    host = vault.enroll(home)
    assert agentlog(home, "ship").returncode == 0
    machines = json.loads(vault.admin("machines", "--json").stdout)
    assert [m["host"] for m in machines] == [host]
    chains = json.loads(vault.admin("chains", "--json").stdout)
    assert [(c["chain"], c["head_seq"]) for c in chains] == [(f"{PROVIDER}~s", 3)]
    tok = json.loads(vault.admin("token", "--json").stdout)
    assert tok["token"].count(".") == 1 and tok["expires_at"]
    for out in (vault.admin("chains").stdout, vault.admin("machines").stdout):
        assert key.read_bytes().hex() not in out
    again = vault.admin("init", "--", vault.url, "whatever", check=False)
    assert again.returncode == 1 and "already holds an admin key" in again.stderr


def test_added_admin_reads_old_chains_removed_admin_cannot_open_new_ones(vault: Vault, tmp_path: Path) -> None:
    from agentlog.vault.crypto import AdminKey

    home = tmp_path / "m"
    make_log(home, "before", 6)
    vault.enroll(home)
    assert agentlog(home, "ship").returncode == 0
    b_dir = tmp_path / "admin-b"
    out = vault.admin("keygen", vault.url, admin_dir=b_dir).stdout
    b_pub = out.split("public key ")[1].strip()
    added = json.loads(vault.admin("add", b_pub, "--json").stdout)
    assert added["rewrapped"] == 1
    # B pulls the chain shipped before it was added (its key re-wrapped)
    r = vault.admin("pull", "--into", str(tmp_path / "b-pull"), admin_dir=b_dir)
    assert "FAILED" not in r.stderr
    assert (tmp_path / "b-pull" / "logs" / PROVIDER / "before.jsonl").read_bytes() == \
        Path(home / "logs" / PROVIDER / "before.jsonl").read_bytes()
    # a chain started while B is an admin is wrapped for both
    make_log(home, "during", 3)
    assert agentlog(home, "ship").returncode == 0
    assert len(db_rows(vault, "SELECT admin_fp FROM wraps WHERE chain = ?", f"{PROVIDER}~during")) == 2
    b_key = AdminKey.from_seed((b_dir / "admin.key").read_bytes())
    vault.admin("remove", b_key.fingerprint)
    make_log(home, "after", 3)
    assert agentlog(home, "ship").returncode == 0
    wraps = db_rows(vault, "SELECT admin_fp, wrap FROM wraps WHERE chain = ?", f"{PROVIDER}~after")
    assert [fp for fp, _w in wraps] != [] and b_key.fingerprint not in [fp for fp, _w in wraps]
    for _fp, w in db_rows(vault, "SELECT admin_fp, wrap FROM wraps"):
        with pytest.raises(Exception):
            b_key.unwrap(str(w))
    r = vault.admin("pull", "--into", str(tmp_path / "b-pull2"), admin_dir=b_dir, check=False)
    assert r.returncode == 1  # no longer an admin: the vault refuses it
    assert not (tmp_path / "b-pull2" / "logs" / PROVIDER / "after.jsonl").exists()
    a = vault.admin("pull", "--into", str(tmp_path / "a-pull"))
    assert "FAILED" not in a.stderr
    assert (tmp_path / "a-pull" / "logs" / PROVIDER / "after.jsonl").exists()


def test_a_tampered_index_fails_pull_loudly_naming_chain_and_seq(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    make_log(home, "ix", 6)
    vault.enroll(home)
    assert agentlog(home, "ship").returncode == 0
    assert tamper_index_hash(vault.data / "vault.db", f"{PROVIDER}~ix", 3) == 1
    r = vault.admin("pull", "--into", str(tmp_path / "pulled"), check=False)
    assert r.returncode == 1 and f"{PROVIDER}~ix seq 3" in r.stderr, r.stderr
    report = [json.loads(x) for x in (tmp_path / "pulled" / "vault-pull" / "report.jsonl").read_text().splitlines()]
    assert report and report[0]["seq"] == 3 and report[0]["chain"] == f"{PROVIDER}~ix"


def test_pull_is_incremental(vault: Vault, tmp_path: Path) -> None:
    home = tmp_path / "m"
    log = make_log(home, "inc", 5)
    vault.enroll(home)
    assert agentlog(home, "ship").returncode == 0
    into = tmp_path / "pulled"
    vault.admin("pull", "--into", str(into))
    log.append([dumps_bytes({"kind": "tool_call", "i": 99})])
    assert agentlog(home, "ship").returncode == 0
    r = json.loads(vault.admin("pull", "--into", str(into), "--json").stdout)
    assert r["frames"] == 1 and not r["failed"]
    assert (into / "logs" / PROVIDER / "inc.jsonl").read_bytes() == Path(log.path).read_bytes()


def _keygen(vault: Vault, d: Path) -> tuple[str, str]:
    """(public key, fingerprint) of a new admin key in ``d``."""
    out = vault.admin("keygen", vault.url, admin_dir=d).stdout
    return out.split("public key ")[1].strip(), out.split("admin ")[1].split()[0]


def test_add_and_remove_start_from_the_vaults_current_set_and_check_its_history(vault: Vault, tmp_path: Path) -> None:
    from agentlog.vault.crypto import AdminKey, RecipientSet, SignedRecipientSet

    home = tmp_path / "m"
    make_log(home, "w", 3)
    vault.enroll(home)
    assert agentlog(home, "ship").returncode == 0
    b_dir, c_dir, d_dir = tmp_path / "b", tmp_path / "c", tmp_path / "d"
    b_pub, b_fp = _keygen(vault, b_dir)
    c_pub, c_fp = _keygen(vault, c_dir)
    vault.admin("add", b_pub)  # A's kept set is now version 2
    # B (a keygen key: no kept set, so it checks the history from version 1) adds C
    added = json.loads(vault.admin("add", c_pub, "--json", admin_dir=b_dir).stdout)
    assert added["version"] == 3 and added["rewrapped"] == 1  # B's wrap came from .../wraps, not the batches
    # A's local copy (version 2) is stale: removing B starts from the vault's version 3, so C stays
    vault.admin("remove", b_fp)
    fps = {str(r[0]) for r in db_rows(vault, "SELECT DISTINCT admin_fp FROM wraps")}
    assert fps == {AdminKey.from_seed((vault.admin_dir / "admin.key").read_bytes()).fingerprint, c_fp}
    current = json.loads((vault.admin_dir / "recipients.json").read_text())
    assert current["set"]["version"] == 4 and len(current["set"]["admins"]) == 2
    # C pulls the chain shipped before it was added
    r = vault.admin("pull", "--into", str(tmp_path / "c-pull"), admin_dir=c_dir)
    assert "FAILED" not in r.stderr and (tmp_path / "c-pull" / "logs" / PROVIDER / "w.jsonl").exists()
    # a set no admin signed (the vault slipping in a key of its own) is refused, nothing signed
    a = AdminKey.from_seed((vault.admin_dir / "admin.key").read_bytes())
    stranger = AdminKey.generate()
    rset = RecipientSet((a.public, stranger.public), 5)
    forged = SignedRecipientSet.sign(rset, stranger)
    db = sqlite3.connect(str(vault.data / "vault.db"))
    try:
        with db:
            db.execute("INSERT INTO recipients VALUES (5, ?, ?, 0)", (rset.fingerprint(), json.dumps(forged.to_json())))
    finally:
        db.close()
    d_pub, _ = _keygen(vault, d_dir)
    r = vault.admin("add", d_pub, check=False)
    assert r.returncode == 1 and "do not follow" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert db_rows(vault, "SELECT max(version) FROM recipients") == [(5,)]


def test_admin_wraps_and_recipients_endpoints(vault: Vault, tmp_path: Path) -> None:
    from agentlog.vault.admin import load, my_wraps
    from agentlog.vault.protocol import chain_path

    home = tmp_path / "m"
    make_log(home, "e", 2)
    vault.enroll(home)
    assert agentlog(home, "ship").returncode == 0
    a = load(str(vault.admin_dir))
    mid = (home / "vault" / "machine.id").read_text().strip()
    with a.client() as c:
        got = my_wraps(a, c, mid, f"{PROVIDER}~e")
        assert list(got) == [0] and len(a.key.unwrap(got[0])) == 32
        assert c.request("GET", chain_path(f"{PROVIDER}~none", "wraps", mid)).status == 404
        r = c.request("GET", "/v1/admin/recipients")
        assert r.status == 200 and r.json()["set"]["version"] == 1
        assert c.request("GET", "/v1/admin/recipients", query="since=0").json()["sets"] == [r.json()]
    from agentlog.vault.client import Client
    from agentlog.vault.crypto import MachineKey

    with Client(vault.url, MachineKey.from_seed((home / "vault" / "machine.key").read_bytes()), mid) as mc:
        assert mc.request("GET", "/v1/admin/recipients").status == 403
