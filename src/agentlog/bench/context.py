"""What a benchmark step is given and what it is: :class:`StepContext` and :data:`StepFn`.

Its own module so that the step modules and the harness that runs them both
import it, and neither imports the other (the harness finds the steps through
:mod:`agentlog.bench.steps`, its registry).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

DEFAULT_TIME_CAP_SECS = 600.0

StepFn = Callable[["StepContext"], dict[str, Any]]
"""A step: ``fn(ctx) -> {"tables": [...], "metrics": {...}, ...}`` (see :mod:`agentlog.bench.harness`)."""


@dataclass
class StepContext:
    """What a step gets: the workload size, its budgets, a scratch directory, progress."""

    name: str
    events: int
    seed: int
    time_cap_secs: float = DEFAULT_TIME_CAP_SECS
    rss_cap_bytes: int = 0
    out_dir: str | None = None
    started: float = field(default_factory=time.monotonic)
    capped: bool = False
    cap_notes: list[str] = field(default_factory=list)
    _tmp: list[str] = field(default_factory=list)
    _base: str | None = None
    spread_scratch: bool | None = None
    """Whether the scratch directories are spread over the file system (None: none made yet)."""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        return self.time_cap_secs - self.elapsed()

    def over_budget(self) -> bool:
        """True once the soft time cap is spent: loops should stop and call :meth:`cap`."""
        return self.elapsed() >= self.time_cap_secs

    def cap(self, note: str) -> None:
        """Mark the result ``capped``: a loop stopped at the time cap; ``note`` says where."""
        self.capped = True
        self.cap_notes.append(note)

    def progress(self, message: str) -> None:
        """One line on stderr (the parent shows the latest line while the step runs)."""
        print(f"[{self.name} {self.elapsed():7.1f}s] {message}", file=sys.stderr, flush=True)

    def tmpdir(self) -> str:
        """A scratch directory, removed when the step ends: made in the step's own directory
        under the system's temporary one, which is marked to spread the directories made in
        it over the file system (:func:`.common.spread_directories`, where it can be)."""
        if self._base is None:
            from agentlog.bench.common import spread_directories

            self._base = tempfile.mkdtemp(prefix=f"agentlog-bench-{self.name}-")
            self.spread_scratch = spread_directories(self._base)
        path = tempfile.mkdtemp(dir=self._base)
        self._tmp.append(path)
        return path

    def cleanup(self) -> None:
        for path in self._tmp:
            shutil.rmtree(path, ignore_errors=True)
        self._tmp.clear()
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)
            self._base = None


__all__ = ["DEFAULT_TIME_CAP_SECS", "StepContext", "StepFn"]
