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

from ..log import frame as _frame

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
        pa.field("content", pa.large_string()),
        pa.field("raw", pa.large_string()),
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


class EventRowError(ValueError):
    """A sealed frame whose event cannot be flattened (the reason is the message)."""


def store_dir(root: str) -> str:
    return os.path.join(root, "store")


def events_path(root: str) -> str:
    """Directory of the Delta table ``events``."""
    return os.path.join(store_dir(root), "events")


def read_events(root: str, columns: list[str] | None = None) -> pa.Table:
    """The whole ``events`` table as Arrow (empty table if it does not exist yet).

    Reads the files through pyarrow's local file system: deltalake's own file
    system handler aborts the interpreter at exit with pyarrow 26.
    """
    import pyarrow.fs as pafs  # type: ignore[import-untyped]
    from deltalake import DeltaTable

    path = events_path(root)
    if not DeltaTable.is_deltatable(path):
        empty = EVENTS_SCHEMA.empty_table()
        return empty.select(columns) if columns else empty
    fs = pafs.SubTreeFileSystem(os.path.abspath(path), pafs.LocalFileSystem())
    return DeltaTable(path).to_pyarrow_dataset(filesystem=fs).to_table(columns=columns)


def _clean(s: str) -> str:
    """A string with any lone surrogate replaced (Arrow strings must be UTF-8)."""
    return s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


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


def _json(v: Any, ascii_only: bool) -> str | None:
    if v is None:
        return None
    if not ascii_only:
        try:
            return orjson.dumps(v).decode("utf-8")  # 5-10x stdlib json
        except (TypeError, orjson.JSONEncodeError):
            pass  # e.g. integers beyond 64 bits: the stdlib handles them
    return json.dumps(v, ensure_ascii=ascii_only, separators=(",", ":"))


def event_row(frame_line: bytes, log_provider: str, log_key: str, offset: int) -> dict[str, Any]:
    """Flatten one checked frame line (with its newline) into a row of ``EVENTS_SCHEMA``.

    Raises ``EventRowError`` when the event is not a JSON object with the
    canonical required fields of the right types.
    """
    body = _frame.event_bytes(frame_line)
    try:
        ev = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:  # orjson refuses lone surrogates in escapes; the stdlib keeps them
            ev = json.loads(body)
        except ValueError:
            raise EventRowError("event_not_json") from None
    if not isinstance(ev, dict):
        raise EventRowError("event_not_object")
    # A lone surrogate forces the writer to ASCII escapes; only then can a
    # decoded string hold one, so only then is cleaning needed.
    dirty = b"\\ud" in body or b"\\uD" in body
    agent = _obj(ev.get("agent"), "agent")
    tool = _obj(ev.get("tool"), "tool")
    outcome = _obj(ev.get("outcome"), "outcome")
    project = _obj(ev.get("project"), "project")
    observed = _i(ev.get("observed_at"), "observed_at")
    event_id = _s(ev.get("event_id"), "event_id", dirty)
    kind = _s(ev.get("kind"), "kind", dirty)
    provider = _s(ev.get("provider"), "provider", dirty)
    if observed is None or event_id is None or kind is None or provider is None:
        raise EventRowError("missing_required_field")
    paths = ev.get("paths")
    if paths is None:
        path_list: list[str] = []
    elif isinstance(paths, list):
        path_list = [_s(p, "paths[]", dirty) or "" for p in paths]
    else:
        raise EventRowError("paths is not a list")
    mark = len(frame_line) - _frame.TRAILER + len(_frame.HASH_MARK)
    return {
        "event_id": event_id,
        "schema_version": _i(ev.get("schema_version"), "schema_version"),
        "kind": kind,
        "provider": provider,
        "provider_event_name": _s(ev.get("provider_event_name"), "provider_event_name", dirty),
        "observed_at": observed,
        "captured_at": _i(ev.get("captured_at"), "captured_at"),
        "capture_mode": _s(ev.get("capture_mode"), "capture_mode", dirty),
        "agentlog_version": _s(ev.get("agentlog_version"), "agentlog_version", dirty),
        "provider_version": _s(ev.get("provider_version"), "provider_version", dirty),
        "provider_session_id": _s(ev.get("provider_session_id"), "provider_session_id", dirty),
        "provider_turn_id": _s(ev.get("provider_turn_id"), "provider_turn_id", dirty),
        "agent_id": _s(agent.get("agent_id"), "agent.agent_id", dirty),
        "agent_type": _s(agent.get("agent_type"), "agent.agent_type", dirty),
        "model": _s(agent.get("model"), "agent.model", dirty),
        "tool_name": _s(tool.get("name"), "tool.name", dirty),
        "tool_category": _s(tool.get("category"), "tool.category", dirty),
        "tool_call_id": _s(tool.get("call_id"), "tool.call_id", dirty),
        "paths": path_list,
        "outcome_status": _s(outcome.get("status"), "outcome.status", dirty),
        "outcome_class": _s(outcome.get("class"), "outcome.class", dirty),
        "exit_code": _i(outcome.get("exit_code"), "outcome.exit_code"),
        "duration_ms": _i(ev.get("duration_ms"), "duration_ms"),
        "project_root": _s(project.get("root"), "project.root", dirty),
        "project_name": _s(project.get("name"), "project.name", dirty),
        "project_remote": _s(project.get("remote"), "project.remote", dirty),
        "project_branch": _s(project.get("branch"), "project.branch", dirty),
        "project_head": _s(project.get("head"), "project.head", dirty),
        "attrs": _json(ev.get("attrs"), dirty),
        "content": _json(ev.get("content"), dirty),
        "raw": _json(ev.get("raw"), dirty),
        "log_provider": log_provider,
        "log_key": log_key,
        "seq": _frame.parse_seq(frame_line),
        "frame_hash": frame_line[mark : mark + _frame.HASH_HEX].decode("ascii"),
        "log_offset": offset,
        "observed_date": observed // US_PER_DAY,
    }


class RowBatch:
    """Rows accumulated column by column, turned into one Arrow table."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        self.rows = 0
        self.frame_bytes = 0

    def add(self, row: dict[str, Any], frame_bytes: int) -> None:
        for name, values in self.columns.items():
            values.append(row[name])
        self.rows += 1
        self.frame_bytes += frame_bytes

    def to_arrow(self) -> pa.Table:
        arrays = [pa.array(self.columns[f.name], type=f.type) for f in EVENTS_SCHEMA]
        return pa.Table.from_arrays(arrays, schema=EVENTS_SCHEMA)
