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
import math
import os
import shutil
import sys
import time
from typing import Any

from agentlog.bench.context import StepContext, StepFn
from agentlog.bench.measure import du
from agentlog.bench.roots import built_root

SCALE_ENV = "AGENTLOG_BENCH_TEAM_SCALE"
ROUNDS_ENV = "AGENTLOG_BENCH_TEAM_ROUNDS"
S3RVER_ENV = "AGENTLOG_BENCH_TEAM_S3RVER"
"""``0``: no s3rver rows (the default publishes to it too and runs the duckdb queries on it)."""
DEFAULT_SCALE = 4
DEFAULT_ROUNDS = 3
ENGINES = ("duckdb", "daft", "daft-ray")
ID_COLUMNS = ("event_id", "session_id", "provider_session_id", "turn_id", "tool_call_id", "attempt_id")
"""The ids a copy makes its own: those the queries join on or count distinct."""
MACHINE_COLUMNS = ("machine", "host", "publisher")
QUERY_TIMEOUT_S = 1800
COPY_TRIES = 4

QUERIES: list[tuple[str, str, str]] = [
    ("failure_rate", "failure rate by agent and model",
     "SELECT provider AS agent, model, count(*) AS calls, "
     "sum(CASE WHEN kind = 'tool_call_failed' THEN 1 ELSE 0 END) AS failed, "
     "sum(CASE WHEN kind = 'tool_call_failed' THEN 1 ELSE 0 END) * 1.0 / count(*) AS failure_rate "
     "FROM events WHERE kind IN ('tool_call_finished', 'tool_call_failed') "
     "GROUP BY provider, model ORDER BY failed DESC, calls DESC"),
    ("cost", "cost by project and day",
     "SELECT project_name, day, sum(cost_usd) AS cost_usd, sum(total_tokens) AS tokens, count(*) AS messages "
     "FROM usage GROUP BY project_name, day ORDER BY day, project_name"),
    ("failing_commands", "top recurring failing commands",
     "SELECT command_key, count(*) AS failures, count(DISTINCT provider_session_id) AS sessions, "
     "count(DISTINCT machine) AS machines FROM (SELECT regexp_extract(attrs, '\"command_key\":\"([0-9a-f]+)\"', 1) "
     "AS command_key, provider_session_id, machine FROM events "
     "WHERE kind = 'tool_call_failed' AND tool_category = 'shell') f "
     "GROUP BY command_key ORDER BY failures DESC, command_key LIMIT 20"),
    ("sessions_on_path", "sessions touching a path",
     "SELECT s.machine, s.session_id, s.provider, s.project_name, s.started_at, t.touches FROM sessions s "
     "JOIN (SELECT machine, session_id, count(*) AS touches FROM tool_calls WHERE path_relative = {path} "
     "GROUP BY machine, session_id) t ON t.session_id = s.session_id AND t.machine = s.machine "
     "ORDER BY t.touches DESC, s.machine, s.session_id"),
    ("attempts_x_calls", "attempts joined with their tool calls",
     "SELECT a.outcome, t.tool_category, count(*) AS calls, count(DISTINCT a.attempt_id) AS attempts, "
     "sum(CASE WHEN coalesce(t.outcome_status, '') = 'failure' THEN 1 ELSE 0 END) AS failed_calls "
     "FROM attempts a JOIN tool_calls t ON t.attempt_id = a.attempt_id AND t.machine = a.machine "
     "GROUP BY a.outcome, t.tool_category ORDER BY calls DESC, a.outcome, t.tool_category"),
    ("floor", "floor: count(*) of sessions (not one of the five)", "SELECT count(*) AS n FROM sessions"),
]
"""(key, what it answers, SQL): valid on DuckDB and on Daft's SQL. ``{path}`` is the path most
sessions touched, chosen on the 1× tables before the rounds. ``coalesce`` in the CASE of the join:
on Daft a CASE whose condition is NULL gives NULL, not its ELSE (DuckDB gives the ELSE)."""

LAUNCH = r"""
import json, os, subprocess, sys, time
with open(sys.argv[1], "wb") as out, open(sys.argv[2], "wb") as err:
    t0 = time.perf_counter()
    proc = subprocess.Popen(sys.argv[3:], stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    _, status, usage = os.wait4(proc.pid, 0)
    secs = time.perf_counter() - t0
print(json.dumps({"secs": secs, "rss_kib": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}))
"""
"""Runs one timed process and reports its wall time and peak RSS (``wait4``). A small launcher, not
this process, spawns it: Linux carries the spawning process's high-water mark into the child's
``ru_maxrss``, and this one holds Ray's client and Arrow tables."""

PATH_SQL = ("SELECT path_relative, count(DISTINCT session_id) AS sessions FROM tool_calls "
            "WHERE path_relative IS NOT NULL GROUP BY path_relative ORDER BY sessions DESC, path_relative LIMIT 1")


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


