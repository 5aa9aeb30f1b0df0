""""Did you mean …?" for an id that names nothing.

A mistyped id is usually a real id with one character wrong, missing or extra
near its end, or a prefix typed off by one digit; its real neighbours in sort
order share its longest prefix. For each id space asked about, the nearest id
above and below the typed text (two small top-N reads, only on this error path)
are the candidates; those close enough (a common prefix of at least four hex
digits, or difflib's ratio at least 0.8) are offered, closest first.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from agentlog.projection.ids import display, split_display

MIN_SHARED: Final = 4
"""Hex digits an offered id must share with what was typed, from the start …"""
MIN_RATIO: Final = 0.8
"""… or how alike (difflib's ratio of the hyphen-less texts) it must be."""


def _shared(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def near_ids(engine: Any, text: str, spaces: Mapping[str, tuple[str, str]], kinds: Iterable[str],
             limit: int = 3) -> list[str]:
    """Display ids (``ses_…``) of ``kinds`` close to ``text``; ``spaces`` maps each kind to its
    (table, id column). Empty when nothing is close, or when ``text`` is not id-like."""
    typed, bare = split_display(text)
    probe = bare.strip().lower()
    if not probe or len(probe) > 64 or any(c not in "0123456789abcdef-" for c in probe):
        return []
    flat = probe.replace("-", "")
    scored: dict[str, tuple[int, float]] = {}
    for kind in kinds:
        if kind not in spaces or (typed is not None and kind != typed):
            continue
        table, col = spaces[kind]
        try:
            rows = engine.run(f"(SELECT {col} FROM {table} WHERE {col} >= ? ORDER BY {col} LIMIT 2) UNION "
                              f"(SELECT {col} FROM {table} WHERE {col} < ? ORDER BY {col} DESC LIMIT 2)",
                              [probe, probe]).rows
        except Exception:  # a table this store does not have yet: nothing to offer from it
            continue
        for (ident,) in rows:
            if ident is None:
                continue
            other = str(ident).replace("-", "")
            shared = _shared(flat, other)
            ratio = difflib.SequenceMatcher(None, flat, other).ratio()
            if shared >= MIN_SHARED or ratio >= MIN_RATIO:
                scored[display(kind, str(ident))] = (shared, ratio)
    return sorted(scored, key=lambda k: (-scored[k][0], -scored[k][1], k))[:limit]


def did_you_mean(candidates: list[str]) -> str:
    """``; did you mean X?`` (or ``X or Y``), or nothing."""
    if not candidates:
        return ""
    return "; did you mean " + " or ".join(candidates) + "?"


__all__ = ["MIN_RATIO", "MIN_SHARED", "did_you_mean", "near_ids"]
