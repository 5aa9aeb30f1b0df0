"""Samples → canonical wire events, through the paths the product ships.

A hook sample goes through the hook's own event building
(:func:`agentlog.api.capture_hook_payload`), one event per sample, at once. A
transcript sample is a line of a Claude Code transcript: it is written to its
session's file and its events come from the shipped importer
(:mod:`.transcripts`, :func:`agentlog.api.import_paths`) when the stream has
been written — a transcript's events are known once the file is read (a
``usage`` event per API response comes at the end of the file, a tool
result is paired with the call read before it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from types import TracebackType
from typing import TYPE_CHECKING, Any, Iterator

from agentlog.api import capture_hook_payload
from agentlog.core.fastjson import dumps_bytes
from agentlog.bench.workload.transcripts import TranscriptFiles, logged_events

if TYPE_CHECKING:
    from agentlog.api import ImportReport


def event_id(sample: dict[str, Any]) -> str:
    """A UUIDv7 for a sample: time part = the sample's ``t`` in ms, the rest hashed from
    (session, n, t) — all of which derive from the seed, so ids are reproducible."""
    ms = int(sample["t"]) // 1000
    digest = hashlib.blake2b(f"{sample['session']}\x1f{sample['n']}\x1f{sample['t']}".encode("utf-8"),
                             digest_size=10).digest()
    rand = int.from_bytes(digest, "big")
    rand_a = (rand >> 64) & 0x0FFF
    rand_b = rand & 0x3FFF_FFFF_FFFF_FFFF
    value = ((ms & 0xFFFF_FFFF_FFFF) << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _cwd(payload: dict[str, Any]) -> str | None:
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd
    roots = payload.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str):
        return roots[0]
    return None


def hook_events(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The canonical wire event of a hook sample: its payload's JSON bytes through
    :func:`agentlog.capture.hook.build` exactly as the hook would run it (adapter,
    redaction, project lookup), with ``captured_at = t``, a deterministic event id
    and no environment (so the machine's ``CLAUDE_PROJECT_DIR`` and the like cannot
    leak in)."""
    payload = sample["payload"]
    data = dumps_bytes(payload)
    captured = capture_hook_payload(sample["agent"], data, len(data), [], environ={},
                                    captured_at=int(sample["t"]), event_id=event_id(sample), cwd=_cwd(payload))
    return [captured.event]


class Canonicalizer:
    """The canonical events of a stream of samples (call in stream order).

    Calling it with a sample gives a hook sample's event at once and an empty
    list for a transcript sample, whose line goes to its session's file in a
    scratch directory; :meth:`imported` then imports those files with the shipped
    importer into a scratch data root and gives their events as the logs hold
    them. Use it as a context manager (or call :meth:`close`) to remove the
    scratch directory.

    ``keep_samples``: :meth:`imported` names each event's sample (kept in
    memory, without its line); without it, None. ``workers``: the importer's
    processes (as ``agentlog import``: None lets it choose)."""

    def __init__(self, *, keep_samples: bool = False, workers: int | None = None) -> None:
        self.scratch = tempfile.mkdtemp(prefix="agentlog-bench-transcripts-")
        self.files = TranscriptFiles(os.path.join(self.scratch, "home"), keep_samples)
        self.root = os.path.join(self.scratch, "root")
        self.workers = workers
        self.read: dict[str, int] = {}

    def __call__(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        if sample["source"] == "hook":
            return hook_events(sample)
        self.files.add(sample)
        return []

    def import_transcripts(self) -> ImportReport | None:
        """Import the transcript lines written since the last import (None: there were none)."""
        return self.files.import_into(self.root, self.workers)

    def logged(self) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any]]]:
        """(sample or None, event) of each event the importer wrote since the last call,
        session by session, each in log order."""
        for ev in logged_events(self.root, read=self.read):
            yield self.files.sample_of(ev), ev

    def imported(self) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any]]]:
        """:meth:`import_transcripts`, then :meth:`logged`."""
        self.import_transcripts()
        yield from self.logged()

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Canonicalizer:
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def sample_events(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The canonical wire events of one sample on its own: a hook sample's
    (:func:`hook_events`), or those the importer makes of a transcript file holding
    only this sample's line (a tool result whose call is not in the file is then
    unpaired: ``attrs.unpaired_result``, tool ``unknown``)."""
    if sample["source"] == "hook":
        return hook_events(sample)
    with Canonicalizer(workers=1) as canon:
        canon(sample)
        return [ev for _, ev in canon.imported()]
