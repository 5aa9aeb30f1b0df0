"""One ship pass: every session log's new frames, encrypted, to the vault.

1. Load the enrolment (``vault.machine``); ``GET /v1/recipients``. No answer
   (or not 200) ends the whole pass as *unreachable*: no chain is tried. A set
   not signed by a pinned admin, or with a lower version than the pinned one,
   is a hard error (nothing is shipped); else it is pinned.
2. Per chain (``vault.chains``): the log's head file against ``shipped``; equal
   means nothing to do (the cost of an idle pass: two small reads per chain).
   Otherwise the pending frames are read (sealed segments and the open file,
   never holding the session's lock across a request) and checked against
   what was shipped; a frame that fails is a local rewrite: the chain is
   *stopped*, named with its first diverging seq, and never resumed
   automatically.
3. Batches of at most 8 MiB of frame bytes: zstd + XChaCha20-Poly1305 under the
   chain's key (``vault.crypto``), the AAD binding machine, chain, host and
   seq range; the chain's first batch carries the key wrapped for every pinned
   admin. A chain whose key was made for an older recipient-set version than
   the pinned one (admins added or removed, ``vault admin rekey``) gets a new
   key first, and its next batch carries the new wraps: a new key epoch. 200 moves ``shipped``. 409: a lost acknowledgement (the vault's head
   is a frame this pass sent, with the same hash) is recovered once per chain
   per pass; anything else is a divergence and stops the chain. 422 stops it.
   Any other answer or no answer: *unreachable*, the state is left as it was
   and the next pass tries again.
4. ``prune_after``: a chain fully acknowledged, not stopped, whose log has not
   changed for that long loses its local files (log, head, sealed segments)
   and its key; its ``shipped`` record stays.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import shutil
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

from agentlog.log.layout import head_path, sealed_dir
from agentlog.vault import VaultError
from agentlog.vault.chains import Batch, ChainState, Diverged, Shipped, local_chains, pending, pending_batches, read_head
from agentlog.vault.client import Client, Reply, VaultUnreachable, error_text
from agentlog.vault.protocol import MAX_BATCH_BYTES, b64e, chain_genesis, chain_path
from agentlog.vault.machine import Machine, load

BATCH_BYTES = MAX_BATCH_BYTES
"""Frame bytes a batch holds at most (a larger frame is a batch of its own)."""


@dataclass
class ChainResult:
    chain: str
    status: str
    """'shipped', 'up to date', 'stopped', 'unreachable', 'pruned', 'kept' (frames after the key was dropped)."""
    frames: int = 0
    bytes: int = 0
    shipped_seq: int | None = None
    message: str = ""
    seq: int | None = None
    rekeyed: bool = False
    """A batch of this pass started a new key epoch on a chain already shipped to."""


@dataclass
class PassResult:
    status: str
    """'ok', 'unreachable' (the vault did not answer the first request)."""
    chains: list[ChainResult] = field(default_factory=list)
    message: str = ""

    @property
    def exit_code(self) -> int:
        if self.status != "ok" or any(c.status in ("stopped", "unreachable") for c in self.chains):
            return 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "chains": [asdict(c) for c in self.chains]}


def run_once(root: str, *, prune_after: float | None = None, progress: Callable[[str], None] | None = None,
             now: float | None = None) -> PassResult:
    """One pass over every chain (see the module docstring)."""
    from agentlog.vault import VaultCryptoError
    from agentlog.vault.crypto import SignedRecipientSet

    m = load(root)
    with m.client() as c:
        try:
            reply = c.request("GET", "/v1/recipients")
        except VaultUnreachable as e:
            return PassResult("unreachable", message=f"the vault is unreachable ({e})")
        if reply.status != 200:
            return PassResult("unreachable", message=f"the vault did not give its recipient set ({error_text(reply)})")
        try:
            signed = SignedRecipientSet.from_json(reply.json())
            signed.check(m.recipients.set)
        except VaultCryptoError as e:
            raise VaultError(f"the vault's recipient set is not acceptable, nothing shipped: {e}") from None
        except (KeyError, TypeError, ValueError) as e:
            raise VaultError(f"the vault's recipient set is not understood, nothing shipped ({e})") from None
        if signed.to_json() != m.recipients.to_json():
            m.pin(signed)
        out = PassResult("ok")
        t = time.time() if now is None else now
        for chain, log in local_chains(root):
            res = ship_chain(m, c, chain, log, progress)
            if prune_after is not None and res.status in ("up to date", "shipped"):
                if prune(root, chain, log, prune_after, t):
                    res.status = "pruned"
            out.chains.append(res)
            if res.status == "unreachable":
                out.message = res.message
        return out


def ship_chain(m: Machine, c: Client, chain: str, log: str, progress: Callable[[str], None] | None = None) -> ChainResult:
    """Ship one chain's pending frames."""
    st = ChainState(m.root, chain)
    head = read_head(log)
    shipped = st.shipped()
    if head is not None and shipped is not None and head == (shipped.seq, shipped.hash):
        return ChainResult(chain, "up to date", shipped_seq=shipped.seq)
    stopped = st.stopped()
    if stopped is not None:
        seq = stopped.get("seq")
        return ChainResult(chain, "stopped", shipped_seq=shipped.seq if shipped else None,
                           message=str(stopped.get("reason", "")), seq=seq if isinstance(seq, int) else None)
    key = st.chain_key()
    if key is None and shipped is not None:  # pruned (only prune drops a key): a log begun again since stays here
        return ChainResult(chain, "kept", shipped_seq=shipped.seq,
                           message="frames written after this session was pruned stay on this machine")
    upto = head[0] if head else None
    stream = pending_batches(log, st, shipped, upto, BATCH_BYTES)
    try:
        first = next(stream, None)
    except Diverged as e:
        return _stop(st, shipped, str(e), e.seq)
    if first is None:
        return ChainResult(chain, "up to date", shipped_seq=shipped.seq if shipped else None)
    version = m.recipients.set.version
    if key is None or st.key_version() < version:  # a new chain, or the admins changed: a new key epoch
        from agentlog.vault.crypto import new_chain_key

        key = st.new_chain_key(new_chain_key(), version)
    return _Shipper(m, c, chain, log, st, key, progress).run(shipped, upto, itertools.chain([first], stream))


