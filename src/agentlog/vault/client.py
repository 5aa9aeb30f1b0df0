"""HTTP to a vault, for the machine and the admin CLI: one request at a time,
signed, JSON in and out; statuses are data, not errors.

Standard library ``http.client`` (one kept-alive connection per client), so
shipping needs no HTTP package at run time. Every request checks the URL rule
first (https, or http only to a loopback host): a vault URL changed to
``http://`` on another host is refused before anything is sent.
"""

from __future__ import annotations

import http.client
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

import orjson

from agentlog.vault import VaultError
from agentlog.vault.protocol import check_url

TIMEOUT = 30.0


class VaultUnreachable(VaultError):
    """The vault did not answer (connection refused, timeout, reset, TLS failure)."""


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes

    def json(self) -> Any:
        try:
            return orjson.loads(self.body)
        except ValueError:
            return None

    def short(self) -> str:
        """The status and the first 200 characters of the body, for an error line."""
        text = self.body[:200].decode("utf-8", "replace").replace("\n", " ")
        return f"HTTP {self.status}: {text}"


class Client:
    """Requests to one vault; signed when ``signer`` is given (a ``MachineKey``
    or ``AdminKey`` from ``vault.crypto``) as ``who`` (machine id or admin
    fingerprint)."""

    def __init__(self, url: str, signer: Any = None, who: str = "", *, admin: bool = False, timeout: float = TIMEOUT,
                 cafile: str | None = None) -> None:
        self.url = check_url(url)
        parts = urllib.parse.urlsplit(self.url)
        self.scheme = parts.scheme
        self.netloc = parts.netloc
        self.host = parts.hostname or ""
        self.port = parts.port
        self.base_path = parts.path.rstrip("/")
        self.signer = signer
        self.who = who
        self.admin = admin
        self.timeout = timeout
        self.cafile = cafile
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self.scheme == "https":
                self._conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                                         context=tls_context(self.cafile))
            else:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self._conn

    def request(self, method: str, path: str, payload: Any = None, *, query: str = "", signed: bool = True) -> Reply:
        """Send ``payload`` (JSON, or nothing) to ``/v1...`` ``path`` (already
        percent-encoded); raises VaultUnreachable when no answer comes."""
        check_url(self.url)
        body = b"" if payload is None else orjson.dumps(payload)  # compact; 10x the standard library on a batch
        full = self.base_path + path
        headers = {"Content-Type": "application/json", "Host": self.netloc}
        if signed and self.signer is not None:
            from agentlog.vault.crypto import request_headers

            headers.update(request_headers(self.signer, self.who, method, full, body, int(time.time()), admin=self.admin))
        target = full + ("?" + query if query else "")
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.request(method, target, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if resp.getheader("connection", "").lower() == "close":
                    self.close()
                return Reply(resp.status, data)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                self.close()  # a kept-alive connection the server closed: one fresh try
                if attempt:
                    raise VaultUnreachable(f"{self.url}: {e or type(e).__name__}") from None
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise VaultUnreachable(f"{self.url}: {e or type(e).__name__}") from None
        raise VaultUnreachable(self.url)  # pragma: no cover


def tls_context(cafile: str | None) -> ssl.SSLContext:
    """Certificates checked against the system's CAs (and ``SSL_CERT_FILE``), or only
    against ``cafile`` (the ``--ca`` given at enrolment) when there is one."""
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as e:
        raise VaultError(f"{cafile}: not a usable CA certificate file ({e})") from None


def error_text(reply: Reply) -> str:
    """The vault's ``error`` field when it sent one, else the short form."""
    d = reply.json()
    if isinstance(d, dict) and isinstance(d.get("error"), str):
        return f"HTTP {reply.status}: {d['error']}"
    return reply.short()
