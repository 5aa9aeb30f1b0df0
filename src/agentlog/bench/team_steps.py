"""The ``team`` step (issue 31): publishing to S3 and five org queries at 1× and N×.

Run by ``agentlog bench team`` (``bench run --steps-module agentlog.bench.team_steps
--only team``; it is not one of ``bench run``'s own steps: it starts an S3 server and a
Ray cluster). What it does, in order:

1. **Data**: the standard generated workload at ``--events``, ingested and projected
   (:func:`~agentlog.bench.roots.built_root`, cached per run; not timed).
2. **Publish**: a whole ``agentlog team publish --to s3://team/1x --json`` process
   against moto's S3 server on a loopback port, from a fresh data root over that store
   (its own publisher id and team state; the store and projection shared): events/s over
   the process's wall time, and MB/s of the objects it wrote (listed with boto3 after).
   Then the same to ``file://`` (the writer without the S3 emulator), and to s3rver (an
   S3 server from npm that serves a range from its file, as S3 does, where moto copies the
   whole object; skipped with :data:`S3RVER_ENV` = 0 or without node and npm, and said).
   No Ray cluster runs yet: its idle processes would take CPU from the publisher.
3. **N×**: generating and projecting N times the events would take most of an hour
   here, so the N× tables are made from the published 1× tables: each table read in
   Arrow batches and written with deltalake to ``s3://team/<N>x`` N times — the first
   copy as published, the others as further machines (``machine``, ``host`` and
   ``publisher`` rewritten, and the ids the queries join or count on made unique per copy:
   ``event_id``, ``session_id``, ``provider_session_id``, ``turn_id``, ``tool_call_id``,
   ``attempt_id``). Events are written in commits of the publisher's batch size, each
   derived table in one commit per copy, as a publish writes them. The N× tables then hold
   N machines like the first.
4. **Queries**: five org queries (and a floor: ``count(*)`` of sessions) as SQL valid on
   DuckDB and Daft, each a whole ``agentlog team query … --json`` process per engine —
   duckdb; daft on its local runner; daft on a Ray cluster of a head and two worker nodes
   on loopback started here — at 1× and N×, every combination once per round, the rounds
   interleaved; and duckdb's queries at 1× on s3rver in the same rounds. Wall time (median, p95), the process's peak RSS (``wait4``) and, on Ray,
   the peak summed RSS of the cluster's worker processes (polled).

Parameters beyond ``--events`` come from the environment the command sets
(:data:`SCALE_ENV`, :data:`ROUNDS_ENV`, :data:`S3RVER_ENV`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

from agentlog.bench.context import StepContext, StepFn
from agentlog.bench.measure import du
from agentlog.bench.roots import built_root
from agentlog.bench.team_queries import ID_COLUMNS, PATH_SQL, Queries, agentlog_argv, timed

SCALE_ENV = "AGENTLOG_BENCH_TEAM_SCALE"
ROUNDS_ENV = "AGENTLOG_BENCH_TEAM_ROUNDS"
S3RVER_ENV = "AGENTLOG_BENCH_TEAM_S3RVER"
"""``0``: no s3rver rows (the default publishes to it too and runs the duckdb queries on it)."""
DEFAULT_SCALE = 4
DEFAULT_ROUNDS = 3
MACHINE_COLUMNS = ("machine", "host", "publisher")
COPY_TRIES = 4

def _int_env(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, "") or default))
    except ValueError:
        return default


# ----------------------------------------------------------------------------- publishing


def publish_root(ctx: StepContext, built: str) -> str:
    """A data root over ``built``'s logs (linked), store and projection (their files hard-linked:
    they are never written in place; the engine reads no directory outside the root) with its
    own state (copied, without any team state): it publishes everything, as a new publisher."""
    root = ctx.tmpdir()
    os.symlink(os.path.realpath(os.path.join(built, "logs")), os.path.join(root, "logs"))
    for part in ("store", "projection"):
        if os.path.isdir(os.path.join(built, part)):
            shutil.copytree(os.path.join(built, part), os.path.join(root, part), copy_function=os.link)
    state = os.path.join(built, "state")
    if os.path.isdir(state):
        shutil.copytree(state, os.path.join(root, "state"), symlinks=True,
                        ignore=shutil.ignore_patterns("team", "team-id", "tree", "search*", "duckdb-tmp"))
        if os.path.isdir(os.path.join(state, "tree")):
            os.symlink(os.path.realpath(os.path.join(state, "tree")), os.path.join(root, "state", "tree"))
    return root


def _publish(ctx: StepContext, built: str, url: str, env: dict[str, str]) -> dict[str, Any]:
    root = publish_root(ctx, built)
    ctx.progress(f"publishing to {url} (a whole process, timed)")
    r = timed(agentlog_argv("team", "publish", "--to", url, "--json"), {**env, "AGENTLOG_HOME": root}, ctx.tmpdir())
    out = json.loads(r["stdout"])
    return {"secs": r["secs"], "rss": r["rss"], "events": int(out["events"]), "commits": int(out["commits"]),
            "tables": out["tables"], "publisher": out["publisher"]}


# ----------------------------------------------------------------------------- the N× tables


def _rewrite(batch: Any, k: int) -> Any:
    """``batch`` as machine ``k`` (k ≥ 1) would have it: the machine columns and ids suffixed."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    cols = []
    for name, column in zip(batch.column_names, batch.columns):
        if (name in ID_COLUMNS or name in MACHINE_COLUMNS) and (pa.types.is_string(column.type)
                                                                 or pa.types.is_large_string(column.type)):
            column = pc.binary_join_element_wise(column, pa.scalar(f"~{k}", column.type), pa.scalar("", column.type))
        cols.append(column)
    return pa.Table.from_arrays(cols, schema=batch.schema)


