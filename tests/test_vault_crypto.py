"""vault.crypto and vault.protocol: keys, signatures, recipient sets, wraps, sealed
batches; the index from real frames, linkage, batching and the URL rule (nd7 §8)."""

from __future__ import annotations

import json
from pathlib import Path

import blake3
import nacl.public
import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.log.frame import genesis, purged_line
from agentlog.log.writer import SessionLog
from agentlog.vault import BodyHashError, ClockSkewError, VaultAuthError, VaultCryptoError, VaultError, VaultProtocolError
from agentlog.vault import crypto as c
from agentlog.vault import protocol as p

SEED = bytes(range(32))
SEED2 = bytes(range(1, 33))


# -- keys -----------------------------------------------------------------------------

def test_machine_key_seed_round_trip_and_signature() -> None:
    k = c.MachineKey.generate()
    again = c.MachineKey.from_seed(k.seed)
    assert again.public == k.public and len(k.public) == 32
    nacl.signing.VerifyKey(k.public).verify(b"x", again.sign(b"x"))
    assert k.seed.hex() not in repr(k)
    with pytest.raises(VaultCryptoError):
        c.MachineKey.from_seed(b"short")


def test_admin_key_is_deterministic_and_its_halves_are_separate() -> None:
    a, b = c.AdminKey.from_seed(SEED), c.AdminKey.from_seed(SEED)
    assert a.public == b.public and len(a.public) == 64
    x_secret = blake3.blake3(SEED, derive_key_context="agentlog-vault 2026 admin x25519").digest()
    assert a.public[:32] == bytes(nacl.public.PrivateKey(x_secret).public_key)
    assert a.public[32:] == bytes(nacl.signing.SigningKey(SEED).verify_key)
    assert x_secret != SEED and a.public[:32] != a.public[32:]
    # the X25519 half is not the Ed25519 seed used as an X25519 secret
    assert a.public[:32] != bytes(nacl.public.PrivateKey(SEED).public_key)
    assert a.fingerprint == blake3.blake3(a.public).hexdigest() == c.admin_fingerprint(a.public)
    assert c.AdminKey.from_seed(SEED2).public != a.public
    assert SEED.hex() not in repr(a)


# -- recipient sets --------------------------------------------------------------------

def test_fingerprint_order_independent_version_excluded() -> None:
    a, b = c.AdminKey.from_seed(SEED).public, c.AdminKey.from_seed(SEED2).public
    s1, s2 = c.RecipientSet((a, b), 1), c.RecipientSet((b, a), 7)
    assert s1.fingerprint() == s2.fingerprint() == blake3.blake3(b"".join(sorted((a, b)))).hexdigest()
    assert c.RecipientSet((a,), 1).fingerprint() != s1.fingerprint()
    assert c.RecipientSet.from_json(json.loads(json.dumps(s1.to_json()))) == s1


def test_recipient_set_rejects_malformed() -> None:
    a = c.AdminKey.from_seed(SEED).public
    for bad in ((), (a, a), (a[:63],)):
        with pytest.raises(VaultProtocolError):
            c.RecipientSet(bad, 1)
    with pytest.raises(VaultProtocolError):
        c.RecipientSet((a,), -1)
    with pytest.raises(VaultProtocolError):
        c.RecipientSet.from_json({"admins": ["!!"], "version": 1})


def test_signed_set_bytes_layout() -> None:
    admin = c.AdminKey.from_seed(SEED)
    s = c.RecipientSet((admin.public,), 3)
    signed = c.SignedRecipientSet.sign(s, admin)
    msg = b"agentlog-vault recipients\n3\n" + s.fingerprint().encode()
    assert c.recipients_message(3, s.fingerprint()) == msg
    nacl.signing.VerifyKey(admin.public[32:]).verify(msg, signed.signature)
    assert c.SignedRecipientSet.from_json(json.loads(json.dumps(signed.to_json()))) == signed


