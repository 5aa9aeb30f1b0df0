"""Derived identifiers of projected entities.

Every id the projection mints is a UUIDv5: the same input gives the same id
in every process, on every rebuild. The name hashed is the entity's display
prefix (``ses_``) followed, for each part, by a unit separator (0x1F) and the part's
text — so a turn and an attempt built from equal parts never collide, and a
part containing another part's text cannot shift the boundary. This is the
derivation attemptdb documents for its ids, with its namespace, so that a
history imported from attemptdb keeps its session, turn and attempt ids.

Ids are stored bare (lower-case hyphenated); surfaces show them with a
display prefix (``att_…``) and accept either form, or an unambiguous prefix.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Final

NAMESPACE: Final = uuid.UUID("3b9ac08e-7f21-4b1d-8e5a-1c2d9f6e4a77")

# Entity type → display prefix.
PREFIXES: Final[dict[str, str]] = {
    "event": "ev",
    "project": "prj",
    "session": "ses",
    "turn": "trn",
    "tool_call": "tc",
    "agent": "agt",
    "attempt": "att",
    "work_unit": "wu",
    "decision": "dec",
    "commit": "cmt",
    "conflict": "cfl",
    "edge": "edg",
    "signal": "sig",
}
# Display prefix → entity type (``spn`` is attemptdb's other prefix for tool calls).
TYPES_BY_PREFIX: Final[dict[str, str]] = {v: k for k, v in PREFIXES.items()} | {"spn": "tool_call"}

# The name prefix hashed for each entity type (attemptdb's spelling).
_DERIVE_PREFIX: Final[dict[str, str]] = {
    "session": "ses", "project": "prj", "agent": "agt", "turn": "trn", "tool_call": "spn",
    "attempt": "att", "work_unit": "wu", "decision": "dec", "commit": "cmt", "conflict": "cfl",
    "edge": "edg", "signal": "sig", "event": "ev",
}


_NS_BYTES: Final = NAMESPACE.bytes


def derive(kind: str, *parts: str) -> str:
    """The derived id of an entity of type ``kind`` built from ``parts``.

    The same value as ``uuid.uuid5(NAMESPACE, name)``, computed without
    building ``UUID`` objects (the projection derives one id per tool call,
    turn and attempt; ``uuid.uuid5`` is three times slower)."""
    name = _DERIVE_PREFIX[kind] + "_\x1f" + "\x1f".join(parts)
    d = bytearray(hashlib.sha1(_NS_BYTES + name.encode("utf-8", "surrogatepass")).digest()[:16])
    d[6] = (d[6] & 0x0F) | 0x50
    d[8] = (d[8] & 0x3F) | 0x80
    h = d.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def display(kind: str, value: str) -> str:
    """``att_0f3c…`` for an attempt id, etc."""
    return f"{PREFIXES[kind]}_{value}"


def short(kind: str, value: str) -> str:
    """Prefix and the first eight hex digits: ``att_0f3c9a1b``."""
    return f"{PREFIXES[kind]}_{value[:8]}"


def split_display(text: str) -> tuple[str | None, str]:
    """(entity type or None, bare id text) of an id as a person typed it."""
    t = text.strip()
    head, sep, rest = t.partition("_")
    if sep and head.lower() in TYPES_BY_PREFIX:
        return TYPES_BY_PREFIX[head.lower()], rest.lower()
    return None, t.lower()


def normalise_remote(remote: str | None) -> str | None:
    """``github.com/owner/repo`` for any spelling of a remote URL, else None."""
    if not remote:
        return None
    r = remote.strip()
    if "://" in r:
        r = r.split("://", 1)[1]
    elif "@" in r:
        r = r.split("@", 1)[1]
    r = r.rsplit("@", 1)[-1]
    r = r.replace(":", "/", 1)
    r = r.strip("/")
    if r.endswith(".git"):
        r = r[:-4]
    r = r.strip("/").lower()
    return r if r.count("/") >= 2 else None


def project_id(root: str | None, remote: str | None) -> str:
    """A project is its normalised remote when it has one, else its root directory."""
    norm = normalise_remote(remote)
    if norm:
        return derive("project", "remote", norm)
    return derive("project", "root", root or "")
