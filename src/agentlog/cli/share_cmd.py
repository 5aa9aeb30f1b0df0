"""``agentlog share`` (docs/share.md)."""

from __future__ import annotations

import click

from agentlog.cli.output import print_json, print_table


@click.command(name="share")
@click.argument("ident", metavar="ID")
@click.option("--html", "html_file", metavar="FILE", help="Write one self-contained HTML file (- for standard output).")
@click.option("--markdown", "md_file", metavar="FILE", help="Write Markdown, for a pull request (- for standard output).")
@click.option("--redact-paths", is_flag=True, help="Also shorten every absolute path to its last component.")
@click.option("--redact", "patterns", metavar="REGEX", multiple=True,
              help="Also remove every match of REGEX (Python syntax; repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what would be shown and removed; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written (or would be) as one JSON object.")
def share_cmd(ident: str, html_file: str | None, md_file: str | None, redact_paths: bool, patterns: tuple[str, ...],
              dry_run: bool, as_json: bool) -> None:
    """Export a session, turn or attempt as a file safe to share, which proves itself.

    ID is a session (ses_…), turn (trn_…) or attempt (att_…), or a prefix. The file shows the
    turns, attempts, prompts, agent messages, tool calls with their inputs and outputs, diffs,
    failures and retries, sanitised with a profile stricter than capture's: secrets scanned
    again (and long random-looking tokens), home directories become ~, user and host names and
    e-mail addresses are replaced; --redact-paths and --redact add more. An appendix counts
    what each rule removed. The file carries a proof: `agentlog verify-proof FILE` checks that
    its frames are in this data root's signed log and that nothing in it was edited since.

    Without --html or --markdown the HTML goes to standard output. Files are written 0600.

    Exit 0 when written, 1 when nothing has that id, 2 on usage errors.

    Example: agentlog share ses_0193a7c2 --markdown session.md --redact-paths --redact 'ACME-[0-9]+'
    """
    from agentlog.core.paths import data_root
    from agentlog.operations.proofs import prove_signed
    from agentlog.share.export import export
    from agentlog.share.view import target

    if html_file is not None and md_file is not None:
        raise click.UsageError("give --html FILE or --markdown FILE, not both")
    fmt, out = ("markdown", md_file) if md_file is not None else ("html", html_file or "-")
    root = data_root()
    what = target(root, ident)
    bundle, signer = prove_signed(root, what.session_id, only="session")
    shared = export(what, bundle, signer, fmt=fmt, redact_paths=redact_paths, patterns=patterns)
    summary = {**shared.summary(), "written": None if dry_run else out}
    if not dry_run:
        if out == "-":
            click.echo(shared.text, nl=False)
        else:
            from agentlog.core.fileio import write_atomic

            write_atomic(out, shared.text.encode("utf-8"))
    if as_json and (dry_run or out != "-"):
        print_json(summary)
        return
    err = not dry_run and out == "-"
    verb = "would write" if dry_run else "wrote"
    click.echo(f"{verb} {shared.kind} {shared.id} as {fmt} ({summary['bytes']} bytes, {shared.frames} frames proven)"
               + ("" if dry_run or out == "-" else f" to {out}"), err=err)
    if dry_run:
        rows = [{"rule": r, "removed": n} for r, n in summary["removed"].items()] or [{"rule": "(nothing)", "removed": 0}]
        print_table(rows, ["rule", "removed"], title="What the export profile removes")