def _agentlog(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentlog", *args]


def timed(argv: list[str], env: dict[str, str], work: str) -> dict[str, Any]:
    """Run ``argv`` to its end through :data:`LAUNCH`: wall seconds (spawn to exit), its peak RSS
    (bytes) and its stdout. Raises RuntimeError with the tail of its stderr when it fails."""
    import subprocess
    import tempfile

    fd_out, out_path = tempfile.mkstemp(dir=work, suffix=".out")
    fd_err, err_path = tempfile.mkstemp(dir=work, suffix=".err")
    os.close(fd_out)
    os.close(fd_err)
    try:
        r = subprocess.run([sys.executable, "-c", LAUNCH, out_path, err_path, *argv], env=env, capture_output=True,
                           stdin=subprocess.DEVNULL)
        with open(out_path, "rb") as f:
            stdout = f.read()
        with open(err_path, "rb") as f:
            stderr = f.read()
    finally:
        os.remove(out_path)
        os.remove(err_path)
    if r.returncode != 0:
        raise RuntimeError(f"the launcher failed: {r.stderr.decode('utf-8', 'replace')[-800:]}")
    got = json.loads(r.stdout)
    if got["code"] != 0:
        raise RuntimeError(f"{' '.join(argv[2:5])} … exited {got['code']}: {stderr.decode('utf-8', 'replace')[-1500:]}")
    return {"secs": float(got["secs"]), "rss": int(got["rss_kib"]) * 1024, "stdout": stdout}


def _publish(ctx: StepContext, built: str, url: str, env: dict[str, str]) -> dict[str, Any]:
    root = publish_root(ctx, built)
    ctx.progress(f"publishing to {url} (a whole process, timed)")
    r = timed(_agentlog("team", "publish", "--to", url, "--json"), {**env, "AGENTLOG_HOME": root}, ctx.tmpdir())
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


def _normalised(rows: list[Any]) -> list[list[Any]]:
    """Rows sorted by their values other than floats (a float is a sum, whose last bits depend on the
    order the engine added in), then by the floats."""
    def key(row: list[Any]) -> tuple[str, list[float]]:
        return (json.dumps([None if isinstance(v, float) else v for v in row], sort_keys=True, default=str),
                [v for v in row if isinstance(v, float)])

    return sorted((list(row) for row in rows), key=key)


def same_rows(a: list[list[Any]] | None, b: list[list[Any]] | None) -> bool:
    """The same answer, floats equal to 1e-9 relative (see :func:`_normalised`)."""
    if a is None or b is None or len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if isinstance(x, float) or isinstance(y, float):
                if not (isinstance(x, (int, float)) and isinstance(y, (int, float))
                        and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)):
                    return False
            elif x != y:
                return False
    return True


class Queries:
    def __init__(self, ctx: StepContext, env: dict[str, str], urls: dict[str, str], ray: str, path: str,
                 where: str = "") -> None:
        self.ctx, self.env, self.urls, self.ray, self.where = ctx, env, urls, ray, where
        self.work = ctx.tmpdir()
        self.sql = {key: sql.format(path="'" + path.replace("'", "''") + "'") for key, _, sql in QUERIES}
        self.cells: dict[tuple[str, str, str], dict[str, Any]] = {}

    def argv(self, key: str, engine: str, scale: str) -> list[str]:
        argv = _agentlog("team", "query", self.sql[key], "--from", self.urls[scale], "--json",
                         "--timeout", str(QUERY_TIMEOUT_S), "--max-rows", "1000000")
        if engine == "duckdb":
            return argv + ["--engine", "duckdb"]
        if engine == "daft":
            return argv + ["--engine", "daft"]
        return argv + ["--engine", "daft", "--ray", self.ray]

    def run_one(self, key: str, engine: str, scale: str) -> None:
        from agentlog.bench.teamserve import WorkerRss

        cell = self.cells.setdefault((key, engine, scale), {"secs": [], "rss": [], "ray_rss": [], "rows": None,
                                                            "answer": None, "answer_any_machine": None,
                                                            "error": None})
        if cell["error"]:
            return
        poll = WorkerRss() if engine == "daft-ray" else None
        try:
            if poll is not None:
                with poll:
                    r = timed(self.argv(key, engine, scale), self.env, self.work)
                cell["ray_rss"].append(poll.peak())
            else:
                r = timed(self.argv(key, engine, scale), self.env, self.work)
        except RuntimeError as e:
            text = " ".join(str(e).split())
            i = text.find("error:")
            cell["error"] = text[i:i + 300] if i >= 0 else text[-300:]
            self.ctx.progress(f"{key} on {engine} at {scale}: {cell['error']}")
            return
        cell["secs"].append(r["secs"])
        cell["rss"].append(r["rss"])
        answer = json.loads(r["stdout"])
        cell["rows"] = len(answer["rows"])
        cell["answer"] = _normalised(answer["rows"])
        machine = [i for i, c in enumerate(answer.get("columns") or []) if c == "machine"]
        cell["answer_any_machine"] = _normalised([[v for i, v in enumerate(row) if i not in machine]
                                                  for row in answer["rows"]])

    def run_round(self, r: int, rounds: int, scales: list[str], engines: tuple[str, ...] = ENGINES) -> None:
        """Round ``r`` of ``rounds``: every query, engine and scale once, the order rotated by the round."""
        combos = [(key, engine, scale) for scale in scales for key, _, _ in QUERIES for engine in engines]
        shift = (r * len(combos)) // rounds
        order = combos[shift:] + combos[:shift]
        for i, (key, engine, scale) in enumerate(order):
            self.ctx.progress(f"round {r + 1}/{rounds}, {i + 1}/{len(order)}: {key} on {engine} at {scale}{self.where}")
            self.run_one(key, engine, scale)


# ----------------------------------------------------------------------------- the step


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

__all__ = ["DEFAULT_ROUNDS", "DEFAULT_SCALE", "ENGINES", "ID_COLUMNS", "QUERIES", "ROUNDS_ENV", "S3RVER_ENV", "SCALE_ENV",
           "STEPS", "Queries", "publish_root", "same_rows",
           "scale_tables", "team"]