def _stop(st: ChainState, shipped: Shipped | None, reason: str, seq: int | None) -> ChainResult:
    st.stop(reason, seq)
    return ChainResult(st.chain, "stopped", shipped_seq=shipped.seq if shipped else None,
                       message=f"{st.chain}: {reason}; shipping this session stopped (never resolved automatically)", seq=seq)


@dataclass
class _Sent:
    """A batch on its way: what was sent, whether it carried the key's wraps, the answer."""

    batch: Batch
    wrapped: bool
    reply: Future[Reply]


class _Shipper:
    """Ships one chain's batches in order, one request at a time, while the next batch
    is read, checked and sealed (zstd and the AEAD let go of the GIL, and so does the
    wait for the vault): a pipeline of depth two that never has two requests out."""

    def __init__(self, m: Machine, c: Client, chain: str, log: str, st: ChainState, key: bytes,
                 progress: Callable[[str], None] | None) -> None:
        self.m, self.c, self.chain, self.log, self.st, self.key = m, c, chain, log, st, key
        self.progress = progress
        self.path = chain_path(chain, "frames")

    def run(self, shipped: Shipped | None, upto: int | None, stream: Iterator[Batch]) -> ChainResult:
        """Ship ``stream`` (the pending batches after ``shipped``), then whatever a
        recovery or a partial acknowledgement leaves to send."""
        res = ChainResult(self.chain, "shipped", shipped_seq=shipped.seq if shipped else None)
        recovered = False
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlog-seal") as sealer, \
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentlog-send") as sender:
            while True:
                try:
                    refused, shipped = self._stream(sealer, sender, stream, shipped, res)
                except VaultUnreachable as e:
                    return self._unreachable(res, str(e))
                except Diverged as e:
                    return _stop(self.st, self.st.shipped(), str(e), e.seq)
                except _Again as again:
                    shipped = again.shipped
                    stream = pending_batches(self.log, self.st, shipped, upto, BATCH_BYTES)
                    continue
                if refused is None:
                    return res
                reply, batch = refused.reply.result(), refused.batch
                d = reply.json() if reply.status in (409, 422) else None
                d = d if isinstance(d, dict) else {}
                if reply.status == 409:
                    expected, head_hash = d.get("expected_seq"), d.get("head_hash")
                    at = expected - 1 if isinstance(expected, int) else None
                    base = shipped.seq if shipped else -1
                    if "diverges_at" not in d and not recovered and at is not None and at > base \
                            and (upto is None or at <= upto):
                        recovered = True  # a lost acknowledgement, if the vault holds what this machine has
                        try:
                            held = pending(self.log, self.st, shipped, at)
                        except Diverged as e:
                            return _stop(self.st, shipped, str(e), e.seq)
                        if held and held[-1].seq == at and held[-1].hash == head_hash:
                            shipped = self.st.record_shipped(held)
                            res.shipped_seq = shipped.seq
                            stream = pending_batches(self.log, self.st, shipped, upto, BATCH_BYTES)
                            continue
                    if d.get("missing_wraps"):
                        return self._unreachable(res, "the vault's admins changed during this pass; the next pass retries")
                    seq = d.get("diverges_at", expected)
                    seq = seq if isinstance(seq, int) else batch.first
                    local = next((e.hash for e in batch.entries if e.seq == seq), None)
                    if local is None and isinstance(seq, int) and seq >= 0 and (upto is None or seq <= upto):
                        local = self._local_hash(shipped, seq)
                    vault = head_hash if "diverges_at" not in d else "another frame"
                    return _stop(self.st, shipped, f"the chain diverges at seq {seq}: the vault holds {vault}, "
                                 f"this machine has {local or 'nothing'}", seq)
                if reply.status == 422:
                    seq = d.get("seq")
                    return _stop(self.st, shipped, f"the vault refused the batch at seq {seq}: {d.get('error', reply.short())}",
                                 seq if isinstance(seq, int) else None)
                return self._unreachable(res, error_text(reply))

    def _stream(self, sealer: ThreadPoolExecutor, sender: ThreadPoolExecutor, stream: Iterator[Batch],
                shipped: Shipped | None, res: ChainResult) -> tuple[_Sent | None, Shipped | None]:
        """Send every batch of ``stream`` in order; (None, shipped) when all are stored,
        else (the batch the vault did not store, shipped). Three stages run at once:
        this thread reads and checks a batch, ``sealer`` seals the one before (zstd and
        the AEAD let go of the GIL), ``sender`` has the one before that out at the vault;
        one request at a time. Raises _Again when the vault stored only part of a batch.
        A frame that fails its check (Diverged) ends the stream once the batch out at the
        vault is answered and recorded: every batch before it ships."""
        wraps_due = self.st.key_pending()
        sealing: deque[tuple[Batch, bool, Future[dict[str, Any]]]] = deque()
        out: _Sent | None = None
        batches: Iterator[Batch | None] = itertools.chain(stream, [None])
        while True:
            try:
                batch = next(batches)
            except Diverged:
                if out is not None:
                    try:
                        self._settle(out, shipped, res)
                    except (VaultUnreachable, _Again):
                        pass
                raise
            if batch is not None:
                wrapped = batch.first == 0 or wraps_due
                wraps_due = wraps_due and not wrapped  # the batch before carries them; a refusal ends the stream
                sealing.append((batch, wrapped, sealer.submit(self._body, batch, wrapped)))
                if len(sealing) < 2:
                    continue
            while sealing:
                sealed, wrapped, body = sealing.popleft()
                if out is not None:
                    shipped = self._settle(out, shipped, res)
                    if shipped is None or shipped.seq != out.batch.last:
                        return out, shipped
                out = _Sent(sealed, wrapped, sender.submit(self.c.request, "POST", self.path, body.result()))
                if batch is not None:
                    break
            if batch is None:
                break
        if out is not None:
            shipped = self._settle(out, shipped, res)
            if shipped is None or shipped.seq != out.batch.last:
                return out, shipped
        return None, shipped

    def _settle(self, sent: _Sent, shipped: Shipped | None, res: ChainResult) -> Shipped | None:
        """Wait for ``sent``'s answer; on 200 record what the vault acknowledged and
        return the new shipped state (anything else leaves it as it was)."""
        reply = sent.reply.result()  # VaultUnreachable comes out here
        if reply.status != 200:
            return shipped
        d = reply.json()
        d = d if isinstance(d, dict) else {}
        if sent.wrapped and not d.get("replay"):
            self.st.key_acknowledged()  # the vault holds this key's wraps now
            res.rekeyed = res.rekeyed or sent.batch.first > 0
        acked = d.get("acked_seq")
        batch = sent.batch
        count = len(batch.index) if not isinstance(acked, int) else min(len(batch.index), acked - batch.first + 1)
        if count <= 0:
            raise VaultUnreachable(f"the vault acknowledged seq {acked}, before this batch")
        before = shipped.offset if shipped is not None else batch.start
        shipped = self.st.record_batch(batch, count)
        res.frames += count
        res.bytes += shipped.offset - before
        res.shipped_seq = shipped.seq
        if self.progress:
            self.progress(f"{self.chain}: shipped through seq {shipped.seq}")
        if count < len(batch.index):
            raise _Again(shipped)
        return shipped

    def _local_hash(self, shipped: Shipped | None, seq: int) -> str | None:
        """This machine's hash of frame ``seq`` (a pending one), for the message of a divergence."""
        if shipped is not None and seq <= shipped.seq:
            return self.st.shipped_hash(seq)
        try:
            held = pending(self.log, self.st, shipped, seq)
        except Diverged:
            return None
        return held[-1].hash if held and held[-1].seq == seq else None

    def _unreachable(self, res: ChainResult, why: str) -> ChainResult:
        res.message = f"{self.chain}: {why}; the next pass tries again"
        res.status = "unreachable"
        return res

    def _body(self, batch: Batch, wrapped: bool) -> dict[str, Any]:
        """The batch's request: its index, sealed bytes and (starting a key epoch: the
        chain's first batch, or a new key, docs/vault.md rekey) the key's wraps."""
        from agentlog.vault.crypto import admin_fingerprint, batch_aad, seal_batch, wrap_chain_key

        first, last = batch.first, batch.last
        nonce, ct = seal_batch(self.key, batch.data, batch_aad(self.m.machine_id, self.chain, self.m.host, first, last))
        body: dict[str, Any] = {
            "first_seq": first, "last_seq": last, "index": batch.index.to_json(),
            "nonce": b64e(nonce), "ciphertext": b64e(ct),
        }
        if wrapped:
            body["wraps"] = {admin_fingerprint(a): wrap_chain_key(self.key, a) for a in self.m.recipients.set.admins}
        if first == 0:
            body["genesis"] = chain_genesis(self.chain)
        return body


