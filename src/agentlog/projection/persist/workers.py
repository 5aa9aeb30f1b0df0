"""A full build's shards, projected in worker processes (``python -m agentlog.projection.persist``)."""

from __future__ import annotations

import os
from typing import Any, Final, Iterator

import orjson

from agentlog.projection.persist.parts import _read_raw
from agentlog.projection.persist.session_parts import _by_session, _entry, _project_sessions, _write_session_part

# A full build of at least this many events runs its shards in worker processes.
PARALLEL_MIN_EVENTS: Final = 200_000


def _workers(events: int) -> int:
    env = os.environ.get("AGENTLOG_PROJECT_WORKERS")
    if env is not None:
        return max(1, int(env))
    if events < PARALLEL_MIN_EVENTS:
        return 1
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))


def _run_jobs(directory: str, gen: int, jobs: list[tuple[int, str]], gone: list[str],
              workers: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """Run :func:`_shard_job` for each (shard, raw observation file) in up to ``workers``
    child processes (``python -m agentlog.projection.persist``: a plain subprocess
    needs nothing from the caller's ``__main__``); yields each shard's result."""
    import subprocess
    import sys
    import tempfile

    queue = list(jobs)
    running: list[tuple[int, Any, Any]] = []
    failed: list[str] = []
    while queue or running:
        while queue and len(running) < workers:
            s, raw = queue.pop(0)
            spec = orjson.dumps({"directory": directory, "gen": gen, "shard": s, "raw": raw, "gone": gone})
            errors = tempfile.TemporaryFile()
            proc = subprocess.Popen([sys.executable, "-m", "agentlog.projection.persist"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=errors)
            assert proc.stdin is not None
            proc.stdin.write(spec)
            proc.stdin.close()
            running.append((s, proc, errors))
        s, proc, errors = running.pop(0)
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.stdout.close()
        proc.wait()
        errors.seek(0)
        err = errors.read()
        errors.close()
        if proc.returncode != 0 or not out:
            failed.append(f"shard {s}: exit {proc.returncode}, {len(out)} bytes out: "
                          f"{err.decode('utf-8', 'replace')[-2000:]}")
            continue
        yield s, orjson.loads(out)
    if failed:
        raise RuntimeError("projecting in worker processes failed: " + "; ".join(failed))


def _shard_job(directory: str, gen: int, s: int, raw: str, gone: list[str]) -> dict[str, Any]:
    """Project one shard from its raw observation file and write its part (in a worker
    process): the tag, the files and, per session key, [id, project, first batch, batches]."""
    sessions = _by_session(_read_raw(directory, raw))
    results = _project_sessions(sessions, frozenset(gone))
    tag = f"g{gen}s{s:02d}"
    part, batches = _write_session_part(directory, tag, sessions, results)
    out: dict[str, list[Any]] = {}
    for key, _ in sessions:
        sid, project = _entry(key, results.get(key), None)
        out[key] = [sid, project, *batches[key]]
    return {"tag": tag, "files": part["files"], "sessions": out}


def _worker_main() -> None:
    """``python -m agentlog.projection.persist``: one shard job, spec on stdin, result on stdout."""
    import sys

    spec = orjson.loads(sys.stdin.buffer.read())
    out = _shard_job(spec["directory"], spec["gen"], spec["shard"], spec["raw"], spec["gone"])
    sys.stdout.buffer.write(orjson.dumps(out))
