"""``agentlog vault admin ...``: the admin side of the vault (docs/vault.md)."""

from __future__ import annotations

import sys
from typing import Any

import click

from agentlog.cli.output import print_json, print_table, stderr

_CA = click.option("--ca", "ca", metavar="FILE", type=click.Path(dir_okay=False, exists=True), default=None,
                   help="Trust only this CA (PEM) for the vault's TLS certificate (kept in the admin directory).")
_DIR = click.option("--dir", "admin_dir", metavar="DIR", default=None,
                    help="The admin directory (default <data root>/vault-admin/).")


def _progress(line: str) -> None:
    stderr().print(line, markup=False, highlight=False)


def _listing(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(rows)
    else:
        print_table(rows, list(dict.fromkeys(k for r in rows for k in r)) or ["machine_id"])


@click.group(name="admin")
def admin_group() -> None:
    """Administer a vault: admins, enrolment tokens, listings, pull.

    Example: agentlog vault admin chains --json
    """


@admin_group.command(name="init")
@click.argument("url")
@click.argument("bootstrap_token")
@_DIR
@_CA
def admin_init(url: str, bootstrap_token: str, admin_dir: str | None, ca: str | None) -> None:
    """Become the first admin of a new vault (key kept 0600 in the admin directory).

    BOOTSTRAP_TOKEN is what `agentlog vault serve` printed when it started
    without an admin. Prints this admin's public key (give it to other admins
    for `vault admin add`) and fingerprint.

    Example: agentlog vault admin init https://vault.example.com 8PzK...
    """
    from agentlog.vault.admin import init
    from agentlog.vault.protocol import b64e

    a = init(url, bootstrap_token, admin_dir, ca)
    click.echo(f"admin {a.fingerprint}\npublic key {b64e(a.key.public)}")


@admin_group.command(name="pubkey")
@_DIR
def admin_pubkey(admin_dir: str | None) -> None:
    """Print this admin's public key (what another admin passes to `vault admin add`).

    Example: agentlog vault admin pubkey
    """
    from agentlog.vault.admin import load
    from agentlog.vault.protocol import b64e

    click.echo(b64e(load(admin_dir).key.public))


@admin_group.command(name="keygen")
@_DIR
@_CA
@click.argument("url")
def admin_keygen(admin_dir: str | None, ca: str | None, url: str) -> None:
    """Make an admin key for a vault that already has admins; prints the public key
    to hand to an existing admin (`vault admin add`).

    Example: agentlog vault admin keygen https://vault.example.com --dir ~/vault-admin-2
    """
    from agentlog.vault.admin import keygen
    from agentlog.vault.protocol import b64e

    a = keygen(url, admin_dir, ca)
    click.echo(f"admin {a.fingerprint}\npublic key {b64e(a.key.public)}")


@admin_group.command(name="token")
@_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the token and its expiry as JSON.")
def admin_token(admin_dir: str | None, as_json: bool) -> None:
    """Create a single-use enrolment token (valid one hour) for `agentlog enroll`.

    Example: agentlog vault admin token
    """
    from agentlog.vault.admin import load, new_token

    d = new_token(load(admin_dir))
    if as_json:
        print_json(d)
    else:
        click.echo(d["token"])


@admin_group.command(name="add")
@click.argument("pubkey")
@_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def admin_add(pubkey: str, admin_dir: str | None, as_json: bool) -> None:
    """Add an admin (its base64 public key) and re-wrap every chain key for it.

    Example: agentlog vault admin add 'q0l7...Zw=='
    """
    from agentlog.vault.admin import add, load, parse_public

    d = add(load(admin_dir), parse_public(pubkey), None if as_json else _progress)
    if as_json:
        print_json(d)
    else:
        click.echo(f"added {d['added']} (recipient set version {d['version']}); {d['rewrapped']} chain keys re-wrapped")


@admin_group.command(name="remove")
@click.argument("fingerprint")
@_DIR
def admin_remove(fingerprint: str, admin_dir: str | None) -> None:
    """Remove an admin: a new recipient set without it; the vault deletes its wraps.

    Chains machines start after this are not wrapped for it, and chains it
    could read get a new key at their next batch (as with `vault admin rekey`):
    it keeps only what was shipped before.

    Example: agentlog vault admin remove 5e1c...9a
    """
    from agentlog.vault.admin import load, remove

    d = remove(load(admin_dir), fingerprint)
    click.echo(f"removed {d['removed']} (recipient set version {d['version']})")


@admin_group.command(name="rekey")
@_DIR
def admin_rekey(admin_dir: str | None) -> None:
    """New chain keys for every chain machines still ship to.

    Signs the same admins again as a new recipient-set version. Each machine
    that pins it starts a new key (wrapped for the current admins only) on a
    chain at that chain's next batch; what was shipped before keeps its key.
    `vault admin remove` does the same by itself.

    Example: agentlog vault admin rekey
    """
    from agentlog.vault.admin import load, rekey

    d = rekey(load(admin_dir))
    click.echo(f"recipient set version {d['version']} ({d['admins']} admins): machines start new chain keys "
               "at each chain's next batch")


@admin_group.command(name="machines")
@_DIR
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def admin_machines(admin_dir: str | None, as_json: bool) -> None:
    """List the enrolled machines.

    Example: agentlog vault admin machines --json
    """
    from agentlog.vault.admin import load, machines

    _listing(machines(load(admin_dir)), as_json)


@admin_group.command(name="chains")
@_DIR
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def admin_chains(admin_dir: str | None, as_json: bool) -> None:
    """List the chains the vault holds (machine, chain, head seq, bytes, last receipt).

    Example: agentlog vault admin chains --json
    """
    from agentlog.vault.admin import chains, load

    _listing(chains(load(admin_dir)), as_json)


@admin_group.command(name="pull")
@click.option("--into", "into", metavar="DIR", required=True, help="The data root to decrypt into (not your own).")
@_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def admin_pull(into: str, admin_dir: str | None, as_json: bool) -> None:
    """Decrypt every chain this admin can read into DIR, checking every frame.

    DIR becomes a data root of its own: `AGENTLOG_HOME=DIR agentlog timeline`
    (or search, sql, serve) works over the pulled sessions;
    DIR/vault-pull/chains.jsonl names each log's machine and host, and
    report.jsonl every problem found. Exit 1 when a batch does not open or a
    frame does not match its index (tampering on the vault), naming chain and seq.

    Example: agentlog vault admin pull --into ~/team-sessions
    """
    from agentlog.vault.admin import load
    from agentlog.vault.pull import check_into, pull

    check_into(into)
    res = pull(load(admin_dir), into, None if as_json else _progress)
    if as_json:
        print_json(res.to_dict())
    else:
        for p in res.problems:
            click.echo(("FAILED " if p.fatal else "note ") + p.line(), err=True)
        click.echo(f"{res.chains} chains, {res.frames} new frames ({res.bytes} bytes) into {res.into}"
                   + (f"; {res.unreadable} chains without a key for this admin" if res.unreadable else ""))
    if res.failed:
        sys.exit(1)


@admin_group.command(name="publish")
@click.option("--into", "into", metavar="DIR", required=True, help="The pulled data root (pulled into first).")
@click.option("--to", "url", default=None, metavar="URL",
              help="The team's tables: s3://bucket/prefix or file:///path (default: the team_url setting).")
@click.option("--metadata-only", is_flag=True, help="Publish no content (see `agentlog team publish`).")
@_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def admin_publish(into: str, url: str | None, metadata_only: bool, admin_dir: str | None, as_json: bool) -> None:
    """Pull every chain this admin can read into DIR, then publish what was pulled to the
    team's tables, each row under the machine that recorded it — so a team can keep
    content end to end encrypted on the vault and still query (with --metadata-only)
    who ran what, where and how it went.

    Example: agentlog vault admin publish --into ~/team-sessions --to s3://acme/team --metadata-only
    """
    import os

    from agentlog.cli.team_cmds import team_url
    from agentlog.log.pulled import MACHINES, PULL_DIR
    from agentlog.team.publish import publish
    from agentlog.vault.admin import load
    from agentlog.vault.pull import check_into, pull

    check_into(into)
    target = team_url(url)
    res = pull(load(admin_dir), into, None if as_json else _progress)
    second = os.path.join(os.path.abspath(into), PULL_DIR, MACHINES)
    roots = [os.path.abspath(into)] + sorted(os.path.join(second, d) for d in
                                               (os.listdir(second) if os.path.isdir(second) else []))
    published = [publish(r, target, metadata_only=metadata_only).to_dict() for r in roots]
    if as_json:
        print_json({"pull": res.to_dict(), "published": published})
    else:
        for p in res.problems:
            click.echo(("FAILED " if p.fatal else "note ") + p.line(), err=True)
        events = sum(int(p["events"]) for p in published)
        click.echo(f"pulled {res.frames} new frames from {res.chains} chains; published {events} events from "
                   f"{len(roots)} data root{'s' if len(roots) != 1 else ''} to {published[0]['url']}")
    if res.failed:
        sys.exit(1)
