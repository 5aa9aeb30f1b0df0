"""Key rotation (issue 30, `vault admin rekey`): a new recipient set makes each machine
start a new key epoch on every chain at its next batch, so a removed admin that kept
the keys it could open cannot read what is shipped afterwards. Real vault server,
real client processes (tests/vault_support.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentlog.core.fastjson import dumps_bytes
from agentlog.log.writer import SessionLog
from vault_support import Vault, agentlog, vault  # noqa: F401  (the fixture)

PROVIDER = "test"


def make_log(root: Path, key: str, n: int, start: int = 0) -> SessionLog:
    log = SessionLog(str(root), PROVIDER, key, durability="relaxed")
    append(log, n, start)
    return log


def append(log: SessionLog, n: int, start: int) -> None:
    log.append([dumps_bytes({"kind": "tool_call", "i": start + i, "captured_at": 1_700_000_000_000_000 + start + i,
                             "text": f"{log.key} frame {start + i} rekey-canary"}) for i in range(n)])


def rows(v: Vault, sql: str, *args: object) -> list[tuple[Any, ...]]:
    return v.rows(sql, *args)


def ship(home: Path) -> dict[str, Any]:
    r = agentlog(home, "ship", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return {c["chain"]: c for c in json.loads(r.stdout)["chains"]}


def pull_matches(v: Vault, into: Path, logs: list[SessionLog]) -> None:
    v.pull_matches(into, logs, PROVIDER)


def test_a_removed_admin_cannot_open_frames_shipped_after_its_removal(vault: Vault, tmp_path: Path) -> None:
    from agentlog.vault import VaultCryptoError
    from agentlog.vault.admin import batch_pages, load, my_wraps
    from agentlog.vault.crypto import batch_aad, open_batch
    from agentlog.vault.protocol import b64d

    b_dir = tmp_path / "admin-b"
    out = vault.admin("keygen", vault.url, admin_dir=b_dir).stdout
    vault.admin("add", out.split("public key ")[1].strip())
    home = tmp_path / "m"
    log, idle = make_log(home, "r", 5), make_log(home, "idle", 2)
    vault.enroll(home)
    ship(home)
    chain = f"{PROVIDER}~r"
    mid = (home / "vault" / "machine.id").read_text().strip()
    host = (home / "vault" / "host").read_text().strip()
    b = load(str(b_dir))
    with b.client() as c:  # B keeps the chain key it can open while it is an admin
        kept = b.key.unwrap(my_wraps(b, c, mid, chain)[0])
    vault.admin("remove", b.fingerprint)
    append(log, 4, 5)
    got = ship(home)
    assert got[chain]["status"] == "shipped" and got[chain]["rekeyed"] is True
    assert got[f"{PROVIDER}~idle"]["status"] == "up to date"  # no new frames: no batch, no new key yet
    assert rows(vault, "SELECT first_seq, last_seq, epoch FROM batches WHERE chain = ? ORDER BY first_seq", chain) == \
        [(0, 4, 0), (5, 8, 1)]
    a = load(str(vault.admin_dir))
    assert [r[0] for r in rows(vault, "SELECT admin_fp FROM wraps WHERE chain = ? AND epoch = 1", chain)] == [a.fingerprint]
    state = home / "vault" / "chains" / chain
    assert (state / "key.version").read_text().strip() == "3" and not (state / "key.pending").exists()
    with a.client() as c:
        listed = list(batch_pages(a, c, mid, chain, -1))
    opened = []
    for bt in listed:
        aad = batch_aad(mid, chain, host, bt["first_seq"], bt["last_seq"])
        try:
            opened.append(bool(open_batch(kept, b64d(bt["nonce"]), b64d(bt["ciphertext"]), aad)))
        except VaultCryptoError:
            opened.append(False)
    assert opened == [True, False]  # the old key opens what was shipped before, nothing after
    pull_matches(vault, tmp_path / "a-pull", [log, idle])


class _Flaky:
    """A vault client whose frames requests fail: before sending (``lose="request"``)
    or after the vault stored the batch (``lose="ack"``)."""

    def __init__(self, real: Any, lose: str) -> None:
        self.real, self.lose = real, lose

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def __enter__(self) -> _Flaky:
        return self

    def __exit__(self, *exc: object) -> None:
        self.real.close()

    def request(self, method: str, path: str, payload: Any = None, **kw: Any) -> Any:
        from agentlog.vault.client import VaultUnreachable

        if method == "POST" and path.endswith("/frames"):
            if self.lose == "request":
                raise VaultUnreachable("lost request (test)")
            self.real.request(method, path, payload, **kw)
            raise VaultUnreachable("lost acknowledgement (test)")
        return self.real.request(method, path, payload, **kw)


def test_rekey_survives_a_lost_request_and_a_lost_acknowledgement(vault: Vault, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from agentlog.vault import ship as ship_mod
    from agentlog.vault.machine import Machine

    home = tmp_path / "m"
    log = make_log(home, "q", 3)
    vault.enroll(home)
    ship(home)
    chain = f"{PROVIDER}~q"
    state = home / "vault" / "chains" / chain
    key0 = (state / "chain.key").read_bytes()
    r = vault.admin("rekey")
    assert "version 2" in r.stdout

    def run_flaky(lose: str) -> ship_mod.PassResult:
        real_client = Machine.client
        monkeypatch.setattr(Machine, "client", lambda self: _Flaky(real_client(self), lose))
        try:
            return ship_mod.run_once(str(home))
        finally:
            monkeypatch.setattr(Machine, "client", real_client)

    append(log, 2, 3)
    res = run_flaky("request")  # the new key is made, its first batch never arrives
    assert [c.status for c in res.chains] == ["unreachable"]
    key1 = (state / "chain.key").read_bytes()
    assert key1 != key0 and (state / "key.pending").exists()
    res = run_flaky("ack")  # the batch with the new wraps is stored, its acknowledgement lost
    assert [c.status for c in res.chains] == ["unreachable"] and (state / "key.pending").exists()
    assert rows(vault, "SELECT first_seq, epoch FROM batches WHERE chain = ? ORDER BY first_seq", chain) == [(0, 0), (3, 1)]
    append(log, 2, 5)
    got = ship(home)  # one 409 recovers the acknowledgement; the rest starts another epoch under the same key
    assert got[chain]["shipped_seq"] == 6 and not (state / "key.pending").exists()
    assert (state / "chain.key").read_bytes() == key1
    assert rows(vault, "SELECT first_seq, epoch FROM batches WHERE chain = ? ORDER BY first_seq", chain) == \
        [(0, 0), (3, 1), (5, 2)]
    append(log, 1, 7)
    ship(home)  # the key is acknowledged: no new epoch
    assert rows(vault, "SELECT max(epoch), count(*) FROM batches WHERE chain = ?", chain) == [(2, 4)]
    pull_matches(vault, tmp_path / "pulled", [log])
