"""``agentlog team publish``: exactly once, concurrent publishers, crashes, errors and
``--metadata-only``, against a real S3 API (moto's server on a loopback port) and files.

Sessions are recorded through the real capture path (``scenario.write``), ingested and
projected by publish itself; each publisher is its own data root (its own machine)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenario import BASE_US, SECOND, write

CANARY = "team-canary-7f3e9a"


def session(root: Path, sid: str, t0: int, n: int = 2, canary: str = CANARY) -> None:
    """A Claude Code session of ``n`` Bash calls (one failing), its prompt and commands
    carrying ``canary``."""
    cwd = root.parent / f"work-{sid}"
    cwd.mkdir(parents=True, exist_ok=True)
    base = {"session_id": sid, "transcript_path": f"/tmp/{sid}.jsonl", "cwd": str(cwd)}
    at = BASE_US + t0 * SECOND
    steps: list[dict[str, Any]] = [{"hook_event_name": "SessionStart", "source": "startup"},
                                   {"hook_event_name": "UserPromptSubmit", "prompt": f"build it {canary}"}]
    for i in range(n):
        cmd = {"command": f"make target-{i} TOKEN={canary}"}
        tid = f"tu-{sid}-{t0}-{i}"
        steps.append({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": tid, "tool_input": cmd})
        if i % 2:
            steps.append({"hook_event_name": "PostToolUseFailure", "tool_name": "Bash", "tool_use_id": tid,
                          "tool_input": cmd, "error": f"exit 2: {canary} not found"})
        else:
            steps.append({"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": tid,
                          "tool_input": cmd, "tool_response": {"stdout": f"ok {canary}"}})
    steps.append({"hook_event_name": "Stop", "stop_hook_active": False})
    for k, payload in enumerate(steps):
        write(str(root), "claude-code", {**base, **payload}, at + k * SECOND, str(cwd))


def publish_py(root: Path, url: str, *extra: str, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``agentlog team publish`` in its own process on data root ``root``."""
    e = {**os.environ, **(env or {}), "AGENTLOG_HOME": str(root)}
    return subprocess.run([sys.executable, "-m", "agentlog", "team", "publish", "--to", url, "--json", *extra],
                          env=e, capture_output=True, text=True, timeout=timeout)


def team_rows(url: str, table: str, env: dict[str, str]) -> Any:
    """Every row of a team table (a pyarrow Table), read with the publisher's settings."""
    from deltalake import DeltaTable

    from agentlog.team.location import Location

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        loc = Location.parse(url)
        return DeltaTable(loc.table_uri(table), storage_options=loc.storage_options()).to_pyarrow_table()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def local_event_ids(root: Path) -> set[str]:
    from agentlog.query.engine import Engine
    from agentlog.store.ingest import ingest

    ingest(str(root))
    with Engine(str(root), projection=False) as eng:
        return set(eng.arrow("SELECT event_id FROM events").column("event_id").to_pylist())


# -- S3 -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    from team_support import start_moto

    server = start_moto("publish-tests")
    try:
        yield server.env
    finally:
        server.stop()


