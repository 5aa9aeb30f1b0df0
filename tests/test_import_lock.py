"""Two imports into one data root never run at once (a hook's background import and the user's)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from agentlog.core.locks import open_locked
from agentlog.core.paths import ensure_dir, state_dir
from agentlog.importers import run

CHAT = Path(__file__).parent / "data" / "real_agents" / "codex" / "0.171.0" / "nonzero_exit.jsonl"


def test_an_import_waits_for_the_one_running(agentlog_home: Path) -> None:
    root = str(agentlog_home)
    ensure_dir(state_dir(root))
    fd = open_locked(os.path.join(state_dir(root), run.LOCK_FILE), 5)
    assert fd is not None
    done: list[float] = []

    def other() -> None:
        run.import_paths(root, ["codex"], [str(CHAT)])
        done.append(time.monotonic())

    t = threading.Thread(target=other)
    t.start()
    time.sleep(0.5)
    assert done == []  # still waiting for the lock
    released = time.monotonic()
    os.close(fd)
    t.join(60)
    assert done and done[0] >= released


def test_a_held_lock_is_one_clear_error(agentlog_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(agentlog_home)
    ensure_dir(state_dir(root))
    fd = open_locked(os.path.join(state_dir(root), run.LOCK_FILE), 5)
    monkeypatch.setattr(run, "LOCK_WAIT_S", 0.2)
    try:
        with pytest.raises(run.ImportBusy, match="another import held"):
            run.import_paths(root, ["codex"], [str(CHAT)])
        assert run.import_paths(root, ["codex"], [str(CHAT)], dry_run=True).totals()["events"] > 0
    finally:
        assert fd is not None
        os.close(fd)