def test_signed_set_accepted_only_from_a_pinned_signer() -> None:
    old, new, stranger = c.AdminKey.from_seed(SEED), c.AdminKey.from_seed(SEED2), c.AdminKey.generate()
    pinned = c.RecipientSet((old.public,), 1)
    grown = c.RecipientSet((old.public, new.public), 2)
    c.SignedRecipientSet.sign(grown, old).check(pinned)  # the pinned admin adds one: fine
    c.SignedRecipientSet.sign(pinned, old).check(pinned)  # the same version again: fine
    with pytest.raises(VaultCryptoError, match="not by a pinned admin"):
        c.SignedRecipientSet.sign(grown, new).check(pinned)  # the added admin signs its own entry
    with pytest.raises(VaultCryptoError, match="not by a pinned admin"):
        c.SignedRecipientSet.sign(c.RecipientSet((stranger.public,), 5), stranger).check(pinned)
    # a lifted signature: the pinned admin's signature over another set, re-labelled
    lifted = c.SignedRecipientSet(c.RecipientSet((old.public, stranger.public), 2), old.fingerprint,
                                  c.SignedRecipientSet.sign(grown, old).signature)
    with pytest.raises(VaultCryptoError, match="does not verify"):
        lifted.check(pinned)
    # the same set at another version than signed
    forged_version = c.SignedRecipientSet(c.RecipientSet(grown.admins, 9), old.fingerprint,
                                          c.SignedRecipientSet.sign(grown, old).signature)
    with pytest.raises(VaultCryptoError, match="does not verify"):
        forged_version.check(pinned)
    # an older version, validly signed: refused (monotonic, unlike nd7)
    pinned3 = c.RecipientSet((old.public, new.public), 3)
    with pytest.raises(VaultCryptoError, match="older"):
        c.SignedRecipientSet.sign(grown, old).check(pinned3)


# -- request signing -------------------------------------------------------------------

def test_signed_bytes_layout() -> None:
    assert c.signed_bytes("post", "/v1/chains/a~b/frames", "m1", 1700000000, "ab" * 32) == (
        b"POST\n/v1/chains/a~b/frames\nm1\n1700000000\n" + b"ab" * 32)
    assert c.body_hash(b"") == blake3.blake3(b"").hexdigest()
    with pytest.raises(VaultProtocolError):
        c.signed_bytes("GET", "/x\n", "m", 1, "00")


def test_request_signature_covers_every_field() -> None:
    key = c.MachineKey.from_seed(SEED)
    now = 1_700_000_000
    body = b'{"a":1}'
    h = c.request_headers(key, "m1", "POST", "/v1/chains/a~b/frames", body, now, admin=False)
    assert h[c.HEADER_MACHINE] == "m1" and h[c.HEADER_TIMESTAMP] == str(now) and h[c.HEADER_BODY] == c.body_hash(body)
    c.verify_request(key.public, "POST", "/v1/chains/a~b/frames", "m1", h, body, now)
    lower = {k.lower(): v for k, v in h.items()}
    c.verify_request(key.public, "POST", "/v1/chains/a~b/frames", "m1", lower, body, now)
    changed = [
        dict(method="GET"), dict(path="/v1/chains/a~c/frames"), dict(who="m2"),
        dict(public=c.MachineKey.from_seed(SEED2).public),
    ]
    for change in changed:
        args = dict(public=key.public, method="POST", path="/v1/chains/a~b/frames", who="m1")
        args.update(change)  # type: ignore[arg-type]
        with pytest.raises(VaultAuthError, match="bad signature"):
            c.verify_request(args["public"], args["method"], args["path"], args["who"], h, body, now)  # type: ignore[arg-type]
    # the timestamp header changed (within the skew window)
    with pytest.raises(VaultAuthError, match="bad signature"):
        c.verify_request(key.public, "POST", "/v1/chains/a~b/frames", "m1", {**h, c.HEADER_TIMESTAMP: str(now + 1)}, body, now)
    # the body hash header changed to match another body
    other = b'{"a":2}'
    with pytest.raises(VaultAuthError, match="bad signature"):
        c.verify_request(key.public, "POST", "/v1/chains/a~b/frames", "m1", {**h, c.HEADER_BODY: c.body_hash(other)}, other, now)
    # the body changed alone: signature fine, hash wrong (-> 400 on the vault)
    with pytest.raises(BodyHashError):
        c.verify_request(key.public, "POST", "/v1/chains/a~b/frames", "m1", h, other, now)
    # a flipped signature
    sig = bytearray(p.b64d(h[c.HEADER_SIGNATURE]))
    sig[0] ^= 1
    with pytest.raises(VaultAuthError, match="bad signature"):
        c.verify_request(key.public, "POST", "/v1/chains/a~b/frames", "m1",
                         {**h, c.HEADER_SIGNATURE: p.b64e(bytes(sig))}, body, now)
    with pytest.raises(VaultAuthError, match="missing"):
        c.verify_request(key.public, "POST", "/v1/chains/a~b/frames", "m1",
                         {k: v for k, v in h.items() if k != c.HEADER_SIGNATURE}, body, now)


