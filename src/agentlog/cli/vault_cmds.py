"""``agentlog vault``: the vault server (``serve``); the admin commands join this group."""

from __future__ import annotations


import click

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@click.group(name="vault")
def vault() -> None:
    """The vault: a server that keeps machines' sessions end-to-end encrypted (issue 30).

    Machines ship ciphertext and a readable index; the vault checks the chain's
    linkage and never holds a key that opens a session (docs/vault.md).

    Example: agentlog vault serve --data /srv/agentlog-vault --port 8790
    """


@vault.command(name="serve")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for the vault's database and blobs (created 0700).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback needs --ssl-certfile and --ssl-keyfile.")
@click.option("--port", type=click.IntRange(0, 65535), default=8790, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--ssl-certfile", type=click.Path(dir_okay=False, exists=True), help="TLS certificate (PEM).")
@click.option("--ssl-keyfile", type=click.Path(dir_okay=False, exists=True), help="TLS private key (PEM).")
def serve_vault(data_dir: str, host: str, port: int, ssl_certfile: str | None, ssl_keyfile: str | None) -> None:
    """Run the vault until interrupted; its URL goes to stdout.

    Plain http is for loopback only: a non-loopback --host needs both TLS
    files (or put it behind a TLS proxy that talks to it on loopback). On the
    first start, while the vault has no admin, a single-use bootstrap token
    is printed on stderr (`agentlog vault admin init` takes it); only its
    hash is stored.

    Example: agentlog vault serve --data ~/vault --host 0.0.0.0 --port 443 --ssl-certfile cert.pem --ssl-keyfile key.pem
    """
    import logging
    import time

    import uvicorn

    from agentlog.cli.output import stderr
    from agentlog.cli.serve_cmd import listening_socket
    from agentlog.vault.server import create_app, ensure_bootstrap_token
    from agentlog.vault.storage import Storage

    if bool(ssl_certfile) != bool(ssl_keyfile):
        raise click.UsageError("--ssl-certfile and --ssl-keyfile go together")
    tls = bool(ssl_certfile)
    if host not in LOOPBACK and not tls:
        raise click.UsageError(f"{host} is not a loopback address: plain http only on loopback; "
                               "pass --ssl-certfile and --ssl-keyfile (or serve behind a TLS proxy)")
    storage = Storage(data_dir)
    swept = storage.sweep_orphans()
    sock = listening_socket(host, port)
    port = sock.getsockname()[1]
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    err = stderr()
    if swept:
        err.print(f"removed {swept} blobs no batch refers to (left by an interrupted write)", style="dim")
    token = ensure_bootstrap_token(storage, int(time.time()))
    if token is not None:
        err.print("the vault has no admin yet; bootstrap token (single use, shown once):", markup=False)
        click.echo(f"bootstrap-token: {token}", err=True)
    url_host = f"[{host}]" if ":" in host else host
    url = f"{'https' if tls else 'http'}://{url_host}:{port}"
    config = uvicorn.Config(create_app(storage), log_level="warning", access_log=False, server_header=False,
                            ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, timeout_graceful_shutdown=5)
    err.print(f"agentlog vault on {url} (data {data_dir})", markup=False, highlight=False)
    click.echo(url)  # stdout: the address, for scripts
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        storage.close()


def _add_admin_group() -> None:
    """`vault admin ...` (cli/vault_admin_cmds.py, the vault client's side)."""
    from agentlog.cli.vault_admin_cmds import admin_group

    vault.add_command(admin_group)


_add_admin_group()
