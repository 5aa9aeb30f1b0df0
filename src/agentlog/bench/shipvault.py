"""The moving parts of ``agentlog bench ship``: a real vault server, enrolled data
roots, session logs of realistic frames, and the request-rate workers.

Everything the vault does runs as the product runs it: ``python -m agentlog vault
serve`` in its own process, ``vault admin init|token|pull`` and ``enroll``/``ship``
as whole commands (rule R3: bench reaches the vault only through subprocesses and
the names ``agentlog.api`` exports).
"""

from __future__ import annotations

import base64
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from agentlog.api import SessionLog
from agentlog.bench.common import stop_daemon
from agentlog.core.fastjson import dumps_bytes

PROVIDER = "claude_code"


BYTECODE_DIR: list[str] = []
"""Where the timed processes keep compiled bytecode (``PYTHONPYCACHEPREFIX``, set by the
bench for its run): each module is compiled once, as an installed package has its bytecode,
not on every process start when the caller's environment forbids writing it."""


def env_for(home: str) -> dict[str, str]:
    """This process's environment with ``home`` as the data root (and the run's bytecode cache)."""
    env = {**os.environ, "AGENTLOG_HOME": home}
    env.pop("AGENTLOG_DEBUG", None)
    if BYTECODE_DIR:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = BYTECODE_DIR[0]
    return env


def agentlog(home: str, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """``python -m agentlog ARGS`` on the data root ``home``; RuntimeError when it fails."""
    r = subprocess.run([sys.executable, "-m", "agentlog", *args], env=env_for(home), capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"agentlog {' '.join(args[:3])} -> exit {r.returncode}: {(r.stderr or r.stdout)[-600:]}")
    return r


def timed(home: str, *args: str) -> tuple[float, str]:
    """Wall seconds of a whole ``python -m agentlog ARGS`` process, and its stdout."""
    t0 = time.perf_counter()
    r = agentlog(home, *args)
    return time.perf_counter() - t0, r.stdout


@dataclass
class VaultProcess:
    """``agentlog vault serve`` on a free loopback port, with its first admin made."""

    url: str
    data: str
    proc: subprocess.Popen[bytes]
    admin_home: str
    admin_dir: str

    @classmethod
    def start(cls, work: str) -> VaultProcess:
        data = os.path.join(work, "vault-data")
        err_path = os.path.join(work, "vault-serve.log")
        with open(err_path, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "agentlog", "vault", "serve", "--data", data, "--port", "0"],
                                    stdout=subprocess.PIPE, stderr=err, env=env_for(os.path.join(work, "server-home")))
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        if not url.startswith("http://"):
            proc.kill()
            proc.wait()
            with open(err_path, encoding="utf-8", errors="replace") as f:
                raise RuntimeError(f"agentlog vault serve did not start: {f.read()[-600:]}")
        token = ""
        deadline = time.monotonic() + 30
        while not token and time.monotonic() < deadline:
            with open(err_path, encoding="utf-8", errors="replace") as f:
                token = next((line.split(": ", 1)[1].strip() for line in f if line.startswith("bootstrap-token: ")), "")
            if not token:
                time.sleep(0.05)
        admin_home = os.path.join(work, "admin-home")
        v = cls(url, data, proc, admin_home, os.path.join(admin_home, "vault-admin"))
        if not token:
            v.stop()
            raise RuntimeError("agentlog vault serve printed no bootstrap token")
        v.admin("init", "--", url, token)
        return v

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        return agentlog(self.admin_home, "vault", "admin", args[0], "--dir", self.admin_dir, *args[1:])

    def enroll(self, home: str, host: str) -> None:
        token = self.admin("token").stdout.strip()
        agentlog(home, "enroll", self.url, token, "--host", host)

    def stored_bytes(self) -> dict[str, int]:
        """Sizes of every file under the vault's data directory: the database (with its
        WAL and shared memory), the blobs, and all of it."""
        out = {"database": 0, "blobs": 0, "other": 0, "total": 0, "files": 0}
        for dirpath, _dirs, files in os.walk(self.data):
            for name in files:
                size = os.path.getsize(os.path.join(dirpath, name))
                part = "blobs" if os.sep + "blobs" in dirpath else "database" if name.startswith("vault.db") else "other"
                out[part] += size
                out["total"] += size
                out["files"] += 1
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            stop_daemon(self.proc)  # SIGTERM, then kill past 60 s
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# -- session logs ---------------------------------------------------------------------

def _words(rng: random.Random, n: int = 3000) -> list[str]:
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [12, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1]
    return ["".join(rng.choices(letters, weights, k=rng.randint(2, 10))) for _ in range(n)]


