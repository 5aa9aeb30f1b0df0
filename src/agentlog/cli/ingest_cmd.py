"""``agentlog ingest``."""

from __future__ import annotations

import sys

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr


@click.command(name="ingest")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the ingest report.")
@click.option("--batch-bytes", type=click.IntRange(1), default=64 << 20, hidden=True,
              help="Frame bytes per Delta commit (tests use small batches).")
@click.option("--careful", is_flag=True,
              help="Parse every event whole and check every field row by row (slower; proves each event is JSON).")
@click.option("--durability", type=click.Choice(["strict", "relaxed"]), default=None,
              help="strict: fsync each commit (default: the durability setting); relaxed: leave it to the OS.")
def ingest_cmd(as_json: bool, batch_bytes: int, careful: bool, durability: str | None) -> None:
    """Append the new frames of every session log to the columnar store.

    Reads each log from where the last ingest stopped, checks every frame's
    hash, link and sequence as it goes, and appends the events to the Delta
    table `store/events` under the data root, a batch per commit. The
    positions consumed are committed with the data, so a crash at any point
    neither loses nor duplicates events. A broken log stops ingesting at its
    first bad frame; the other logs go on. Exit 0 when done (also when
    another ingest is already running), 1 when any log is broken.
    """
    from agentlog.store.ingest import ingest

    report = ingest(data_root(), batch_bytes=batch_bytes, careful=careful, durability=durability)
    if as_json:
        print_json(report.to_dict())
    else:
        err = stderr()
        if report.busy:
            err.print("another ingest is running; nothing done")
        else:
            if report.breaks:
                print_table(report.breaks, ["log", "line", "seq", "offset", "reason"], title="breaks")
            err.print(
                f"ingested {report.events} events ({report.bytes / 1e6:.2f} MB) from "
                f"{report.logs_advanced} of {report.logs_seen} session logs in {report.seconds:.2f} s; "
                f"{report.commits} commits, table version {report.table_version}"
            )
            if report.store_reset:
                err.print(f"[yellow]the store was rebuilt from the logs:[/] {report.store_reset}")
            if report.careful:
                err.print("an event with a wrongly typed field sent this run to the careful path")
            if report.breaks:
                err.print(f"[bold red]{len(report.breaks)} session logs are broken[/] and stopped ingesting there")
    if report.breaks:
        sys.exit(1)
