"""``agentlog bench run`` (every step, each in its own process) and the commands that run one of
its steps alone with their own options (``bench proofs``, ``team``, ``web``)."""

from __future__ import annotations

from typing import Any, Callable

import click

from agentlog.bench.cli_output import print_json, stderr


def rss_cap_bytes(gb: float | None) -> int:
    from agentlog.bench.harness import default_rss_cap_bytes

    return int(gb * (1 << 30)) if gb is not None else default_rss_cap_bytes()


STEPS_MODULE_HELP = "Python module (dotted name or .py file) whose STEPS dict adds steps (tests); also $AGENTLOG_BENCH_STEPS_MODULE."


@click.command(name="run")
@click.option("--events", type=click.IntRange(1), default=200_000, show_default=True, help="Workload size; every step scales from it.")
@click.option("--seed", type=int, default=20261130, show_default=True, help="Seed of the workload generator.")
@click.option("--only", default=None, help="Run only these steps (comma-separated).")
@click.option("--skip", default=None, help="Skip these steps (comma-separated).")
@click.option("--out", default="bench-results/run", show_default=True, help="Directory for results.json, results.md, step files and logs.")
@click.option("--time-cap-secs", type=click.FloatRange(0.1), default=600.0, show_default=True, help="Soft budget per step; killed at twice this.")
@click.option("--rss-cap-gb", type=click.FloatRange(0.01), default=None, help="Kill a step above this resident set [default: 75 % of RAM].")
@click.option("--steps-module", default=None, help=STEPS_MODULE_HELP)
@click.option(
    "--cache-dir", default=None, type=click.Path(file_okay=False),
    help="Keep the loaded logs and built stores here and reuse them in later runs (same size and seed); "
    "also $AGENTLOG_BENCH_CACHE_DIR. [default: <out>/.workload-cache, removed at the end]",
)
@click.option("--list", "list_steps", is_flag=True, help="List the steps and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print results.json to stdout at the end.")
def bench_run(
    events: int, seed: int, only: str | None, skip: str | None, out: str, time_cap_secs: float, rss_cap_gb: float | None,
    steps_module: str | None, cache_dir: str | None, list_steps: bool, as_json: bool,
) -> None:  # fmt: skip
    """Run every benchmark step, each in its own process; write results.json and results.md.

    Peak RSS is measured per step (the child's getrusage and VmHWM, and the
    parent polling every 250 ms). A step above the RSS cap or past twice the
    time cap is killed and recorded as not run, and the run goes on.
    results.json is rewritten after every step.
    """
    import os

    from rich.console import Console

    from agentlog.bench import harness
    from agentlog.bench.report import fmt_bytes, fmt_secs
    from agentlog.bench.roots import CACHE_DIR_ENV

    if cache_dir:
        os.makedirs(cache_dir, exist_ok=True)
        os.environ[CACHE_DIR_ENV] = os.path.abspath(cache_dir)  # the step processes inherit it
    module = harness.steps_module_spec(steps_module)
    reg = harness.registry(module)
    if list_steps:
        for name, fn in reg.items():
            click.echo(f"{name}\t{harness.describe_step(fn)}")
        return
    try:
        harness.select(list(reg), harness.split_names(only), harness.split_names(skip))
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    rss_cap = rss_cap_bytes(rss_cap_gb)
    console.print(
        f"agentlog bench run: {events:,} events, seed {seed}, time cap {time_cap_secs:g} s, RSS cap {fmt_bytes(rss_cap)} → {out}"
    )
    status_ctx = console.status("starting", spinner="dots")
    status_ctx.start()
    current = [""]

    def on_start(name: str) -> None:
        current[0] = name
        status_ctx.update(f"{name}: starting")

    def on_status(line: str) -> None:
        status_ctx.update(f"{current[0]}: {line[-100:]}" if line else f"{current[0]}: running")

    def on_done(entry: dict[str, object]) -> None:
        from rich.markup import escape

        st = str(entry.get("status"))
        colour = {"ok": "green", "capped": "yellow"}.get(st, "red")
        rss = entry.get("peak_rss") or {}
        assert isinstance(rss, dict)
        own = max((v for k, v in rss.items() if k in ("ru_maxrss_bytes", "vmhwm_bytes") and v), default=None)
        seen = rss.get("observed_group_bytes") or None
        wall = entry.get("wall_secs")
        line = (
            f"{escape(str(entry['name'])):<16} [{colour}]{st:<8}[/] {fmt_secs(wall if isinstance(wall, float) else None):>10}  "
            f"peak RSS {fmt_bytes(own)}, observed {fmt_bytes(seen if isinstance(seen, int) else None)}"
        )
        if entry.get("reason"):
            line += f"  — {escape(str(entry['reason']))}"
        console.print(line, markup=True)

    try:
        results = harness.run_all(
            out_dir=out, events=events, seed=seed, only=harness.split_names(only), skip=harness.split_names(skip),
            time_cap_secs=time_cap_secs, rss_cap_bytes=rss_cap, steps_module=module,
            on_start=on_start, on_status=on_status, on_done=on_done,
        )  # fmt: skip
    except harness.Interrupted as e:
        status_ctx.stop()
        console.print(f"interrupted ({e}); partial results in {os.path.join(out, 'results.json')}")
        raise SystemExit(130) from None
    finally:
        status_ctx.stop()
    console.print(f"results: {os.path.join(out, 'results.json')}, report: {os.path.join(out, 'results.md')} ({fmt_secs(results['run']['wall_secs'])})")
    if as_json:
        print_json(results)


