"""``agentlog bench ship``: shipping sessions to a vault, measured (issue 30's benchmark).

A real vault (``agentlog vault serve`` on a loopback port, its own process) and
enrolled data roots; every timed ship and pull is a whole ``python -m agentlog``
process, as a user (or cron) runs it. Per round, interleaved:

- **ship, one session**: ``agentlog ship`` on a data root holding one new session of
  ``mb`` MiB of ~1.5 KB frames;
- **ship, four sessions in parallel**: four ``agentlog ship`` processes at once, each
  on its own data root (its own enrolment) with one new ``mb`` MiB session. Four
  roots, not one root with four sessions: one ship pass sends its chains one after
  another, so parallel shipping *is* several processes (several machines, or several
  data roots on one), and it is the vault's concurrent intake that this row tests;
- **seal floors**, in this process over the same bytes in the same 8 MiB batches:
  zstd alone (the vault's level), XChaCha20-Poly1305 alone (over the raw bytes), both as a batch
  is sealed, and a batch opened (AEAD + unzstd: the pull's floor);
- **admin pull**: ``agentlog vault admin pull --into DIR`` (incremental: the round's
  five new sessions), decrypting and checking every frame.

Then the vault's bytes on disk against the frame bytes shipped; vault requests per
second (signed ``GET head`` and one-frame ``POST frames``, one client and four
client processes); and an idle pass over ``sessions_idle`` already-shipped sessions,
whole process and in process (``run_once``: what each ``ship --every`` pass costs),
beside the same pass on an enrolled root with no sessions (the floor).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

from agentlog.bench.common import describe, machine, spread_directories
from agentlog.bench.shipvault import (
    BYTECODE_DIR, EventMaker, VaultProcess, agentlog, append_frames, build_session, env_for, request_worker, timed,
)

__all__ = ["run_ship_bench"]

MIB = 1 << 20
Progress = Callable[[str], None]


def _batches(data: bytes, limit: int) -> list[bytes]:
    """``data`` cut at line ends into pieces of at most ``limit`` bytes (as ship batches it)."""
    out, start = [], 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + limit) + 1 if len(data) - start > limit else len(data)
        if end <= start:
            end = data.find(b"\n", start) + 1 or len(data)
        out.append(data[start:end])
        start = end
    return out


def seal_floors(path: str) -> dict[str, float]:
    """Seconds for zstd alone, the AEAD alone, sealing and opening every 8 MiB batch of
    the log at ``path``; and the compression ratio."""
    import nacl.bindings
    import zstandard

    from agentlog.api import VAULT_MAX_BATCH_BYTES, VAULT_ZSTD_LEVEL, vault_batch_aad, vault_open_batch, vault_seal_batch

    with open(path, "rb") as f:
        parts = _batches(f.read(), VAULT_MAX_BATCH_BYTES)
    key, nonce = os.urandom(32), os.urandom(24)
    aad = vault_batch_aad("machine", "claude_code~bench", "host", 0, 1)
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    packed = sum(len(zstandard.ZstdCompressor(level=VAULT_ZSTD_LEVEL).compress(p)) for p in parts)
    out["zstd"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for p in parts:
        nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(p, aad, nonce, key)
    out["aead"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sealed = [vault_seal_batch(key, p, aad) for p in parts]
    out["seal"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for n, ct in sealed:
        vault_open_batch(key, n, ct, aad)
    out["open"] = time.perf_counter() - t0
    out["ratio"] = sum(len(p) for p in parts) / packed
    return out


def _ship_json(stdout: str) -> int:
    """Frame bytes a ``ship --json`` pass sent (and a check that nothing failed)."""
    d = json.loads(stdout)
    bad = [c for c in d["chains"] if c["status"] not in ("shipped", "up to date")]
    if d["status"] != "ok" or bad:
        raise RuntimeError(f"agentlog ship: {d['status']} {bad[:2]}")
    return sum(int(c["bytes"]) for c in d["chains"])


def _ship_parallel(homes: list[str]) -> tuple[float, int]:
    """Wall seconds of ``agentlog ship --json`` on every home at once, and the bytes sent."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "agentlog", "ship", "--json"], env=env_for(h),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for h in homes]
    outs = [p.communicate() for p in procs]
    wall = time.perf_counter() - t0
    for p, (_o, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"agentlog ship -> exit {p.returncode}: {err[-600:]}")
    return wall, sum(_ship_json(o) for o, _e in outs)


