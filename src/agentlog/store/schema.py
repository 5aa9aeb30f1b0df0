"""The ``events`` table: one row per frame, one typed column per canonical field.

The table is a Delta Lake table under ``<data_root>/store/events``,
partitioned by ``observed_date`` (the UTC day of ``observed_at``). Nested
parts of the canonical event (``agent``, ``tool``, ``outcome``, ``project``)
are flattened into columns; ``attrs``, ``content`` and ``raw`` are kept as
compact JSON text so that DuckDB's built-in json functions can query them
(``json_extract_string(content, '$.command')``). Low-cardinality strings
(``kind``, ``provider``, …) are plain strings: Parquet dictionary-encodes
them on its own, and Delta has no dictionary type.

Each row also says where it came from: ``log_provider``/``log_key`` name the
session log, ``seq`` and ``frame_hash`` the frame, ``log_offset`` the byte
offset of the frame's first byte in that log.

An optional field absent from the event is ``NULL`` (``paths`` absent is an
empty list; ``attrs``/``content``/``raw`` absent are ``NULL``).
"""

from __future__ import annotations

import json
import os

import orjson
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]

from agentlog.core import AgentlogError
from agentlog.core.atrest import derived_root
from agentlog.core.jsonio import loads
from agentlog.core.unsealing import EventOpener
from agentlog.log import frame as _frame

US_PER_DAY: Final = 86_400_000_000
TS: Final = pa.timestamp("us", tz="UTC")

EVENTS_SCHEMA: Final = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("schema_version", pa.int16()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("provider", pa.string(), nullable=False),
        pa.field("provider_event_name", pa.string()),
        pa.field("observed_at", TS, nullable=False),
        pa.field("captured_at", TS),
        pa.field("capture_mode", pa.string()),
        pa.field("agentlog_version", pa.string()),
        pa.field("provider_version", pa.string()),
        pa.field("provider_session_id", pa.string()),
        pa.field("provider_turn_id", pa.string()),
        pa.field("agent_id", pa.string()),
        pa.field("agent_type", pa.string()),
        pa.field("model", pa.string()),
        pa.field("tool_name", pa.string()),
        pa.field("tool_category", pa.string()),
        pa.field("tool_call_id", pa.string()),
        pa.field("paths", pa.list_(pa.string())),
        pa.field("outcome_status", pa.string()),
        pa.field("outcome_class", pa.string()),
        pa.field("exit_code", pa.int32()),
        pa.field("duration_ms", pa.int64()),
        pa.field("project_root", pa.string()),
        pa.field("project_name", pa.string()),
        pa.field("project_remote", pa.string()),
        pa.field("project_branch", pa.string()),
        pa.field("project_head", pa.string()),
        pa.field("attrs", pa.large_string()),
        pa.field("text", pa.large_string()),
        pa.field("event", pa.large_string(), nullable=False),
        pa.field("log_provider", pa.string(), nullable=False),
        pa.field("log_key", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("frame_hash", pa.string(), nullable=False),
        pa.field("log_offset", pa.int64(), nullable=False),
        pa.field("observed_date", pa.date32(), nullable=False),
    ]
)
COLUMNS: Final[tuple[str, ...]] = tuple(EVENTS_SCHEMA.names)
PARTITION_BY: Final = ["observed_date"]


# Columns whose min/max go into the Delta log (data skipping): ids, times and
# positions, never free text (a purge must be able to remove every trace of
# content, and the transaction log is kept for ever).
STATS_COLUMNS: Final = (
    "event_id", "kind", "provider", "observed_at", "captured_at", "provider_session_id",
    "log_provider", "log_key", "seq", "log_offset", "observed_date",
)
# Compression of the files ingest writes; compaction rewrites them harder.
INGEST_ZSTD_LEVEL: Final = 3
COMPACT_ZSTD_LEVEL: Final = 9