def scale_tables(src: Any, dst: Any, copies: int, batch_rows: int, progress: Any) -> dict[str, Any]:
    """Write ``copies`` machines' worth of every team table at ``src`` (a TeamLocation) to ``dst``
    (see the module docstring); seconds and rows per table."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import DeltaError, TableNotFoundError

    from agentlog.api import TEAM_PARTITION_BY, TEAM_TABLES, team_writer_properties

    opts = src.storage_options()
    t0 = time.perf_counter()
    rows: dict[str, int] = {}
    for name in TEAM_TABLES:
        try:
            dt = DeltaTable(src.table_uri(name), storage_options=opts)
        except TableNotFoundError:
            continue
        meta = dt.metadata()
        uri = dst.table_uri(name)
        schema = dt.schema().to_arrow()
        schema = pa.schema(schema) if not isinstance(schema, pa.Schema) else schema
        written = [0]

        def write(table: Any) -> None:
            first = written[0] == 0  # the table's name and description (full or metadata-only) as published
            for attempt in range(COPY_TRIES):  # moto's server now and then answers a part upload with a 500
                try:
                    write_deltalake(uri, table, mode="append", partition_by=list(TEAM_PARTITION_BY),
                                    schema_mode="merge", storage_options=opts, name=meta.name if first else None,
                                    description=meta.description if first else None,
                                    writer_properties=team_writer_properties())
                    break
                except (OSError, DeltaError) as e:
                    if attempt == COPY_TRIES - 1:
                        raise
                    progress(f"{copies}x {name}: a write failed ({' '.join(str(e).split())[:160]}); again")
                    time.sleep(1.0)
            written[0] += table.num_rows

        dataset = dt.to_pyarrow_dataset()
        if name == "events":  # commits of the publisher's batch size, as a publish writes them
            pending: list[Any] = []
            held = 0

            def flush() -> None:
                nonlocal held
                if not pending:
                    return
                table = pa.Table.from_batches(pending).cast(schema)
                for k in range(copies):
                    write(table if k == 0 else _rewrite(table, k))
                pending.clear()
                held = 0
                progress(f"{copies}x events: {written[0]:,} rows written")

            for batch in dataset.to_batches(batch_size=batch_rows):
                if batch.num_rows:
                    pending.append(batch)
                    held += batch.num_rows
                if held >= batch_rows:
                    flush()
            flush()
        else:  # one commit per machine, as a publish replaces its rows
            table = dataset.to_table().cast(schema)
            for k in range(copies):
                write(table if k == 0 else _rewrite(table, k))
        rows[name] = written[0]
        progress(f"{copies}x {name}: {written[0]:,} rows")
    return {"secs": time.perf_counter() - t0, "rows": rows}


def table_files(loc: Any) -> dict[str, dict[str, int]]:
    """Rows, data files and their bytes of each team table at ``loc`` (from the Delta log)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from agentlog.api import TEAM_TABLES

    out: dict[str, dict[str, int]] = {}
    for name in TEAM_TABLES:
        try:
            dt = DeltaTable(loc.table_uri(name), storage_options=loc.storage_options())
        except TableNotFoundError:
            continue
        adds = dt.get_add_actions(flatten=True)
        cols = adds.column_names if hasattr(adds, "column_names") else adds.schema.names
        sizes: list[Any] = list(adds.column("size_bytes").to_pylist()) if "size_bytes" in cols else []
        nrec: list[Any] = list(adds.column("num_records").to_pylist()) if "num_records" in cols else []
        out[name] = {"rows": int(sum(n or 0 for n in nrec)), "files": len(sizes), "bytes": int(sum(sizes)),
                     "version": int(dt.version())}
    return out


# ----------------------------------------------------------------------------- queries


