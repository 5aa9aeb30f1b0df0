"""``agentlog sql``."""

from __future__ import annotations

import csv
import sys

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr, stdout


@click.command(name="sql")
@click.argument("statement")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: columns, types, rows, truncated.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the rows as CSV with a header line.")
@click.option("--no-ingest", is_flag=True, help="Answer from what is already in the store; do not catch up first.")
@click.option("--timeout", type=click.FloatRange(0.1), default=30.0, show_default=True,
              help="Stop the statement after this many seconds.")
@click.option("--max-rows", type=click.IntRange(1, 1_000_000_000), default=10_000, show_default=True,
              help="Return at most this many rows (the answer says when it was cut).")
def sql_cmd(statement: str, as_json: bool, as_csv: bool, no_ingest: bool, timeout: float, max_rows: int) -> None:
    """Run one read-only SQL statement (DuckDB) over the store.

    Tables: `events` — one row per recorded event, every canonical field as
    a column, `event` the event's exact JSON, `content` and `raw` read from
    it. Example:

        agentlog sql "select tool_name, count(*) from events
                      where kind = 'tool_call_failed' group by 1 order by 2 desc"

    Only one SELECT (or EXPLAIN) per call: DuckDB's parser decides, file and
    network access are off inside the engine. The store catches up with the
    logs first unless --no-ingest. Exit 0 with an answer, 1 when the
    statement fails or times out, 2 when it is refused.
    """
    from agentlog.query.engine import QueryError
    from agentlog.operations.refresh import run_sql

    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    try:
        result = run_sql(data_root(), statement, catch_up=not no_ingest, timeout=timeout, max_rows=max_rows)
    except QueryError as e:
        stderr().print(f"[red]{e.kind}:[/] {e}", markup=True, highlight=False)
        sys.exit(2 if e.kind == "refused" else 1)
    if as_json:
        print_json(result.to_dict())
    elif as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(result.rows)
    else:
        print_table([dict(zip(result.columns, r)) for r in result.rows], result.columns)
        err = stderr()
        more = f" (cut at --max-rows {max_rows})" if result.truncated else ""
        err.print(f"{len(result.rows)} rows{more} in {result.seconds * 1000:.0f} ms")


@click.command(name="schema")
@click.argument("table", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the tables, columns and examples as JSON.")
def schema_cmd(table: str | None, as_json: bool) -> None:
    """Every table `agentlog sql` can query: columns, what they mean, worked examples.

    With TABLE, only that table. The same text is in docs/schema.md.
    """
    from dataclasses import asdict

    from agentlog.query.catalog import tables

    found = [t for t in tables() if table is None or t.name == table]
    if not found:
        raise click.UsageError(f"no table {table!r}; tables: {', '.join(t.name for t in tables())}")
    if as_json:
        print_json([asdict(t) for t in found])
        return
    out = stdout()
    for t in found:
        print_table([{"column": c.name, "type": c.type, "meaning": c.description} for c in t.columns],
                    ["column", "type", "meaning"], title=f"{t.name}: {t.description}")
        for ex in t.examples:
            out.print(f"[bold]{ex.question}[/]\n  agentlog sql \"{ex.sql}\"\n", highlight=False)
