"""Team tables for tests (issue 31): a real S3 API (moto's server in a subprocess on a
loopback port) and team tables built from data roots.

:func:`start_moto` starts the server and a bucket and points the AWS environment of
this process (and so of every CLI it starts) at it; :meth:`Moto.stop` ends it and puts
the environment back. :func:`build_team_tables` writes a data root's views as one
machine's rows of the team tables, as ``agentlog team publish`` does (its body is the
stand-in until publish lands, then a call to it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}
VIEWS = ("sessions", "turns", "tool_calls", "attempts", "usage")
DAY_OF = {"events": "observed_at", "sessions": "started_at", "turns": "started_at", "tool_calls": "started_at",
          "attempts": "started_at", "usage": "observed_at"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Moto:
    proc: subprocess.Popen[bytes]
    port: int
    bucket: str
    saved: dict[str, str | None] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_moto(bucket: str = "team") -> Moto:
    """moto's S3 server on a free loopback port, a bucket, and this process's AWS environment
    pointing at it (credentials ``test``; AWS_ENDPOINT_URL the server)."""
    import boto3

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {**AWS_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    moto = Moto(proc, port, bucket, {k: os.environ.get(k) for k in [*env, "AWS_PROFILE", "AWS_SESSION_TOKEN"]})
    os.environ.update(env)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                moto.stop()
                raise RuntimeError("moto's server did not start")
            time.sleep(0.1)
    boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return moto


def team_rows(table: Any, name: str, machine: str, host: str) -> Any:
    """A local view's rows as the team table holds them: the local ``machine``/``host`` replaced,
    ``day`` (the UTC day of the table's time; the epoch's when null) added."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keep = [c for c in table.column_names if c not in ("machine", "host", "day", "publisher")]
    out = table.select(keep)
    when = table.column(DAY_OF[name])
    if pa.types.is_timestamp(when.type) and when.type.tz is not None:
        when = pc.cast(when, pa.timestamp("us"))
    day = pc.fill_null(pc.cast(when, pa.date32()), pa.scalar(0, pa.date32()))
    n = table.num_rows
    return (out.append_column("machine", pa.array([machine] * n, pa.string()))
            .append_column("host", pa.array([host] * n, pa.string())).append_column("day", day))


def build_team_tables(root: str, url: str, machine: str, host: str) -> dict[str, int]:
    """Append the data root's events and views to the team tables at ``url`` as ``machine``
    (the store and projection brought up to date first); rows written per table."""
    from deltalake import write_deltalake

    from agentlog.operations.refresh import open_current
    from agentlog.team.location import Location

    loc = Location.parse(url)
    engine, _ = open_current(root)
    written: dict[str, int] = {}
    with engine:
        reads = {"events": "SELECT * EXCLUDE (content, raw, machine, host) FROM events"}
        reads.update({v: f"SELECT * FROM {v}" for v in VIEWS})
        for name, sql in reads.items():
            rows = team_rows(engine.arrow(sql), name, machine, host)
            write_deltalake(loc.table_uri(name), rows, mode="append", partition_by=["machine", "day"],
                            storage_options=loc.storage_options())
            written[name] = rows.num_rows
    return written
