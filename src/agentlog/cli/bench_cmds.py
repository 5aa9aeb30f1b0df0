"""``agentlog bench``: benchmarks that report numbers (never pass/fail)."""

from __future__ import annotations

import click

from .output import print_json, stderr


@click.group(name="bench")
def bench() -> None:
    """Measure agentlog on this machine; results go to JSON and Markdown."""


@bench.command(name="hook")
@click.option("--runs", type=click.IntRange(5, 100000), default=200, show_default=True, help="Timed runs per variant.")
@click.option("--sizes", default="1000,10000,50000", show_default=True, help="Session sizes (frames) to append into.")
@click.option("--concurrent", type=click.IntRange(0, 500), default=50, show_default=True, help="Hooks started at once into one session (0 skips).")
@click.option("--durability", type=click.Choice(["strict", "relaxed"]), default="strict", show_default=True)
@click.option("--out", default="bench-results", show_default=True, help="Directory for hook.json and hook.md.")
@click.option("--json", "as_json", is_flag=True, help="Print the result object as JSON.")
def bench_hook(runs: int, sizes: str, concurrent: int, durability: str, out: str, as_json: bool) -> None:
    """Hook wall time vs /usr/bin/true and the bare interpreter, by session size."""
    from rich.progress import Progress

    from ..bench.hookbench import run_hook_bench, write_results

    size_list = [int(s) for s in sizes.split(",") if s.strip()]
    with Progress(console=stderr(), transient=True, disable=as_json) as bar:
        task = bar.add_task("bench hook", total=None)
        result = run_hook_bench(
            runs=runs, sizes=size_list, concurrent=concurrent, durability=durability,
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
    from ..bench.verifybench import run_verify_bench
    from ..bench.hookbench import write_results

    result = run_verify_bench(sizes=[int(s) for s in sizes.split(",") if s.strip()], repeat=repeat)
    md = write_results(result, out, "verify")
    if as_json:
        print_json(result)
    else:
        click.echo(md)