class EventMaker:
    """~1.5 KB PostToolUse events shaped like ``hookbench.bench_payload``'s, whose tool
    output is seeded random words rather than one repeated text: identical outputs would
    let zstd shrink a session ~25 times, which flatters both the seal rate and the
    vault's storage; these compress about as well as ordinary tool output (~3-4 times)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = _words(self.rng)

    def text(self, k: int) -> str:
        return " ".join(self.rng.choices(self.words, k=k))

    def event(self, session_id: str, i: int) -> bytes:
        now = time.time_ns() // 1000
        call = f"toolu_bench_{i:08d}"
        command = f"python -m pytest tests/test_{self.text(1)}.py -q -k {self.text(1)}"
        payload = {
            "session_id": session_id, "transcript_path": f"/home/dev/.claude/projects/-home-dev-project/{session_id}.jsonl",
            "cwd": "/home/dev/project", "permission_mode": "default", "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": command, "description": "Run the tests"},
            "tool_response": {"stdout": self.text(70), "stderr": "", "interrupted": False, "isImage": False},
            "tool_use_id": call,
        }
        return dumps_bytes({
            "event_id": f"01900000-0000-7000-8000-{i:012d}", "schema_version": 1, "kind": "tool_call_finished",
            "provider": PROVIDER, "provider_event_name": "PostToolUse", "observed_at": now, "captured_at": now,
            "capture_mode": "full", "agentlog_version": "bench", "provider_session_id": session_id,
            "tool": {"name": "Bash", "category": "shell", "call_id": call}, "outcome": {"status": "success"},
            "attrs": {"command_category": "test"}, "content": {"command": command}, "raw": payload,
        })


def build_session(root: str, session_id: str, target_bytes: int, maker: EventMaker, *, frames: int | None = None) -> str:
    """A session log of at least ``target_bytes`` of frames (or exactly ``frames`` frames),
    appended in batches of 1,000 (relaxed durability: the file is in the page cache)."""
    log = SessionLog(root, PROVIDER, session_id, session_id=session_id, durability="relaxed")
    i = 0
    while (frames is None and (i == 0 or os.path.getsize(log.path) < target_bytes)) or (frames is not None and i < frames):
        n = 1000 if frames is None else min(1000, frames - i)
        log.append([maker.event(session_id, i + k) for k in range(n)])
        i += n
    return log.path


def append_frames(root: str, session_id: str, n: int, maker: EventMaker, start: int) -> None:
    """``n`` more frames into an existing session, one append each (as hooks write them)."""
    log = SessionLog(root, PROVIDER, session_id, session_id=session_id, durability="relaxed")
    for k in range(n):
        log.append([maker.event(session_id, start + k)])


def chain_of(session_id: str) -> str:
    return f"{PROVIDER}~{session_id}"


# -- requests per second (run in worker processes) --------------------------------------

def request_worker(root: str, session_id: str, kind: str, n: int, start_at: float) -> dict[str, Any]:
    """From one client (its own kept-alive connection, signed as the machine of ``root``):
    ``n`` signed ``GET head`` requests (``kind`` 'head') or ``n`` one-frame ``POST frames``
    continuing the chain (``kind`` 'post'; the bodies are built and sealed before the clock
    starts). Waits until ``start_at`` (time.time()) so parallel workers start together.
    Returns the per-request latencies (ms) and the wall window."""
    from agentlog.api import (
        VaultPackedIndex, load_vault_machine, vault_batch_aad, vault_chain_path, vault_index_entries, vault_seal_batch,
    )

    m = load_vault_machine(root)
    chain = chain_of(session_id)
    with m.client() as c:
        head_path = vault_chain_path(chain, "head")
        head = c.request("GET", head_path)
        if head.status != 200:
            raise RuntimeError(f"GET head: {head.short()}")
        requests: list[tuple[str, str, Any]] = []
        if kind == "head":
            requests = [("GET", head_path, None)] * n
        else:
            first = int(head.json()["seq"]) + 1
            with open(os.path.join(root, "vault", "chains", chain, "chain.key"), "rb") as f:
                key = f.read()
            log = os.path.join(root, "logs", PROVIDER, f"{session_id}.jsonl")
            with open(log, "rb") as f:
                lines = f.read().splitlines(keepends=True)[first:first + n]
            if len(lines) < n:
                raise RuntimeError(f"{session_id}: {len(lines)} unshipped frames, {n} wanted")
            frames_path = vault_chain_path(chain, "frames")
            for seq, line in enumerate(lines, first):
                index = VaultPackedIndex.of(vault_index_entries(line)).to_json()
                nonce, ct = vault_seal_batch(key, line, vault_batch_aad(m.machine_id, chain, m.host, seq, seq))
                body = {"first_seq": seq, "last_seq": seq, "index": index,
                        "nonce": base64.b64encode(nonce).decode(), "ciphertext": base64.b64encode(ct).decode()}
                requests.append(("POST", frames_path, body))
        for _ in range(5):  # warm the connection and both ends' code paths
            c.request("GET", head_path)
        time.sleep(max(0.0, start_at - time.time()))
        lat: list[float] = []
        t0 = time.perf_counter()
        w0 = time.time()
        for method, path, body in requests:
            s = time.perf_counter()
            reply = c.request(method, path, body)
            lat.append((time.perf_counter() - s) * 1000)
            if reply.status != 200:
                raise RuntimeError(f"{method} {path}: {reply.short()}")
        wall = time.perf_counter() - t0
    return {"latency_ms": lat, "start": w0, "end": w0 + wall}

