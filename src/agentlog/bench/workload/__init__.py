"""The seeded benchmark workload (issue 3).

A deterministic generator of the agents' own hook payloads and Claude Code
transcript lines, shaped like the workload of attemptdb's published benchmark
(``model.py`` lists every distribution and where it comes from), so that the
real capture path runs on it.

- :func:`generate` — ``events`` samples in stream order (``generator.py``);
- :class:`Canonicalizer` / :func:`sample_events` — the canonical wire events of
  samples, through ``agentlog.capture.hook.build`` (hooks) or, for
  transcripts, the lines written as Claude Code transcript files and imported
  by the shipped importer, ``agentlog.api.import_paths`` (``transcripts.py``);
- :func:`calibrate` — bytes per event, zstd ratio, kind mix, generation rate;
- :func:`load` — write the canonical events into a data root's session logs.

Not on the hook path: this package uses the full standard library.
"""

from __future__ import annotations

from agentlog.bench.workload.calibrate import calibrate
from agentlog.bench.workload.canonical import Canonicalizer, event_id, hook_events, sample_events
from agentlog.bench.workload.generator import DEFAULT_SEED, generate
from agentlog.bench.workload.load import load

__all__ = ["DEFAULT_SEED", "Canonicalizer", "calibrate", "event_id", "generate", "hook_events", "load",
           "sample_events"]
