#!/usr/bin/env python3
"""Check an agentlog proof bundle without agentlog: Python's standard library and PyNaCl only.

    python verify_bundle.py BUNDLE.json [--key KEYSTRING] [--witness KEYSTRING]... [--require-witness]
    python verify_bundle.py SHARED.html|SHARED.md [--key KEYSTRING] ...   (a file `agentlog share` made)

Prints one line per entry and a summary; exits 0 when everything verifies, 1 when anything does
not (or the file is not a bundle), 2 on a usage error. ``--key`` is the log's verifier key as you
know it from elsewhere (C2SP form ``<name>+<key id>+<base64>``); without it the bundle's own key
is used, which proves only that the bundle is consistent with itself. ``--witness`` is a
witness's verifier key you trust (repeatable): one of them must have cosigned the bundle's
witnessed checkpoint; without it the bundle's own witness keys are used, and the output says so.

What is checked (docs/proofs.md in agentlog): the checkpoint is a C2SP signed note whose
signature by the key verifies (Ed25519; the key id is the first 4 bytes of SHA-256(name ‖ 0x0A ‖
0x01 ‖ public key)), its origin is the bundle's and the key's name; each frame line hashes to its
frame_hash (SHA-256 of the line up to ``,"hash":"``) and holds its seq; each leaf,
SHA-256(0x00 ‖ "agentlog/frame/v1\\n" log "\\n" seq "\\n" frame_hash "\\n"), is proven at its index
of the checkpoint's tree by RFC 9162 §2.1.3.2. A consistency bundle's proof is checked by RFC 9162
§2.1.4.2. A bundle's ``witnessed`` checkpoint must be signed by the same key, carry a valid C2SP
tlog-cosignature (type 0x04: Ed25519 over "cosignature/v1\\ntime <t>\\n" and the checkpoint text,
the key id from 0x04) by each witness it lists, or by one of the --witness keys, and the
bundle's checkpoint must extend it by its consistency proof (RFC 9162 §2.1.4.2). This file is
agentlog's own, printed by ``agentlog verify-proof --print-script``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import sys
from typing import Any

from nacl.exceptions import BadSignatureError, CryptoError
from nacl.signing import VerifyKey

HEX64 = re.compile(r"[0-9a-f]{64}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
NOTE_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")
DECIMAL = re.compile(r"0|[1-9][0-9]*")
KEY_ID = re.compile(r"[0-9a-f]{8}")
FRAME_HEAD = re.compile(rb'\{"v":1,"prev":"[0-9a-f]{64}","seq":(0|[1-9][0-9]{0,18}),"event":')
TRAILER = len(b',"hash":"') + 64 + 2
MAX_SEQ, MAX_SIZE = 2**63 - 1, 2**64 - 1
LOG_KEY, WITNESS_KEY = 0x01, 0x04
NO_WITNESS = "no witness: the bundle carries no witnessed checkpoint"


class Malformed(Exception):
    """Not a bundle (the message says where and why)."""


class Failed(Exception):
    """The bundle's key or checkpoint does not verify."""


# -- RFC 9162 §2.1 ----------------------------------------------------------------------------

def node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes) -> bool:
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node(p, r)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(m: int, n: int, old: bytes, new: bytes, proof: list[bytes]) -> bool:
    if m > n:
        return False
    if m == n:
        return not proof and old == new and (m > 0 or old == hashlib.sha256(b"").digest())
    if m == 0:
        return not proof and old == hashlib.sha256(b"").digest()
    if not proof:
        return False
    path = [old, *proof] if m & (m - 1) == 0 else list(proof)
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node(c, fr), node(c, sr)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == old and sr == new and sn == 0


# -- C2SP signed notes and checkpoints --------------------------------------------------------

def b64(text: str, what: str, error: type[Exception] = Failed) -> bytes:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise error(f"{what} is not valid base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise error(f"{what} is not canonical base64")
    return raw


def valid_name(name: str) -> bool:
    return bool(name) and "+" not in name and not any(c.isspace() for c in name) and not NOTE_CONTROL.search(name)


def key_id(name: str, public: bytes, alg: int = LOG_KEY) -> int:
    return int.from_bytes(hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([alg]) + public).digest()[:4], "big")


