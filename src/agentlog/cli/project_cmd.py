"""``agentlog project``."""

from __future__ import annotations

from typing import Any

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, stderr


@click.command(name="project")
@click.option("--full", is_flag=True, help="Re-project every session, not only those new events touched.")
@click.option("--no-ingest", is_flag=True, help="Project what is in the store; do not catch it up with the logs first.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the refresh report.")
def project_cmd(full: bool, no_ingest: bool, as_json: bool) -> None:
    """Bring the projection (sessions, turns, tool calls, attempts, edges, work
    units …) up to date with the store.

    Every read command does this on its own first; run it to see what it
    does, or with --full after changing nothing but wanting a clean
    recomputation. Only sessions that new events touched are re-projected,
    unless the increment cannot be proven (then everything is, and the report
    says why). Exit 0 when done, 1 when another process holds the projection
    lock too long.
    """
    from agentlog.projection.persist import ProjectionBusy, refresh
    from agentlog.store.ingest import catch_up

    root = data_root()
    if not no_ingest:
        catch_up(root)
    err = stderr()
    progress: Any = None
    bar: Any = None
    if not as_json and err.is_terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(TextColumn("projecting"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} events"),
                       TimeRemainingColumn(), console=err, transient=True)
        task = bar.add_task("project", total=None)

        def progress(_: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        bar.start()
    try:
        report = refresh(root, full=full, progress=progress)
    except ProjectionBusy as e:
        err.print(f"[red]busy:[/] {e}", markup=True, highlight=False)
        raise SystemExit(1) from None
    finally:
        if bar is not None:
            bar.stop()
    if as_json:
        print_json(report.to_dict())
        return
    c = report.counts
    what = {"none": "already up to date", "incremental": "incremental", "full": f"full ({report.reason})"}[report.mode]
    err.print(f"projection {what}: {report.new_events:,} new events, {report.sessions_rebuilt:,} sessions "
              f"re-projected, {report.projects_reassembled:,} projects joined again, {report.parts_written:,} "
              f"parts written in {report.seconds:.2f} s", highlight=False)
    err.print(", ".join(f"{c.get(k, 0):,} {k}" for k in ("sessions", "turns", "attempts", "work_units", "handoffs",
                                                          "decisions", "conflicts")), highlight=False)