def team(ctx: StepContext) -> dict[str, Any]:
    """Team tables: publish to a local S3 server, five org queries at 1× and N× on duckdb, daft, daft on Ray."""
    from agentlog.api import TEAM_PUBLISH_BATCH_ROWS, TeamLocation, team_ask
    from agentlog.bench.team_report import TeamRun, report
    from agentlog.bench.teamserve import AWS_ENV, RayCluster, S3Server
    from agentlog.core import AgentlogError

    scale = _int_env(SCALE_ENV, DEFAULT_SCALE)
    rounds = _int_env(ROUNDS_ENV, DEFAULT_ROUNDS)
    with_s3rver = os.environ.get(S3RVER_ENV, "1") != "0"
    load_before = os.getloadavg()
    built, info = built_root(ctx, ctx.events)
    store_bytes = du(os.path.join(built, "store"))
    work = ctx.tmpdir()
    ctx.progress("starting moto's S3 server on loopback")
    s3 = S3Server.start(os.path.join(work, "moto.log"), env={"TMPDIR": work})
    saved = {k: os.environ.get(k) for k in [*AWS_ENV, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
                                            "AWS_SESSION_TOKEN"]}
    cluster = s3r = None
    s3rver: dict[str, Any] = {"wanted": with_s3rver, "error": None, "publish": None, "queries": None}
    try:
        for k in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            os.environ.pop(k, None)
        os.environ.update(s3.env)  # this process reads and writes the tables too (the N× copy)
        env = {**os.environ, "AGENTLOG_HOME": os.path.join(work, "query-home")}
        env.pop("AGENTLOG_DEBUG", None)
        url1, urln = s3.url("1x"), s3.url(f"{scale}x")

        pub = _publish(ctx, built, url1, env)
        pub["bytes"], pub["objects"] = s3.objects("1x")
        file_dir = os.path.join(work, "file-team")
        pubf = _publish(ctx, built, "file://" + file_dir, env)
        pubf["bytes"], pubf["objects"] = du(file_dir), sum(len(fs) for _, _, fs in os.walk(file_dir))
        if with_s3rver:
            try:
                ctx.progress("starting s3rver (npm; installed once into the cache) on loopback")
                s3r = S3Server.start_s3rver(os.path.join(work, "s3rver-data"), os.path.join(work, "s3rver.log"))
            except (AgentlogError, RuntimeError, OSError) as e:
                s3rver["error"] = " ".join(str(e).split())[:300]
                ctx.progress(f"s3rver: {s3rver['error']}; its rows are not measured")
        if s3r is not None:
            renv = {**env, **s3r.env}
            pubr = _publish(ctx, built, s3r.url("1x"), renv)
            pubr["bytes"], pubr["objects"] = s3r.objects("1x")
            s3rver["publish"] = pubr

        ctx.progress(f"writing the {scale}x tables from the published 1x tables")
        loc1, locn = TeamLocation.parse(url1), TeamLocation.parse(urln)
        copied = scale_tables(loc1, locn, scale, int(TEAM_PUBLISH_BATCH_ROWS), ctx.progress)
        files = {"1x": table_files(loc1), f"{scale}x": table_files(locn)}
        nbytes = {"1x": pub["bytes"], f"{scale}x": s3.objects(f"{scale}x")[0]}

        answer = team_ask(loc1, PATH_SQL)
        path = str(answer.rows[0][0]) if getattr(answer, "rows", None) else "README.md"
        ctx.progress(f"the path most sessions touched: {path}")
        ctx.progress("starting a Ray cluster (a head and two workers) on loopback")
        cluster = RayCluster.start()  # only now: its idle processes cost CPU, and no publish needs them
        queries = Queries(ctx, env, {"1x": url1, f"{scale}x": urln}, cluster.address, path)
        ranged = None
        if s3r is not None:
            ranged = Queries(ctx, {**env, **s3r.env}, {"1x": s3r.url("1x")}, cluster.address, path, " on s3rver")
            s3rver["queries"] = ranged
        for r in range(rounds):  # the servers' rounds interleaved, so both meet the same noise
            queries.run_round(r, rounds, ["1x", f"{scale}x"])
            if ranged is not None:
                ranged.run_round(r, rounds, ["1x"], ("duckdb",))
    finally:
        if cluster is not None:
            cluster.stop()
        if s3r is not None:
            s3r.stop()
        s3.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    load_after = os.getloadavg()
    return report(TeamRun(scale, rounds, info, store_bytes, pub, pubf, copied, files, nbytes, queries, path,
                          load_before, load_after, s3rver))


STEPS: dict[str, StepFn] = {"team": team}

__all__ = ["DEFAULT_ROUNDS", "DEFAULT_SCALE", "ROUNDS_ENV", "S3RVER_ENV", "SCALE_ENV", "STEPS", "publish_root",
           "scale_tables", "team"]
