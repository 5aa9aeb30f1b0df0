"""The Daft engine over a team's tables (:mod:`agentlog.team.query`), locally or on Ray.

Each table the statement names is read with ``daft.read_deltalake`` (Daft's own
Delta Lake and S3 readers, the endpoint and credentials from
:meth:`~agentlog.team.location.Location.daft_io_config`) and the statement runs through
``daft.sql`` with only those tables bound (no variables of the caller's). With
``ray`` (``auto``, or a cluster's address) the work runs on that Ray cluster
(``daft.set_runner_ray``), else on Daft's native runner in this process.

Read-only: Daft's SQL plans queries only, and the text is first checked as
``agentlog sql``'s is (one SELECT by DuckDB's parser; EXPLAIN is DuckDB's and refused
here with a pointer to ``--engine duckdb``). Parameters are written into the text as
literals (Daft's SQL takes none). Daft's SQL is not DuckDB's: a function or clause it
lacks (``epoch_us``, ``len``, ``LIKE … ESCAPE``, ``EXPLAIN``) is a TeamError naming
it. The timeout stops waiting for the answer (the CLI then exits, which ends local
work; a Ray job already submitted runs to its end); the row cap is a LIMIT on the plan.
The answer is converted to Python values through DuckDB, so rows compare equal to the
duckdb engine's; types are the Arrow types Daft gives, as DuckDB names them
(``count(*)`` is UBIGINT here, BIGINT there).
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

from agentlog.query.engine import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryError, QueryResult, check_statement
from agentlog.team import TeamError, need
from agentlog.team.location import Location, describe_error
from agentlog.team.reading import TABLES, empty_table, events_columns, inline_params, named_tables, open_table

_RAY_SET: list[str] = []
"""The Ray address this process's Daft runs on (set once: Daft's runner cannot change)."""


def use_ray(address: str) -> None:
    """Run Daft on the Ray cluster at ``address`` (``auto``: the cluster this machine is part of,
    as ``ray.init(address='auto')`` finds it)."""
    need("ray", "the daft engine on a Ray cluster (--ray)")
    if _RAY_SET:
        if _RAY_SET[0] != address:
            raise TeamError(f"Daft already runs on the Ray cluster at {_RAY_SET[0]} in this process")
        return
    _loopback_node(address)
    import logging

    import daft
    import ray

    try:
        if not ray.is_initialized():
            # the workers' output (Daft's progress bars) stays on the workers; Ray's notes only when they matter
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        daft.set_runner_ray(noop_if_initialized=True)  # (on the Ray context just made)
    except Exception as e:
        raise TeamError(f"cannot use the Ray cluster at {address}: {' '.join(str(e).split())[:300]}") from None
    _RAY_SET.append(address)


def _loopback_node(address: str) -> None:
    """A cluster on loopback (``127.0.0.1:6379``; ``auto`` with RAY_ADDRESS so) is reached on
    loopback. Ray otherwise replaces a loopback host with this machine's outward address,
    where a cluster bound to loopback does not listen (the driver then waits for it for
    minutes); its switch for "this machine only" is read when ray is first imported."""
    import os
    import sys
    from urllib.parse import urlsplit

    from agentlog.team.location import LOOPBACK

    target = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address
    host = urlsplit(target if "://" in target else f"//{target}").hostname
    if host in LOOPBACK and "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def _construct(message: str) -> str | None:
    """What in the statement Daft's SQL could not run, from its error text (None: not that)."""
    if "Window expressions should be evaluated via the window operator" in message:
        return "a window function's result used in the same SELECT's ORDER BY or WHERE (select it in a subquery first)"
    m = re.search(r"Function `([^`]+)` not found", message)
    if m:
        return f"the function {m.group(1)}"
    m = re.search(r"Unsupported SQL: '([^']+)'", message)
    if m:
        return m.group(1)
    m = re.search(r"(?:not supported|not yet supported|Not implemented|NotImplemented)[^.\n]*", message)
    return m.group(0) if m else None


