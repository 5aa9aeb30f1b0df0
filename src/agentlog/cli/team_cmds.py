"""``agentlog team …``: this machine's history published to a team's shared tables, and
questions over them."""

from __future__ import annotations

import click

from agentlog.cli.output import print_json, stderr
from agentlog.core.paths import data_root


@click.group(name="team")
def team() -> None:
    """A team's history on object storage (s3:// or file://): publish this machine's
    events and derived tables, query everyone's.

    Example: agentlog team publish --to s3://acme-agentlog/team
    """


def team_url(given: str | None) -> str:
    """``given``, else the ``team_url`` setting."""
    if given:
        return given
    from agentlog.core.config import load

    return str(load(data_root()).get("team_url") or "")


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