def test_clock_skew() -> None:
    key = c.AdminKey.from_seed(SEED)
    h = c.request_headers(key, key.fingerprint, "GET", "/v1/admin/events", b"", 1000, admin=True)
    assert h[c.HEADER_ADMIN] == key.fingerprint
    c.verify_request(key.public[32:], "GET", "/v1/admin/events", key.fingerprint, h, b"", 1300)
    with pytest.raises(ClockSkewError) as e:
        c.verify_request(key.public[32:], "GET", "/v1/admin/events", key.fingerprint, h, b"", 1301)
    assert e.value.server_time == 1301
    with pytest.raises(ClockSkewError):
        c.verify_request(key.public[32:], "GET", "/v1/admin/events", key.fingerprint, h, b"", 699)


# -- wraps and batches -----------------------------------------------------------------

def test_wrap_opens_only_for_its_admin() -> None:
    a, b = c.AdminKey.from_seed(SEED), c.AdminKey.from_seed(SEED2)
    ck = c.new_chain_key()
    w = c.wrap_chain_key(ck, a.public)
    assert a.unwrap(w) == ck
    with pytest.raises(VaultCryptoError):
        b.unwrap(w)
    with pytest.raises(VaultCryptoError):
        a.unwrap("not base64!")


def test_batch_aad_layout() -> None:
    assert c.batch_aad("m1", "claude_code~s1", "laptop", 5, 9) == b"m1\nclaude_code~s1\nlaptop\n5\n9"


