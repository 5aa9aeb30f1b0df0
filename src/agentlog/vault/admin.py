"""The admin side: the admin key and the signed requests an admin makes.

The admin directory (default ``<data root>/vault-admin/``, 0700) holds::

    server           the vault's URL
    recipients.json  the last recipient set this admin saw or signed
    ca.pem           (``--ca FILE`` at init/keygen) the only CA the vault's TLS certificate is checked against
    admin.key        the 32-byte seed (0600), written before the bootstrap request so a
                     key the vault accepted is never lost; removed again if the vault refuses

Every request is signed with the admin key (``X-Agentlog-Admin``). Adding an
admin signs a new recipient set (version + 1) and then re-wraps every chain
key for the new admin: for each chain and key epoch, this admin's wrap is
fetched, opened and sealed again to the new admin's key. Removing one signs a
set without it; the vault deletes its wraps. Any new set (add, remove, or
``rekey``, which signs the same admins again) makes each machine start a new
key epoch on every chain at its next batch, so a removed admin cannot read
what is shipped later even on chains it could read before.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from agentlog.core.fileio import unlink_if_present, write_atomic
from agentlog.core.jsonio import dumps
from agentlog.core.paths import data_root, ensure_dir
from agentlog.vault import VaultError
from agentlog.vault.client import Client, error_text
from agentlog.vault.machine import read_optional
from agentlog.vault.protocol import chain_path, check_url

KEY_FILE = "admin.key"
SERVER_FILE = "server"
RECIPIENTS_FILE = "recipients.json"
CA_FILE = "ca.pem"


def default_dir() -> str:
    return os.path.join(data_root(), "vault-admin")


@dataclass
class Admin:
    dir: str
    url: str
    key: Any  # vault.crypto.AdminKey

    @property
    def fingerprint(self) -> str:
        return str(self.key.fingerprint)

    @property
    def cafile(self) -> str | None:
        ca = os.path.join(self.dir, CA_FILE)
        return ca if os.path.exists(ca) else None

    def client(self) -> Client:
        return Client(self.url, self.key, self.fingerprint, admin=True, cafile=self.cafile)

    def call(self, method: str, path: str, payload: Any = None, *, query: str = "", ok: tuple[int, ...] = (200,),
             client: Client | None = None) -> Any:
        """A signed request; its JSON answer, or VaultError naming the status."""
        if client is None:
            with self.client() as c:
                reply = c.request(method, path, payload, query=query)
        else:
            reply = client.request(method, path, payload, query=query)
        if reply.status not in ok:
            raise VaultError(f"{method} {path}: {error_text(reply)}")
        return reply.json()

    def current_set(self) -> Any:
        """The vault's current signed recipient set (``GET /v1/admin/recipients``), checked
        against the set kept here the way a machine checks a new set: each set since the
        kept one must be signed by an admin of the set before it, its version not lower.
        Without a kept set (a key from ``keygen``) the history is checked from version 1,
        whose one admin signs itself: trust on first use. A vault that hands out a set no
        admin signed (to have this admin sign a key of its own into the next one) is refused."""
        from agentlog.vault import VaultCryptoError
        from agentlog.vault.crypto import SignedRecipientSet

        def parse(d: Any) -> Any:
            try:
                return SignedRecipientSet.from_json(d)
            except (VaultError, KeyError, TypeError, ValueError) as e:
                raise VaultError(f"the vault's recipient set is not understood ({e})") from None

        with self.client() as c:
            current = parse(self.call("GET", "/v1/admin/recipients", client=c))
            raw = read_optional(os.path.join(self.dir, RECIPIENTS_FILE))
            kept = parse(json.loads(raw)) if raw is not None else None
            if kept is None or current.to_json() != kept.to_json():
                since = kept.set.version if kept is not None else 0
                d = self.call("GET", "/v1/admin/recipients", query=f"since={since}", client=c)
                sets = [parse(x) for x in (d.get("sets") if isinstance(d, dict) else None) or []]
                try:
                    pinned = kept
                    for s in sets:
                        s.check(pinned.set if pinned is not None else s.set)
                        if pinned is None and (s.set.version != 1 or len(s.set.admins) != 1):
                            raise VaultCryptoError("the vault's first recipient set is not one admin at version 1")
                        pinned = s
                except VaultCryptoError as e:
                    raise VaultError(f"the vault's recipient sets do not follow from {self.dir}'s: {e}") from None
                if pinned is None or pinned.to_json() != current.to_json():
                    raise VaultError("the vault's recipient-set history does not end in its current set")
        if self.key.public not in current.set.admins:
            raise VaultError(f"{self.fingerprint} is not an admin in the vault's recipient set")
        self._keep(current)
        return current

    def _keep(self, signed: Any) -> None:
        write_atomic(os.path.join(self.dir, RECIPIENTS_FILE), dumps(signed.to_json()))

    def put_set(self, admins: list[bytes], version: int) -> Any:
        from agentlog.vault.crypto import RecipientSet, SignedRecipientSet

        signed = SignedRecipientSet.sign(RecipientSet(tuple(admins), version), self.key)
        self.call("PUT", "/v1/admin/recipients", signed.to_json())
        self._keep(signed)
        return signed


def load(directory: str | None = None) -> Admin:
    from agentlog.vault.crypto import AdminKey

    d = directory or default_dir()
    seed = read_optional(os.path.join(d, KEY_FILE))
    url = read_optional(os.path.join(d, SERVER_FILE))
    if seed is None or url is None:
        raise VaultError(f"no admin key in {d}; run `agentlog vault admin init URL BOOTSTRAP_TOKEN` (or pass --dir)")
    if len(seed) != 32:
        raise VaultError(f"{os.path.join(d, KEY_FILE)} is not a 32-byte admin key")
    return Admin(d, url.decode().strip(), AdminKey.from_seed(seed))


def keygen(url: str, directory: str | None = None, ca: str | None = None) -> Admin:
    """An admin key for a vault that already has admins: an existing admin adds its
    public key (`vault admin add`) before it can do anything."""
    from agentlog.vault.crypto import AdminKey

    url = check_url(url)
    d = directory or default_dir()
    if os.path.exists(os.path.join(d, KEY_FILE)):
        raise VaultError(f"{d} already holds an admin key; pass another --dir")
    from agentlog.vault.machine import read_ca

    ca_pem = read_ca(ca)
    key = AdminKey.generate()
    ensure_dir(d)
    os.chmod(d, 0o700)
    write_atomic(os.path.join(d, SERVER_FILE), url.encode() + b"\n")
    if ca_pem is not None:
        write_atomic(os.path.join(d, CA_FILE), ca_pem)
    write_atomic(os.path.join(d, KEY_FILE), key.seed)
    return Admin(d, url, key)


def init(url: str, bootstrap_token: str, directory: str | None = None, ca: str | None = None) -> Admin:
    """Make the vault's first admin: a new key (:func:`keygen`), and a version-1 set of just this admin."""
    from agentlog.vault.crypto import RecipientSet, SignedRecipientSet

    admin = keygen(url, directory, ca)
    signed = SignedRecipientSet.sign(RecipientSet((admin.key.public,), 1), admin.key)
    try:
        with Client(admin.url, cafile=admin.cafile) as c:
            reply = c.request("POST", "/v1/admin/bootstrap", {"token": bootstrap_token.strip(), "recipients": signed.to_json()},
                              signed=False)
    except BaseException:
        unlink_if_present(os.path.join(admin.dir, KEY_FILE))
        raise
    if reply.status not in (200, 201):
        unlink_if_present(os.path.join(admin.dir, KEY_FILE))
        raise VaultError(f"the vault refused the bootstrap ({error_text(reply)}); nothing kept")
    admin._keep(signed)
    return admin


