"""``agentlog bench``: benchmarks that report numbers (never pass/fail).

It prints with its own two helpers (:func:`print_json`, :func:`stderr`), the same
output as ``agentlog.cli.output``'s: bench sits above the CLI and imports only
the public API, ``agentlog.core`` and ``agentlog.operations``, never a surface.
"""

from __future__ import annotations

import json
from typing import Any

import click

from agentlog.bench.cli_output import print_json, stderr
from agentlog.bench.cli_run import STEPS_MODULE_HELP, bench_proofs, bench_run, bench_team, bench_web, rss_cap_bytes

@click.group(name="bench")
def bench() -> None:
    """Measure agentlog on this machine; results go to JSON and Markdown."""


@bench.command(name="hook")
@click.option("--runs", type=click.IntRange(5, 100000), default=200, show_default=True, help="Timed runs per variant.")
@click.option("--sizes", default="1000,10000,50000", show_default=True, help="Session sizes (frames) to append into.")
@click.option("--concurrent", type=click.IntRange(0, 500), default=50, show_default=True, help="Hooks started at once into one session (0 skips).")
@click.option("--concurrent-rounds", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="Rounds of the hooks-at-once batch (median and p95 reported).")
@click.option("--durability", type=click.Choice(["strict", "relaxed"]), default="strict", show_default=True)
@click.option("--native/--no-native", default=True, show_default=True,
              help="Also time the native client (built here) with a real daemon answering.")
