"""`agentlog status`: counts from metadata, lag, breaks, catch-up before answering."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from agentlog.cli import cli
from agentlog.core.fastjson import dumps_bytes
from agentlog.log.writer import open_session_log


def _event(i: int, sid: str) -> bytes:
    t = 1_790_000_000_000_000 + i * 1_000_000
    return dumps_bytes(
        {
            "event_id": f"01900000-0000-7000-8000-{i:012d}",
            "schema_version": 1,
            "kind": "prompt_submitted",
            "provider": "claude_code",
            "provider_event_name": "UserPromptSubmit",
            "observed_at": t,
            "captured_at": t,
            "capture_mode": "full",
            "agentlog_version": "0.1.0",
            "provider_session_id": sid,
            "content": {"prompt": f"prompt number {i}"},
        }
    )


def _write(home: Path, sid: str, start: int, n: int) -> str:
    log = open_session_log(str(home), "claude_code", sid)
    log.append([_event(start + i, sid) for i in range(n)])
    return log.path


def _status(*args: str) -> tuple[int, dict]:
    r = CliRunner().invoke(cli, ["status", "--json", *args])
    return r.exit_code, json.loads(r.stdout)


def test_no_ingest_shows_the_lag_then_status_catches_up(agentlog_home: Path) -> None:
    _write(agentlog_home, "a", 0, 5)
    _write(agentlog_home, "b", 100, 3)
    code, st = _status("--no-ingest")
    assert code == 0
    assert st["sessions"] == 2 and st["events"] == 0 and st["lag_logs"] == 2 and st["lag_bytes"] > 0
    assert st["caught_up"] is None and st["last_ingest_at"] is None
    code, st = _status()
    assert code == 0
    assert st["caught_up"]["events"] == 8
    assert st["events"] == 8 and st["lag_logs"] == 0 and st["lag_bytes"] == 0
    assert st["last_ingest_at"] is not None and st["table_version"] == 0
    assert st["files_by_component"]["store data"] >= 1 and st["bytes_by_component"]["logs"] > 0
    _write(agentlog_home, "a", 5, 2)  # the log grows: lag again, then caught up again
    assert _status("--no-ingest")[1]["lag_logs"] == 1
    assert _status()[1]["events"] == 10


def test_a_broken_log_is_reported_and_exits_1(agentlog_home: Path) -> None:
    bad = _write(agentlog_home, "bad", 0, 4)
    _write(agentlog_home, "good", 10, 4)
    raw = bytearray(Path(bad).read_bytes())
    raw[40] ^= 1  # inside frame 0's prev hash
    Path(bad).write_bytes(bytes(raw))
    code, st = _status()
    assert code == 1
    assert len(st["breaks"]) == 1 and "bad" in json.dumps(st["breaks"][0])
    assert st["events"] == 4  # the good log was ingested
