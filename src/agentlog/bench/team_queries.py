"""The ``team`` step's org queries (issue 31): their SQL, the whole ``agentlog`` processes that
run them (timed by a small launcher), and how two engines' answers are compared. Shared by
:mod:`agentlog.bench.team_steps` (which runs them) and :mod:`agentlog.bench.team_report`."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from agentlog.bench.context import StepContext

ENGINES = ("duckdb", "daft", "daft-ray")
ID_COLUMNS = ("event_id", "session_id", "provider_session_id", "turn_id", "tool_call_id", "attempt_id")
"""The ids a copy makes its own: those the queries join on or count distinct."""
QUERY_TIMEOUT_S = 1800

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
     "count(DISTINCT machine) AS machines FROM events WHERE kind = 'tool_call_failed' AND tool_category = 'shell' "
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


def agentlog_argv(*args: str) -> list[str]:
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
        argv = agentlog_argv("team", "query", self.sql[key], "--from", self.urls[scale], "--json",
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
        cell["answer_any_machine"] = cell["answer"] if not machine else _normalised(
            [[v for i, v in enumerate(row) if i not in machine] for row in answer["rows"]])

    def run_round(self, r: int, rounds: int, scales: list[str], engines: tuple[str, ...] = ENGINES) -> None:
        """Round ``r`` of ``rounds``: every query, engine and scale once, the order rotated by the round."""
        combos = [(key, engine, scale) for scale in scales for key, _, _ in QUERIES for engine in engines]
        shift = (r * len(combos)) // rounds
        order = combos[shift:] + combos[:shift]
        for i, (key, engine, scale) in enumerate(order):
            self.ctx.progress(f"round {r + 1}/{rounds}, {i + 1}/{len(order)}: {key} on {engine} at {scale}{self.where}")
            self.run_one(key, engine, scale)


# ----------------------------------------------------------------------------- the step


__all__ = ["ENGINES", "ID_COLUMNS", "LAUNCH", "PATH_SQL", "QUERIES", "QUERY_TIMEOUT_S", "Queries", "agentlog_argv",
           "same_rows", "timed"]
