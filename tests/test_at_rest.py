"""Encryption at rest (issue 34 part 3, docs/encryption.md).

With it on: no captured text from a test session is found anywhere under the data root
(Parquet and zstd files decompressed), every read command works with the key, and without it
``verify`` passes while content reads fail with a clear message. The hook is run as agents run
it, through both paths (tests/hook_paths.py)."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.core import atrest
from agentlog.core.sealing import SealError, seal_event, seal_events
from agentlog.core.unsealing import EventOpener, open_event
from agentlog.log.layout import iter_logs

from hook_paths import HookPath

SID = "7a1c2e90-4b3d-4f6a-9e21-5c0d8b7f6a13"
PROMPT = "zorblax quintessential prompt about the frobnicator"
COMMAND = "echo wibbleflux-command-canary"
OUTPUT = "glimmerstone output canary 4471"
MEMORY = "the quaggleworth service listens on 8123"
CANARIES = ("zorblax", "frobnicator", "wibbleflux", "glimmerstone", "quaggleworth")
PASS = "correct horse battery staple"


@pytest.fixture(autouse=True)
def runtime(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Memory-backed storage of this test's own (the real one is /dev/shm or $XDG_RUNTIME_DIR)."""
    d = tmp_path_factory.mktemp("runtime")
    monkeypatch.setenv(atrest.RUNTIME_ENV, str(d))
    return d


def _run(*args: str, code: int = 0, stdin: str | None = None) -> Any:
    r = CliRunner().invoke(cli, list(args), input=stdin, catch_exceptions=True)
    assert r.exit_code == code, (args, r.output[-3000:], r.exception)
    if code:
        assert "Traceback" not in r.output, r.output
    return r


