"""Which machine each pulled log came from, and which of its frames failed the byte check.

``agentlog vault admin pull --into DIR`` (``vault/pull.py``, which owns the
format) writes session logs as usual and, beside them, ``DIR/vault-pull/``:

    chains.jsonl   one object per pulled chain: {"log": "<provider>/<key>",
                   "machine_id", "host", "chain", "root", "seq", "hash"}
    report.jsonl   one object per problem, appended by every pull:
                   {"machine_id", "chain", "seq", "problem", "fatal"}

A session id seen on two machines cannot share one log file: the second
machine's copy goes to the data root ``DIR/vault-pull/machines/<machine id>/``
(``root`` in chains.jsonl, relative to ``DIR``: ``.`` or ``vault-pull/machines/<id>``). This reader finds the sidecar from either root —
``DIR`` or a ``machines/<id>`` root under it — and answers only for the logs
that live in the root asked about (told apart by the shape of ``root``, so a
pulled directory that was moved still reads).

It lives in ``log/`` so that the query engine (below ``vault/`` in the layers)
can read it. Standard library only; a malformed line is skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Final, Iterator

PULL_DIR: Final = "vault-pull"
CHAINS: Final = "chains.jsonl"
REPORT: Final = "report.jsonl"
MACHINES: Final = "machines"


@dataclass(frozen=True)
class PulledLog:
    """One log of this data root that a pull wrote."""

    provider: str
    key: str
    machine_id: str
    host: str
    chain: str
    seq: int
    """The last frame pulled (-1: none yet)."""


@dataclass(frozen=True)
class ByteCheck:
    """One problem the pull found in a frame of one of this root's logs."""

    provider: str
    key: str
    machine_id: str
    host: str
    seq: int
    problem: str
    failed: bool
    """The frame failed the byte check (the pull stopped the chain there); False: a note
    (a frame purged on the machine before shipping)."""


def sidecar(root: str) -> tuple[str, str | None] | None:
    """The ``vault-pull`` directory describing ``root``'s logs and, when ``root`` is a second
    machine's data root under it, that machine's id; None for a root no pull made."""
    root = os.path.abspath(root)
    own = os.path.join(root, PULL_DIR)
    if os.path.isfile(os.path.join(own, CHAINS)):
        return own, None
    parent = os.path.dirname(root)
    top = os.path.dirname(parent)
    if os.path.basename(parent) == MACHINES and os.path.basename(top) == PULL_DIR \
            and os.path.isfile(os.path.join(top, CHAINS)):
        return top, os.path.basename(root)
    return None


def sidecar_files(root: str) -> list[str]:
    """The sidecar's files for ``root`` (to watch for changes); empty for a root no pull made."""
    found = sidecar(root)
    return [] if found is None else [os.path.join(found[0], CHAINS), os.path.join(found[0], REPORT)]


def _lines(path: str) -> Iterator[dict[str, Any]]:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        for line in f:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict):
                yield d


def relative_root(row: dict[str, Any]) -> str:
    """Where, relative to the pulled directory, a chains.jsonl row's log lives: ``.`` or a
    second machine's ``vault-pull/machines/<id>`` (read from the row's ``root``, which
    older pulls wrote as an absolute path)."""
    mid = _second_root_of(row)
    return "." if mid is None else os.path.join(PULL_DIR, MACHINES, mid)


def _second_root_of(row: dict[str, Any]) -> str | None:
    """The machine id when the row's log lives in a second machine's root, else None."""
    where = os.path.normpath(str(row.get("root", "")))
    mid = os.path.basename(where)
    if os.path.basename(os.path.dirname(where)) == MACHINES \
            and os.path.basename(os.path.dirname(os.path.dirname(where))) == PULL_DIR:
        return mid
    return None


def _chains(found: tuple[str, str | None]) -> dict[tuple[str, str], PulledLog]:
    """(machine id, chain) → the log of this root it was pulled into."""
    directory, machine = found
    out: dict[tuple[str, str], PulledLog] = {}
    for row in _lines(os.path.join(directory, CHAINS)):
        log = row.get("log")
        if not isinstance(log, str) or log.count("/") != 1 or _second_root_of(row) != machine:
            continue
        provider, key = log.split("/")
        seq = row.get("seq")
        mid, chain = str(row.get("machine_id", "")), str(row.get("chain", ""))
        out[(mid, chain)] = PulledLog(provider, key, mid, str(row.get("host") or ""), chain,
                                      seq if isinstance(seq, int) else -1)
    return out


def pulled_logs(root: str) -> list[PulledLog]:
    """The logs of ``root`` a pull wrote, with their machine (empty: not a pulled root)."""
    found = sidecar(root)
    return [] if found is None else sorted(_chains(found).values(), key=lambda p: (p.provider, p.key))


def byte_checks(root: str) -> list[ByteCheck]:
    """The problems the pulls reported for ``root``'s logs, each once, in log and seq order.

    A failure at a seq the chain has since been pulled through (a later pull checked
    that frame and took it) is no longer listed; problems without a seq or a chain
    this root holds are left out."""
    found = sidecar(root)
    if found is None:
        return []
    logs = _chains(found)
    seen: dict[tuple[str, str, int, str, bool], ByteCheck] = {}
    for row in _lines(os.path.join(found[0], REPORT)):
        log = logs.get((str(row.get("machine_id", "")), str(row.get("chain", ""))))
        seq, problem = row.get("seq"), str(row.get("problem", ""))
        if log is None or not isinstance(seq, int) or isinstance(seq, bool):
            continue
        failed = bool(row.get("fatal", True))
        if failed and seq <= log.seq:
            continue
        seen.setdefault((log.provider, log.key, seq, problem, failed),
                        ByteCheck(log.provider, log.key, log.machine_id, log.host, seq, problem, failed))
    return sorted(seen.values(), key=lambda b: (b.provider, b.key, b.seq, b.problem))


__all__ = ["ByteCheck", "PulledLog", "byte_checks", "pulled_logs", "sidecar", "sidecar_files"]
