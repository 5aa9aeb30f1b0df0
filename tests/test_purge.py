"""``agentlog purge``: content gone from every file, the chain still verifies."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest
import zstandard

from agentlog.core.ids import uuid7
from agentlog.log.frame import is_purged, parse_any, purged_line
from agentlog.log.layout import sealed_segments
from agentlog.log.purge import Selector
from agentlog.log.purge_record import PURGE_LOG, iter_records, purge_log_path
from agentlog.log.seal import seal_log
from agentlog.log.verify import verify_log
from agentlog.log.writer import SessionLog
from agentlog.store.compact import compact
from agentlog.store.ingest import ingest
from agentlog.operations.purge import purge
from agentlog.store.schema import read_events

DAY = 86_400_000_000
T0 = 1_760_000_000_000_000  # 2025-10-09, µs


def event(sid: str, i: int, *, text: str, project: str, at: int) -> bytes:
    ev = {
        "event_id": uuid7(at // 1000),
        "schema_version": 1,
        "kind": "tool_call_finished",
        "provider": "claude_code",
        "observed_at": at,
        "captured_at": at,
        "capture_mode": "full",
        "agentlog_version": "test",
        "provider_session_id": sid,
        "project": {"root": f"/src/{project}", "name": project},
        "content": {"command": f"echo {text} {i}", "output": text * 3},
    }
    return orjson.dumps(ev)


def write(root: Path, sid: str, n: int, *, text: str, project: str, at: int = T0) -> SessionLog:
    log = SessionLog(str(root), "claude_code", sid, session_id=sid)
    for i in range(n):
        log.append([event(sid, i, text=text, project=project, at=at + i)])
    return log


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentlog", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "AGENTLOG_HOME": str(home)})


def files_holding(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` whose raw bytes, or decompressed zstd content, hold ``needle``."""
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
                # pages are zstd-compressed: the raw bytes alone prove nothing
                import pyarrow.parquet as pq

                if needle.decode() in str(pq.read_table(p).to_pylist()):
                    hits.append(p + " (parquet)")
    return hits


