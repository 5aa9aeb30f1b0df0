"""``vault admin pull --into DIR``: every chain this admin can open, decrypted into
a data root of its own, checked frame by frame.

``DIR`` is an ordinary data root (use it with ``AGENTLOG_HOME=DIR agentlog ...``):
each chain lands as the normal frame file ``DIR/logs/<provider>/<key>.jsonl``
with its head, so ingest, timeline, search, SQL and verify work over it. Which
machine a log came from is kept beside it, in ``DIR/vault-pull/``:

    chains.jsonl   one JSON object per pulled chain: {"log": "<provider>/<key>",
                   "machine_id", "host", "chain", "root", "seq", "hash"} (the last pulled frame)
    report.jsonl   one object per problem found: {"machine_id", "chain", "seq", "problem"}

A session id seen on two machines (the same ``<provider>/<key>``) cannot share
one file (the genesis binds the chain to its name): the second machine's copy
goes to the data root ``DIR/vault-pull/machines/<machine id>/`` and
chains.jsonl says so in ``root`` (relative to ``DIR``, so the directory can move).

Each batch is opened with this admin's wrap of the chain key (a batch the admin
has no wrap for is counted, not an error); then every frame's bytes are checked
against its index entry: its seq, prev and hash, the hash over its bytes, and
the linkage from the chain's genesis. A batch that does not open (tampered
ciphertext, nonce, or moved) or whose frames do not match its index (a
tampered index) is a failure: reported, the rest of that chain skipped, and
the pull ends with exit 1 naming chain and seq. A purged frame (its event
removed on the machine before shipping) is noted, not failed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from agentlog.core.fileio import write_atomic
from agentlog.core.paths import FILE_MODE, ensure_dir, logs_dir
from agentlog.log.frame import FrameError, parse_any
from agentlog.log.layout import head_path, log_path
from agentlog.log.pulled import CHAINS, MACHINES, PULL_DIR, REPORT, relative_root
from agentlog.log.writer import Tip, format_head
from agentlog.vault import VaultCryptoError, VaultError, VaultProtocolError
from agentlog.vault.admin import Admin, batch_pages, chains, machines
from agentlog.vault.protocol import IndexEntry, PackedIndex, b64d, chain_genesis, iter_frames, split_chain


@dataclass
class Problem:
    machine_id: str
    chain: str
    seq: int | None
    problem: str
    fatal: bool = True

    def line(self) -> str:
        at = f" seq {self.seq}" if self.seq is not None else ""
        return f"{self.machine_id}/{self.chain}{at}: {self.problem}"


@dataclass
class PullResult:
    into: str
    chains: int = 0
    frames: int = 0
    bytes: int = 0
    unreadable: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(p.fatal for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failed"] = self.failed
        return d


def pull_dir(into: str) -> str:
    return os.path.join(into, PULL_DIR)


def _load_sidecar(into: str) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        with open(os.path.join(pull_dir(into), CHAINS), "rb") as f:
            for line in f:
                d = json.loads(line)
                d["root"] = relative_root(d)  # older pulls wrote it absolute
                out[(d["machine_id"], d["chain"])] = d
    except FileNotFoundError:
        pass
    return out


def _save_sidecar(into: str, rows: dict[tuple[str, str], dict[str, Any]]) -> None:
    data = b"".join(json.dumps(r, sort_keys=True).encode() + b"\n" for _k, r in sorted(rows.items()))
    write_atomic(os.path.join(pull_dir(into), CHAINS), data)


def pull(admin: Admin, into: str, progress: Callable[[str], None] | None = None) -> PullResult:
    """Pull every chain (see the module docstring)."""
    into = os.path.abspath(into)
    ensure_dir(pull_dir(into))
    ensure_dir(logs_dir(into))
    hosts = {str(m.get("machine_id")): str(m.get("host", "")) for m in machines(admin)}
    rows = _load_sidecar(into)
    taken = {(r["root"], r["log"]): k for k, r in rows.items()}
    res = PullResult(into)
    with admin.client() as c:
        for row in chains(admin):
            mid, chain = str(row.get("machine_id", "")), str(row.get("chain", ""))
            try:
                provider, key = split_chain(chain)
            except VaultProtocolError as e:
                res.problems.append(Problem(mid, chain, None, str(e)))
                continue
            state = rows.get((mid, chain))
            if state is None:
                root = "."
                if (root, f"{provider}/{key}") in taken:
                    root = os.path.join(PULL_DIR, MACHINES, mid)
                state = {"machine_id": mid, "chain": chain, "host": hosts.get(mid, ""), "log": f"{provider}/{key}",
                         "root": root, "seq": -1, "hash": chain_genesis(chain)}
                taken[(root, state["log"])] = (mid, chain)
            _ChainPull(admin, c, state, res, progress).run()
            rows[(mid, chain)] = state
            res.chains += 1
    _save_sidecar(into, rows)
    with open(os.path.join(pull_dir(into), REPORT), "ab") as f:
        os.fchmod(f.fileno(), FILE_MODE)
        for p in res.problems:
            f.write(json.dumps(asdict(p)).encode() + b"\n")
    return res


class _ChainPull:
    def __init__(self, admin: Admin, c: Any, state: dict[str, Any], res: PullResult,
                 progress: Callable[[str], None] | None) -> None:
        self.admin, self.c, self.state, self.res, self.progress = admin, c, state, res, progress
        self.mid, self.chain = str(state["machine_id"]), str(state["chain"])
        provider, key = split_chain(self.chain)
        self.log = log_path(os.path.join(res.into, str(state["root"])), provider, key)
        self.keys: dict[int, bytes] = {}

    def problem(self, seq: int | None, text: str, fatal: bool = True) -> None:
        p = Problem(self.mid, self.chain, seq, text, fatal)
        self.res.problems.append(p)
        if self.progress:
            self.progress(("FAILED " if fatal else "") + p.line())

    def run(self) -> None:
        from agentlog.vault.crypto import batch_aad, open_batch

        for b in batch_pages(self.admin, self.c, self.mid, self.chain, int(self.state["seq"])):
            first, last = int(b["first_seq"]), int(b["last_seq"])
            if last <= int(self.state["seq"]):
                continue
            key = self._key(b)
            if key is None:
                self.res.unreadable += 1
                return
            try:
                index = PackedIndex.from_json(b["index"], first).entries()
                aad = batch_aad(self.mid, self.chain, str(self.state["host"]), first, last)
                data = open_batch(key, b64d(b["nonce"]), b64d(b["ciphertext"]), aad)
            except (VaultCryptoError, VaultProtocolError, KeyError, TypeError) as e:
                self.problem(first, f"batch {first}-{last} does not open: {e}")
                return
            lines = self._check(data, index, first, last)
            if lines is None:
                return
            self._append(lines, index[-1])
            if self.progress:
                self.progress(f"{self.mid}/{self.chain}: pulled through seq {last}")

    def _key(self, b: dict[str, Any]) -> bytes | None:
        epoch = int(b.get("epoch", 0))
        if epoch not in self.keys:
            wrap = b.get("wrap")
            if not isinstance(wrap, str):
                return None
            try:
                self.keys[epoch] = self.admin.key.unwrap(wrap)
            except VaultCryptoError as e:
                self.problem(int(b["first_seq"]), str(e))
                return None
        return self.keys[epoch]

    def _check(self, data: bytes, index: list[IndexEntry], first: int, last: int) -> list[bytes] | None:
        """The batch's frame lines when every one matches its index entry and the chain."""
        try:
            lines = [data[s:e] for s, e in iter_frames(data)]
        except VaultProtocolError as torn:
            self.problem(first, str(torn))
            return None
        if len(lines) != len(index) or len(index) != last - first + 1:
            self.problem(first, f"the batch holds {len(lines)} frames, its index {len(index)}, its range {last - first + 1}")
            return None
        seq, prev = int(self.state["seq"]) + 1, str(self.state["hash"])
        for line, e in zip(lines, index):
            if e.seq != seq or e.prev != prev:
                self.problem(e.seq, f"the index does not continue the chain (expected seq {seq} after {prev[:12]})")
                return None
            try:
                got = parse_any(line, hashlib.sha256)
            except FrameError as bad:
                self.problem(e.seq, f"the frame's bytes do not match its hash ({bad})")
                return None
            if (got[0], got[1], got[2]) != (e.seq, e.prev, e.hash):
                self.problem(e.seq, "the frame's seq, prev or hash differ from its index entry")
                return None
            if got[3]:
                self.problem(e.seq, "purged on the machine before shipping (its hash is taken as given)", fatal=False)
            seq, prev = seq + 1, e.hash
        return lines

    def _append(self, lines: list[bytes], last: IndexEntry) -> None:
        ensure_dir(os.path.dirname(self.log))
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)
        data = b"".join(lines)
        with os.fdopen(fd, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            size = os.fstat(f.fileno()).st_size
        write_atomic(head_path(self.log), format_head(Tip(last.seq, last.hash, size)))
        self.state["seq"], self.state["hash"] = last.seq, last.hash
        self.res.frames += len(lines)
        self.res.bytes += len(data)


def check_into(into: str) -> None:
    """Refuse to pull into the data root this machine records into (its own logs would mix)."""
    from agentlog.core.paths import data_root

    if os.path.abspath(into) == os.path.abspath(data_root()):
        raise VaultError(f"{into} is this machine's own data root; pull into a separate directory")
