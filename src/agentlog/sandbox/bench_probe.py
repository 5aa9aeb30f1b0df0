"""What ``agentlog bench sandbox`` times of the sandbox itself: building a floor ruleset."""

from __future__ import annotations

from agentlog.sandbox import landlock as L
from agentlog.sandbox.policy import build, floor_policy


def floor_cost(root: str, project: str, runs: int, *, agent: str | None = "claude") -> tuple[list[float], int]:
    """``runs`` timings (ms) of walking the filesystem and building the live ruleset; the rule count."""
    abi = L.require_abi()
    policy = floor_policy("bench", project, root, agent=agent)
    times: list[float] = []
    rules = 0
    for _ in range(runs):
        built = build(policy, abi, live=True)
        times.append(built.build_ms)
        rules = built.paths
        built.ruleset.close()
    return times, rules
