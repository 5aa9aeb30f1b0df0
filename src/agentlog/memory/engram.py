"""Importing an engram export (``shared/reference/engram.md`` §8) as one proposal.

engram writes every memory's current state to ``metadata/memories.ndjson``
(sorted keys; ``id, kind, title, slug, content, attributes, tags, links,
evidence, confidence, visibility, lifetime, lifetime_until, archived, pinned,
created_by, created_at, updated_at, version``). Each record becomes a
``create`` change keeping its id, slug, confidence, evidence, lifetime,
visibility and flags, and each of its links a ``link`` change, so approving
the proposal gives the same memories. engram's kinds and attribute names are
ours; values are checked for their types here (engram checks names only):
every problem of every record is reported and nothing is opened if there is
one. Not kept: engram's times and versions (the memories are new here, made
when the proposal is merged) and its markdown files (the NDJSON holds the
same state).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .exchange import ExchangeError
from .model import InvalidMemory


def changes_from(src: str) -> list[dict[str, Any]]:
    path = os.path.join(src, "metadata", "memories.ndjson")
    if not os.path.isfile(path):
        raise ExchangeError(f"{src}: no metadata/memories.ndjson (an engram export with --format ndjson or all)")
    creates: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    problems: list[str] = []
    with open(path, encoding="utf-8-sig") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError:
                problems.append(f"line {n}: not JSON")
                continue
            if not isinstance(r, dict) or not r.get("id"):
                problems.append(f"line {n}: not a memory record")
                continue
            creates.append({
                "op": "create", "id": r["id"], "kind": r.get("kind"), "title": r.get("title"),
                "slug": r.get("slug"), "content": r.get("content") or "",
                "attributes": {k: v for k, v in (r.get("attributes") or {}).items() if v is not None},
                "tags": r.get("tags") or [],
                "evidence": [{k: e[k] for k in ("type", "value", "note") if e.get(k) is not None}
                             for e in r.get("evidence") or [] if isinstance(e, dict)],
                "confidence": r.get("confidence"),
                "lifetime": {"policy": r.get("lifetime") or "standard", "until": r.get("lifetime_until")},
                "visibility": {"visibility": r.get("visibility") or "shared"},
                "archived": bool(r.get("archived")), "pinned": bool(r.get("pinned")),
            })
            for link in r.get("links") or []:
                if isinstance(link, dict):
                    links.append({"op": "link", "memory": r["id"], "relation": link.get("relation"),
                                  "target": link.get("target")})
    if problems:
        raise InvalidMemory(f"{path}: " + "; ".join(problems[:20]))
    if not creates:
        raise ExchangeError(f"{path}: no memories")
    return creates + links


def import_engram(root: str, src: str) -> Any:
    from .proposals import open_proposal

    changes = changes_from(src)
    n = sum(1 for c in changes if c["op"] == "create")
    return open_proposal(root, changes, title=f"import {n} memories from engram ({os.path.basename(src)})",
                         actor="import")
