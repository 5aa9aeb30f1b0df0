"""What every transcript parser implements, and the event it builds.

A parser reads one transcript file, a line at a time, and turns each line
into zero or more *reconstructed* wire-form events (the same shape a hook
writes, see ``docs/event-model.md``), built with the capture path's own
helpers (``agentlog.capture.adapters.common``: tool categories, file facts,
failure classes, prompt kinds) so that an imported tool call projects
exactly like a captured one. Then :mod:`agentlog.importers.run` merges them
with what hooks recorded and appends them to the session logs.

Every reconstructed event carries, in ``attrs``:

- ``reconstructed: true`` and ``reconstructed_from`` (``claude_code_transcript``,
  ``codex_rollout``, ``gemini_cli_chat``, ``cursor_transcript`` …);
- ``source_file`` (the path as given) and ``source_line`` (1-based line number);
- ``merge_key``: what makes it the same thing a hook may have recorded
  (:func:`merge_key`);

and the first event of a line carries the line itself in ``raw``
(``{"line": <text>}``, or ``{"line_b64": …}`` when it is not UTF-8): kept
byte for byte, except that secrets are redacted before anything is written.
A line that gives no event holding it (bookkeeping records, an assistant
record holding only thinking, a superseded write, garbage …) is kept by a
``transcript_line`` event (:data:`LINE_KIND`, :meth:`Parser.line_event`):
nothing but the line, its place and time, which the projection never reads.

Parsers are pure and total: any line may be garbage, any key missing or of
the wrong type; they count what they do not know and never raise.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

import orjson

from agentlog import __version__
from agentlog.capture.adapters import common as c
from agentlog.capture.project import attach_project

#: problems a parser reports per file, at most
MAX_PROBLEMS: Final = 200
#: entries of a carried dict (open calls …), at most: the newest are kept
MAX_CARRIED: Final = 2000
#: the kind of an event that only keeps a transcript line (a line no other event holds)
LINE_KIND: Final = "transcript_line"


class SourceLine(NamedTuple):
    """One line of a transcript file (a named tuple: one is made per line read)."""

    path: str
    lineno: int
    """1-based."""
    offset: int
    """Byte offset of the line's first byte."""
    data: bytes
    """The line without its newline."""
    json: bool = False
    """``data`` parsed as JSON as it is (the runner says so): valid UTF-8, and no
    control character but the blanks JSON allows between tokens."""
    part: int = 0
    """Which record of its line this is (0: the first, or the line's only one): a line
    holding several JSON records written without a newline between them
    (:func:`split_records`) is fed one record at a time, ``data`` and ``offset``
    those of the record."""


