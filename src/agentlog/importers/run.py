"""Importing transcript files into the session logs: offsets, merging, writing.

For each file: where the last import of it stopped (``state/import.json``:
device, inode, the size read, the line count and a digest of its first
4 KiB), so a file that grew is read from there on, an unchanged one is not
read at all, and a truncated or replaced one (smaller, another inode, other
first bytes) is read again from the start — its events are then
recognised by their ids and not written twice. Lines are read in bounded
chunks: a line longer than :data:`MAX_LINE` is skipped and reported, and
memory stays bounded by it whatever the file's size. An incomplete last
line (the agent is still writing it) is left for the next import.

Before events are appended to a session's log, what the log already holds
is read once: an event whose id is there (imported before) or whose merge
key names something a hook recorded (``docs/import.md``) is not written.
Hooks give exact times and the permission flow; the transcript adds what
hooks never see — assistant messages, token usage, subagent detail — so the
session ends up with each thing once.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Final, Iterable, Iterator

import orjson

from agentlog.core.fastjson import dumps_bytes
from agentlog.core.locks import Busy, open_locked
from agentlog.core.fileio import write_atomic
from agentlog.core.jsonio import read_json
from agentlog.core.paths import FILE_MODE, ensure_dir, state_dir
from agentlog.importers.base import (
    LINE_KIND,
    NOT_JSON,
    Parser,
    SourceLine,
    line_event_of,
    split_records,
)
from agentlog.importers.known import Known, hook_merge_key, session_known

#: the longest line read (longer ones are skipped and reported)
MAX_LINE: Final = 16 << 20
"""The hook's payload cap (``capture.hook.MAX_PAYLOAD``): a longer line is skipped and reported,
as a longer hook payload is recorded as a gap (a 60 MB line once became a 120 MB frame)."""
CHUNK: Final = 1 << 20
HEAD_BYTES: Final = 4096
#: events appended to a log per write
BATCH: Final = 2000
#: bytes of lines whose events are held before a write, at most (about: the lines'
#: events are written once they pass it). With :data:`BATCH` this bounds what a
#: write holds whatever the lines' sizes: 2,000 events of 12 MB lines would be ~50 GB
BATCH_BYTES: Final = 8 << 20
#: sessions are imported in chunks of about this many bytes of files (a worker's task;
#: their events are written in batches that span the chunk's files)
CHUNK_BYTES: Final = 4 << 20
#: an import this large (bytes) runs in two processes when there are two cores
PARALLEL_MIN_BYTES: Final = 2 << 20
#: the smallest chunk of a parallel import: a small import is cut into at least
#: :data:`CHUNKS_PER_WORKER` chunks per worker down to this size, so that its last
#: chunk does not leave a core idle for long
MIN_CHUNK_BYTES: Final = 128 << 10
CHUNKS_PER_WORKER: Final = 8
#: the offsets are saved at most this often (and at the end)
SAVE_EVERY_S: Final = 2.0
STATE_FILE: Final = "import.json"


@dataclass
class FileReport:
    """What importing one file did."""

    path: str
    provider: str
    mode: str = "new"
    """``new``, ``grown``, ``unchanged`` or ``replaced`` (truncated, rotated or rewritten)."""
    bytes_read: int = 0
    lines: int = 0
    events: int = 0
    """Events written."""
    duplicates: int = 0
    """Events not written: already in the log, or recorded by a hook."""
    kept_lines: int = 0
    """Of :attr:`events`, the ``transcript_line`` events: lines kept that no other
    event written holds (bookkeeping records, thinking-only records, a line whose
    event a hook had recorded …)."""
    sessions: list[str] = field(default_factory=list)
    records: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    """``version/record type`` → count of records the parser does not know."""
    unknown_fields: dict[str, int] = field(default_factory=dict)
    """``version/record.field`` → count of fields (content blocks …) of known records it does not know."""
    problems: list[dict[str, Any]] = field(default_factory=list)
    problem_count: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ImportReport:
    """What one ``agentlog import`` did, per file and in total."""

    files: list[FileReport] = field(default_factory=list)
    dry_run: bool = False
    seconds: float = 0.0

    def totals(self) -> dict[str, Any]:
        out: dict[str, Any] = {"files": len(self.files), "bytes_read": 0, "lines": 0, "events": 0, "kept_lines": 0,
                               "duplicates": 0, "problems": 0, "errors": 0, "unknown_records": 0}
        sessions: set[tuple[str, str]] = set()
        for f in self.files:
            out["bytes_read"] += f.bytes_read
            out["lines"] += f.lines
            out["events"] += f.events
            out["kept_lines"] += f.kept_lines
            out["duplicates"] += f.duplicates
            out["problems"] += f.problem_count
            out["errors"] += f.error is not None
            out["unknown_records"] += sum(f.unknown.values())
            sessions.update((f.provider, s) for s in f.sessions)
        out["sessions"] = len(sessions)
        return out

    def by_provider(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for f in self.files:
            p = out.setdefault(f.provider, {"files": 0, "sessions": set(), "events": 0, "kept_lines": 0,
                                            "duplicates": 0, "unknown": {}, "unknown_fields": {}, "problems": 0,
                                            "errors": 0})
            p["files"] += 1
            p["sessions"].update(f.sessions)
            p["events"] += f.events
            p["kept_lines"] += f.kept_lines
            p["duplicates"] += f.duplicates
            p["problems"] += f.problem_count
            p["errors"] += f.error is not None
            for k, n in f.unknown.items():
                p["unknown"][k] = p["unknown"].get(k, 0) + n
            for k, n in f.unknown_fields.items():
                p["unknown_fields"][k] = p["unknown_fields"].get(k, 0) + n
        for p in out.values():
            p["sessions"] = len(p["sessions"])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "seconds": round(self.seconds, 3), "totals": self.totals(),
                "by_provider": self.by_provider(), "files": [f.to_dict() for f in self.files]}


# -- per-file state -----------------------------------------------------------------------


def _state_path(root: str) -> str:
    return os.path.join(state_dir(root), STATE_FILE)


def load_state(root: str) -> dict[str, Any]:
    data = read_json(_state_path(root), {})
    return data if isinstance(data, dict) else {}


def save_state(root: str, state: dict[str, Any]) -> None:
    path = _state_path(root)
    ensure_dir(os.path.dirname(path))
    try:
        # orjson: the state of a large import is megabytes, saved every few seconds by the
        # process that also hands out the work; the standard-library encoder took ~20 ms
        # per thousand files
        data = orjson.dumps(state)
    except TypeError:  # a lone surrogate in a carried value: the encoder that writes it
        data = dumps_bytes(state)
    # not durable (as before): lost or torn, the state reads as empty and the next import
    # reads the files again, its events recognised by their ids and not written twice
    write_atomic(path, data, FILE_MODE, durable=False)


def _head_digest(path: str, size: int, read: bytes = b"") -> str:
    """A digest of the file's first ``size`` bytes (at most :data:`HEAD_BYTES`): of
    ``read`` (the file's first bytes, as the import read them) when it holds them,
    else read again."""
    size = min(size, HEAD_BYTES)
    if len(read) < size:
        with open(path, "rb") as fh:
            read = fh.read(size)
    return hashlib.blake2b(read[:size], digest_size=16).hexdigest()


# -- reading lines, bounded -----------------------------------------------------------------


def iter_lines(path: str, start: int, first_lineno: int,
               on_bytes: Callable[[int], None] | None = None,
               head: list[bytes] | None = None) -> Iterator[tuple[SourceLine | None, int]]:
    """``(line, end offset)`` of each complete line from ``start``; a line longer
    than :data:`MAX_LINE` gives ``(None, end)`` (skipped). The incomplete last line
    is not given. ``head``, when read from the start: the file's first
    :data:`HEAD_BYTES` are appended to it (for the offsets' digest, without
    reading them again)."""
    lineno = first_lineno
    offset = start
    with open(path, "rb") as fh:
        if start > 0:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":
                # the last import took a last line that had no newline yet (a whole JSON
                # value); the newline written since ends that line and is not one of its own
                after = fh.read(2)
                offset += 1 if after[:1] == b"\n" else 2 if after == b"\r\n" else 0
        fh.seek(offset)
        buf = b""
        skipping = False
        while True:
            chunk = fh.read(CHUNK)
            if head is not None and not head and start == 0:  # the first read
                head.append(chunk[:HEAD_BYTES])
            if not chunk:
                # a last line without its newline: taken when it is a whole JSON value
                # (a finished file), left for the next import when not (still being written)
                if buf and not skipping and (parse_json(buf) is not NOT_JSON or split_records(buf) is not None):
                    yield SourceLine(path, lineno + 1, offset, buf), offset + len(buf)
                return
            if on_bytes is not None:
                on_bytes(len(chunk))
            buf += chunk
            pos = 0
            while True:
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    break
                data = buf[pos:nl]
                lineno += 1
                end = offset + (nl - pos) + 1
                if skipping or nl - pos > MAX_LINE:  # too long, whether it came in one read or several
                    skipping = False
                    yield None, end
                else:
                    yield SourceLine(path, lineno, offset, data[:-1] if data.endswith(b"\r") else data), end
                offset = end
                pos = nl + 1
            buf = buf[pos:]
            if len(buf) > MAX_LINE:
                # too long a line: drop what was read of it and the rest up to its newline
                offset += len(buf)
                buf = b""
                skipping = True


def _whole_file(parser: Parser, path: str) -> bool:
    """A ``.json`` file of a parser that reads some files whole (:meth:`Parser.whole_document`):
    one JSON document, which its agent rewrites in place."""
    return path.endswith(".json") and type(parser).whole_document is not Parser.whole_document


def _document(parser: Parser, path: str, size: int) -> Any:
    """A ``.json`` file the parser reads whole (:meth:`Parser.whole_document`), else None."""
    if size > MAX_LINE:
        return None
    try:
        with open(path, "rb") as fh:
            return parser.whole_document(fh.read())
    except OSError:
        return None


_INEXACT: Final = object()


def _parse_exact(data: bytes) -> Any:
    """``data`` parsed as JSON as it is; None for a blank line; :data:`_INEXACT`
    when that fails (:func:`parse_json` then tries harder)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None if not data.strip() else _INEXACT


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse_json(data: bytes) -> Any:
    """A line as JSON: None for a blank line, :data:`NOT_JSON` when it is not JSON
    (undecodable bytes are replaced before a second try)."""
    if not data.strip():
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return orjson.loads(data.decode("utf-8", "replace"))
    except orjson.JSONDecodeError:
        return NOT_JSON


def _record(parser: Parser, line: SourceLine) -> tuple[SourceLine, Any]:
    """A line and its JSON value (None: blank; :data:`NOT_JSON`: not JSON); the line
    marked when its raw text can be written without decoding it."""
    record = _parse_exact(line.data)
    if record is _INEXACT:
        record = parse_json(line.data)
        if record is not NOT_JSON and record is not None and not _utf8(line.data):
            parser.stats.problem(line, "invalid UTF-8: bytes replaced by U+FFFD, the line imported "
                                       "(raw keeps its bytes)")
    elif not line.data.isascii():
        line = line._replace(json=True)
    return line, record


def _records(parser: Parser, line: SourceLine) -> list[tuple[SourceLine, Any]]:
    """What a line feeds its parser: the line and its record; or, for a line that is
    not one JSON value but several objects one after another (``{…}{…}``: a writer
    that lost a newline), each of them as a part of the line (:attr:`SourceLine.part`);
    nothing for a blank line."""
    line, record = _record(parser, line)
    if record is None:
        return []
    parts = split_records(line.data) if record is NOT_JSON else None
    if parts is None:
        return [(line, record)]
    out = []
    for n, (at, data) in enumerate(parts):
        part, value = _record(parser, SourceLine(line.path, line.lineno, line.offset + at, data, part=n))
        if value is not None:
            out.append((part, value))
    return out


def _note_unknown(root: str, provider: str, unknown: dict[tuple[str, str], int],
                  fields: dict[tuple[str, str], int]) -> None:
    """Record types and fields a parser did not know, for ``agentlog doctor`` (the file
    the hook writes unrecognised payload shapes to; one line per type and agent version)."""
    path = os.path.join(state_dir(root), "unrecognised.jsonl")
    ensure_dir(os.path.dirname(path))
    now = time.time_ns() // 1000
    rows = [(f"transcript record {t!r} (agent version {v or '?'})", n) for (v, t), n in sorted(unknown.items())]
    rows += [(f"transcript field {t!r} (agent version {v or '?'})", n) for (v, t), n in sorted(fields.items())]
    lines = b"".join(dumps_bytes({"provider": provider, "event": event, "keys": [], "at": now, "count": n,
                                  "source": "import"}) + b"\n" for event, n in rows)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        os.write(fd, lines)
    finally:
        os.close(fd)


# -- writing ----------------------------------------------------------------------------------------


class _Sink:
    """Events read and not yet written, of one file or of several (a worker's share of
    an import): redacted, merged with what the logs hold, by session, and appended
    :data:`BATCH` at a time, or sooner once their lines pass :data:`BATCH_BYTES`
    (memory stays bounded by bytes as well as by events). Batches that span files make the secret gate's pre-check
    run once per batch rather than once per file (each run of it compiles its
    pattern and builds its automaton afresh: ~0.5 ms, a transcript file's worth of
    scanning)."""

    def __init__(self, root: str, dry_run: bool, known: dict[tuple[str, str | None], Known] | None = None) -> None:
        self.root = root
        self.dry_run = dry_run
        self.known: dict[tuple[str, str | None], Known] = known if known is not None else {}
        self.events: list[dict[str, Any]] = []
        self.reports: list[FileReport] = []
        """The file each event was read from, for its counts."""
        self.bytes = 0
        """Bytes of the lines whose events are held."""

    def add(self, report: FileReport, events: list[dict[str, Any]], nbytes: int = 0) -> None:
        """Hold ``events``, read from ``nbytes`` of ``report``'s file (the lines'
        sizes: their events hold about as much, twice or thrice — content and raw)."""
        self.events.extend(events)
        self.reports.extend([report] * len(events))
        self.bytes += nbytes
        if len(self.events) >= BATCH or self.bytes >= BATCH_BYTES:
            self.flush()  # memory stays bounded by a batch, whatever the files' and lines' sizes

    def flush(self) -> None:
        """Merge what was read with what the logs hold, by session, and append it."""
        from agentlog.capture.secret_gate import redact_serialized
        from agentlog.log.writer import open_session_log

        if not self.events:
            return
        # redacted (before anything is written or compared: the parsers leave it to here) and serialised
        blobs = redact_serialized(self.events)
        by_session: dict[tuple[str, str | None], list[tuple[dict[str, Any], bytes, FileReport]]] = {}
        for ev, blob, report in zip(self.events, blobs, self.reports, strict=True):
            by_session.setdefault((ev["provider"], ev.get("provider_session_id")), []).append((ev, blob, report))
        self.events.clear()
        self.reports.clear()
        self.bytes = 0
        for cache_key, triples in by_session.items():
            provider, session_id = cache_key
            if cache_key not in self.known:
                self.known[cache_key] = session_known(self.root, provider, session_id)
            held = self.known[cache_key]
            fresh: list[bytes] = []
            for ev, blob, report in triples:
                if session_id is not None and session_id not in report.sessions:
                    report.sessions.append(session_id)
                kind = ev["kind"]
                if kind == LINE_KIND and held.holds_line(ev["attrs"]):
                    report.duplicates += 1  # a line its own event holds, written by an import before
                    continue
                if not held.take(ev, ev["attrs"].get("merge_key") or hook_merge_key(ev)):
                    report.duplicates += 1
                    if "raw" in ev and held.loses_line(ev):
                        # its line is not in the log: kept on its own (raw redacted above)
                        kept = line_event_of(ev)
                        if held.take(kept, None):
                            report.events += 1
                            report.kept_lines += 1
                            fresh.append(_serialised(kept))
                    continue
                report.events += 1
                if kind == LINE_KIND:
                    report.kept_lines += 1
                fresh.append(blob)
            if fresh and not self.dry_run:
                log = open_session_log(self.root, provider, session_id, durability="relaxed", hasher=hashlib.sha256)
                for i in range(0, len(fresh), BATCH):
                    log.append(fresh[i:i + BATCH])


def _serialised(ev: dict[str, Any]) -> bytes:
    """An event already redacted, as the log holds it."""
    try:
        return orjson.dumps(ev)
    except TypeError:  # a lone surrogate: the encoder that writes it
        return dumps_bytes(ev)


# -- one file ---------------------------------------------------------------------------------------


def import_file(root: str, parser: Parser, state: dict[str, Any], *, dry_run: bool = False,
                known: dict[tuple[str, str | None], Known] | None = None,
                on_bytes: Callable[[int], None] | None = None, sink: _Sink | None = None) -> FileReport:
    """Import one file with ``parser``; ``state`` (the per-file offsets) is updated in place.

    With ``sink`` (shared by several files), the file's events may still be in it on
    return — their counts and sessions in the report are complete once the caller
    has flushed it, and ``state`` must not be saved before then."""
    from agentlog.capture.redact import redact_value

    path = parser.path
    report = FileReport(path, parser.provider)
    try:
        st = os.stat(path)
    except OSError as e:
        report.error = f"cannot read: {e.strerror}"
        return report
    ident = os.path.abspath(path)
    entry = state.get(ident)
    start, first_line = 0, 0
    whole = _whole_file(parser, path)
    if isinstance(entry, dict) and whole:
        # one JSON document rewritten in place: read whole whenever it changed (its
        # events are recognised by their ids), never from an offset (a rewrite that
        # keeps the first bytes is not growth)
        same = entry.get("ino") == st.st_ino and entry.get("dev") == st.st_dev \
            and entry.get("offset") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns
        report.mode = "unchanged" if same else "replaced"
    elif isinstance(entry, dict):
        same = entry.get("ino") == st.st_ino and entry.get("dev") == st.st_dev \
            and isinstance(entry.get("offset"), int) and entry["offset"] <= st.st_size \
            and entry.get("head") == _head_digest(path, int(entry.get("offset") or 0))
        if same:
            start, first_line = int(entry["offset"]), int(entry.get("lines") or 0)
            report.mode = "unchanged" if start == st.st_size else "grown"
            if isinstance(entry.get("carry"), dict):
                parser.resume(entry["carry"])
        else:
            report.mode = "replaced"
    if report.mode == "unchanged":
        return report
    own = sink is None
    out = sink if sink is not None else _Sink(root, dry_run, known)
    parser.file_time_us = st.st_mtime_ns // 1000
    end = start
    document = _document(parser, path, st.st_size) if whole and start == 0 else None
    if document is not None:  # a chat kept as one JSON document (older Gemini CLI): read whole
        out.add(report, parser.feed_document(SourceLine(path, 1, 0, b""), document),  # type: ignore[attr-defined]
                st.st_size)
        if on_bytes is not None:
            on_bytes(st.st_size)
        report.lines = 1
        end = st.st_size
    head: list[bytes] = []
    keeps = parser.keeps_lines
    # kept lines read before the parser knows the file's session (Claude Code's summary and
    # file-history-snapshot records name none): they go to the session the file names next,
    # not to one named after the file (its name need not be the session's)
    waiting: list[tuple[SourceLine, Any]] = []
    waiting_bytes = 0
    try:
        for line, line_end in (iter_lines(path, start, first_line, on_bytes, head) if document is None else ()):
            end = line_end
            if line is None:
                report.lines += 1
                parser.stats.problem(SourceLine(path, first_line + report.lines, end, b""),
                                     f"line longer than {MAX_LINE >> 20} MiB skipped")
                continue
            report.lines += 1
            for line, record in _records(parser, line):
                events = parser.feed(line, record)
                size = len(line.data)
                if keeps and not parser.holds(line) and not any(
                        "raw" in ev and ev["attrs"]["source_line"] == line.lineno for ev in events):
                    # a line no event holds (bookkeeping, thinking only, garbage …): kept on its own —
                    # once the file has named its session, when it does not name one itself
                    if parser.last_session is None and parser.line_session(record) == parser.session_hint \
                            and waiting_bytes + size <= BATCH_BYTES:
                        waiting.append((line, record))
                        waiting_bytes += size
                        size = 0
                    else:
                        events.append(parser.line_event(line, record))
                if waiting and parser.last_session is not None:
                    events[:0] = [parser.line_event(w, r) for w, r in waiting]
                    size += waiting_bytes
                    waiting.clear()
                    waiting_bytes = 0
                out.add(report, events, size)
        events = parser.finish()
        # lines still waiting: the file never named a session (or not in its first 8 MiB of them): its name's
        out.add(report, events + [parser.line_event(w, r) for w, r in waiting], waiting_bytes)
    except OSError as e:
        report.error = f"read failed: {e.strerror}"
    if own:
        out.flush()
    report.bytes_read = end - start
    stats = parser.stats
    report.records = dict(stats.records)
    report.unknown = {f"{v or '?'}/{t}": n for (v, t), n in stats.unknown.items()}
    report.unknown_fields = {f"{v or '?'}/{t}": n for (v, t), n in stats.unknown_fields.items()}
    report.problems = [{"file": p, "line": n, "message": m} for p, n, m in stats.problems]
    report.problem_count = stats.problem_count
    if not dry_run and (stats.unknown or stats.unknown_fields):
        _note_unknown(root, parser.provider, stats.unknown, stats.unknown_fields)
    if not dry_run and report.error is None:
        state[ident] = {"dev": st.st_dev, "ino": st.st_ino, "offset": end, "lines": first_line + report.lines,
                        "head": _head_digest(path, end, head[0] if head else b""), "mtime_ns": st.st_mtime_ns,
                        "provider": parser.provider,
                        "imported_at": int(time.time()),
                        # open calls' inputs are content: redacted like everything written
                        "carry": redact_value(parser.carry())[0]}
    return report


def _group_key(agent: str, path: str) -> str:
    """Files of one session share a key (a Claude session's file and its subagents')."""
    if agent == "claude-code":
        cut = path.find(os.sep + "subagents" + os.sep)
        if cut >= 0:
            return agent + ":" + path[:cut]
        return agent + ":" + (path[: -len(".jsonl")] if path.endswith(".jsonl") else path)
    return agent + ":" + path


def _import_groups(root: str, groups: list[list[tuple[str, str]]], state: dict[str, Any], dry_run: bool,
                   on_bytes: Callable[[int], None] | None = None) -> tuple[list[FileReport], dict[str, Any]]:
    """Import sessions' files, each session's in order, their events written in batches
    that may span files: their reports and their new state entries (complete: every
    event is written when this returns)."""
    from agentlog.importers.sources import AGENTS, make_parser

    reports = []
    sink = _Sink(root, dry_run)
    read = 0

    def tick(n: int) -> None:
        nonlocal read
        read += n
        if on_bytes is not None:
            on_bytes(read)

    for files in groups:
        for name, f in files:
            parser = make_parser(AGENTS[name], f)
            if hasattr(parser, "base_time_us"):
                try:
                    parser.base_time_us = int(os.stat(f).st_mtime * 1_000_000)
                except OSError:
                    pass
            reports.append(import_file(root, parser, state, dry_run=dry_run, on_bytes=tick, sink=sink))
    sink.flush()
    return reports, {os.path.abspath(f): state[os.path.abspath(f)] for files in groups for _, f in files
                     if os.path.abspath(f) in state}


def chunk_bytes(total: int, workers: int) -> int:
    """A worker's task of an import of ``total`` bytes: :data:`CHUNK_BYTES`, less
    for a small import (at least :data:`CHUNKS_PER_WORKER` chunks per worker, each
    at least :data:`MIN_CHUNK_BYTES`)."""
    if workers <= 1:
        return CHUNK_BYTES
    return max(MIN_CHUNK_BYTES, min(CHUNK_BYTES, total // (workers * CHUNKS_PER_WORKER)))


def _preload() -> None:
    """Import what a worker runs before the workers are forked: each then starts
    with it (its pages shared) instead of importing it on its own — parsers,
    redaction, the secret gate's Arrow, the log writer: ~0.1–0.3 s a process."""
    from agentlog.capture import redact, secret_gate  # noqa: F401
    from agentlog.log import writer  # noqa: F401
    from agentlog.importers.sources import AGENTS

    for agent in AGENTS.values():
        agent.parser_class()
    import pyarrow.compute  # type: ignore[import-untyped]  # noqa: F401


def _chunks(groups: list[list[tuple[str, str]]], size: int,
            sizes: dict[str, int]) -> list[list[list[tuple[str, str]]]]:
    """Consecutive groups, about ``size`` bytes of files (``sizes``) per chunk (a group
    is never split)."""
    out: list[list[list[tuple[str, str]]]] = []
    taken = size
    for files in groups:
        if taken >= size:
            out.append([])
            taken = 0
        out[-1].append(files)
        taken += sum(sizes.get(f, 0) for _, f in files)
    return out


# -- many files -------------------------------------------------------------------------------------


LOCK_FILE = "import.lock"
LOCK_WAIT_S = 600.0


class ImportBusy(Busy):
    """Another import held the data root's import lock for too long."""


def import_paths(root: str, agent_names: Iterable[str], paths: Iterable[str] = (), *, since_s: float | None = None,
                 dry_run: bool = False, progress: Callable[[str, int, int], None] | None = None,
                 workers: int | None = None) -> ImportReport:
    """Import under the data root's import lock (``state/import.lock``): two imports
    at once (a hook's background one and the user's, say) would each miss what the
    other is writing and write it again. A dry run writes nothing and takes no lock."""
    if dry_run:
        return _import_paths(root, agent_names, paths, since_s=since_s, dry_run=True, progress=progress,
                             workers=workers)
    folder = state_dir(root)
    ensure_dir(folder)
    fd = open_locked(os.path.join(folder, LOCK_FILE), LOCK_WAIT_S)
    if fd is None:
        raise ImportBusy(f"another import held {os.path.join(folder, LOCK_FILE)} for {LOCK_WAIT_S:.0f} s; try again")
    try:
        return _import_paths(root, agent_names, paths, since_s=since_s, dry_run=False, progress=progress,
                             workers=workers)
    finally:
        os.close(fd)


def _import_paths(root: str, agent_names: Iterable[str], paths: Iterable[str] = (), *, since_s: float | None = None,
                  dry_run: bool = False, progress: Callable[[str, int, int], None] | None = None,
                  workers: int | None = None) -> ImportReport:
    """Import the transcripts of ``agent_names`` found under ``paths`` (default: each
    agent's own locations). ``progress(file, bytes done, bytes total)`` is called
    as bytes are read. The offsets are saved every few seconds and at the end, so
    an interrupted import goes on about where it stopped (lines read again are
    recognised and not written twice).

    A large import runs in ``workers`` processes (default: two when there are
    two cores and at least :data:`PARALLEL_MIN_BYTES`), each taking whole
    sessions (a session's files — a Claude session and its subagents' — go to
    one worker, in order), :data:`CHUNK_BYTES` of them at a time."""
    from agentlog.importers.sources import AGENTS, find_files

    started = time.perf_counter()
    report = ImportReport(dry_run=dry_run)
    paths = list(paths)
    plan: list[tuple[Any, str]] = []
    for name in agent_names:
        agent = AGENTS[name]
        for f in find_files(agent, paths or agent.default_roots(), since_s, as_given=bool(paths)):
            plan.append((agent, f))
    sizes: dict[str, int] = {}  # stat-ed once: the plan, the chunks and the progress use them
    for _, f in plan:
        try:
            sizes[f] = os.stat(f).st_size
        except OSError:
            pass
    total = sum(sizes.values())
    state = load_state(root)
    groups: dict[str, list[tuple[str, str]]] = {}
    for agent, f in plan:
        groups.setdefault(_group_key(agent.name, f), []).append((agent.name, f))
    done = 0
    saved = time.monotonic()

    def finished(reports: list[FileReport], updates: dict[str, Any], size: int, last: str) -> None:
        nonlocal done, saved
        report.files.extend(reports)
        state.update(updates)
        done += size
        if progress is not None:
            progress(last, done, total)
        if not dry_run and time.monotonic() - saved > SAVE_EVERY_S:
            save_state(root, state)  # an interrupted import goes on from here (what came after is deduplicated)
            saved = time.monotonic()

    work = list(groups.values())
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if total >= PARALLEL_MIN_BYTES and len(work) > 1 else 1
    chunks = _chunks(work, chunk_bytes(total, workers), sizes)
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        if method == "fork":
            _preload()
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
            futures = {pool.submit(_import_groups, root, chunk, {os.path.abspath(f): state.get(os.path.abspath(f))
                                                                 for files in chunk for _, f in files}, dry_run): chunk
                       for chunk in chunks}
            for fut in as_completed(futures):
                chunk = futures[fut]
                reports, updates = fut.result()
                finished(reports, updates, sum(sizes.get(f, 0) for files in chunk for _, f in files), chunk[-1][-1][1])
    else:
        for chunk in chunks:
            def tick(n: int, chunk: list[list[tuple[str, str]]] = chunk) -> None:
                if progress is not None:
                    progress(chunk[0][0][1], done + n, total)

            reports, updates = _import_groups(root, chunk, state, dry_run, tick)
            finished(reports, updates, sum(sizes.get(f, 0) for files in chunk for _, f in files), chunk[-1][-1][1])
    if not dry_run:
        save_state(root, state)
    report.seconds = time.perf_counter() - started
    return report
