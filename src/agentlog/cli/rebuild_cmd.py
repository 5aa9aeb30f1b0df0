"""``agentlog rebuild``."""

from __future__ import annotations

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, stderr


@click.command(name="rebuild")
@click.option("--json", "as_json", is_flag=True, help="Print the ingest report as one JSON object.")
def rebuild_cmd(as_json: bool) -> None:
    """Drop everything derived from the logs and rebuild it (the events store, the memory read model).

    The logs are the truth: this moves the store aside, forgets what ingest
    had consumed, ingests every log from its first frame, then deletes the
    old store. Exit 1 if a log has a break (its valid prefix is ingested).
    """
    from agentlog.store.rebuild import RebuildBusy, rebuild

    from agentlog.memory.store import rebuild as rebuild_memory

    try:
        report = rebuild(data_root())
    except RebuildBusy as e:
        raise click.ClickException(str(e)) from e
    memory_events = rebuild_memory(data_root())
    if as_json:
        print_json(report.to_dict() | {"memory_events": memory_events})
    else:
        stderr().print(f"rebuilt: {report.events:,} events from {report.logs_seen:,} logs in {report.seconds:.1f} s ({report.commits} commits)")
        stderr().print(f"rebuilt the memory read model from {memory_events:,} memory events")
        for b in report.breaks:
            stderr().print(f"[red]break[/]: {b}")
    if report.breaks:
        raise click.exceptions.Exit(1)