@dataclass
class ParseStats:
    """What a parser saw that it could not use, per agent version."""

    #: (agent version, record type) → count, for record types the parser does not know
    unknown: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (agent version, "type.field") → count, for fields of known records it does not know
    unknown_fields: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (path, line, message), at most MAX_PROBLEMS
    problems: list[tuple[str, int, str]] = field(default_factory=list)
    problem_count: int = 0
    #: record type → count, of every record read
    records: dict[str, int] = field(default_factory=dict)

    def saw(self, record_type: str) -> None:
        self.records[record_type] = self.records.get(record_type, 0) + 1

    def unknown_record(self, version: str | None, record_type: str) -> None:
        key = (version or "", record_type)
        self.unknown[key] = self.unknown.get(key, 0) + 1

    def unknown_field(self, version: str | None, name: str) -> None:
        key = (version or "", name)
        self.unknown_fields[key] = self.unknown_fields.get(key, 0) + 1

    def problem(self, line: SourceLine, message: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append((line.path, line.lineno, message))


class Parser:
    """A transcript parser: one instance per file, fed its lines in order.

    Subclasses set :attr:`provider` and :attr:`source` and implement :meth:`feed`
    (and :meth:`finish` when they hold events back, e.g. to pair a call with its
    result)."""

    provider: str = ""
    """``claude_code``, ``codex``, ``gemini_cli`` or ``cursor``."""
    source: str = ""
    """``attrs.reconstructed_from`` of every event it builds."""
    keeps_lines: bool = True
    """Whether the runner keeps a line that no event holds (:meth:`line_event`): yes for
    transcripts; not for another tool's event log, whose records are events (and an
    attemptdb ``metadata_only`` one must not get its content back that way)."""

    def __init__(self, path: str, session_hint: str | None = None) -> None:
        self.path = path
        self.session_hint = session_hint
        """A session id the file's location gives (its stem), for records that name none."""
        self.stats = ParseStats()
        self.file_time_us = 0
        """The file's modification time (µs; the runner sets it): the time of a kept line
        (:meth:`line_event`) read before any time is known."""
        # the session of the last event built and the latest time (build_event sets
        # them): a kept line's, when it names none
        self.last_session: str | None = None
        self.last_observed = 0

    def feed(self, line: SourceLine, record: Any) -> list[dict[str, Any]]:
        """The events of one line. ``record`` is the line parsed as JSON (any JSON
        value), or :data:`NOT_JSON` when it is not JSON."""
        raise NotImplementedError

    def finish(self) -> list[dict[str, Any]]:
        """Events held back until the end of the file (none by default)."""
        return []

    def holds(self, line: SourceLine) -> bool:
        """Whether the line just fed is held back (its events come later, from
        :meth:`finish` or a later line): the runner then does not keep it on its own.
        None is by default; a parser that holds lines keeps those it drops itself."""
        return False

    def line_session(self, record: Any) -> str | None:
        """The session a kept line belongs to: the last event's, else the file's."""
        return self.last_session or self.session_hint

    def line_event(self, line: SourceLine, record: Any) -> dict[str, Any]:
        """A ``transcript_line`` event keeping ``line`` (``record``: the line parsed, or
        :data:`NOT_JSON`): for a line that gives no event holding it. Its time is the
        record's ``timestamp``, else the last event's, else the file's; its id a function
        of the session, the line's number and its bytes (a CRC and length), so a line
        read again is the same event and another line at that place is not."""
        at = None
        rtype = ""
        if isinstance(record, dict):
            ts = record.get("timestamp")
            at = c.timestamp_us(ts) if ts is not None else None
            rtype = record_type(record)
        session = self.line_session(record)
        observed = at if at is not None else (self.last_observed or self.file_time_us)
        attrs: dict[str, Any] = {"reconstructed": True, "reconstructed_from": self.source, "source_file": line.path,
                                 "source_line": line.lineno}
        if rtype:
            attrs["record_type"] = rtype
        if record is NOT_JSON:
            attrs["not_json"] = True
        out: dict[str, Any] = {
            "event_id": event_id_for(self.source, LINE_KIND, session or "", line.lineno, len(line.data),
                                     zlib.crc32(line.data), at_us=at or 0),
            "schema_version": 1, "kind": LINE_KIND, "provider": self.provider,
            "provider_event_name": f"line:{rtype}" if rtype else "line", "observed_at": observed,
            "captured_at": observed, "capture_mode": "full", "agentlog_version": __version__,
        }
        if session is not None:
            out["provider_session_id"] = session
        out["attrs"] = attrs
        out["raw"] = raw_line(line.data, line.json)
        return out

    def whole_document(self, data: bytes) -> Any:
        """The file read as one JSON document when this parser takes some files whole
        (the runner then calls ``feed_document``); None (the default): read it by lines."""
        return None

    #: attributes an import of a grown file needs from the import before (the
    #: session a first line named, calls still open …): :meth:`carry` saves them
    #: (JSON values) with the file's offset and :meth:`resume` restores them
    carried: tuple[str, ...] = ()

    def carry(self) -> dict[str, Any]:
        """What the next import of this file, from where this one stopped, starts from."""
        out: dict[str, Any] = {}
        for name in self.carried + _CARRIED:
            value = getattr(self, name, None)
            if isinstance(value, dict) and len(value) > MAX_CARRIED:
                value = dict(list(value.items())[-MAX_CARRIED:])
            out[name] = value
        return out

    def resume(self, carry: dict[str, Any]) -> None:
        """Start from what :meth:`carry` saved (an import of the file's new lines)."""
        for name in self.carried + _CARRIED:
            if name in carry:
                setattr(self, name, carry[name])


#: what every parser carries (the session and time a kept line takes when it names none)
_CARRIED: Final = ("last_session", "last_observed")


class _NotJson:
    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Final = _NotJson()
"""What :meth:`Parser.feed` receives for a line that is not JSON."""


def event_id_for(*parts: Any, at_us: int) -> str:
    """A deterministic UUIDv7-shaped id: the millisecond of ``at_us`` and 74 bits of
    a hash of ``parts``. The same record imported twice, from any copy of the
    file, gets the same id."""
    b2 = _BLAKE2B_10.copy()  # a copy of a fresh state: cheaper than making one (its parameters parsed)
    b2.update("\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass"))
    h = b2.hexdigest()  # 80 bits: 20 hex digits
    ms = f"{(max(0, at_us) // 1000) & 0xFFFF_FFFF_FFFF:012x}"
    # 48 bits of milliseconds, version 7, 12 bits of the hash (its first 16 less the top 4),
    # variant 0b10 over the top 2 of its last 64 bits, the other 62
    return f"{ms[:8]}-{ms[8:]}-7{h[1:4]}-{_VARIANT[h[4]]}{h[5:8]}-{h[8:]}"


