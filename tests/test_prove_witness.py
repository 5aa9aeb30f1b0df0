"""A bundle's witnessed checkpoint (issue 28 item 5): `agentlog prove` adds the newest checkpoint a
registered witness cosigned and the consistency proof from it to the bundle's checkpoint;
`verify-proof` and the standalone verifier check both. A history rewritten after the witness saw
it — logs resealed into self-consistent chains, the tree rebuilt over them and a new checkpoint
signed with the data root's own key, as an attacker who can write the data root can — gives a
bundle whose every inclusion proof checks out and whose consistency with the witnessed checkpoint
does not. The data root is recorded by the real hook; the checkers run as processes (the
standalone one from a venv that has only PyNaCl)."""

from __future__ import annotations

import base64
import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentlog.integrity.bundle import BundleError, verify_bundle
from agentlog.integrity.checkpoint import Checkpoint, CosignatureSigner, cosign, sign_checkpoint
from agentlog.integrity.note import Signer
from agentlog.integrity.tree import FrameTree
from agentlog.operations import checkpoints
from agentlog.store.ingest import ingest
from prove_support import SV, cli, drop_tree, events_of, hook, log_of, outcome, reseal, standalone, standalone_outcome


@dataclass
class Witnessed:
    """A data root whose checkpoint of 6 frames witness alice cosigned, then 2 frames more."""

    root: Path
    out: Path
    alice: str
    """alice's verifier key."""


def _witnessed_root(tmp_path: Path) -> Witnessed:
    root, out = tmp_path / "home", tmp_path / "out"
    out.mkdir()
    for i in range(3):
        hook(root, "w-a", i)
        hook(root, "w-b", i)
    assert cli("checkpoint", home=root).returncode == 0
    alice = cli("witness", "keygen", "alice", str(out / "alice.key"), home=root).stdout.strip()
    assert cli("witness", "add", "alice", alice, home=root).returncode == 0
    r = cli("checkpoint", "--cosign", "--witness-key", str(out / "alice.key"), home=root)
    assert r.returncode == 0, r.stderr
    hook(root, "w-a", 3)
    hook(root, "w-b", 3)
    return Witnessed(root, out, alice)


@pytest.fixture
def witnessed(tmp_path: Path) -> Witnessed:
    return _witnessed_root(tmp_path)


def _prove(w: Witnessed, ident: str, name: str) -> tuple[Path, dict[str, Any], str]:
    path = w.out / name
    r = cli("prove", ident, "--out", str(path), home=w.root)
    assert r.returncode == 0, r.stderr
    return path, json.loads(path.read_text()), r.stderr


def _both(w: Witnessed, python: str, path: Path, *args: str) -> tuple[int, str]:
    """verify-proof's and the standalone verifier's exit code and output, which must agree."""
    r = cli("verify-proof", str(path), *args, home=w.root)
    sa = standalone(python, path, *args)
    assert (sa.returncode, sa.stdout) == (r.returncode, r.stdout), (r.stdout, sa.stdout, sa.stderr)
    return r.returncode, r.stdout


def test_an_untouched_history_verifies_against_the_witnessed_checkpoint(witnessed: Witnessed,
                                                                       nacl_python: str) -> None:
    w = witnessed
    path, bundle, said = _prove(w, "w-a", "w-a.json")
    assert "which extends the checkpoint of size 6 alice witnessed" in said
    section = bundle["witnessed"]
    assert sorted(section) == ["checkpoint", "consistency", "witnesses"] and section["witnesses"] == [w.alice]
    assert section["checkpoint"].split("\n")[1] == "6" and "\n\u2014 alice " in section["checkpoint"]
    assert bundle["checkpoint"].split("\n")[1] == "8" and section["consistency"]

    code, out = _both(w, nacl_python, path)
    assert code == 0, out
    assert "witness: size 6 cosigned by alice+" in out and "(witness keys taken from the bundle); size 8 extends it" in out
    assert out.splitlines()[-1].startswith("verified: 4 entries against agentlog.local/")
    code, out = _both(w, nacl_python, path, "--witness", w.alice, "--require-witness", "--key", bundle["key"])
    assert code == 0 and "(witness keys given); size 8 extends it" in out, out
    report = json.loads(cli("verify-proof", str(path), "--json", home=w.root).stdout)
    assert report["ok"] and report["witness"]["size"] == 6 and report["witness"]["keys_given"] is False
    assert [x["key"] for x in report["witness"]["witnesses"]] == [w.alice]
    assert report["witness"]["witnesses"][0]["time"] > 0
    # `verify` agrees: nothing was rewritten
    assert cli("verify", home=w.root).returncode == 0


