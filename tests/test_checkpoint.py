"""Signed notes, checkpoints, cosignatures and the key store (issue 28, part 2).

Known answers come from tests/data/signed_note_vectors.json: the Go
sumdb/note tests, the C2SP spec examples, and a real checkpoint of a staging CT
log cosigned by a live witness (sources, paths and commits are in the file).
"""

from __future__ import annotations

import base64
import json
import pickle
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import VerifyKey

from agentlog.core import AgentlogError
from agentlog.integrity import keys
from agentlog.integrity.checkpoint import (
    Checkpoint,
    CheckpointError,
    CosignatureSigner,
    CosignatureVerifier,
    cosign,
    format_body,
    open_checkpoint,
    parse_body,
    sign_checkpoint,
    verify_cosignature,
)
from agentlog.integrity.note import (
    InvalidSignatureError,
    NoteError,
    Signer,
    UnverifiedNoteError,
    Verifier,
    key_id,
    open_note,
    parse_note,
    sign,
)

VECTORS: dict[str, Any] = json.loads((Path(__file__).parent / "data" / "signed_note_vectors.json").read_text("utf-8"))
GO = VECTORS["go_sumdb_note"]
REAL = VECTORS["real_cosigned_checkpoint"]
DASH = "\u2014"


def _flip_signature_byte(line: str, index: int) -> str:
    """The signature line with one byte of its signature (after the 4-byte key id) changed."""
    prefix, encoded = line.rstrip("\n").rsplit(" ", 1)
    blob = bytearray(base64.b64decode(encoded))
    blob[4 + index] ^= 0x01
    return f"{prefix} {base64.b64encode(bytes(blob)).decode()}\n"


# --- signed notes: the Go known answers ------------------------------------------------------


def test_go_vector_signs_to_the_exact_note() -> None:
    signer = Signer.from_private_key_string(GO["signer_key"])
    assert signer.name == GO["name"] and f"{signer.key_id:08x}" == GO["key_id"]
    assert signer.verifier_key_string() == GO["verifier_key"]
    assert sign(GO["text"], [signer]) == GO["signed_note"]
    assert sign(GO["text"], [signer, signer]) == GO["signed_note"]  # one line per key


def test_go_vector_opens_with_its_verifier() -> None:
    peter = Verifier.from_key_string(GO["verifier_key"])
    opened = open_note(GO["signed_note"], [peter])
    assert opened.text == GO["text"]
    assert [(s.name, s.key_id) for s in opened.verified] == [("PeterNeumann", 0xC74F20A3)]
    assert opened.unverified == ()
    assert open_note(GO["signed_note"].encode("utf-8"), [peter]).text == GO["text"]


def test_unknown_keys_are_reported_not_trusted() -> None:
    peter = Verifier.from_key_string(GO["verifier_key"])
    enoch = Verifier.from_key_string(GO["other_verifier_key"])
    both = GO["signed_note"] + GO["other_signature_line"]
    opened = open_note(both, [peter])
    assert [s.name for s in opened.verified] == ["PeterNeumann"]
    assert [s.name for s in opened.unverified] == ["EnochRoot"]
    assert [s.name for s in open_note(both, [peter, enoch]).verified] == ["PeterNeumann", "EnochRoot"]
    with pytest.raises(UnverifiedNoteError) as caught:
        open_note(both, [])
    assert [s.name for s in caught.value.unverified] == ["PeterNeumann", "EnochRoot"]
    # the same line twice is reported once
    twice = GO["signed_note"] + GO["signature_line"] + GO["other_signature_line"] * 2
    opened = open_note(twice, [peter])
    assert len(opened.verified) == 1 and len(opened.unverified) == 1


def test_tampered_text_or_signature_fails() -> None:
    peter = Verifier.from_key_string(GO["verifier_key"])
    text, line = GO["text"], GO["signature_line"]
    with pytest.raises(InvalidSignatureError, match="PeterNeumann\\+c74f20a3"):
        open_note(text.replace("problem,", "problem;") + "\n" + line, [peter])
    with pytest.raises(InvalidSignatureError):
        open_note(text + "\n" + _flip_signature_byte(line, 10), [peter])
    # a bad line from a known key rejects the note even beside a good one
    with pytest.raises(InvalidSignatureError):
        open_note(GO["signed_note"] + _flip_signature_byte(line, 63), [peter])


