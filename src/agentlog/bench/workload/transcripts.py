"""The workload's Claude Code transcripts, imported by the importer ``agentlog import`` runs.

A transcript sample is one line of a Claude Code session transcript. The
benchmark does not turn it into events itself: :class:`TranscriptFiles`
writes the lines as the agent keeps them — one file per session,
``<home>/.claude/projects/<cwd slug>/<session>.jsonl``, lines in stream order
— and :meth:`TranscriptFiles.import_into` runs
:func:`agentlog.api.import_paths` over them: the shipped parser
(``importers/claude_code.py``), its merging with what the logs hold,
redaction and log writing, as ``agentlog import`` runs them. The events are
then the importer's own: its ids, its ``raw`` (the line kept), one ``usage``
event per API response (each assistant record of the generator is one),
``attrs.source_file``/``source_line`` naming the line.

Paths: the import runs in ``<home>`` and is given the relative
``.claude/projects``, so ``attrs.source_file`` is
``.claude/projects/<slug>/<session>.jsonl`` wherever the scratch directory is:
one seed gives the same events, byte for byte, in any directory and any
process (``bench load --jobs N`` writes the logs one process writes).

A file imported, then grown and imported again, is read from where the last
import stopped (``state/import.json`` of the data root, as for a user who runs
``agentlog import`` now and then); its open tool calls are carried over.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, Iterator

from agentlog.api import frame_event_bytes, import_paths, iter_logs, log_lines
from agentlog.core.fastjson import loads

if TYPE_CHECKING:
    from agentlog.api import ImportReport

#: where Claude Code keeps its session transcripts, under the home directory
PROJECTS = os.path.join(".claude", "projects")
#: the agent ``agentlog import`` names Claude Code by
AGENT = "claude-code"
PROVIDER = "claude_code"
#: kinds the importer makes that no sample promises: one ``usage`` per API response
#: (beside the response's own event), ``transcript_line`` for a line no event holds
EXTRA_KINDS = frozenset({"usage", "transcript_line"})
#: bytes of lines held in memory before they are appended to their files
_BUFFER_BYTES = 8 << 20


@contextlib.contextmanager
def _working_dir(path: str) -> Iterator[None]:
    here = os.open(".", os.O_RDONLY)
    try:
        os.chdir(path)
        yield
    finally:
        os.fchdir(here)
        os.close(here)


class TranscriptFiles:
    """Transcript samples written to their sessions' files under ``home``.

    ``keep_samples``: remember each line's sample (without its line) so that
    :meth:`sample_of` names the sample an imported event came from."""

    def __init__(self, home: str, keep_samples: bool = False) -> None:
        self.home = os.path.abspath(home)
        self.keep_samples = keep_samples
        self.paths: dict[str, str] = {}
        """session id → its file, relative to ``home``."""
        self.lines: dict[str, int] = {}
        """session id → lines written to its file."""
        self.buffers: dict[str, list[str]] = {}
        self.buffered = 0
        self.pending = 0
        """Lines written since the last import."""
        self.samples: dict[tuple[str, int], dict[str, Any]] = {}

    def add(self, sample: dict[str, Any]) -> None:
        """Append a transcript sample's line to its session's file."""
        sid = str(sample["session"])
        path = self.paths.get(sid)
        if path is None:
            cwd = loads(sample["line"]).get("cwd")
            slug = str(cwd).replace("/", "-") if isinstance(cwd, str) and cwd else "-"
            path = self.paths[sid] = os.path.join(PROJECTS, slug, sid + ".jsonl")
            os.makedirs(os.path.join(self.home, os.path.dirname(path)), exist_ok=True)
        line = str(sample["line"])
        self.lines[sid] = n = self.lines.get(sid, 0) + 1
        if self.keep_samples:
            self.samples[(path, n)] = {k: v for k, v in sample.items() if k != "line"}
        buf = self.buffers.get(sid)
        if buf is None:
            buf = self.buffers[sid] = []
        buf.append(line)
        self.buffered += len(line) + 1
        self.pending += 1
        if self.buffered >= _BUFFER_BYTES:
            self.flush()

    def flush(self) -> None:
        """Append the buffered lines to their files."""
        for sid, buf in self.buffers.items():
            with open(os.path.join(self.home, self.paths[sid]), "a", encoding="utf-8") as fh:
                fh.write("\n".join(buf) + "\n")
        self.buffers.clear()
        self.buffered = 0

    def import_into(self, root: str, workers: int | None = 1) -> ImportReport | None:
        """Import what was written since the last import into ``root``'s logs with the
        shipped importer (``workers`` as :func:`agentlog.api.import_paths` takes them;
        1 in a daemonic process, which may not start any); None when nothing was."""
        if not self.pending:
            return None
        self.flush()
        root = os.path.abspath(root)
        with _working_dir(self.home):
            report = import_paths(root, [AGENT], [PROJECTS], workers=workers)
        self.pending = 0
        return report

    def sample_of(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The sample (without its line) whose line gave ``event``, if kept."""
        attrs = event.get("attrs")
        if not isinstance(attrs, dict):
            return None
        return self.samples.get((str(attrs.get("source_file")), int(attrs.get("source_line") or 0)))


def log_events(path: str, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """(offset after it, the event's JSON) of every frame of a session log from ``start``."""
    for off, line in log_lines(path, start):
        if line.startswith(b'{"v":1') and b',"event":' in line:
            yield off + len(line), frame_event_bytes(line)


def logged_events(root: str, provider: str = PROVIDER,
                  read: dict[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """The events in ``root``'s logs of ``provider``, log by log, in log order: every
    one, or with ``read`` (log → offset read to, updated) those not read before."""
    for path in iter_logs(root):
        if os.path.basename(os.path.dirname(path)) != provider:
            continue
        start = read.get(path, 0) if read is not None else 0
        for end, data in log_events(path, start):
            if read is not None:
                read[path] = end
            yield loads(data.decode("utf-8"))