def new_token(admin: Admin) -> dict[str, Any]:
    d = admin.call("POST", "/v1/admin/tokens", {}, ok=(200, 201))
    if not isinstance(d, dict) or not isinstance(d.get("token"), str):
        raise VaultError("the vault's token answer is not understood")
    return d


def parse_public(text: str) -> bytes:
    """An admin public key (base64 of 64 bytes, as `vault admin init` prints it)."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        raw = b""
    if len(raw) != 64:
        raise VaultError("an admin public key is the base64 of 64 bytes (x25519 || ed25519), as `agentlog vault admin init` prints it")
    return raw


def chains(admin: Admin) -> list[dict[str, Any]]:
    d = admin.call("GET", "/v1/admin/chains")
    rows = d.get("chains") if isinstance(d, dict) else d
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def machines(admin: Admin) -> list[dict[str, Any]]:
    d = admin.call("GET", "/v1/admin/machines")
    rows = d.get("machines") if isinstance(d, dict) else d
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def batch_pages(admin: Admin, c: Client, machine_id: str, chain: str, after: int) -> Iterator[dict[str, Any]]:
    """Every batch of a chain after seq ``after``, page by page."""
    path = chain_path(chain, "batches", machine_id)
    while True:
        d = admin.call("GET", path, query=f"after={after}", client=c)
        got = d.get("batches") if isinstance(d, dict) else None
        if not isinstance(got, list):
            raise VaultError(f"{machine_id}/{chain}: the vault's batch listing is not understood")
        for b in got:
            yield b
            after = max(after, int(b["last_seq"]))
        if not got or not d.get("more"):
            return


def my_wraps(admin: Admin, c: Client, machine_id: str, chain: str) -> dict[int, str]:
    """This admin's wrap of a chain's key per key epoch (``GET .../wraps``)."""
    d = admin.call("GET", chain_path(chain, "wraps", machine_id), client=c)
    got = d.get("wraps") if isinstance(d, dict) else None
    if not isinstance(got, dict):
        raise VaultError(f"{machine_id}/{chain}: the vault's wrap listing is not understood")
    try:
        return {int(k): v for k, v in got.items() if isinstance(v, str)}
    except ValueError:
        raise VaultError(f"{machine_id}/{chain}: the vault's wrap listing is not understood") from None


def add(admin: Admin, public: bytes, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Add an admin: a new signed set, then every chain key re-wrapped for it."""
    from agentlog.vault.crypto import admin_fingerprint, wrap_chain_key

    current = admin.current_set()
    if public in current.set.admins:
        raise VaultError(f"{admin_fingerprint(public)} is already an admin")
    signed = admin.put_set([*current.set.admins, public], current.set.version + 1)
    fp = admin_fingerprint(public)
    rewrapped = unreadable = 0
    with admin.client() as c:
        for row in chains(admin):
            mid, chain = str(row.get("machine_id", "")), str(row.get("chain", ""))
            epochs = my_wraps(admin, c, mid, chain)
            if not epochs:
                unreadable += 1
                continue
            for epoch, wrap in sorted(epochs.items()):
                key = admin.key.unwrap(wrap)
                admin.call("POST", "/v1/admin/wraps", {"machine_id": mid, "chain": chain, "epoch": epoch,
                                                       "wraps": {fp: wrap_chain_key(key, public)}}, client=c, ok=(200, 201))
                rewrapped += 1
            if progress:
                progress(f"{mid}/{chain}: re-wrapped for {fp[:12]}")
    return {"added": fp, "version": signed.set.version, "rewrapped": rewrapped, "chains_without_my_wrap": unreadable}


def remove(admin: Admin, fingerprint: str) -> dict[str, Any]:
    from agentlog.vault.crypto import admin_fingerprint

    current = admin.current_set()
    keep = [a for a in current.set.admins if admin_fingerprint(a) != fingerprint]
    if len(keep) == len(current.set.admins):
        raise VaultError(f"{fingerprint} is not an admin of this vault")
    if not keep:
        raise VaultError("refusing to remove the last admin: nobody could read what is shipped")
    if fingerprint == admin.fingerprint:
        raise VaultError("an admin cannot remove itself (its signature would sign it out); ask another admin")
    signed = admin.put_set(keep, current.set.version + 1)
    return {"removed": fingerprint, "version": signed.set.version}


def rekey(admin: Admin) -> dict[str, Any]:
    """The same admins in a new set (version + 1): every machine that pins it gives each
    chain it ships to a new key at its next batch (a new key epoch, wrapped for the
    current admins only)."""
    current = admin.current_set()
    signed = admin.put_set(list(current.set.admins), current.set.version + 1)
    return {"version": signed.set.version, "admins": len(signed.set.admins)}
