"""``agentlog query``, ``trace``, ``why`` and ``state``: the statement language and its verbs.

Answers go to stdout (readable text, or ``--json``: an array of objects, or
one object for ``state``); notes and errors go to stderr. Stored text
(objectives, paths, notes, claims quoting them) is untrusted and printed as
rich ``Text``, never read as markup. Exit 0 with an answer, 1 when an id
names nothing (or several things) or the engine fails, 2 for a usage error
(a statement that does not parse, a bad option).
"""

from __future__ import annotations

import csv
import json
import sys
import time
from contextlib import contextmanager
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Iterator, NoReturn, Sequence

import click

from agentlog.core.paths import data_root
from agentlog.cli.output import print_json, print_table, stderr, stdout, terminal_safe
from agentlog.cli.scope_opts import parse_time, current_engine

if TYPE_CHECKING:
    from rich.text import Text

    from agentlog.query.aql import AqlResult
    from agentlog.query.scope import Scope

# --------------------------------------------------------------------------- helpers


def _plain(value: Any) -> Any:
    """A JSON-ready value: times as RFC 3339 UTC text, containers recursively."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        text = value.isoformat()
        return text + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


def _cell(value: Any) -> str:
    """One value as text in a table or a block (made terminal-safe)."""
    v = _plain(value)
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ", ".join(_cell(x) for x in v)
    if isinstance(v, dict):
        return terminal_safe(json.dumps(v, ensure_ascii=False))
    return terminal_safe(v)


def _short(kind: str | None, value: str | None) -> str:
    """An id as printed: whole, with its display prefix (``att_…``, ``ev_…``): never cut, so
    that it can be pasted back into any command."""
    from agentlog.projection.ids import PREFIXES, display

    if not value:
        return ""
    if kind in PREFIXES:
        return display(kind, value)
    return value


def _now_us(value: str | None, option: str) -> int:
    wall = time.time_ns() // 1000
    resolved = parse_time(value, option, wall)
    return wall if resolved is None else resolved




def _fail(message: str, code: int, detail: str | None = None) -> NoReturn:
    err = stderr()
    err.print(terminal_safe(message), markup=False, highlight=False)
    if detail:
        err.print(terminal_safe(detail), markup=False, highlight=False)
    sys.exit(code)


@contextmanager
def _errors(statement: str | None = None) -> Iterator[None]:
    """Statement, id and engine errors as messages on stderr and exit codes."""
    from agentlog.query.state import ResolveError, StateError
    from agentlog.query.attemptql import ParseError
    from agentlog.query.engine import QueryError

    try:
        yield
    except ParseError as e:
        _fail(f"error {e.code}: {e.message}", 2, e.caret(statement) if statement is not None else None)
    except ResolveError as e:
        caret = None
        if statement is not None and e.position is not None:
            caret = ParseError(e.message, e.position, e.code).caret(statement)
        _fail(f"error {e.code}: {e.message}", 1, caret)
    except StateError as e:
        _fail(f"error {e.code}: {e.message}", 2)
    except QueryError as e:
        _fail(f"{e.kind}: {e}", 2 if e.kind == "refused" else 1)


def _notes(notes: Sequence[str]) -> None:
    err = stderr()
    for n in notes:
        err.print(terminal_safe(n), markup=False, highlight=False, style="dim")


def _block(record: dict[str, Any], columns: Sequence[str], title: str | None = None) -> None:
    from rich.text import Text

    out = stdout()
    if title:
        out.print(Text(title, style="bold"))
    width = max((len(c) for c in columns), default=0)
    for c in columns:
        v = record.get(c)
        if v is None or v == [] or v == "":
            continue
        line = Text(f"  {c.ljust(width)}  ", style="dim")
        line.append(_cell(v))
        out.print(line)
    out.print()


def _print_result(result: AqlResult, *, as_json: bool, as_csv: bool) -> None:
    from agentlog.query.views import plain

    records = [_plain(plain(r)) for r in result.records()]  # ids with their display prefix, as elsewhere
    if as_json:
        print_json(records)
        return
    if as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        for r in records:
            writer.writerow([json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else
                             ("" if v is None else v) for v in (r.get(c) for c in result.columns)])
        _notes(result.notes)
        return
    cells = [{c: _cell(r.get(c)) for c in result.columns} for r in records]
    widths = [max([len(c)] + [len(row[c]) for row in cells]) + 3 for c in result.columns]
    if sum(widths) + 1 <= stdout().width:
        print_table(cells, result.columns)
    else:
        for i, r in enumerate(records, 1):
            _block(r, result.columns, f"#{i}")
    _notes([*result.notes, f"{len(records)} row{'s' if len(records) != 1 else ''} in "
                           f"{result.seconds * 1000:.0f} ms"])


# --------------------------------------------------------------------------- query


@click.command(name="query")
@click.argument("statement")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON array of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the rows as CSV with a header line.")
@click.option("--no-ingest", is_flag=True, help="Answer from what is already in the store; do not catch up first.")
@click.option("--now", "now", metavar="TIME",
              help="Answer as of this time (what now, today and -2h mean; default: the wall clock).")
@click.option("--timeout", type=click.FloatRange(0.1), default=30.0, show_default=True,
              help="Stop a SQL statement after this many seconds.")
@click.option("--max-rows", type=click.IntRange(1, 1_000_000_000), default=10_000, show_default=True,
              help="Return at most this many rows (the answer says when it was cut).")
@click.pass_context
def query_cmd(ctx: click.Context, statement: str, as_json: bool, as_csv: bool, no_ingest: bool, now: str | None,
              timeout: float, max_rows: int) -> None:
    """Answer one AttemptQL statement (or, failing that, one SQL statement).

    AttemptQL asks about attempts, sessions and causes directly:

    \b
        SHOW FAILED ATTEMPTS FOR provider = codex SINCE -1d
        SHOW ATTEMPTS FOR path = 'src/*.rs' WHERE approach LIKE '%shell%'
        SHOW HANDOFFS BETWEEN provider = claude_code AND provider = codex
        SHOW EVIDENCE FOR attempt 0f3c
        TRACE attempt 0f3c CAUSES DEPTH 5 DIRECTION BOTH
        STATE AT '2026-11-02T10:00:25Z'
        DIFF STATE project -2h now
        WHY project BLOCKED
        WHY attempt 0f3c FAILED
        WHAT IS project DOING NOW
        EXPLAIN SHOW ATTEMPTS

    Text that is not AttemptQL (SELECT …, WITH …) runs as `agentlog sql`
    does. `project` alone means the project of the current directory (every
    project when nothing was recorded there). Ids take a display prefix
    (att_…), the full id or an unambiguous prefix of 4+ hex digits.

    Exit 0 with an answer, 1 when an id names nothing or several things or
    the engine fails, 2 when the statement does not parse (the error shows
    where).
    """
    from agentlog.query.ask import language
    from agentlog.query.attemptql import parse

    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    if language(statement, typos=True) == "sql":
        from agentlog.cli.sql_cmd import sql_cmd

        if now is not None:
            raise click.UsageError("--now applies to AttemptQL statements only")
        ctx.invoke(sql_cmd, statement=statement, as_json=as_json, as_csv=as_csv, no_ingest=no_ingest,
                   timeout=timeout, max_rows=max_rows)
        return
    now_us = _now_us(now, "--now")
    with _errors(statement):
        stmt = parse(statement)
    from agentlog.query.aql import execute_statement
    from agentlog.query.scope import resolve_projects

    with current_engine(no_ingest) as engine, _errors(statement):
        current = resolve_projects(engine, None, False).project_ids
        result = execute_statement(engine, stmt, now_us=now_us, current_project=current, max_rows=max_rows,
                                   timeout=timeout)
    _print_result(result, as_json=as_json, as_csv=as_csv)


# --------------------------------------------------------------------------- trace


def _trace_line(r: dict[str, Any]) -> Text:
    from rich.text import Text

    line = Text(f"{r['depth']:>3}  ", style="dim")
    if r["edge_kind"] == "depth_limit":
        line.append("… ", style="yellow")
        line.append(_short(r["from_type"], r["from_id"]), style="bold")
        line.append(terminal_safe(f"  {r['uncertainty']['note']}"), style="yellow")
        return line
    arrow = "↑" if r["direction"] == "up" else "↓"
    line.append(f"{arrow} {r['edge_kind']:<10} ", style="cyan")
    line.append(_short(r["from_type"], r["from_id"]), style="bold")
    line.append(" → ")
    line.append(_short(r["to_type"], r["to_id"]), style="bold")
    conf = r["confidence"]
    line.append(f"  confidence {conf:.2f}" if isinstance(conf, (int, float)) else "", style="dim")
    if r["evidence"]:
        line.append("  evidence " + ", ".join(_short("event", e) for e in r["evidence"][:4]), style="dim")
    return line


@click.command(name="trace")
@click.argument("entity_id", metavar="ID")
@click.option("--depth", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="Follow at most this many edges away from ID.")
@click.option("--direction", type=click.Choice(["up", "down", "both"]), default="up", show_default=True,
              help="up: towards causes; down: towards effects (and what the entity contains); both: each.")
@click.option("--json", "as_json", is_flag=True, help="Print the edges as a JSON array of objects.")
@click.option("--no-ingest", is_flag=True, help="Answer from what is already in the store; do not catch up first.")
def trace_cmd(entity_id: str, depth: int, direction: str, as_json: bool, no_ingest: bool) -> None:
    """Follow causal edges from an attempt, event, session, turn, tool call or work unit.

    Edges: superseded (a failed attempt → its retry), caused (the failing
    event → the retry's first action), triggered (a prompt → its turn),
    handed_off (a session → the one that continued its work). Going down,
    it also lists what an entity contains (session → turns → tool calls).
    Each row cites its evidence events; a depth_limit row marks where the
    walk stopped. ID: att_…, ses_…, a full id or a 4+ hex digit prefix.
    """
    from agentlog.query.state import trace

    with current_engine(no_ingest) as engine, _errors():
        rows = trace(engine, entity_id, depth, direction)
    if as_json:
        print_json(_plain(rows))
        return
    out = stdout()
    for r in rows:
        out.print(_trace_line(r))
    if not rows:
        _notes([f"no causal edge {direction} from {entity_id}"])


# --------------------------------------------------------------------------- why


def _why_text(r: dict[str, Any]) -> None:
    from rich.text import Text

    out = stdout()
    head = Text()
    head.append(_short(r["subject_type"], r["subject_id"]) or r["subject_type"], style="bold")
    head.append("  ")
    if r["claim"]:
        head.append(terminal_safe(r["claim"]))
    else:
        head.append(r["uncertainty"]["reason"].replace("_", " "), style="yellow")
    out.print(head)
    detail = Text("  ")
    if r["confidence"] is not None:
        detail.append(f"confidence {r['confidence']:.2f} ({r['uncertainty']['reason']}); ", style="dim")
    detail.append(terminal_safe(r["uncertainty"]["note"]), style="dim")
    out.print(detail)
    if r["evidence"]:
        out.print(Text("  evidence: " + ", ".join(_short("event", e) for e in r["evidence"][:8])
                       + (f" +{len(r['evidence']) - 8} more" if len(r["evidence"]) > 8 else ""), style="dim"))


@click.command(name="why")
@click.argument("entity_id", metavar="[ID]", required=False)
@click.option("--project", metavar="NAME|ID|PATH",
              help="Without ID: this project (default: the project of the current directory).")
@click.option("--all-projects", is_flag=True, help="Without ID: every project.")
@click.option("--now", "now", metavar="TIME", help="Answer as of this time (default: the wall clock).")
@click.option("--json", "as_json", is_flag=True, help="Print the answers as a JSON array of objects.")
@click.option("--no-ingest", is_flag=True, help="Answer from what is already in the store; do not catch up first.")
def why_cmd(entity_id: str | None, project: str | None, all_projects: bool, now: str | None, as_json: bool,
            no_ingest: bool) -> None:
    """Why a project, session or work unit is blocked, or why an attempt failed.

    Without ID: why the current project (or --project) is blocked. With a
    session or work unit id: why it is blocked. With an attempt (or a tool
    call, or a turn): why it failed — the failing event, the attempt that
    superseded it, any correction.

    Blocked means: a permission request or input notification is pending
    (confidence 0.85 with full coverage, else 0.65), or the last two
    attempts failed the same way ("repeating itself", 0.7 / 0.5). Anything
    else is answered "insufficient evidence" with a note on what hooks could
    not see — never a guess.
    """
    from agentlog.query.state import resolve_id
    from agentlog.query.aql import execute_statement
    from agentlog.query.attemptql import Subject, Why
    from agentlog.query.scope import resolve_projects

    now_us = _now_us(now, "--now")
    if entity_id is not None and (project or all_projects):
        raise click.UsageError("give an ID or --project/--all-projects, not both")
    with current_engine(no_ingest) as engine, _errors():
        if entity_id is None:
            scope = resolve_projects(engine, project, all_projects)
            if not as_json:
                _notes(scope.notes)
            if project and not scope.project_ids:
                _fail(f"no recorded project matches {project!r}", 1)
            result = execute_statement(engine, Why(Subject("project", None, 0), "blocked"), now_us=now_us,
                                       current_project=scope.project_ids)
        else:
            kind, full = resolve_id(engine, entity_id, ["attempt", "session", "work_unit", "turn", "tool_call"])
            if kind == "tool_call":
                rows = engine.run("SELECT attempt_id FROM tool_calls WHERE tool_call_id = ?", [full]).rows
                if not rows or rows[0][0] is None:
                    _fail(f"the tool call {full} belongs to no attempt", 1)
                kind, full = "attempt", str(rows[0][0])
            subject_kind: Any = kind
            why = Why(Subject(subject_kind, full, 0), "failed" if kind in ("attempt", "turn") else "blocked")
            result = execute_statement(engine, why, now_us=now_us)
    if as_json:
        print_json([_plain(r) for r in result.records()])
        return
    for r in result.records():
        _why_text(r)
    _notes(result.notes)


# --------------------------------------------------------------------------- state


def _state_text(snapshot: Any, label: str) -> None:
    from rich.text import Text

    from agentlog.query.timeexpr import format_us

    out = stdout()
    out.print(Text(f"State at {format_us(snapshot.at_us)} ({label})", style="bold"))
    shown = [s for s in snapshot.sessions if s["liveness"] != "stale"]
    stale = len(snapshot.sessions) - len(shown)
    if not shown and not snapshot.work_units:
        out.print(Text("  no session was running and no work unit was open", style="dim"))
    if stale:
        out.print(Text(f"  {stale} session{'s' if stale != 1 else ''} never ended but silent for more than 30 minutes "
                       "(stale) not shown; --json lists them", style="dim"))
    for s in shown:
        line = Text("\n")
        line.append(_short("session", s["session_id"]), style="bold")
        line.append(f"  {s['provider']}  ")
        line.append(terminal_safe(s["project_name"] or "?"), style="blue")
        line.append(f"  {s['liveness']}", style="green" if s["liveness"] == "open" else "dim")
        line.append(f", coverage {s['coverage']}", style="dim")
        if s["blocked"]:
            line.append("  BLOCKED", style="bold red")
        out.print(line)
        cur = s["current_turn"]
        if cur:
            t = Text(f"  turn {cur['turn_index']} ({cur['status']}): ", style="dim")
            t.append(terminal_safe(" ".join((cur["objective"] or "").split())[:100]))
            out.print(t)
        if s["in_flight"]:
            out.print(Text("  running: " + terminal_safe(", ".join(f"{f['tool_name'] or f['tool_category'] or '?'} since "
                                                            f"{f['started_at']}" for f in s["in_flight"][:5]))))
        last = s["last_attempt"]
        if last:
            t = Text(f"  last attempt {_short('attempt', last['attempt_id'])}: {last['outcome']}", style="")
            if last["failure_class"]:
                t.append(f" ({last['failure_class']})")
            t.append(terminal_safe(f"  {last['approach'] or ''}"), style="dim")
            out.print(t)
        fail = s["last_failure"]
        if fail and (not last or fail["attempt_id"] != last["attempt_id"]):
            out.print(Text(f"  last failure {_short('attempt', fail['attempt_id'])}: {fail['outcome']} "
                           f"({fail['failure_class'] or 'no class'})", style="dim"))
        if s["explanation"]:
            out.print(Text(terminal_safe(f"  {s['explanation']}"), style="red"))
        out.print(Text(f"  last activity {s['last_activity_at']}", style="dim"))
    for u in snapshot.work_units:
        line = Text("\n")
        line.append(_short("work_unit", u["work_unit_id"]), style="bold")
        line.append(f"  work unit, {u['status']}, phase {u['phase']}  ")
        line.append(", ".join(u["actors"]), style="dim")
        out.print(line)
        if u["objective"]:
            out.print(Text(terminal_safe("  " + " ".join(u["objective"].split())[:100])))
        out.print(Text(f"  {u['phase_reason']}; {u['status_reason']}", style="dim"))
        if u["explanation"]:
            out.print(Text(terminal_safe(f"  {u['explanation']}"), style="red"))


@click.command(name="state")
@click.option("--at", "at", metavar="TIME",
              help="The instant: RFC 3339, a date, epoch seconds, now, -2h, -1d … (default: now).")
@click.option("--project", metavar="NAME|ID|PATH", help="Only this project (default: the project of the current "
                                                         "directory).")
@click.option("--all-projects", is_flag=True, help="Every project.")
@click.option("--session", metavar="ID", help="Only this session (id or unambiguous prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: at, sessions, work_units, notes.")
@click.option("--no-ingest", is_flag=True, help="Answer from what is already in the store; do not catch up first.")
def state_cmd(at: str | None, project: str | None, all_projects: bool, session: str | None, as_json: bool,
              no_ingest: bool) -> None:
    """What was running at an instant: sessions, their turn, calls, last attempt, blocks.

    Everything is as it was known then: an attempt that had not ended is
    in_progress; a failure whose retry had not started is failed, not yet
    superseded; corrections made later are ignored. Work units open at that
    instant are listed too (those already closed are counted in a note).
    """
    from agentlog.query.state import resolve_id, state_at

    at_us = _now_us(at, "--at")
    with current_engine(no_ingest) as engine, _errors():
        scope = _state_scope(engine, project, all_projects, session)
        if session:
            _kind, full = resolve_id(engine, session, ["session"])
            scope.session = full
        snapshot = state_at(engine, at_us, scope)
    if as_json:
        out = snapshot.to_dict()
        out["scope"] = scope.project_label
        out["notes"] = [*scope.notes, *snapshot.notes]
        print_json(_plain(out))
        return
    _notes(scope.notes)
    _state_text(snapshot, scope.project_label or "all projects")
    _notes(snapshot.notes)


def _state_scope(engine: Any, project: str | None, all_projects: bool, session: str | None) -> Scope:
    from agentlog.query.scope import resolve_projects

    everywhere = all_projects or (bool(session) and not project)
    return resolve_projects(engine, project, everywhere)


__all__ = ["query_cmd", "trace_cmd", "why_cmd", "state_cmd"]
