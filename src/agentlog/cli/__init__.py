"""The ``agentlog`` command line: parse, call the library, print.

Data goes to stdout, diagnostics and progress to stderr; ``--json`` prints
only JSON. Exit codes: 0 ok, 1 an expected failure (e.g. verify found a
break), 2 usage error.
"""

from __future__ import annotations

import os

import click

from .. import __version__
from ..paths import all_paths, data_root
from .output import print_json, print_table

CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="agentlog")
def cli() -> None:
    """agentlog: a tamper-evident flight recorder for AI coding agents.

    Hooks record every prompt, tool call and result into hash-chained,
    append-only session logs under the data root (`agentlog paths`).
    """


@cli.command(name="paths")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def paths_cmd(as_json: bool) -> None:
    """Show where agentlog keeps its data, config and logs."""
    paths = all_paths(data_root())
    if as_json:
        print_json(paths)
        return
    print_table([{"what": k, "path": v, "exists": "yes" if os.path.exists(v) else "no"} for k, v in paths.items()], ["what", "path", "exists"])


@cli.command(name="hook", context_settings={"ignore_unknown_options": True})
@click.argument("agent", type=click.Choice(["claude-code", "codex", "cursor", "gemini-cli"]))
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def hook_cmd(agent: str, extra: tuple[str, ...]) -> None:
    """Record one hook payload read from stdin (what agents' hook configs run).

    Always exits 0 and prints nothing on stdout beyond what the agent's
    protocol requires. The console script dispatches `agentlog hook` before
    loading this CLI, so the hook path imports only the standard library;
    this command exists for help text and for `python -m agentlog.cli`.
    """
    from ..capture.hook import main as hook_main

    hook_main([agent, *extra])


def _register() -> None:
    from .verify_cmd import verify_cmd
    from .demo_cmd import demo_cmd
    from .bench_cmds import bench
    from .config_cmds import config

    cli.add_command(verify_cmd)
    cli.add_command(demo_cmd)
    cli.add_command(bench)
    cli.add_command(config)
    try:
        from .install_cmds import doctor_cmd, install_cmd, uninstall_cmd
    except ImportError:  # pragma: no cover - during development only
        return
    cli.add_command(install_cmd)
    cli.add_command(uninstall_cmd)
    cli.add_command(doctor_cmd)


_register()

__all__ = ["cli"]
