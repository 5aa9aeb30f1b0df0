"""`agentlog install`, `agentlog uninstall` and `agentlog doctor`.

Human output is a table on stdout; ``--json`` prints exactly one JSON array
(one object per agent) on stdout and nothing else. Diagnostics go to stderr.
Exit codes: 0 ok, 1 when an agent failed (or, for install, its capture test
failed, or the plan was declined or could not be asked: not a terminal and no
--yes; for doctor, an agent's hooks are stale), 2 usage errors.

``install`` changes other programs' configs, so it first shows what it will
change per agent and asks on a terminal; ``--yes`` answers for scripts.
Without a terminal and without ``--yes`` it prints the plan and changes
nothing. The native hook client is built (into agentlog's own data root)
before the plan is shown, so the plan names the binary the configs will run.
"""

from __future__ import annotations

import sys

import json
from collections.abc import Sequence
from pathlib import Path

from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agentlog.cli.config_apply import CHANGING_OUTCOMES, apply_configs, approved, echo_json, err
from agentlog.core.paths import data_root
from agentlog.install.agents import AGENT_NAMES, Scope
from agentlog.install.doctor import AgentHealth, CaptureTestResult, capture_test, diagnose
from agentlog.install.errors import InstallError
from agentlog.install.hook_client import HookChoice, choose_hook
from agentlog.install.installer import InstallResult, install, uninstall

_TESTED_OUTCOMES = ("installed", "updated", "already_current")
_CHANGING_OUTCOMES = CHANGING_OUTCOMES
_approved = approved


def _validate_agents(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str]:
    unknown = [name for name in value if name not in AGENT_NAMES]
    if unknown:
        raise click.BadParameter(
            f"unknown agent {', '.join(repr(u) for u in unknown)} (choose from {', '.join(AGENT_NAMES)})",
            ctx=ctx,
            param=param,
        )
    return list(dict.fromkeys(value))


def _resolve_scope(scope: str | None, project_dir: Path | None) -> Scope:
    if scope == "project" or (scope is None and project_dir is not None):
        return "project"
    return "user"


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False)


_err = err
_echo_json = echo_json


def _changes(result: InstallResult) -> str:
    parts: list[str] = []
    if result.events_added:
        parts.append("+" + " +".join(result.events_added))
    if result.events_updated:
        parts.append("~" + " ~".join(result.events_updated))
    if result.events_removed:
        parts.append("-" + " -".join(result.events_removed))
    return " ".join(parts)