def bucket(s3: dict[str, str], name: str) -> str:
    import boto3

    boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], region_name="us-east-1",
                 aws_access_key_id=s3["AWS_ACCESS_KEY_ID"],
                 aws_secret_access_key=s3["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket=name)
    return f"s3://{name}/team"


def test_publish_to_files_is_exactly_once_and_incremental(tmp_path: Path) -> None:
    root = tmp_path / "m1" / "home"
    session(root, "s1", 0)
    url = f"file://{tmp_path / 'team'}"
    r = publish_py(root, url)
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    assert first["events"] == len(local_event_ids(root)) > 0 and first["tables"]["sessions"] == 1
    again = json.loads(publish_py(root, url).stdout)
    assert again["events"] == 0 and again["commits"] == 0 and "sessions" in again["unchanged"]
    session(root, "s2", 100)
    third = json.loads(publish_py(root, url).stdout)
    events = team_rows(url, "events", {})
    ids = events.column("event_id").to_pylist()
    assert sorted(ids) == sorted(local_event_ids(root)) and len(ids) == len(set(ids))
    assert third["events"] == len(ids) - first["events"] and third["tables"]["sessions"] == 2
    assert set(events.column("machine").to_pylist()) == {first["publisher"]}
    assert team_rows(url, "sessions", {}).num_rows == 2


def test_three_publishers_five_rounds_at_once_every_event_once(tmp_path: Path, s3: dict[str, str]) -> None:
    url = bucket(s3, "three")
    roots = [tmp_path / f"m{k}" / "home" for k in range(3)]
    for rnd in range(5):
        for k, root in enumerate(roots):
            session(root, f"r{rnd}-m{k}", rnd * 100 + k, n=2 + rnd % 2)
        env = {**os.environ, **s3}
        procs = [subprocess.Popen([sys.executable, "-m", "agentlog", "team", "publish", "--to", url, "--json"],
                                  env={**env, "AGENTLOG_HOME": str(root)}, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for root in roots]
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err
    events = team_rows(url, "events", s3)
    ids = events.column("event_id").to_pylist()
    want = set().union(*(local_event_ids(r) for r in roots))
    assert len(ids) == len(set(ids)) and set(ids) == want
    sessions = team_rows(url, "sessions", s3)
    assert sessions.num_rows == 15 and len(set(sessions.column("session_id").to_pylist())) == 15
    assert len(set(events.column("machine").to_pylist())) == 3


def _kill_rounds(tmp_path: Path, s3: dict[str, str], rounds: int) -> None:
    """Seeded: a publisher killed (SIGKILL) at a random moment of its run, again and again,
    then one run to the end: every event once, and the table readable at every step."""
    rng = random.Random(20261207)
    url = bucket(s3, f"kill{rounds}")
    root = tmp_path / "k" / "home"
    env = {**os.environ, **s3, "AGENTLOG_HOME": str(root)}
    argv = [sys.executable, "-m", "agentlog", "team", "publish", "--to", url, "--json", "--batch-rows", "7"]
    for rnd in range(rounds):
        session(root, f"k{rnd}", rnd * 50, n=3)
        p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 2.5))
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.wait()
        try:
            ids = team_rows(url, "events", s3).column("event_id").to_pylist()
        except Exception as e:  # no table yet: killed before its first commit
            assert "no files" in str(e).lower() or "not a delta table" in str(e).lower() or "not found" in str(e).lower(), e
            continue
        assert len(ids) == len(set(ids)), f"round {rnd}: a batch was published twice"
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ids = team_rows(url, "events", s3).column("event_id").to_pylist()
    assert len(ids) == len(set(ids)) and set(ids) == local_event_ids(root)


def test_kill_9_of_a_publisher_mid_commit(tmp_path: Path, s3: dict[str, str]) -> None:
    _kill_rounds(tmp_path, s3, 4)


@pytest.mark.slow
def test_kill_9_of_a_publisher_mid_commit_20_rounds(tmp_path: Path, s3: dict[str, str]) -> None:
    _kill_rounds(tmp_path, s3, 20)


def test_metadata_only_leaves_no_content_anywhere_in_the_bucket(tmp_path: Path, s3: dict[str, str]) -> None:
    import boto3

    url = bucket(s3, "meta")
    root = tmp_path / "mo" / "home"
    session(root, "mo1", 0, n=3)
    r = publish_py(root, url, "--metadata-only", env=s3)
    assert r.returncode == 0, r.stderr
    events = team_rows(url, "events", s3)
    assert events.num_rows > 0
    for gone in ("event", "text", "attrs", "paths", "project_root", "project_remote", "command_key"):
        assert gone not in events.column_names
    for name, cols in (("turns", ("objective",)), ("tool_calls", ("result_summary", "first_error", "paths")),
                       ("attempts", ("objective", "note"))):
        assert not set(cols) & set(team_rows(url, name, s3).column_names)
    client = boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"], region_name="us-east-1",
                          aws_access_key_id=s3["AWS_ACCESS_KEY_ID"], aws_secret_access_key=s3["AWS_SECRET_ACCESS_KEY"])
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket="meta")
            for o in page.get("Contents", [])]
    assert keys
    import zstandard

    for key in keys:
        body = client.get_object(Bucket="meta", Key=key)["Body"].read()
        assert CANARY.encode() not in body, key
        if key.endswith(".parquet"):  # look inside compressed pages too
            import pyarrow.parquet as pq

            table = pq.read_table(__import__("io").BytesIO(body))
            assert CANARY not in json.dumps(table.to_pylist(), default=str), key
    del zstandard


