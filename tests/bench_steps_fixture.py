"""Steps for tests of the benchmark harness (loaded with --steps-module).

Not collected by pytest (no test_ prefix). Each step misbehaves in one way the
harness must survive.
"""

from __future__ import annotations

import os
import time
from typing import Any

from agentlog.bench.context import StepContext, StepFn
from agentlog.bench.projection_steps import engine_step


def quick(ctx: StepContext) -> dict[str, Any]:
    """Returns at once with one table and two metrics."""
    return {
        "tables": [{"title": "Quick", "columns": ["what", "value"], "rows": [["events", ctx.events], ["seed", ctx.seed]], "note": "a note"}],
        "metrics": {"events": ctx.events, "half": ctx.events / 2},
        "extra": {"pid": os.getpid(), "bytecode": [os.environ.get(k) for k in ("PYTHONPYCACHEPREFIX",
                                                                             "PYTHONDONTWRITEBYTECODE")]},
    }


def hog(ctx: StepContext) -> dict[str, Any]:
    """Allocates (and touches) 32 MiB at a time, up to 3 GiB, then waits."""
    held = []
    for _ in range(96):
        held.append(b"x" * (32 << 20))
        time.sleep(0.01)
    time.sleep(60)
    return {"tables": [], "metrics": {"held": len(held)}}


def sleeper(ctx: StepContext) -> dict[str, Any]:
    """Ignores its time budget and sleeps for a minute."""
    ctx.progress("sleeping")
    time.sleep(60)
    return {"tables": [], "metrics": {}}


def polite(ctx: StepContext) -> dict[str, Any]:
    """Loops until the soft time cap, then stops and marks itself capped."""
    rounds = 0
    while not ctx.over_budget():
        rounds += 1
        time.sleep(0.05)
    ctx.cap(f"polite stopped after {rounds} rounds")
    return {"tables": [], "metrics": {"rounds": rounds}}


def crasher(ctx: StepContext) -> dict[str, Any]:
    """Raises."""
    raise RuntimeError("crasher step failed on purpose")


def after(ctx: StepContext) -> dict[str, Any]:
    """Runs after the bad ones, to show the run went on."""
    return {"tables": [{"title": "After", "columns": ["ok"], "rows": [[True]]}], "metrics": {"ran": 1}}


STEPS: dict[str, StepFn] = {
    "quick": quick,
    "hog": hog,
    "sleeper": sleeper,
    "polite": polite,
    "crasher": crasher,
    "after": after,
    # A shipped step at a size below its smallest (engine_100k): a smoke test of the engine steps.
    "engine_10k": engine_step(10_000),
}