class _Again(VaultError):
    """The vault acknowledged part of a batch: stream again from ``shipped``."""

    def __init__(self, shipped: Shipped) -> None:
        super().__init__("partial acknowledgement")
        self.shipped = shipped


def prune(root: str, chain: str, log: str, after: float, now: float) -> bool:
    """Remove the local files of a chain that is fully acknowledged, not stopped, and
    whose log has not changed for ``after`` seconds; True when it did. Checked again
    under the session's exclusive lock (a hook appending meanwhile keeps it)."""
    st = ChainState(root, chain)
    if after < 0 or after > 100 * 365 * 86400 or st.stopped() is not None:
        return False
    shipped = st.shipped()
    if shipped is None:
        return False
    try:
        if read_head(log) != (shipped.seq, shipped.hash) or pending(log, st, shipped, None):
            return False  # frames past the head (a crash before the head moved): not complete
    except Diverged:
        return False
    try:
        fd = os.open(log, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        fd = -1
    try:
        before = os.fstat(fd).st_size if fd >= 0 else -1
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_EX)  # readers take it shared: nothing below reads the log
        if now - _changed_at(log, fd) < after or (fd >= 0 and os.fstat(fd).st_size != before):
            return False
        if read_head(log) != (shipped.seq, shipped.hash):
            return False
        sealed = sealed_dir(log)
        if os.path.isdir(sealed):
            shutil.rmtree(sealed)
        for p in (log, head_path(log)):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        st.drop_chain_key()
        return True
    finally:
        if fd >= 0:
            os.close(fd)


