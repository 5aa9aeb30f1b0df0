"""The projection's rules: the tuning constants (how long a silence, a gap or an
idle spell may last) and the phase of a work unit read off its last tool calls.

The cross-session stage (:mod:`agentlog.projection.assemble`), the engine's
SQL views and the time-travel answers (:mod:`agentlog.query.state`) all apply
them, so they live here once.
"""

from __future__ import annotations

from typing import Any, Final

from agentlog.projection.session import ATTEMPT_ENDING, MUTATING

US: Final = 1_000_000
MIN: Final = 60 * US
STALE_AFTER: Final = 30 * MIN
BLOCKED_OPEN_FOR: Final = 12 * 60 * MIN
HANDOFF_PATHS_GAP: Final = 30 * MIN
HANDOFF_ANY_GAP: Final = 5 * MIN
UNIT_TURN_GAP: Final = 10 * MIN
UNIT_IDLE_DONE: Final = 30 * MIN
UNIT_IDLE_ABANDONED: Final = 120 * MIN
CONFLICT_WINDOW: Final = 120 * MIN


def phase(tail: list[list[Any]], edited_before: bool, blocked: bool) -> tuple[str, str]:
    """A work unit's phase and why, from its last calls (``tail``: up to five
    [category, status, git subcommand, command category], oldest first), whether
    it changed files before them, and whether it is blocked."""
    if blocked:
        return "blocked", "a permission request or input request is pending"
    decisive = [c for c in tail if c[0] in ATTEMPT_ENDING or c[0] == "plan"]
    if not decisive:
        if edited_before:
            return "review", "no change in the last calls after earlier edits"
        return "explore", "reads and searches only"
    last = decisive[-1]
    cat, status, git_sub, cmd_cat = last
    if cat in ATTEMPT_ENDING and status in ("failure", "denied"):
        return "debug", f"the last {'shell command' if cat == 'shell' else 'change'} failed"
    if cat == "shell" and git_sub in ("commit", "push"):
        return "deliver", f"git {git_sub}"
    if cat == "shell" and cmd_cat == "test":
        prior_edit = edited_before or any(c[0] in MUTATING for c in tail[: tail.index(last)])
        if prior_edit:
            return "verify", "tests run after a change"
        return "explore", "tests run without a change"
    if cat == "plan":
        return "plan", "planning"
    if cat in MUTATING and tail[-1] is not last:
        return "review", "reading after a change"
    if tail[-1] is last:
        return "implement", "the last call changed something"
    return "review", "reading after a change"
