"""This machine's enrolment with a vault: its key, its id, the vault's URL and
the pinned recipient set.

Everything lives under ``<data root>/vault/`` (0700), each file written whole
through a private temp file and a rename (0600)::

    machine.id        the id the vault gave this machine
    server            the vault's URL (no trailing /)
    host              the host name sent at enrolment (bound into every batch)
    recipients.json   the signed recipient set pinned at enrolment, re-pinned by each ship pass
    ca.pem            (``enroll --ca FILE``) the only CA the vault's TLS certificate is checked against
    machine.key       the Ed25519 seed (32 bytes), written LAST

``machine.key`` is written last, so an enrolment that stopped half-way never
looks complete: :func:`load` wants the key, and a new ``enroll`` overwrites
the other files. Nothing is written before the vault has answered and its
recipient set has the fingerprint the token names.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from agentlog.core.fileio import unlink_if_present, write_atomic
from agentlog.core.jsonio import dumps
from agentlog.core.paths import VAULT_KEY_NAME, ensure_dir, vault_dir, vault_enrolled
from agentlog.vault import VaultError
from agentlog.vault.client import Client, error_text
from agentlog.vault.protocol import b64e, check_url

KEY_FILE = VAULT_KEY_NAME
ID_FILE = "machine.id"
SERVER_FILE = "server"
HOST_FILE = "host"
RECIPIENTS_FILE = "recipients.json"
CA_FILE = "ca.pem"


def chains_dir(root: str) -> str:
    """``<data root>/vault/chains/<chain>/``: what is shipped of each chain."""
    return os.path.join(vault_dir(root), "chains")


def read_optional(path: str) -> bytes | None:
    """A file's bytes; None when it is not there."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


@dataclass
class Machine:
    """A complete enrolment, loaded."""

    root: str
    machine_id: str
    url: str
    host: str
    key: Any  # vault.crypto.MachineKey
    recipients: Any  # vault.crypto.SignedRecipientSet

    cafile: str | None = None

    def client(self) -> Client:
        return Client(self.url, self.key, self.machine_id, cafile=self.cafile)

    def pin(self, signed: Any) -> None:
        """Pin a new signed recipient set (already checked by the caller)."""
        write_atomic(os.path.join(vault_dir(self.root), RECIPIENTS_FILE), dumps(signed.to_json()))
        self.recipients = signed


def enrolled(root: str) -> bool:
    return vault_enrolled(root)


def load(root: str) -> Machine:
    """The enrolment under ``root``; VaultError when there is none (or it is damaged)."""
    from agentlog.vault.crypto import MachineKey, SignedRecipientSet

    d = vault_dir(root)
    seed = read_optional(os.path.join(d, KEY_FILE))
    if seed is None:
        raise VaultError(f"this machine is not enrolled with a vault ({d} holds no {KEY_FILE}); run `agentlog enroll URL TOKEN`")
    mid, url, host, rec = (read_optional(os.path.join(d, n)) for n in (ID_FILE, SERVER_FILE, HOST_FILE, RECIPIENTS_FILE))
    if mid is None or url is None or rec is None or len(seed) != 32:
        raise VaultError(f"the enrolment under {d} is incomplete or damaged; run `agentlog enroll URL TOKEN --rotate`")
    try:
        import json

        recipients = SignedRecipientSet.from_json(json.loads(rec))
    except (ValueError, KeyError, TypeError) as e:
        raise VaultError(f"{os.path.join(d, RECIPIENTS_FILE)}: not a signed recipient set ({e})") from None
    ca = os.path.join(d, CA_FILE)
    return Machine(root, mid.decode().strip(), url.decode().strip(), (host or b"").decode().strip() or _hostname(),
                   MachineKey.from_seed(seed), recipients, ca if os.path.exists(ca) else None)


def _hostname() -> str:
    return socket.gethostname() or "unknown-host"