def test_batch_refuses_any_change() -> None:
    ck = c.new_chain_key()
    frames = b'{"v":1}\n' * 100
    fields = ("m1", "claude_code~s1", "laptop", 0, 99)
    aad = c.batch_aad(*fields)
    nonce, ct = c.seal_batch(ck, frames, aad)
    assert len(nonce) == 24 and frames not in ct
    assert c.open_batch(ck, nonce, ct, aad) == frames
    with pytest.raises(VaultCryptoError):
        c.open_batch(c.new_chain_key(), nonce, ct, aad)
    for i in range(len(fields)):
        moved = list(fields)
        moved[i] = moved[i] + 1 if isinstance(moved[i], int) else moved[i] + "x"  # type: ignore[operator]
        with pytest.raises(VaultCryptoError):
            c.open_batch(ck, nonce, ct, c.batch_aad(*moved))  # type: ignore[arg-type]
    flipped = bytearray(ct)
    flipped[len(ct) // 2] ^= 1
    with pytest.raises(VaultCryptoError):
        c.open_batch(ck, nonce, bytes(flipped), aad)
    with pytest.raises(VaultCryptoError):
        c.open_batch(ck, bytes([nonce[0] ^ 1]) + nonce[1:], ct, aad)
    n2, _ = c.seal_batch(ck, frames, aad)
    assert n2 != nonce


# -- protocol --------------------------------------------------------------------------

def _log(tmp: Path, n: int, key: str = "s1", start: int = 0) -> tuple[SessionLog, bytes]:
    log = SessionLog(str(tmp), "claude_code", key)
    log.append([json.dumps({"event_id": f"e{i}", "captured_at": 1_000_000 + i, "pad": "x" * (i % 7)}).encode()
                for i in range(start, start + n)])
    return log, Path(log.path).read_bytes()


def test_chain_ids() -> None:
    assert p.chain_id("claude_code", "abc-1") == "claude_code~abc-1"
    assert p.split_chain("claude_code~h-0f") == ("claude_code", "h-0f")
    for bad in ("", "nokey", "~k", "p~", "a/b~c", "p~k\n", "p~" + "k" * 300, "p~k%2f"):
        with pytest.raises(VaultProtocolError):
            p.check_chain(bad)
    assert p.chain_genesis("claude_code~s1") == genesis("claude_code", "s1")
    assert p.chain_path("a~b.c", "head") == "/v1/chains/a~b.c/head"
    assert p.chain_path("a~b", "batches", "m/1") == "/v1/admin/chains/m%2F1/a~b/batches"


def test_index_from_real_frames_and_purged(tmp_path: Path) -> None:
    log, data = _log(tmp_path, 5)
    idx = p.index_entries(data)
    assert [e.seq for e in idx] == [0, 1, 2, 3, 4]
    assert idx[0].prev == genesis("claude_code", "s1") and [e.at for e in idx] == [1_000_000 + i for i in range(5)]
    assert all(idx[i].prev == idx[i - 1].hash for i in range(1, 5))
    assert p.check_linkage(idx, "claude_code~s1", None) is None
    lines = data.splitlines(keepends=True)
    purged = purged_line(idx[2].seq, idx[2].prev, idx[2].hash, [b'{"purge_id":"p1"}'], len(lines[2]))
    assert purged is not None
    idx2 = p.index_entries(b"".join(lines[:2] + [purged] + lines[3:]))
    assert idx2[2].hash == idx[2].hash and idx2[2].at is None and idx2[3] == idx[3]
    tampered = lines[1].replace(b"e1", b"e9")
    with pytest.raises(VaultProtocolError, match="bad_hash"):
        p.index_entries(lines[0] + tampered)
    with pytest.raises(VaultProtocolError, match="torn"):
        p.index_entries(data[:-1])
    assert p.IndexEntry.from_json(json.loads(json.dumps(idx[1].to_json()))) == idx[1]


def test_linkage(tmp_path: Path) -> None:
    _, data = _log(tmp_path, 6)
    idx = p.index_entries(data)
    chain = "claude_code~s1"
    assert p.check_linkage(idx[3:], chain, (2, idx[2].hash)) is None  # from a head
    assert p.check_linkage(idx[3:], chain, None) == 0  # not a start
    assert p.check_linkage(idx[3:], chain, (2, idx[1].hash)) == 3  # head hash differs
    assert p.check_linkage(idx[1:], chain, None) == 0  # gap at the start
    assert p.check_linkage(idx[:2] + idx[3:], chain, None) == 2  # gap in the middle
    broken = idx[:3] + [p.IndexEntry(3, "0" * 64, idx[3].hash, None)] + idx[4:]
    assert p.check_linkage(broken, chain, None) == 3
    assert p.PackedIndex.of(broken).linkage_error() == (3, "frame 3 does not link to the frame before it")
    assert p.PackedIndex.of(idx[2:]).linkage_error() is None
    with pytest.raises(VaultProtocolError):
        p.PackedIndex.of(idx[:2] + idx[3:])  # not dense
    assert p.check_linkage(idx, "claude_code~s2", None) == 0  # another chain: fails at frame 0
    assert p.check_linkage(idx, "codex~s1", None) == 0


def test_split_batches(tmp_path: Path) -> None:
    _, data = _log(tmp_path, 20)
    sizes = [e - s for s, e in p.iter_frames(data)]
    one = p.split_batches(data, limit=len(data))
    assert one == [(0, len(data))]
    limit = sizes[0] * 3 + 5
    batches = p.split_batches(data, limit)
    assert batches[0][0] == 0 and batches[-1][1] == len(data)
    assert all(b[1] == n[0] for b, n in zip(batches, batches[1:]))
    assert all(e - s <= limit for s, e in batches)
    assert all(data[e - 1:e] == b"\n" for _, e in batches)
    # one frame larger than the limit is a batch of its own
    big = p.split_batches(data, limit=10)
    assert len(big) == 20
    assert p.split_batches(b"") == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 50), max_size=40), st.integers(1, 120))
def test_split_batches_property(lengths: list[int], limit: int) -> None:
    data = b"".join(b"x" * (n - 1) + b"\n" for n in lengths)
    batches = p.split_batches(data, limit)
    assert b"".join(data[s:e] for s, e in batches) == data
    for s, e in batches:
        assert e - s <= limit or data[s:e].count(b"\n") == 1
    # greedy: no batch could have taken the next frame
    for (s, e), (s2, e2) in zip(batches, batches[1:]):
        nxt = data.index(b"\n", s2) + 1
        assert nxt - s > limit


def test_url_rule() -> None:
    assert p.check_url("https://vault.example.com/") == "https://vault.example.com"
    for ok in ("http://127.0.0.1:8080", "http://localhost", "http://[::1]:9"):
        assert p.check_url(ok) == ok
    for bad in ("http://vault.example.com", "http://127.0.0.2", "ftp://x", "https://", "vault.example.com",
                "http://localhost.evil.com", "https://u:p@x", "http://127.0.0.1:99999"):
        with pytest.raises(VaultError):
            p.check_url(bad)