def test_unreachable_endpoint_is_a_clear_error_and_changes_nothing(tmp_path: Path) -> None:
    import socket

    root = tmp_path / "u" / "home"
    session(root, "u1", 0)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    started = time.monotonic()
    r = publish_py(root, "s3://nowhere/team", env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "unreachable" in r.stderr, r.stderr
    assert time.monotonic() - started < 60
    state = root / "state" / "team"
    assert not state.exists() or not [p for p in state.glob("*.json")
                                      if json.loads(p.read_text()).get("n")], "no batch recorded as published"


def test_plain_http_to_a_remote_endpoint_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "h" / "home"
    root.mkdir(parents=True)
    r = publish_py(root, "s3://b/team", env={"AWS_ENDPOINT_URL": "http://192.0.2.1:9000"})
    assert r.returncode != 0 and "plain http only" in r.stderr and "Traceback" not in r.stderr


def test_a_table_with_a_newer_column_still_takes_this_publishers_rows(tmp_path: Path) -> None:
    """A newer agentlog added a column: this one's appends and replacements go on (the
    column is null in its rows), and nothing local changes."""
    import pyarrow as pa
    from deltalake import write_deltalake

    url = f"file://{tmp_path / 'team'}"
    a, b = tmp_path / "a" / "home", tmp_path / "b" / "home"
    session(a, "a1", 0)
    session(b, "b1", 10)
    first = publish_py(a, url)
    assert first.returncode == 0, first.stderr
    newer = team_rows(url, "sessions", {}).slice(0, 1)
    newer = newer.append_column("from_the_future", pa.array(["x"], pa.string()))
    newer = newer.set_column(newer.column_names.index("publisher"), "publisher", pa.array(["m-future"], pa.string()))
    write_deltalake(str(tmp_path / "team" / "sessions"), newer, mode="append", schema_mode="merge",
                    partition_by=["machine", "day"])
    r = publish_py(b, url)
    assert r.returncode == 0, r.stderr
    sessions = team_rows(url, "sessions", {})
    assert "from_the_future" in sessions.column_names
    assert sorted(sessions.column("publisher").to_pylist()) == sorted(
        [json.loads(first.stdout)["publisher"], json.loads(r.stdout)["publisher"], "m-future"])


def test_the_vault_admin_publishes_what_it_pulled_under_each_machine(tmp_path: Path) -> None:
    """Two machines ship to a vault; the admin pulls and publishes metadata only: every
    event under the machine that recorded it, no content."""
    from vault_support import agentlog, start_vault

    v = start_vault(tmp_path)
    try:
        homes = [tmp_path / "a" / "home", tmp_path / "b" / "home"]
        for k, home in enumerate(homes):
            session(home, f"v{k}", k * 100, n=3)
            v.enroll(home, f"host-{k}")
            r = agentlog(home, "ship")
            assert r.returncode == 0, r.stderr
        url = f"file://{tmp_path / 'team'}"
        r = v.admin("publish", "--into", str(tmp_path / "pulled"), "--to", url, "--metadata-only", "--json")
        out = json.loads(r.stdout)
        machines = {m["machine_id"]: m["host"] for m in json.loads(v.admin("machines", "--json").stdout)}
        events = team_rows(url, "events", {})
        assert events.num_rows == sum(len(local_event_ids(h)) for h in homes) == out["published"][0]["events"]
        assert set(events.column("machine").to_pylist()) == set(machines)
        assert {m: h for m, h in zip(events.column("machine").to_pylist(), events.column("host").to_pylist())} == machines
        assert "event" not in events.column_names
        sessions = team_rows(url, "sessions", {})
        assert sorted(sessions.column("machine").to_pylist()) == sorted(machines)
        again = json.loads(v.admin("publish", "--into", str(tmp_path / "pulled"), "--to", url, "--metadata-only",
                                   "--json").stdout)
        assert again["published"][0]["events"] == 0
        full = v.admin("publish", "--into", str(tmp_path / "pulled"), "--to", url, check=False)
        assert full.returncode != 0 and "holds metadata-only rows" in full.stderr and "Traceback" not in full.stderr
        assert "event" not in team_rows(url, "events", {}).column_names
    finally:
        v.stop()


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the data root but publish's own state and lock."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "team" not in p.relative_to(root).parts and p.name != "team-id"}


def test_wrong_credentials_and_a_bucket_without_write_access(tmp_path: Path) -> None:
    """moto checking keys and IAM policies as S3 does: a wrong key and a read-only user each
    get a clear error, nothing is published, nothing local changes; the writer succeeds."""
    from team_support import s3_users, start_moto

    server = start_moto("guarded", free_requests=8)
    try:
        users = s3_users(server)
        root = tmp_path / "g" / "home"
        session(root, "g1", 0)
        subprocess.run([sys.executable, "-m", "agentlog", "sql", "select count(*) from attempts"],
                       env={**os.environ, "AGENTLOG_HOME": str(root)}, capture_output=True, timeout=120)
        # caught up (ingested and projected): publish then finds nothing local to do
        before = _snapshot(root)
        url = "s3://guarded/team"
        wrong = {**server.env, "AWS_ACCESS_KEY_ID": "AKIAWRONGWRONG", "AWS_SECRET_ACCESS_KEY": "nope"}
        for env in (wrong, users["reader"]):
            r = publish_py(root, url, env=env)
            assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
            assert "access denied" in r.stderr or "privileges" in r.stderr, r.stderr
            assert _snapshot(root) == before
        r = publish_py(root, url, env=users["writer"])
        assert r.returncode == 0, r.stderr
        assert team_rows(url, "events", users["writer"]).num_rows == json.loads(r.stdout)["events"] > 0
    finally:
        server.stop()


@pytest.mark.quick
def test_the_read_ahead_hands_over_every_batch_in_order_raises_a_read_error_and_stops_early() -> None:
    """The publish reads the next commit's rows while it writes this one: every batch arrives, in
    order; an error in the read reaches the writer; a writer that stops midway stops the reader."""
    import threading

    import pyarrow as pa

    from agentlog.team.publish import _Prefetch

    schema = pa.schema([("n", pa.int64())])

    def batches(fail_at: int | None, count: int = 50) -> Any:
        for i in range(count):
            if i == fail_at:
                raise RuntimeError("the store went away")
            yield pa.record_batch([pa.array([i, i])], schema=schema)

    with _Prefetch(pa.RecordBatchReader.from_batches(schema, batches(None)), 3) as got:
        assert [b.column(0)[0].as_py() for b in got] == list(range(50))
    with pytest.raises(RuntimeError, match="went away"):
        with _Prefetch(pa.RecordBatchReader.from_batches(schema, batches(7)), 2) as got:
            for _ in got:
                pass
    before = threading.active_count()
    with _Prefetch(pa.RecordBatchReader.from_batches(schema, batches(None, 10_000)), 2) as got:
        next(iter(got))
    assert threading.active_count() == before  # the reader thread ended with the block


@pytest.mark.quick
@settings(max_examples=40, deadline=None)
@given(days=st.lists(st.integers(1, 90), min_size=1, max_size=12), read=st.integers(8, 40),
       batch_rows=st.integers(5, 60), data=st.data())
def test_commits_hold_whole_days(days: list[int], read: int, batch_rows: int, data: st.DataObject) -> None:
    """The store hands over rows of neighbouring days out of order: commits still hold whole
    days (a day of at most twice batch_rows is in exactly one commit), each commit but the
    last at least batch_rows rows, every row exactly once."""
    import pyarrow as pa

    from agentlog.team.publish import _day_cut

    day_us = 86_400 * 10**6
    times = [d * day_us + i for d, n in enumerate(days) for i in range(n)]
    # neighbouring days interleaved, as a parallel scan hands them over: swap some rows of
    # adjacent days
    for _ in range(data.draw(st.integers(0, 10))):
        if len(times) > 1:
            i = data.draw(st.integers(0, len(times) - 2))
            if abs(times[i] // day_us - times[i + 1] // day_us) <= 1:
                times[i], times[i + 1] = times[i + 1], times[i]
    ts = pa.timestamp("us", tz="UTC")
    schema = pa.schema([("observed_at", ts)])
    batches = [pa.record_batch([pa.array(times[i:i + read], ts)], schema=schema) for i in range(0, len(times), read)]
    commits = [[t for b in held for t in b.column(0).cast(pa.int64()).to_pylist()]
               for held in _day_cut(iter(batches), batch_rows)]
    assert sorted(t for c in commits for t in c) == sorted(times)
    assert all(len(c) >= batch_rows for c in commits[:-1])
    for n, d in enumerate(days):
        if d < 2 * batch_rows:
            assert len([c for c in commits if any(t // day_us == n for t in c)]) == 1, (n, d)


@pytest.mark.quick
@settings(max_examples=60, deadline=None)
@given(days=st.lists(st.integers(0, 4), min_size=1, max_size=200), max_runs=st.sampled_from([1, 3, 64]))
def test_a_batch_split_by_day_keeps_every_row_in_order(days: list[int], max_runs: int) -> None:
    """Each day's rows of a batch, in the batch's order, whether cut into slices (a few runs of
    a day) or sorted by day first (interleaved rows): the same as a filter per day."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from agentlog.team import publish as P

    batch = pa.record_batch({"day": pa.array(days, pa.int32()), "row": pa.array(range(len(days)), pa.int64()),
                             "event": pa.array([f'{{"n":{i}}}' for i in range(len(days))], pa.string())})
    old = P._MAX_RUNS
    P._MAX_RUNS = max_runs
    try:
        parts = P._split_by_day(batch, batch.column("day"))
    finally:
        P._MAX_RUNS = old
    got: dict[int, list[int]] = {}
    for day, part in parts:
        assert set(part.column("day").to_pylist()) == {day}
        got.setdefault(day, []).extend(part.column("row").to_pylist())
    want = {d: batch.filter(pc.equal(batch.column("day"), d)).column("row").to_pylist() for d in set(days)}
    assert got == want
