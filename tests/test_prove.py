"""``agentlog prove`` and ``agentlog verify-proof`` (issue 28): bundles made from a data root that
real hook processes recorded, checked by the library, the CLI and the standalone verifier (run
with ``python -I`` from a fresh venv that has only PyNaCl); every kind of tamper fails; a purge
leaves older bundles valid and newer ones prove the purged frames' hashes without their content."""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlog.integrity.bundle import load_document, verify_bundle, verify_document
from agentlog.integrity.checkpoint import Checkpoint, CosignatureSigner, parse_body, sign_checkpoint
from agentlog.integrity.note import Signer, parse_note
from prove_support import SCRIPT, cli, hook, outcome, standalone, standalone_outcome

CANARY = "CANARY-prove-qzxw"


def _event_ids(root: Path, sid: str) -> list[str]:
    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest

    ingest(str(root))
    with Engine(str(root), projection=False) as e:
        rows = e.run("SELECT event_id FROM events WHERE provider_session_id = ? ORDER BY seq", [sid]).rows
    return [str(r[0]) for r in rows]


@dataclass
class World:
    root: Path
    out: Path
    session: dict[str, Any]
    event: dict[str, Any]
    witnessed: dict[str, Any]
    """A session's bundle made after witness alice cosigned an earlier checkpoint."""
    witness_key: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("prove") / "home"
    out = tmp_path_factory.mktemp("bundles")
    for i in range(4):
        hook(root, "s1", i)
        hook(root, "s2", i)
    hook(root, "s3", 0)
    r = cli("prove", "s1", "--out", str(out / "s1.json"), home=root)
    assert r.returncode == 0, r.stderr
    assert "4 frames (0 purged) proven against checkpoint agentlog.local/" in r.stderr
    ev = _event_ids(root, "s2")[1]
    r = cli("prove", f"ev_{ev}", "--json", home=root)
    assert r.returncode == 0, r.stderr
    event = json.loads(r.stdout)
    witness_key = cli("witness", "keygen", "alice", str(out / "alice.key"), home=root).stdout.strip()
    assert cli("witness", "add", "alice", witness_key, home=root).returncode == 0
    assert cli("checkpoint", "--cosign", "--witness-key", str(out / "alice.key"), home=root).returncode == 0
    hook(root, "s3", 1)
    hook(root, "s3", 2)
    r = cli("prove", "s3", "--json", home=root)
    assert r.returncode == 0 and "which extends the checkpoint of size 9 alice witnessed" in r.stderr, r.stderr
    witnessed = json.loads(r.stdout)
    assert witnessed["witnessed"]["witnesses"] == [witness_key] and "witnessed" not in event
    return World(root, out, json.loads((out / "s1.json").read_text()), event, witnessed, witness_key)


# -- proving and checking -----------------------------------------------------------------------


