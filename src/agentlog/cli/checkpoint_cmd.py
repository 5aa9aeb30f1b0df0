"""``agentlog checkpoint``: sign the Merkle tree's head, list, cosign and publish checkpoints."""

from __future__ import annotations

import time
from typing import Any

import click

from agentlog.cli.output import print_json, print_table, stderr, terminal_safe
from agentlog.core.paths import data_root


def _when(made_at_us: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(made_at_us / 1e6)) if made_at_us else ""


@click.command(name="checkpoint")
@click.option("--list", "list_", is_flag=True, help="List every kept checkpoint (oldest first) instead of signing one.")
@click.option("--cosign", is_flag=True, help="Cosign the newest checkpoint as a witness (with --witness-key).")
@click.option("--witness-key", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="The witness's private key file (PRIVATE+KEY+…, 0600; `agentlog witness keygen` makes one).")
@click.option("--publish", "publish_to", metavar="DIR|GIT-REPO",
              help="Copy every checkpoint not yet there to this directory; in a git work tree, commit them.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (a JSON array with --list).")
def checkpoint_cmd(list_: bool, cosign: bool, witness_key: str | None, publish_to: str | None, as_json: bool) -> None:
    """Sign the Merkle tree's head over every frame (a C2SP checkpoint) and keep it.

    Ingests what is pending first, so the checkpoint covers every frame
    recorded so far, then prints the signed note. Every checkpoint is kept
    (state/tree/checkpoints/); a tree that does not extend the newest one is
    refused. `agentlog keys show` prints the key that opens them; `agentlog
    verify` checks the logs, the tree and every checkpoint against each other.

    --cosign adds a witness's cosignature (C2SP tlog-cosignature) to the newest
    checkpoint, once it proves to extend the last one that witness cosigned;
    --publish copies the checkpoints where others keep them.

    Example: agentlog checkpoint --publish ~/notes/agentlog-checkpoints
    """
    if sum((list_, cosign, publish_to is not None)) > 1:
        raise click.UsageError("--list, --cosign and --publish go one at a time")
    if cosign != (witness_key is not None):
        raise click.UsageError("--cosign needs --witness-key FILE, and --witness-key goes with --cosign")
    root = data_root()
    if list_:
        _list(root, as_json)
    elif cosign and witness_key is not None:
        _cosign(root, witness_key, as_json)
    elif publish_to is not None:
        _publish(root, publish_to, as_json)
    else:
        _make(root, as_json)


def _make(root: str, as_json: bool) -> None:
    from agentlog.operations.checkpoints import make

    made = make(root)
    kept = made.stored
    if as_json:
        print_json({"origin": kept.checkpoint.origin, "size": kept.checkpoint.size, "root": kept.checkpoint.root.hex(),
                    "note": kept.note, "path": kept.path, "made_at_us": kept.made_at_us, "new": made.new,
                    "key": made.key, "ingested_events": made.ingested_events, "ingest_note": made.ingest_note})
        return
    click.echo(kept.note, nl=False)
    err = stderr()
    if made.ingest_note:
        err.print(f"note: {made.ingest_note}", markup=False)
    state = "signed" if made.new else "unchanged since"
    err.print(f"{state} checkpoint of {kept.checkpoint.size} frames: {kept.path}", markup=False)


def _list(root: str, as_json: bool) -> None:
    from agentlog.operations.checkpoints import stored
    from agentlog.operations.witness import cosigned_witnesses

    rows: list[dict[str, Any]] = []
    for kept in stored(root):
        rows.append({"checkpoint": kept.name, "size": kept.checkpoint.size, "root": kept.checkpoint.root.hex(),
                     "made": _when(kept.made_at_us), "made_at_us": kept.made_at_us,
                     "witnesses": cosigned_witnesses(root, kept), "path": kept.path})
    if as_json:
        print_json(rows)
        return
    if not rows:
        stderr().print("no checkpoint yet: `agentlog checkpoint` signs one")
        return
    shown = [{**r, "witnesses": ", ".join(r["witnesses"])} for r in rows]
    print_table(shown, ["checkpoint", "size", "root", "made", "witnesses"])


def _cosign(root: str, key_file: str, as_json: bool) -> None:
    from agentlog.operations.witness import cosign_newest

    done = cosign_newest(root, key_file)
    if as_json:
        print_json(done.to_dict())
        return
    click.echo(done.note, nl=False)
    err = stderr()
    after = f" (it extends {done.previous}, cosigned before)" if done.previous else ""
    err.print(terminal_safe(f"cosigned checkpoint of {done.checkpoint.size} frames as witness {done.witness.name}"
                            f"{after}: {done.path}"), markup=False)
    if not done.registered:
        err.print(terminal_safe(f"note: {done.witness.name} is not a registered witness here, so `agentlog verify` "
                                f"does not count it: agentlog witness add {done.witness.name} {done.witness.key}"),
                  markup=False)


def _publish(root: str, dest: str, as_json: bool) -> None:
    from agentlog.operations.publish import publish

    done = publish(root, dest)
    if as_json:
        print_json(done.to_dict())
        return
    err = stderr()
    if not done.written:
        err.print(terminal_safe(f"nothing new to publish: {done.unchanged} checkpoints are in {done.destination} already"),
                  markup=False)
        return
    where = f" and committed ({done.git_commit})" if done.git_commit else ""
    err.print(terminal_safe(f"published {len(done.written)} files to {done.destination}{where}"), markup=False)
