"""``agentlog memory check`` and ``memory review --doubtful``: memories checked against their
evidence and later outcomes (docs/memory.md, "Memory that stays true")."""

from __future__ import annotations

from typing import Any

import click

from agentlog.cli.output import print_columns, print_json, terminal_safe
from agentlog.core.paths import data_root


@click.command(name="check")
@click.argument("idents", nargs=-1)
@click.option("--all", "everything", is_flag=True,
              help="Check every memory (default: those what happened since the last check can touch — new "
                   "recorded events naming their paths or commands, a moved HEAD, their own edits — and those never "
                   "checked).")
@click.option("--repo", "repo", default=None, type=click.Path(file_okay=False, exists=True),
              help="The git repository file evidence is checked against (default: the one the current directory is in).")
@click.option("--no-proposals", "no_proposals", is_flag=True,
              help="Find contradictions but open no proposal for them.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check_cmd(idents: tuple[str, ...], everything: bool, repo: str | None, no_proposals: bool, as_json: bool) -> None:
    """Check memories against their evidence and later outcomes.

    File evidence is compared through git with HEAD (unchanged, moved — the
    citation follows its lines —, changed, deleted); recorded evidence with the
    projection (recorded, corrected, retracted, purged); URLs are never fetched.
    The outcome rules (a pitfall whose edit later succeeded, a procedure whose
    command later failed, a decision whose tool was replaced) each open one
    proposal to archive the memory. A check that changed a memory's findings is
    an event in the memory log.

    Example: agentlog memory check --all --repo .
    """
    from agentlog.memory import truth
    from agentlog.memory.store import NotFound

    try:
        report = truth.check(data_root(), repo_dir=repo, ids=list(idents) or None, everything=everything,
                             propose=not no_proposals)
    except NotFound as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        print_json(report.to_dict())
        return
    for why in report.skipped:
        click.echo(f"note: {terminal_safe(why)}", err=True)
    click.echo(f"checked {report.checked}, changed {report.written}, doubtful {len(report.doubtful)}, "
               f"citations moved {report.moved}, proposals opened {len(report.proposals)}")
    for pid in report.proposals:
        click.echo(f"proposal {pid} (agentlog memory review {pid})")


@click.command(name="keep")
@click.argument("ident")
@click.option("--reason", default=None, help="Why it still holds (kept in the memory log).")
@click.option("--json", "as_json", is_flag=True, help="Print the memory as JSON.")
def keep_cmd(ident: str, reason: str | None, as_json: bool) -> None:
    """Keep a doubtful memory: it still holds.

    The findings of its last check that lowered it (a citation changed,
    deleted, retracted, corrected or purged) are kept: it is not flagged again
    until that evidence changes again. Its open rule proposals are rejected.
    Recorded in the memory log (a rebuild gives the same).

    Example: agentlog memory keep run-the-tests --reason "still true after the refactor"
    """
    from agentlog.memory.keep import NothingToKeep, keep
    from agentlog.memory.proposals import StaleProposal
    from agentlog.memory.store import NotFound

    try:
        m = keep(data_root(), ident, reason=reason)
    except (NotFound, NothingToKeep, StaleProposal) as e:
        raise click.ClickException(str(e)) from None
    if as_json:
        print_json(m.to_dict())
        return
    click.echo(f"kept {terminal_safe(m.slug)}: confidence {m.effective_confidence:.2f}"
               f"{' — still doubtful: ' + '; '.join(_why(d) for d in m.doubts or []) if m.doubtful else ''}")


def print_doubtful(limit: int, as_json: bool) -> None:
    """The doubtful memories, least true first, each with why."""
    from agentlog.memory import truth

    ms = truth.doubtful(data_root(), limit=limit)
    if as_json:
        print_json([{**m.to_dict(), "why": [_why(d) for d in m.doubts or []]} for m in ms])
        return
    if not ms:
        click.echo("no doubtful memory (agentlog memory check checks them)", err=True)
        return
    print_columns([{"slug": m.slug, "kind": m.kind, "confidence": f"{m.effective_confidence:.2f}",
                    "truth": f"{m.truth_factor:.2f}", "why": "; ".join(_why(d) for d in m.doubts or [])}
                   for m in ms], ["slug", "kind", "confidence", "truth", "why"])


def _why(d: dict[str, Any]) -> str:
    what = f"{d.get('type')} {d.get('value')}" if d.get("on") == "evidence" else f"rule {d.get('rule')}"
    return terminal_safe(f"{what}: {d.get('status')} ({d.get('detail')})")


def echo_explanation(m: Any) -> None:
    """``memory show``'s lines on why the confidence is what it is."""
    factors = explanation(m)
    click.echo(f"confidence {m.effective_confidence:.2f}{' — doubtful' if m.doubtful else ''}, because:")
    for f in factors:
        on = f" {terminal_safe(f['on'])}" if f.get("on") else ""
        click.echo(f"  ×{f['value']:.2f}  {f['factor']}{on}: {terminal_safe(f['why'])}")
        for e in f.get("evidence") or []:
            click.echo(f"         {terminal_safe(e)}")


def explanation(m: Any) -> list[dict[str, Any]]:
    """Each factor of ``m``'s effective confidence, with its evidence (:func:`agentlog.memory.truth.explain`)."""
    from agentlog.memory import truth
    from agentlog.memory.store import connect

    con = connect(data_root())
    try:
        return truth.explain(con, m)
    finally:
        con.close()
