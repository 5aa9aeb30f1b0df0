"""``agentlog timeline``, ``failures``, ``sessions`` and ``show``: what the agents did.

The commands parse the scope, call :mod:`agentlog.query.views` and print.
Stored text (prompts, approaches, paths, notes) is untrusted: it is printed
as rich ``Text``, never read as markup.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr, stdout, terminal_safe
from agentlog.cli.scope_opts import parse_time, scope_options, current_engine

if TYPE_CHECKING:
    from rich.text import Text

    from agentlog.query.scope import Scope

OBJECTIVE_CHARS = 80
OUTCOME_STYLES = {
    "succeeded": "green", "failed": "red", "superseded": "yellow", "abandoned": "magenta",
    "in_progress": "cyan", "unknown": "dim",
}




def _times(opts: dict[str, Any]) -> None:
    """Read --since/--until (a usage error, before anything is opened, when they cannot be)."""
    since = parse_time(opts["since"], "--since")
    until = parse_time(opts["until"], "--until")
    if since is not None and until is not None and since >= until:
        raise click.UsageError("--since must be before --until")
    opts["since_us"], opts["until_us"] = since, until


def _scope(engine: Any, opts: dict[str, Any], *, default_all: bool = False) -> Scope:
    """The scope the flags describe (exit 1 for an unknown session, 2 for one that cannot be an id)."""
    from agentlog.query.scope import resolve_projects
    from agentlog.query.views import BadId, IdError, scoped

    everywhere = opts["all_projects"] or ((default_all or bool(opts["session"])) and not opts["project"])
    scope = resolve_projects(engine, opts["project"], everywhere)
    scope.session = opts["session"]
    scope.since_us, scope.until_us, scope.limit = opts["since_us"], opts["until_us"], opts["limit"]
    try:
        scope = scoped(engine, scope)
    except BadId as e:
        raise click.UsageError(f"--session: {e}") from None
    except IdError as e:
        raise click.ClickException(f"--session: {e}") from None
    if not opts["as_json"]:
        err = stderr()
        for note in scope.notes:
            err.print(note, markup=False, highlight=False)
    return scope


def _short(value: str | None) -> str:
    """An id as printed: whole (``att_0f3c9a1b-…``), so that it can be pasted back into any
    command; never cut."""
    return value or ""


def _when(value: str | None, day: str | None = None) -> str:
    """``2026-11-02 10:00:05`` (UTC), or only the time when it is on ``day``."""
    if not value:
        return ""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    text = dt.strftime("%Y-%m-%d %H:%M:%S")
    if day and text.startswith(day):
        return text[11:]
    return text


def _one_line(text: str | None, limit: int = OBJECTIVE_CHARS) -> str:
    """``text`` on one line; on a terminal cut to ``limit`` (``…``), piped whole."""
    import sys

    if not text:
        return ""
    flat = terminal_safe(" ".join(text.split()))
    if not sys.stdout.isatty():
        return flat
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _paths(paths: list[str] | None, most: int = 3) -> str:
    if not paths:
        return ""
    more = f" +{len(paths) - most} more" if len(paths) > most else ""
    return terminal_safe(", ".join(paths[:most])) + more


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _session_line(s: dict[str, Any]) -> Text:
    from rich.text import Text

    line = Text()
    line.append(_short(s["session_id"]), style="bold")
    line.append(f"  {s['provider']}  ")
    line.append(terminal_safe(s["project_name"] or "?"), style="blue")
    start = _when(s["started_at"])
    end = s["ended_at"] or s["last_event_at"]
    line.append(f"  {start} → {_when(end, start[:10])} UTC  ")
    line.append(s["liveness"], style="green" if s["liveness"] == "open" else "dim")
    line.append(f", coverage {s['coverage']}  ")
    counts = [_plural(s["turn_count"], "turn"), _plural(s["tool_call_count"], "tool call"),
              _plural(s["attempt_count"], "attempt")]
    if s["failure_count"]:
        counts.append(_plural(s["failure_count"], "failure"))
    if s["pending_signals"]:
        counts.append(f"{s['pending_signals']} pending")
    line.append(", ".join(counts))
    if s.get("machine"):
        line.append("  machine ")
        line.append(terminal_safe(f"{s['machine']} ({s.get('host') or '?'})"), style="magenta")
    if s.get("byte_check_failures"):
        line.append(f"  {_plural(s['byte_check_failures'], 'frame')} failed the byte check", style="bold red")
    return line


def _turn_line(t: dict[str, Any]) -> Text:
    from rich.text import Text

    line = Text("  ")
    line.append(f"turn {t['turn_index']}  ")
    line.append(_short(t["turn_id"]), style="bold")
    line.append("  ")
    line.append(t["status"] or "unknown", style="cyan" if t["status"] == "in_progress" else "")
    if t["failure_class"]:
        line.append(f" ({t['failure_class']})")
    if t["objective"]:
        line.append("  ")
        line.append(_one_line(t["objective"]), style="italic")
    elif t["corrected_by"]:
        line.append("  (objective corrected)", style="dim")
    return line


def _attempt_line(a: dict[str, Any]) -> Text:
    from rich.text import Text

    line = Text("    ")
    line.append(_short(a["attempt_id"]), style="bold")
    line.append("  ")
    line.append(a["outcome"] or "unknown", style=OUTCOME_STYLES.get(a["outcome"] or "", ""))
    if a["failure_class"]:
        detail = a.get("failure_detail")
        line.append(f" ({a['failure_class']}" + (f": {_one_line(detail, 70)}" if detail else "") + ")")
    if a["inferred_outcome"] is not None and a["inferred_outcome"] != a["outcome"]:
        line.append(f" [corrected; inferred {a['inferred_outcome']}]", style="dim")
    line.append("  ")
    line.append(terminal_safe(a["approach"] or ""))
    if a["paths"]:
        line.append("  " + _paths(a["paths"], 4), style="blue")
    if a["superseded_by"]:
        line.append(f"  superseded by {_short(a['superseded_by'])}", style="yellow")
    elif a.get("fixed_by"):
        line.append("  fixed by a later run of the same command", style="green")
    if a["commit_shas"]:
        line.append("  commit " + ", ".join(sha[:7] for sha in a["commit_shas"]))
    if a["note"]:
        line.append("  note: ", style="dim")
        line.append(_one_line(a["note"]))
    return line


def _listing(query: Callable[[Any, Any], list[dict[str, Any]]], empty: str, as_json: bool, no_ingest: bool,
             opts: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The rows ``query`` answers in the options' scope; printed as JSON (then None), or
    None with ``empty`` said on stderr when there are none; else the rows, to print."""
    opts["as_json"] = as_json
    _times(opts)
    with current_engine(no_ingest) as engine:
        rows = query(engine, _scope(engine, opts))
    if as_json:
        print_json(rows)
        return None
    if not rows:
        stderr().print(empty, markup=False)
        return None
    return rows


