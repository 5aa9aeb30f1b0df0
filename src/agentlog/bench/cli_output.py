"""What ``agentlog bench`` prints with: the same output as ``agentlog.cli.output``'s (bench sits
above the CLI and imports no surface)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console


def print_json(value: Any) -> None:
    """A result object as indented JSON on stdout (as the other commands print theirs)."""
    from agentlog.core.jsonio import dumps_pretty

    click.echo(dumps_pretty(value))


def stderr() -> Console:
    """A rich console on stderr, for progress bars and notes beside the output."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


__all__ = ["print_json", "stderr"]