class _Bench:
    def __init__(self, work: str, mb: float, rounds: int, sessions_idle: int, requests: int, progress: Progress) -> None:
        self.work, self.mb, self.rounds, self.sessions_idle, self.requests = work, mb, rounds, sessions_idle, requests
        self.say = progress
        self.maker = EventMaker(20261207)
        self.vault = VaultProcess.start(work)
        self.shipped_bytes = 0

    def home(self, name: str, enroll: bool = True) -> str:
        h = os.path.join(self.work, "homes", name)
        os.makedirs(h, exist_ok=True)
        if enroll:
            self.vault.enroll(h, f"bench-{name}")
        return h

    # -- throughput, seal floors, pull -----------------------------------------------------
    def throughput(self) -> dict[str, Any]:
        one = self.home("one")
        par = [self.home(f"par{k}") for k in range(4)]
        into = os.path.join(self.work, "pulled")
        target = int(self.mb * MIB)
        t: dict[str, list[float]] = {k: [] for k in ("one", "four", "pull", "zstd", "aead", "seal", "open")}
        sizes: dict[str, list[int]] = {"one": [], "four": [], "pull": [], "floor": []}
        ratios: list[float] = []
        for r in range(self.rounds):
            self.say(f"ship round {r + 1}/{self.rounds}: building {5 * self.mb:g} MiB of sessions")
            path = build_session(one, f"one-r{r}", target, self.maker)
            for k, h in enumerate(par):
                build_session(h, f"par{k}-r{r}", target, self.maker)
            os.sync()  # writeback done before the clock starts
            order = ["one", "four"] if r % 2 == 0 else ["four", "one"]
            for variant in order:
                self.say(f"ship round {r + 1}/{self.rounds}: {variant}")
                if variant == "one":
                    wall, out = timed(one, "ship", "--json")
                    sent = _ship_json(out)
                else:
                    wall, sent = _ship_parallel(par)
                t[variant].append(wall)
                sizes[variant].append(sent)
            f = seal_floors(path)
            for floor in ("zstd", "aead", "seal", "open"):
                t[floor].append(f[floor])
            sizes["floor"].append(os.path.getsize(path))
            ratios.append(f["ratio"])
            self.say(f"ship round {r + 1}/{self.rounds}: admin pull")
            wall, out = timed(self.vault.admin_home, "vault", "admin", "pull", "--dir", self.vault.admin_dir, "--into", into,
                              "--json")
            pulled = json.loads(out)
            if pulled["failed"] or pulled["bytes"] != sizes["one"][-1] + sizes["four"][-1]:
                raise RuntimeError(f"admin pull: {pulled['bytes']} bytes, failed={pulled['failed']}")
            t["pull"].append(wall)
            sizes["pull"].append(int(pulled["bytes"]))
            self.shipped_bytes += sizes["one"][-1] + sizes["four"][-1]
            for h in (one, *par, into):  # the next round's files go where these were
                shutil.rmtree(os.path.join(h, "logs"), ignore_errors=True)
        return {"seconds": t, "bytes": sizes, "zstd_ratio": describe(ratios)}

    # -- requests per second ------------------------------------------------------------------
    def requests_per_second(self) -> dict[str, Any]:
        homes = [self.home(f"req{k}") for k in range(4)]
        per = self.requests
        self.say("requests: building the request chains")
        for k, h in enumerate(homes):
            build_session(h, "rps", 0, self.maker, frames=1)
            agentlog(h, "ship")
            append_frames(h, "rps", self.rounds * 2 * per if k == 0 else self.rounds * per, self.maker, 1)
        variants = [("head", 1), ("head", 4), ("post", 1), ("post", 4)]
        out: dict[str, Any] = {f"{k}x{n}": {"rps": [], "latency_ms": []} for k, n in variants}
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=4, mp_context=ctx) as pool:
            for r in range(self.rounds):
                for i in range(len(variants)):
                    kind, n = variants[(i + r) % len(variants)]
                    self.say(f"requests round {r + 1}/{self.rounds}: {kind} x {n} clients")
                    start_at = time.time() + 1.0
                    futs = [pool.submit(request_worker, homes[c], "rps", kind, per, start_at) for c in range(n)]
                    res = [f.result() for f in futs]
                    window = max(x["end"] for x in res) - min(x["start"] for x in res)
                    cell = out[f"{kind}x{n}"]
                    cell["rps"].append(per * n / window)
                    cell["latency_ms"] += [v for x in res for v in x["latency_ms"]]
        return out

    # -- the idle pass ----------------------------------------------------------------------------
    def idle(self) -> dict[str, Any]:
        from agentlog.api import ship_once

        idle, empty = self.home("idle"), self.home("empty")
        self.say(f"idle: {self.sessions_idle:,} sessions of 3 frames")
        for i in range(self.sessions_idle):
            build_session(idle, f"idle-{i:05d}", 0, self.maker, frames=3)
        first, out = timed(idle, "ship", "--json")
        _ship_json(out)
        t: dict[str, list[float]] = {k: [] for k in ("cmd_idle", "cmd_empty", "run_idle", "run_empty")}
        rounds = max(6, 2 * self.rounds)
        for r in range(rounds):
            self.say(f"idle round {r + 1}/{rounds}")
            for i in range(4):
                v = list(t)[(i + r) % 4]
                home = idle if v.endswith("idle") else empty
                if v.startswith("cmd"):
                    wall, out = timed(home, "ship", "--json")
                    if _ship_json(out):
                        raise RuntimeError("an idle pass shipped frames")
                else:
                    t0 = time.perf_counter()
                    res = ship_once(home)
                    wall = time.perf_counter() - t0
                    if res.status != "ok" or any(c.status != "up to date" for c in res.chains):
                        raise RuntimeError(f"an idle pass was not idle: {res.status}")
                t[v].append(wall * 1000)
        return {"first_pass_s": first, "ms": t, "rounds": rounds}


