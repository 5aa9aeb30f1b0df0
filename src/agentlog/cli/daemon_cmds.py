"""``agentlog daemon``."""

from __future__ import annotations

import click

from ..paths import data_root
from .output import print_json, stderr


@click.group(name="daemon")
def daemon() -> None:
    """Run the background ingester (ingests within about a second of a hook, compacts hourly)."""


@daemon.command(name="run")
@click.option("--interval", type=click.FloatRange(0.05, 60), default=0.5, show_default=True, help="Seconds between polls of the logs.")
@click.option("--compact-every", type=click.FloatRange(1, None), default=3600.0, show_default=True, help="Seconds between compactions.")
def daemon_run(interval: float, compact_every: float) -> None:
    """Run in the foreground until SIGTERM or Ctrl-C (then one last ingest)."""
    from ..store.daemon import DaemonRunning, run

    try:
        run(data_root(), interval=interval, compact_every=compact_every)
    except DaemonRunning as e:
        raise click.ClickException(str(e)) from e


@daemon.command(name="start")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_start(as_json: bool) -> None:
    """Start the daemon in the background (refuses if one is running)."""
    from ..store.daemon import DaemonRunning, start

    try:
        st = start(data_root())
    except DaemonRunning as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        print_json(st.to_dict())
    else:
        stderr().print(f"daemon running, pid {st.pid}; log: {st.log_file}")


@daemon.command(name="stop")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_stop(as_json: bool) -> None:
    """Stop the daemon (it ingests once more before exiting)."""
    from ..store.daemon import stop

    st = stop(data_root())
    if as_json:
        print_json(st.to_dict())
    else:
        stderr().print("daemon stopped" if not st.running else f"daemon still running (pid {st.pid})")


@daemon.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_status(as_json: bool) -> None:
    """Show whether the daemon is running (exit 1 if not)."""
    from ..store.daemon import state

    st = state(data_root())
    if as_json:
        print_json(st.to_dict())
    else:
        click.echo(f"running, pid {st.pid}" if st.running else "not running")
    if not st.running:
        raise click.exceptions.Exit(1)