def test_changed_key_id_or_name_makes_the_line_unknown() -> None:
    peter = Verifier.from_key_string(GO["verifier_key"])
    prefix, encoded = GO["signature_line"].rstrip("\n").rsplit(" ", 1)
    blob = bytearray(base64.b64decode(encoded))
    blob[0] ^= 0x80
    other_id = f"{prefix} {base64.b64encode(bytes(blob)).decode()}\n"
    for line in (other_id, GO["signature_line"].replace("PeterNeumann", "CarmenSandiego")):
        with pytest.raises(UnverifiedNoteError) as caught:
            open_note(GO["text"] + "\n" + line, [peter])
        assert len(caught.value.unverified) == 1


def test_c2sp_spec_example_verifies() -> None:
    example = VECTORS["c2sp_signed_note_example"]
    verifier = Verifier.from_key_string(example["verifier_key"])
    assert open_note(example["note"], [verifier]).text == "This is an example message.\n"
    assert verifier.key_string() == example["verifier_key"]


def _malformed_notes() -> list[str | bytes]:
    text, line = GO["text"], GO["signature_line"]
    return [
        text,  # no signatures
        text + "\n",  # blank line, then nothing
        text + "\n" + line[:-1],  # last line without its newline
        "\x01" + text + "\n" + line,  # control character
        b"\xff" + (text + "\n" + line).encode(),  # not UTF-8
        "\ud800" + text + "\n" + line,  # a lone surrogate cannot be UTF-8
        text + "\n" + line.replace("PeterNeumann", "Bad Name"),  # space in the name
        text + "\n" + line.replace("PeterNeumann", "Peter+Neumann"),  # plus in the name
        text + "\n" + line + "Unexpected line.\n",
        text + "\n" + line.replace(DASH, "-"),  # hyphen, not the em dash
        text + "\n" + line.replace("JnAM=", "JnAN="),  # non-canonical base64 (stray low bits)
        text + "\n" + f"{DASH} PeterNeumann AAAA\n",  # too short to hold an id and a signature
        text + "\n" + line * 101,  # more than 100 signatures
        text.rstrip("\n") + "\n" + line,  # text run into the signatures: no blank line
    ]


@pytest.mark.parametrize("note", _malformed_notes())
def test_malformed_notes_are_rejected(note: str | bytes) -> None:
    peter = Verifier.from_key_string(GO["verifier_key"])
    with pytest.raises(NoteError):
        open_note(note, [peter])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300)))
def test_open_never_raises_anything_but_note_error(note: str | bytes) -> None:
    peter = Verifier.from_key_string(GO["verifier_key"])
    for candidate in (note, GO["signed_note"][:60] + (note if isinstance(note, str) else "")):
        try:
            open_note(candidate, [peter])
        except NoteError:
            pass


def test_note_error_is_an_agentlog_error() -> None:
    assert issubclass(NoteError, AgentlogError) and issubclass(CheckpointError, NoteError)


def test_signing_refuses_a_text_that_would_not_open() -> None:
    signer = Signer.from_private_key_string(GO["signer_key"])
    for text in ("abc", "line\x07\n", ""):
        with pytest.raises(NoteError):
            sign(text, [signer])
    with pytest.raises(NoteError):
        sign(GO["text"], [])
    for name in ("bad name", "bad+name", "", "\ud800", "tab\tname"):
        with pytest.raises(NoteError):
            Signer(name, bytes(32))
        with pytest.raises(NoteError):
            Verifier.from_key_string(f"{name}+00000000+{base64.b64encode(bytes(33)).decode()}")


def _manglings(key: str) -> list[str]:
    """Every proper substring of ``key`` and every one-character change of it."""
    out = {key[i:j] for i in range(len(key) + 1) for j in range(i + 1, len(key) + 1)} - {key}
    out |= {key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :] for i in range(len(key))}
    return sorted(out)


def test_mangled_key_strings_are_refused() -> None:
    for bad in _manglings(GO["verifier_key"]) + list(GO["bad_verifier_keys"].values()):
        with pytest.raises(NoteError):
            Verifier.from_key_string(bad)
    for bad in _manglings(GO["signer_key"]):
        with pytest.raises(NoteError) as caught:
            Signer.from_private_key_string(bad)
        assert "AYEKFALV" not in str(caught.value)  # an error never quotes the secret


