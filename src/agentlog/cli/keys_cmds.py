"""``agentlog keys`` (the checkpoint signing key, the data key of encryption at rest) and ``agentlog witness``
(who may cosign)."""

from __future__ import annotations

import sys

import click

from agentlog.cli.output import print_json, print_table, stderr, terminal_safe
from agentlog.core.paths import data_root


@click.group(name="keys")
def keys_group() -> None:
    """The data root's keys: the checkpoint signing key (Ed25519, under state/keys/), and the data
    key of encryption at rest (`keys init --at-rest`, docs/encryption.md).

    Example: agentlog keys show; agentlog keys status
    """


@keys_group.command(name="show")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: origin, key, retired keys.")
def keys_show(as_json: bool) -> None:
    """Print the verifier key that opens this data root's checkpoints (made on first use).

    The key (`<origin>+<key id>+<base64>`, C2SP signed-note format) holds no
    secret: give it to whoever checks your checkpoints or proofs.

    Example: agentlog keys show --json
    """
    from agentlog.operations.checkpoints import origin, retired_keys, signer

    root = data_root()
    key = signer(root).verifier_key_string()
    retired = retired_keys(root)
    if as_json:
        print_json({"origin": origin(root), "key": key, "retired": retired})
        return
    click.echo(key)
    if retired:
        stderr().print(f"{len(retired)} retired keys still open older checkpoints (--json lists them)")


@keys_group.command(name="rotate")
@click.option("--yes", is_flag=True, help="Rotate without asking (needed when not on a terminal).")
@click.option("--at-rest", is_flag=True, help="Re-wrap the data key of encryption at rest instead (no content "
              "is rewritten; with --keyring and/or --passphrase).")
@click.option("--keyring", "use_keyring", is_flag=True, help="--at-rest: wrap it by a new OS keyring entry.")
@click.option("--passphrase", is_flag=True, help="--at-rest: wrap it by a new passphrase (asked, or stdin).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the new key, the retired one.")
def keys_rotate(yes: bool, at_rest: bool, use_keyring: bool, passphrase: bool, as_json: bool) -> None:
    """Replace the checkpoint signing key by a new one (or, with --at-rest, re-wrap the data key).

    Checkpoints signed before stay verifiable: the old verifier key is kept
    as retired, and the old private key is moved to state/keys/retired/ (not
    deleted; delete it yourself after a compromise). Give the new key
    (`agentlog keys show`) to whoever checks your checkpoints.

    Example: agentlog keys rotate --yes; agentlog keys rotate --at-rest --keyring
    """
    if at_rest:
        from agentlog.cli.atrest_cmds import keys_rotate_at_rest

        keys_rotate_at_rest(use_keyring, passphrase, as_json)
        return
    if use_keyring or passphrase:
        raise click.UsageError("--keyring and --passphrase go with --at-rest")
    from agentlog.operations.checkpoints import rotate_key

    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("rotating the signing key asks first: pass --yes (not on a terminal)")
        click.confirm("Replace the checkpoint signing key (the old one is kept to open older checkpoints)?",
                      abort=True, err=True)
    done = rotate_key(data_root())
    if as_json:
        print_json(done.to_dict())
        return
    click.echo(done.key)
    stderr().print(terminal_safe(f"rotated: the old key {done.retired} is retired (checkpoints it signed still "
                                 f"verify); its private key is now {done.retired_key_file}"), markup=False)


@keys_group.command(name="init")
@click.option("--at-rest", is_flag=True, help="Make the data key that seals captured content (required).")
@click.option("--keyring", "use_keyring", is_flag=True, help="Wrap it by a key kept in the OS keyring.")
@click.option("--passphrase", is_flag=True, help="Wrap it by a passphrase (asked, or stdin's first line).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the key's status.")
def keys_init(at_rest: bool, use_keyring: bool, passphrase: bool, as_json: bool) -> None:
    """Turn encryption at rest on for this data root (new frames' content and raw are sealed).

    The data key is wrapped by a key kept in the OS keyring (--keyring), by a passphrase
    (--passphrase; asked on the terminal, else read from stdin's first line), or both.
    A lost keyring entry or a forgotten passphrase means that content is lost for good.

    Example: agentlog keys init --at-rest --keyring --passphrase
    """
    from agentlog.cli import atrest_cmds

    atrest_cmds.keys_init(at_rest, use_keyring, passphrase, as_json)