def test_prove_an_event_and_a_session_then_verify_everywhere(world: World, nacl_python: str) -> None:
    s, e = world.session, world.event
    assert s["format"] == "agentlog-proof/v1" and s["key"].startswith(s["origin"] + "+")
    assert [(x["log"], x["seq"]) for x in s["entries"]] == [("claude_code/s1", i) for i in range(4)]
    assert all(x["frame"] and x["purged"] is None for x in s["entries"])
    assert f"prompt 2 of s1" in s["entries"][2]["frame"]
    assert [(x["log"], x["seq"]) for x in e["entries"]] == [("claude_code/s2", 1)]
    # the checkpoint covers every frame it proves, and each frame's line is the log's
    size = parse_body(parse_note(s["checkpoint"]).text).size
    assert all(x["leaf_index"] < size for x in s["entries"])
    log_lines = (world.root / "logs" / "claude_code" / "s1.jsonl").read_bytes().decode().splitlines()
    assert [x["frame"] for x in s["entries"]] == log_lines

    path = world.out / "s1.json"
    r = cli("verify-proof", str(path), home=world.root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == f"ok     claude_code/s1 seq 0 (leaf {s['entries'][0]['leaf_index']}): frame and hash proven"
    assert r.stdout.splitlines()[-1].startswith("verified: 4 entries against agentlog.local/")
    r = cli("verify-proof", str(path), "--key", s["key"], "--json", home=world.root)
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True and json.loads(r.stdout)["key_given"] is True
    r = cli("verify-proof", "-", home=world.root, stdin=json.dumps(e).encode())
    assert r.returncode == 0 and "verified: 1 entry against" in r.stdout

    sa = standalone(nacl_python, path, "--key", s["key"])
    assert sa.returncode == 0, sa.stdout + sa.stderr
    assert sa.stdout == r_lines(world.root, path)  # the same lines as agentlog's own check


def r_lines(root: Path, path: Path) -> str:
    return cli("verify-proof", str(path), home=root).stdout


def test_a_session_is_named_as_listings_print_it(world: World) -> None:
    from agentlog.query.engine import Engine

    with Engine(str(world.root)) as e:
        (sid,) = e.run("SELECT session_id FROM sessions WHERE provider_session_id = 's2'").rows[0]
    for ident in (f"ses_{sid}", f"ses_{sid[:8]}", "s2", "claude_code/s2"):
        r = cli("prove", ident, home=world.root)
        assert r.returncode == 0, (ident, r.stderr)
        assert [(x["log"], x["seq"]) for x in json.loads(r.stdout)["entries"]] == [("claude_code/s2", i) for i in range(4)]


def _tampers(b: dict[str, Any], other: Signer) -> dict[str, Callable[[dict[str, Any]], None]]:
    def frame_bytes(d: dict[str, Any]) -> None:
        d["entries"][1]["frame"] = d["entries"][1]["frame"].replace("prompt 1", "prompt 9")

    def frame_and_hash(d: dict[str, Any]) -> None:  # a consistent frame with its own new hash
        line = d["entries"][1]["frame"].replace("prompt 1", "prompt 9")
        head = line[: -len(',"hash":"') - 66]
        digest = hashlib.sha256(head.encode()).hexdigest()
        d["entries"][1]["frame"], d["entries"][1]["frame_hash"] = f'{head},"hash":"{digest}"}}', digest

    def frame_hash(d: dict[str, Any]) -> None:
        d["entries"][0]["frame_hash"] = "0" * 64

    def leaf_index(d: dict[str, Any]) -> None:
        d["entries"][2]["leaf_index"] += 1

    def leaf_index_down(d: dict[str, Any]) -> None:
        d["entries"][2]["leaf_index"] -= 1

    def inclusion_element(d: dict[str, Any]) -> None:
        h = d["entries"][3]["inclusion"][0]
        d["entries"][3]["inclusion"][0] = ("1" if h[0] != "1" else "2") + h[1:]

    def inclusion_dropped(d: dict[str, Any]) -> None:
        d["entries"][3]["inclusion"].pop()

    def seq(d: dict[str, Any]) -> None:
        d["entries"][0]["seq"] = 1

    def log(d: dict[str, Any]) -> None:
        d["entries"][0]["log"] = "claude_code/s9"

    def _body(d: dict[str, Any], edit: Callable[[list[str]], None]) -> None:
        text, sigs = d["checkpoint"].split("\n\n", 1)
        lines = text.split("\n")
        edit(lines)
        d["checkpoint"] = "\n".join(lines) + "\n\n" + sigs

    def checkpoint_size(d: dict[str, Any]) -> None:
        _body(d, lambda lines: lines.__setitem__(1, str(int(lines[1]) + 1)))

    def checkpoint_root(d: dict[str, Any]) -> None:
        import base64

        _body(d, lambda lines: lines.__setitem__(2, base64.b64encode(b"\x07" * 32).decode()))

    def checkpoint_signature(d: dict[str, Any]) -> None:
        note = d["checkpoint"]
        i = note.rindex(" ") + 10
        d["checkpoint"] = note[:i] + ("A" if note[i] != "A" else "B") + note[i + 1:]

    def resigned_by_another_key(d: dict[str, Any]) -> None:  # needs --key to be caught
        cp = parse_body(parse_note(d["checkpoint"]).text)
        forged = Checkpoint(cp.origin, cp.size, cp.root)
        d["checkpoint"], d["key"] = sign_checkpoint(forged, other), other.verifier_key_string()

    def origin(d: dict[str, Any]) -> None:
        d["origin"] = "agentlog.local/0000000000000000"

    return {f.__name__: f for f in (frame_bytes, frame_and_hash, frame_hash, leaf_index, leaf_index_down,
                                    inclusion_element, inclusion_dropped, seq, log, checkpoint_size, checkpoint_root,
                                    checkpoint_signature, resigned_by_another_key, origin)}


def test_every_tamper_fails_in_the_library_the_cli_and_the_standalone_verifier(world: World, nacl_python: str) -> None:
    b = world.session
    other = Signer.generate(b["origin"])  # an attacker's key under the same name
    for name, tamper in _tampers(b, other).items():
        d = copy.deepcopy(b)
        tamper(d)
        key = b["key"] if name == "resigned_by_another_key" else None
        assert outcome(d, key)[0] != "ok", name
        assert standalone_outcome(d, key)[0] != "ok", name
        path = world.out / f"tampered-{name}.json"
        path.write_text(json.dumps(d))
        args = ("--key", key) if key else ()
        r = cli("verify-proof", str(path), *args, home=world.root)
        assert r.returncode == 1 and "FAILED" in r.stdout, (name, r.stdout, r.stderr)
        sa = standalone(nacl_python, path, *args)
        assert sa.returncode == 1 and "FAILED" in sa.stdout, (name, sa.stdout, sa.stderr)
    # the forged one passes on its own key (it is consistent with itself): that is what --key is for
    d = copy.deepcopy(b)
    _tampers(b, other)["resigned_by_another_key"](d)
    assert outcome(d) == ("ok", ["ok"] * 4)
    # a key that is not the bundle's fails, however well-formed
    r = cli("verify-proof", str(world.out / "s1.json"), "--key", other.verifier_key_string(), home=world.root)
    assert r.returncode == 1 and "is not the given key" in r.stdout


OTHER_WITNESS = CosignatureSigner.generate("bob").verifier_key_string()
"""A witness that cosigned nothing of the world's."""


def _mutations(world: World) -> st.SearchStrategy[tuple[str, Any]]:
    section = world.witnessed["witnessed"]
    values = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**65), st.text(max_size=8),
                       st.sampled_from(["0" * 64, "f" * 64, "A" * 64, "", "claude_code/s1", "agentlog-proof/v1",
                                        world.witness_key, world.session["key"], world.session["checkpoint"],
                                        section["checkpoint"], OTHER_WITNESS]),
                       st.lists(st.sampled_from(["0" * 64, "ab" * 32, 3, world.witness_key, OTHER_WITNESS]),
                                max_size=3),
                       st.just({}), st.just(copy.deepcopy(section)))
    paths = st.sampled_from(["format", "origin", "key", "checkpoint", "entries", "entries.0", "entries.0.log",
                             "entries.0.seq", "entries.0.frame_hash", "entries.0.leaf_index", "entries.0.inclusion",
                             "entries.0.inclusion.0", "entries.0.frame", "entries.0.purged", "entries.1.seq",
                             "entries.2.leaf_index", "entries.3.inclusion.1", "entries.3.frame", "witnessed",
                             "witnessed.checkpoint", "witnessed.witnesses", "witnessed.witnesses.0",
                             "witnessed.consistency", "witnessed.consistency.0", "witnessed.consistency.1"])
    return st.tuples(paths, st.one_of(values, st.integers(0, 400).map(lambda n: ("flip", n)),
                                      st.just(("delete",)), st.just(("extra",))))


