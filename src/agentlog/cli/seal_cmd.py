"""``agentlog seal``."""

from __future__ import annotations

import sys
from typing import Any

import click

from agentlog.core.humanize import fmt_bytes
from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr


@click.command(name="seal")
@click.option("--idle-hours", type=click.FloatRange(0, 24 * 365), default=None,
              help="Seal logs idle at least this long (default: the seal_idle_hours setting, 24; "
                   "0 with --session when not given).")
@click.option("--session", "session", metavar="ID", help="Only this session (provider session id, or provider/key).")
@click.option("--level", type=click.IntRange(1, 22), default=None, help="zstd level (default 19, with long-distance matching).")
@click.option("--dry-run", is_flag=True, help="Verify and report what would be sealed; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array: one object per log that was due.")
def seal_cmd(idle_hours: float | None, session: str | None, level: int | None, dry_run: bool, as_json: bool) -> None:
    """Compress the logs of idle or ended sessions into sealed zstd segments.

    Each due log is verified first (a log with a break is never sealed),
    then its complete frames move into `<key>.sealed/` and the log file is
    emptied; a session that resumes continues its chain in the next
    segment. `agentlog verify` checks sealed segments without unpacking
    them to disk. A session is due when its log has not changed for
    --idle-hours, or when its last event is session_ended (after 10
    minutes). Exit 0 when done, 1 when a due log was broken (or failed).
    """
    from agentlog.core.config import ConfigError, load
    from agentlog.log.seal import DEFAULT_LEVEL, SealBusy, SealResult, seal_idle
    from agentlog.log.verify import select_logs

    root = data_root()
    logs = select_logs(root, session)
    if session is not None and not logs:
        raise click.BadParameter(f"no session log matches {session!r}", param_hint="--session")
    if idle_hours is None:
        if session is not None:
            idle_hours = 0.0
        else:
            try:
                idle_hours = float(load(root)["seal_idle_hours"])
            except ConfigError as e:
                raise click.ClickException(str(e)) from e
    err = stderr()
    lines: list[str] = []

    def report(done: int, total: int, res: SealResult | None) -> None:
        if res is None or as_json or res.status not in ("sealed", "broken", "error"):
            return
        line = _describe(res)
        lines.append(line)
        err.print(f"[{done}/{total}] {line}", markup=False, highlight=False)

    try:
        results = seal_idle(
            root,
            idle_seconds=idle_hours * 3600,
            level=DEFAULT_LEVEL if level is None else level,
            dry_run=dry_run,
            logs=logs,
            progress=report,
        )
    except SealBusy as e:
        raise click.ClickException(str(e)) from e
    broken = [r for r in results if r.status in ("broken", "error")]
    if as_json:
        print_json([r.to_dict() for r in results])
    else:
        rows: list[dict[str, Any]] = [
            {
                "session": f"{r.provider}/{r.session}",
                "status": r.status,
                "frames": r.frames or "",
                "bytes": fmt_bytes(r.bytes_in) if r.bytes_in else "",
                "sealed": f"{fmt_bytes(r.bytes_out)} ({r.ratio:.1f}x)" if r.bytes_out else "",
                "why": r.reason,
            }
            for r in results
        ]
        if rows:
            print_table(rows, ["session", "status", "frames", "bytes", "sealed", "why"])
        sealed = [r for r in results if r.status == "sealed"]
        bytes_in = sum(r.bytes_in for r in sealed)
        bytes_out = sum(r.bytes_out for r in sealed)
        if dry_run:
            would = [r for r in results if r.status == "would_seal"]
            err.print(f"would seal {len(would)} session logs ({fmt_bytes(sum(r.bytes_in for r in would))})")
        else:
            ratio = f" ({bytes_in / bytes_out:.1f}x)" if bytes_out else ""
            err.print(f"sealed {len(sealed)} session logs: {fmt_bytes(bytes_in)} -> {fmt_bytes(bytes_out)}{ratio}")
        if broken:
            err.print(f"[bold red]{len(broken)} session logs are broken or failed[/] and were not sealed (see `agentlog verify`)")
    if broken:
        sys.exit(1)


def _describe(res: Any) -> str:
    if res.status in ("broken", "error"):
        return f"{res.provider}/{res.session}: {res.status}, not sealed: {res.reason}"
    return (
        f"{res.provider}/{res.session}: {res.frames} frames, {fmt_bytes(res.bytes_in)} -> "
        f"{fmt_bytes(res.bytes_out)} ({res.ratio:.1f}x) in {res.seconds:.1f} s"
    )