def _mbps(nbytes: float, secs: float) -> float:
    return nbytes / 1e6 / secs if secs > 0 else 0.0


def _tables(tp: dict[str, Any], stored: dict[str, int], shipped: int, rq: dict[str, Any], idle: dict[str, Any],
            sessions_idle: int, rounds: int) -> list[dict[str, Any]]:
    from agentlog.api import VAULT_ZSTD_LEVEL

    secs, size = tp["seconds"], tp["bytes"]
    rows = []
    labels = [("one", "one", "ship, 1 session (1 process)"), ("four", "four", "ship, 4 sessions (4 processes, 4 data roots)"),
              ("pull", "pull", "admin pull (1 process, the round's 5 sessions)"),
              ("zstd", "floor", f"zstd level {VAULT_ZSTD_LEVEL} alone (in process)"),
              ("aead", "floor", "XChaCha20-Poly1305 alone (in process)"),
              ("seal", "floor", "seal = zstd + AEAD (in process)"), ("open", "floor", "open = AEAD + unzstd (in process)")]
    for key, sk, label in labels:
        d, nbytes = describe(secs[key]), sum(size[sk]) / max(1, len(size[sk]))
        rows.append([label, nbytes / 1e6, d["median"], d["p95"], _mbps(nbytes, d["median"]), _mbps(nbytes, d["p95"])])
    req_rows = []
    for name, cell in rq.items():
        kind, n = name.split("x")
        r, lat = describe(cell["rps"]), describe(cell["latency_ms"])
        req_rows.append(["signed GET head" if kind == "head" else "POST frames (1 frame, ~1.6 KB)", int(n), r["median"],
                         r["min"], lat["median"], lat["p95"]])
    ms = {k: describe(v) for k, v in idle["ms"].items()}
    per = {k: (ms[f"{k}_idle"]["median"] - ms[f"{k}_empty"]["median"]) / sessions_idle * 1000 for k in ("cmd", "run")}
    idle_rows = [
        [f"in process (`run_once`, one `ship --every` pass), {sessions_idle:,} sessions", ms["run_idle"]["median"],
         ms["run_idle"]["p95"], per["run"]],
        ["in process, enrolled root with no sessions (floor)", ms["run_empty"]["median"], ms["run_empty"]["p95"], None],
        [f"whole process (`python -m agentlog ship --json`), {sessions_idle:,} sessions", ms["cmd_idle"]["median"],
         ms["cmd_idle"]["p95"], per["cmd"]],
        ["whole process, no sessions (floor)", ms["cmd_empty"]["median"], ms["cmd_empty"]["p95"], None],
    ]
    ratio = tp["zstd_ratio"]["median"]
    return [
        {"title": f"Frame bytes shipped per second over loopback ({rounds} interleaved rounds)",
         "columns": ["what", "MB of frames", "median s", "p95 s", "MB/s (median)", "MB/s (at p95)"], "rows": rows,
         "note": "Ship rows: whole `agentlog ship --json` processes, the vault in its own process on 127.0.0.1; MB are "
                 "frame bytes (10^6). The four-session row is four processes on four enrolled data roots started together "
                 "(one pass ships its sessions one after another). Floors: this process over the one-session log's bytes "
                 f"in 8 MiB batches; zstd shrinks these frames {ratio:.1f} times. Pull: `vault admin pull --json`, "
                 "incremental, decrypting and checking every frame, writing and fsyncing the logs. Every process keeps "
                 "its compiled bytecode in the run's cache, as an installed package has it."},
        {"title": "Vault requests per second (loopback, kept-alive connections)",
         "columns": ["request", "clients", "req/s (median)", "req/s (worst round)", "latency median ms", "latency p95 ms"],
         "rows": req_rows,
         "note": "Each client is its own process and connection, signed as its own machine; POST bodies are built and "
                 "sealed before the clock starts, so a POST row is signing + HTTP + the vault's checks and its "
                 "fsynced write (blob + SQLite transaction), one frame per request."},
        {"title": "Bytes the vault stores per byte of log",
         "columns": ["frame bytes shipped", "vault bytes", "database (+WAL)", "blobs", "files", "vault / log"],
         "rows": [[shipped, stored["total"], stored["database"], stored["blobs"], stored["files"],
                   stored["total"] / shipped if shipped else 0.0]],
         "note": "Sizes of every file under the vault's --data directory after the ship rounds (apparent sizes)."},
        {"title": f"An idle ship pass over {sessions_idle:,} already-shipped sessions ({idle['rounds']} interleaved rounds)",
         "columns": ["pass", "median ms", "p95 ms", "µs per session above the floor"], "rows": idle_rows,
         "note": f"The goal (≤ 50 ms) is for the `ship --every` pass, the in-process row. The first pass over these "
                 f"{sessions_idle:,} new sessions (3 frames each) took {idle['first_pass_s']:.2f} s."},
    ]


