"""Small SVG charts drawn on the server: stacked bars per day, horizontal bars, a time strip.

No library and no script: each function returns the SVG text (a :class:`markupsafe.Markup`,
so the templates insert it as it is), every label and value passing through :func:`esc`
(XML escaping, control characters dropped): a project or model name is captured text and
may hold ``</svg><script>`` or quotes. Colours are classes (``s0`` … ``s7``, ``seg-*``)
that ``static/charts.css`` paints, since the Content-Security-Policy forbids inline styles.
Sizes are in the viewBox; the page scales the chart to its width (docs/web.md, "Charts").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final, Sequence

from markupsafe import Markup

SERIES: Final = 8
"""Series drawn in their own colour; the rest are summed into "other"."""
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(value: object) -> str:
    """Text safe in an SVG element or a double-quoted attribute."""
    text = _CONTROL.sub("", str(value))
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&#39;"))


def number(v: float, unit: str = "") -> str:
    """A short label: 1.2k, 3.4M; dollars with cents below 100."""
    if unit == "$":
        return f"${v:,.2f}" if abs(v) < 100 else f"${v:,.0f}"
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.1f}{suffix}{unit}"
    if v == int(v):
        return f"{v:.0f}{unit}"
    return f"{v:.2f}{unit}" if a < 1 else f"{v:.1f}{unit}"


def _nice(top: float) -> float:
    """A round axis maximum at or above ``top``."""
    if top <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(top))
    for m in (1, 2, 2.5, 5, 10):
        if m * step >= top:
            return float(m * step)
    return float(10 * step)


def fold(series: dict[str, list[float]], keep: int = SERIES) -> dict[str, list[float]]:
    """The ``keep - 1`` biggest series by total and the rest summed as "other" (when more than ``keep``)."""
    if len(series) <= keep:
        return series
    order = sorted(series, key=lambda k: (-sum(series[k]), k))
    out = {k: series[k] for k in order[:keep - 1]}
    rest = [series[k] for k in order[keep - 1:]]
    out["other"] = [sum(col) for col in zip(*rest)]
    return out


def stacked_bars(label: str, days: Sequence[str], series: dict[str, list[float]], unit: str = "") -> Markup:
    """One bar per day, stacked by series (each series a list aligned with ``days``)."""
    w, h, left, bottom, top_pad = 720, 220, 56, 34, 8
    plot_w, plot_h = w - left - 8, h - bottom - top_pad
    totals = [sum(col) for col in zip(*series.values())] if series else [0.0] * len(days)
    top = _nice(max(totals, default=0.0))
    n = max(len(days), 1)
    slot = plot_w / n
    bar = max(min(slot * 0.8, 40.0), 1.0)
    out = [f'<svg class="svgchart" viewBox="0 0 {w} {h}" role="img" aria-label="{esc(label)}">',
           f"<title>{esc(label)}</title>"]
    for i in range(5):
        v = top * i / 4
        y = top_pad + plot_h - plot_h * i / 4
        out.append(f'<line class="grid" x1="{left}" x2="{w - 8}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="axis" x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{esc(number(v, unit))}</text>')
    every = max(1, -(-n // 8))
    for d, day in enumerate(days):
        x = left + d * slot + (slot - bar) / 2
        base = float(top_pad + plot_h)
        for s, (name, values) in enumerate(series.items()):
            v = values[d] or 0.0
            if v <= 0:
                continue
            bh = plot_h * v / top
            base -= bh
            out.append(f'<rect class="s{s % SERIES}" x="{x:.1f}" y="{base:.1f}" width="{bar:.1f}" height="{bh:.1f}">'
                       f"<title>{esc(day)} · {esc(name)}: {esc(number(v, unit))}</title></rect>")
        if d % every == 0:
            out.append(f'<text class="axis" x="{x + bar / 2:.1f}" y="{h - bottom + 16}" text-anchor="middle">'
                       f"{esc(day[5:] if len(day) == 10 else day)}</text>")
    out.append("</svg>")
    return Markup("".join(out))


def hbars(label: str, rows: Sequence[tuple[str, float, float | None]], unit: str = "") -> Markup:
    """One horizontal bar per row: (label, value, a second value drawn as a tick, e.g. p95)."""
    w, row_h, left = 720, 22, 170
    h = max(len(rows), 1) * row_h + 8
    top = _nice(max([max(v, t or 0.0) for _, v, t in rows], default=0.0))
    plot_w = w - left - 70
    out = [f'<svg class="svgchart" viewBox="0 0 {w} {h}" role="img" aria-label="{esc(label)}">',
           f"<title>{esc(label)}</title>"]
    for i, (name, v, tick) in enumerate(rows):
        y = 4 + i * row_h
        shown = name if len(name) <= 26 else name[:25] + "…"
        bw = plot_w * v / top
        out.append(f'<text class="axis" x="{left - 6}" y="{y + 15}" text-anchor="end">{esc(shown)}</text>'
                   f'<rect class="s0" x="{left}" y="{y + 3}" width="{max(bw, 1):.1f}" height="{row_h - 6}">'
                   f"<title>{esc(name)}: {esc(number(v, unit))}"
                   + (f", p95 {esc(number(tick, unit))}" if tick is not None else "") + "</title></rect>")
        if tick is not None:
            tx = left + plot_w * tick / top
            out.append(f'<line class="tick" x1="{tx:.1f}" x2="{tx:.1f}" y1="{y + 1}" y2="{y + row_h - 1}"/>')
        out.append(f'<text class="axis" x="{left + max(bw, 1) + 4:.1f}" y="{y + 15}">{esc(number(v, unit))}</text>')
    out.append("</svg>")
    return Markup("".join(out))


@dataclass(frozen=True)
class Span:
    """One piece of a time strip: its row, its start and end (µs) and its kind (a class)."""

    row: int
    start: int
    end: int
    kind: str
    title: str


@dataclass
class _Mark:
    row: int
    kind: str
    start: int
    end: int
    count: int
    title: str


def strip(label: str, rows: Sequence[str], spans: Sequence[Span], t0: int, t1: int, *, width: int = 1000,
          max_marks: int = 600) -> Markup:
    """A Gantt of ``spans`` over [``t0``, ``t1``], one lane per row name. Spans of one lane and
    kind closer than a unit of the width are merged (a 10,000-event session stays a few hundred
    marks); a merged mark's title counts what it holds."""
    lane, left = 18, 92
    h = len(rows) * lane + 18
    span_us = max(t1 - t0, 1)
    unit = span_us / (width - left)
    merged: list[_Mark] = []
    last: dict[tuple[int, str], _Mark] = {}
    for s in sorted(spans, key=lambda s: (s.start, s.end)):
        m = last.get((s.row, s.kind))
        if m is not None and s.start - m.end <= unit:
            m.end = max(m.end, s.end)
            m.count += 1
            continue
        m = _Mark(s.row, s.kind, s.start, s.end, 1, s.title)
        merged.append(m)
        last[(s.row, s.kind)] = m
    out = [f'<svg class="strip" viewBox="0 0 {width} {h}" role="img" aria-label="{esc(label)}">',
           f"<title>{esc(label)}</title>"]
    for i, name in enumerate(rows):
        out.append(f'<text class="axis" x="4" y="{i * lane + 13}">{esc(name)}</text>'
                   f'<line class="grid" x1="{left}" x2="{width}" y1="{i * lane + lane - 1}" y2="{i * lane + lane - 1}"/>')
    for m in merged[:max_marks]:
        x = left + (m.start - t0) / unit
        wd = max((m.end - m.start) / unit, 1.5)
        text = m.title if m.count == 1 else f"{m.count} × {m.kind}"
        out.append(f'<rect class="seg-{esc(m.kind)}" x="{x:.1f}" y="{m.row * lane + 3}" width="{wd:.1f}" '
                   f'height="{lane - 6}"><title>{esc(text)}</title></rect>')
    secs = span_us / 1e6
    out.append(f'<text class="axis" x="{left}" y="{h - 3}">0</text><text class="axis" x="{width - 4}" y="{h - 3}" '
               f'text-anchor="end">{esc(_duration(secs))}</text></svg>')
    return Markup("".join(out))


def _duration(secs: float) -> str:
    if secs < 60:
        return f"{secs:.1f} s"
    if secs < 3600:
        return f"{secs / 60:.1f} min"
    return f"{secs / 3600:.1f} h"


__all__ = ["SERIES", "Span", "esc", "fold", "hbars", "number", "stacked_bars", "strip"]