_BLAKE2B_10: Final = hashlib.blake2b(digest_size=10)


def split_records(data: bytes) -> list[tuple[int, bytes]] | None:
    """The JSON objects of a line that holds several, written without a newline
    between them (``{…}{…}``; blanks between them allowed): each one's byte offset in
    the line and its bytes. None when the line is not wholly two or more objects
    (the caller found it is not one JSON value)."""
    import json

    text = data.decode("utf-8", "surrogateescape")
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int]] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos == end:
            break
        if text[pos] != "{":
            return None
        try:
            _, stop = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return None
        spans.append((pos, stop))
        pos = stop
    if len(spans) < 2:
        return None
    out: list[tuple[int, bytes]] = []
    for start, stop in spans:
        offset = len(text[:start].encode("utf-8", "surrogateescape"))
        out.append((offset, text[start:stop].encode("utf-8", "surrogateescape")))
    return out


def record_type(record: dict[str, Any]) -> str:
    """A record's type as a kept line names it: ``type``, with its ``subtype`` or its
    ``payload``'s / ``data``'s type when it has one (``response_item:message``,
    ``progress:hook_progress``, ``system:api_error``); "" when it has no type."""
    t = record.get("type")
    if not isinstance(t, str):
        return ""
    sub = record.get("subtype")
    if not isinstance(sub, str):
        inner = record.get("payload") or record.get("data")
        sub = inner.get("type") if isinstance(inner, dict) else None
    return f"{t}:{sub}" if isinstance(sub, str) else t


def line_event_of(carrier: dict[str, Any]) -> dict[str, Any]:
    """A ``transcript_line`` event holding the line that ``carrier`` (an event with
    ``raw``) holds: for a carrier not written (a hook recorded the same thing, or
    another line gave its id), so that its line is kept all the same. Its id is a
    function of the carrier's and of the line's number."""
    attrs = carrier["attrs"]
    keep = {k: attrs[k] for k in ("reconstructed", "reconstructed_from", "source_file", "source_line") if k in attrs}
    keep["carrier_event_id"] = carrier["event_id"]
    keep["carrier_kind"] = carrier["kind"]
    out: dict[str, Any] = {
        "event_id": event_id_for(keep.get("reconstructed_from"), LINE_KIND, carrier["event_id"],
                                 keep.get("source_line"), at_us=carrier["observed_at"]),
        "schema_version": 1, "kind": LINE_KIND, "provider": carrier["provider"], "provider_event_name": "line",
        "observed_at": carrier["observed_at"], "captured_at": carrier.get("captured_at", carrier["observed_at"]),
        "capture_mode": "full", "agentlog_version": __version__,
    }
    if carrier.get("provider_session_id") is not None:
        out["provider_session_id"] = carrier["provider_session_id"]
    out["attrs"] = keep
    out["raw"] = carrier["raw"]
    return out
#: a hex digit with its top two bits made ``10``
_VARIANT: Final = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def merge_key(provider: str, session_id: str | None, kind: str, item: str | None) -> str:
    """The key under which a reconstructed event and a hook's are the same thing:
    provider, session, kind and the provider's id of the item (tool-use id,
    message id …; for a prompt, a digest of its text). Documented in
    ``docs/import.md``."""
    return "\x1f".join((provider, session_id or "", kind, item or ""))