def tree_hashes(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            out[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def test_purge_removes_the_canary_from_every_file_and_verify_passes(agentlog_home: Path) -> None:
    root = agentlog_home
    # s1 sealed whole, s2 active, s3 partly sealed and old, keep untouched
    s1 = write(root, "s1", 12, text="CANARY-one-qzxw", project="alpha")
    assert seal_log(s1.path, level=3).status == "sealed"
    write(root, "s2", 9, text="CANARY-two-qzxw", project="alpha")
    s3 = write(root, "s3", 10, text="CANARY-three-qzxw", project="beta", at=T0 - 40 * DAY)
    assert seal_log(s3.path, level=3).status == "sealed"
    write(root, "s3", 5, text="recent-beta", project="beta", at=T0 + 100)
    write(root, "keep", 7, text="keep-me-9d1c", project="gamma")
    assert not ingest(str(root)).breaks
    compact(str(root), grace_hours=0)
    ingest(str(root))
    assert any(h.endswith("(parquet)") for h in files_holding(root, b"CANARY-"))  # in the store too, to start with

    dry = cli("purge", "--session", "s1", "--dry-run", "--json", home=root)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["frames"] == 12

    r = cli("purge", "--session", "s1", "--yes", "--json", home=root)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["frames"] == 12 and out["purge_id"] and out["store_rows_deleted"] == 12
    assert out["logs"][0]["segments_rewritten"] == 1
    assert not files_holding(root, b"CANARY-one")

    r = cli("purge", "--project", "alpha", "--yes", "--json", home=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["frames"] == 9  # s1's are purged already
    before = "2025-09-15"  # s3's first 10 frames are 40 days older than T0
    r = cli("purge", "--before", before, "--yes", "--json", home=root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["frames"] == 10

    assert files_holding(root, b"CANARY-") == []
    assert files_holding(root, b"qzxw") == []  # not hex: cannot turn up in a kept hash or id by chance
    assert files_holding(root, b"keep-me-9d1c")  # other sessions untouched

    v = cli("verify", "--json", home=root)
    assert v.returncode == 0, v.stdout + v.stderr
    reports = {rep["session"]: rep for rep in json.loads(v.stdout)["reports"]}
    assert (reports["s1"]["purged"], reports["s2"]["purged"], reports["s3"]["purged"], reports["keep"]["purged"]) == (12, 9, 10, 0)
    assert all(rep["status"] == "intact" for rep in reports.values())
    assert "purges" in reports  # the record log is a chained log like any other

    st = cli("status", "--verify", "--json", home=root)
    assert st.returncode == 0, st.stdout + st.stderr

    rows = read_events(str(root), columns=["log_key", "seq", "kind"])
    keys = rows.column("log_key").to_pylist()
    assert keys.count("keep") == 7 and keys.count("s3") == 5
    assert "s1" not in keys and "s2" not in keys
    assert keys.count("purges") == 3 and set(rows.column("kind").to_pylist()) == {"tool_call_finished", "purge"}

    # who, what, when
    records = list(iter_records(str(root)))
    assert [rec["selector"] for rec in records] == [{"session": "s1"}, {"project": "alpha"}, {"before": records[2]["selector"]["before"]}]
    assert records[0]["who"]["pid"] > 0 and records[0]["who"]["user"]
    assert records[0]["frames"][0][:2] == ["claude_code/s1", 0]

    # a rebuild reads purged frames as such
    assert cli("rebuild", "--json", home=root).returncode == 0
    assert read_events(str(root), columns=["log_key"]).num_rows == rows.num_rows

    # purging again is a no-op: no record, nothing changes
    hashes = tree_hashes(root / "logs")
    r = cli("purge", "--session", "s1", "--yes", "--json", home=root)
    assert r.returncode == 0 and json.loads(r.stdout)["frames"] == 0 and json.loads(r.stdout)["purge_id"] is None
    assert tree_hashes(root / "logs") == hashes


def test_purged_frames_keep_length_and_offsets(agentlog_home: Path) -> None:
    log = write(agentlog_home, "s", 5, text="secret", project="p")
    before = Path(log.path).read_bytes()
    purge(str(agentlog_home), Selector(session="s"))
    after = Path(log.path).read_bytes()
    assert len(after) == len(before) and b"secret" not in after
    for old, new in zip(before.splitlines(keepends=True), after.splitlines(keepends=True)):
        assert len(old) == len(new) and is_purged(new)
        assert parse_any(old)[:3] == parse_any(new)[:3] and parse_any(new)[3]
        assert json.loads(new)["purged"]["kind"] == "tool_call_finished"
    # the writer goes on after purged frames
    write(agentlog_home, "s", 2, text="later", project="p")
    assert verify_log(log.path).status == "intact"


def test_purged_frame_without_a_record_is_a_break(agentlog_home: Path) -> None:
    log = write(agentlog_home, "s", 4, text="hide me", project="p")
    lines = Path(log.path).read_bytes().splitlines(keepends=True)
    seq, prev, digest, _ = parse_any(lines[2])
    stub = purged_line(seq, prev, digest, [b'{"purge_id":"forged"}'], len(lines[2]))
    assert stub is not None
    lines[2] = stub
    Path(log.path).write_bytes(b"".join(lines))
    r = verify_log(log.path)
    assert r.status == "broken"
    assert [(b.reason, b.line, b.frame) for b in r.breaks] == [("purged_without_record", 3, 2)]
    v = cli("verify", "--json", home=agentlog_home)
    assert v.returncode == 1


def test_interrupted_purge_completes_on_rerun(agentlog_home: Path) -> None:
    root = agentlog_home
    s = write(root, "s", 6, text="CANARY-int", project="p")
    assert seal_log(s.path, level=3).status == "sealed"
    write(root, "s", 3, text="CANARY-int", project="p")
    ingest(str(root))
    r = subprocess.run([sys.executable, "-m", "agentlog", "purge", "--session", "s", "--yes"], capture_output=True,
                       text=True, env={**os.environ, "AGENTLOG_HOME": str(root), "AGENTLOG_FAULT_PURGE": "recorded"})
    assert r.returncode == 75
    # the record came first: it names the frames, none of which is rewritten yet
    (rec,) = list(iter_records(str(root)))
    assert len(rec["frames"]) == 9
    assert files_holding(root / "logs" / "claude_code", b"CANARY-int")
    assert verify_log(s.path).status == "intact"
    # a later purge (even of something else) finishes it, under the same purge id
    out = purge(str(root), Selector(project="nothing-matches"))
    assert out.pending == 9 and out.purge_id is None
    assert files_holding(root, b"CANARY-int") == []
    assert len(list(iter_records(str(root)))) == 1
    rep = verify_log(s.path)
    assert rep.status == "intact" and rep.purged == 9
    assert json.loads(Path(s.path).read_bytes().splitlines()[0])["purged"]["purge_id"] == rec["purge_id"]

    # crash after the logs, before the store: the next purge deletes the rows
    write(root, "t", 3, text="CANARY-late", project="p")
    ingest(str(root))
    r = subprocess.run([sys.executable, "-m", "agentlog", "purge", "--session", "t", "--yes"], capture_output=True,
                       text=True, env={**os.environ, "AGENTLOG_HOME": str(root), "AGENTLOG_FAULT_PURGE": "rewritten"})
    assert r.returncode == 75
    assert "t" in read_events(str(root), columns=["log_key"]).column("log_key").to_pylist()
    out = purge(str(root), Selector(session="t"))
    assert out.frames == 0 and out.store_rows_deleted == 3
    assert files_holding(root, b"CANARY-late") == []


def test_dry_run_changes_nothing(agentlog_home: Path) -> None:
    root = agentlog_home
    s = write(root, "s", 5, text="dry", project="p")
    seal_log(s.path, level=3)
    write(root, "s", 2, text="dry", project="p")
    ingest(str(root))
    hashes = tree_hashes(root)
    r = cli("purge", "--project", "p", "--dry-run", home=root)
    assert r.returncode == 0, r.stderr
    assert "would purge 7 frames" in r.stderr
    assert tree_hashes(root) == hashes


def test_cli_usage_errors(agentlog_home: Path) -> None:
    assert cli("purge", "--yes", home=agentlog_home).returncode == 2
    assert cli("purge", "--session", "a", "--project", "b", "--yes", home=agentlog_home).returncode == 2
    r = cli("purge", "--before", "last tuesday", "--yes", home=agentlog_home)
    assert r.returncode == 2 and "ISO date" in r.stderr
    r = cli("purge", "--session", "a", home=agentlog_home)  # not a terminal, no --yes
    assert r.returncode == 2 and "--yes" in r.stderr
    r = cli("purge", "--retention", "--yes", home=agentlog_home)
    assert r.returncode == 1 and "retention_days" in r.stderr


def test_hook_appending_during_a_purge_still_chains(agentlog_home: Path) -> None:
    root = agentlog_home
    write(root, "s", 200, text="CANARY-busy " * 20, project="p")
    stop = threading.Event()
    appended = []

    def appender() -> None:
        log = SessionLog(str(root), "claude_code", "s", session_id="s")
        i = 0
        while not stop.is_set() and i < 200:
            log.append([event("s", 1000 + i, text="fresh", project="q", at=T0 + DAY)])
            appended.append(i)
            i += 1

    t = threading.Thread(target=appender)
    t.start()
    try:
        out = purge(str(root), Selector(project="p"))
    finally:
        stop.set()
        t.join()
    assert out.frames == 200
    rep = verify_log(str(root / "logs" / "claude_code" / "s.jsonl"))
    assert rep.status == "intact" and rep.purged == 200 and rep.frames == 200 + len(appended)
    assert files_holding(root, b"CANARY-busy") == []


def _maintain(root: str) -> None:
    """The daemon's maintain(), on a thread of its own as in the daemon (it lowers its thread's priority)."""
    from agentlog.operations.daemon import maintain

    t = threading.Thread(target=maintain, args=(root,))
    t.start()
    t.join()


def test_retention_via_config_and_daemon_maintain(agentlog_home: Path) -> None:
    maintain = _maintain

    root = agentlog_home
    import time

    now = time.time_ns() // 1000
    write(root, "old", 4, text="CANARY-old", project="p", at=now - 40 * DAY)
    write(root, "new", 4, text="still-here", project="p", at=now - DAY)
    ingest(str(root))
    maintain(str(root))  # retention_days 0: keep everything
    assert files_holding(root, b"CANARY-old")
    assert cli("config", "set", "retention_days", "30", home=root).returncode == 0
    maintain(str(root))
    assert files_holding(root, b"CANARY-old") == []
    assert files_holding(root, b"still-here")
    (rec,) = list(iter_records(str(root)))
    assert rec["selector"]["retention_days"] == 30
    assert cli("verify", home=root).returncode == 0
    r = cli("purge", "--retention", "--yes", "--json", home=root)
    assert r.returncode == 0 and json.loads(r.stdout)["frames"] == 0


def test_the_record_log_is_never_purged(agentlog_home: Path) -> None:
    root = agentlog_home
    write(root, "s", 2, text="x", project="p", at=T0)
    purge(str(root), Selector(session="s"))
    out = purge(str(root), Selector(before=T0 + 10**15))
    assert all(lg.log != PURGE_LOG for lg in out.logs)
    assert not any(is_purged(line) for line in Path(purge_log_path(str(root))).read_bytes().splitlines(keepends=True))
    assert sealed_segments(purge_log_path(str(root))) == []


@pytest.mark.parametrize("stub_fits", [True, False])
def test_purged_line_pads_or_refuses(stub_fits: bool) -> None:
    prev, digest = "a" * 64, "b" * 64
    n = 200 if stub_fits else 80
    line = purged_line(3, prev, digest, [b'{"purge_id":"x"}', b"{}"], n)
    if stub_fits:
        assert line is not None and len(line) == n and parse_any(line) == (3, prev, digest, True)
    else:
        assert line is None


def test_a_session_is_named_as_listings_print_it_and_an_unknown_one_is_refused(agentlog_home: Path) -> None:
    """Issue 27, finding 12: ``purge --session ses_…`` (the id every listing prints) found 0
    frames and said nothing more. Every id form works; an id that matches nothing is refused."""
    root = agentlog_home
    write(root, "s-ids", 4, text="CANARY-ids-qzxw", project="p")
    ingest(str(root))
    from agentlog.operations.refresh import run_sql

    (sid,) = run_sql(str(root), "select session_id from sessions").rows[0]
    for ident in (f"ses_{sid}", f"ses_{sid[:8]}", sid, "s-ids"):
        r = cli("purge", "--session", ident, "--dry-run", "--json", home=root)
        assert r.returncode == 0, (ident, r.stderr)
        assert json.loads(r.stdout)["frames"] == 4, ident
    r = cli("purge", "--session", "ses_ffffffff", "--dry-run", home=root)
    assert r.returncode == 1 and "no recorded session" in r.stderr