@keys_group.command(name="unlock")
@click.option("--passphrase", is_flag=True, help="Unwrap with the passphrase (asked, or stdin) instead of the keyring.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the key's status.")
def keys_unlock(passphrase: bool, as_json: bool) -> None:
    """Unwrap the data key of encryption at rest until the next reboot (or `keys lock`).

    Without --passphrase the OS keyring is asked. While the key is locked, hooks record
    events without their content, and reads of content fail.

    Example: agentlog keys unlock --passphrase
    """
    from agentlog.cli import atrest_cmds

    atrest_cmds.keys_unlock(passphrase, as_json)


@keys_group.command(name="lock")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the key's status.")
def keys_lock(as_json: bool) -> None:
    """Forget the unlocked data key (it stays wrapped; `keys unlock` brings it back).

    Example: agentlog keys lock
    """
    from agentlog.cli import atrest_cmds

    atrest_cmds.keys_lock(as_json)


@keys_group.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: at_rest, key_id, unlocked, wraps.")
def keys_status(as_json: bool) -> None:
    """Whether encryption at rest is on, and whether its key is unlocked.

    Example: agentlog keys status --json
    """
    from agentlog.cli import atrest_cmds

    atrest_cmds.keys_status(as_json)


@click.group(name="witness")
def witness_group() -> None:
    """The witnesses whose cosignatures `agentlog verify` trusts (C2SP tlog-cosignature keys).

    Example: agentlog witness add alice alice.pub
    """


@witness_group.command(name="add")
@click.argument("name")
@click.argument("key", metavar="PUBKEY|FILE")
@click.option("--replace", is_flag=True, help="Replace the key of a witness registered under NAME.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def witness_add(name: str, key: str, replace: bool, as_json: bool) -> None:
    """Register witness NAME by its verifier key (`<name>+<id>+<base64>`, or a file holding it).

    Example: agentlog witness add alice alice+8f1c2a3b+BL0x…
    """
    from agentlog.operations.witness import add

    w = add(data_root(), name, key, replace=replace)
    if as_json:
        print_json(w.to_dict())
    else:
        stderr().print(terminal_safe(f"witness {w.name} registered: {w.key}"), markup=False)


@witness_group.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def witness_list(as_json: bool) -> None:
    """List the registered witnesses and their keys.

    Example: agentlog witness list --json
    """
    from agentlog.operations.witness import listed

    rows = [w.to_dict() for w in listed(data_root())]
    if as_json:
        print_json(rows)
    elif rows:
        print_table(rows, ["name", "key"])
    else:
        stderr().print("no witness registered: agentlog witness add NAME PUBKEY")


@witness_group.command(name="remove")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the witness removed.")
def witness_remove(name: str, as_json: bool) -> None:
    """Unregister witness NAME: its cosignatures no longer count in `agentlog verify`.

    Example: agentlog witness remove alice
    """
    from agentlog.operations.witness import remove

    w = remove(data_root(), name)
    if as_json:
        print_json(w.to_dict())
    else:
        stderr().print(terminal_safe(f"witness {w.name} removed"), markup=False)


@witness_group.command(name="keygen")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the name and verifier key.")
def witness_keygen(name: str, file: str, as_json: bool) -> None:
    """Make a witness key: the private key into a new FILE (0600), the verifier key printed.

    Run it where the witness lives (another machine, another person); the
    printed key is what `agentlog witness add` registers.

    Example: agentlog witness keygen alice ~/.config/alice-witness.key
    """
    from agentlog.operations.witness import keygen

    w = keygen(file, name)
    if as_json:
        print_json(w.to_dict())
    else:
        click.echo(w.key)
        stderr().print(terminal_safe(f"private key written to {file} (keep it there; never share it)"), markup=False)
