"""The benchmark harness: ``agentlog bench run``, ``bench step`` and the step registry.

``run`` starts every selected step as its own child process
(``python -m agentlog bench step NAME …``), so the peak resident memory of a
step is that step's alone. The child reports its own peak (``getrusage`` and
``VmHWM``); the parent polls the resident set of the child's process group
every 250 ms, keeps the peak it saw as a cross-check, and kills the group when
it passes the RSS cap or runs past twice the time cap. A step that is killed
or crashes is recorded as not run, with the reason, and the run goes on.
``results.json`` is rewritten atomically before and after every step, so a run
killed at any moment leaves a valid file; ``results.md`` is rendered from it at
the end (and by ``agentlog bench report``).

A step is a function ``fn(ctx: StepContext) -> dict`` returning at least
``tables`` (each ``{"title", "columns", "rows", "note"}``) and ``metrics`` (a
flat ``{key: number}`` that the anchors and targets refer to); anything else it
returns is kept under ``raw``. The time cap is the step's soft budget: loops
ask ``ctx.over_budget()`` and stop, calling ``ctx.cap(note)`` so the result is
marked ``capped`` (:class:`~agentlog.bench.context.StepContext`, :data:`StepFn`:
:mod:`agentlog.bench.context`). Shipped steps live in :mod:`agentlog.bench.steps`; extra
ones (tests) come from a module named by ``--steps-module`` or
``$AGENTLOG_BENCH_STEPS_MODULE`` that defines ``STEPS``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any, Callable, Final

from agentlog.bench.common import describe_machine, finite, write_json_atomic
from agentlog.bench.context import DEFAULT_TIME_CAP_SECS as DEFAULT_TIME_CAP_SECS
from agentlog.bench.context import StepContext as StepContext
from agentlog.bench.context import StepFn as StepFn
from agentlog.bench.measure import peak_rss

DEFAULT_EVENTS = 200_000
DEFAULT_SEED = 20261130  # the workload generator's (a test keeps them equal)
POLL_SECS = 0.25
RESULTS_FORMAT = 1
STEPS_MODULE_ENV = "AGENTLOG_BENCH_STEPS_MODULE"
STDERR_TAIL_BYTES = 4000

#: Statuses of a step in results.json. ``ok`` and ``capped`` ran (capped: the
#: soft time cap stopped a loop early, the numbers cover what was reached);
#: ``killed`` (RSS or time cap), ``failed`` (crashed, or no result file) and
#: ``interrupted`` did not run to a result; ``pending`` and ``running`` are what
#: a run that was itself killed leaves behind.
STATUSES = ("ok", "capped", "killed", "failed", "interrupted", "pending", "running")


def default_rss_cap_bytes() -> int:
    """75 % of physical memory (1 GiB when it cannot be read)."""
    from agentlog.bench.common import memory_bytes

    mem = memory_bytes()
    return int(mem * 0.75) if mem else 1 << 30


# --------------------------------------------------------------------------- registry


def _import_steps_module(spec: str) -> ModuleType:
    """A module by dotted name, or by path when ``spec`` names a ``.py`` file."""
    if spec.endswith(".py") or os.sep in spec:
        path = os.path.abspath(spec)
        name = "agentlog_bench_extra_" + os.path.splitext(os.path.basename(path))[0]
        mspec = importlib.util.spec_from_file_location(name, path)
        if mspec is None or mspec.loader is None:
            raise ImportError(f"cannot load steps module {spec}")
        module = importlib.util.module_from_spec(mspec)
        sys.modules[name] = module
        mspec.loader.exec_module(module)
        return module
    return importlib.import_module(spec)


def steps_module_spec(option: str | None) -> str | None:
    """The extra steps module from the option or the environment (a file path made absolute)."""
    spec = option or os.environ.get(STEPS_MODULE_ENV) or None
    if spec and (spec.endswith(".py") or os.sep in spec):
        spec = os.path.abspath(spec)
    return spec


def registry(steps_module: str | None = None) -> dict[str, StepFn]:
    """Every known step, in run order: the shipped ones, then any from ``steps_module``."""
    from agentlog.bench.steps import STEPS

    reg: dict[str, StepFn] = dict(STEPS)
    if steps_module:
        extra = getattr(_import_steps_module(steps_module), "STEPS", None)
        if not isinstance(extra, dict):
            raise ImportError(f"steps module {steps_module} defines no STEPS dict")
        reg.update(extra)
    return reg


def select(names: list[str], only: list[str], skip: list[str]) -> list[str]:
    """Registry order, restricted by ``only`` and then ``skip``; unknown names are an error."""
    unknown = [n for n in [*only, *skip] if n not in names]
    if unknown:
        raise ValueError(f"unknown step(s): {', '.join(unknown)} (known: {', '.join(names)})")
    chosen = [n for n in names if not only or n in only]
    return [n for n in chosen if n not in skip]


def split_names(value: str | None) -> list[str]:
    return [s.strip() for s in (value or "").split(",") if s.strip()]


def describe_step(fn: StepFn) -> str:
    doc = (fn.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


# --------------------------------------------------------------------------- the child side


def run_step(name: str, fn: StepFn, ctx: StepContext) -> dict[str, Any]:
    """Run one step in this process and return its result object (the child's JSON)."""
    t0 = time.perf_counter()
    wall_started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        out = dict(fn(ctx))
    finally:
        ctx.cleanup()
    wall = time.perf_counter() - t0
    tables = out.pop("tables", [])
    metrics = out.pop("metrics", {})
    result: dict[str, Any] = finite(
        {
            "name": name,
            "status": "capped" if ctx.capped else "ok",
            "events": ctx.events,
            "seed": ctx.seed,
            "time_cap_secs": ctx.time_cap_secs,
            "started": wall_started,
            "step_wall_secs": wall,
            "capped": ctx.capped,
            "cap_notes": ctx.cap_notes,
            "scratch_spread": ctx.spread_scratch,
            "peak_rss": peak_rss(),
            "metrics": metrics,
            "tables": tables,
            "raw": out,
        }
    )
    return result


def watch_parent(parent_pid: int, interval: float = 0.5) -> None:
    """Kill this process group if ``parent_pid`` goes away (a parent killed with SIGKILL
    cannot kill its children; without this an orphaned step would run on)."""

    def loop() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent_pid:
                try:
                    os.killpg(os.getpgid(0), signal.SIGKILL)
                finally:
                    os._exit(137)

    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


#: the longest the parent waits for the disks to go quiet before a step (untimed)
SETTLE_MAX_SECS: Final = 30.0


def _disk_activity() -> tuple[int, ...] | None:
    """Writes and discards completed and I/Os in flight, summed over the whole disks of
    ``/proc/diskstats`` (None where there is no such file)."""
    try:
        with open("/proc/diskstats", encoding="ascii") as fh:
            rows = [line.split() for line in fh]
    except OSError:
        return None
    whole = [r for r in rows if len(r) >= 14 and os.path.isdir(f"/sys/block/{r[2].replace('/', '!')}")]
    return (sum(int(r[7]) for r in whole), sum(int(r[14]) for r in whole if len(r) > 14),
            sum(int(r[11]) for r in whole))


def settle_disk(interval: float = 0.2, quiet_samples: int = 3, limit: float = SETTLE_MAX_SECS) -> float:
    """Wait until no write or discard completes and none is in flight for ``quiet_samples``
    samples ``interval`` apart (at most ``limit`` seconds): how long that took. With ext4's
    ``discard`` option the blocks a step freed are discarded after ``sync`` returns, and the
    journal waits for them: files created meanwhile measured 5-9× slower."""
    t0 = time.monotonic()
    last = _disk_activity()
    quiet = 0
    while last is not None and quiet < quiet_samples and time.monotonic() - t0 < limit:
        time.sleep(interval)
        now = _disk_activity()
        quiet = quiet + 1 if now is not None and now[:2] == last[:2] and now[2] == 0 else 0
        last = now
    return time.monotonic() - t0


def flush_disk() -> float:
    """Write every dirty page to disk (``sync``) and how long that took: run before each step,
    untimed, so a step is not charged for the writeback of the one before it (the import step
    writes and removes ~3 GB of logs and transcripts; a step that creates files right after it
    measured up to 9× slower)."""
    t0 = time.monotonic()
    os.sync()
    return time.monotonic() - t0


def step_result_path(out_dir: str, name: str) -> str:
    return os.path.join(out_dir, f"step-{name}.json")


# --------------------------------------------------------------------------- the parent side


def _proc_rss_bytes(pid: int) -> int | None:
    """VmRSS of ``pid`` from /proc (None once it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _group_rss_bytes(pgid: int) -> int:
    """Sum of the resident sets of every process in group ``pgid`` (the step and what it spawned)."""
    total = 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2 :].split()
            if int(fields[2]) != pgid:  # state, ppid, pgrp
                continue
            with open(f"/proc/{p}/statm", "rb") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


def _ps_rss_bytes(pid: int) -> int | None:
    """Where there is no /proc (macOS): ``ps -o rss=``."""
    try:
        out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=5).stdout
        return int(out.strip()) * 1024 if out.strip() else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _tail(path: str, limit: int = STDERR_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _last_line(path: str) -> str:
    lines = [l for l in _tail(path, 400).splitlines() if l.strip()]
    return lines[-1].strip() if lines else ""


class Interrupted(Exception):
    """The parent was asked to stop (SIGINT or SIGTERM)."""


@dataclass
class Runner:
    """Runs steps as children and keeps results.json current."""

    out_dir: str
    events: int
    seed: int
    time_cap_secs: float
    rss_cap_bytes: int
    steps_module: str | None = None
    python: str = sys.executable
    status: Callable[[str], None] | None = None
    on_spawn: Callable[[], None] | None = None
    bytecode_dir: str | None = None
    """Where the steps' Pythons (and the processes they start) keep compiled bytecode
    (``PYTHONPYCACHEPREFIX``, with ``PYTHONDONTWRITEBYTECODE`` dropped): each module compiled
    once per run, as an installed package has its bytecode — not on every process start
    when the caller's environment forbids writing it."""

    def child_argv(self, name: str) -> list[str]:
        argv = [
            self.python, "-m", "agentlog", "bench", "step", name,
            "--events", str(self.events), "--seed", str(self.seed), "--out", self.out_dir,
            "--time-cap-secs", repr(self.time_cap_secs), "--rss-cap-gb", f"{self.rss_cap_bytes / (1 << 30):.9g}",
            "--parent-pid", str(os.getpid()),
        ]  # fmt: skip
        if self.steps_module:
            argv += ["--steps-module", self.steps_module]
        return argv

    def run_child(self, name: str, entry: dict[str, Any]) -> None:
        """Run step ``name`` as a child; fill ``entry`` with its outcome."""
        logs = os.path.join(self.out_dir, "logs")
        os.makedirs(logs, exist_ok=True)
        log_path = os.path.join(logs, f"{name}.log")
        result_path = step_result_path(self.out_dir, name)
        if os.path.exists(result_path):
            os.remove(result_path)
        argv = self.child_argv(name)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if self.bytecode_dir:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = self.bytecode_dir
        entry["disk_flush_secs"] = flush_disk()
        entry["disk_settle_secs"] = settle_disk()
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True)
        entry["process"] = {"pid": proc.pid, "argv": argv, "log": os.path.relpath(log_path, self.out_dir)}
        if self.on_spawn:
            self.on_spawn()  # the pid is on disk before anything else can go wrong
        observed = observed_group = 0
        killed: str | None = None
        use_proc = os.path.isdir("/proc")
        try:
            while True:
                try:
                    proc.wait(timeout=POLL_SECS)
                    break
                except subprocess.TimeoutExpired:
                    pass
                rss = _proc_rss_bytes(proc.pid) if use_proc else _ps_rss_bytes(proc.pid)
                group = _group_rss_bytes(proc.pid) if use_proc else (rss or 0)
                observed = max(observed, rss or 0)
                observed_group = max(observed_group, group)
                elapsed = time.monotonic() - t0
                if group > self.rss_cap_bytes:
                    killed = (
                        f"killed: resident set {group / (1 << 30):.2f} GiB (step and its children) "
                        f"exceeded the RSS cap of {self.rss_cap_bytes / (1 << 30):.2f} GiB after {elapsed:.1f} s"
                    )
                elif elapsed > 2 * self.time_cap_secs:
                    killed = f"killed: still running after {elapsed:.1f} s, twice the time cap of {self.time_cap_secs:g} s"
                if killed:
                    self._kill(proc)
                    break
                if self.status:
                    self.status(_last_line(log_path))
        except BaseException:
            self._kill(proc)
            raise
        finally:
            wall = time.monotonic() - t0
            entry["wall_secs"] = wall
            entry["peak_rss"] = {"observed_bytes": observed, "observed_group_bytes": observed_group}
        rc = proc.returncode
        entry["process"].update(exit_code=rc if rc is not None and rc >= 0 else None, signal=-rc if rc is not None and rc < 0 else None)
        tail = _tail(log_path)
        if killed:
            entry.update(status="killed", reason=killed)
            entry["process"]["output_tail"] = tail
            return
        if rc != 0:
            how = f"signal {signal.Signals(-rc).name}" if rc is not None and rc < 0 else f"exit code {rc}"
            last = _last_line(log_path)
            entry.update(status="failed", reason=f"crashed: {how}" + (f": {last[:300]}" if last else ""))
            entry["process"]["output_tail"] = tail
            return
        try:
            import json

            with open(result_path, encoding="utf-8") as f:
                result = json.load(f)
        except (OSError, ValueError) as e:
            entry.update(status="failed", reason=f"exit code 0 but no readable result file ({e})")
            entry["process"]["output_tail"] = tail
            return
        entry["status"] = result.get("status", "ok")
        entry["reason"] = "; ".join(result.get("cap_notes") or []) or None
        entry["peak_rss"] = {**(result.get("peak_rss") or {}), **entry["peak_rss"]}
        entry["result"] = {k: v for k, v in result.items() if k not in ("peak_rss", "name", "status")}

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass


