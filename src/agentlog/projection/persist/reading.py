"""The read side: where each stored table's current rows are, for the query engine's views and for search."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

from agentlog.projection.persist.parts import (
    FAMILIES,
    SESSION_TABLES,
    Manifest,
    _index_data,
    load_manifest,
    projection_dir,
)
from agentlog.projection.tables import GLOBAL_FAMILY, GROUP_COLUMN, SESSION_FAMILY

@dataclass
class TableSource:
    """Where a stored table's rows are: files, and per file the groups to skip."""

    group_column: str | None
    files: list[tuple[str, list[str]]]
    """(absolute path, stale group keys)."""


def session_files(root: str, manifest: Manifest, keys: Iterable[str], table: str) -> list[str] | None:
    """The files holding the current rows of these sessions (keys ``provider \x1f provider session
    id``) in ``table`` — a ``session`` family table (``tool_calls``, ``turns_base`` …) or an
    ``asession`` one (``turns_overlay``, ``attempts_overlay`` …) — as absolute paths, each once: what
    a reader of a few sessions reads instead of every part. None when a key is not in the index
    (the caller reads the views)."""
    family = "session" if table in SESSION_TABLES else "asession" if table in SESSION_FAMILY else None
    if family is None:
        raise ValueError(f"{table} is not stored per session")
    if not manifest.files.get("index"):
        return None
    directory = os.path.abspath(projection_dir(root))
    sessions = _index_data(directory, manifest.files["index"])["sessions"]
    out: list[str] = []
    for key in keys:
        entry = sessions.get(key)
        if entry is None:
            return None
        tag = entry[2] if family == "session" else entry[5]
        try:
            name = manifest.part(family, tag)["files"].get(table)
        except KeyError:
            return None
        if name:  # None: the part holds no row of this table
            path = os.path.join(directory, name)
            if path not in out:
                out.append(path)
    return out


def sources(root: str, manifest: Manifest | None = None) -> dict[str, TableSource]:
    """Every stored table's files as of ``manifest`` (default: the current one)."""
    directory = os.path.abspath(projection_dir(root))
    m = manifest if manifest is not None else load_manifest(root)
    out: dict[str, TableSource] = {}
    for family, tables in FAMILIES.items():
        for name in tables:
            files = []
            for p in (m.parts.get(family, []) if m else []):
                f = p["files"].get(name)
                if f:
                    files.append((os.path.join(directory, f), sorted(set(p["stale"]))))
            out[name] = TableSource(GROUP_COLUMN[name], files)
    for name in GLOBAL_FAMILY:
        f = m.files.get(name) if m else None
        out[name] = TableSource(None, [(os.path.join(directory, f), [])] if f else [])
    return out
