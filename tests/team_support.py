"""Team tables for tests (issue 31): a real S3 API (moto's server in a subprocess on a
loopback port) and team tables built from data roots.

:func:`start_moto` starts the server and a bucket and points the AWS environment of
this process (and so of every CLI it starts) at it; :meth:`Moto.stop` ends it and puts
the environment back. :func:`build_team_tables` publishes a data root as a named machine;
:func:`s3_users` makes a writer and a read-only user on a server that checks keys.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from agentlog.bench.teamserve import S3Server, free_port

AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}
__all__ = ["AWS_ENV", "Moto", "build_team_tables", "closed_port", "free_port", "s3_users", "start_moto"]


@contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port that refuses connections for as long as the block runs: bound by this
    process but not listening, so no other test's server can take it meanwhile (a port that
    was merely free when asked for can be)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@dataclass
class Moto(S3Server):
    """The bench's S3 server (:class:`agentlog.bench.teamserve.S3Server`) with the tests' keys,
    and this process's AWS environment as it was before, put back by :meth:`stop`."""

    saved: dict[str, str | None] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach the server as it would reach S3."""
        return {**AWS_ENV, "AWS_ENDPOINT_URL": self.endpoint}

    def stop(self) -> None:
        super().stop()
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def start_moto(bucket: str = "team", *, free_requests: int | None = None) -> Moto:
    """moto's S3 server on a free loopback port, a bucket, and this process's AWS environment
    pointing at it (credentials ``test``; AWS_ENDPOINT_URL the server). ``free_requests``:
    moto checks keys and IAM policies, as S3 does, after that many requests (the bucket's
    creation is the first; :func:`s3_users` takes seven more)."""
    server = S3Server.start(None, bucket, {} if free_requests is None else
                            {"INITIAL_NO_AUTH_ACTION_COUNT": str(free_requests)})
    env = {**AWS_ENV, "AWS_ENDPOINT_URL": server.endpoint}
    moto = Moto(server.proc, server.port, bucket, {k: os.environ.get(k) for k in [*env, "AWS_PROFILE", "AWS_SESSION_TOKEN"]})
    os.environ.update(env)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    return moto


def build_team_tables(root: str, url: str, machine: str, host: str) -> dict[str, int]:
    """Publish the data root to the team tables at ``url`` as ``machine`` (its team id set to
    that name first; ``host`` is the machine's own name, kept for the callers' symmetry):
    rows written per table."""
    from agentlog.core.paths import ensure_dir, state_dir
    from agentlog.team.publish import publish

    ensure_dir(state_dir(root))
    with open(os.path.join(state_dir(root), "team-id"), "w", encoding="ascii") as f:
        f.write(machine + "\n")
    res = publish(root, url)
    del host
    return {"events": res.events, **res.tables}


def s3_users(moto: Moto) -> dict[str, dict[str, str]]:
    """On a server started with ``free_requests=8``: a user who may do anything in S3 and one
    who may only read; each one's environment (their keys)."""
    import json

    import boto3

    kw = {"endpoint_url": moto.endpoint, "region_name": "us-east-1", "aws_access_key_id": "setup",
          "aws_secret_access_key": "setup"}
    iam = boto3.client("iam", **kw)
    out: dict[str, dict[str, str]] = {}
    for user, actions in (("writer", "s3:*"), ("reader", ["s3:GetObject", "s3:ListBucket"])):
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        out[user] = {**moto.env, "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
    return out


HOSTILE: str = '<script>alert("team")</script>'
"""Stored text the team pages must show as text (a model's name, a project's directory)."""


def usage_transcript(projects: str, session: str, cwd: str, day: str, model: str, tokens: int) -> None:
    """A Claude Code transcript under ``projects`` with one priced response of ``model``."""
    import json

    record = {"type": "assistant", "sessionId": session, "uuid": f"{session}-u1", "timestamp": f"{day}T10:00:00Z",
              "cwd": cwd, "message": {"id": f"{session}-m1", "model": model, "role": "assistant",
                                      "content": [{"type": "text", "text": "ok"}],
                                      "usage": {"input_tokens": tokens, "output_tokens": tokens // 10,
                                                "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}}}
    path = os.path.join(projects, "-w", f"{session}.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def publish_two_machines(tmp: Any, url: str) -> dict[str, str]:
    """Two data roots recording the reference scenario through the hook path (the second with its
    own session ids), each with imported token usage (machine-b's in a project whose directory
    and model are :data:`HOSTILE`), published to ``url`` as machine-a and machine-b: their roots."""
    from agentlog.importers.run import import_paths
    from scenario import Scenario, _claude, _codex, build_reference, make_repo

    a, b = str(tmp / "a"), str(tmp / "b")
    build_reference(a, str(tmp / "work-a"))
    sc = Scenario(root=b, repo=make_repo(str(tmp / "work-b")), claude_session="claude-b-session",
                  codex_session="codex-b-session")
    _claude(sc)
    _codex(sc)
    usage_transcript(str(tmp / "ta"), "usage-a", str(tmp / "alpha"), "2026-11-01", "claude-sonnet-4-5-20250929", 1000)
    usage_transcript(str(tmp / "tb"), "usage-b", str(tmp / HOSTILE.replace("/", "")), "2026-11-03", HOSTILE, 500)
    import_paths(a, ["claude-code"], [str(tmp / "ta")])
    import_paths(b, ["claude-code"], [str(tmp / "tb")])
    build_team_tables(a, url, "machine-a", "host-a")
    build_team_tables(b, url, "machine-b", "host-b")
    return {"machine-a": a, "machine-b": b}


def set_team_url(root: str, url: str) -> None:
    """The data root's ``team_url`` setting (as `agentlog config set team_url URL` writes it)."""
    from agentlog.core.paths import config_file, ensure_dir

    ensure_dir(root)
    with open(config_file(root), "a", encoding="utf-8") as f:
        f.write(f'team_url = "{url}"\n')


def dashboard_team(tmp: Any) -> dict[str, Any]:
    """:func:`publish_two_machines` to ``file://<tmp>/tables``, with machine-a's data root's
    ``team_url`` set to them: the URL, its Location and both roots."""
    from agentlog.team.location import Location

    url = "file://" + str(tmp / "tables")
    roots = publish_two_machines(tmp, url)
    set_team_url(roots["machine-a"], url)
    return {"url": url, "loc": Location.parse(url), "roots": roots}