@click.option("--out", default="bench-results", show_default=True, help="Directory for hook.json and hook.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_hook(runs: int, sizes: str, concurrent: int, concurrent_rounds: int, durability: str, native: bool, out: str, as_json: bool) -> None:
    """Hook wall time vs /usr/bin/true and the bare interpreter, by session size.

    The Python hook and the native client (with `agentlog daemon run` answering) run
    interleaved with the two baselines, into the same sessions.

    Example: agentlog bench hook --runs 100 --durability relaxed
    """
    from rich.progress import Progress

    from agentlog.bench.hookbench import run_hook_bench, write_results

    size_list = [int(s) for s in sizes.split(",") if s.strip()]
    with Progress(console=stderr(), transient=True, disable=as_json) as bar:
        task = bar.add_task("bench hook", total=None)
        result = run_hook_bench(
            runs=runs, sizes=size_list, concurrent=concurrent, concurrent_rounds=concurrent_rounds,
            durability=durability, native=native,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    md = write_results(result, out, "hook")
    if as_json:
        print_json(result)
    else:
        click.echo(md)


@bench.command(name="verify")
@click.option("--sizes", default="1000,10000,50000", show_default=True, help="Log sizes (frames of ~1.5 KB).")
@click.option("--repeat", type=click.IntRange(1, 1000), default=9, show_default=True, help="Timed runs per size and job count.")
@click.option("--out", default="bench-results", show_default=True, help="Directory for verify.json and verify.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_verify(sizes: str, repeat: int, out: str, as_json: bool) -> None:
    """Verify throughput (MB/s) with --jobs 1 and 2, in process and whole command."""
    from agentlog.bench.verifybench import run_verify_bench
    from agentlog.bench.hookbench import write_results

    result = run_verify_bench(sizes=[int(s) for s in sizes.split(",") if s.strip()], repeat=repeat)
    md = write_results(result, out, "verify")
    if as_json:
        print_json(result)
    else:
        click.echo(md)


@bench.command(name="ship")
@click.option("--mb", type=click.FloatRange(0.01, 4096), default=64, show_default=True,
              help="MiB of ~1.5 KB frames per shipped session.")
@click.option("--rounds", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Interleaved rounds of each variant (median and p95 reported).")
@click.option("--sessions-idle", type=click.IntRange(1, 1_000_000), default=1000, show_default=True,
              help="Already-shipped sessions the idle pass walks over.")
@click.option("--requests", type=click.IntRange(10, 1_000_000), default=300, show_default=True,
              help="Requests per client per round for the requests-per-second rows.")
@click.option("--out", default="bench-results", show_default=True, help="Directory for ship.json and ship.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_ship(mb: float, rounds: int, sessions_idle: int, requests: int, out: str, as_json: bool) -> None:
    """Shipping to a vault over loopback: frame MB/s for one and four sessions, zstd and the
    AEAD alone, vault requests per second, bytes stored per byte of log, an idle pass, pull MB/s.

    A real `agentlog vault serve` runs on a free loopback port; ships and pulls are whole
    `python -m agentlog` processes. Everything lives in a temporary directory, removed at the end.

    Example: agentlog bench ship --mb 16 --rounds 3
    """
    from agentlog.bench.common import write_results
    from agentlog.bench.shipbench import run_ship_bench

    err = stderr()
    result = run_ship_bench(mb=mb, rounds=rounds, sessions_idle=sessions_idle, requests=requests,
                            progress=lambda line: err.print(f"bench ship: {line}", markup=False))
    md = write_results(result, out, "ship")
    if as_json:
        print_json(result)
    else:
        click.echo(md)


@bench.command(name="relevance")
@click.option("--work", default=None, help="Directory for the corpus (kept: a second run reuses it); a temporary one if not given.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_relevance(work: str | None, as_json: bool) -> None:
    """Search quality on the relevance set (issue 35): recall@5 and nDCG@10 in each mode, over every
    query, each kind (keyword, natural, paraphrase) and the held-out third.

    Builds the corpus (the shared Claude Code fixtures and generated sessions) and searches it in
    lexical, semantic and hybrid mode (the last two with the 'semantic' extra).

    Example: agentlog bench relevance --work /tmp/relevance
    """
    import tempfile

    from agentlog.bench.search_steps import relevance_table

    with tempfile.TemporaryDirectory(prefix="agentlog-relevance-") as tmp:
        result = relevance_table(work or tmp)
    if as_json:
        print_json(result["raw"])
        return
    from rich.console import Console
    from rich.table import Table

    t = result["table"]
    table = Table(title=t["title"])
    for column in t["columns"]:
        table.add_column(column)
    for row in t["rows"]:
        table.add_row(*row)
    Console(highlight=False).print(table)
    if "index" in result["raw"]:
        index = result["raw"]["index"]
        stderr().print(f"semantic index: {index['vectors']} event vectors, {index['summaries']} turn summaries")


@bench.command(name="step")
@click.argument("name")
@click.option("--events", type=click.IntRange(1), default=200_000, show_default=True)
@click.option("--seed", type=int, default=20261130, show_default=True)
@click.option("--out", default=None, help="Write step-NAME.json into this directory.")
@click.option("--time-cap-secs", type=click.FloatRange(0.1), default=600.0, show_default=True, help="Soft budget: loops stop here (result marked capped).")
@click.option("--rss-cap-gb", type=click.FloatRange(0.01), default=None, help="Told to the step; enforcing it is the parent's job.")
@click.option("--steps-module", default=None, help=STEPS_MODULE_HELP)
@click.option("--parent-pid", type=int, default=None, hidden=True)
@click.option("--json", "as_json", is_flag=True, help="Print the step's result object as JSON.")
def bench_step(
    name: str, events: int, seed: int, out: str | None, time_cap_secs: float, rss_cap_gb: float | None,
    steps_module: str | None, parent_pid: int | None, as_json: bool,
) -> None:  # fmt: skip
    """Run one benchmark step in this process (what `bench run` starts per step)."""
    from agentlog.bench import harness
    from agentlog.bench.common import markdown_table

    try:
        result = harness.run_single(
            name, events=events, seed=seed, time_cap_secs=time_cap_secs, rss_cap_bytes=rss_cap_bytes(rss_cap_gb),
            steps_module=harness.steps_module_spec(steps_module), out_dir=out, parent_pid=parent_pid,
        )  # fmt: skip
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if as_json:
        print_json(result)
    elif not out:
        for table in result["tables"]:
            click.echo(f"## {table['title']}\n\n{markdown_table(table['columns'], table['rows'])}\n")
            if table.get("note"):
                click.echo(table["note"] + "\n")


@bench.command(name="report")
@click.argument("results_json", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", default=None, help="Markdown file to write [default: results.md beside the JSON]; '-' prints it.")
def bench_report(results_json: str, out: str | None) -> None:
    """Render results.md from a results.json of `bench run`."""
    import os

    from agentlog.bench.report import render_markdown

    with open(results_json, encoding="utf-8") as f:
        try:
            results = json.load(f)
        except ValueError as e:
            raise click.ClickException(f"{results_json} is not JSON: {e}") from None
    if not isinstance(results, dict) or not isinstance(results.get("run"), dict):
        raise click.ClickException(f"{results_json} is not the results.json of `agentlog bench run` (no \"run\" object)")
    md = render_markdown(results)
    if out == "-":
        click.echo(md)
        return
    path = out or os.path.join(os.path.dirname(os.path.abspath(results_json)), "results.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(md)
    stderr().print(f"wrote {path}")


@bench.command(name="sample")
@click.option("--events", "events", type=click.IntRange(0), required=True, help="Number of samples to print.")
@click.option("--seed", type=int, default=None, help="Workload seed (default 20261130).")
@click.option("--canonical", is_flag=True, help="Print the canonical events the capture path makes of them instead.")
def bench_sample(events: int, seed: int | None, canonical: bool) -> None:
    """Print the seeded workload as JSON lines (same seed, byte-identical output).

    Each line is a sample: the agent's native hook payload (or Claude Code
    transcript line) with its stream index, synthetic time, session and the
    kind the capture path must produce. With --canonical, the canonical
    events instead: the hook's own normalisation (redaction included) for hook
    samples, in stream order; then the events the importer `agentlog import`
    runs makes of the transcript samples (written as transcript files), session
    by session.
    """
    import contextlib
    import sys

    from agentlog.bench.workload import DEFAULT_SEED, Canonicalizer, generate
    from agentlog.core.fastjson import dumps_bytes

    out = sys.stdout.buffer
    chunk: list[bytes] = []
    size = 0

    def put(item: dict[str, Any]) -> None:
        nonlocal size
        line = dumps_bytes(item)
        chunk.append(line)
        chunk.append(b"\n")
        size += len(line) + 1
        if size >= 1 << 20:
            out.write(b"".join(chunk))
            chunk.clear()
            size = 0

    try:
        with Canonicalizer() if canonical else contextlib.nullcontext() as canon:
            for sample in generate(events, DEFAULT_SEED if seed is None else seed):
                for item in canon(sample) if canon is not None else [sample]:
                    put(item)
            if canon is not None:
                for _, ev in canon.imported():
                    put(ev)
        out.write(b"".join(chunk))
        out.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@bench.command(name="load")
@click.option("--events", "events", type=click.IntRange(1), required=True, help="Number of samples to load.")
@click.option("--seed", type=int, default=None, help="Workload seed (default 20261130).")
@click.option("--batch", type=click.IntRange(1), default=1000, show_default=True,
              help="Events per append (per session) and most events buffered at once.")
@click.option("--jobs", type=click.IntRange(1, 64), default=None,
              help="Worker processes for capture and append (default: CPUs, at most 4; 1 = all in this process).")
@click.option("--append", "allow_append", is_flag=True, help="Load into a data root that already has logs.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_load(events: int, seed: int | None, batch: int, jobs: int | None, allow_append: bool, as_json: bool) -> None:
    """Write the workload's canonical events into the data root's session logs (AGENTLOG_HOME).

    Same library calls as the hook (capture path, SessionLog.append) for hook
    samples, batched per session, durability relaxed while loading; transcript
    samples are written as Claude Code transcript files and imported at the
    end by the importer `agentlog import` runs; one fsync per file at the end.
    With --jobs N, this process generates and N workers capture, append and
    import, each owning a disjoint set of sessions.
    """
    import os

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from agentlog.bench.workload import DEFAULT_SEED, load
    from agentlog.bench.workload.load import default_jobs
    from agentlog.core.paths import data_root, logs_dir

    root = data_root()
    logs = logs_dir(root)
    if not allow_append and os.path.isdir(logs) and any(
        name.endswith((".jsonl", ".jsonl.zst")) for _, _, files in os.walk(logs) for name in files
    ):
        raise click.UsageError(f"{logs} already holds session logs; use an empty AGENTLOG_HOME or pass --append")
    columns = (TextColumn("bench load"), BarColumn(), MofNCompleteColumn(), TextColumn("samples"),
               TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=stderr(), transient=True) as bar:
        task = bar.add_task("load", total=events)
        result = load(events, DEFAULT_SEED if seed is None else seed, root=root, batch=batch,
                      jobs=default_jobs() if jobs is None else jobs,
                      progress=lambda done, total: bar.update(task, completed=done))
    if as_json:
        print_json(result)
        return
    s = result["seconds"]
    click.echo(
        f"loaded {result['events']:,} events into {result['sessions']:,} session logs under {root} "
        f"in {s['wall']:.1f} s: {result['events_per_s']:,.0f} events/s, "
        f"{result['bytes_written'] / 1e6:,.1f} MB written ({result['mb_per_s']:.1f} MB/s)\n"
        f"{result['jobs']} job(s); time: generate {s['generate']:.1f} s, capture {s['capture']:.1f} s, "
        f"append {s['append']:.1f} s, fsync {s['fsync']:.1f} s"
        f"{' (summed over workers)' if result['jobs'] > 1 else ''}; "
        f"{result['events_per_s_excluding_generation']:,.0f} events/s excluding generation"
    )


@bench.command(name="share")
@click.option("--runs", type=click.IntRange(1, 1000), default=5, show_default=True, help="Runs of each process.")
@click.option("--events", type=click.IntRange(100), default=10_000, show_default=True,
              help="Events of the generated session.")
@click.option("--out", default="bench-results", show_default=True, help="Directory for share.json and share.md.")
@click.option("--hooks", type=click.IntRange(1), default=200, show_default=True,
              help="Python hook runs per root in the encryption-at-rest rows.")
@click.option("--at-rest-only", is_flag=True, help="Only the encryption-at-rest rows (hook, import, ingest).")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_share(runs: int, events: int, out: str, hooks: int, at_rest_only: bool, as_json: bool) -> None:
    """Export time of `agentlog share` (HTML and Markdown) for the largest fixture session and a
    generated session of --events events, `snapshot create`/`restore` MB/s of log bytes, and
    hook, import and ingest throughput with encryption at rest against without.

    Example: agentlog bench share --runs 5; agentlog bench share --at-rest-only --hooks 100 --runs 3
    """
    import os

    from agentlog.bench import atrest_steps
    from agentlog.bench.share_steps import markdown, run_share_bench
    from agentlog.core.fileio import write_atomic

    console = stderr()

    def note(text: str) -> None:
        if not as_json:
            console.print(text)

    result: dict[str, Any] = {"bench": "share", "runs": runs, "roots": []} if at_rest_only else \
        run_share_bench(runs=runs, events=events, note=note)
    result["at_rest"] = atrest_steps.run_at_rest_bench(hooks=hooks, runs=runs, events=events, note=note)
    md = ("" if at_rest_only else markdown(result)) + atrest_steps.markdown(result["at_rest"])
    os.makedirs(out, exist_ok=True)
    write_atomic(os.path.join(out, "share.json"), (json.dumps(result, indent=1) + "\n").encode())
    write_atomic(os.path.join(out, "share.md"), md.encode())
    if as_json:
        print_json(result)
    else:
        click.echo(md)


@bench.command(name="classify")
@click.option("--size", type=click.IntRange(100, 10_000_000), default=30_000, show_default=True,
              help="Output size (bytes) of the cost measurement.")
@click.option("--runs", type=click.IntRange(10, 1_000_000), default=2000, show_default=True,
              help="Classifications timed per output shape.")
@click.option("--data", "data_dir", metavar="DIR", help="The labelled set (default: tests/data/failures of this checkout).")
@click.option("--hook-rounds", type=click.IntRange(0, 10_000), default=100, show_default=True,
              help="Rounds of whole hook processes, a finished and a failed call each (0 skips).")
@click.option("--out", default="bench-results", show_default=True, help="Directory for classify.json and classify.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_classify(size: int, runs: int, data_dir: str | None, hook_rounds: int, out: str, as_json: bool) -> None:
    """Failure classes: accuracy and a confusion table on the labelled set, and the cost per failed call.

    Every labelled error goes through the real capture path; the keyword
    classifier this one replaced is scored on the same cases as the baseline.

    Example: agentlog bench classify --runs 500
    """
    from rich.progress import Progress

    from agentlog.bench.classifybench import run_classify_bench
    from agentlog.bench.common import write_results

    with Progress(console=stderr(), transient=True, disable=as_json) as bar:
        task = bar.add_task("bench classify", total=None)
        try:
            result = run_classify_bench(size, runs, data_dir,
                                        progress=lambda done, total: bar.update(task, completed=done, total=total),
                                        hook_rounds=hook_rounds)
        except FileNotFoundError as e:
            raise click.ClickException(str(e)) from None
    md = write_results(result, out, "classify")
    if as_json:
        print_json(result)
    else:
        click.echo(md)


@bench.command(name="agents")
@click.option("--agent", "agents", multiple=True, type=click.Choice(["claude-code", "codex", "gemini-cli"]),
              help="Agents to run (repeat; default: all three).")
@click.option("--scenario", "scenarios", multiple=True, help="Scenarios to run (repeat; default: success, nonzero_exit).")
@click.option("--rounds", type=click.IntRange(1, 100), default=5, show_default=True, help="Runs each way (with and without hooks).")
@click.option("--all-releases", is_flag=True, help="Also the older pinned release of each agent.")
@click.option("--out", default="bench-results", show_default=True, help="Directory for agents.json and agents.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_agents(agents: tuple[str, ...], scenarios: tuple[str, ...], rounds: int, all_releases: bool, out: str,
                 as_json: bool) -> None:
    """The real agent CLIs (npm releases, scripted model on loopback) with agentlog's hooks against without them.

    Reports each run's wall time both ways, the time added per tool call, and how
    soon after the CLI exits its record is queryable. Needs node and npm (the
    releases install once into ~/.cache/agentlog/agents).

    Example: agentlog bench agents --agent codex --rounds 3
    """
    from rich.progress import Progress

    from agentlog.bench.agents.timing import DEFAULT_SCENARIOS, run_agents_bench
    from agentlog.bench.common import write_results

    with Progress(console=stderr(), transient=True, disable=as_json) as bar:
        task = bar.add_task("bench agents", total=None)
        result = run_agents_bench(list(agents), list(scenarios or DEFAULT_SCENARIOS), rounds, all_releases,
                                  progress=lambda done, total: bar.update(task, completed=done, total=total))
    md = write_results(result, out, "agents")
    if as_json:
        print_json(result)
    else:
        click.echo(md)


@bench.command(name="sandbox")
@click.option("--runs", type=click.IntRange(5, 100000), default=200, show_default=True,
              help="Timed `true` commands per variant (direct, brokered).")
@click.option("--size-mb", type=click.IntRange(1, 4096), default=256, show_default=True,
              help="MB of output relayed for the throughput figure.")
@click.option("--out", default="bench-results", show_default=True, help="Directory for sandbox.json and sandbox.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_sandbox(runs: int, size_mb: int, out: str, as_json: bool) -> None:
    """Brokered against direct `true` inside one `agentlog run`, ruleset build cost, brokered MB/s.

    Needs Landlock (Linux 5.13+). Reports median, p95 and p99; never pass or fail.

    Example: agentlog bench sandbox --runs 500 --size-mb 512
    """
    from agentlog.bench.common import write_results
    from agentlog.bench.sandboxbench import run_sandbox_bench

    res = run_sandbox_bench(runs, size_mb)
    md = write_results(res, out, "sandbox")
    if as_json:
        print_json(res)
    else:
        click.echo(md)


@bench.command(name="otel")
@click.option("--requests", type=click.IntRange(4, 1_000_000), default=500, show_default=True,
              help="OTLP requests per signal and sender count (split among the senders).")
@click.option("--per-request", type=click.IntRange(1, 10_000), default=50, show_default=True,
              help="Log records (or metric points) in each request.")
@click.option("--export-events", type=click.IntRange(100, 10_000_000), default=20_000, show_default=True,
              help="Events of the synthetic workload exported as spans.")
@click.option("--arrival-runs", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Records timed from their request to a row of the telemetry view.")
@click.option("--out", default="bench-results", show_default=True, help="Directory for otel.json and otel.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_otel(requests: int, per_request: int, export_events: int, arrival_runs: int, out: str,
               as_json: bool) -> None:
    """The OTLP receiver's records/s for protobuf logs and metrics (one and four senders),
    its resident memory under that flood, the export's spans/s, and the time from a
    record's arrival to being queryable.

    Example: agentlog bench otel --requests 200 --per-request 50
    """
    from agentlog.bench.common import write_results
    from agentlog.bench.otel_steps import run_otel_bench

    stderr().print("bench otel: running (receiver floods, export, arrival)…")
    result = run_otel_bench(requests, per_request, export_events=export_events, arrival_runs=arrival_runs)
    md = write_results(result, out, "otel")
    if as_json:
        print_json(result)
    else:
        click.echo(md)


for _command in (bench_run, bench_proofs, bench_team, bench_web):
    bench.add_command(_command)