def text_digest(text: str) -> str:
    """A short digest of a text (the item of a prompt's merge key), taken of the
    text as it is written: redacted, as a hook's prompt is, so that a prompt
    holding a secret is the same thing in both (redacting is idempotent)."""
    from agentlog.capture.redact import redact_text

    text = redact_text(text)[0]
    return hashlib.blake2b(text.strip().encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def raw_line(data: bytes, parsed: bool = False) -> dict[str, Any]:
    """``raw`` of a line: ``{"line": text}``, or ``{"line_b64": …}`` when it is not UTF-8.

    ``parsed`` (the line parsed as JSON as it is): a line that is not ASCII and has
    no tab or carriage return is given as a :class:`RawLine`, its text already
    written as a JSON string — the bytes orjson would write for it, made without
    decoding the line to a string and encoding it back."""
    if parsed and not data.isascii() and b"\t" not in data and b"\r" not in data:
        return RawLine(data)
    try:
        return {"line": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"line_b64": base64.b64encode(data).decode("ascii")}


class RawLine(dict):  # type: ignore[type-arg]
    """``{"line": <the line's JSON string>}`` for orjson (an ``orjson.Fragment``),
    made from a valid UTF-8 line without control characters: in JSON text only
    ``\\`` and ``"`` then need escaping, as orjson escapes them. :meth:`plain` is
    the ordinary form, for anything that reads the text (the redactor)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        super().__init__(line=orjson.Fragment(b'"' + data.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'))
        self.data = data

    def plain(self) -> dict[str, str]:
        return {"line": self.data.decode("utf-8")}


_PROJECTS: dict[str, dict[str, Any] | None] = {}
#: the optional wire keys after the session's (common.WIRE_OPTIONAL) that an event's partial form gives
_FROM_PARTIAL: Final = c.WIRE_OPTIONAL[3:]


def _project(cwd: str) -> dict[str, Any] | None:
    """The project of a working directory (looked up once per directory and process),
    without its current branch and head."""
    if cwd not in _PROJECTS:
        from agentlog.capture.project import project_info

        if len(_PROJECTS) > 10_000:
            _PROJECTS.clear()
        from agentlog.capture.redact import redact_project

        info = project_info(cwd)
        _PROJECTS[cwd] = None if info is None else redact_project(
            {k: v for k, v in info.items() if k not in ("branch", "head")})
    return _PROJECTS[cwd]


def build_event(parser: Parser, partial: dict[str, Any], line: SourceLine, *, session_id: str | None,
                observed_at: int, item: str | None, index: int = 0, version: str | None = None,
                turn_id: str | None = None, cwd: str | None = None, with_raw: bool = False,
                captured_at: int | None = None, branch: str | None = None) -> dict[str, Any]:
    """The wire-form event of one reconstructed record.

    ``partial`` is what :func:`agentlog.capture.adapters.common.finish` returns
    (kind, provider_event_name, tool, paths, outcome, attrs, content …);
    ``item`` the provider's id of the thing (tool-use id, message id) for the
    merge key and the event id; ``index`` tells apart several events of one
    line; ``cwd`` gives the project (as the hook's git lookup does, without the
    branch and head it finds now, which are not the ones of then: ``branch`` is
    the transcript's, when it says);
    ``with_raw`` puts the line in ``raw``. Content and raw are *not* redacted
    here: the runner redacts each batch before anything is written
    (:func:`agentlog.capture.secret_gate.redact_events`, which runs the
    redactor only where a batch pre-check says it could find something)."""
    kind = str(partial.get("kind") or "unknown")
    provider = parser.provider
    key = "\x1f".join((provider, session_id or "", kind, item or ""))  # merge_key()
    out: dict[str, Any] = {
        "event_id": event_id_for(parser.source, key, "", "", at_us=observed_at) if item is not None
        else event_id_for(parser.source, key, line.lineno, index, at_us=observed_at) if not line.part
        else event_id_for(parser.source, key, line.lineno, index, line.part, at_us=observed_at),
        "schema_version": 1,
        "kind": kind,
        "provider": provider,
        "provider_event_name": str(partial.get("provider_event_name") or ""),
        "observed_at": observed_at,
        "captured_at": captured_at if captured_at is not None else observed_at,
        "capture_mode": "full",
        "agentlog_version": __version__,
    }
    # the optional wire keys in their order (as common.put_optional puts them)
    if version is not None:
        out["provider_version"] = version
    if session_id is not None:
        out["provider_session_id"] = session_id
    if turn_id is not None:
        out["provider_turn_id"] = turn_id
    for name in _FROM_PARTIAL:
        value = partial.get(name)
        # what common.put_optional keeps (not None, [] or {}), without making a [] and a {} to compare with
        if value is not None and (value or not isinstance(value, (list, dict))):
            out[name] = value
    if cwd:
        project = _project(cwd)
        attach_project(out, dict(project) if project is not None else None, cwd)
        if project is not None and branch:
            out["project"]["branch"] = branch
    parser.last_session = session_id
    if observed_at > parser.last_observed:
        parser.last_observed = observed_at
    attrs: dict[str, Any] = dict(partial.get("attrs") or {})
    attrs["reconstructed"] = True
    attrs["reconstructed_from"] = parser.source
    attrs["source_file"] = line.path
    attrs["source_line"] = line.lineno
    if line.part:
        attrs["source_part"] = line.part
    if item is not None:
        attrs["merge_key"] = key
    if cwd:
        attrs.setdefault("cwd", cwd)
    out["attrs"] = attrs
    content = partial.get("content")
    if content:
        out["content"] = content
    if with_raw:
        out["raw"] = raw_line(line.data, line.json)
    return out


__all__ = ["LINE_KIND", "NOT_JSON", "ParseStats", "Parser", "RawLine", "SourceLine", "build_event", "c", "event_id_for",
           "line_event_of", "merge_key", "raw_line", "record_type", "split_records", "text_digest"]
