"""``agentlog serve``: the web dashboard."""

from __future__ import annotations

import click

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket

from agentlog.core.paths import data_root
from agentlog.cli.output import stderr


@click.command(name="serve")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback unless --allow-remote).")
@click.option("--allow-remote", is_flag=True, help="Allow a non-loopback --host (the one-time token is still required).")
@click.option("--open", "open_browser", is_flag=True, help="Open the dashboard in a browser.")
@click.option("--no-live", is_flag=True, help="Do not watch for changes (no live updates, no ingest by the server).")
def serve_cmd(port: int, host: str, allow_remote: bool, open_browser: bool, no_live: bool) -> None:
    """Serve the dashboard: Now, Timeline, sessions, attempts, Failures, Search, Memory and
    its proposals (approve / reject / undo), SQL, Usage, Integrity — live over SSE.

    Loopback only by default. The address printed carries a one-time token,
    exchanged for a session cookie on first use; every change needs the
    page's CSRF token; requests naming another Host are refused.
    """
    from agentlog.web.security import is_loopback

    if not is_loopback(host) and not allow_remote:
        raise click.UsageError(f"{host} is not a loopback address: pass --allow-remote to bind it "
                               "(anyone who can reach it still needs the token)")
    run_dashboard(data_root(), host=host, port=port, allow_remote=allow_remote, open_browser=open_browser,
                  live=not no_live)


def run_dashboard(root: str, *, host: str = "127.0.0.1", port: int = 8765, allow_remote: bool = False,
                  open_browser: bool = False, live: bool = True) -> None:
    """Serve the dashboard over ``root`` until interrupted; the address goes to stdout."""
    import uvicorn

    from agentlog.web.app import create_app, warm
    from agentlog.web.security import Guard

    sock = listening_socket(host, port)
    port = sock.getsockname()[1]
    guard = Guard(port=port, bind_host=host, allow_remote=allow_remote)
    app = create_app(root, guard, live=live)
    warm(app.state.web)  # ready means warm: the first page pays for no catch-up, engine or template
    # a browser holds the live stream open: without a bound, a graceful shutdown waits for it forever
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, server_header=False,
                                           timeout_graceful_shutdown=3))
    url = guard.url()
    err = stderr()
    err.print(f"agentlog dashboard on {url}", markup=False, highlight=False)
    err.print("the token works once: the browser that opens it keeps a session cookie", style="dim")
    click.echo(url)  # stdout: the address, for scripts
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    server.run(sockets=[sock])


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening (port 0: any free one), made before
    the address is printed so that a client that opens it at once is queued, not refused.

    Made with ``IPPROTO_TCP`` and ``TCP_NODELAY``: uvicorn (h11) writes an answer's head
    and body in two writes, and asyncio turns Nagle off on an accepted socket only when
    the listener's ``proto`` says TCP (``socket(AF_INET, SOCK_STREAM)`` says 0). Without
    it the body waited for the client's delayed ACK of the head: 44 ms on every request
    after the first on a kept-alive connection (measured on the dashboard and the vault,
    0.9 ms with it)."""
    import socket

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise click.ClickException(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.listen(128)
    return sock
