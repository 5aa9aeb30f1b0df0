"""``agentlog compact``."""

from __future__ import annotations

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, stderr


@click.command(name="compact")
@click.option("--dry-run", is_flag=True, help="Report what is there and what vacuum would delete; change nothing.")
@click.option("--grace-hours", type=click.IntRange(0, 24 * 365), default=1, show_default=True, help="Delete replaced files only after they have been unreferenced this long.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def compact_cmd(dry_run: bool, grace_hours: int, as_json: bool) -> None:
    """Rewrite the store's small files into large ones, then vacuum replaced files.

    Readers are never blocked: compaction is a new table version, and files
    an older version still uses are kept for --grace-hours.
    """
    from agentlog.store.compact import CompactBusy, compact

    try:
        report = compact(data_root(), dry_run=dry_run, grace_hours=grace_hours)
    except CompactBusy as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        print_json(report.to_dict())
        return
    verb = "would vacuum" if dry_run else "vacuumed"
    stderr().print(
        f"files {report.files_before:,} -> {report.files_after:,} ({report.bytes_before / 2**20:,.1f} MiB -> "
        f"{report.bytes_after / 2**20:,.1f} MiB); rewrote {report.files_rewritten:,} into {report.files_added:,}; "
        f"{verb} {report.files_vacuumed:,} unreferenced files; {report.seconds:.1f} s"
    )
