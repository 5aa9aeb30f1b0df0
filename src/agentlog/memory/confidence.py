"""Confidence: priors by author, confirm/contradict updates, decay and staleness.

The formulas are engram's (``shared/reference/engram.md`` §3.5–3.6), kept so
that confidences imported from engram mean the same here:

- prior at creation: 0.95 when a person states it, 0.60 when an agent infers
  it, 0.70 when it is imported — the author of the proposal that creates it
  (``agentlog memory import``'s proposals are the importer's: 0.70; a
  suggestion's an agent's: 0.60), unless the change carries a confidence of
  its own, as an engram record does (kept: engram's importer keeps the
  record's too, engram.md §3.5, where 0.70 is defined but unused);
- a confirmation moves it toward 1: ``c' = min(c + (1 − c)·w, 1)``, ``w`` 0.90
  for a person, 0.40 for an agent (a confirmation that arrives through a
  proposal counts as an agent's);
- a contradiction moves it toward 0: ``c' = max(c·(1 − w), 0)``, ``w`` 0.80
  for a person, 0.40 for an agent;
- effective confidence decays from the last confirmation (else creation) with
  a half-life per kind, computed when read, never stored:
  ``c_eff = c · 2^(−days / half_life)``; a memory is *stale* when ``c_eff`` is
  under its kind's threshold.

The four code kinds get half-lives by how fast such knowledge goes out of
date: a decision or a convention holds as long as a fact (365 days, stale
under 0.35); a procedure or a pitfall is tied to tools and code that change,
as fast as a project (180 days, 0.40).
"""

from __future__ import annotations

from typing import Final

US_PER_DAY: Final = 86_400 * 1_000_000
PRIORS: Final = {"person": 0.95, "agent": 0.60, "import": 0.70}
CONFIRM_WEIGHT: Final = {"person": 0.90, "agent": 0.40}
CONTRADICT_WEIGHT: Final = {"person": 0.80, "agent": 0.40}

#: kind → (half-life in days, staleness threshold)
DECAY: Final[dict[str, tuple[float, float]]] = {
    **dict.fromkeys(("person", "organization", "location"), (730.0, 0.30)),
    **dict.fromkeys(("preference", "skill", "fact", "decision", "convention"), (365.0, 0.35)),
    **dict.fromkeys(("goal", "project", "asset", "relationship", "contact", "procedure", "pitfall"), (180.0, 0.40)),
    "event": (30.0, 0.50),
}


def prior(author: str) -> float:
    """The confidence a memory starts with: ``person``, ``agent`` or ``import``."""
    return PRIORS[author]


def confirmed(c: float, by: str) -> float:
    return min(c + (1.0 - c) * CONFIRM_WEIGHT[by], 1.0)


def contradicted(c: float, by: str) -> float:
    return max(c * (1.0 - CONTRADICT_WEIGHT[by]), 0.0)


def effective(c: float, kind: str, anchor_us: int, now_us: int) -> float:
    """Confidence at ``now_us``, decayed since ``anchor_us`` (last confirmation, else creation)."""
    half_life, _ = DECAY[kind]
    days = max((now_us - anchor_us) / US_PER_DAY, 0.0)
    return float(c * 2.0 ** (-days / half_life))


def is_stale(c: float, kind: str, anchor_us: int, now_us: int) -> bool:
    return effective(c, kind, anchor_us, now_us) < DECAY[kind][1]


def stale_after_days(c: float, kind: str) -> float:
    """Days without confirmation after which a memory of confidence ``c`` is stale."""
    import math

    half_life, threshold = DECAY[kind]
    if c < threshold:
        return 0.0
    return half_life * math.log2(c / threshold)