def _apply(doc: dict[str, Any], path: str, change: Any) -> None:
    parts = path.split(".")
    at: Any = doc
    for p in parts[:-1]:
        at = at[int(p)] if isinstance(at, list) else at[p]
    last: Any = int(parts[-1]) if isinstance(at, list) else parts[-1]
    if isinstance(change, tuple) and change and change[0] == "delete":
        del at[last]
    elif isinstance(change, tuple) and change and change[0] == "extra":
        if isinstance(at[last], dict):
            at[last]["extra"] = 1
        else:
            at[last] = [at[last]]
    elif isinstance(change, tuple) and change and change[0] == "flip":
        value = at[last]
        if isinstance(value, str) and value:
            i = change[1] % len(value)
            at[last] = value[:i] + ("0" if value[i] != "0" else "1") + value[i + 1:]
        elif isinstance(value, int) and not isinstance(value, bool):
            at[last] = value ^ (1 << (change[1] % 8))
    else:
        at[last] = change


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), which=st.sampled_from(["session", "event", "witnessed", "witnessed"]))
def test_the_standalone_verifier_agrees_with_the_library(world: World, data: st.DataObject, which: str) -> None:
    """Valid and damaged bundles, with and without a witnessed section, checked with the bundle's
    own keys, a given log key, given witness keys (alice's, and another's) and --require-witness."""
    mutations = data.draw(st.lists(_mutations(world), min_size=0, max_size=3), label="mutations")
    d = copy.deepcopy({"session": world.session, "event": world.event, "witnessed": world.witnessed}[which])
    for path, change in mutations:
        try:
            _apply(d, path, change)
        except (KeyError, IndexError, TypeError, ValueError):
            pass  # the path is gone after an earlier change
    expected = outcome(d)
    assert standalone_outcome(d) == expected
    key = world.session["key"]
    assert standalone_outcome(d, key) == outcome(d, key)
    for witnesses in ([world.witness_key], [OTHER_WITNESS], [OTHER_WITNESS, world.witness_key]):
        assert standalone_outcome(d, key, witnesses) == outcome(d, key, witnesses), witnesses
    assert standalone_outcome(d, None, (), True) == outcome(d, None, (), True)
    if not mutations:
        assert expected[0] == "ok"
        assert outcome(d, key, [world.witness_key])[0] == ("ok" if which == "witnessed" else "error")
        assert outcome(d, key, [OTHER_WITNESS])[0] == "error"


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
                     max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=_JSON, fmt=st.sampled_from([None, "agentlog-proof/v1", "agentlog-consistency/v1"]),
       fields=st.dictionaries(st.sampled_from(["origin", "key", "checkpoint", "entries", "old", "new", "proof",
                                               "witnessed"]),
                              _JSON, max_size=7))