def new_results(
    *, names: list[str], events: int, seed: int, time_cap_secs: float, rss_cap_bytes: int, out_dir: str,
    only: list[str], skip: list[str], descriptions: dict[str, str], known: list[str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "format": RESULTS_FORMAT,
        "tool": "agentlog bench run",
        "run": {
            "status": "running",
            "events": events,
            "seed": seed,
            "time_cap_secs": time_cap_secs,
            "rss_cap_bytes": rss_cap_bytes,
            "only": only,
            "skip": skip,
            "known_steps": known if known is not None else names,
            "argv": sys.argv,
            "out_dir": os.path.abspath(out_dir),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "finished": None,
            "wall_secs": None,
        },
        "machine": describe_machine(out_dir),
        "steps": [
            {"name": n, "description": descriptions.get(n, ""), "status": "pending", "reason": None, "result": None}
            for n in names
        ],
    }


def run_all(
    *,
    out_dir: str,
    events: int,
    seed: int,
    only: list[str],
    skip: list[str],
    time_cap_secs: float,
    rss_cap_bytes: int,
    steps_module: str | None,
    on_start: Callable[[str], None] | None = None,
    on_status: Callable[[str], None] | None = None,
    on_done: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The whole run: returns the final results object (also in ``out_dir/results.json``)."""
    reg = registry(steps_module)
    names = select(list(reg), only, skip)
    os.makedirs(out_dir, exist_ok=True)
    results_path = os.path.join(out_dir, "results.json")
    results = new_results(
        names=names, events=events, seed=seed, time_cap_secs=time_cap_secs, rss_cap_bytes=rss_cap_bytes,
        out_dir=out_dir, only=only, skip=skip, descriptions={n: describe_step(reg[n]) for n in names}, known=list(reg),
    )  # fmt: skip
    bytecode = tempfile.mkdtemp(prefix="agentlog-bench-bytecode-")
    results["run"]["bytecode"] = {"cached": True, "caller_forbade_writing": bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))}
    write_json_atomic(results_path, results)
    runner = Runner(
        out_dir=out_dir, events=events, seed=seed, time_cap_secs=time_cap_secs, rss_cap_bytes=rss_cap_bytes,
        steps_module=steps_module, status=on_status, on_spawn=lambda: write_json_atomic(results_path, results),
        bytecode_dir=bytecode,
    )  # fmt: skip

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    t0 = time.monotonic()
    try:
        for entry in results["steps"]:
            if on_start:
                on_start(entry["name"])
            entry["status"] = "running"
            write_json_atomic(results_path, results)
            try:
                runner.run_child(entry["name"], entry)
            except Interrupted as e:
                entry.update(status="interrupted", reason=f"interrupted: the run received {e}")
                results["run"]["status"] = "interrupted"
                raise
            finally:
                write_json_atomic(results_path, finite(results))
            if on_done:
                on_done(entry)
        results["run"]["status"] = "complete"
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        # logs loaded once and shared by the steps of this run (bench.store_steps);
        # a cache named by $AGENTLOG_BENCH_CACHE_DIR is kept for the next run
        shutil.rmtree(os.path.join(out_dir, ".workload-cache"), ignore_errors=True)
        shutil.rmtree(bytecode, ignore_errors=True)
        results["run"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        results["run"]["wall_secs"] = time.monotonic() - t0
        write_json_atomic(results_path, finite(results))
        from agentlog.bench.report import render_markdown

        with open(os.path.join(out_dir, "results.md"), "w", encoding="utf-8") as f:
            f.write(render_markdown(results))
    return results


def run_single(
    name: str, *, events: int, seed: int, time_cap_secs: float, rss_cap_bytes: int, steps_module: str | None,
    out_dir: str | None, parent_pid: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """``agentlog bench step NAME``: run one step here; write ``step-NAME.json`` into ``out_dir``."""
    if parent_pid:
        watch_parent(parent_pid)
    reg = registry(steps_module)
    if name not in reg:
        raise ValueError(f"unknown step {name!r} (known: {', '.join(reg)})")
    ctx = StepContext(name=name, events=events, seed=seed, time_cap_secs=time_cap_secs, rss_cap_bytes=rss_cap_bytes, out_dir=out_dir)
    result = run_step(name, reg[name], ctx)
    if out_dir:
        write_json_atomic(step_result_path(out_dir, name), result)
    return result