def _changed_at(log: str, fd: int) -> float:
    """When the chain last changed: its log file's or sealed directory's mtime, the later."""
    times = [os.fstat(fd).st_mtime] if fd >= 0 else []
    try:
        times.append(os.stat(sealed_dir(log)).st_mtime)
    except FileNotFoundError:
        pass
    return max(times, default=0.0)


def loop(root: str, every: float, *, prune_after: float | None, on_pass: Callable[[PassResult], None],
         progress: Callable[[str], None] | None = None) -> None:
    """``ship --every``: a pass, then sleep, until interrupted. A hard error (a recipient set
    that is not acceptable) ends the loop; an unreachable vault is tried again."""
    while True:
        on_pass(run_once(root, prune_after=prune_after, progress=progress))
        time.sleep(every)


def shipped_state(root: str) -> list[dict[str, Any]]:
    """Per chain, without asking the vault: the log's head seq, the shipped seq and
    'shipped' (all of it), 'pending', 'not shipped' or 'stopped' (`agentlog status`)."""
    out = []
    for chain, log in local_chains(root):
        st = ChainState(root, chain)
        head = read_head(log)
        shipped = st.shipped()
        stopped = st.stopped()
        if stopped is not None:
            state = "stopped"
        elif shipped is None:
            state = "not shipped"
        else:
            state = "shipped" if head == (shipped.seq, shipped.hash) else "pending"
        out.append({"chain": chain, "head_seq": head[0] if head else None,
                    "shipped_seq": shipped.seq if shipped else None, "state": state,
                    "stopped": stopped})
    return out