def parse_key(text: str, error: type[Exception], alg: int = LOG_KEY) -> tuple[str, int, bytes]:
    """(name, key id, Ed25519 public key) of a C2SP verifier key string of signature type
    ``alg`` (0x01 a log's key, 0x04 a witness's), its key id checked."""
    parts = text.split("+", 2)
    if len(parts) != 3 or not valid_name(parts[0]) or not KEY_ID.fullmatch(parts[1]):
        raise error("malformed verifier key: want <name>+<8 hex key id>+<base64 key>")
    raw = b64(parts[2], "verifier key material", error)
    if len(raw) != 33 or raw[0] != alg:
        raise error(f"verifier key: not an Ed25519 key of type 0x{alg:02x} (32 bytes)")
    if key_id(parts[0], raw[1:], alg) != int(parts[1], 16):
        raise error(f"verifier key: key id {parts[1]} does not match the name and key")
    return parts[0], int(parts[1], 16), raw[1:]


def open_note(note: str, key: tuple[str, int, bytes], what: str = "checkpoint") -> str:
    """The text of the signed note ``note`` once the key's signature on it verifies."""
    name, kid, public = key
    if NOTE_CONTROL.search(note):
        raise Failed(f"{what}: malformed note: control character")
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise Failed(f"{what}: malformed note: no signature block")
    text, lines = note[: split + 1], note[split + 2: -1].split("\n")
    if len(lines) > 100:
        raise Failed(f"{what}: malformed note: more than 100 signatures")
    found = False
    for line in lines:
        signer, sep, blob_text = line[2:].partition(" ") if line.startswith("\u2014 ") else ("", "", "")
        if not sep or not valid_name(signer):
            raise Failed(f"{what}: malformed note: bad signature line")
        blob = b64(blob_text, f"{what}: signature")
        if len(blob) < 5:
            raise Failed(f"{what}: malformed note: signature too short")
        if (signer, int.from_bytes(blob[:4], "big")) != (name, kid):
            continue  # another key's line (a witness's cosignature): not ours to check
        try:
            if len(blob) != 68:
                raise BadSignatureError("length")
            VerifyKey(public).verify(text.encode("utf-8"), blob[4:])
        except (BadSignatureError, CryptoError, ValueError, TypeError):
            raise Failed(f"{what}: invalid signature for key {name}+{kid:08x}") from None
        found = True
    if not found:
        raise Failed(f"{what}: note has no verifiable signatures")
    return text


def open_checkpoint(note: str, key: tuple[str, int, bytes], origin: str) -> tuple[int, bytes]:
    """(size, root) of the checkpoint ``note`` once the key's signature on it verifies."""
    text = open_note(note, key)
    body = text[:-1].split("\n")
    if len(body) < 3 or not DECIMAL.fullmatch(body[1]) or int(body[1]) > MAX_SIZE or any(not x for x in body):
        raise Failed("checkpoint: malformed checkpoint body")
    root = b64(body[2], "checkpoint: root")
    if len(root) != 32:
        raise Failed("checkpoint: the root is not 32 bytes")
    if body[0] != origin:
        raise Failed(f"checkpoint: checkpoint is for {body[0]!r}, not {origin!r}")
    return int(body[1]), root


def cosignature(note: str, witness: tuple[str, int, bytes]) -> int:
    """The time of the witness's cosignature on the checkpoint ``note`` (already opened with the
    log's key, so well-formed): every line by the witness must verify, and there must be one."""
    name, kid, public = witness
    split = note.rfind("\n\n")
    text, found = note[: split + 1], None
    for line in note[split + 2: -1].split("\n"):
        signer, _sep, blob_text = line[2:].partition(" ")
        blob = b64(blob_text, "checkpoint: signature")
        if (signer, int.from_bytes(blob[:4], "big")) != (name, kid):
            continue
        when = int.from_bytes(blob[4:12], "big")  # 8 bytes of time, then the Ed25519 signature
        try:
            if len(blob) != 4 + 8 + 64 or when > MAX_SEQ:
                raise BadSignatureError("length or time")
            VerifyKey(public).verify(f"cosignature/v1\ntime {when}\n{text}".encode("utf-8"), blob[12:])
        except (BadSignatureError, CryptoError, ValueError, TypeError):
            raise Failed(f"witnessed checkpoint: invalid cosignature by {name}+{kid:08x}") from None
        found = when if found is None else max(found, when)
    if found is None:
        raise Failed(f"witnessed checkpoint: no cosignature by {name}+{kid:08x}")
    return found


