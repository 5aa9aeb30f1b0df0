"""``agentlog purge``."""

from __future__ import annotations

import sys
from typing import Any

import click

from agentlog.core.humanize import fmt_bytes
from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr


@click.command(name="purge")
@click.option("--before", "before", metavar="DATE",
              help="Purge events observed before DATE (ISO date or date-time; UTC unless it has an offset).")
@click.option("--session", "session", metavar="ID", help="Purge one session (provider session id, or provider/key).")
@click.option("--project", "project", metavar="NAME", help="Purge the events of a project (its name or root path).")
@click.option("--retention", is_flag=True, help="Purge what the retention_days setting says is too old.")
@click.option("--dry-run", is_flag=True, help="List what would be purged; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (required when not on a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def purge_cmd(before: str | None, session: str | None, project: str | None, retention: bool, dry_run: bool,
              yes: bool, as_json: bool) -> None:
    """Remove events' content from the logs and the store, keeping their hashes.

    Each selected frame is replaced in its log by a purged frame of the same
    length that keeps its seq and hash, so `agentlog verify` still proves the
    chain (and reports the frames as purged); a purge record in the log
    `agentlog/purges` says who purged which frames, when and how they were
    selected, and is written before any frame changes. The store's rows are
    deleted and the files that held them vacuumed. Give exactly one of
    --before, --session, --project, --retention. Purging again is a no-op;
    a purge that was interrupted is finished by the next one.

    Exit 0 when done, 1 when a selected log could not be purged (a broken
    log is left as it is), 2 on usage errors.
    """
    from agentlog.core.config import ConfigError, load
    from agentlog.log.purge import Selector, parse_date
    from agentlog.operations.purge import PurgeBusy, PurgeResult, purge, retention_selector

    given = [name for name, v in (("--before", before), ("--session", session), ("--project", project),
                                  ("--retention", retention or None)) if v is not None]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --before, --session, --project, --retention"
                               + (f" (got {', '.join(given)})" if given else ""))
    if not dry_run and not yes and not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise click.UsageError("purge removes content for good: pass --yes (or --dry-run) when not on a terminal")
    root = data_root()
    if retention:
        try:
            days = int(load(root)["retention_days"])
        except ConfigError as e:
            raise click.ClickException(str(e)) from e
        if days <= 0:
            raise click.ClickException("retention_days is 0 (keep everything): nothing to do; "
                                       "set it with `agentlog config set retention_days N`")
        selector = retention_selector(days)
    elif before is not None:
        try:
            selector = Selector(before=parse_date(before))
        except ValueError:
            raise click.BadParameter(f"{before!r} is not an ISO date or date-time (e.g. 2026-05-01 or "
                                     "2026-05-01T12:00:00Z)", param_hint="--before") from None
    elif session is not None:
        from agentlog.operations.purge import NoSuchSession, session_selector

        try:
            selector = session_selector(root, session)
        except NoSuchSession as e:
            raise click.ClickException(str(e)) from None
    else:
        selector = Selector(session=session, project=project)
    if not dry_run and not yes:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise click.UsageError("purge removes content for good: pass --yes (or --dry-run) when not on a terminal")
        try:
            plan = purge(root, selector, dry_run=True)
        except PurgeBusy as e:
            raise click.ClickException(str(e)) from e
        if not plan.frames:
            _finish(plan, as_json)
            return
        stderr().print(f"This removes the content of {plan.frames} frames ({fmt_bytes(plan.bytes)}) "
                       f"from {len(plan.logs)} session logs and the store, for good.")
        click.confirm("Purge?", abort=True, err=True)
    try:
        result: PurgeResult = purge(root, selector, dry_run=dry_run)
    except PurgeBusy as e:
        raise click.ClickException(str(e)) from e
    _finish(result, as_json)


def _finish(result: Any, as_json: bool) -> None:
    if as_json:
        print_json({"ok": not result.skipped, **result.to_dict()})
    else:
        rows = [
            {
                "session": lg.log,
                "status": lg.status,
                "frames": lg.frames,
                "bytes": fmt_bytes(lg.bytes),
                "segments": lg.segments_rewritten or "",
                "note": lg.reason or (f"{lg.pending} from an interrupted purge" if lg.pending else "")
                + (f"; {lg.unpurgeable} too short to purge" if lg.unpurgeable else ""),
            }
            for lg in result.logs
        ]
        if rows:
            print_table(rows, ["session", "status", "frames", "bytes", "segments", "note"])
        err = stderr()
        verb = "would purge" if result.dry_run else "purged"
        line = f"{verb} {result.frames} frames ({fmt_bytes(result.bytes)}) from {len(result.logs) - result.skipped} session logs"
        if not result.dry_run:
            line += f"; store: {result.store_rows_deleted} rows deleted, {result.store_files_vacuumed} files vacuumed"
            if result.purge_id:
                line += f"; record {result.purge_id}"
        err.print(line, markup=False, highlight=False)
        if result.skipped:
            err.print(f"[bold red]{result.skipped} session logs were not purged[/] (see the note)")
    if result.skipped:
        sys.exit(1)
