"""The vault as an operator runs it (issue 30): kept-alive latency, kill -9 of the
server mid-batch, ten machines at once, TLS. Real `agentlog vault serve` and real
client processes (tests/vault_support.py)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from vault_support import Vault, start_vault, vault  # noqa: F401  (the fixture)




def test_a_kept_alive_request_does_not_wait_for_a_delayed_ack(vault: Vault) -> None:
    """The server's head and body writes leave at once (TCP_NODELAY on accepted sockets):
    no ~40 ms stall behind the client's delayed ACK, with a client that does nothing special."""
    from agentlog.vault.admin import load

    a = load(str(vault.admin_dir))
    times = []
    with a.client() as c:
        c.request("GET", "/v1/admin/chains")
        for _ in range(15):
            t = time.perf_counter()
            assert c.request("GET", "/v1/admin/chains").status == 200
            times.append(time.perf_counter() - t)
    assert statistics.median(times) < 0.02, times  # ~1 ms here; 44 ms with Nagle on the server


# -- TLS -------------------------------------------------------------------------------------

def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key, as PEM files."""
    crypto = pytest.importorskip("cryptography")
    del crypto
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / f"{name}.crt", directory / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_file.chmod(0o600)
    return cert_file, key_file


def test_serve_over_tls_enroll_ship_pull_with_a_trusted_ca_and_refuse_a_wrong_one(tmp_path: Path) -> None:
    import json
    import os
    import stat

    from agentlog.core.fastjson import dumps_bytes
    from agentlog.log.writer import SessionLog
    from vault_support import agentlog

    cert, key = self_signed(tmp_path, "vault")
    other, _ = self_signed(tmp_path, "other")
    v = start_vault(tmp_path, serve_args=("--ssl-certfile", str(cert), "--ssl-keyfile", str(key)),
                    init_args=("--ca", str(cert)))
    try:
        assert v.url.startswith("https://127.0.0.1:")
        home = tmp_path / "m"
        log = SessionLog(str(home), "test", "tls", durability="relaxed")
        log.append([dumps_bytes({"kind": "tool_call", "i": i, "text": f"tls frame {i}"}) for i in range(12)])
        # a certificate the machine was not told to trust is refused, and nothing is written
        for args, extra in (((), {}), (("--ca", str(other)), {}), ((), {"SSL_CERT_FILE": str(other)})):
            bad = agentlog(tmp_path / "bad", "enroll", v.url, v.token(), "--host", "bad", *args, **extra)
            assert bad.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in bad.stderr, bad.stderr
            assert bad.stderr.count("\n") == 1 and not (tmp_path / "bad" / "vault" / "machine.key").exists()
        # --ca is kept and used for every later request
        agentlog(home, "enroll", v.url, v.token(), "--host", "tls-1", "--ca", str(cert), check=True)
        kept = home / "vault" / "ca.pem"
        assert kept.read_bytes() == cert.read_bytes() and stat.S_IMODE(os.stat(kept).st_mode) == 0o600
        r = agentlog(home, "ship", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["chains"][0]["shipped_seq"] == 11, r.stderr
        # the standard SSL_CERT_FILE works as well, without --ca
        other_home = tmp_path / "m2"
        agentlog(other_home, "enroll", v.url, v.token(), "--host", "tls-2", check=True, SSL_CERT_FILE=str(cert))
        assert not (other_home / "vault" / "ca.pem").exists()
        p = v.admin("pull", "--into", str(tmp_path / "pulled"))
        assert "FAILED" not in p.stderr
        assert (tmp_path / "pulled" / "logs" / "test" / "tls.jsonl").read_bytes() == Path(log.path).read_bytes()
        # plain http to the TLS port gets no answer it could mistake for the vault
        plain = agentlog(tmp_path / "plain", "enroll", v.url.replace("https", "http"), v.token(), "--host", "p")
        assert plain.returncode == 1 and not (tmp_path / "plain" / "vault" / "machine.key").exists()
    finally:
        v.stop()


# -- kill -9 of the vault server mid-batch ---------------------------------------------------

def _server_kill_rounds(tmp_path: Path, rounds: int, seed: int) -> None:
    """`ship` runs while the vault gets SIGKILL at a random moment; the vault restarts
    (same data, same port) and the next round ships on. At the end one clean pass:
    every frame is on the vault exactly once, no blob is orphaned, a pull verifies."""
    import random
    import subprocess
    import sys

    from agentlog.core.fastjson import dumps_bytes
    from agentlog.log.writer import SessionLog
    from vault_support import agentlog, env_for, restart

    rng = random.Random(seed)
    v = start_vault(tmp_path)
    try:
        home = tmp_path / "m"
        logs = [SessionLog(str(home), "test", f"sk{i}", durability="relaxed") for i in range(3)]
        v.enroll(home)
        n = 0
        for _ in range(rounds):
            for log in logs:
                log.append([dumps_bytes({"kind": "tool_call", "i": n + j, "pad": "x" * rng.randrange(0, 400_000)})
                            for j in range(rng.randrange(1, 12))])
            n += 12
            p = subprocess.Popen([sys.executable, "-m", "agentlog", "ship"], env=env_for(home),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.3, 1.2))
            v = restart(v, tmp_path, kill=True)
            assert p.wait(60) in (0, 1)
        r = agentlog(home, "ship")
        assert r.returncode == 0, r.stderr
        v = restart(v, tmp_path, kill=True)  # the start sweeps blobs no batch names
        v.assert_exactly_once(logs)
        blobs = [f for f in (v.data / "blobs").rglob("*") if f.is_file()]
        assert len(blobs) == v.rows("SELECT count(*) FROM batches")[0][0]
        v.pull_matches(tmp_path / "pulled", logs)
    finally:
        v.stop()


@pytest.mark.parametrize("rounds, seed", [(4, 3009), pytest.param(50, 305009, marks=pytest.mark.slow, id="50-rounds")])
def test_kill_9_of_the_vault_mid_batch_ships_everything_exactly_once(tmp_path: Path, rounds: int, seed: int) -> None:
    _server_kill_rounds(tmp_path, rounds=rounds, seed=seed)


# -- ten machines at once --------------------------------------------------------------------

def test_ten_machines_ship_concurrently_and_one_pull_verifies_all(vault: Vault, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from agentlog.core.fastjson import dumps_bytes
    from agentlog.log.writer import SessionLog
    from vault_support import agentlog, env_for

    homes = [tmp_path / f"m{i}" for i in range(10)]
    logs: dict[Path, list[SessionLog]] = {}
    for i, h in enumerate(homes):
        logs[h] = []
        for k in range(3):
            log = SessionLog(str(h), "test", "same-id" if k == 0 else f"m{i}-s{k}", durability="relaxed")
            log.append([dumps_bytes({"kind": "tool_call", "i": j, "machine": i, "pad": "y" * 3000})
                        for j in range(10 + i + k)])
            logs[h].append(log)
    tokens = [vault.token() for _ in homes]
    procs = [subprocess.Popen([sys.executable, "-m", "agentlog", "enroll", vault.url, t, "--host", f"ten-{i}"],
                              env=env_for(h), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i, (h, t) in enumerate(zip(homes, tokens))]
    for p in procs:
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    keys = {(h / "vault" / "machine.key").read_bytes() for h in homes}
    assert len(keys) == 10
    procs = [subprocess.Popen([sys.executable, "-m", "agentlog", "ship", "--json"], env=env_for(h),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for h in homes]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert all(c["status"] == "shipped" for c in json.loads(out)["chains"])
    into = tmp_path / "pulled"
    r = vault.admin("pull", "--into", str(into))
    assert "FAILED" not in r.stderr
    side = {(s["host"], s["chain"]): s for s in
            (json.loads(x) for x in (into / "vault-pull" / "chains.jsonl").read_text().splitlines())}
    assert len(side) == 30
    for i, h in enumerate(homes):
        for log in logs[h]:
            s = side[(f"ten-{i}", f"test~{log.key}")]
            assert (into / s["root"] / "logs" / "test" / f"{log.key}.jsonl").read_bytes() == Path(log.path).read_bytes()
    assert agentlog(into, "verify").returncode == 0