def _show_results(
    results: list[InstallResult], tests: dict[str, CaptureTestResult], title: str, show_tests: bool
) -> None:
    console = _console()
    table = Table(title=title, title_justify="left")
    table.add_column("agent", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("config")
    table.add_column("details")
    if show_tests:
        table.add_column("capture test")
    for result in results:
        outcome_style = {"failed": "red", "skipped": "dim", "not_installed": "dim"}.get(result.outcome, "green")
        details = result.reason
        changes = _changes(result)
        if changes and result.outcome == "updated":
            details = f"{details}: {changes}" if details else changes
        row = [
            Text(result.agent),
            Text(result.outcome + (" (dry run)" if result.dry_run else ""), style=outcome_style),
            Text(str(result.config_path) if result.config_path else ""),
            Text(details),
        ]
        if show_tests:
            test = tests.get(result.agent)
            if test is None:
                row.append(Text("—", style="dim"))
            else:
                row.append(Text("ok" if test.ok else f"failed: {test.reason}", style="green" if test.ok else "red"))
        table.add_row(*row)
    console.print(table)
    for result in results:
        for note in result.notes:
            console.print(Text(f"note ({result.agent}): {note}"))
        if result.diff:
            console.print(Text(result.diff.rstrip("\n")))


def _scope_options(f: Any) -> Any:
    """--scope, --project and --dry-run, shared by install and uninstall."""
    f = click.option("--dry-run", is_flag=True, help="Show what would change (with a diff); write nothing.")(f)
    return _where_options(f)


def _where_options(f: Any) -> Any:
    """--scope and --project, shared by install, uninstall and doctor."""
    f = click.option(
        "--project",
        "project_dir",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=None,
        help="Project directory for --scope project (default: the current directory).",
    )(f)
    return click.option(
        "--scope",
        type=click.Choice(["user", "project"]),
        default=None,
        help="Edit the user's config (default) or the project's (implied by --project).",
    )(f)


def _python_hook_option(f: Any) -> Any:
    """--python-hook, shared by install and doctor --fix."""
    return click.option(
        "--python-hook", "python_hook", is_flag=True,
        help="Write the Python hook even where the native client could be built (the setting hook_client = "
             "\"python\" does the same for every install).",
    )(f)


@click.command(name="install")
@click.argument("agents", nargs=-1, metavar="[AGENT]...", callback=_validate_agents)
@_scope_options
@click.option("--no-test", is_flag=True, help="Skip the capture test after installing.")
@click.option("--backfill/--no-backfill", default=None,
              help="Import the installed agents' transcripts of the last --backfill-days days (asked on a terminal).")
@click.option("--backfill-days", type=click.IntRange(1, 36500), default=30, show_default=True,
              help="How far back --backfill goes (by file modification time).")
@click.option("--mcp", "mcp", is_flag=True,
              help="Register `agentlog mcp` with each detected agent (its MCP config) instead of installing hooks.")
@click.option("--otel", "otel", is_flag=True,
              help="Point each detected agent's OpenTelemetry at `agentlog otel serve` (127.0.0.1:4318) instead "
                   "of installing hooks.")
@click.option("--otel-endpoint", default="http://127.0.0.1:4318", show_default=True, metavar="URL",
              help="With --otel: where the agents send their telemetry (the receiver's base URL).")
@click.option("--trust-codex-hooks", "trust_codex", is_flag=True,
              help="Also write Codex's trust records for agentlog's own hooks (what /hooks in Codex does), "
                   "so that `codex exec` runs them.")
@click.option("--yes", "-y", "yes", is_flag=True,
              help="Apply without asking (for scripts); without it, a terminal is asked and anything else "
                   "only gets the plan.")
@_python_hook_option
@click.option("--json", "json_", is_flag=True, help="Print one JSON array (one object per agent) on stdout.")
def install_cmd(
    agents: list[str], scope: str | None, project_dir: Path | None, dry_run: bool, no_test: bool,
    backfill: bool | None, backfill_days: int, mcp: bool, otel: bool, otel_endpoint: str, trust_codex: bool,
    yes: bool, python_hook: bool, json_: bool
) -> None:
    """Install agentlog's hooks into coding agents' configs.

    With no AGENT, every detected agent (claude-code, codex, cursor,
    gemini-cli) is set up. Existing hooks are kept; running it again changes
    nothing. After installing, a synthetic event is sent through each hook to
    check that it reaches the log (skip with --no-test). Then it offers to
    import the agents' earlier history from their transcripts (the last 30
    days by default; --backfill / --no-backfill answer without asking;
    `agentlog import` does it any time).

    Codex runs a new hook only once the user has trusted it (/hooks in its
    TUI); --trust-codex-hooks writes those records for agentlog's hooks only.

    With --mcp, registers the MCP server instead, in each agent's own format
    (Claude Code ~/.claude.json, Codex ~/.codex/config.toml, Cursor
    ~/.cursor/mcp.json, Gemini CLI ~/.gemini/settings.json); other entries kept.
    With --otel, points each agent's OpenTelemetry at `agentlog otel serve`
    instead (Claude Code's settings env, Codex's [otel], Gemini CLI's
    telemetry; docs/otel.md); a setting already there with another value is
    left untouched and reported.

    Before writing, it shows each agent's config and the change (a diff) and
    asks; --yes applies without asking. When standard input is not a terminal
    and --yes is absent, it prints the plan, changes nothing and exits 1.

    The hook each agent runs is the native client (a small C program, built
    here with the system C compiler, else the `ziglang` package, and cached
    under the data root) where it can be built, else the Python hook; the
    output says which, and why. --python-hook (or `agentlog config set
    hook_client python`) always installs the Python hook.

    Example: agentlog install claude-code --yes --no-backfill

    Example: agentlog install --python-hook --yes
    """
    if mcp:
        _mcp(agents, dry_run, json_, remove=False, yes=yes)
        return
    if otel:
        from agentlog.cli.otel_install import configure_agents

        configure_agents(agents, dry_run, json_, remove=False, yes=yes, endpoint=otel_endpoint)
        return
    resolved = _resolve_scope(scope, project_dir)
    wanted = True if python_hook else None  # None: the setting hook_client decides
    choice: HookChoice | None = None
    try:
        if not dry_run:
            plan = install(agents or None, resolved, project_dir, True, python_hook=wanted)
            if any(r.hook is not None for r in plan):  # an agent to install: build the client first
                choice = choose_hook(data_root(), python_hook=wanted)
                plan = install(agents or None, resolved, project_dir, True, hook=choice)

            def show() -> None:
                if json_:
                    _echo_json([r.to_dict() for r in plan])
                else:
                    _show_results(plan, {}, "agentlog install: the plan (nothing written yet)", False)
                    if choice is not None:
                        _err(choice.summary())

            if not _approved(plan, yes, json_, show):
                raise click.exceptions.Exit(1)
        results = install(agents or None, resolved, project_dir, dry_run, hook=choice, python_hook=wanted)
    except InstallError as exc:
        raise click.ClickException(str(exc)) from None
    chosen = next((r.hook for r in results if r.hook is not None), None)
    if chosen is not None and not json_:
        _err(chosen.summary())
    if trust_codex and not dry_run:
        _trust_codex(results)
    tests: dict[str, CaptureTestResult] = {}
    run_tests = not dry_run and not no_test
    if run_tests:
        for result in results:
            if result.outcome in _TESTED_OUTCOMES:
                tests[result.agent] = capture_test(result.agent, scope=resolved, project_dir=project_dir)
    failed = False
    if results and all(r.outcome == "skipped" for r in results):
        _err("no supported agent detected; nothing installed")
    for result in results:
        if result.outcome == "failed":
            failed = True
            _err(f"{result.agent}: {result.reason}")
        test = tests.get(result.agent)
        if test is not None and not test.ok:
            failed = True
            _err(f"{result.agent}: capture test failed: {test.reason}")
            if test.stderr.strip():
                _err(f"{result.agent}: hook stderr: {test.stderr.strip()}")
    installed = [r.agent for r in results if r.outcome in _TESTED_OUTCOMES]
    imported: dict[str, object] | None = None
    if not dry_run and installed:
        if backfill is None and not json_ and sys.stdin.isatty() and sys.stderr.isatty():
            backfill = click.confirm(f"Import the transcripts of the last {backfill_days} days "
                                     f"({', '.join(installed)})?", default=True, err=True)
        if backfill:
            imported = _backfill(installed, backfill_days)
    if json_:
        items: list[dict[str, object]] = []
        for result in results:
            item = result.to_dict()
            test = tests.get(result.agent)
            item["capture_test"] = test.to_dict() if test is not None else None
            if imported is not None:
                item["backfill"] = imported.get(result.agent)
            items.append(item)
        _echo_json(items)
    else:
        title = "agentlog install" + (" (dry run: nothing written)" if dry_run else "")
        _show_results(results, tests, title, run_tests)
        if imported is not None:
            for agent, summary in imported.items():
                _err(f"{agent}: backfill imported {summary}")
        elif not dry_run and installed:
            _err("earlier history: `agentlog import` imports the agents' transcripts")
    if failed:
        raise click.exceptions.Exit(1)


def _trust_codex(results: list[Any]) -> None:
    """Write Codex's trust records for agentlog's hooks in each Codex config installed."""
    import json
    import os

    from agentlog.install.agents import AGENTS
    from agentlog.install.codex_trust import trust_our_hooks

    spec = AGENTS["codex"]
    for result in results:
        if result.agent != "codex" or result.outcome not in _TESTED_OUTCOMES or result.config_path is None:
            continue
        try:
            data = json.loads(result.config_path.read_text(encoding="utf-8"))
            n = trust_our_hooks(result.config_path, data, spec.agent_home(Path.home(), os.environ))
        except (OSError, ValueError) as e:
            raise click.ClickException(f"codex: could not write its hook trust: {e}") from None
        except InstallError as e:
            raise click.ClickException(str(e)) from None
        result.notes[:] = [f"Codex: {n} agentlog hooks trusted (records in its config.toml)" if n else
                           "Codex: agentlog's hooks were already trusted"]


def _mcp(agents: list[str], dry_run: bool, json_: bool, *, remove: bool, yes: bool = True) -> None:
    from agentlog.install.mcp_register import register

    apply_configs(register, agents, dry_run, json_, remove=remove, yes=yes)


def _backfill(agents: list[str], days: int) -> dict[str, object]:
    """Import the transcripts of ``agents`` modified in the last ``days`` days; a summary per agent."""
    import time

    from agentlog.importers.run import import_paths
    from agentlog.importers.sources import AGENTS
    from agentlog.core.paths import data_root

    names = [a for a in agents if a in AGENTS]
    report = import_paths(data_root(), names, since_s=time.time() - days * 86400)
    by_provider = report.by_provider()
    out: dict[str, object] = {}
    for name in names:
        p = by_provider.get(AGENTS[name].provider)
        out[name] = (f"{p['events']} events from {p['files']} files ({p['sessions']} sessions)"
                     if p else "nothing (no transcripts found)")
    return out


@click.command(name="uninstall")
@click.argument("agents", nargs=-1, metavar="[AGENT]...", callback=_validate_agents)
@_scope_options
@click.option("--mcp", "mcp", is_flag=True, help="Remove the `agentlog mcp` registration instead of the hooks.")
@click.option("--otel", "otel", is_flag=True, help="Remove the telemetry settings `install --otel` wrote instead.")
@click.option("--json", "json_", is_flag=True, help="Print one JSON array (one object per agent) on stdout.")
def uninstall_cmd(agents: list[str], scope: str | None, project_dir: Path | None, dry_run: bool, mcp: bool,
                  otel: bool, json_: bool) -> None:
    """Remove agentlog's hooks from coding agents' configs.

    If a config is exactly as agentlog left it, the file from before the
    install is restored byte for byte (or removed if agentlog created it);
    otherwise only agentlog's entries are taken out. With --mcp, removes the
    MCP server's entry instead; with --otel, the telemetry settings whose
    values are still the ones `install --otel` wrote.
    """
    if mcp:
        _mcp(agents, dry_run, json_, remove=True)
        return
    if otel:
        from agentlog.cli.otel_install import configure_agents

        configure_agents(agents, dry_run, json_, remove=True)
        return
    resolved = _resolve_scope(scope, project_dir)
    try:
        results = uninstall(agents or None, resolved, project_dir, dry_run)
    except InstallError as exc:
        raise click.ClickException(str(exc)) from None
    failed = False
    for result in results:
        if result.outcome == "failed":
            failed = True
            _err(f"{result.agent}: {result.reason}")
    if json_:
        _echo_json([r.to_dict() for r in results])
    else:
        title = "agentlog uninstall" + (" (dry run: nothing written)" if dry_run else "")
        _show_results(results, {}, title, False)
    if failed:
        raise click.exceptions.Exit(1)


def _show_health(health: list[AgentHealth]) -> None:
    console = _console()
    table = Table(title="agentlog doctor", title_justify="left")
    table.add_column("agent", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("config")
    table.add_column("last event", no_wrap=True)
    table.add_column("hook", no_wrap=True)
    table.add_column("details")
    styles = {"stale": "red", "receiving": "green", "installed": "yellow", "detected": "yellow"}
    for h in health:
        details = "; ".join([*h.problems, *h.notes]) if (h.problems or h.notes) else h.detection
        if h.tested:
            details = f"release {h.version or 'unknown'} (tested {h.tested}); {details}"
        last = h.last_event_at.astimezone().strftime("%Y-%m-%d %H:%M") if h.last_event_at else "—"
        table.add_row(
            Text(h.agent),
            Text(h.state, style=styles.get(h.state, "dim")),
            Text(str(h.config_path) + ("" if h.config_exists else " (absent)")),
            Text(last),
            Text(h.hook_label),
            Text(details),
        )
    console.print(table)
    if health:
        answering = bool(health[0].hook.get("daemon_answering"))
        console.print(Text("capture server (the daemon): " + ("answering" if answering else
                           "not answering; the native client falls back to the Python hook (`agentlog daemon start`)")))
    shapes = [s for h in health for s in h.unrecognised]
    if shapes:
        extra = Table(title="unrecognised payloads", title_justify="left")
        extra.add_column("provider")
        extra.add_column("event")
        extra.add_column("count", justify="right")
        extra.add_column("last seen")
        extra.add_column("keys")
        for s in shapes:
            extra.add_row(Text(s.provider), Text(s.event), Text(str(s.count)), Text(s.last_at or "—"), Text(", ".join(s.keys)))
        console.print(extra)
    drift = [(h.agent, f) for h in health for f in h.unknown_fields]
    if drift:
        keys = Table(title="payload keys agentlog does not read (kept in each frame's raw)", title_justify="left")
        for col in ("agent", "release", "event", "key"):
            keys.add_column(col)
        keys.add_column("count", justify="right")
        for agent, f in drift:
            keys.add_row(Text(agent), Text(str(f["version"])), Text(str(f["event"])), Text(str(f["key"])),
                         Text(str(f["count"])))
        console.print(keys)


def _show_vault() -> None:
    """A line on the vault this machine ships to and one on the daemon's last ship pass
    (nothing when it is not enrolled)."""
    from agentlog.operations.ship_schedule import last_ship
    from agentlog.vault.machine import enrolled, reachability

    root = data_root()
    if enrolled(root):
        ok, detail = reachability(root)
        _err(f"vault: {detail}" + ("" if ok else "; `agentlog ship` retries on its next pass"))
        last = last_ship(root)
        _err(f"vault: the daemon last shipped at {last.get('at')}: {last.get('summary')}" if last is not None else
             "vault: the daemon has not shipped yet (it ships every `ship_minutes` while it runs)")


@click.command(name="doctor")
@click.option("--fix", is_flag=True,
              help="Rebuild a missing or stale native client and rewrite the hooks of every agent that has them.")
@_python_hook_option
@_where_options
@click.option("--json", "json_", is_flag=True, help="Print one JSON array (one object per agent) on stdout.")
def doctor_cmd(fix: bool, python_hook: bool, scope: str | None, project_dir: Path | None, json_: bool) -> None:
    """Check each agent's hooks: detected, installed, stale or receiving events.

    Also shows which hook path each agent runs (native: the C client, with
    whether the binary its config names exists and is the one this agentlog
    builds; python: the Python hook), whether the daemon's capture server
    answers, each agent's installed release against the releases agentlog is
    tested with, hook payloads agentlog did not recognise, and payload keys on
    known events that it does not read. Exits 1 when an agent's hooks are
    stale (a stale native client after an upgrade, a missing interpreter…).

    --fix rebuilds the client when it is missing or stale and rewrites the
    hooks of the agents that have them (as `agentlog install` would, without
    asking; --python-hook writes the Python hook instead); then checks again.
    --scope project (or --project DIR) checks and fixes a project's configs
    instead of the user's.

    Example: agentlog doctor --json

    Example: agentlog doctor --fix --project ~/src/app
    """
    resolved = _resolve_scope(scope, project_dir)
    fixed = None
    if fix:
        from agentlog.install.repair import fix as fix_hooks

        fixed = fix_hooks(python_hook=True if python_hook else None, scope=resolved, project_dir=project_dir)
        if not json_:
            if fixed.hook is None:
                _err("--fix: no agent has agentlog's hooks; nothing to fix (`agentlog install` installs them)")
            else:
                _err("--fix: " + fixed.hook.summary())
            for r in fixed.results:
                _err(f"--fix: {r.agent}: {r.outcome}{': ' + r.reason if r.reason else ''}")
    health = diagnose(scope=resolved, project_dir=project_dir)
    if json_:
        items = [h.to_dict() for h in health]
        from agentlog.cli.otel_install import telemetry_states

        states = telemetry_states([str(item["agent"]) for item in items])
        for item in items:
            item["telemetry"] = states.get(str(item["agent"]))
        if fixed is not None:
            by_agent = {r.agent: r.to_dict() for r in fixed.results}
            for item in items:
                item["fix"] = by_agent.get(str(item["agent"]))
        _echo_json(items)
    else:
        _show_health(health)
        _show_vault()
        from agentlog.cli.otel_install import show_telemetry

        show_telemetry([h.agent for h in health])
    stale = [h.agent for h in health if h.state == "stale"]
    failed = fixed is not None and any(r.outcome == "failed" for r in fixed.results)
    if stale:
        _err("stale hooks for " + ", ".join(stale) + "; run `agentlog doctor --fix` (or `agentlog install`) to repair")
    if stale or failed:
        raise click.exceptions.Exit(1)