def has_line(note: str, witness: tuple[str, int, bytes]) -> bool:
    """Whether the (well-formed) note has a signature line by the witness's name and key id."""
    for line in note[note.rfind("\n\n") + 2: -1].split("\n"):
        signer, _sep, blob_text = line[2:].partition(" ")
        if (signer, int.from_bytes(b64(blob_text, "checkpoint: signature")[:4], "big")) == witness[:2]:
            return True
    return False


# -- the bundle -------------------------------------------------------------------------------

def obj(value: Any, where: str, keys: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Malformed(f"{where} is not an object")
    if set(value) != keys:
        raise Malformed(f"{where} does not have exactly the fields {', '.join(sorted(keys))}")
    return value


def text(value: Any, where: str, line: bool = True) -> str:
    if not isinstance(value, str) or not value or (line and CONTROL.search(value)) or not utf8(value):
        raise Malformed(f"{where} is not a non-empty {'line' if line else 'string'} of UTF-8 text")
    return value


def utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def count(value: Any, where: str, limit: int = MAX_SEQ) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise Malformed(f"{where} is not a whole number from 0 to {limit}")
    return value


def hashes(value: Any, where: str, limit: int) -> list[bytes]:
    if not isinstance(value, list) or len(value) > limit:
        raise Malformed(f"{where} is not a list of at most {limit} hashes")
    if not all(isinstance(h, str) and HEX64.fullmatch(h) for h in value):
        raise Malformed(f"{where} holds something that is not 64 lowercase hex digits")
    return [bytes.fromhex(h) for h in value]


def header(doc: dict[str, Any], key: str | None) -> tuple[str, tuple[str, int, bytes]]:
    origin = text(doc["origin"], "origin")
    bundled = parse_key(text(doc["key"], "key"), Malformed)
    if key is not None and parse_key(key, Failed) != bundled:
        raise Failed(f"the bundle's key {bundled[0]}+{bundled[1]:08x} is not the given key")
    if bundled[0] != origin:
        raise Failed(f"the key is named {bundled[0]!r}, not the origin {origin!r}")
    return origin, bundled


def check_entry(raw: Any, i: int, size: int, root: bytes) -> tuple[str, str]:
    """(status, line) of one entry: ok, purged or failed."""
    e = obj(raw, f"entries[{i}]", {"log", "seq", "frame_hash", "leaf_index", "inclusion", "frame", "purged"})
    log, seq = text(e["log"], f"entries[{i}].log"), count(e["seq"], f"entries[{i}].seq")
    index, digest = count(e["leaf_index"], f"entries[{i}].leaf_index", MAX_SIZE), e["frame_hash"]
    if "/" not in log or not isinstance(digest, str) or not HEX64.fullmatch(digest):
        raise Malformed(f"entries[{i}] has a bad log id or frame_hash")
    proof = hashes(e["inclusion"], f"entries[{i}].inclusion", 64)
    frame, purged = e["frame"], e["purged"]
    if (frame is None) == (purged is None):
        raise Malformed(f"entries[{i}] must have a frame or purged, one of the two")
    if purged is not None:
        p = obj(purged, f"entries[{i}].purged", {"purge_id", "at"})
        text(p["purge_id"], f"entries[{i}].purged.purge_id")
        if p["at"] is not None:
            text(p["at"], f"entries[{i}].purged.at")
    head = f"{log} seq {seq} (leaf {index}): "
    if frame is not None:
        data = text(frame, f"entries[{i}].frame", line=False).encode("utf-8")
        m = FRAME_HEAD.match(data)
        why = None
        if m is None or len(data) < m.end() + TRAILER:
            why = "the frame is not a frame line"
        elif data[-TRAILER:] != b',"hash":"' + digest.encode("ascii") + b'"}':
            why = "the frame does not end in its frame_hash"
        elif hashlib.sha256(data[:-TRAILER]).hexdigest() != digest:
            why = "the frame's bytes do not hash to frame_hash"
        elif int(m.group(1)) != seq:
            why = f"the frame is seq {int(m.group(1))}, not {seq}"
        if why:
            return "failed", "FAILED " + head + why
    leaf = hashlib.sha256(b"\x00agentlog/frame/v1\n" + log.encode("utf-8")
                          + f"\n{seq}\n{digest}\n".encode("ascii")).digest()
    if not verify_inclusion(leaf, index, size, proof, root):
        return "failed", f"FAILED {head}the inclusion proof does not verify at leaf {index} of the checkpoint's tree"
    if purged is not None:
        return "purged", f"purged {head}content purged ({purged['purge_id']} at {purged['at'] or 'an unknown time'}), hash proven"
    return "ok", f"ok     {head}frame and hash proven"


def entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def witnessed_section(raw: Any) -> tuple[str, list[str], list[bytes]]:
    """(cosigned note, witness key strings, consistency proof) of a ``witnessed`` section."""
    w = obj(raw, "witnessed", {"checkpoint", "witnesses", "consistency"})
    note, listed = text(w["checkpoint"], "witnessed.checkpoint", line=False), w["witnesses"]
    if not isinstance(listed, list) or not 1 <= len(listed) <= 100:
        raise Malformed("witnessed.witnesses is not a list of 1 to 100 witness keys")
    keys = [text(k, f"witnessed.witnesses[{i}]") for i, k in enumerate(listed)]
    if len(set(keys)) != len(keys):
        raise Malformed("witnessed.witnesses lists a key twice")
    for k in keys:
        parse_key(k, Malformed, WITNESS_KEY)
    return note, keys, hashes(w["consistency"], "witnessed.consistency", 65)


def check_witnessed(raw: Any, bundled: tuple[str, int, bytes], origin: str, size: int, root: bytes,
                    given: list[str], require: bool) -> str:
    """The line saying what the witnessed section proves; raises Failed when it does not verify."""
    if raw is None:
        if given:
            raise Failed("no witnessed checkpoint in the bundle to check the given witness keys against")
        if require:
            raise Failed("no witnessed checkpoint in the bundle, and one is required (--require-witness)")
        return NO_WITNESS
    note, listed, proof = raw
    try:
        m, old = open_checkpoint(note, bundled, origin)
    except Failed as e:
        raise Failed(f"witnessed {e}") from None
    for k in listed:  # every witness the bundle names must have cosigned
        cosignature(note, parse_key(k, Malformed, WITNESS_KEY))
    counted = listed
    if given:
        counted = []
        for k in given:
            witness = parse_key(k, Failed, WITNESS_KEY)
            if has_line(note, witness):
                cosignature(note, witness)
                counted.append(k)
        if not counted:
            raise Failed("witnessed checkpoint: cosigned by none of the given witness keys")
    if m > size:
        raise Failed(f"the bundle's checkpoint (size {size}) is smaller than the witnessed one (size {m}): "
                     "the log was rolled back after a witness saw it")
    if not verify_consistency(m, size, old, root, proof):
        raise Failed(f"the consistency proof from the witnessed size {m} to size {size} does not verify: "
                     "the bundle's checkpoint does not extend what the witnesses saw")
    names = ", ".join(k.rsplit("+", 1)[0] for k in counted)
    source = "witness keys given" if given else "witness keys taken from the bundle"
    return f"witness: size {m} cosigned by {names} ({source}); size {size} extends it"


def verify(doc: Any, key: str | None = None, witnesses: list[str] | None = None,
           require_witness: bool = False) -> tuple[bool, list[str], list[str]]:
    """(ok, statuses of the entries, lines to print). Raises Malformed for a document that is
    not a bundle, and Failed when its key, checkpoint or witnessed checkpoint does not verify.
    ``witnesses``: witness verifier keys the checker trusts (one must have cosigned)."""
    given = list(dict.fromkeys(k.strip() for k in witnesses or []))
    for k in given:
        parse_key(k, Failed, WITNESS_KEY)
    if isinstance(doc, dict) and doc.get("format") == "agentlog-consistency/v1":
        return verify_consistency_bundle(doc, key, bool(given or require_witness))
    if not isinstance(doc, dict) or doc.get("format") != "agentlog-proof/v1":
        raise Malformed("not an agentlog-proof/v1 bundle")
    obj(doc, "the bundle", {"format", "origin", "key", "checkpoint", "entries"} | ({"witnessed"} & set(doc)))
    note, raw = text(doc["checkpoint"], "checkpoint", line=False), doc["entries"]
    if not isinstance(raw, list) or not raw:
        raise Malformed("entries is not a non-empty list")
    witnessed = witnessed_section(doc["witnessed"]) if "witnessed" in doc else None
    origin, bundled = header(doc, key)
    size, root = open_checkpoint(note, bundled, origin)
    witness_line = check_witnessed(witnessed, bundled, origin, size, root, given, require_witness)
    results = [check_entry(r, i, size, root) for i, r in enumerate(raw)]
    statuses, lines = [s for s, _ in results], [line for _, line in results]
    lines.append(witness_line)
    failed = statuses.count("failed")
    if failed:
        lines.append(f"FAILED: {failed} of {entries(len(raw))} did not verify against {origin} size {size}")
    else:
        lines.append(f"verified: {entries(len(raw))} against {origin} size {size} "
                     f"({len(raw) - statuses.count('purged')} with content, {statuses.count('purged')} purged)")
    return not failed, statuses, lines


def verify_consistency_bundle(doc: dict[str, Any], key: str | None,
                              want_witness: bool = False) -> tuple[bool, list[str], list[str]]:
    obj(doc, "the bundle", {"format", "origin", "key", "old", "new", "proof"})
    sides = []
    for name in ("old", "new"):
        side = obj(doc[name], name, {"size", "root", "checkpoint"})
        if not isinstance(side["root"], str) or not HEX64.fullmatch(side["root"]):
            raise Malformed(f"{name}.root is not 64 lowercase hex digits")
        if side["checkpoint"] is not None:
            text(side["checkpoint"], f"{name}.checkpoint", line=False)
        sides.append((name, count(side["size"], f"{name}.size", MAX_SIZE), bytes.fromhex(side["root"]), side["checkpoint"]))
    proof = hashes(doc["proof"], "proof", 65)
    origin, bundled = header(doc, key)
    if want_witness:
        raise Failed("a consistency bundle carries no witnessed checkpoint (--witness, --require-witness)")
    signed = []
    for name, size, root, note in sides:
        if note is not None:
            try:
                got = open_checkpoint(note, bundled, origin)
            except Failed as e:
                raise Failed(f"{name} {e}") from None
            if got != (size, root):
                raise Failed(f"the {name} checkpoint says size {got[0]}, root {got[1].hex()[:16]}…, not the {name} head")
        signed.append("signed" if note is not None else "unsigned")
    (_, m, old, _), (_, n, new, _) = sides
    if not verify_consistency(m, n, old, new, proof):
        raise Failed(f"the consistency proof does not show that size {n} extends size {m}")
    return True, [], [f"verified: {origin} size {n} ({signed[1]}) extends size {m} ({signed[0]})"]


SHARE_MARK = "agentlog-share-proof"


def verify_share(data: bytes, key: str | None, witnesses: list[str], require_witness: bool) -> tuple[bool, list[str]]:
    """(ok, lines) of a file `agentlog share` made: its frames' hashes in the signed tree, and the
    share statement, signed by the same key, naming the SHA-256 of the file's bytes outside the
    proof block and of the list of frames (docs/share.md in agentlog)."""
    try:
        whole = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("the file is not UTF-8 text") from None
    at = whole.rfind(SHARE_MARK)
    start = whole.find("{", at) if at >= 0 else -1
    if start < 0 or start - at > 200:
        raise Malformed(f"the file has no {SHARE_MARK} block")
    try:
        doc, end = json.JSONDecoder(object_pairs_hook=pairs).raw_decode(whole, start)
    except (ValueError, RecursionError) as e:
        raise Malformed(f"the {SHARE_MARK} block is not JSON ({e})") from None
    digest = hashlib.sha256((whole[:start] + whole[end:]).encode("utf-8")).hexdigest()
    if not isinstance(doc, dict) or doc.get("format") != "agentlog-share/v1":
        raise Malformed("not an agentlog-share/v1 block")
    obj(doc, "the proof block", {"format", "origin", "key", "checkpoint", "entries", "statement"} | ({"witnessed"} & set(doc)))
    note, statement, raw = text(doc["checkpoint"], "checkpoint", line=False), text(doc["statement"], "statement", line=False), doc["entries"]
    if not isinstance(raw, list) or not raw:
        raise Malformed("entries is not a non-empty list")
    witnessed = witnessed_section(doc["witnessed"]) if "witnessed" in doc else None
    given = list(dict.fromkeys(k.strip() for k in witnesses))
    origin, bundled = header(doc, key)
    size, root = open_checkpoint(note, bundled, origin)
    lines = [check_witnessed(witnessed, bundled, origin, size, root, given, require_witness)]
    failed, listed = [], hashlib.sha256()
    for i, r in enumerate(raw):
        entry = obj(r, f"entries[{i}]", {"log", "seq", "frame_hash", "leaf_index", "inclusion"})
        log, seq = text(entry["log"], f"entries[{i}].log"), count(entry["seq"], f"entries[{i}].seq")
        index, h = count(entry["leaf_index"], f"entries[{i}].leaf_index", MAX_SIZE), entry["frame_hash"]
        if not isinstance(h, str) or not HEX64.fullmatch(h):
            raise Malformed(f"entries[{i}].frame_hash is not 64 lowercase hex digits")
        leaf = hashlib.sha256(b"\x00agentlog/frame/v1\n" + log.encode("utf-8") + f"\n{seq}\n{h}\n".encode("ascii")).digest()
        if not verify_inclusion(leaf, index, size, hashes(entry["inclusion"], f"entries[{i}].inclusion", 64), root):
            failed.append(f"FAILED: {log} seq {seq} (leaf {index}): the inclusion proof does not verify")
        listed.update(f"{log} {seq} {h}\n".encode("utf-8"))
    try:
        said = open_note(statement, bundled, "share statement").split("\n")
    except Failed as e:
        said = []
        failed.append(f"FAILED: {e}")
    if said and (len(said) != 5 or said[0] != "agentlog-share/v1" or said[1] != origin):
        failed.append("FAILED: the share statement is not an agentlog-share/v1 statement of this origin")
    elif said and said[3] != listed.hexdigest():
        failed.append("FAILED: the frames listed are not the frames the share statement signs")
    elif said and said[2] != digest:
        failed.append("FAILED: the shown content was edited: its bytes do not hash to the signed digest")
    if failed:
        return False, failed + lines + [f"FAILED: the shared file does not verify against {origin} size {size}"]
    return True, lines + [f"verified: the shared file's content is unedited, signed with {origin}, and its "
                          f"{len(raw)} frames are in the tree of {origin} size {size}"]


def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in items}) != len(items):
        raise Malformed("a key appears twice in one object")
    return dict(items)