@click.command(name="timeline")
@scope_options(default_limit=10)
def timeline_cmd(as_json: bool, no_ingest: bool, **opts: Any) -> None:
    """Sessions → turns → attempts, newest session first.

    Each session with its provider, project, time span, liveness and
    coverage; under it each turn (its prompt as the objective) and under
    each turn its attempts: outcome, failure class, approach, paths, and
    which attempt superseded it. --limit counts sessions.
    """
    from agentlog.query.views import timeline

    rows = _listing(timeline, "no sessions recorded in this scope", as_json, no_ingest, opts)
    if rows is None:
        return
    print_timeline(rows)


def print_timeline(rows: list[dict[str, Any]]) -> None:
    """Sessions, turns and attempts as indented lines (one line each, never wrapped)."""
    out = stdout()
    for i, s in enumerate(rows):
        if i:
            out.print()
        out.print(_session_line(s), soft_wrap=True)
        for t in s["turns"]:
            out.print(_turn_line(t), soft_wrap=True)
            for a in t["attempts"]:
                out.print(_attempt_line(a), soft_wrap=True)


@click.command(name="failures")
@scope_options(default_limit=50)
@click.option("--reclassified", is_flag=True,
              help="List the failed calls whose class the installed classifier re-derived differently.")
def failures_cmd(as_json: bool, no_ingest: bool, reclassified: bool, **opts: Any) -> None:
    """Failed and superseded attempts, newest first, with why and the retry that fixed each.

    A superseded attempt failed and a later attempt on the same paths
    retried it; when the failing command was run again and passed, that run
    is the retry too ("fixed by"). ``why`` is the failing call's summary
    ("3 of 212 tests failed: …") or the signal its class came from
    (docs/failures.md).

    After an upgrade, ``agentlog project --full`` re-derives every class;
    ``--reclassified`` lists what changed.

    Example: agentlog failures --since -1d --json
    """
    if reclassified:
        from agentlog.query.views import reclassified as query

        rows = _listing(query, "no call's class changed when it was re-derived", as_json, no_ingest, opts)
        if rows is not None:
            print_table([{"time": _when(r["finished_at"]), "call": _short(r["tool_call_id"]), "tool": r["tool_name"],
                          "was": r["reclassified_from"], "class": r["class"],
                          "why": _one_line(r["result_summary"] or r["failure_evidence"], 70)} for r in rows],
                        ["time", "call", "tool", "was", "class", "why"])
        return
    from agentlog.query.views import failures

    rows = _listing(failures, "no failed or superseded attempts in this scope", as_json, no_ingest, opts)
    if rows is None:
        return
    print_failures(rows)


