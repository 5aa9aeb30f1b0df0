"""``agentlog usage``."""

from __future__ import annotations

import time

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr, terminal_safe
from agentlog.cli.scope_opts import current_engine


@click.command(name="usage")
@click.option("--by", "by", type=click.Choice(["day", "session", "model", "project", "provider"]), default="day",
              show_default=True, help="What each row sums over.")
@click.option("--since", "since", default=None, metavar="WHEN",
              help="Only responses since then (a date, RFC 3339 time, epoch, 'today', '-7d' …).")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("--no-ingest", is_flag=True, help="Do not catch the store up with the logs first.")
@click.option("--all-projects", is_flag=True, help="Every project (what usage always sums; accepted as the other "
                                                   "listings accept it).")
def usage_cmd(by: str, since: str | None, as_json: bool, no_ingest: bool, all_projects: bool) -> None:
    """Tokens and their cost, by day, session, model, project or agent.

    Usage comes from the agents' telemetry (`agentlog otel serve`: one row
    per API request) for the sessions that sent any, else from imported
    transcripts (`agentlog import`: one row per model response, its final
    counts; a response written in several records counts once; subagents'
    responses are included). A session's rows come from one of the two, never
    both; the `source` column says which. Cost is what the telemetry reported,
    else the price table shipped with agentlog (USD per million tokens,
    dated), overridden by `prices.toml` in the data root; a model without a
    price counts in `unpriced` and adds nothing to the cost. It covers every project (`--by
    project` splits them).

    Example: agentlog usage --by model --since -7d
    """
    from agentlog.query.engine import QueryError
    from agentlog.query.timeexpr import resolve
    from agentlog.query.usage import PriceError, load_prices, unpriced_sql, usage_sql

    since_us = None
    if since is not None:
        try:
            since_us = resolve(since, time.time_ns() // 1000)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--since") from None
    try:
        _, as_of = load_prices(data_root())
    except PriceError as e:
        raise click.ClickException(str(e)) from None
    with current_engine(no_ingest) as engine:
        try:
            result = engine.run(usage_sql(by, since_us))
            unpriced = engine.run(unpriced_sql(since_us)).rows
        except QueryError as e:
            raise click.ClickException(str(e)) from None
    rows = [dict(zip(result.columns, (str(v) if by == "day" and i == 0 and v is not None else v
                                      for i, v in enumerate(r)))) for r in result.rows]
    if as_json:
        print_json({"by": by, "prices_as_of": as_of, "rows": rows,
                    "unpriced": [{"model": m, "responses": n, "tokens": t} for m, n, t in unpriced]})
        return
    if not rows:
        stderr().print("no usage recorded yet: it comes from the agents' telemetry (`agentlog otel serve`) "
                       "or their transcripts (`agentlog import`)")
        return
    print_table(rows, result.columns, title=f"token usage by {by} (prices as of {as_of}, USD)")
    total = sum(r["cost_usd"] or 0 for r in rows)
    err = stderr()
    if not unpriced:
        err.print(f"total ${total:,.2f}")
        return
    tokens = sum(t for _, _, t in unpriced)
    responses = sum(n for _, n, _ in unpriced)
    models = ", ".join(f"{terminal_safe(m)} ({t:,} tokens)" for m, _, t in unpriced)
    err.print(f"total ${total:,.2f} for the priced tokens only: {tokens:,} tokens in {responses} response{'s' if responses != 1 else ''} have no "
              f"price and no cost — {models}; add them to prices.toml in the data root to price them")
