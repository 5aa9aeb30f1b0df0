"""``agentlog snapshot create|list|verify|restore`` (docs/share.md, "Snapshots")."""

from __future__ import annotations

import click

from agentlog.cli.output import print_json, print_table


@click.group(name="snapshot")
def snapshot() -> None:
    """Point-in-time snapshots of the logs, checkpoints, keys and memory (never derived data).

    One zstd-compressed tar with a manifest of every file's SHA-256. Restore into an empty data
    root, then `agentlog rebuild` makes the store, projection and memory read model again.

    Example: agentlog snapshot create --out ~/backups/agentlog.tar.zst
    """


@snapshot.command(name="create")
@click.option("--out", "-o", metavar="FILE", help="Write here (default: a new file under <data root>/snapshots).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def snapshot_create(out: str | None, as_json: bool) -> None:
    """Snapshot the data root: its logs (with the memory log and purge records), the tree's origin
    and checkpoints, the keys and config.toml. The file holds the signing key: keep it as safe as
    the data root. Written 0600.

    Example: agentlog snapshot create --out /mnt/backup/agentlog-monday.tar.zst
    """
    from agentlog.core.paths import data_root
    from agentlog.share.snapshot import create

    made = create(data_root(), out)
    if as_json:
        print_json(made.to_dict())
        return
    mb = made.bytes_in / 1e6
    click.echo(f"{made.path}: {made.files} files, {mb:.1f} MB ({made.bytes_out / 1e6:.1f} MB compressed) in "
               f"{made.seconds:.2f} s ({mb / max(made.seconds, 1e-9):.0f} MB/s)")


@snapshot.command(name="list")
@click.option("--dir", "directory", metavar="DIR", help="Look here (default: <data root>/snapshots).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def snapshot_list(directory: str | None, as_json: bool) -> None:
    """List the snapshots in the default place (or DIR), newest first.

    Example: agentlog snapshot list --json
    """
    from agentlog.core.paths import data_root
    from agentlog.share.snapshot import listing, snapshots_dir

    rows = listing(directory or snapshots_dir(data_root()))
    if as_json:
        print_json(rows)
        return
    print_table(rows, ["path", "created_at", "files", "bytes"])


@snapshot.command(name="verify")
@click.argument("path", metavar="FILE")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def snapshot_verify(path: str, as_json: bool) -> None:
    """Check every file of a snapshot against its manifest. Exit 1 naming the first file that
    fails (changed, missing, or not listed).

    Example: agentlog snapshot verify ~/backups/agentlog.tar.zst
    """
    from agentlog.share.snapshot import verify

    got = verify(path)
    if as_json:
        print_json(got)
    else:
        click.echo(f"ok: {got['files']} files, {got['bytes']:,} bytes, each matches the manifest")


@snapshot.command(name="restore")
@click.argument("path", metavar="FILE")
@click.option("--into", "into", metavar="DIR", help="The empty data root to restore into (default: the data root).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def snapshot_restore(path: str, into: str | None, as_json: bool) -> None:
    """Restore a snapshot into an empty data root, after checking every file; then run
    `agentlog rebuild` there. A snapshot that fails its manifest is refused, naming the file.

    Example: AGENTLOG_HOME=~/restored agentlog snapshot restore ~/backups/agentlog.tar.zst && AGENTLOG_HOME=~/restored agentlog rebuild
    """
    from agentlog.core.paths import data_root
    from agentlog.share.snapshot import restore

    got = restore(path, into or data_root())
    if as_json:
        print_json(got)
    else:
        click.echo(f"restored {got['files']} files into {got['root']}; run `agentlog rebuild` there")