def test_a_forged_history_signed_with_the_log_s_own_key_fails_the_witnessed_checkpoint(witnessed: Witnessed,
                                                                                        nacl_python: str) -> None:
    """The attacker has the data root and its key: rewrites a session's chain (every hash
    recomputed), rebuilds the tree over it and signs a new checkpoint. Each inclusion proof of
    the resulting bundle verifies; its consistency with what alice witnessed does not."""
    w = witnessed
    root = str(w.root)
    ingest(root)
    path = log_of(w.root, "w-a")
    events = events_of(path)
    events[1] = events[1].replace(b"prompt 1 of w-a", b"prompt X of w-a")
    reseal(path, events)
    drop_tree(w.root)
    ingest(root)
    tree = FrameTree(root)
    assert tree.size == 8
    forged = sign_checkpoint(Checkpoint(checkpoints.origin(root), tree.size, tree.root_hash()), checkpoints.signer(root))
    (Path(checkpoints.checkpoints_dir(root)) / f"{tree.size:012d}-{time.time_ns() // 1000}.note").write_text(forged)

    bundle_path, bundle, said = _prove(w, "w-a", "forged.json")
    assert bundle["checkpoint"] == forged and "prompt X of w-a" in bundle["entries"][1]["frame"]
    assert "it does NOT extend the checkpoint of size 6 alice witnessed (run `agentlog verify`)" in said
    checks: list[tuple[str, ...]] = [(), ("--witness", w.alice), ("--key", bundle["key"])]
    for args in checks:
        code, out = _both(w, nacl_python, bundle_path, *args)
        assert code == 1, (args, out)
        assert out == ("FAILED: the consistency proof from the witnessed size 6 to size 8 does not verify: the "
                       "bundle's checkpoint does not extend what the witnesses saw\n"), out
    # the forgery is self-consistent: without its witnessed section the bundle verifies ...
    stripped = {k: v for k, v in bundle.items() if k != "witnessed"}
    assert outcome(stripped) == standalone_outcome(stripped) == ("ok", ["ok"] * 4)
    # ... which is what --require-witness (or --witness) is for
    (w.out / "stripped.json").write_text(json.dumps(stripped))
    checks = [("--require-witness",), ("--witness", w.alice)]
    for args in checks:
        code, out = _both(w, nacl_python, w.out / "stripped.json", *args)
        assert code == 1 and out.startswith("FAILED: no witnessed checkpoint in the bundle"), (args, out)
    # an attacker who cosigns with a witness key of their own passes only when the checker
    # takes the witness keys from the bundle (the line says so), never with --witness alice
    mallory = CosignatureSigner.generate("alice")
    old_size = int(bundle["witnessed"]["checkpoint"].split("\n")[1])
    assert old_size == 6
    own = {**bundle, "witnessed": {"checkpoint": cosign(forged, mallory), "witnesses": [mallory.verifier_key_string()],
                                   "consistency": []}}
    (w.out / "own-witness.json").write_text(json.dumps(own))
    code, out = _both(w, nacl_python, w.out / "own-witness.json")
    assert code == 0 and "(witness keys taken from the bundle); size 8 extends it" in out, out
    code, out = _both(w, nacl_python, w.out / "own-witness.json", "--witness", w.alice)
    assert code == 1 and out == "FAILED: witnessed checkpoint: cosigned by none of the given witness keys\n", out
    # and `verify` on the data root says the same thing in its own terms
    r = cli("verify", "--json", home=w.root)
    assert r.returncode == 1
    assert ("witness", "fork") in {(b["kind"], b["reason"]) for b in json.loads(r.stdout)["trust"]["breaks"]}


def test_witness_options(witnessed: Witnessed, nacl_python: str, tmp_path: Path) -> None:
    w = witnessed
    path, bundle, _said = _prove(w, "w-b", "w-b.json")
    bob = cli("witness", "keygen", "bob", str(w.out / "bob.key"), home=w.root).stdout.strip()
    # a trusted witness key that did not cosign: fails
    code, out = _both(w, nacl_python, path, "--witness", bob)
    assert code == 1 and out == "FAILED: witnessed checkpoint: cosigned by none of the given witness keys\n"
    # one of several given keys is enough
    code, out = _both(w, nacl_python, path, "--witness", bob, "--witness", w.alice)
    assert code == 0 and "cosigned by alice+" in out
    # malformed: a usage error, in both, before the bundle is read
    for bad in ("garbage", bundle["key"]):  # the log's key is not a witness key (type 0x01, not 0x04)
        r = cli("verify-proof", str(path), "--witness", bad, home=w.root)
        sa = standalone(nacl_python, path, "--witness", bad)
        assert r.returncode == sa.returncode == 2 and "--witness" in r.stderr and "--witness" in sa.stderr
    # a bundle without a witnessed section: "no witness", unless one is required
    plain = tmp_path / "plain"
    hook(plain, "p", 0)
    r = cli("prove", "p", "--out", str(tmp_path / "plain.json"), home=plain)
    assert r.returncode == 0 and "; no witnessed checkpoint" in r.stderr
    code, out = _both(w, nacl_python, tmp_path / "plain.json")
    assert code == 0 and out.splitlines()[-2] == "no witness: the bundle carries no witnessed checkpoint"
    code, out = _both(w, nacl_python, tmp_path / "plain.json", "--require-witness")
    assert code == 1 and out == ("FAILED: no witnessed checkpoint in the bundle, and one is required "
                                 "(--require-witness)\n")
    # a consistency bundle never has one
    r = cli("prove", "--consistency", "6", "8", "--out", str(tmp_path / "c.json"), home=w.root)
    assert r.returncode == 0, r.stderr
    code, out = _both(w, nacl_python, tmp_path / "c.json", "--require-witness")
    assert code == 1 and "a consistency bundle carries no witnessed checkpoint" in out
    assert _both(w, nacl_python, tmp_path / "c.json")[0] == 0
    r = cli("verify-proof", "--print-script", "--witness", w.alice, home=w.root)
    assert r.returncode == 2


