"""``agentlog import``."""

from __future__ import annotations

import sys
import time

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr, terminal_safe

AGENT_CHOICES = ("claude-code", "codex", "gemini-cli", "cursor")
ANCHORS = ("attemptdb", "nd7")


@click.command(name="import")
@click.argument("agent", required=False, type=click.Choice(AGENT_CHOICES + ANCHORS + ("all",)))
@click.argument("paths", nargs=-1, type=click.Path(exists=True, dir_okay=True, file_okay=True))
@click.option("--since", "since", default=None, metavar="WHEN",
              help="Only files modified since then (a date, RFC 3339 time, epoch, 'today', '-30d' …).")
@click.option("--dry-run", is_flag=True, help="Read and count, write nothing (offsets are not remembered).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the import report.")
@click.option("--force", is_flag=True, help="Import a named file even when it does not look like the agent's transcript.")
def import_cmd(agent: str | None, paths: tuple[str, ...], since: str | None, dry_run: bool, as_json: bool,
               force: bool) -> None:
    """Import an agent's transcripts (its history from before the hooks) into the log.

    AGENT is claude-code, codex, gemini-cli or cursor (default: all four),
    or attemptdb (FILE: its Event v1 JSON lines, e.g. `attempt events --json`)
    or nd7 (DIR: its session logs, default $XDG_STATE_HOME/nd7/sessions;
    every frame's BLAKE3 chain is checked on the way in and breaks reported).
    With no PATH, each agent's own locations are searched:
    $CLAUDE_CONFIG_DIR/projects (~/.claude/projects), $CODEX_HOME/sessions and
    archived_sessions (~/.codex), ~/.gemini/tmp/*/chats and
    ~/.cursor/projects/*/agent-transcripts. A PATH may be a file or a
    directory.

    Every record becomes a reconstructed event (marked so, with its source
    file and line) in its session's log, and goes through the same ingest and
    projection as what hooks record. Every line is kept byte for byte (secrets
    redacted): a line that gives no event (bookkeeping, thinking only …) is kept
    by a `transcript_line` event, which the projection does not read. A thing a hook already recorded (the same
    tool-use id, the same prompt) is not written twice, and importing again
    reads only what was appended since (a truncated or replaced file is read
    again, without duplicates). Record types a parser does not know are kept
    as `unknown` events and counted per agent version in the summary.

    A FILE named here is read first: when it does not look like the agent's
    transcript, nothing is imported and the command says what it expected
    (exit 1; --force imports it anyway).

    Example: agentlog import claude-code ~/.claude/projects/-home-me-app/abc.jsonl
    """
    from agentlog.importers.run import import_paths
    from agentlog.query.timeexpr import resolve

    since_s: float | None = None
    if since is not None:
        try:
            since_s = resolve(since, time.time_ns() // 1000) / 1e6
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--since") from None
    agents = list(AGENT_CHOICES) if agent in (None, "all") else [agent]
    if agent == "attemptdb" and not paths:
        raise click.UsageError("name the file: `agentlog import attemptdb FILE` (e.g. the output of `attempt events --json`)")
    if paths and len(agents) > 1:
        raise click.UsageError("name the agent whose files the paths hold (e.g. `agentlog import claude-code DIR`)")
    if not force and agent is not None:
        import os

        from agentlog.importers.sniff import EXPECTED, looks_like

        for path in paths:
            if os.path.isfile(path):
                ok, why = looks_like(agent, path)
                if not ok:
                    raise click.ClickException(
                        f"{path} is not a {agent} transcript: {why}; expected {EXPECTED[agent]}. Nothing was "
                        "imported (--force imports it anyway)")
    err = stderr()
    show = err.is_terminal and not as_json
    if show:
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        with Progress(TextColumn("importing"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                      TimeRemainingColumn(), console=err, transient=True) as bar:
            task = bar.add_task("import", total=None)

            def progress(path: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            report = import_paths(data_root(), agents, paths, since_s=since_s, dry_run=dry_run, progress=progress)
    else:
        report = import_paths(data_root(), agents, paths, since_s=since_s, dry_run=dry_run)
    d = report.to_dict()
    if as_json:
        print_json(d)
    else:
        rows = []
        for provider, p in d["by_provider"].items():
            unknown = ", ".join(f"{terminal_safe(k)} ×{n}" for k, n in sorted(p["unknown"].items())) or "—"
            fields = ", ".join(f"{terminal_safe(k)} ×{n}" for k, n in sorted(p["unknown_fields"].items())) or "—"
            rows.append({"source": provider, "files": p["files"], "sessions": p["sessions"], "events": p["events"],
                         "lines kept alone": p["kept_lines"], "already there": p["duplicates"], "unknown records": unknown, "unknown fields": fields,
                         "problems": p["problems"], "errors": p["errors"]})
        if rows:
            print_table(rows, list(rows[0]), title="import" + (" (dry run: nothing written)" if dry_run else ""))
        t = d["totals"]
        err.print(f"{t['files']} files, {t['bytes_read'] / 1e6:.1f} MB read, {t['events']} events "
                  f"{'would be ' if dry_run else ''}written ({t['kept_lines']} of them lines kept alone), "
                  f"{t['duplicates']} already there, "
                  f"{t['sessions']} sessions in {d['seconds']:.2f} s")
        shown = 0
        for f in report.files:
            for p in f.problems:
                if shown < 20:
                    err.print(f"  {terminal_safe(p['file'])}:{p['line']}: {terminal_safe(p['message'])}")
                shown += 1
            if f.error:
                err.print(f"  [red]{terminal_safe(f.path)}: {terminal_safe(f.error)}[/]")
        if shown > 20:
            err.print(f"  … and {shown - 20} more problems (--json lists them)")
    if any(f.error for f in report.files):
        sys.exit(1)