def writer_properties(level: int = INGEST_ZSTD_LEVEL) -> Any:
    """Parquet settings: zstd, no dictionary and no statistics for the bulky ``event`` text."""
    from deltalake import ColumnProperties, WriterProperties

    bulky = ColumnProperties(dictionary_enabled=False, statistics_enabled="NONE")
    return WriterProperties(
        compression="ZSTD",
        compression_level=level,
        data_page_size_limit=8 << 20,
        column_properties={"event": bulky, "attrs": bulky},
    )


# Kinds whose text the table keeps in ``text``, and the content key it comes
# from: the prompt a person typed, the note of a correction or retraction.
# (The projection reads prompts as turn objectives; reading them from the
# bulky ``event`` column would decode every event's bytes.)
TEXT_KINDS: Final = {"prompt_submitted": "prompt", "correction": "note", "retraction": "note"}


class EventRowError(AgentlogError, ValueError):
    """A sealed frame whose event cannot be flattened (the reason is the message)."""


class StorePathError(AgentlogError):
    """The data root's path has characters the store's tables cannot live under."""


_BAD_PATH_CHARS: Final = frozenset(map(chr, [*range(0x20), 0x7F])) | frozenset("[]^|\\")
"""What Delta Lake cannot have in a table's path: it refuses control characters, ``[ ] ^ |`` abort it
(a panic, not an error) and it reads a backslash as a separator."""


def store_dir(root: str) -> str:
    """``<root>/store``; refused (:class:`StorePathError`) when the path holds a character of
    :data:`_BAD_PATH_CHARS`, which the store's tables cannot live under."""
    path = os.path.join(derived_root(root), "store")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 (a lone surrogate here): Delta takes UTF-8 paths only
        raise StorePathError(f"the data root {os.path.abspath(root)!r} is not valid UTF-8, which the store cannot "
                             "have in its path: set AGENTLOG_HOME to a directory whose name is") from None
    bad = sorted(set(os.path.abspath(path)) & _BAD_PATH_CHARS)
    if bad:
        raise StorePathError(f"the data root {os.path.abspath(root)!r} holds {', '.join(map(repr, bad))}, which the "
                             "store cannot have in its path: set AGENTLOG_HOME to a directory without them")
    return path


def events_path(root: str) -> str:
    """Directory of the Delta table ``events``."""
    return os.path.join(store_dir(root), "events")


def events_dataset(root: str) -> Any:
    """The ``events`` table's current snapshot as a pyarrow dataset (None when there is no store yet).

    Built from the snapshot's file list, with ``observed_date`` read from the
    hive-style directory names: deltalake's own ``to_pyarrow_dataset`` builds
    a filter expression per partition (0.3 s on a 100k-event store, growing
    with the days covered), and its file system handler aborts the
    interpreter at exit with pyarrow 26."""
    import pyarrow.dataset as ds  # type: ignore[import-untyped]
    from deltalake import DeltaTable
    from urllib.parse import unquote

    path = events_path(root)
    if not DeltaTable.is_deltatable(path):
        return None
    files = []
    for uri in DeltaTable(path).file_uris():
        files.append(unquote(uri[len("file://"):]) if uri.startswith("file://") else uri)
    partitioning = ds.partitioning(pa.schema([pa.field("observed_date", pa.date32())]), flavor="hive")
    return ds.dataset(files, format="parquet", schema=EVENTS_SCHEMA, partitioning=partitioning,
                      partition_base_dir=os.path.abspath(path))


def read_events(root: str, columns: list[str] | None = None) -> pa.Table:
    """The whole ``events`` table as Arrow (empty table if it does not exist yet)."""
    dataset = events_dataset(root)
    if dataset is None:
        empty = EVENTS_SCHEMA.empty_table()
        return empty.select(columns) if columns else empty
    table = dataset.to_table(columns=columns)
    # Delta knows one string type and reads it back with 32-bit offsets; the
    # bulky columns are widened so that no chunk, combined or not, can
    # overflow at 2 GiB (attemptdb's "byte array offset overflow").
    return table.cast(pa.schema([EVENTS_SCHEMA.field(n) if n in COLUMNS else table.schema.field(n)
                                 for n in table.schema.names]))


