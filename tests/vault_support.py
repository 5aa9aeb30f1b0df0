"""A real vault for the client tests: `agentlog vault serve` on a free loopback port
in its own process, its first admin made by `agentlog vault admin init`, and
helpers that run the client commands as processes with their own data roots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL past 10 s; its stdout pipe closed."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def env_for(home: Path | str, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": SRC, "AGENTLOG_HOME": str(home)}
    env.pop("AGENTLOG_DEBUG", None)
    env.update(extra)
    return env


def agentlog(home: Path | str, *args: str, check: bool = False, timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m agentlog ARGS`` with ``home`` as its data root."""
    r = subprocess.run([sys.executable, "-m", "agentlog", *args], env=env_for(home, **extra), capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"agentlog {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


@dataclass
class Vault:
    url: str
    data: Path
    log: Path
    proc: subprocess.Popen[bytes]
    admin_home: Path
    admin_dir: Path
    hosts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def admin(self, *args: str, check: bool = True, admin_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
        return agentlog(self.admin_home, "vault", "admin", args[0], "--dir", str(admin_dir or self.admin_dir), *args[1:],
                        check=check)

    def rows(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        """Rows of a query on the vault's database (read-only)."""
        import sqlite3

        db = sqlite3.connect(f"file:{self.data / 'vault.db'}?mode=ro", uri=True)
        try:
            return [tuple(r) for r in db.execute(sql, args)]
        finally:
            db.close()

    def pull_matches(self, into: Path, logs: list[Any], provider: str = "test", admin_dir: Path | None = None) -> None:
        """An admin pull into ``into`` reports no failure and gives back each log byte for byte."""
        r = self.admin("pull", "--into", str(into), admin_dir=admin_dir)
        assert "FAILED" not in r.stderr, r.stderr
        for log in logs:
            assert (into / "logs" / provider / f"{log.key}.jsonl").read_bytes() == Path(log.path).read_bytes()

    def assert_exactly_once(self, logs: list[Any], provider: str = "test") -> None:
        """Every frame of each log (up to its head) is in exactly one stored batch."""
        from agentlog.vault.chains import read_head

        for log in logs:
            got = self.rows("SELECT first_seq, last_seq FROM batches WHERE chain = ? ORDER BY first_seq",
                            f"{provider}~{log.key}")
            seqs = [s for first, last in got for s in range(first, last + 1)]
            head = read_head(log.path)
            assert head is not None and seqs == list(range(head[0] + 1)), (log.key, got)

    def token(self) -> str:
        return self.admin("token").stdout.strip()

    def enroll(self, home: Path, host: str | None = None) -> str:
        """Enrol a machine whose data root is ``home``; its host name."""
        self.hosts += 1
        host = host or f"host-{self.hosts}-{os.getpid()}"
        agentlog(home, "enroll", self.url, self.token(), "--host", host, check=True)
        return host

    def stop(self) -> None:
        stop_process(self.proc)


def start_vault(tmp: Path, *, port: int = 0, data: Path | None = None, init_admin: bool = True,
                serve_args: tuple[str, ...] = (), init_args: tuple[str, ...] = ()) -> Vault:
    """``serve_args`` go to `vault serve` (e.g. the TLS files), ``init_args`` to `vault admin init` (e.g. --ca)."""
    data = data or tmp / "vault-data"
    log = tmp / f"vault-{time.monotonic_ns()}.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "agentlog", "vault", "serve", "--data", str(data), "--port", str(port),
                                 *serve_args], stdout=subprocess.PIPE, stderr=err, env=env_for(tmp / "server-home"))
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    assert url.startswith(("http://127.0.0.1:", "https://127.0.0.1:")), log.read_text()
    v = Vault(url, data, log, proc, tmp / "admin-home", tmp / "admin-home" / "vault-admin", extra={"serve_args": serve_args})
    if init_admin:
        token = next(line.split(": ", 1)[1] for line in log.read_text().splitlines() if line.startswith("bootstrap-token: "))
        v.admin("init", *init_args, "--", url, token)  # a bootstrap token may start with "-"
    return v


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    """A fresh vault with its first admin, for one test (import it into the test module)."""
    v = start_vault(tmp_path)
    yield v
    v.stop()


def restart(v: Vault, tmp: Path, *, kill: bool = False) -> Vault:
    """The same vault (data and port) in a new process; ``kill``: the old one gets SIGKILL."""
    port = int(v.url.rsplit(":", 1)[1])
    if kill and v.proc.poll() is None:
        v.proc.kill()
        v.proc.wait()
    v.stop()
    for _ in range(50):
        try:
            n = start_vault(tmp, port=port, data=v.data, init_admin=False, serve_args=v.extra.get("serve_args", ()))
            break
        except AssertionError:
            time.sleep(0.1)
    else:
        raise AssertionError("the vault did not start again")
    n.admin_home, n.admin_dir, n.hosts = v.admin_home, v.admin_dir, v.hosts
    return n


def tamper_index_hash(db_path: Path, chain: str, seq: int, new_hash: str = "f" * 64) -> int:
    """Rewrite, in the vault's database behind its back, the hash its index holds for
    frame ``seq`` of ``chain`` (as an operator with write access could); the number of
    batches changed."""
    import sqlite3

    from agentlog.vault.protocol import PackedIndex

    db = sqlite3.connect(str(db_path))
    try:
        with db:
            rows = db.execute("SELECT id, first_seq, idx FROM batches WHERE chain = ? AND first_seq <= ? AND last_seq >= ?",
                              (chain, seq, seq)).fetchall()
            for bid, first, idx in rows:
                packed = PackedIndex.unpack(first, bytes(idx))
                i = seq - first
                hashes = packed.hashes[:32 * i] + bytes.fromhex(new_hash) + packed.hashes[32 * i + 32:]
                changed = PackedIndex(first, packed.prevs, hashes, packed.ats)
                db.execute("UPDATE batches SET idx = ? WHERE id = ?", (changed.pack(), bid))
    finally:
        db.close()
    return len(rows)