def _payload(**kw: object) -> bytes:
    base: dict[str, object] = {"session_id": SID, "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    base.update(kw)
    return json.dumps(base).encode()


def session_payloads() -> list[bytes]:
    """The test session's hook payloads, in order (a prompt, a shell call and its output)."""
    return [
        _payload(hook_event_name="SessionStart", source="startup"),
        _payload(prompt=PROMPT),
        _payload(hook_event_name="PreToolUse", tool_name="Bash", tool_use_id="t1", tool_input={"command": COMMAND}),
        _payload(hook_event_name="PostToolUse", tool_name="Bash", tool_use_id="t1", tool_input={"command": COMMAND},
                 tool_response={"stdout": OUTPUT, "stderr": "", "interrupted": False}),
        _payload(hook_event_name="Stop", stop_hook_active=False),
    ]


def _session(hook_path: HookPath) -> None:
    for stdin in session_payloads():
        r = hook_path.run(stdin)
        assert r.returncode == 0 and r.stdout == b"", r.stderr


def _frames(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in iter_logs(str(home)) for line in Path(p).read_bytes().splitlines()]


def _texts(path: Path) -> list[bytes]:
    """The file's bytes, and what they decompress to where they are Parquet or zstd."""
    data = path.read_bytes()
    out = [data]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        out.append(json.dumps(pq.read_table(path).to_pylist(), default=str).encode())
    if path.suffix == ".zst" or data[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as r:
            out.append(r.read())
    return out


def _found(base: Path) -> dict[str, list[str]]:
    """Canary → the files under ``base`` that hold it (decompressed where they compress)."""
    hits: dict[str, list[str]] = {}
    for p in base.rglob("*"):
        if p.is_file() and not p.is_symlink():
            for text in _texts(p):
                for c in CANARIES:
                    if c.encode() in text:
                        hits.setdefault(c, []).append(str(p.relative_to(base)))
    return hits


def test_a_sealed_event_opens_only_with_its_key_and_at_its_place() -> None:
    key, other = os.urandom(32), os.urandom(32)
    ev = b'{"event_id":"e1","kind":"prompt_submitted","observed_at":1,"content":{"prompt":"zorblax"},"raw":{"p":1}}'
    sealed = seal_event(ev, "k1", key)
    assert b"zorblax" not in sealed and sealed.startswith(b'{"event_id":"e1"') and b',"sealed":{"k":"k1"' in sealed
    assert open_event(sealed, {"k1": key}) == ev  # byte for byte: the head kept, the members spliced back
    odd = b'{"event_id":"e4","content":{"prompt":"zorblax"},"kind":"prompt_submitted","observed_at":1}'
    assert b"zorblax" not in seal_event(odd, "k1", key)
    assert json.loads(open_event(seal_event(odd, "k1", key), {"k1": key})) == json.loads(odd)  # (another order)
    with pytest.raises(SealError):
        open_event(sealed, {"k1": other})
    with pytest.raises(SealError, match="does not have"):
        open_event(sealed, {})
    moved = sealed.replace(b'"event_id":"e1"', b'"event_id":"e2"')  # a box moved to another event
    with pytest.raises(SealError):
        open_event(moved, {"k1": key})
    assert seal_event(b'{"event_id":"e3","kind":"usage","observed_at":1}', "k1", key).find(b"sealed") < 0


def test_opening_in_place_agrees_with_parsing_and_keeps_each_box_to_its_event() -> None:
    """Ingest's :class:`EventOpener` reads the sealed member in place; any other form of it is
    parsed as JSON (``careful``), and an id written with an escape is never taken as its bytes."""
    key = os.urandom(32)
    kid = os.urandom(16).hex()
    events = [b'{"event_id":"e%d","kind":"prompt_submitted","observed_at":1,"attrs":{"n":%d},'
              b'"content":{"prompt":"zorblax %d"},"raw":{"p":[1,"\\u001f"]}}' % (i, i, i) for i in range(50)]
    events.append(b'{"event_id":"e-odd","raw":{"p":"zorblax"},"kind":"k","observed_at":1,"content":{"a":"b"}}')
    events.append(b'{"event_id":"e-nested","attrs":{"a":1,"content":{"x":"y"}},"kind":"k","observed_at":1,'
                  b'"content":{"prompt":"zorblax"}}')
    events.append(b'{"event_id":"e-spaced", "raw": {"p":"zorblax"}, "kind":"k","content":{"a":"b"}}')
    sealed = seal_events(events, kid, key)
    assert not any(b"zorblax" in s for s in sealed)
    assert len({json.loads(s)["sealed"]["n"] for s in sealed}) == len(sealed)  # a nonce each
    opener = EventOpener({kid: key})
    for ev, s in zip(events, sealed):
        assert json.loads(opener(s)) == json.loads(ev) == json.loads(opener.careful(s))
    assert [opener(s) for s in sealed[:50]] == events[:50]  # byte for byte
    # the same sealed member written with escapes still opens (parsed); a box without the mark stays shut
    box = json.loads(sealed[0])["sealed"]
    head = sealed[0][:sealed[0].rindex(b',"sealed":')]
    escaped = "\\u%04x" % ord(box["c"][0]) + box["c"][1:]
    assert opener(head + b',"sealed":{"k":"%s","n":"%s","c":"%s"}}' % (kid.encode(), box["n"].encode(),
                                                                       escaped.encode())) == events[0]
    reordered = head + b',"sealed":{"n":"%s","c":"%s","k":"%s"}}' % (box["n"].encode(), box["c"].encode(),
                                                                     kid.encode())
    assert opener(reordered) == reordered
    changed = bytearray(sealed[1])
    changed[-10] = ord("A") if changed[-10] != ord("A") else ord("B")
    with pytest.raises(SealError, match="does not open"):
        opener(bytes(changed))
    # a box sealed for the event whose id is the 7 characters e\u0031 does not open in the event
    # whose id is "e1" written with an escape, though the bytes between the quotes are the same
    literal = seal_event(b'{"event_id":"e\\\\u0031","kind":"k","observed_at":1,"content":{"p":"zorblax"}}',
                         kid, key)
    moved = b'{"event_id":"e\\u0031"' + literal[literal.index(b'","kind"') + 1:]
    assert json.loads(moved)["event_id"] == "e1"
    with pytest.raises(SealError):
        opener(moved)
    assert json.loads(opener(literal))["content"] == {"p": "zorblax"}


def test_reads_need_only_the_unlocked_key_never_the_wrapped_one(agentlog_home: Path, hook_path: HookPath) -> None:
    """Ingest and every read use the unlocked data key; nothing but ``keys unlock`` unwraps it (an
    Argon2id derivation a time), so with the wrapped key file gone they all still work."""
    _run("keys", "init", "--at-rest", "--passphrase", stdin=PASS + "\n")
    (agentlog_home / "state" / "keys" / "at-rest.json").unlink()
    _session(hook_path)
    assert _found(agentlog_home) == {}
    _run("ingest")
    assert json.loads(_run("search", "glimmerstone", "--json").stdout)
    rows = json.loads(_run("sql", "select json_extract_string(event, '$.content.prompt') from events "
                                  "where kind = 'prompt_submitted'", "--json").stdout)["rows"]
    assert [PROMPT] in rows


def test_with_encryption_at_rest_no_captured_text_is_on_disk_and_reads_work(
        agentlog_home: Path, runtime: Path, hook_path: HookPath) -> None:
    init = _run("keys", "init", "--at-rest", "--passphrase", "--json", stdin=PASS + "\n")
    st = json.loads(init.stdout)
    assert st["at_rest"] and st["unlocked"] and st["wraps"] == ["passphrase"]
    assert "lost for good" in init.stderr
    keys = agentlog_home / "state" / "keys"
    for name in ("at-rest.id", "at-rest.json"):
        assert stat.S_IMODE((keys / name).stat().st_mode) == 0o600
    unlocked = Path(atrest.data_key_path(str(agentlog_home), st["key_id"]))
    assert stat.S_IMODE(unlocked.stat().st_mode) == 0o600 and runtime in unlocked.parents

    _session(hook_path)
    _run("memory", "add", "fact", MEMORY, "--content", "port 8123")

    # every read command works with the key
    hits = json.loads(_run("search", "glimmerstone", "--json").stdout)
    assert hits, "search found nothing"
    rows = json.loads(_run("sql", "select json_extract_string(event, '$.content.prompt') from events "
                                  "where kind = 'prompt_submitted'", "--json").stdout)["rows"]
    assert [PROMPT] in rows
    assert MEMORY in _run("memory", "list", "--json").stdout
    sessions = json.loads(_run("sessions", "--all-projects", "--json").stdout)
    assert len(sessions) == 1
    _run("show", sessions[0]["session_id"], "--all-projects")
    assert "zorblax" in _run("timeline", "--all-projects").stdout  # the turn's objective: the prompt
    _run("failures", "--all-projects", "--json")
    shared = runtime.parent / f"share-{hook_path.name}.md"  # (a file the person asked for: in plain)
    _run("share", sessions[0]["session_id"], "--markdown", str(shared))
    assert "zorblax" in shared.read_text() and "glimmerstone" in shared.read_text()
    _run("verify")

    # the log holds ciphertext; the frames still verify; nothing under the data root has the text,
    # a sealed (zstd) segment and a snapshot included
    frames = _frames(agentlog_home)
    _run("seal", "--session", SID, "--idle-hours", "0")
    assert list(agentlog_home.rglob("*.zst")), "no sealed segment"
    assert "glimmerstone" in _run("search", "glimmerstone", "--json").stdout  # (reads work after sealing)
    snap = runtime.parent / f"snap-{hook_path.name}.tar.zst"
    _run("snapshot", "create", "--out", str(snap))
    assert not any(c.encode() in t for t in _texts(snap) for c in CANARIES)
    assert frames and all("content" not in f["event"] for f in frames)
    assert any("sealed" in f["event"] for f in frames)
    assert _found(agentlog_home) == {}
    derived = Path(atrest.derived_root(str(agentlog_home)))
    assert runtime in derived.parents and agentlog_home not in derived.parents
    assert "glimmerstone" in _found(derived)  # (the derived stores are there, in memory-backed storage)

    # without the key: verify passes, content reads fail with a clear message
    _run("keys", "lock")
    assert not derived.exists()
    _run("verify")
    for args in (("search", "glimmerstone"), ("sql", "select count(*) from events"), ("memory", "list"),
                 ("sessions", "--all-projects")):
        r = _run(*args, code=1)
        assert "keys unlock" in r.output, (args, r.output)
    # a hook while locked keeps the metadata and withholds the content
    hook_path.run(_payload(prompt="zorblax while locked"))
    assert _found(agentlog_home) == {}
    last = [f["event"] for f in _frames(agentlog_home) if f["event"]["provider"] == "claude_code"][-1]
    assert last["kind"] == "prompt_submitted" and last["attrs"]["content_withheld"] == "at_rest_key_locked"

    _run("keys", "unlock", "--passphrase", stdin="not the passphrase\n", code=1)
    _run("keys", "unlock", "--passphrase", stdin=PASS + "\n")
    assert json.loads(_run("search", "glimmerstone", "--json").stdout)


def test_rotate_rewraps_the_key_and_rewrites_no_frame(agentlog_home: Path, hook_path: HookPath) -> None:
    _run("keys", "init", "--at-rest", "--passphrase", stdin=PASS + "\n")
    _session(hook_path)
    logs = {p: Path(p).read_bytes() for p in iter_logs(str(agentlog_home))}
    wraps = (agentlog_home / "state" / "keys" / "at-rest.json").read_bytes()
    _run("keys", "rotate", "--at-rest", "--passphrase", stdin="a whole new passphrase\n")
    assert {p: Path(p).read_bytes() for p in iter_logs(str(agentlog_home))} == logs
    assert (agentlog_home / "state" / "keys" / "at-rest.json").read_bytes() != wraps
    _run("keys", "lock")
    r = _run("keys", "unlock", "--passphrase", stdin=PASS + "\n", code=1)
    assert "did not unwrap" in r.output
    _run("keys", "unlock", "--passphrase", stdin="a whole new passphrase\n")
    rows = json.loads(_run("sql", "select json_extract_string(event, '$.content.prompt') from events "
                                  "where kind = 'prompt_submitted'", "--json").stdout)["rows"]
    assert [PROMPT] in rows


def test_the_os_keyring_wraps_and_unwraps_the_key(agentlog_home: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    keyring = pytest.importorskip("keyring")
    from keyring_file import FileKeyring

    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")  # never the machine's own

    backend = FileKeyring(tmp_path / "keyring.json")
    before = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        st = json.loads(_run("keys", "init", "--at-rest", "--keyring", "--json").stdout)
        assert st["wraps"] == ["keyring"] and st["unlocked"]
        _run("keys", "lock")
        assert not json.loads(_run("keys", "status", "--json").stdout)["unlocked"]
        assert json.loads(_run("keys", "unlock", "--json").stdout)["unlocked"]
        _run("keys", "rotate", "--at-rest", "--keyring")
        entries = json.loads((tmp_path / "keyring.json").read_text())
        assert list(entries) == [f"agentlog-at-rest\x1f{st['key_id']}/2"]  # the old entry is gone
        _run("keys", "lock")
        _run("keys", "unlock")
        backend.clear()  # the keyring entry lost: the key with it, said plainly
        _run("keys", "lock")
        r = _run("keys", "unlock", code=1)
        assert "did not unwrap" in r.output
    finally:
        keyring.set_keyring(before)


def test_init_refuses_twice_and_needs_a_way_to_keep_the_key(agentlog_home: Path) -> None:
    _run("keys", "init", "--at-rest", code=2)
    _run("keys", "init", "--passphrase", stdin=PASS + "\n", code=2)
    _run("keys", "init", "--at-rest", "--passphrase", stdin="short\n", code=2)
    assert not json.loads(_run("keys", "status", "--json").stdout)["at_rest"]
    _run("keys", "init", "--at-rest", "--passphrase", stdin=PASS + "\n")
    _run("keys", "init", "--at-rest", "--passphrase", stdin=PASS + "\n", code=2)