def test_frames_request_round_trip_and_checks(tmp_path: Path) -> None:
    _, data = _log(tmp_path, 3)
    idx = p.PackedIndex.of(p.index_entries(data))
    assert idx.entries() == p.index_entries(data)
    assert p.PackedIndex.unpack(0, idx.pack()) == idx and idx.linkage_error() is None
    req = p.FramesRequest(0, 2, idx, b"\0" * 24, b"ct", {"fp": "AAAA"}, genesis("claude_code", "s1"))
    again = p.FramesRequest.from_json(p.loads(p.dumps(req.to_json())))
    assert again == req
    d = req.to_json()
    for change in ({"last_seq": 3}, {"first_seq": 1}, {"nonce": p.b64e(b"1")}, {"index": []}, {"wraps": {"fp": 1}},
                   {"genesis": "XY"}, {"ciphertext": None}, {"index": {**d["index"], "at": [1, 2]}},
                   {"index": {**d["index"], "at": [1, 2, True]}}, {"index": {**d["index"], "prev": "*"}}):
        with pytest.raises(VaultProtocolError):
            p.FramesRequest.from_json({**d, **change})
    with pytest.raises(VaultProtocolError):
        p.loads(b"[1]")
    e = p.EnrollRequest("t.s", b"k" * 32, "host-1")
    assert p.EnrollRequest.from_json(p.loads(p.dumps(e.to_json()))) == e
    with pytest.raises(VaultProtocolError):
        p.EnrollRequest.from_json({**e.to_json(), "public_key": p.b64e(b"k")})


def test_b64() -> None:
    assert p.b64d(p.b64e(b"\xff\x00ab")) == b"\xff\x00ab"
    for bad in ("abc", "ab=c", "a b=", "é"):
        with pytest.raises(VaultProtocolError):
            p.b64d(bad)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["captured_at", "a", '"captured_at":']), c, max_size=3),
    max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["captured_at", "x", "captured_at ", 'q"captured_at":']), _JSON), max_size=5),
       st.binary(max_size=3))
def test_an_index_entry_reads_captured_at_as_a_json_parser_does(members: list[tuple[str, object]], pre: bytes) -> None:
    """The index's ``at`` is read in place when it can be, and always equals what parsing
    the event gives: an integer top-level ``captured_at`` (the last of duplicates), else None."""
    import orjson

    from agentlog.vault.protocol import _captured_at

    body = b"{" + b",".join(orjson.dumps(k) + b":" + json.dumps(v).encode() for k, v in members) + b"}"
    try:
        want = orjson.loads(body).get("captured_at")
    except ValueError:  # an integer past 64 bits
        want = None
    want = want if isinstance(want, int) and not isinstance(want, bool) else None
    assert _captured_at(pre + body + b"}\n", len(pre), len(pre) + len(body)) == want


def _step_by_step(buf: bytes) -> list[object]:
    """What ``scan_index`` must give: each complete line through ``frame_index_at``, up to the
    first that fails (its error, as text)."""
    out: list[object] = []
    pos = 0
    while (nl := buf.find(b"\n", pos)) >= 0:
        try:
            out.append((pos, nl + 1, *p.frame_index_at(buf, pos, nl + 1)))
        except VaultProtocolError as e:
            out.append(str(e))
            break
        pos = nl + 1
    return out


def _scanned(buf: bytes) -> list[object]:
    out: list[object] = []
    try:
        for item in p.scan_index(buf, 0):
            out.append(item)
    except VaultProtocolError as e:
        out.append(str(e))
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 5), st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(
    [b"", b"x", b"0", b"\n", b'"', b"}", b',"hash":"', b'"captured_at":7,', b"{"])), max_size=3), st.integers(0, 40))
def test_scan_index_reads_every_line_as_the_step_by_step_path_does(purge: int, edits: list[tuple[int, bytes]],
                                                                    cut: int) -> None:
    """The one-pattern fast path and the step-by-step check agree on frames, purged frames,
    damaged lines and a torn tail: the same entries, the same first error."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _, data = _log(Path(tmp), 6)
    lines = data.splitlines(keepends=True)
    if purge < len(lines):
        idx = p.index_entries(lines[purge])[0]
        stub = purged_line(idx.seq, idx.prev, idx.hash, [b'{"purge_id":"p1"}'], len(lines[purge]))
        assert stub is not None
        lines[purge] = stub
    buf = b"".join(lines)
    for at, text in edits:
        at %= len(buf) + 1
        buf = buf[:at] + text + buf[at + len(text):]
    buf = buf[: len(buf) - cut]  # a torn tail, or a whole last line gone
    assert _scanned(buf) == _step_by_step(buf)