def test_signer_repr_and_pickle_keep_the_seed() -> None:
    signer = Signer.from_private_key_string(GO["signer_key"])
    secret = GO["signer_key"].split("+", 4)[4]
    seed = base64.b64decode(secret)[1:]
    for shown in (repr(signer), str(signer), f"{signer!r}"):
        assert secret not in shown and "PRIVATE" not in shown and seed.hex() not in shown
    assert "PeterNeumann" in repr(signer) and "c74f20a3" in repr(signer)
    with pytest.raises(TypeError):
        pickle.dumps(signer)


# --- checkpoints -----------------------------------------------------------------------------

origins = st.text(st.characters(min_codepoint=0x20, exclude_categories=["Cs"]), min_size=1, max_size=40)
extension_lines = st.lists(origins, max_size=3).map(tuple)
checkpoints = st.builds(
    Checkpoint, origins, st.integers(0, 2**64 - 1), st.binary(min_size=32, max_size=32), extension_lines
)


@given(checkpoints)
def test_checkpoint_body_round_trips(cp: Checkpoint) -> None:
    body = format_body(cp)
    assert body.endswith("\n") and body.count("\n") == 3 + len(cp.extensions)
    assert parse_body(body) == cp
    assert format_body(parse_body(body)) == body


@settings(max_examples=25, deadline=None)
@given(checkpoints)
def test_signed_checkpoint_round_trips(cp: Checkpoint) -> None:
    signer = Signer("example.com/log", bytes(range(32)))
    assert open_checkpoint(sign_checkpoint(cp, signer), signer.verifier()) == cp


def test_spec_example_body_parses() -> None:
    example = VECTORS["c2sp_checkpoint_example"]
    cp = parse_body(example["body"])
    assert (cp.origin, cp.size, cp.extensions) == (example["origin"], example["size"], ())
    assert cp.root == base64.b64decode(example["root_base64"])
    assert format_body(cp) == example["body"]


ROOT = base64.b64encode(bytes(32)).decode()


@pytest.mark.parametrize(
    "body",
    [
        f"log\n01\n{ROOT}\n",  # leading zero
        f"log\n00\n{ROOT}\n",
        f"log\n-1\n{ROOT}\n",
        f"log\n+1\n{ROOT}\n",
        f"log\n 1\n{ROOT}\n",
        f"log\n1 \n{ROOT}\n",
        f"log\n\u0661\n{ROOT}\n",  # a non-ASCII digit
        f"log\n{2**64}\n{ROOT}\n",  # does not fit uint64
        f"log\n\n{ROOT}\n",
        f"log\n1\n{base64.b64encode(bytes(31)).decode()}\n",
        f"log\n1\n{base64.b64encode(bytes(33)).decode()}\n",
        f"log\n1\n{ROOT[:-2]}B=\n",  # non-canonical base64
        f"log\n1\n{ROOT.rstrip('=')}\n",  # padding missing
        f"log\n1\n{ROOT}",  # no final newline
        "log\n1\n",  # two lines
        f"\n1\n{ROOT}\n",  # empty origin
        f"log\n1\n{ROOT}\n\n",  # empty extension line
        f"log\r\n1\n{ROOT}\n",  # control character
    ],
)
def test_strict_parse_rejections(body: str) -> None:
    with pytest.raises(CheckpointError):
        parse_body(body)


def test_largest_size_is_accepted() -> None:
    assert parse_body(f"log\n{2**64 - 1}\n{ROOT}\n").size == 2**64 - 1
    assert parse_body(f"log\n0\n{ROOT}\n").size == 0


@pytest.mark.parametrize(
    "fields", [("", 1, bytes(32)), ("a\nb", 1, bytes(32)), ("log", -1, bytes(32)), ("log", 2**64, bytes(32)),
               ("log", True, bytes(32)), ("log", 1, bytes(31)), ("log", 1, bytes(32), ("",))],
)
def test_checkpoint_refuses_bad_fields(fields: tuple[Any, ...]) -> None:
    with pytest.raises(CheckpointError):
        Checkpoint(*fields)


