"""``agentlog team …``: this machine's history published to a team's shared tables, and
questions over them."""

from __future__ import annotations

import click

from agentlog.cli.output import print_json, print_table, stderr
from agentlog.core.paths import data_root


@click.group(name="team")
def team() -> None:
    """A team's history on object storage (s3:// or file://): publish this machine's
    events and derived tables, query everyone's.

    Example: agentlog team publish --to s3://acme-agentlog/team
    Example: agentlog team query "select machine, count(*) from sessions group by 1" --from s3://acme-agentlog/team
    """


def team_url(given: str | None) -> str:
    """``given``, else the ``team_url`` setting."""
    from agentlog.team.query import from_url

    return from_url(given).url


@team.command(name="publish")
@click.option("--to", "url", default=None, metavar="URL",
              help="s3://bucket/prefix or file:///path (default: the team_url setting).")
@click.option("--metadata-only", is_flag=True,
              help="Publish no content: no prompt, command, output, path, message or memory text.")
@click.option("--batch-rows", type=click.IntRange(1, 10_000_000), default=None, hidden=True,
              help="Events per commit (tests use small batches).")
@click.option("--json", "as_json", is_flag=True, help="Print what was published as JSON.")
def publish_cmd(url: str | None, metadata_only: bool, batch_rows: int | None, as_json: bool) -> None:
    """Append this machine's new events, and its current sessions, turns, tool calls,
    attempts, usage and approved memories, to the team's Delta tables (partitioned by
    machine and day). Safe to run again at any time (nothing is published twice), from
    many machines at once, and after a crash. Credentials: the AWS environment and config
    (AWS_ENDPOINT_URL for MinIO, R2 and other S3-compatible stores).

    Example: agentlog team publish --to s3://acme-agentlog/team --metadata-only
    """
    from agentlog.team.publish import BATCH_ROWS, publish

    err = stderr()
    res = publish(data_root(), team_url(url), metadata_only=metadata_only, batch_rows=batch_rows or BATCH_ROWS,
                  progress=None if as_json else (lambda line: err.print(line, markup=False, highlight=False)))
    if as_json:
        print_json(res.to_dict())
        return
    if res.recovered:
        err.print(res.recovered, markup=False, highlight=False)
    replaced = ", ".join(f"{k} {v:,}" for k, v in res.tables.items()) or "none"
    err.print(f"{res.url}: {res.events:,} events published in {res.commits} commits ({res.seconds:.1f} s); "
              f"replaced: {replaced}; unchanged: {', '.join(res.unchanged) or 'none'}", markup=False, highlight=False)


@team.command(name="query")
@click.argument("statement", metavar="SQL_OR_STATEMENT")
@click.option("--engine", type=click.Choice(["duckdb", "daft"]), default=None,
              help="duckdb (default; in this process) or daft (Daft's engine; with --ray, on a Ray cluster).")
@click.option("--ray", "ray", metavar="auto|ADDRESS",
              help="Run the daft engine on this Ray cluster (auto: the cluster this machine belongs to).")
@click.option("--from", "url", metavar="URL", help="The team's tables: s3://bucket/prefix or file:///path "
                                                   "(default: the team_url setting).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: SQL, one object (columns, types, rows, truncated); "
                                                      "a statement, an array of objects.")
@click.option("--timeout", type=click.FloatRange(0.1), default=30.0, show_default=True,
              help="Stop waiting for a statement after this many seconds.")
@click.option("--max-rows", type=click.IntRange(1, 1_000_000_000), default=10_000, show_default=True,
              help="Return at most this many rows (the answer says when it was cut).")
def team_query_cmd(statement: str, engine: str | None, ray: str | None, url: str | None, as_json: bool,
                   timeout: float, max_rows: int) -> None:
    """Answer one read-only SQL statement, or one statement of the statement language
    (SHOW FAILED ATTEMPTS, WHY …), over every machine's published tables.

    Tables: events, sessions, turns, tool_calls, attempts, usage, memories — the local
    views' columns plus machine, host and day. The duckdb engine reads them through
    deltalake into DuckDB, locked down as `agentlog sql` is; the daft engine runs the
    statement with Daft, locally or on a Ray cluster (--ray; needs the team extra).

    Example: agentlog team query "SHOW FAILED ATTEMPTS SINCE -7d" --engine daft --ray auto

    Exit 0 with an answer, 1 when the statement fails, times out or a table cannot be
    read, 2 when it is refused or does not parse.
    """
    from agentlog.cli.query_cmds import _errors, _fail, _print_result
    from agentlog.query.engine import QueryResult
    from agentlog.team import TeamExtraMissing
    from agentlog.team.query import ask, from_url

    if engine is None:
        engine = "daft" if ray else "duckdb"
    if ray is not None and engine != "daft":
        raise click.UsageError("--ray runs the daft engine: use --engine daft (or leave --engine out)")
    loc = from_url(url)
    try:
        with _errors(statement):
            result = ask(loc, statement, engine=engine, ray=ray, timeout=timeout, max_rows=max_rows)
    except TeamExtraMissing as e:
        _fail(str(e), 2)
    if not isinstance(result, QueryResult):
        _print_result(result, as_json=as_json, as_csv=False)
        return
    if as_json:
        print_json(result.to_dict())
        return
    print_table([dict(zip(result.columns, r)) for r in result.rows], result.columns)
    more = f" (cut at --max-rows {max_rows})" if result.truncated else ""
    stderr().print(f"{len(result.rows)} rows{more} in {result.seconds * 1000:.0f} ms ({engine})")