def load(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=pairs)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise Malformed(f"not JSON ({e})") from None


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="verify_bundle.py", description="Check an agentlog proof bundle.",
                                     epilog="example: python verify_bundle.py b.json --key 'agentlog.local/…+1a2b3c4d+AU…'")
    parser.add_argument("bundle", help="the bundle (JSON), or - for standard input")
    parser.add_argument("--key", help="the log's verifier key, as known from elsewhere")
    parser.add_argument("--witness", action="append", default=[], metavar="KEY",
                        help="a witness's verifier key you trust (repeatable): one must have cosigned")
    parser.add_argument("--require-witness", action="store_true", help="fail a bundle without a witnessed checkpoint")
    args = parser.parse_args(argv)
    try:
        if args.key is not None:
            what = "--key"
            parse_key(args.key.strip(), Failed)
        for k in args.witness:
            what = "--witness"
            parse_key(k.strip(), Failed, WITNESS_KEY)
    except Failed as e:
        print(f"usage error: {what}: {e}", file=sys.stderr)
        return 2
    try:
        if args.bundle == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.bundle, "rb") as fh:
                data = fh.read()
    except OSError as e:
        print(f"usage error: cannot read {args.bundle}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        if not data.lstrip().startswith(b"{") and SHARE_MARK.encode() in data:  # a file `agentlog share` made
            ok, lines = verify_share(data, None if args.key is None else args.key.strip(), args.witness,
                                     args.require_witness)
        else:
            ok, _statuses, lines = verify(load(data), None if args.key is None else args.key.strip(), args.witness,
                                          args.require_witness)
    except (Malformed, Failed) as e:
        print(f"FAILED: {'not a bundle: ' if isinstance(e, Malformed) else ''}{e}")
        return 1
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
