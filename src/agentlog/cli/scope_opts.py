"""The scope flags every people's command takes (``--project`` … ``--json``)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

import click

from agentlog.core.paths import data_root

F = TypeVar("F", bound=Callable[..., Any])


def scope_options(default_limit: int = 20) -> Callable[[F], F]:
    """``--project``, ``--all-projects``, ``--session``, ``--since``, ``--until``, ``--limit``, ``--json``."""

    def wrap(f: F) -> F:
        for opt in reversed([
            click.option("--project", metavar="NAME|ID|PATH",
                         help="Only this project (default: the project of the current directory)."),
            click.option("--all-projects", is_flag=True, help="Every project."),
            click.option("--session", metavar="ID", help="Only this session (id or unambiguous prefix)."),
            click.option("--since", metavar="TIME",
                         help="From this time: RFC 3339, a date, epoch seconds, now, today, -2h, -1d …"),
            click.option("--until", metavar="TIME", help="Before this time (same forms as --since)."),
            click.option("--limit", type=click.IntRange(1), default=default_limit, show_default=True,
                         help="At most this many rows."),
            click.option("--json", "as_json", is_flag=True, help="Print JSON (an array of objects) instead of text."),
            click.option("--no-ingest", is_flag=True, help="Answer from the store as it is; do not catch up first."),
        ]):
            f = opt(f)
        return f

    return wrap


def parse_time(value: str | None, option: str, now_us: int | None = None) -> int | None:
    """µs since the epoch for a --since/--until value (a usage error when it cannot be read)."""
    from agentlog.query.timeexpr import TimeError, resolve

    if value is None:
        return None
    try:
        return resolve(value, now_us if now_us is not None else time.time_ns() // 1000)
    except TimeError as e:
        raise click.BadParameter(str(e), param_hint=option) from None


@contextmanager
def current_engine(no_ingest: bool) -> Iterator[Any]:
    """An engine over the data root, brought up to date first unless ``no_ingest``
    (a failure to do so is a ClickException: exit 1 with its message)."""
    from agentlog.query.engine import QueryError
    from agentlog.operations.refresh import open_current

    try:
        engine, _ = open_current(data_root(), catch_up=not no_ingest)
    except QueryError as e:
        raise click.ClickException(str(e)) from None
    with engine:
        yield engine
