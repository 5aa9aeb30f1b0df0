"""One scenario with one release, checked end to end: what the suite and the bench run.

``python -m agentlog.bench.agents.check LABEL SCENARIO SCRATCH`` prints the
result as JSON (the suite runs it that way inside a network namespace that has
only a loopback interface, to show nothing needs another address).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agentlog.bench.agents.drivers import (
    RELEASES, files_containing, import_transcripts, run_scenario, transcripts, wait_for_sync,
)
from agentlog.bench.agents.scenarios import Scenario, load_all
from agentlog.bench.agents.truth import compare, real_calls
from agentlog.core import UsageError


@dataclass
class Check:
    release: str
    scenario: str
    returncode: int
    timed_out: bool
    wall_s: float
    calls_made: int
    calls_scripted: int
    sync_s: float | None
    """Seconds from the CLI's exit until the background transcript import had read it all (Codex)."""
    from_hooks: list[str] = field(default_factory=list)
    """Facts the record got wrong from the hooks (plus the background import)."""
    after_import: list[str] = field(default_factory=list)
    reimport_new_events: int = 0
    transcripts: int = 0
    canary_files: list[str] = field(default_factory=list)
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return (self.returncode == 0 and not self.timed_out and self.calls_made == self.calls_scripted
                and not self.from_hooks and not self.after_import and self.reimport_new_events == 0
                and not self.canary_files and self.transcripts > 0)


def check(release_label: str, scenario: Scenario | str, scratch: Path, cache: Path | None = None,
          hooks_only: bool = False) -> Check:
    """Run ``scenario`` with the release ``release_label`` in ``scratch`` and check
    the record against the truth, from hooks and after importing the transcript."""
    release = next((r for r in RELEASES if r.label == release_label), None)
    if release is None:
        raise UsageError(f"no pinned release {release_label!r} (pinned: {', '.join(r.label for r in RELEASES)})")
    if isinstance(scenario, str):
        scenarios = load_all()
        if scenario not in scenarios:
            raise UsageError(f"no scenario {scenario!r} (known: {', '.join(scenarios)})")
        scenario = scenarios[scenario]
    run = run_scenario(release, scenario, scratch, cache=cache)
    out = Check(release.label, scenario.name, run.returncode, run.timed_out, round(run.wall_s, 3),
                len(real_calls(run)), scenario.action_count, None, stderr_tail=run.stderr[-600:])
    if run.returncode != 0 or run.timed_out:
        return out
    out.sync_s = wait_for_sync(run)
    out.from_hooks = compare(run)
    out.transcripts = len(transcripts(run))
    if hooks_only:
        return out
    import_transcripts(run)
    out.after_import = compare(run)
    again = import_transcripts(run)["totals"]
    out.reimport_new_events = int(again.get("events", 0))
    if scenario.canaries:
        out.canary_files = files_containing(run.data_root, scenario.canaries) + _canaries_in_store(run.data_root, scenario.canaries)
    return out


def _canaries_in_store(root: Path, canaries: tuple[str, ...]) -> list[str]:
    """``events:<canary>`` for each canary found in the store's text (its files are
    compressed, so a byte search alone could miss one)."""
    from agentlog.api import run_sql

    found = []
    for canary in canaries:
        sql = ("select count(*) as n from events where contains(coalesce(CAST(content AS VARCHAR), '') || "
               f"coalesce(CAST(raw AS VARCHAR), '') || coalesce(text, ''), '{canary}')")
        if run_sql(str(root), sql).records()[0]["n"]:
            found.append("events:" + canary)
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: python -m agentlog.bench.agents.check RELEASE SCENARIO SCRATCH\n")
        return 2
    result = check(argv[0], argv[1], Path(argv[2]))
    print(json.dumps(asdict(result) | {"ok": result.ok}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