def test_open_checkpoint_checks_origin_and_key() -> None:
    signer = Signer("example.com/log", bytes(range(32)))
    other = Signer("example.com/log", bytes(32))
    note = sign_checkpoint(Checkpoint("example.com/log", 5, bytes(32)), signer)
    assert open_checkpoint(note, signer.verifier(), origin="example.com/log").size == 5
    with pytest.raises(CheckpointError):
        open_checkpoint(note, signer.verifier(), origin="example.com/other")
    with pytest.raises(UnverifiedNoteError):
        open_checkpoint(note, other.verifier())
    not_a_checkpoint = sign("hello\n", [signer])
    with pytest.raises(CheckpointError):
        open_checkpoint(not_a_checkpoint, [signer.verifier()])


# --- cosignatures ----------------------------------------------------------------------------


def test_real_witness_cosignature_verifies() -> None:
    log = Verifier.from_key_string(REAL["log_verifier_key"])
    witness = CosignatureVerifier.from_key_string(REAL["witness_verifier_key"])
    cp = open_checkpoint(REAL["note"], log, origin=REAL["origin"])
    assert (cp.size, cp.root) == (REAL["size"], base64.b64decode(REAL["root_base64"]))
    cosig = verify_cosignature(REAL["note"], witness)
    assert (cosig.name, cosig.time) == ("remora.n621.de", REAL["witness_time"])
    opened = open_note(REAL["note"], [log, witness])
    assert [s.name for s in opened.verified] == [REAL["origin"], "remora.n621.de"]
    assert len(opened.unverified) == 4  # the RFC 6962 signature and three other witnesses


def test_real_cosignature_fails_on_a_changed_checkpoint() -> None:
    witness = CosignatureVerifier.from_key_string(REAL["witness_verifier_key"])
    clobbered = REAL["note"].replace(f"\n{REAL['size']}\n", "\n42\n", 1)
    with pytest.raises(CheckpointError, match="invalid cosignature"):
        verify_cosignature(clobbered, witness)
    with pytest.raises(InvalidSignatureError):
        open_checkpoint(clobbered, Verifier.from_key_string(REAL["log_verifier_key"]))


def _log_and_witness() -> tuple[Signer, CosignatureSigner, str]:
    log = Signer("example.com/log", bytes(range(32)))
    witness = CosignatureSigner("witness.example/w1", bytes(range(1, 33)))
    cp = Checkpoint("example.com/log", 20852163, bytes(range(32)), ("ext one",))
    return log, witness, sign_checkpoint(cp, log)


def test_cosign_appends_a_line_in_the_spec_format() -> None:
    log, witness, note = _log_and_witness()
    cosigned = cosign(note, witness, 1679315147)
    assert cosigned.startswith(note) and cosigned.count("\n") == note.count("\n") + 1
    text, signatures = parse_note(cosigned)
    line = signatures[-1]
    assert line.key_id == key_id("witness.example/w1", 0x04, witness.public_key)
    assert line.key_id != key_id("witness.example/w1", 0x01, witness.public_key)
    assert len(line.signature) == 72 and int.from_bytes(line.signature[:8], "big") == 1679315147
    message = b"cosignature/v1\ntime 1679315147\n" + text.encode()
    VerifyKey(witness.public_key).verify(message, line.signature[8:])  # the spec's message, checked by libsodium
    assert verify_cosignature(cosigned, witness.verifier()).time == 1679315147
    assert open_checkpoint(cosigned, log.verifier()).extensions == ("ext one",)
    vkey = witness.verifier().key_string()
    assert vkey.startswith(f"witness.example/w1+{line.key_id:08x}+")
    assert base64.b64decode(vkey.split("+", 2)[2]) == b"\x04" + witness.public_key
    assert CosignatureVerifier.from_key_string(vkey) == witness.verifier()


