"""Reading a proof bundle's JSON strictly (docs/proofs.md, "Bundles"): the errors, and one
checker per kind of field. A bundle is untrusted input: each checker returns the field's value
once it has the type and shape it must, and raises :class:`BundleError` naming the field
otherwise, never another exception. Used by ``bundle.py`` and ``bundle_witness.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Mapping

from agentlog.core import AgentlogError, UsageError
from agentlog.integrity.note import NoteError, Verifier

MAX_PROOF: Final = 64
"""Hashes an RFC 9162 proof of a tree of at most 2^64 leaves can have (inclusion: 64; consistency: 65)."""
MAX_SEQ: Final = 2**63 - 1

_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


class BundleError(AgentlogError, ValueError):
    """A bundle that is not one: not JSON, a field missing or of the wrong type or shape."""


class BadKey(UsageError, ValueError):
    """A verifier key given to check a bundle with is not a verifier key (exit 2)."""


def load_document(data: bytes | str) -> dict[str, Any]:
    """A bundle's JSON text as a dict, strictly: UTF-8, one object, no repeated key."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise BundleError(f"the key {k!r} appears twice in one object")
            out[k] = v
        return out

    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        doc = json.loads(text, object_pairs_hook=pairs)
    except UnicodeDecodeError:
        raise BundleError("the file is not UTF-8 text") from None
    except (ValueError, RecursionError) as e:
        if isinstance(e, BundleError):
            raise
        raise BundleError(f"not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise BundleError("the JSON is not an object")
    return doc


def text(value: object, where: str, *, empty: bool = False) -> str:
    """A string (non-empty unless ``empty``) that is UTF-8 text."""
    if not isinstance(value, str) or (not value and not empty):
        raise BundleError(f"{where} is not a {'' if empty else 'non-empty '}string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BundleError(f"{where} holds a lone surrogate, which is not text") from None
    return value


def line(value: object, where: str) -> str:
    """A non-empty string without control characters."""
    got = text(value, where)
    if _CONTROL.search(got):
        raise BundleError(f"{where} holds a control character")
    return got


def count(value: object, where: str, limit: int = MAX_SEQ) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise BundleError(f"{where} is not a whole number from 0 to {limit}")
    return value


def hex64(value: object, where: str) -> str:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise BundleError(f"{where} is not 64 lowercase hex digits")
    return value


def hashes(value: object, where: str, limit: int) -> list[bytes]:
    if not isinstance(value, list) or len(value) > limit:
        raise BundleError(f"{where} is not a list of at most {limit} hashes")
    return [bytes.fromhex(hex64(h, f"{where}[{i}]")) for i, h in enumerate(value)]


def fields(doc: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    """``doc`` has exactly the fields ``allowed``."""
    missing = sorted(allowed - doc.keys())
    extra = sorted(doc.keys() - allowed)
    if missing:
        raise BundleError(f"{where} has no {', '.join(missing)}")
    if extra:
        raise BundleError(f"{where} has unknown fields: {', '.join(map(str, extra))}")


def obj(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BundleError(f"{where} is not an object")
    return value


def verifier(value: object, where: str) -> Verifier:
    """A log's verifier key (signature type 0x01) held in the bundle."""
    try:
        return Verifier.from_key_string(line(value, where))
    except NoteError as e:
        raise BundleError(f"{where} is not a verifier key: {e}") from None


def given_key(key: str | None) -> Verifier | None:
    """The ``--key`` a checker gave, parsed (:class:`BadKey` when it is not a verifier key)."""
    if key is None:
        return None
    try:
        return Verifier.from_key_string(key.strip())
    except NoteError as e:
        raise BadKey(f"--key is not a verifier key (<name>+<key id>+<base64>): {e}") from None


__all__ = ["BadKey", "BundleError", "MAX_PROOF", "MAX_SEQ", "count", "fields", "given_key", "hashes", "hex64", "line",
           "load_document", "obj", "text", "verifier"]