def _clean(s: str) -> str:
    """A string with each lone surrogate replaced by one U+FFFD (Arrow strings must be UTF-8)."""
    return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _s(v: Any, name: str, dirty: bool) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise EventRowError(f"{name} is not a string")
    return _clean(v) if dirty else v


def _i(v: Any, name: str) -> int | None:
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        raise EventRowError(f"{name} is not an integer")
    return v


def _obj(v: Any, name: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise EventRowError(f"{name} is not an object")
    return v


_CONTENT_KEY: Final = b',"content":'
_RAW_KEY: Final = b',"raw":'


def _loads(body: bytes) -> Any:
    try:
        return loads(body)  # (what orjson refuses, the stdlib reads: lone surrogates, big integers)
    except ValueError:
        raise EventRowError("event_not_json") from None


def _loads_object(event: bytes) -> dict[str, Any]:
    ev = _loads(event)
    if not isinstance(ev, dict):
        raise EventRowError("event_not_object")
    return ev


def parse_head(event: bytes) -> tuple[dict[str, Any], int]:
    """The event's fields before ``content`` (and ``raw``), parsed without
    the bulky tail, and the length of the bytes they came from.

    The canonical key order puts ``content`` and ``raw`` last. The first
    ``,"content":`` (else ``,"raw":``) in the bytes is where the tail starts:
    a JSON string cannot hold that byte sequence (its quotes would be
    escaped), and a cut at a nested key of the same name leaves at least two
    containers open, so the head would not parse and the whole event is
    parsed instead. The tail's JSON is not parsed here (see ``EventBatch``).
    """
    cut = event.find(_CONTENT_KEY)
    if cut < 0:
        cut = event.find(_RAW_KEY)
    if cut > 0:
        try:
            head = orjson.loads(event[:cut] + b"}")
        except orjson.JSONDecodeError:
            head = None
        if isinstance(head, dict):
            return head, cut
    ev = _loads(event)
    if not isinstance(ev, dict):
        raise EventRowError("event_not_object")
    return ev, len(event)


_STR = pa.string()
# The head of a canonical event as Arrow converts it straight from the parsed
# dicts (nested parts as structs, flattened into columns afterwards).
HEAD_TYPE: Final = pa.struct(
    [
        pa.field("event_id", _STR),
        pa.field("schema_version", pa.int16()),
        pa.field("kind", _STR),
        pa.field("provider", _STR),
        pa.field("provider_event_name", _STR),
        pa.field("observed_at", pa.int64()),
        pa.field("captured_at", pa.int64()),
        pa.field("capture_mode", _STR),
        pa.field("agentlog_version", _STR),
        pa.field("provider_version", _STR),
        pa.field("provider_session_id", _STR),
        pa.field("provider_turn_id", _STR),
        pa.field("agent", pa.struct([("agent_id", _STR), ("agent_type", _STR), ("model", _STR)])),
        pa.field("tool", pa.struct([("name", _STR), ("category", _STR), ("call_id", _STR)])),
        pa.field("paths", pa.list_(_STR)),
        pa.field("outcome", pa.struct([("status", _STR), ("class", _STR), ("exit_code", pa.int32())])),
        pa.field("duration_ms", pa.int64()),
        pa.field("project", pa.struct([("root", _STR), ("name", _STR), ("remote", _STR), ("branch", _STR),
                                       ("head", _STR)])),
    ]
)
_NESTED: Final = {
    "agent": ("agent_id", "agent_type", "model"),
    "tool": ("tool_name", "tool_category", "tool_call_id"),
    "outcome": ("outcome_status", "outcome_class", "exit_code"),
    "project": ("project_root", "project_name", "project_remote", "project_branch", "project_head"),
}
_SUB: Final = {
    "agent": ("agent_id", "agent_type", "model"),
    "tool": ("name", "category", "call_id"),
    "outcome": ("status", "class", "exit_code"),
    "project": ("root", "name", "remote", "branch", "head"),
}


class BatchTypeError(AgentlogError, ValueError):
    """A field of some event in the batch has the wrong type (the fast path
    does not say which; ``EventBatch(fast=False)`` checks row by row)."""


def strict_head(ev: dict[str, Any], dirty: bool) -> dict[str, Any]:
    """The head fields of a parsed event, each checked for its canonical type
    (``EventRowError`` names the first that is not) and cleaned of lone
    surrogates when ``dirty``."""
    out: dict[str, Any] = {}
    for f in HEAD_TYPE:
        name, v = f.name, ev.get(f.name)
        if name in _SUB:
            sub = _obj(v, name)
            out[name] = {
                k: (_ranged(_i(sub.get(k), f"{name}.{k}"), f"{name}.{k}", 32) if k == "exit_code"
                    else _s(sub.get(k), f"{name}.{k}", dirty))
                for k in _SUB[name]
            }
        elif name == "paths":
            if v is None:
                out[name] = []
            elif isinstance(v, list):
                out[name] = [_s(p, "paths[]", dirty) or "" for p in v]
            else:
                raise EventRowError("paths is not a list")
        elif pa.types.is_integer(f.type):
            out[name] = _ranged(_i(v, name), name, f.type.bit_width)
        else:
            out[name] = _s(v, name, dirty)
    return out


def _ranged(v: int | None, name: str, bits: int) -> int | None:
    if v is not None and not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        raise EventRowError(f"{name} is out of range")
    return v


class EventBatch:
    """Rows of ``EVENTS_SCHEMA`` accumulated from checked frames.

    ``fast`` (the default) parses only each event's head (``parse_head``),
    checks the required fields per row and leaves the other fields' types to
    Arrow's conversion of the whole batch (``to_arrow`` raises
    ``BatchTypeError`` if one is wrong: the caller then redoes the work with
    ``fast=False``, which parses every event whole — proving its tail is JSON
    — and checks every field per row, naming the bad frame).
    """

    def __init__(self, *, fast: bool = True, keys: dict[str, bytes] | None = None) -> None:
        self.fast = fast
        self.keys = keys
        """Data keys by id (encryption at rest is on): sealed events are opened as they are added."""
        self.opener = None if keys is None else EventOpener(keys)
        self.heads: list[dict[str, Any]] = []
        self.attrs: list[str | None] = []
        self.texts: list[str | None] = []
        self.events: list[bytes] = []
        self.log_provider: list[str] = []
        self.log_key: list[str] = []
        self.seq: list[int] = []
        self.frame_hash: list[str] = []
        self.log_offset: list[int] = []
        self.rows = 0
        self.frame_bytes = 0

    def add(self, event: bytes, log_provider: str, log_key: str, seq: int, frame_hash: str, offset: int,
            frame_bytes: int) -> None:
        """Add one checked frame's event (its exact JSON bytes).

        Raises ``EventRowError`` (and adds nothing) when the event is not
        UTF-8, not a JSON object, or lacks a required field.
        """
        try:
            event.decode("utf-8")
        except UnicodeDecodeError:
            raise EventRowError("event_not_utf8") from None
        if self.opener is not None:
            event = self.opener(event)  # the one place a derived store reads sealed content
        if self.fast:
            ev, head_len = parse_head(event)
        else:
            ev, head_len = _loads_object(event), len(event)
        # A lone surrogate forces the writer to ASCII escapes; only then can a
        # decoded string hold one, so only then is cleaning needed.
        dirty = event.find(b"\\ud", 0, head_len) >= 0 or event.find(b"\\uD", 0, head_len) >= 0
        if dirty or not self.fast:
            head = strict_head(ev, dirty)
        else:
            head = ev
        event_id, kind, provider, observed = head.get("event_id"), head.get("kind"), head.get("provider"), head.get(
            "observed_at")
        if (event_id.__class__ is not str or kind.__class__ is not str or provider.__class__ is not str
                or observed.__class__ is not int):
            raise EventRowError("missing_required_field")
        paths = head.get("paths")
        if paths is not None and paths.__class__ is not list:  # Arrow would take a string as a list of characters
            raise EventRowError("paths is not a list")
        attrs = ev.get("attrs")
        if attrs is None:
            attrs_json = None
        elif isinstance(attrs, dict):
            attrs_json = _attrs_json(attrs, dirty)
        else:
            raise EventRowError("attrs is not an object")
        text = None
        if kind in TEXT_KINDS:
            whole = ev if head_len == len(event) else _loads_object(event)
            content = whole.get("content")
            value = content.get(TEXT_KINDS[kind]) if isinstance(content, dict) else None
            if isinstance(value, str):
                text = _clean(value) if (b"\\ud" in event or b"\\uD" in event) else value
        self.heads.append(head)
        self.attrs.append(attrs_json)
        self.texts.append(text)
        self.events.append(event)
        self.log_provider.append(log_provider)
        self.log_key.append(log_key)
        self.seq.append(seq)
        self.frame_hash.append(frame_hash)
        self.log_offset.append(offset)
        self.rows += 1
        self.frame_bytes += frame_bytes

    def truncate(self, rows: int, frame_bytes: int) -> None:
        """Forget every row after the first ``rows`` (``frame_bytes`` is what they weighed)."""
        for values in (self.heads, self.attrs, self.texts, self.events, self.log_provider, self.log_key, self.seq,
                       self.frame_hash, self.log_offset):
            del values[rows:]
        self.rows = rows
        self.frame_bytes = frame_bytes

    def to_arrow(self) -> pa.Table:
        """The batch as one Arrow table (``BatchTypeError``: a field's type is wrong)."""
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        try:
            heads = pa.array(self.heads, type=HEAD_TYPE)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
            raise BatchTypeError(str(e)) from None
        cols: dict[str, Any] = {}
        # flatten(), unlike field(), applies a null parent to its children
        for f, child in zip(HEAD_TYPE, heads.flatten()):
            if f.name in _NESTED:
                for name, grandchild in zip(_NESTED[f.name], child.flatten()):
                    cols[name] = grandchild
            else:
                cols[f.name] = child
        # a struct's absent children are null; an absent list of paths is empty
        cols["paths"] = pc.fill_null(cols["paths"], pa.scalar([], type=pa.list_(_STR)))
        cols["observed_at"] = cols["observed_at"].cast(TS)
        cols["captured_at"] = cols["captured_at"].cast(TS)
        cols["attrs"] = pa.array(self.attrs, type=pa.large_string())
        cols["text"] = pa.array(self.texts, type=pa.large_string())
        cols["event"] = _event_array(self.events)
        cols["log_provider"] = pa.array(self.log_provider, type=_STR)
        cols["log_key"] = pa.array(self.log_key, type=_STR)
        cols["seq"] = pa.array(self.seq, type=pa.int64())
        cols["frame_hash"] = pa.array(self.frame_hash, type=_STR)
        cols["log_offset"] = pa.array(self.log_offset, type=pa.int64())
        # whole days since 1970, floored, in integers (through float64 a time beyond ±2^53 µs,
        # ~285 years from 1970, which an imported transcript or a correction can carry, failed)
        us = cols["observed_at"].cast(pa.int64())
        days = pc.divide(us, US_PER_DAY)  # integer division truncates toward zero
        days = pc.if_else(pc.less(pc.subtract(us, pc.multiply(days, US_PER_DAY)), 0), pc.subtract(days, 1), days)
        cols["observed_date"] = days.cast(pa.int32()).cast(pa.date32())
        return pa.Table.from_arrays([cols[f.name] for f in EVENTS_SCHEMA], schema=EVENTS_SCHEMA)


def _attrs_json(attrs: dict[str, Any], dirty: bool) -> str:
    if not dirty:
        try:
            return orjson.dumps(attrs).decode("utf-8")
        except (TypeError, orjson.JSONEncodeError):
            pass  # integers beyond 64 bits: the stdlib handles them
    return json.dumps(attrs, ensure_ascii=dirty, separators=(",", ":"))


def _event_array(values: list[bytes]) -> pa.Array:
    """``large_string`` array over the events' bytes (checked UTF-8 by ``add``), built with one copy."""
    import array
    import itertools

    offsets = array.array("q", [0])
    offsets.extend(itertools.accumulate(map(len, values)))
    return pa.LargeStringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(values)))