def one_step_options(out: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The options of a command that runs one step of `bench run` alone (`bench proofs`, `bench team`):
    --seed, --out, --cache-dir, --json, and the click context (to invoke `bench run`)."""
    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        for option in reversed((
            click.option("--seed", type=int, default=20261130, show_default=True, help="Seed of the workload generator."),
            click.option("--out", default=out, show_default=True, help="Directory for results.json and results.md."),
            click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
                         help="Keep the loaded logs and built stores here and reuse them in later runs (same size and seed)."),
            click.option("--json", "as_json", is_flag=True, help="Print results.json to stdout at the end."),
            click.pass_context,
        )):
            fn = option(fn)
        return fn
    return wrap


@click.command(name="proofs")
@click.option("--events", type=click.IntRange(1), default=1_450_000, show_default=True,
              help="Frames in the tree (the workload's events, loaded into logs first).")
@one_step_options("bench-results/proofs")
def bench_proofs(ctx: click.Context, events: int, seed: int, out: str, cache_dir: str | None, as_json: bool) -> None:
    """The Merkle tree (issue 28): ingest with it against without, bytes per frame, inclusion
    and consistency proof times and sizes, checkpoint signing, and whole-process prove and
    standalone verification. The `proofs` step of `bench run`, alone.

    Example: agentlog bench proofs --events 200000
    """
    ctx.invoke(bench_run, events=events, seed=seed, only="proofs", skip=None, out=out, time_cap_secs=3600.0,
               rss_cap_gb=None, steps_module=None, cache_dir=cache_dir, list_steps=False, as_json=as_json)


@click.command(name="team")
@click.option("--events", type=click.IntRange(1), default=1_450_000, show_default=True,
              help="Events of the generated workload published as the 1x tables.")
@click.option("--scale", type=click.IntRange(2, 64), default=4, show_default=True,
              help="Machines' worth in the larger tables (copies of the 1x tables as further machines).")
@click.option("--rounds", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Interleaved rounds of every query, engine and size (median and p95 reported).")
@click.option("--s3rver/--no-s3rver", "s3rver", default=True, show_default=True,
              help="Also publish to s3rver (an S3 server from npm that serves ranges from files; installed once into "
                   "~/.cache/agentlog/servers, needs node and npm) and run the duckdb queries on it.")
@one_step_options("bench-results/team")
def bench_team(ctx: click.Context, events: int, scale: int, rounds: int, s3rver: bool, seed: int, out: str,
               cache_dir: str | None, as_json: bool) -> None:
    """Team tables (issue 31): `team publish` to a local S3 server (events/s, MB/s; and to file://),
    then five org queries at 1x and --scale times that, each a whole `team query` process on duckdb,
    daft locally and daft on a two-worker Ray cluster on loopback: wall time, peak memory, growth.

    Starts moto's S3 server, s3rver and the Ray cluster itself and stops them at the end; needs
    `pip install 'agentlog[team,test]'` (daft, ray, boto3, moto[server]).

    Example: agentlog bench team --events 200000 --scale 4 --rounds 3
    """
    import importlib.util
    import os

    from agentlog.bench.team_steps import ROUNDS_ENV, S3RVER_ENV, SCALE_ENV

    missing = [m for m in ("daft", "ray", "boto3", "moto") if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(f"bench team needs {', '.join(missing)}: pip install 'agentlog[team,test]'")
    os.environ[SCALE_ENV], os.environ[ROUNDS_ENV] = str(scale), str(rounds)  # the step's process inherits them
    os.environ[S3RVER_ENV] = "1" if s3rver else "0"
    ctx.invoke(bench_run, events=events, seed=seed, only="team", skip=None, out=out, time_cap_secs=7200.0,
               rss_cap_gb=None, steps_module="agentlog.bench.team_steps", cache_dir=cache_dir, list_steps=False,
               as_json=as_json)


@click.command(name="web")
@click.option("--events", type=click.IntRange(1), default=1_450_000, show_default=True,
              help="Events of the generated workload the dashboard serves (and 200,000 when fewer).")
@click.option("--parts", default="pages,session,first,live", show_default=True,
              help="What to time, comma-separated: pages (every page and API route), session (a 10,000-event "
                   "session's page), first (start to first page), live (hook to browser).")
@one_step_options("bench-results/web")
def bench_web(ctx: click.Context, events: int, parts: str, seed: int, out: str, cache_dir: str | None,
              as_json: bool) -> None:
    """The dashboard (issue 37): every page and API route (first, p50, p95), the page of a
    10,000-event session, start to first page over an empty, a small and the full data root,
    and hook to browser over SSE with the daemon running. The `web` step of `bench run`, alone.

    Example: agentlog bench web --events 200000 --parts first
    """
    import os

    from agentlog.bench.web_steps import PARTS, PARTS_ENV

    wanted = [p.strip() for p in parts.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(PARTS))
    if unknown or not wanted:
        raise click.UsageError(f"--parts takes {', '.join(PARTS)} (comma-separated); not {', '.join(unknown) or parts!r}")
    os.environ[PARTS_ENV] = ",".join(wanted)  # the step's process inherits it
    ctx.invoke(bench_run, events=events, seed=seed, only="web", skip=None, out=out, time_cap_secs=3600.0,
               rss_cap_gb=None, steps_module=None, cache_dir=cache_dir, list_steps=False, as_json=as_json)


__all__ = ["STEPS_MODULE_HELP", "bench_proofs", "bench_run", "bench_team", "bench_web", "one_step_options", "rss_cap_bytes"]
