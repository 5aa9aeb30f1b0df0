"""One place that prints rows: a rich table for people, JSON for programs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import click

if TYPE_CHECKING:
    from rich.console import Console


def stdout() -> Console:
    """The console for results: on a terminal, lines fold at its width; into a pipe or a
    file, every line is written whole (never folded at 80 columns, ids never split)."""
    import sys

    from rich.console import Console

    return Console(soft_wrap=not sys.stdout.isatty(), highlight=False)


def stderr() -> Console:
    """The console for notes and errors (whole lines when not a terminal, like :func:`stdout`)."""
    import sys

    from rich.console import Console

    return Console(stderr=True, soft_wrap=not sys.stderr.isatty(), highlight=False)


def terminal_safe(text: Any) -> str:
    """Stored text made harmless for a terminal: control and format characters
    (escape sequences, bidi overrides) shown escaped (``\\x1b``), newlines and
    tabs kept. Stored text is untrusted: an agent's output can hold escapes."""
    import unicodedata

    s = "" if text is None else str(text)
    if s.isprintable():
        return s
    return "".join(c if c in "\n\t" or unicodedata.category(c)[0] != "C"
                   else c.encode("unicode_escape").decode("ascii") for c in s)


def print_json(value: Any) -> None:
    from agentlog.core.jsonio import dumps_pretty  # (orjson only for --json output)

    text = dumps_pretty(value)
    if not text.isascii():
        # A file name that is not UTF-8 reaches Python as lone surrogates, which UTF-8 output cannot hold:
        # written as JSON escapes (json.loads gives the same name back), not a crash.
        import re

        text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    click.echo(text)


def print_table(rows: Sequence[dict[str, Any]], columns: Iterable[str], title: str | None = None) -> None:
    """Rows as a table on a terminal; piped (stdout not a terminal), as tab-separated lines
    of whole values, a header first and the title on stderr: nothing cut, ids pasteable."""
    import sys

    cols = list(columns)
    if not sys.stdout.isatty():
        if title:
            click.echo(title, err=True)
        _print_tsv(rows, cols)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_lines=False)
    for c in cols:
        table.add_column(c)
    for row in rows:
        # Text, not str: stored text is untrusted, and rich would read "[…]" in it as markup.
        table.add_row(*[Text(terminal_safe(row.get(c))) for c in cols])
    stdout().print(table)


def _cells(row: dict[str, Any], cols: list[str]) -> list[str]:
    """A row's values for ``cols``: terminal-safe, each on one line."""
    return [" ".join(terminal_safe(row.get(c)).split()) for c in cols]


def _print_tsv(rows: Sequence[dict[str, Any]], cols: list[str]) -> None:
    """A header line, then one tab-separated line of whole values per row (for pipes)."""
    click.echo("\t".join(cols))
    for row in rows:
        click.echo("\t".join(_cells(row, cols)))


def print_columns(rows: Sequence[dict[str, Any]], columns: Iterable[str]) -> None:
    """Rows as plain columns: a header line, then one line per row, columns two spaces
    apart; without rich, whose import costs ~50 ms of a process that does little else
    (``memory list``, ``memory search``). Cells are terminal-safe and on one line; on a
    terminal, the widest columns are cut (``…``) to fit its width."""
    import shutil
    import sys

    cols = list(columns)
    if not sys.stdout.isatty():  # piped: whole values, tab-separated (see print_table)
        _print_tsv(rows, cols)
        return
    table = [cols] + [_cells(row, cols) for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(cols))]
    room = shutil.get_terminal_size().columns - 2 * (len(cols) - 1)
    while sum(widths) > room and max(widths) > 8:
        widths[widths.index(max(widths))] -= 1
    for r in table:
        cells = [c if len(c) <= w else c[: w - 1] + "…" for c, w in zip(r, widths)]
        click.echo("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