def run_ship_bench(*, mb: float = 64, rounds: int = 5, sessions_idle: int = 1000, requests: int = 300,
                   progress: Progress | None = None) -> dict[str, Any]:
    """Run the whole benchmark (see the module docstring); the result object with its tables."""
    say = progress or (lambda _line: None)
    tmp = tempfile.mkdtemp(prefix="agentlog-bench-ship-")
    spread_directories(tmp)
    bench: _Bench | None = None
    BYTECODE_DIR[:] = [os.path.join(tmp, "bytecode")]
    try:
        bench = _Bench(tmp, mb, rounds, sessions_idle, requests, say)
        tp = bench.throughput()
        stored = bench.vault.stored_bytes()
        rq = bench.requests_per_second()
        idle = bench.idle()
        tables = _tables(tp, stored, bench.shipped_bytes, rq, idle, sessions_idle, rounds)
        summary = {
            "ship_one_mb_s": tables[0]["rows"][0][4], "ship_four_mb_s": tables[0]["rows"][1][4],
            "pull_mb_s": tables[0]["rows"][2][4], "zstd_mb_s": tables[0]["rows"][3][4], "aead_mb_s": tables[0]["rows"][4][4],
            "seal_mb_s": tables[0]["rows"][5][4], "open_mb_s": tables[0]["rows"][6][4],
            "head_rps_1": tables[1]["rows"][0][2], "head_rps_4": tables[1]["rows"][1][2],
            "post_rps_1": tables[1]["rows"][2][2], "post_rps_4": tables[1]["rows"][3][2],
            "vault_bytes_per_log_byte": tables[2]["rows"][0][5],
            "idle_pass_ms_in_process": tables[3]["rows"][0][1], "idle_pass_ms_whole_process": tables[3]["rows"][2][1],
        }
        return {"machine": machine(), "mb": mb, "rounds": rounds, "sessions_idle": sessions_idle, "requests": requests,
                "summary": summary, "throughput": tp, "stored": stored, "shipped_bytes": bench.shipped_bytes,
                "requests_per_second": rq, "idle": idle, "tables": tables}
    finally:
        BYTECODE_DIR.clear()
        if bench is not None:
            bench.vault.stop()
        shutil.rmtree(tmp, ignore_errors=True)
