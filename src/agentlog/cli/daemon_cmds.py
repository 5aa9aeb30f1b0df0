"""``agentlog daemon``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, stderr

if TYPE_CHECKING:
    from agentlog.operations.login_service import ServiceResult


@click.group(name="daemon")
def daemon() -> None:
    """Run the background ingester (ingests within about a second of a hook, compacts hourly).

    When this data root is enrolled with a vault, it also runs `agentlog ship`
    every `ship_minutes` (setting; 0: never), in a child process at the lowest
    priority. `daemon install` makes it a login service (systemd --user / launchd).
    """


@daemon.command(name="run")
@click.option("--interval", type=click.FloatRange(0.05, 60), default=0.5, show_default=True, help="Seconds between polls of the logs.")
@click.option("--compact-every", type=click.FloatRange(1, None), default=3600.0, show_default=True, help="Seconds between compactions.")
def daemon_run(interval: float, compact_every: float) -> None:
    """Run in the foreground until SIGTERM or Ctrl-C (then one last ingest)."""
    from agentlog.operations.daemon import DaemonRunning, run

    try:
        run(data_root(), interval=interval, compact_every=compact_every)
    except DaemonRunning as e:
        raise click.ClickException(str(e)) from e


@daemon.command(name="start")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_start(as_json: bool) -> None:
    """Start the daemon in the background (refuses if one is running)."""
    from agentlog.operations.daemon import DaemonRunning, start

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
    from agentlog.operations.daemon import stop

    st = stop(data_root())
    if as_json:
        print_json(st.to_dict())
    else:
        stderr().print("daemon stopped" if not st.running else f"daemon still running (pid {st.pid})")


@daemon.command(name="status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_status(as_json: bool) -> None:
    """Show whether the daemon is running (exit 1 if not)."""
    from agentlog.operations.daemon import state

    st = state(data_root())
    if as_json:
        print_json(st.to_dict())
    else:
        click.echo(f"running, pid {st.pid}" if st.running else "not running")
    if not st.running:
        raise click.exceptions.Exit(1)


# Hidden: lets tests (and the curious) render the other platform's file.
_platform_option = click.option(
    "--platform",
    type=click.Choice(["linux", "darwin"]),
    default=None,
    hidden=True,
    envvar="AGENTLOG_SERVICE_PLATFORM",
    help="Act as on this platform instead of the current one.",
)


def _report(result: ServiceResult, as_json: bool) -> None:
    if as_json:
        print_json(result.to_dict())
    else:
        for line in _describe(result):
            click.echo(line, err=True)
    if not result.ok:
        raise click.exceptions.Exit(1)


def _describe(result: ServiceResult) -> list[str]:
    kind = "launchd agent" if result.platform == "darwin" else "systemd user unit"
    done = {
        "installed": f"installed the {kind} {result.path}",
        "replaced": f"replaced the {kind} {result.path}",
        "unchanged": f"the {kind} {result.path} is already current",
        "removed": f"removed the {kind} {result.path}",
        "not_installed": f"nothing to remove: no {kind} at {result.path}",
    }[result.outcome]
    lines = [done]
    steps = [f"  {step}" for step in result.next_steps]
    if result.action == "install":
        if result.service_manager == "applied":
            lines.append("enabled and started: the daemon now runs at login and is restarted if it fails")
        elif result.service_manager == "unreachable":
            lines += [f"warning: written but NOT activated: {result.detail}", "to activate it, run:", *steps]
        elif result.service_manager == "failed":
            lines += [f"error: written but activation failed: {result.detail}", "to retry, run:", *steps]
    elif result.outcome == "removed":
        if result.service_manager == "applied":
            lines.append("the service was stopped and disabled")
        elif result.service_manager == "unreachable":
            lines += [f"warning: the service manager was not told: {result.detail}", "if the service is still loaded, run:", *steps]
        elif result.service_manager == "failed":
            lines += [f"error: stopping the service failed: {result.detail}", "to retry, run:", *steps]
    return lines


@daemon.command(name="install")
@click.option("--force", is_flag=True, help="Replace a service file that differs from ours or that agentlog did not write.")
@_platform_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_install(force: bool, platform: str | None, as_json: bool) -> None:
    """Run the daemon at login, restarted if it fails (systemd --user unit or launchd agent).

    Writes the service file for this interpreter and data root, then enables
    and starts it. Where no service manager is reachable (containers, CI) the
    file is still written and the commands to activate it are printed.
    Exit 1 when a file is in the way (see --force) or activation failed.
    """
    from agentlog.operations.login_service import ServiceError, current_platform, install

    try:
        result = install(None if platform is None else current_platform(platform), force=force)
    except ServiceError as e:
        raise click.ClickException(str(e)) from e
    _report(result, as_json)


@daemon.command(name="uninstall")
@click.option("--force", is_flag=True, help="Remove the service file even if agentlog did not write it.")
@_platform_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_uninstall(force: bool, platform: str | None, as_json: bool) -> None:
    """Stop and disable the login service and remove its file (a no-op if none).

    Exit 1 when the file there was not written by agentlog (see --force) or
    stopping the service failed.
    """
    from agentlog.operations.login_service import ServiceError, current_platform, uninstall

    try:
        result = uninstall(None if platform is None else current_platform(platform), force=force)
    except ServiceError as e:
        raise click.ClickException(str(e)) from e
    _report(result, as_json)
