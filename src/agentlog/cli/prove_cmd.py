"""``agentlog prove`` and ``agentlog verify-proof`` (docs/proofs.md)."""

from __future__ import annotations

import sys
from typing import Any

import click

from agentlog.cli.output import print_json, terminal_safe


@click.command(name="prove")
@click.argument("ident", metavar="[ID]", required=False)
@click.option("--consistency", nargs=2, type=click.IntRange(min=0), metavar="OLD NEW", default=None,
              help="Prove that the tree of NEW frames extends the tree of OLD frames instead.")
@click.option("--out", "-o", "out", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write the bundle to FILE (0600) instead of standard output.")
@click.option("--json", "as_json", is_flag=True, help="Print the bundle as JSON on standard output (also with --out).")
def prove_cmd(ident: str | None, consistency: tuple[int, int] | None, out: str | None, as_json: bool) -> None:
    """Make a proof bundle: ID's frames, each with its Merkle inclusion proof, and the signed
    checkpoint they are proven against.

    ID is an event (ev_…) or a session (ses_…, the agent's own session id, a prefix, or a log's
    provider/key). The store and the tree are brought up to date first, and a checkpoint is
    signed when the newest one does not cover the frames. A purged frame is proven without its
    content. Anyone can check the bundle with `agentlog verify-proof`, or without agentlog with
    the script `agentlog verify-proof --print-script` prints.

    With --consistency OLD NEW, the bundle proves instead that the tree of NEW frames extends
    the tree of OLD frames (with the checkpoints signed at those sizes, when there are).

    Exit 0 when the bundle was made, 1 when it cannot be (nothing has that id, the log changed),
    2 on usage errors.

    Example: agentlog prove ses_0193a7c2 --out session.json
    """
    from agentlog.core.paths import data_root
    from agentlog.operations.proofs import prove, prove_consistency, summary

    if (ident is None) == (consistency is None):
        raise click.UsageError("give an ID to prove, or --consistency OLD NEW (one of the two)")
    root = data_root()
    if consistency is not None:
        bundle = prove_consistency(root, consistency[0], consistency[1])
    else:
        bundle = prove(root, str(ident))
    if out is not None:
        from agentlog.core.fileio import write_atomic
        from agentlog.core.jsonio import dumps_pretty

        write_atomic(out, (dumps_pretty(bundle) + "\n").encode("utf-8"))
        click.echo(f"{summary(bundle)}: written to {out}", err=True)  # (click, not rich: 0.1 s less to start)
    else:
        click.echo(summary(bundle), err=True)
    if out is None or as_json:
        print_json(bundle)


@click.command(name="verify-proof")
@click.argument("bundle", metavar="[BUNDLE]", required=False)
@click.option("--key", metavar="KEY",
              help="The log's verifier key as you know it from elsewhere (<name>+<key id>+<base64>); "
                   "the bundle's own key must be it.")
@click.option("--witness", "witnesses", metavar="KEY", multiple=True,
              help="A witness's verifier key you trust (repeatable): one of them must have cosigned the "
                   "bundle's witnessed checkpoint, which the bundle must then have.")
@click.option("--require-witness", is_flag=True,
              help="Fail a bundle that has no witnessed checkpoint.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the report.")
@click.option("--print-script", is_flag=True,
              help="Print the standalone verifier (Python's standard library and PyNaCl only) and exit.")
def verify_proof_cmd(bundle: str | None, key: str | None, witnesses: tuple[str, ...], require_witness: bool,
                     as_json: bool, print_script: bool) -> None:
    """Check a proof bundle made by `agentlog prove` (BUNDLE is a file, or - for standard input),
    or a shared file made by `agentlog share` (its content unedited, its frames in the tree).

    Checks that the checkpoint's signature verifies with the key (the bundle's own, or --key,
    which it must be), that each frame's bytes hash to its frame hash, and that each frame's
    leaf is in the checkpoint's tree by its inclusion proof; a consistency bundle's proof that
    one tree extends the other. When the bundle carries a witnessed checkpoint, also that the
    key signed it, that its witnesses cosigned it (the bundle's witness keys, or --witness) and
    that the bundle's checkpoint extends it. Needs nothing of the data root. Prints one line per
    entry and a summary.

    Exit 0 when everything verifies, 1 when anything does not (or BUNDLE is not a bundle),
    2 on usage errors (BUNDLE missing or unreadable, a malformed --key or --witness).

    Example: agentlog verify-proof session.json --key "$(cat agentlog-key.txt)" --witness "$(cat alice.pub)"
    """
    from agentlog.core import UsageError
    from agentlog.integrity.bundle import BundleError, load_document, verify_document

    if print_script:
        if bundle is not None or key is not None or witnesses or require_witness:
            raise click.UsageError("--print-script takes no BUNDLE, --key, --witness or --require-witness")
        from importlib.resources import files

        click.echo(files("agentlog.integrity").joinpath("standalone_verifier.py").read_text(encoding="utf-8"), nl=False)
        return
    if bundle is None:
        raise click.UsageError("give a BUNDLE file to check (or --print-script)")
    from agentlog.integrity.bundle_witness import given_witnesses

    given_witnesses(witnesses)  # a malformed --witness is a usage error before the bundle is read
    try:
        if bundle == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(bundle, "rb") as fh:
                data = fh.read()
    except OSError as e:
        raise UsageError(f"cannot read {bundle}: {e.strerror}") from None
    try:
        from agentlog.share.seal import is_share

        if is_share(data):  # a file `agentlog share` made (docs/share.md)
            from agentlog.share.seal import verify as verify_share

            report: Any = verify_share(data, key=key, witnesses=witnesses, require_witness=require_witness)
        else:
            report = verify_document(load_document(data), key=key, witnesses=witnesses,
                                     require_witness=require_witness)
    except BundleError as e:
        if as_json:
            print_json({"ok": False, "error": f"not a bundle: {e}"})
        else:
            click.echo(terminal_safe(f"FAILED: not a bundle: {e}"))
        click.echo(terminal_safe(f"Error: {bundle} is not a proof bundle: {e}"), err=True)
        sys.exit(1)
    if as_json:
        print_json(report.to_dict())
    else:
        click.echo(terminal_safe("\n".join(report.lines())))
    if not report.ok:
        click.echo("Error: the bundle does not verify (the FAILED lines say where)", err=True)
        sys.exit(1)