class TeamDaft:
    """Team tables at ``loc`` answered by Daft (on Ray at ``ray``, else locally)."""

    def __init__(self, loc: Location, ray: str | None = None) -> None:
        need("daft", "the daft engine (--engine daft)")
        import logging

        import duckdb

        # Daft warns, for every partitioned table read without a filter on machine and day, that it
        # reads all of it: that is what a team query over every machine means.
        logging.getLogger("daft.io.delta_lake.delta_lake_scan").setLevel(logging.ERROR)
        os.environ.setdefault("DAFT_PROGRESS_BAR", "0")  # stderr is for notes, not bars

        self.loc = loc
        self._frames: dict[str, Any] = {}
        self._duck = duckdb.connect(":memory:")  # checks statements and converts answers: it reads nothing
        self._duck.execute("SET enable_external_access = false")
        if ray is not None:
            use_ray(ray)

    def close(self) -> None:
        self._duck.close()

    def _frame(self, name: str) -> Any:
        import daft

        if name in self._frames:
            return self._frames[name]
        uri = self.loc.table_uri(name)
        if open_table(self.loc, name) is None:
            df = daft.from_arrow(empty_table(name))
        else:
            try:
                df = daft.read_deltalake(uri, io_config=self.loc.daft_io_config())
            except Exception as e:
                raise TeamError(describe_error(e, f"reading the team table {name} at {uri}")) from None
        if name == "events":
            df = _with_content(df)
        self._frames[name] = df
        return df

    def run(self, sql: str, params: list[Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT_S,
            max_rows: int = DEFAULT_MAX_ROWS) -> QueryResult:
        """Run one read-only statement on Daft (``$n`` bound to ``params``)."""
        import daft

        if not timeout > 0:
            raise QueryError(f"a timeout is a positive number of seconds, not {timeout!r}", "refused")
        check_statement(self._duck, sql)
        if self._duck.extract_statements(sql)[0].type.name == "EXPLAIN":
            raise TeamError("EXPLAIN is DuckDB's: Daft's SQL has none (run it with --engine duckdb)")
        names = named_tables(sql)
        frames: dict[str, Any] = {}
        for name in sorted(names if names is not None else TABLES):
            try:
                frames[name] = self._frame(name)
            except TeamError:
                if names is not None or name != "memories":
                    raise
        text = inline_params(sql, params)
        started = time.perf_counter()
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["table"] = daft.sql(text, register_globals=False, **frames).limit(max_rows + 1).to_arrow()
            except BaseException as e:  # (a Rust panic is no Exception)
                box["error"] = e

        thread = threading.Thread(target=work, name="agentlog-team-daft", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise QueryError(f"the statement ran longer than {timeout:g} s; its answer was not waited for", "timeout")
        if "error" in box:
            message = " ".join(str(box["error"]).split())
            what = _construct(message)
            if what is not None:
                raise TeamError(f"Daft's SQL cannot run this statement ({what}); --engine duckdb runs it") from None
            raise QueryError(f"daft: {message[:500]}", "error") from None
        table = box["table"]
        self._duck.register("_answer", table)
        try:
            cur = self._duck.execute("SELECT * FROM _answer")
            columns = [d[0] for d in cur.description or []]
            types = [str(d[1]) for d in cur.description or []]
            rows = cur.fetchall()
        finally:
            self._duck.unregister("_answer")
        truncated = len(rows) > max_rows
        return QueryResult(columns, types, [tuple(r) for r in rows[:max_rows]], truncated,
                           time.perf_counter() - started)


def _with_content(df: Any) -> Any:
    """The events view on Daft: ``content`` and ``raw`` from ``event`` as JSON text (jq's: compact,
    as DuckDB's json_extract writes it; a missing member is SQL NULL, a JSON null ``null``), in
    the duckdb engine's column order."""
    from daft import col
    from daft.functions import jq, when

    exprs = []
    for c in events_columns(df.column_names):
        if c in ("content", "raw"):
            # a missing member gives jq's "empty" ('' here: no JSON text is empty), a JSON null 'null'
            value = jq(col("event"), f'if type == "object" and has("{c}") then .{c} else empty end')
            exprs.append(when(value == "", None).otherwise(value).alias(c))
        else:
            exprs.append(col(c))
    return df.select(*exprs)


__all__ = ["TeamDaft", "use_ray"]
