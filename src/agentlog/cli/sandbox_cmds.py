"""``agentlog run`` / ``exec`` / ``allow`` / ``deny``: the agent under a Landlock policy (docs/sandbox.md)."""

from __future__ import annotations

import sys

import click

NET_HELP = ("TCP the run may use: https = connect to port 443 (and --port ports); loopback = only the --port "
            "ports; none = no TCP connect or bind; all = unfiltered. Landlock matches ports, not addresses; "
            "UDP is never filtered.")


@click.command(name="run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--allow", "allow", multiple=True, type=click.Path(file_okay=False, exists=True),
              help="A further directory the agent and its commands may write (repeatable).")
@click.option("--net", type=click.Choice(["https", "loopback", "none", "all"]), default="https", show_default=True,
              help=NET_HELP)
@click.option("--port", "ports", multiple=True, type=click.IntRange(1, 65535),
              help="A further TCP port commands may connect to (repeatable).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None, help="Kill the agent after this many seconds.")
@click.option("--list", "list_runs", is_flag=True, help="List the live runs, their policies and grants, and exit.")
@click.option("--json", "as_json", is_flag=True, help="With --list: JSON.")
@click.argument("agent", nargs=-1, type=click.UNPROCESSED)
def run_cmd(allow: tuple[str, ...], net: str, ports: tuple[int, ...], timeout: float | None, list_runs: bool,
            as_json: bool, agent: tuple[str, ...]) -> None:
    """Start AGENT (claude, codex, gemini or any program) under agentlog's Linux sandbox.

    The agent and everything it starts run under the floor: read all but ~/.ssh,
    ~/.aws, ~/.gnupg's private keys and agentlog's keys and vault; write the
    project (the current directory), the temp directories and the agent's own
    state; never agentlog's data root or the agents' settings and hook files
    (in the project, .claude, .codex, .gemini and .cursor are read-only). The
    agents' shell commands are rewritten to go through the run's broker, which
    records each one and runs it under the floor plus the grants of `agentlog
    allow`. The run has its own PID namespace: when it ends, or is killed,
    nothing it started is left. Refuses to start when the kernel has no
    Landlock. Exit status: the agent's.

    Example: agentlog run --allow ~/src/shared-lib claude -p "fix the failing test"
    """
    import os

    from agentlog.core.paths import data_root

    root = data_root()
    if list_runs:
        _list(root, as_json)
        return
    if not agent:
        raise click.UsageError("name the agent to start, e.g. `agentlog run claude` (or `agentlog run --list`)")
    from agentlog.sandbox.run import run

    result = run(root, list(agent), project=os.getcwd(), net=net, ports=list(ports), allow=list(allow),
                 timeout=timeout)
    sys.stderr.write(f"agentlog run: run {result.run_id} ended (exit {result.exit_code}); {result.commands} "
                     f"brokered command(s) recorded in session sandbox-{result.run_id}\n")
    sys.exit(result.exit_code if result.exit_code >= 0 else 128 - result.exit_code)


def _list(root: str, as_json: bool) -> None:
    from agentlog.cli.output import print_json, print_table
    from agentlog.sandbox.runs import live_runs

    rows = [r.to_json() for r in live_runs(root)]
    if as_json:
        print_json(rows)
        return
    if not rows:
        click.echo("no live agentlog run")
        return
    print_table([{"run": r["run"], "agent": " ".join(r["agent"])[:40], "project": r["project"], "net": r["net"],
                  "version": r["policy_version"], "grants": ", ".join(r["grants"]) or "-",
                  "denies": ", ".join(r["denies"]) or "-"} for r in rows],
                ["run", "agent", "project", "net", "version", "grants", "denies"], title="agentlog runs")


@click.command(name="exec")
@click.option("-c", "command", required=True, help="The shell command to run through the run's broker.")
def exec_cmd(command: str) -> None:
    """Run COMMAND through the broker of the agentlog run this process is part of.

    The broker runs it under the run's floor plus its current grants, in a process
    group of its own, with this process's stdin, stdout, stderr, cwd and
    environment, and records it. Signals are forwarded; killing this process kills
    the command. The hook of `agentlog run` uses a native client with the same
    protocol. Exit status: the command's; 126 outside a run.

    Example: agentlog exec -c 'make test'
    """
    from agentlog.sandbox.client import run

    sys.exit(run(command))


@click.command(name="allow")
@click.argument("path", type=click.Path())
@click.option("--run", "run_id", default=None,
              help="The run (see `agentlog run --list`); needed when several are live.")
def allow_cmd(path: str, run_id: str | None) -> None:
    """Let a run's commands write under PATH, from the next brokered command.

    The command already running keeps its policy; the agent's own file tools keep
    the floor. Anything under agentlog's data root, the agents' settings files or
    a read-denied directory is refused.

    Example: agentlog allow ~/src/shared-lib --run 4242
    """
    from agentlog.core.paths import data_root
    from agentlog.sandbox.runs import grant

    _run, message = grant(data_root(), path, run_id)
    click.echo(message)


@click.command(name="deny")
@click.argument("path", type=click.Path())
@click.option("--run", "run_id", default=None,
              help="The run (see `agentlog run --list`); needed when several are live.")
def deny_cmd(path: str, run_id: str | None) -> None:
    """Take back a grant, or deny writes under PATH, from the next brokered command.

    Example: agentlog deny ~/src/shared-lib
    """
    from agentlog.core.paths import data_root
    from agentlog.sandbox.runs import revoke

    _run, message = revoke(data_root(), path, run_id)
    click.echo(message)
