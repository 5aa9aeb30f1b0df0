"""The published figures we measure ourselves against, and our own targets.

``anchors.json`` (package data beside this module) lists figures of
attemptdb, nd7 and engram from the seed documents, each with the step and
metric of ours it compares with, and the targets the issues set. This module
loads it and matches it against a results object: our value, the ratio, and
a verdict, computed, so the report never states a comparison by hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

#: How far a calibration figure ("better": "match") may stray before the report calls it out.
MATCH_TOLERANCE = 0.10


def load_anchors() -> dict[str, Any]:
    text = resources.files("agentlog.bench").joinpath("anchors.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@dataclass
class Comparison:
    """One anchor next to our figure."""

    anchor: dict[str, Any]
    ours: float | None
    state: str  # measured | not_measured | not_run | step_failed | no_metric
    why: str = ""

    def machine_short(self, anchors: dict[str, Any]) -> str:
        a = self.anchor
        return str(a.get("machine_short") or anchors.get("machines_short", {}).get(str(a["project"]).split()[0], ""))

    @property
    def theirs(self) -> float:
        return float(self.anchor["value"])

    @property
    def ratio(self) -> float | None:
        """Ours ÷ theirs."""
        if self.ours is None or not self.theirs:
            return None
        return self.ours / self.theirs

    @property
    def factor(self) -> float | None:
        """How many times better (> 1) or worse (< 1) we are; None for calibration figures."""
        r = self.ratio
        better = self.anchor.get("better")
        if r is None or better in ("match", "baseline") or r == 0:
            return None
        return 1 / r if better == "lower" else r

    @property
    def worse(self) -> bool:
        if self.state != "measured":
            return False
        if self.anchor.get("better") == "match":
            r = self.ratio
            return r is not None and abs(r - 1) > MATCH_TOLERANCE
        f = self.factor
        return f is not None and f < 1

    def verdict(self) -> str:
        if self.state != "measured":
            return self.why
        r = self.ratio
        if r is None:
            return "—"
        if self.anchor.get("better") == "baseline":
            return "machine baseline"
        if self.anchor.get("better") == "match":
            off = (r - 1) * 100
            return f"{'within' if abs(r - 1) <= MATCH_TOLERANCE else 'off by'} {off:+.1f} %"
        f = self.factor
        assert f is not None
        if 0.995 <= f <= 1.005:
            return "same"
        return f"{f:.2f}× better" if f > 1 else f"{1 / f:.2f}× worse"


def _steps_by_name(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in results.get("steps", [])}


def step_metric(entry: dict[str, Any], metric: str) -> float | None:
    """A metric of a step that ran: from its ``metrics``, or its peak RSS for ``peak_rss_bytes``."""
    result = entry.get("result") or {}
    value = (result.get("metrics") or {}).get(metric)
    if value is None and metric == "peak_rss_bytes":
        rss = entry.get("peak_rss") or {}
        value = max((v for k, v in rss.items() if k in ("ru_maxrss_bytes", "vmhwm_bytes") and v), default=None)
    return float(value) if isinstance(value, (int, float)) else None


def locate(results: dict[str, Any], step: str | None, metric: str | None, issue: int | None) -> tuple[float | None, str, str]:
    """Our value of ``step``/``metric`` in ``results``: (value, state, why not)."""
    if not step or not metric:
        return None, "not_measured", f"not measured yet (issue {issue})" if issue else "not measured (no step planned)"
    steps = _steps_by_name(results)
    known = results.get("run", {}).get("known_steps") or []
    entry = steps.get(step)
    if entry is None:
        if step in known:
            return None, "not_run", f"step {step} not run in this run"
        return None, "not_measured", f"not measured yet (issue {issue})" if issue else f"not measured yet (no step {step})"
    if entry.get("status") not in ("ok", "capped"):
        return None, "step_failed", f"step {step} {entry.get('status')}"
    value = step_metric(entry, metric)
    if value is None:
        return None, "no_metric", "not measured at this size"
    return value, "measured", ""


def compare(results: dict[str, Any], anchors: dict[str, Any] | None = None) -> list[Comparison]:
    anchors = anchors or load_anchors()
    out = []
    for a in anchors["anchors"]:
        ours = a.get("ours") or {}
        value, state, why = locate(results, ours.get("step"), ours.get("metric"), a.get("issue"))
        out.append(Comparison(a, value, state, why))
    return out


@dataclass
class TargetCheck:
    target: dict[str, Any]
    ours: float | None
    state: str
    why: str = ""

    @property
    def met(self) -> bool | None:
        if self.ours is None:
            return None
        op, v, x = self.target["op"], self.target["value"], self.ours
        if op == "<":
            return bool(x < v)
        if op == "<=":
            return bool(x <= v)
        if op == ">":
            return bool(x > v)
        if op == ">=":
            return bool(x >= v)
        if op == "==":
            return bool(x == v)
        if op == "between":
            return bool(v[0] <= x <= v[1])
        raise ValueError(f"unknown target op {op!r}")


def check_targets(results: dict[str, Any], anchors: dict[str, Any] | None = None) -> list[TargetCheck]:
    anchors = anchors or load_anchors()
    out = []
    for t in anchors.get("targets", []):
        issue = None
        src = str(t.get("source", ""))
        if src.startswith("issue "):
            try:
                issue = int(src.split()[1])
            except (IndexError, ValueError):
                issue = None
        value, state, why = locate(results, t["step"], t["metric"], issue)
        out.append(TargetCheck(t, value, state, why))
    return out
