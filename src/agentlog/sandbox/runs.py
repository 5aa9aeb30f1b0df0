"""The runs of ``agentlog run`` on this data root: ``<root>/run/sandbox/<run id>/``.

Each holds ``policy.json`` (the run's :class:`~agentlog.sandbox.policy.Policy`, replaced
atomically on every grant so the broker never reads half of one), ``run.json`` (who runs
what, since when) and ``broker.sock``. The run id is the pid of the ``agentlog run`` process
that is also the broker; a directory whose process is gone is swept by the next run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any, Callable

from agentlog.core import AgentlogError, UsageError
from agentlog.core.fileio import write_json_atomic
from agentlog.core.locks import open_locked
from agentlog.core.paths import ensure_dir
from agentlog.sandbox.policy import Policy, canonical, check_grantable

POLICY_FILE = "policy.json"
RUN_FILE = "run.json"
SOCKET_FILE = "broker.sock"
LOCK_FILE = "policy.lock"
SUN_PATH_MAX = 107


def runs_dir(root: str) -> str:
    return os.path.join(root, "run", "sandbox")


def run_dir(root: str, run_id: str) -> str:
    return os.path.join(runs_dir(root), run_id)


def socket_path(root: str, run_id: str) -> str:
    return os.path.join(run_dir(root, run_id), SOCKET_FILE)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class RunInfo:
    run_id: str
    pid: int
    agent: list[str]
    started_at: float
    policy: Policy

    def to_json(self) -> dict[str, Any]:
        p = self.policy
        return {"run": self.run_id, "pid": self.pid, "agent": self.agent, "started_at": self.started_at,
                "project": p.project, "net": p.net, "ports": p.ports, "allow": p.allow, "grants": p.grants,
                "denies": p.denies, "guarded": p.guarded, "policy_version": p.version}


def create(root: str, policy: Policy, agent: list[str], made: list[str] | None = None) -> str:
    """Make the run's directory and files; returns it. Sweeps the directories of dead runs.
    ``made``: the mount points the run made (removed again by the sweep, where empty, when the
    run could not do it itself)."""
    sweep(root)
    d = run_dir(root, policy.run_id)
    if len(os.fsencode(os.path.join(d, SOCKET_FILE))) > SUN_PATH_MAX:
        raise AgentlogError(f"the broker socket path under {d} is longer than a Unix socket allows "
                            f"({SUN_PATH_MAX} bytes); set AGENTLOG_HOME to a shorter data root")
    ensure_dir(runs_dir(root))
    if os.path.lexists(d):
        shutil.rmtree(d, ignore_errors=True)
    os.mkdir(d, 0o700)
    write_json_atomic(os.path.join(d, POLICY_FILE), policy.to_json())
    write_json_atomic(os.path.join(d, RUN_FILE), {"run": policy.run_id, "pid": os.getpid(), "agent": agent,
                                                  "started_at": time.time(), "made": made or []})
    return d


def remove(root: str, run_id: str) -> None:
    shutil.rmtree(run_dir(root, run_id), ignore_errors=True)


def sweep(root: str) -> None:
    """Remove the directories of runs whose process is gone."""
    base = runs_dir(root)
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if name.isdigit() and not _alive(int(name)):
            try:
                with open(os.path.join(base, name, RUN_FILE), "rb") as fh:
                    made = json.loads(fh.read()).get("made") or []
            except (OSError, ValueError, AttributeError):
                made = []
            remove_mount_points(root, made)  # a killed run's, in its project
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def made_by(root: str, run_id: str, made: list[str]) -> list[str]:
    """The mount points run ``run_id`` must remove: those it made, and those handed over to it."""
    try:
        with open(os.path.join(run_dir(root, run_id), RUN_FILE), "rb") as fh:
            recorded = json.loads(fh.read()).get("made") or []
    except (OSError, ValueError, AttributeError):
        recorded = []
    return list(dict.fromkeys([*made, *recorded]))


def _hand_over(root: str, run_id: str, path: str) -> None:
    """Make ``path`` a mount point run ``run_id`` removes when it ends."""
    f = os.path.join(run_dir(root, run_id), RUN_FILE)
    try:
        with open(f, "rb") as fh:
            info = json.loads(fh.read())
        made = info.get("made") or []
        if path not in made:
            info["made"] = [*made, path]
            write_json_atomic(f, info)
    except (OSError, ValueError, AttributeError):
        pass


def remove_mount_points(root: str, made: list[str], run_id: str | None = None) -> None:
    """Remove the empty mount points a run made. One another live run guards too (its mount
    namespace holds a mount there: removing the directory would unmount it there) is handed over
    to that run instead."""
    if not made:
        return
    others = [r for r in live_runs(root) if r.run_id != run_id]
    for p in made:
        holder = next((r for r in others if p in r.policy.guarded), None)
        if holder is not None:
            _hand_over(root, holder.run_id, p)
            continue
        try:
            os.rmdir(p)
        except OSError:
            pass


def load_policy(root: str, run_id: str) -> Policy:
    with open(os.path.join(run_dir(root, run_id), POLICY_FILE), "rb") as fh:
        return Policy.from_json(json.loads(fh.read()))


def live_runs(root: str) -> list[RunInfo]:
    """The runs whose process is alive, oldest first."""
    out: list[RunInfo] = []
    try:
        names = sorted(os.listdir(runs_dir(root)))
    except OSError:
        return out
    for name in names:
        if not name.isdigit() or not _alive(int(name)):
            continue
        try:
            with open(os.path.join(run_dir(root, name), RUN_FILE), "rb") as fh:
                info = json.loads(fh.read())
            policy = load_policy(root, name)
        except (OSError, ValueError, TypeError):
            continue
        out.append(RunInfo(name, int(info.get("pid", name)), list(info.get("agent") or []),
                           float(info.get("started_at") or 0), policy))
    return sorted(out, key=lambda r: r.started_at)


def pick_run(root: str, run_id: str | None) -> RunInfo:
    """The run ``run_id``, or the only live run; a usage error listing them when several are live."""
    runs = live_runs(root)
    if run_id is not None:
        for r in runs:
            if r.run_id == run_id:
                return r
        raise UsageError(f"no live agentlog run {run_id!r} (live: {', '.join(r.run_id for r in runs) or 'none'})")
    if not runs:
        raise UsageError("no agentlog run is live on this data root (start one with `agentlog run AGENT`)")
    if len(runs) > 1:
        listing = "; ".join(f"{r.run_id}: {' '.join(r.agent)[:60]} in {r.policy.project}" for r in runs)
        raise UsageError(f"several runs are live, say which with --run ID: {listing}")
    return runs[0]


def update_policy(root: str, run_id: str, change: Callable[[Policy], str | None]) -> tuple[Policy, str | None]:
    """Apply ``change`` to the run's policy under its lock; a new version is written (atomically)
    when ``change`` returns None, and nothing when it returns a message (no change)."""
    d = run_dir(root, run_id)
    fd = open_locked(os.path.join(d, LOCK_FILE), 10.0)
    if fd is None:
        raise AgentlogError(f"the policy of run {run_id} is locked by another change; try again")
    try:
        policy = load_policy(root, run_id)
        note = change(policy)
        if note is None:
            policy.version += 1
            write_json_atomic(os.path.join(d, POLICY_FILE), policy.to_json())
        return policy, note
    finally:
        os.close(fd)


def grant(root: str, path: str, run_id: str | None) -> tuple[RunInfo, str]:
    """``agentlog allow PATH``: writes under PATH allowed for the run's next brokered command."""
    if not os.path.exists(path):
        raise UsageError(f"{path} does not exist; nothing to allow")
    target = canonical(path)
    run = pick_run(root, run_id)
    check_grantable(target, run.policy)

    def change(p: Policy) -> str | None:
        was_denied = target in p.denies
        if was_denied:
            p.denies.remove(target)
        if target in p.grants and not was_denied:
            return "was already allowed"
        if not was_denied:
            p.grants.append(target)
        return None

    policy, note = update_policy(root, run.run_id, change)
    run.policy = policy
    return run, f"run {run.run_id}: writes under {target} {note or 'allowed from the next command'}"


def revoke(root: str, path: str, run_id: str | None) -> tuple[RunInfo, str]:
    """``agentlog deny PATH``: a grant taken back, or writes under PATH denied, from the next command."""
    target = canonical(path) if os.path.lexists(path) else os.path.abspath(os.path.expanduser(path))
    run = pick_run(root, run_id)

    def change(p: Policy) -> str | None:
        if target in p.grants:
            p.grants.remove(target)
            return None
        if target in p.denies:
            return "were already denied"
        p.denies.append(target)
        return None

    policy, note = update_policy(root, run.run_id, change)
    run.policy = policy
    return run, f"run {run.run_id}: writes under {target} {note or 'denied from the next command'}"