def split_token(token: str) -> tuple[str, str]:
    """(recipient-set fingerprint, secret) of an enrolment token."""
    fp, dot, secret = token.strip().partition(".")
    if not dot or not secret or len(fp) != 64 or any(c not in "0123456789abcdef" for c in fp):
        raise VaultError("an enrolment token is '<recipient-set fingerprint (64 hex)>.<secret>' (from `agentlog vault admin token`)")
    return fp, secret


def read_ca(path: str | None) -> bytes | None:
    """The PEM bytes of a ``--ca`` file (checked to load as CA certificates), or None."""
    if path is None:
        return None
    from agentlog.vault.client import tls_context

    tls_context(path)
    with open(path, "rb") as f:
        return f.read()


def enroll(root: str, url: str, token: str, *, rotate: bool = False, host: str | None = None,
           ca: str | None = None) -> Machine:
    """Enrol this machine (see the module docstring); returns the new enrolment."""
    from agentlog.vault.crypto import MachineKey, SignedRecipientSet

    url = check_url(url)
    fp, _secret = split_token(token)
    d = vault_dir(root)
    if enrolled(root) and not rotate:
        raise VaultError(f"already enrolled ({d}); pass --rotate to enrol again with a new key")
    host = host or _hostname()
    ca_pem = read_ca(ca)
    key = MachineKey.generate()
    payload = {"token": token.strip(), "public_key": b64e(key.public), "host": host, "rotate": rotate}
    with Client(url, cafile=ca) as c:
        reply = c.request("POST", "/v1/enroll", payload, signed=False)
    if reply.status != 201:
        raise VaultError(f"the vault refused the enrolment ({error_text(reply)})")
    body = reply.json()
    try:
        mid = body["machine_id"]
        signed = SignedRecipientSet.from_json(body["recipients"])
    except (KeyError, TypeError, ValueError) as e:
        raise VaultError(f"the vault's enrolment answer is not understood ({e})") from None
    if not isinstance(mid, str) or not mid or "/" in mid or "\n" in mid:
        raise VaultError(f"the vault sent an unusable machine id {mid!r}")
    got = signed.set.fingerprint()
    if got != fp:
        raise VaultError(f"the vault's recipient set {got} is not the one the token names ({fp}); nothing was written")
    _check_self_signed(signed)
    ensure_dir(d)
    os.chmod(d, 0o700)
    write_atomic(os.path.join(d, ID_FILE), mid.encode() + b"\n")
    write_atomic(os.path.join(d, SERVER_FILE), url.encode() + b"\n")
    write_atomic(os.path.join(d, HOST_FILE), host.encode() + b"\n")
    write_atomic(os.path.join(d, RECIPIENTS_FILE), dumps(signed.to_json()))
    ca_path = os.path.join(d, CA_FILE)
    if ca_pem is not None:
        write_atomic(ca_path, ca_pem)
    else:
        unlink_if_present(ca_path)
    write_atomic(os.path.join(d, KEY_FILE), key.seed)
    return Machine(root, mid, url, host, key, signed, ca_path if ca_pem is not None else None)


def _check_self_signed(signed: Any) -> None:
    """The first set has no pinned set to check against: its signer must be in it
    and the signature must verify (the token's fingerprint vouches for the set)."""
    from agentlog.vault import VaultCryptoError

    try:
        signed.check(signed.set)
    except VaultCryptoError as e:
        raise VaultError(f"the vault's recipient set is not signed by one of its admins ({e}); nothing was written") from None


def reachability(root: str) -> tuple[bool, str]:
    """Whether the vault this machine is enrolled with answers a signed request
    (`agentlog doctor`); (True, detail) or (False, why)."""
    from agentlog.vault.client import VaultUnreachable

    m = load(root)
    try:
        with m.client() as c:
            reply = c.request("GET", "/v1/recipients")
    except VaultUnreachable as e:
        return False, f"{m.url} unreachable ({e})"
    if reply.status != 200:
        return False, f"{m.url} answers but refuses this machine ({error_text(reply)})"
    return True, f"{m.url} reachable as {m.machine_id}"
