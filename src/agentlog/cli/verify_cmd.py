"""``agentlog verify``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from agentlog.log.verify import CAVEAT, select_logs, verify_logs
from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr, terminal_safe

if TYPE_CHECKING:
    from agentlog.operations.tree_verify import TrustReport


@click.command(name="verify")
@click.option("--session", "session", metavar="ID", help="Verify only this session (provider session id, or provider/key).")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True, help="Processes to verify with.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the reports and the caveat.")
def verify_cmd(session: str | None, jobs: int, as_json: bool) -> None:
    """Check every session log's hashes, links, sequence and head, then the tree and checkpoints.

    Sealed (zstd) segments are checked by streaming decompression, never
    unpacked to disk, and the chain is followed from them into the log file.

    Beyond each chain (not with --session): the Merkle tree against the logs
    (every frame it holds is still there, unchanged, in order; a forged chain,
    a cut tail, a swapped or deleted session shows), the tree's tiles against
    its root, every kept checkpoint's signature and consistency with the tree,
    and the newest checkpoint cosigned by a registered witness against every
    later one. See docs/proofs.md.

    Exit 0 when every log is intact (capture gaps from crashes are reported
    but are not tampering), 1 when any log, the tree or a checkpoint is
    broken, 2 on usage errors.

    Example: agentlog verify --json
    """
    root = data_root()
    logs = select_logs(root, session)
    if session is not None and not logs:
        raise click.BadParameter(f"no session log matches {session!r}", param_hint="--session")
    reports = verify_logs(logs, jobs=jobs)
    from agentlog.operations.verify import save

    save(root, reports)  # the dashboard's Integrity page shows the last result per log
    broken = [r for r in reports if r.status == "broken"]
    trust = None
    if session is None:
        from agentlog.operations.verify import trust as check_trust

        trust = check_trust(root)
    failed = bool(broken) or (trust is not None and not trust.ok)
    if as_json:
        print_json(
            {
                "ok": not failed,
                "sessions": len(reports),
                "broken": len(broken),
                "frames": sum(r.frames for r in reports),
                "bytes": sum(r.bytes for r in reports),
                "sealed_frames": sum(r.sealed_frames for r in reports),
                "sealed_bytes": sum(r.sealed_bytes for r in reports),
                "sealed_disk_bytes": sum(r.sealed_disk_bytes for r in reports),
                "purged": sum(r.purged for r in reports),
                "reports": [r.to_dict() for r in reports],
                "trust": trust.to_dict() if trust is not None else None,
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
        if trust is not None:
            _show_trust(trust)
        err.print(CAVEAT)
    if failed:
        sys.exit(1)


def _show_trust(trust: TrustReport) -> None:
    """The tree's and the checkpoints' breaks (a table on stdout) and a summary on stderr."""
    err = stderr()
    if trust.breaks:
        rows = [{"trust": b.kind, "where": terminal_safe(b.where), "reason": b.reason, "detail": terminal_safe(b.detail)}
                for b in trust.breaks]
        print_table(rows, ["trust", "where", "reason", "detail"])
        more = f" (and {trust.more_breaks} more)" if trust.more_breaks else ""
        err.print(f"[bold red]trust: {len(trust.breaks)} breaks{more}[/] in the tree, the checkpoints or the witnessed history")
    elif trust.tree:
        line = (f"tree: {trust.frames_checked} frames of {trust.logs} logs are the tree's {trust.tree_size} leaves, "
                f"its tiles agree with its root")
        if trust.newest is not None:
            line += f"; {trust.checkpoints} checkpoints consistent with it (newest: {trust.newest['size']} frames)"
        if trust.witnessed is not None:
            line += f"; witnessed at {trust.witnessed['size']} frames by {', '.join(trust.witnessed['witnesses'])}"
        err.print(terminal_safe(line), markup=False)
    for note in trust.notes:
        err.print(terminal_safe(f"note: {note}"), markup=False)
