"""The daemon's memory check: after an ingest pass that added events, the incremental check
(:mod:`.touched`) of the memories they touched, against the repositories they came from.

The events name their project's root (the git work tree a hook ran in): each that is a git
repository is checked against in turn (its ``HEAD`` compared with the one its memories were
last checked against); events that name none are checked with no repository (file evidence
keeps the finding of the last check that could verify it). Bounded in time: the memories
left when :data:`BUDGET_S` runs out are kept in the watermark and checked first next time
(:attr:`.truth.Report.pending`). Nothing is done when there is no memory.
"""

from __future__ import annotations

import os
import time
from typing import Final

from agentlog.memory.truth import Report

BUDGET_S: Final = 5.0
"""The longest one pass checks memories (seconds); a pass never stops between a check and its event."""
MAX_REPOS: Final = 8
"""Repositories checked against in one pass (the events' projects, sorted; the rest wait)."""


def _repositories(root: str) -> list[str] | None:
    """The git work trees the events since the watermark name (None: there is no memory)."""
    from agentlog.memory import store, touched
    from agentlog.memory.drift import GitUnavailable, open_repo

    if not os.path.exists(store.db_path(root)):
        return None
    con = store.connect(root)
    try:
        if con.execute("SELECT 1 FROM memories WHERE deleted = 0 AND archived = 0 LIMIT 1").fetchone() is None:
            return None
        wm = touched.load(con)
    finally:
        con.close()
    act = touched.read_since(root, wm.logs if wm else {}, touched.positions(root))
    out: list[str] = []
    for project in sorted(act.projects):
        if len(out) >= MAX_REPOS:
            break
        try:
            top = open_repo(project).top
        except GitUnavailable:
            continue
        if top not in out:
            out.append(top)
    return out


def after_ingest(root: str, *, budget_s: float = BUDGET_S) -> list[Report]:
    """The incremental check after an ingest (the store and projection are current: not caught
    up again), one run per repository the new events name (one with none when they name
    none); their reports (none when there is no memory)."""
    from agentlog.memory.truth import check

    started = time.monotonic()
    repos = _repositories(root)
    if repos is None:
        return []
    if not repos:
        return [check(root, use_repo=False, catch_up=False, budget_s=budget_s)]
    reports = []
    for repo in repos:
        left = budget_s - (time.monotonic() - started)
        reports.append(check(root, repo_dir=repo, catch_up=False, budget_s=max(left, 0.0)))
    return reports
