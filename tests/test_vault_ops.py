"""The vault as an operator runs it (issue 30): kept-alive latency, kill -9 of the
server mid-batch, ten machines at once, TLS. Real `agentlog vault serve` and real
client processes (tests/vault_support.py)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Iterator

import pytest

from vault_support import Vault, start_vault


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    v = start_vault(tmp_path)
    yield v
    v.stop()


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