def test_any_json_is_answered_never_raised(world: World, doc: Any, fmt: str | None, fields: dict[str, Any]) -> None:
    """A hostile document gets a BundleError or a report from the library, Malformed or Failed from the
    standalone verifier: no other exception, and the two agree that it does not verify."""
    if fmt is not None:
        doc = {**world.session, "format": fmt, **fields} if fields else {"format": fmt, "x": doc}
    for key in (None, world.session["key"]):
        assert outcome(doc, key)[0] == standalone_outcome(doc, key)[0]
        if fmt is None or not fields:
            assert outcome(doc, key)[0] == "error"


def test_the_standalone_verifier_is_a_file_that_needs_no_agentlog(world: World, nacl_python: str,
                                                                   tmp_path: Path) -> None:
    tree = ast.parse(SCRIPT.read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {str(n.module).split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names) | {"nacl", "__future__"}, imported
    printed = cli("verify-proof", "--print-script", home=world.root)
    assert printed.returncode == 0 and printed.stdout == SCRIPT.read_text()
    script = tmp_path / "verify_bundle.py"
    script.write_text(printed.stdout)
    bundle = tmp_path / "b.json"
    bundle.write_text(json.dumps(world.event))
    r = subprocess.run([nacl_python, "-I", str(script), str(bundle)], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("verified: 1 entry"), r.stdout + r.stderr
    for args, code in (((), 2), (("nope.json",), 2), ((str(bundle), "--key", "not-a-key"), 2)):
        r = subprocess.run([nacl_python, "-I", str(script), *args], capture_output=True, text=True, timeout=60,
                           cwd=tmp_path)
        assert r.returncode == code and "Traceback" not in r.stderr, (args, r.stderr)
    bundle.write_text("[1, 2")
    r = subprocess.run([nacl_python, "-I", str(script), str(bundle)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stdout.startswith("FAILED: not a bundle: not JSON"), r.stdout


def test_bad_input_is_one_line_and_an_exit_code(world: World, tmp_path: Path) -> None:
    home = world.root
    cases: list[tuple[tuple[str, ...], bytes | None, int, str]] = [
        (("verify-proof", str(tmp_path / "missing.json")), None, 2, "cannot read"),
        (("verify-proof",), None, 2, "give a BUNDLE"),
        (("verify-proof", "-"), b"not json at all", 1, "FAILED: not a bundle: not JSON"),
        (("verify-proof", "-"), b"\xff\xfe\x00", 1, "not UTF-8"),
        (("verify-proof", "-"), b"[]", 1, "not an object"),
        (("verify-proof", "-"), b'{"format": "something/v9"}', 1, "not an agentlog-proof/v1 bundle"),
        (("verify-proof", "-"), b'{"format": "agentlog-proof/v1", "format": "x"}', 1, "appears twice"),
        (("verify-proof", "-"), json.dumps({**world.event, "entries": []}).encode(), 1, "entries is not a non-empty"),
        (("verify-proof", "-"), json.dumps({**world.event, "entries": [{"log": 1}]}).encode(), 1, "entries[0]"),
        (("verify-proof", "-"), b"[" * 100_000, 1, "not JSON"),
        (("verify-proof", "-", "--key", "garbage"), json.dumps(world.event).encode(), 2, "--key is not a verifier key"),
        (("verify-proof", "x.json", "--print-script"), None, 2, "--print-script takes no"),
        (("prove",), None, 2, "give an ID"),
        (("prove", "s1", "--consistency", "1", "2"), None, 2, "one of the two"),
        (("prove", "no-such-session-or-event"), None, 1, "was recorded"),
        (("prove", "ev_ffffffff"), None, 1, "was recorded"),
        (("prove", "--consistency", "5", "2"), None, 2, "OLD ≤ NEW"),
        (("prove", "--consistency", "0", "999999"), None, 2, "NEW may be at most"),
        (("prove", "--consistency", "-1", "2"), None, 2, ""),
    ]
    for args, stdin, code, text in cases:
        r = cli(*args, home=home, stdin=stdin)
        assert r.returncode == code, (args, r.returncode, r.stdout, r.stderr)
        assert text in r.stdout + r.stderr, (args, r.stdout, r.stderr)
    for name in ("prove", "verify-proof"):
        assert "Example: agentlog " + name in cli(name, "--help", home=home).stdout


# -- consistency ----------------------------------------------------------------------------------


def test_a_later_tree_is_proven_to_extend_an_earlier_one(tmp_path: Path, nacl_python: str) -> None:
    root = tmp_path / "home"
    for i in range(3):
        hook(root, "c1", i)
    first = json.loads(cli("prove", "c1", home=root).stdout)
    old = parse_body(parse_note(first["checkpoint"]).text)
    for i in range(3, 8):
        hook(root, "c1", i)
        hook(root, "c2", i)
    second = json.loads(cli("prove", "c2", home=root).stdout)
    new = parse_body(parse_note(second["checkpoint"]).text)
    assert (old.size, new.size) == (3, 13)
    r = cli("prove", "--consistency", str(old.size), str(new.size), "--out", str(tmp_path / "c.json"), home=root)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["old"]["checkpoint"] == first["checkpoint"] and doc["new"]["checkpoint"] == second["checkpoint"]
    r = cli("verify-proof", str(tmp_path / "c.json"), "--key", first["key"], home=root)
    assert r.returncode == 0 and r.stdout.strip().endswith("size 13 (signed) extends size 3 (signed)"), r.stdout
    assert standalone(nacl_python, tmp_path / "c.json", "--key", first["key"]).stdout == r.stdout
    # a size no checkpoint was signed at: proven, said to be unsigned
    mid = json.loads(cli("prove", "--consistency", "5", "13", home=root).stdout)
    assert mid["old"]["checkpoint"] is None and verify_document(mid).ok

    def tampered(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        d = copy.deepcopy(doc)
        edit(d)
        return d

    bad = {
        "proof element": tampered(lambda d: d["proof"].__setitem__(0, "0" * 64)),
        "proof dropped": tampered(lambda d: d["proof"].pop()),
        "old root": tampered(lambda d: d["old"].__setitem__("root", "1" * 64)),
        "old root, unsigned": tampered(lambda d: d["old"].update(root="1" * 64, checkpoint=None)),
        "new size": tampered(lambda d: d["new"].__setitem__("size", 12)),
        "new checkpoint": tampered(lambda d: d["new"].__setitem__("checkpoint", first["checkpoint"])),
        "sizes swapped": tampered(lambda d: d.update(old=d["new"], new=d["old"])),
    }
    for name, d in bad.items():
        assert not verify_document(d).ok, name
        assert standalone_outcome(d) == ("error", []), name
        (tmp_path / "t.json").write_text(json.dumps(d))
        r = cli("verify-proof", str(tmp_path / "t.json"), home=root)
        assert r.returncode == 1 and r.stdout.startswith("FAILED: "), (name, r.stdout)


# -- purge ------------------------------------------------------------------------------------------


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` whose bytes, decompressed zstd or Parquet rows hold ``needle``."""
    hits = []
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            data = Path(p).read_bytes()
            if needle in data:
                hits.append(p)
            elif n.endswith(".zst"):
                with open(p, "rb") as f:
                    if needle in zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read():
                        hits.append(p + " (decompressed)")
            elif n.endswith(".parquet"):
                import pyarrow.parquet as pq

                if needle.decode() in str(pq.read_table(p).to_pylist()):
                    hits.append(p + " (parquet)")
    return hits


def test_a_purge_keeps_older_bundles_valid_and_newer_ones_prove_hashes_only(tmp_path: Path, nacl_python: str) -> None:
    root, out = tmp_path / "home", tmp_path / "out"
    out.mkdir()
    for i in range(3):
        hook(root, "p1", i, text=CANARY)
        hook(root, "p2", i)
    ev = _event_ids(root, "p1")[1]
    assert cli("prove", "p1", "--out", str(out / "before.json"), home=root).returncode == 0
    assert cli("prove", f"ev_{ev}", "--out", str(out / "event-before.json"), home=root).returncode == 0
    assert CANARY in (out / "before.json").read_text()
    r = cli("purge", "--session", "p1", "--yes", "--json", home=root)
    assert r.returncode == 0 and json.loads(r.stdout)["frames"] == 3, r.stdout + r.stderr

    for name in ("before.json", "event-before.json"):  # made before the purge: still valid
        r = cli("verify-proof", str(out / name), home=root)
        assert r.returncode == 0, r.stdout
        assert standalone(nacl_python, out / name).returncode == 0

    r = cli("prove", f"ev_{ev}", "--out", str(out / "event-after.json"), home=root)
    assert r.returncode == 0, r.stderr
    after = json.loads((out / "event-after.json").read_text())
    (entry,) = after["entries"]
    before = json.loads((out / "event-before.json").read_text())["entries"][0]
    assert entry["frame"] is None and entry["purged"]["purge_id"] and entry["purged"]["at"].endswith("Z")
    assert (entry["log"], entry["seq"], entry["frame_hash"], entry["leaf_index"]) == \
        (before["log"], before["seq"], before["frame_hash"], before["leaf_index"])
    r = cli("verify-proof", str(out / "event-after.json"), home=root)
    assert r.returncode == 0 and r.stdout.startswith("purged claude_code/p1 seq 1") and \
        "content purged (" in r.stdout and "hash proven" in r.stdout, r.stdout
    assert standalone(nacl_python, out / "event-after.json").stdout == r.stdout

    session = json.loads(cli("prove", "p1", home=root).stdout)  # the whole session, by its log
    assert [x["frame"] for x in session["entries"]] == [None] * 3
    assert outcome(session) == ("ok", ["purged"] * 3)
    # nowhere in the logs, the store, the tree, the checkpoints or the keys; the projection's derived
    # copies are purge's own gap (test_purge_leaves_the_projection_s_copies below), not the proofs'
    assert [h for h in files_holding(root, CANARY.encode()) if f"{os.sep}projection{os.sep}" not in h] == []
    assert [h for h in files_holding(root, b"qzxw") if f"{os.sep}projection{os.sep}" not in h] == []


def test_purge_leaves_no_copy_in_the_projection(tmp_path: Path) -> None:
    """The projection holds copies of prompts and outputs (objectives, attempts, caches): a
    purge drops it, and the next read rebuilds it without the purged events."""
    root = tmp_path / "home"
    for i in range(2):
        hook(root, "q1", i, text=CANARY)
    assert cli("sessions", "--json", home=root).returncode == 0  # the projection is made
    assert cli("purge", "--session", "q1", "--yes", home=root).returncode == 0
    assert cli("sessions", "--json", home=root).returncode == 0  # and refreshed
    assert files_holding(root, CANARY.encode()) == []


# -- the surfaces -----------------------------------------------------------------------------------


def test_the_session_page_downloads_the_session_s_bundle(world: World) -> None:
    from starlette.testclient import TestClient

    from agentlog.web.app import create_app
    from agentlog.web.security import COOKIE, Guard

    guard = Guard(port=8765)
    app = create_app(str(world.root), guard, live=False)
    with TestClient(app, base_url=f"http://127.0.0.1:{guard.port}") as anon:
        assert anon.get("/sessions/s1/proof.json").status_code == 401
    with TestClient(app, base_url=f"http://127.0.0.1:{guard.port}") as c:
        r = c.get(f"/?token={guard.token}", follow_redirects=False)
        c.cookies.set(COOKIE, r.cookies[COOKIE])
        page = c.get("/timeline").text
        sid = sorted(set(re.findall(r'href="/sessions/(ses_[0-9a-f-]+)"', page)))[0]
        html = c.get(f"/sessions/{sid}").text
        assert f'href="/sessions/{sid}/proof.json"' in html and "verify this session" in html
        r = c.get(f"/sessions/{sid}/proof.json")
        assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
        bundle = load_document(r.content)
        assert verify_bundle(bundle, key=world.session["key"]).ok and len(bundle["entries"]) >= 1
        assert c.get("/sessions/ses_ffffffffffff/proof.json").status_code == 404
        assert c.get("/sessions/zz/proof.json").status_code in (400, 404)


def test_the_mcp_prove_tool_returns_the_bundle(world: World) -> None:
    import asyncio

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def run() -> tuple[Any, list[Any]]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "agentlog", "mcp"],
                                       env={**os.environ, "AGENTLOG_HOME": str(world.root)})
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                return tools, [await session.call_tool("prove", {"ident": "s1"}),
                               await session.call_tool("prove", {"ident": "'; drop table events"})]

    tools, (ok, bad) = asyncio.run(run())
    tool = {t.name: t for t in tools.tools}["prove"]
    assert tool.annotations.read_only_hint is True and "Example" in (tool.description or "")
    assert tool.input_schema["properties"]["ident"]["description"] and tool.input_schema["properties"]["ident"]["examples"]
    assert not ok.is_error and verify_bundle(ok.structured_content).ok
    assert bad.is_error and "ident must be" in bad.content[0].text
