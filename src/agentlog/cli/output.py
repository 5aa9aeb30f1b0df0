"""One place that prints rows: a rich table for people, JSON for programs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import click

if TYPE_CHECKING:
    from rich.console import Console


def stdout() -> Console:
    from rich.console import Console

    return Console(soft_wrap=False, highlight=False)


def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def print_table(rows: Sequence[dict[str, Any]], columns: Iterable[str], title: str | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    cols = list(columns)
    table = Table(title=title, show_lines=False)
    for c in cols:
        table.add_column(c)
    for row in rows:
        # Text, not str: stored text is untrusted, and rich would read "[…]" in it as markup.
        table.add_row(*[Text("" if row.get(c) is None else str(row.get(c))) for c in cols])
    stdout().print(table)