def print_failures(rows: list[dict[str, Any]], title: str | None = None) -> None:
    """Failed and superseded attempts as a table."""
    table = []
    for r in rows:
        table.append({
            "time": _when(r["started_at"]), "session": f"{_short(r['session_id'])} {r['provider']}",
            "attempt": _short(r["attempt_id"]), "outcome": r["outcome"], "class": r["failure_class"] or "",
            "why": _one_line(_why(r.get("failing_call")), 60),
            "approach": _one_line(r["approach"], 50), "paths": _paths(r["paths"]), "retry": _retry(r["retry"]),
        })
    print_table(table, ["time", "session", "attempt", "outcome", "class", "why", "approach", "paths", "retry"],
                title=title)


def _why(call: dict[str, Any] | None) -> str:
    """The failing call's summary, else the signal its class came from."""
    if not call:
        return ""
    return str(call.get("result_summary") or call.get("failure_evidence") or "")


def _retry(retry: dict[str, Any] | None) -> str:
    if not retry:
        return ""
    if retry.get("how") == "fixed_by" and retry.get("fixed_by"):
        fixed = retry["fixed_by"]
        who = _short(retry["attempt_id"]) if retry.get("attempt_id") else _short(fixed["tool_call_id"])
        return f"fixed by {who}" + (f": {fixed['result_summary']}" if fixed.get("result_summary") else "")
    return f"{_short(retry['attempt_id'])} ({retry['outcome']})"


@click.command(name="sessions")
@scope_options(default_limit=20)
@click.option("--all", "everything", is_flag=True,
              help="Every project, and `agentlog install`'s capture tests too (hidden otherwise).")
