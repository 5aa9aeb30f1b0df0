"""The plan-ask-apply flow of `install`/`uninstall` (hooks, ``--mcp``, ``--otel``) and its output helpers."""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence

import click


CHANGING_OUTCOMES = ("installed", "updated", "registered", "configured", "removed")


def interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def approved(plan: Sequence[Any], yes: bool, json_: bool, show: Any) -> bool:
    """Whether to apply ``plan`` (results of a dry run): yes when nothing changes, when
    ``--yes`` was given, or when the person at the terminal says so. Without a terminal
    the plan is printed (``show``) and nothing is applied."""
    if yes or not any(r.outcome in CHANGING_OUTCOMES for r in plan):
        return True
    if interactive() and not json_:
        show()
        if click.confirm("Apply these changes?", default=False, err=True):
            return True
        err("nothing changed")
        return False
    show()
    err("nothing changed: not a terminal, so nothing was asked; run again with --yes to apply this plan")
    return False


def err(message: str) -> None:
    click.echo(f"agentlog: {message}", err=True)


def echo_json(items: Sequence[dict[str, object]]) -> None:
    click.echo(json.dumps(list(items), indent=2, ensure_ascii=False))


def apply_configs(run: Any, agents: list[str], dry_run: bool, json_: bool, *, remove: bool, yes: bool = True,
                  hint: str = "") -> None:
    """``install``/``uninstall`` ``--mcp`` or ``--otel``: ``run(names, dry_run=, remove=)`` edits each agent's
    config (a ConfigResult each); shown as a plan and asked first unless --yes; ``hint`` is said after."""
    from agentlog.install.agents import AGENTS

    names = list(agents) or list(AGENTS)
    if not dry_run and not yes:
        plan = run(names, dry_run=True, remove=remove)

        def show() -> None:
            if json_:
                echo_json([r.to_dict() for r in plan])
                return
            for r in plan:
                if r.outcome in CHANGING_OUTCOMES:
                    err(f"{r.agent}: would be {r.outcome} in {r.path}")
                    if r.diff:
                        err(r.diff)

        if not approved(plan, yes, json_, show):
            raise click.exceptions.Exit(1)
    results = run(names, dry_run=dry_run, remove=remove)
    if json_:
        echo_json([r.to_dict() for r in results])
    else:
        for r in results:
            err(f"{r.agent}: {r.outcome}{' (dry run)' if dry_run and r.outcome in CHANGING_OUTCOMES else ''}"
                 f" {r.path}{': ' + r.reason if r.reason else ''}")
            if dry_run and r.diff:
                err(r.diff)
        if hint and not remove and any(r.outcome not in ("failed", "skipped") for r in results):
            err(hint)
    if any(r.outcome == "failed" for r in results):
        raise click.exceptions.Exit(1)