def test_cosignature_tampering_fails() -> None:
    _, witness, note = _log_and_witness()
    cosigned = cosign(note, witness, 1679315147)
    prefix, encoded = cosigned.rstrip("\n").rsplit(" ", 1)
    blob = bytearray(base64.b64decode(encoded))
    blob[11] ^= 0x01  # the time's last byte
    retimed = f"{prefix} {base64.b64encode(bytes(blob)).decode()}\n"
    for bad in (retimed, cosigned.replace("ext one", "ext two"), cosigned.replace("20852163", "20852164")):
        with pytest.raises(CheckpointError):
            verify_cosignature(bad, witness.verifier())
    stranger = CosignatureSigner("witness.example/w2", bytes(32))
    with pytest.raises(CheckpointError, match="no cosignature"):
        verify_cosignature(cosigned, stranger.verifier())
    with pytest.raises(CheckpointError, match="dated after"):
        verify_cosignature(cosigned, witness.verifier(), not_after=1679315146)


def test_cosign_replaces_its_own_earlier_line_and_checks_inputs() -> None:
    log, witness, note = _log_and_witness()
    again = cosign(cosign(note, witness, 100), witness, 200)
    assert again.count(DASH) == 2 and verify_cosignature(again, witness.verifier()).time == 200
    for bad_time in (-1, 2**63, True):
        with pytest.raises(CheckpointError):
            cosign(note, witness, bad_time)
    with pytest.raises(CheckpointError):
        cosign(note, log, 1)  # type: ignore[arg-type]
    with pytest.raises(CheckpointError):
        cosign(sign("not\na checkpoint\n", [log]), witness, 1)
    with pytest.raises(NoteError):
        sign("x\n", [witness])  # type: ignore[list-item]
    with pytest.raises(NoteError):
        CosignatureVerifier.from_key_string(log.verifier_key_string())  # a 0x01 key is not a witness key


# --- keys on disk ----------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_signer_is_made_once_private(tmp_path: Path) -> None:
    signer = keys.load_or_create_signer(tmp_path, "example.com/log")
    key_file = tmp_path / "keys" / "example.com%2Flog.key"
    assert _mode(tmp_path / "keys") == 0o700 and _mode(key_file) == 0o600
    assert key_file.read_text().startswith("PRIVATE+KEY+example.com/log+")
    again = keys.load_or_create_signer(tmp_path, "example.com/log")
    assert again.public_key == signer.public_key
    assert keys.verifier_key_string(tmp_path, "example.com/log") == signer.verifier_key_string()
    assert [p.name for p in (tmp_path / "keys").iterdir()] == ["example.com%2Flog.key"]  # no temp file left


def test_missing_key_is_not_made_by_readers(tmp_path: Path) -> None:
    with pytest.raises(keys.KeyStoreError, match="no signer key"):
        keys.verifier_key_string(tmp_path, "log")
    assert keys.verifier_key_string(tmp_path, "log", create=True).startswith("log+")


def test_readable_key_file_is_refused(tmp_path: Path) -> None:
    keys.load_or_create_signer(tmp_path, "log")
    key_file = tmp_path / "keys" / "log.key"
    for mode in (0o644, 0o640, 0o604, 0o620):
        key_file.chmod(mode)
        with pytest.raises(keys.KeyStoreError, match="chmod 600") as caught:
            keys.load_or_create_signer(tmp_path, "log")
        assert "PRIVATE" not in str(caught.value)
    key_file.chmod(0o600)
    keys.load_or_create_signer(tmp_path, "log")
    (tmp_path / "keys").chmod(0o755)
    with pytest.raises(keys.KeyStoreError, match="chmod 700"):
        keys.load_signer(tmp_path, "log")


def test_symlinked_key_file_is_refused(tmp_path: Path) -> None:
    signer = keys.load_or_create_signer(tmp_path, "log")
    elsewhere = tmp_path / "elsewhere.key"
    elsewhere.write_text(signer.private_key_string() + "\n")
    elsewhere.chmod(0o600)
    key_file = tmp_path / "keys" / "log.key"
    key_file.unlink()
    key_file.symlink_to(elsewhere)
    with pytest.raises(keys.KeyStoreError, match="symbolic link"):
        keys.load_or_create_signer(tmp_path, "log")


def test_corrupt_key_file_error_shows_no_secret(tmp_path: Path) -> None:
    signer = keys.load_or_create_signer(tmp_path, "log")
    key_file = tmp_path / "keys" / "log.key"
    secret = signer.private_key_string()
    wrong_id = secret.replace(f"+{signer.key_id:08x}+", "+00000000+")
    key_file.write_text(wrong_id + "\n")
    with pytest.raises(keys.KeyStoreError) as caught:
        keys.load_signer(tmp_path, "log")
    assert secret.split("+", 4)[4] not in str(caught.value)
    key_file.write_text(keys.load_or_create_signer(tmp_path / "b", "other").private_key_string())
    with pytest.raises(keys.KeyStoreError, match="not 'log'"):
        keys.load_signer(tmp_path, "log")


