"""What both team engines read: the team tables' names, a table opened (or found not
published), the columns of one nobody published, the ``events`` view's columns, and
parameters written into SQL as literals (Daft's SQL takes none). See :mod:`.query`."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Final

from agentlog.team import TeamError
from agentlog.team.location import Location, describe_error
from agentlog.team.tables import TEAM_COLUMNS
from agentlog.team.tables import TEAM_TABLES as TABLES

LOCAL_ONLY: Final = frozenset({"edges", "work_units", "conflicts", "signals", "commits", "handoffs", "decisions",
                               "corrections", "retractions", "byte_checks"})
"""Views ``agentlog sql`` has and the team tables do not."""


def named_tables(sql: str) -> set[str] | None:
    """The team tables ``sql`` reads (None: every table, when DuckDB's parser cannot tell);
    a view the team tables do not hold is an error naming it."""
    import duckdb

    try:  # (a parameter stops DuckDB's parser here: a NULL in its place names no table)
        names = {n.lower() for n in duckdb.get_table_names(re.sub(r"\$\d+", "NULL", sql))}
    except Exception:
        return None
    local = sorted(names & LOCAL_ONLY)
    if local:
        raise TeamError(f"{', '.join(local)} {'is' if len(local) == 1 else 'are'} not a team table (the team tables: "
                        f"{', '.join(TABLES)}); `agentlog sql` answers it on one machine")
    return names & set(TABLES) if names <= set(TABLES) else None


def open_table(loc: Location, name: str) -> Any:
    """The Delta table ``name`` at ``loc`` (deltalake's DeltaTable), or None when nothing is
    published there yet; any other failure (unreachable, denied) is a TeamError."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    uri = loc.table_uri(name)
    try:
        return DeltaTable(uri, storage_options=loc.storage_options())
    except TableNotFoundError:
        return None
    except Exception as e:  # OSError, DeltaError, a Rust panic's wrapper: one line, not a traceback
        raise TeamError(describe_error(e, f"reading the team table {name} at {uri}")) from None


_EMPTY: dict[str, Any] = {}


def empty_table(name: str) -> Any:
    """An empty Arrow table with the columns team table ``name`` has (local view + team columns)."""
    if name in _EMPTY:
        return _EMPTY[name]
    import tempfile

    import pyarrow as pa  # type: ignore[import-untyped]

    if name == "memories":
        raise TeamError("no machine has published memories to this team yet (`agentlog team publish` publishes "
                        "the approved ones), so the table and its columns are not there")
    if name == "events":
        from agentlog.store.schema import EVENTS_SCHEMA

        schema = EVENTS_SCHEMA.append(pa.field("command_key", pa.string()))  # (tables.command_keys)
    else:
        from agentlog.query.engine import Engine

        with tempfile.TemporaryDirectory(prefix="agentlog-team-") as tmp, Engine(tmp) as engine:
            schema = engine.arrow(f"SELECT * FROM {name} LIMIT 0").schema
    fields = [f for f in schema if f.name not in TEAM_COLUMNS]
    fields += [pa.field("machine", pa.string()), pa.field("host", pa.string()), pa.field("day", pa.date32()),
               pa.field("publisher", pa.string())]
    _EMPTY[name] = pa.schema(fields).empty_table()
    return _EMPTY[name]


def events_columns(names: list[str]) -> list[str]:
    """The ``events`` view's column order over a published events table with columns ``names``:
    the store's, then ``content`` and ``raw`` (when ``event`` is there), then the team's."""
    own = [n for n in names if n not in TEAM_COLUMNS]
    derived = ["content", "raw"] if "event" in names else []
    return own + derived + [n for n in TEAM_COLUMNS if n in names]


# Daft's SQL takes no parameters: they are written into the text as literals. make_timestamptz
# (DuckDB's µs → TIMESTAMPTZ, which the statement language uses for SINCE/UNTIL) becomes a
# timestamp literal Daft reads.
_PARAM = re.compile(r"make_timestamptz\(\$(\d+)\)|\$(\d+)|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")


def literal(value: Any) -> str:
    """A SQL literal for a parameter value."""
    from agentlog.query.engine import sql_string

    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return sql_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, datetime):
        return _timestamp(value)
    return sql_string(str(value))


def _timestamp(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S.%f')} +0000'"


def inline_params(sql: str, params: list[Any] | None) -> str:
    """``sql`` with ``$n`` replaced by the literal of ``params[n-1]`` (text inside quotes untouched)."""
    if not params:
        return sql
    values = list(params)

    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            us = values[int(m.group(1)) - 1]
            return _timestamp(datetime.fromtimestamp(us / 1_000_000, timezone.utc))
        if m.group(2):
            n = int(m.group(2))
            if not 1 <= n <= len(values):
                raise TeamError(f"the statement names ${n} but has {len(values)} parameters")
            return literal(values[n - 1])
        return m.group(0)

    return _PARAM.sub(sub, sql)


__all__ = ["LOCAL_ONLY", "TABLES", "TEAM_COLUMNS", "empty_table", "events_columns", "inline_params", "literal",
           "named_tables", "open_table"]