def test_a_damaged_witnessed_section_fails_in_both_verifiers(witnessed: Witnessed) -> None:
    w = witnessed
    _path, bundle, _said = _prove(w, "w-a", "w-a.json")
    attacker = Signer.generate(bundle["origin"])
    bob = CosignatureSigner.generate("bob").verifier_key_string()

    def edit(change: Any) -> dict[str, Any]:
        d = copy.deepcopy(bundle)
        change(d["witnessed"])
        return d

    def flip_cosignature(s: dict[str, Any]) -> None:
        head, last = s["checkpoint"].rstrip("\n").rsplit(" ", 1)
        sig = bytearray(base64.b64decode(last))
        sig[-1] ^= 1
        s["checkpoint"] = f"{head} {base64.b64encode(bytes(sig)).decode()}\n"

    def resigned(s: dict[str, Any]) -> None:  # the witnessed body signed by another log key
        body = s["checkpoint"].split("\n\n")[0].split("\n")
        cp = Checkpoint(body[0], int(body[1]), base64.b64decode(body[2]))
        s["checkpoint"] = sign_checkpoint(cp, attacker)

    damaged = {
        "cosignature flipped": edit(flip_cosignature),
        "log signature by another key": edit(resigned),
        "a listed witness that did not cosign": edit(lambda s: s.update(witnesses=[w.alice, bob])),
        "consistency element": edit(lambda s: s["consistency"].__setitem__(0, "0" * 64)),
        "consistency dropped": edit(lambda s: s["consistency"].pop()),
        "witnessed is the bundle's own checkpoint, uncosigned": edit(
            lambda s: s.update(checkpoint=bundle["checkpoint"], consistency=[])),
        "the witnessed size changed": edit(lambda s: s.update(
            checkpoint=s["checkpoint"].replace("\n6\n", "\n9\n", 1))),
    }
    for name, d in damaged.items():
        assert outcome(d) == standalone_outcome(d) == ("error", []), name
        assert outcome(d, None, [w.alice]) == standalone_outcome(d, None, [w.alice]) == ("error", []), name
    malformed = {
        "no witnesses": edit(lambda s: s.update(witnesses=[])),
        "a witness listed twice": edit(lambda s: s.update(witnesses=[w.alice, w.alice])),
        "a log key as witness": edit(lambda s: s.update(witnesses=[bundle["key"]])),
        "an extra field": edit(lambda s: s.update(extra=1)),
        "no consistency": edit(lambda s: s.pop("consistency")),
    }
    for name, d in malformed.items():
        with pytest.raises(BundleError):
            verify_bundle(d)
        with pytest.raises(SV.Malformed):
            SV.verify(d)


def test_a_witnessed_checkpoint_beyond_the_bundle_s_is_a_rollback(witnessed: Witnessed) -> None:
    """A bundle proven against an older checkpoint than one a witness has since cosigned: the
    log (as the bundle shows it) was rolled back after the witness saw more."""
    w = witnessed
    _path, first, _said = _prove(w, "w-a", "first.json")  # against size 8, alice witnessed 6
    assert cli("checkpoint", "--cosign", "--witness-key", str(w.out / "alice.key"), home=w.root).returncode == 0
    _path, later, said = _prove(w, "w-b", "later.json")
    assert "which extends the checkpoint of size 8 alice witnessed" in said
    rolled = {**first, "checkpoint": first["witnessed"]["checkpoint"].split("\n\u2014 alice ")[0] + "\n",
              "witnessed": later["witnessed"]}
    assert rolled["checkpoint"].split("\n")[1] == "6"
    why = ("the bundle's checkpoint (size 6) is smaller than the witnessed one (size 8): the log was rolled back "
           "after a witness saw it")
    assert verify_bundle(rolled).error == why
    with pytest.raises(SV.Failed, match=r"\(size 6\) is smaller than the witnessed one \(size 8\)"):
        SV.verify(rolled)
