"""``agentlog demo``."""

from __future__ import annotations

import sys

import click
from rich.progress import Progress

from agentlog.operations.demo import DemoError, load_payloads, result_dict, run_demo
from agentlog.cli.output import print_json, print_table, stderr, stdout


@click.command(name="demo")
@click.option("--home", default=None, help="Fresh data root to record into (default: $AGENTLOG_HOME when it is "
                                           "set, else ./agentlog-demo).")
@click.option("--workers", type=click.IntRange(1, 32), default=4, show_default=True, help="Sessions replayed in parallel.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--no-serve", is_flag=True, help="Do not start the dashboard at the end (it starts only on a terminal).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="The dashboard's port (default: a free one).")
def demo_cmd(home: str | None, workers: int, as_json: bool, no_serve: bool, port: int) -> None:
    """Replay real Claude Code hook payloads through `agentlog hook`, verify, ingest, summarise.

    Every payload runs the installed hook command as its own process, exactly
    as Claude Code would run it; then every session log is verified, ingested
    into the columnar store and summarised back from it with DuckDB. On a
    terminal it ends by serving the dashboard over the demo's data and
    printing its address (Ctrl-C stops it; --no-serve skips it).

    Example: agentlog demo --home /tmp/agentlog-demo --no-serve
    """
    import os

    if home is None:
        home = os.environ.get("AGENTLOG_HOME") or "./agentlog-demo"
    _, payloads = load_payloads()
    try:
        with Progress(console=stderr(), transient=True, disable=as_json) as bar:
            task = bar.add_task("replaying hook payloads", total=len(payloads))
            result = run_demo(home, workers=workers, progress=lambda n: bar.advance(task, n))
    except DemoError as e:
        raise click.ClickException(str(e)) from e
    if as_json:
        print_json(result_dict(result))
    else:
        rows = []
        totals: dict[str, int] = {}
        for s in result.sessions:
            for k, v in s.kinds.items():
                totals[k] = totals.get(k, 0) + v
            calls = s.kinds.get("tool_call_finished", 0) + s.kinds.get("tool_call_failed", 0)
            other = s.frames - calls - s.kinds.get("prompt_submitted", 0)
            rows.append(
                {
                    "session": s.session[:13],
                    "frames": s.frames,
                    "prompts": s.kinds.get("prompt_submitted", 0),
                    "tool results": calls,
                    "failed": s.failures,
                    "other": other,
                    "redactions": s.redactions,
                    "verify": s.verify,
                }
            )
        print_table(
            rows,
            ["session", "frames", "prompts", "tool results", "failed", "other", "redactions", "verify"],
            title=f"agentlog demo: {len(result.sessions)} sessions recorded in {result.home}",
        )
        print_table(
            [{"kind": k, "events": v} for k, v in sorted(totals.items(), key=lambda kv: -kv[1])],
            ["kind", "events"],
            title="events by kind",
        )
        if result.store_tools:
            print_table(result.store_tools, ["tool", "ok", "failed", "largest_content"],
                        title=f"tool calls, read back from the columnar store ({result.store_events} events ingested)")
        if result.timeline:
            from rich.rule import Rule

            from agentlog.cli.people_cmds import print_failures, print_timeline

            out = stdout()
            out.print(Rule("timeline: sessions → turns → attempts", style="dim"))
            print_timeline(result.timeline)
            if result.failures:
                out.print()
                print_failures(result.failures,
                               title="failed and superseded attempts (retry: the attempt that tried again)")
        if result.suggestions:
            from rich.rule import Rule

            from agentlog.cli.output import terminal_safe

            out = stdout()
            out.print(Rule("suggested memories (proposals: agentlog memory review|approve|reject ID)", style="dim"))
            for sug in result.suggestions:
                out.print(f"{terminal_safe(sug['title'])}  [{sug['kind']}]  proposal {sug['proposal_id']}",
                          markup=False, highlight=False)
                if sug.get("note"):
                    out.print(f"  {terminal_safe(sug['note'])}", markup=False, highlight=False)
                for ref in sug["evidence"]:
                    seen = ref.get("resolved") or {}
                    what = ", ".join(f"{k} {terminal_safe(str(v))}" for k, v in seen.items() if v is not None)
                    out.print(f"  evidence {ref['type']} {ref['value']} ({terminal_safe(str(ref.get('note', '')))})"
                              f"{': ' + what if what else ''}", markup=False, highlight=False)
        err = stderr()
        err.print(f"replayed {result.payloads} payloads from {result.source}")
        err.print(f"hook exit codes non-zero: {result.hook_failures}; hook stderr lines: {result.stderr_lines}")
        err.print(f"next: export AGENTLOG_HOME={result.home}, then agentlog verify, agentlog timeline --all-projects, "
                  "agentlog failures --all-projects, agentlog show ID", markup=False)
    if result.hook_failures or any(s.verify == "broken" for s in result.sessions):
        sys.exit(1)
    if not (no_serve or as_json) and sys.stdout.isatty() and sys.stdin.isatty():
        from agentlog.cli.serve_cmd import run_dashboard

        stderr().print("starting the dashboard over the demo's data (Ctrl-C to stop; --no-serve to skip)")
        try:
            run_dashboard(result.home, port=port)
        except KeyboardInterrupt:
            pass
