"""``agentlog verify``."""

from __future__ import annotations

import sys

import click

from agentlog.log.verify import CAVEAT, select_logs, verify_logs
from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr


@click.command(name="verify")
@click.option("--session", "session", metavar="ID", help="Verify only this session (provider session id, or provider/key).")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True, help="Processes to verify with.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the reports and the caveat.")
def verify_cmd(session: str | None, jobs: int, as_json: bool) -> None:
    """Check every session log's hashes, links, sequence and head.

    Sealed (zstd) segments are checked by streaming decompression, never
    unpacked to disk, and the chain is followed from them into the log file.

    Exit 0 when every log is intact (capture gaps from crashes are reported
    but are not tampering), 1 when any log is broken, 2 on usage errors.
    """
    root = data_root()
    logs = select_logs(root, session)
    if session is not None and not logs:
        raise click.BadParameter(f"no session log matches {session!r}", param_hint="--session")
    reports = verify_logs(logs, jobs=jobs)
    from agentlog.operations.verify import save

    save(root, reports)  # the dashboard's Integrity page shows the last result per log
    broken = [r for r in reports if r.status == "broken"]
    if as_json:
        print_json(
            {
                "ok": not broken,
                "sessions": len(reports),
                "broken": len(broken),
                "frames": sum(r.frames for r in reports),
                "bytes": sum(r.bytes for r in reports),
                "sealed_frames": sum(r.sealed_frames for r in reports),
                "sealed_bytes": sum(r.sealed_bytes for r in reports),
                "sealed_disk_bytes": sum(r.sealed_disk_bytes for r in reports),
                "purged": sum(r.purged for r in reports),
                "reports": [r.to_dict() for r in reports],
                "caveat": CAVEAT,
            }
        )
    else:
        rows = []
        for r in reports:
            first = r.breaks[0] if r.breaks else None
            gap = ", ".join(sorted({g.reason for g in r.gaps}))
            rows.append(
                {
                    "session": f"{r.provider}/{r.session}",
                    "frames": r.frames,
                    "sealed": f"{r.sealed_frames} in {r.sealed_segments} seg, {r.sealed_bytes / 1e6:.1f} MB" if r.sealed_segments else "",
                    "status": r.status,
                    "where": f"{first.file or r.path}:{first.line} (frame {first.frame})" if first else "",
                    "reason": f"{first.reason}: {first.detail}" if first else gap,
                }
            )
        if rows:
            print_table(rows, ["session", "frames", "sealed", "status", "where", "reason"])
        err = stderr()
        total = sum(r.frames for r in reports)
        sealed = sum(r.sealed_frames for r in reports)
        of_sealed = f" ({sealed} of them in sealed segments)" if sealed else ""
        purged = sum(r.purged for r in reports)
        if purged:
            of_sealed += f", {purged} purged (content removed, hash kept, recorded)"
        if broken:
            err.print(f"[bold red]{len(broken)} of {len(reports)} session logs are broken[/] ({total} frames checked{of_sealed})")
        else:
            err.print(f"verified: {len(reports)} session logs, {total} frames{of_sealed}, all intact")
        err.print(CAVEAT)
    if broken:
        sys.exit(1)
