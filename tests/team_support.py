"""Test support for the team tables: moto's S3 server as a real subprocess on a loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from vault_support import stop_process


@dataclass
class MotoServer:
    url: str
    proc: subprocess.Popen[bytes]

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach it as it would reach S3."""
        return {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": self.url}


@contextmanager
def start_moto(tmp: Path, *, free_requests: int | None = None) -> Iterator[MotoServer]:
    """``python -m moto.server`` on a free loopback port (its log in ``tmp``: a pipe nobody
    reads would stop it), stopped on exit. ``free_requests``: moto checks credentials and
    IAM policies after that many requests (the set-up's), as S3 does."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = open(tmp / "moto.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **({} if free_requests is None else
                                                  {"INITIAL_NO_AUTH_ACTION_COUNT": str(free_requests)})})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's server did not start: {(tmp / 'moto.log').read_text()[-800:]}")
                time.sleep(0.1)
        yield MotoServer(f"http://127.0.0.1:{port}", proc)
    finally:
        stop_process(proc)
        log.close()


def s3_users(server: MotoServer, bucket: str) -> dict[str, dict[str, str]]:
    """On a server started with ``free_requests=8``: ``bucket``, a user who may do anything
    in S3 and one who may only read; each one's environment (their keys)."""
    import json

    import boto3

    kw = {"endpoint_url": server.url, "region_name": "us-east-1", "aws_access_key_id": "setup",
          "aws_secret_access_key": "setup"}
    iam = boto3.client("iam", **kw)
    boto3.client("s3", **kw).create_bucket(Bucket=bucket)
    out: dict[str, dict[str, str]] = {}
    for user, actions in (("writer", "s3:*"), ("reader", ["s3:GetObject", "s3:ListBucket"])):
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        out[user] = {**server.env, "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
    return out
