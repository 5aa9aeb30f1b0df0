"""Where a team's tables live: ``s3://bucket/prefix`` or ``file:///path``.

Table ``T`` is the Delta table ``<url>/<T>``. For S3 the credentials come from the
standard AWS chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``,
``AWS_PROFILE`` and its config files, instance metadata), and ``AWS_ENDPOINT_URL`` names
an S3-compatible endpoint (MinIO, Cloudflare R2, moto's server in the tests). deltalake
(delta-rs 1.x) commits with S3's conditional writes (``If-None-Match``), so many
machines can publish at once with no lock service; docs/team.md gives the settings for
AWS S3, MinIO and R2. Plain ``http://`` endpoints are accepted only on loopback.

Every request has bounded timeouts and retries, so an unreachable endpoint is an error
in seconds, not minutes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from agentlog.team import TeamUsageError

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# object_store's client settings (delta-rs passes them through)
CLIENT_OPTIONS = {"connect_timeout": "5s", "timeout": "120s", "max_retries": "3", "retry_timeout": "30s"}


@dataclass(frozen=True)
class Location:
    url: str
    scheme: str
    """'s3' or 'file'."""
    bucket: str
    prefix: str
    """The key prefix (s3) or the absolute directory (file), without a trailing slash."""

    @classmethod
    def parse(cls, url: str) -> Location:
        """A team URL checked: ``s3://bucket[/prefix]`` or ``file:///absolute/path``."""
        text = (url or "").strip()
        if not text:
            raise TeamUsageError("no team URL: give --to/--from, or set one with `agentlog config set team_url s3://bucket/prefix`")
        parts = urlsplit(text)
        if parts.query or parts.fragment:
            raise TeamUsageError(f"not a team URL (no ?query or #fragment): {text}")
        if parts.scheme == "s3":
            if not parts.netloc or "@" in parts.netloc or ":" in parts.netloc:
                raise TeamUsageError(f"not an S3 URL (want s3://bucket/prefix): {text}")
            prefix = parts.path.strip("/")
            return cls(f"s3://{parts.netloc}" + (f"/{prefix}" if prefix else ""), "s3", parts.netloc, prefix)
        if parts.scheme == "file":
            if parts.netloc not in ("", "localhost"):
                raise TeamUsageError(f"a file URL names a local directory (file:///path), not {text}")
            path = os.path.abspath(unquote(parts.path))
            if not parts.path.startswith("/"):
                raise TeamUsageError(f"a file URL needs an absolute path (file:///path): {text}")
            return cls("file://" + path, "file", "", path.rstrip("/") or "/")
        raise TeamUsageError(f"a team URL is s3://bucket/prefix or file:///path, not {text}")

    def table_uri(self, name: str) -> str:
        """Where table ``name`` lives, as deltalake and Daft take it."""
        if self.scheme == "file":
            return os.path.join(self.prefix, name)
        return f"s3://{self.bucket}/{self.prefix + '/' if self.prefix else ''}{name}"

    def endpoint(self) -> str | None:
        """The S3 endpoint from ``AWS_ENDPOINT_URL`` (checked), or None for AWS itself."""
        if self.scheme != "s3":
            return None
        url = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if not url:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TeamUsageError(f"AWS_ENDPOINT_URL is not an http(s) URL: {url}")
        if parts.scheme == "http" and parts.hostname not in LOOPBACK:
            raise TeamUsageError(f"AWS_ENDPOINT_URL: plain http only to 127.0.0.1, localhost or ::1; use https:// ({url})")
        return url.rstrip("/")

    def storage_options(self) -> dict[str, str]:
        """deltalake's storage options: the client's timeouts, the endpoint, and plain http
        allowed for a loopback endpoint. Credentials stay in the environment, where
        delta-rs reads them itself (never copied into options, logs or errors)."""
        if self.scheme == "file":
            return {}
        opts = dict(CLIENT_OPTIONS)
        endpoint = self.endpoint()
        if endpoint is not None:
            opts["AWS_ENDPOINT_URL"] = endpoint
            if endpoint.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        if not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
            opts["AWS_REGION"] = "us-east-1"
        return opts

    def daft_io_config(self) -> Any:
        """Daft's IOConfig for these tables (the same endpoint, credentials and region)."""
        from daft.io import IOConfig, S3Config

        if self.scheme == "file":
            return IOConfig()
        endpoint = self.endpoint()
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        s3 = S3Config.from_env().replace(region_name=region)
        if endpoint is not None:
            s3 = s3.replace(endpoint_url=endpoint, use_ssl=endpoint.startswith("https://"))
        return IOConfig(s3=s3)


def describe_error(e: BaseException, where: str) -> str:
    """A storage error as one line: what failed and the store's reason, without the
    colours and the chain of retries delta-rs prints (and never a credential: those are
    not in it)."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    text = " ".join(text.replace("↳", " ").split())
    lowered = text.lower()
    if "403" in text or "accessdenied" in lowered or "forbidden" in lowered:
        why = "access denied (check the credentials and the bucket's permissions)"
    elif "invalidaccesskeyid" in lowered or "signaturedoesnotmatch" in lowered:
        why = "the credentials are not accepted"
    elif "nosuchbucket" in lowered or "bucket does not exist" in lowered:
        why = "no such bucket"
    elif any(w in lowered for w in ("timed out", "connection refused", "error sending request", "dns error",
                                    "tcp connect", "http error")):
        why = "the endpoint is unreachable"
    else:
        why = ""
    for marker in ("Error performing", "error sending request"):
        i = text.find(marker)
        if i > 0:
            text = text[:i].rstrip(" -:(") + " (" + text[i:i + 240].rstrip() + ")"
            break
    return f"{where}: {why + ' — ' if why else ''}{text[:500]}"