def test_rotate_keeps_old_checkpoints_verifiable(tmp_path: Path) -> None:
    old = keys.load_or_create_signer(tmp_path, "example.com/log")
    old_note = sign_checkpoint(Checkpoint("example.com/log", 3, bytes(32)), old)
    rotation = keys.rotate(tmp_path, "example.com/log")
    new = keys.load_signer(tmp_path, "example.com/log")
    assert new.public_key == rotation.signer.public_key != old.public_key
    assert rotation.retired == old.verifier()
    new_note = sign_checkpoint(Checkpoint("example.com/log", 4, bytes(32)), new)
    trusted = keys.verifiers(tmp_path, "example.com/log")
    assert trusted[0] == new.verifier()
    assert open_checkpoint(old_note, trusted).size == 3 and open_checkpoint(new_note, trusted).size == 4
    with pytest.raises(UnverifiedNoteError):
        open_checkpoint(old_note, new.verifier())
    kept = Path(rotation.retired_key_file)
    assert kept.parent == tmp_path / "keys" / "retired" and _mode(kept) == 0o600 and _mode(kept.parent) == 0o700
    assert Signer.from_private_key_string(kept.read_text().strip()).public_key == old.public_key
    keys.rotate(tmp_path, "example.com/log")
    assert [v.public_key for v in keys.retired_verifiers(tmp_path, "example.com/log")] == [
        old.public_key, new.public_key,
    ]
    assert open_checkpoint(old_note, keys.verifiers(tmp_path, "example.com/log")).size == 3


def test_rotate_needs_a_key(tmp_path: Path) -> None:
    with pytest.raises(keys.KeyStoreError):
        keys.rotate(tmp_path, "log")


def test_witness_registry(tmp_path: Path) -> None:
    assert keys.witnesses(tmp_path) == []
    real = REAL["witness_verifier_key"]
    added = keys.add_witness(tmp_path, "remora.n621.de", real)
    assert keys.witnesses(tmp_path) == [added]
    assert keys.add_witness(tmp_path, "remora.n621.de", real) == added  # again: no change
    mine = CosignatureSigner.generate("witness.example/w1")
    key_file = tmp_path / "w1.vkey"
    key_file.write_text(mine.verifier().key_string() + "\n")
    keys.add_witness(tmp_path, "witness.example/w1", str(key_file))
    assert [w.name for w in keys.witnesses(tmp_path)] == ["remora.n621.de", "witness.example/w1"]
    assert _mode(tmp_path / "keys" / "witnesses") == 0o600
    verify_cosignature(REAL["note"], keys.witnesses(tmp_path)[0])

    with pytest.raises(keys.KeyStoreError, match="not 'someone'"):
        keys.add_witness(tmp_path, "someone", real)
    with pytest.raises(keys.KeyStoreError):
        keys.add_witness(tmp_path, "log", Signer.generate("log").verifier_key_string())  # type 0x01
    with pytest.raises(keys.KeyStoreError):
        keys.add_witness(tmp_path, "x", str(tmp_path / "missing"))
    replacement = CosignatureSigner.generate("witness.example/w1").verifier()
    with pytest.raises(keys.KeyStoreError, match="another key"):
        keys.add_witness(tmp_path, "witness.example/w1", replacement.key_string())
    keys.add_witness(tmp_path, "witness.example/w1", Path(key_file), replace=True)  # same key: no-op
    keys.add_witness(tmp_path, "witness.example/w1", replacement.key_string(), replace=True)
    assert keys.witnesses(tmp_path)[-1] == replacement and len(keys.witnesses(tmp_path)) == 2


def test_witness_list_writable_by_others_is_refused(tmp_path: Path) -> None:
    keys.add_witness(tmp_path, "remora.n621.de", REAL["witness_verifier_key"])
    (tmp_path / "keys" / "witnesses").chmod(0o622)
    with pytest.raises(keys.KeyStoreError, match="writable"):
        keys.witnesses(tmp_path)