def sessions_cmd(as_json: bool, no_ingest: bool, everything: bool, **opts: Any) -> None:
    """One row per session, newest first: provider, project, times, liveness, counts.

    `agentlog install` checks each hook with a synthetic capture test; those
    are closed at once and not listed unless --all is given.

    In a data root made by `agentlog vault admin pull`, also the machine and
    host each session was recorded on, and how many of its frames failed the
    pull's byte check (docs/vault.md).

    Example: agentlog sessions --all-projects --since -7d --json
    """
    from agentlog.core.paths import data_root
    from agentlog.log.layout import capture_test_logs
    from agentlog.query.views import sessions

    tests = capture_test_logs(data_root())
    query = sessions
    if everything:
        opts["all_projects"] = True

        def query(engine: Any, scope: Any) -> list[dict[str, Any]]:
            return sessions(engine, scope) + [_capture_test_row(*t) for t in tests]
    elif tests and not as_json:
        stderr().print(f"{len(tests)} of `agentlog install`'s capture tests not shown (--all)", markup=False)
    rows = _listing(query, "no sessions recorded in this scope", as_json, no_ingest, opts)
    if rows is None:
        return
    table = []
    for s in rows:
        start = _when(s["started_at"])
        table.append({
            "session": _short(s["session_id"]), "provider": s["provider"], "project": s["project_name"],
            "started": start, "last": _when(s["ended_at"] or s["last_event_at"], start[:10]),
            "liveness": s["liveness"], "coverage": s["coverage"], "turns": s["turn_count"],
            "calls": s["tool_call_count"], "attempts": s["attempt_count"], "failures": s["failure_count"],
            "events": s["event_count"], "machine": s.get("machine") or "", "host": s.get("host") or "",
            "byte check": f"{s['byte_check_failures']} failed" if s.get("byte_check_failures") else "",
        })
    columns = ["session", "provider", "project", "started", "last", "liveness", "coverage", "turns", "calls",
               "attempts", "failures", "events"]
    # sessions pulled from a vault (agentlog vault admin pull): which machine recorded each
    if any(s.get("machine") for s in rows):
        columns += ["machine", "host"]
    if any(s.get("byte_check_failures") for s in rows):
        columns.append("byte check")
    print_table(table, columns)


def _capture_test_row(provider: str, key: str, at_us: int) -> dict[str, Any]:
    """A capture test as a closed session row (``capture_test`` true)."""
    from agentlog.core.timefmt import format_us

    at = format_us(at_us) if at_us else None
    return {"session_id": key, "provider": provider, "project_name": None, "started_at": at, "ended_at": at,
            "last_event_at": at, "liveness": "closed", "coverage": "capture_test", "turn_count": 0,
            "tool_call_count": 0, "attempt_count": 0, "failure_count": 0, "event_count": 1, "capture_test": True}


def _field_value(value: Any) -> str:
    import json

    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


@click.command(name="show")
@click.argument("ident", metavar="ID")
@scope_options(default_limit=200)
def show_cmd(ident: str, as_json: bool, no_ingest: bool, **opts: Any) -> None:
    """Any recorded entity by id or unambiguous prefix, with its evidence events.

    ID is a session, turn, attempt, tool call, work unit, decision, commit
    (or its sha), conflict or event id — with its prefix (ses_, trn_, att_,
    tc_, wu_, dec_, cmt_, cfl_, ev_) or without, or at least 4 leading hex
    digits; a session also by the agent's own session id. Ids are looked up
    in every project unless --project or --session narrows them; --since
    and --until narrow the evidence listed, --limit caps it. Exit 1 when
    the id names nothing or several things.
    """
    from agentlog.query.views import BadId, IdError, show

    opts["as_json"] = as_json
    _times(opts)
    with current_engine(no_ingest) as engine:
        scope = _scope(engine, opts, default_all=True)
        try:
            found = show(engine, ident, scope)
        except BadId as e:
            raise click.UsageError(str(e)) from None
        except IdError as e:
            raise click.ClickException(str(e)) from None
    if as_json:
        print_json(found)
        return
    entity = found["entity"]
    rows = [{"field": k, "value": _field_value(v)} for k, v in entity.items()
            if k != "evidence" and v is not None and v != [] and v != ""]
    print_table(rows, ["field", "value"], title=f"{found['type'].replace('_', ' ')} {found['id']}")
    ev = [{"time": _when(e["observed_at"]), "kind": e["kind"], "tool": e["tool_name"] or "",
           "outcome": " ".join(x for x in (e["outcome_status"], e["outcome_class"]) if x),
           "paths": ", ".join(e["paths"] or []), "event": e["event_id"]} for e in found["evidence"]]
    more = " (more: raise --limit)" if found["evidence_truncated"] else ""
    print_table(ev, ["time", "kind", "tool", "outcome", "paths", "event"],
                title=f"evidence: {_plural(len(ev), 'event')} in observed order{more}")
