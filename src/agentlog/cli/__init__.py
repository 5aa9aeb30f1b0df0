"""The ``agentlog`` command line: parse, call the library, print.

Data goes to stdout, diagnostics and progress to stderr; ``--json`` prints
only JSON. Exit codes: 0 ok, 1 an expected failure (e.g. verify found a
break), 2 usage error.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from agentlog import __version__
from agentlog.core.paths import all_paths, data_root
from agentlog.cli.output import print_json, print_table, terminal_safe

CONTEXT = {"help_option_names": ["-h", "--help"]}


class _Failed(click.ClickException):
    """An expected failure from the library, as click prints it: exit 1."""

    exit_code = 1


class _Refused(click.ClickException):
    """A usage error from the library, as click prints it (one line, no usage text): exit 2."""

    exit_code = 2


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when used.

    Starting the CLI must stay cheap: `agentlog verify` should not pay for
    importing the installer, the demo and the benchmarks.
    """

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attr = self.lazy[cmd_name].partition(":")
            cmd = getattr(importlib.import_module(module, __name__), attr)
            self.add_command(cmd, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        """An unknown command says which known one it is probably (``agentlog sesions``)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            name = args[0] if args else ""
            if name and not name.startswith("-") and self.get_command(ctx, name) is None:
                import difflib

                close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
                if close:
                    raise click.UsageError(f"no command {name!r}; did you mean {' or '.join(close)}?", ctx) from None
            raise e

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Arguments are UTF-8 text. Python hands bytes that are not UTF-8 on in lone surrogates, which no
        database, JSON or terminal takes: such an argument is refused here (exit 2), unless it names a file
        that is there (a file's name need not be UTF-8). The hook takes what its agent passes, always."""
        for arg in args if args[:1] != ["hook"] else []:
            if not _is_utf8(arg) and not os.path.lexists(arg):
                shown = repr(arg.encode("utf-8", "surrogateescape"))[1:]
                raise click.UsageError(f"the argument {terminal_safe(shown)} is not UTF-8 text", ctx)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; an :class:`~agentlog.core.AgentlogError` that escapes it
        ends the process with one line on stderr (``Error: <message>``) and the exit code
        the error carries — the one place the library's errors become exit codes."""
        from agentlog.core import AgentlogError

        try:
            return super().invoke(ctx)
        except AgentlogError as e:
            raise (_Refused if e.exit_code == 2 else _Failed)(terminal_safe(str(e))) from None
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:  # the reader went away (`agentlog sessions | head`): stop quietly
            _silence_stdout()
            raise click.exceptions.Exit(0) from None
        except OSError as e:  # the data root or a file it names: unusable (a file, unreadable, full, read-only)
            if os.environ.get("AGENTLOG_DEBUG") == "1":
                raise
            raise _Failed(terminal_safe(os_error_line(e))) from None
        except Exception as e:  # never a traceback: one line, and how to get the traceback
            if os.environ.get("AGENTLOG_DEBUG") == "1":
                raise
            raise _Failed(terminal_safe(f"internal error ({type(e).__name__}: {e}); "
                                        "run it again with AGENTLOG_DEBUG=1 to see where")) from None
        except BaseException as e:  # a Rust library's panic (pyo3's PanicException) is not an Exception
            if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)) or os.environ.get("AGENTLOG_DEBUG") == "1":
                raise
            raise _Failed(terminal_safe(f"internal error in a native library ({type(e).__name__}: {e}); "
                                        "run it again with AGENTLOG_DEBUG=1 to see where")) from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _is_utf8(arg: str) -> bool:
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def os_error_line(e: OSError) -> str:
    """One line for an OS error: what failed, on which path, and what to check when the
    path is under the data root."""
    what = e.strerror or type(e).__name__
    where = f": {e.filename}" if e.filename else ""
    line = f"{what}{where}"
    root = data_root()
    if os.path.exists(root) and not os.path.isdir(root):
        return f"the data root {root} is a file, not a directory: set AGENTLOG_HOME to a directory ({what}{where})"
    if e.filename and str(e.filename).startswith(root):
        line += (f" (the data root is {root}; set AGENTLOG_HOME to a writable directory, or fix that one: "
                 "agentlog paths lists what it holds)")
    return line


LAZY_COMMANDS = {
    "verify": ".verify_cmd:verify_cmd",
    "demo": ".demo_cmd:demo_cmd",
    "bench": "agentlog.bench.cli:bench",
    "config": ".config_cmds:config",
    "install": ".install_cmds:install_cmd",
    "uninstall": ".install_cmds:uninstall_cmd",
    "doctor": ".install_cmds:doctor_cmd",
    "ingest": ".ingest_cmd:ingest_cmd",
    "status": ".status_cmd:status_cmd",
    "rebuild": ".rebuild_cmd:rebuild_cmd",
    "compact": ".compact_cmd:compact_cmd",
    "daemon": ".daemon_cmds:daemon",
    "seal": ".seal_cmd:seal_cmd",
    "purge": ".purge_cmd:purge_cmd",
    "sql": ".sql_cmd:sql_cmd",
    "schema": ".sql_cmd:schema_cmd",
    "query": ".query_cmds:query_cmd",
    "trace": ".query_cmds:trace_cmd",
    "why": ".query_cmds:why_cmd",
    "state": ".query_cmds:state_cmd",
    "timeline": ".people_cmds:timeline_cmd",
    "failures": ".people_cmds:failures_cmd",
    "sessions": ".people_cmds:sessions_cmd",
    "show": ".people_cmds:show_cmd",
    "correct": ".meta_cmds:correct_cmd",
    "retract": ".meta_cmds:retract_cmd",
    "project": ".project_cmd:project_cmd",
    "import": ".import_cmd:import_cmd",
    "usage": ".usage_cmd:usage_cmd",
    "memory": ".memory_cmds:memory",
    "serve": ".serve_cmd:serve_cmd",
    "search": ".search_cmd:search_cmd",
    "mcp": ".mcp_cmd:mcp_cmd",
    "checkpoint": ".checkpoint_cmd:checkpoint_cmd",
    "keys": ".keys_cmds:keys_group",
    "witness": ".keys_cmds:witness_group",
    "prove": ".prove_cmd:prove_cmd",
    "verify-proof": ".prove_cmd:verify_proof_cmd",
    "share": ".share_cmd:share_cmd",
    "snapshot": ".snapshot_cmds:snapshot",
    "vault": ".vault_cmds:vault",
    "enroll": ".ship_cmds:enroll_cmd",
    "ship": ".ship_cmds:ship_cmd",
    "team": ".team_cmds:team",
    "run": ".sandbox_cmds:run_cmd",
    "exec": ".sandbox_cmds:exec_cmd",
    "allow": ".sandbox_cmds:allow_cmd",
    "deny": ".sandbox_cmds:deny_cmd",
    "otel": ".otel_cmds:otel",
}


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS, context_settings=CONTEXT)
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
    from agentlog.capture.hook import main as hook_main

    hook_main([agent, *extra])


__all__ = ["cli", "LazyGroup"]
