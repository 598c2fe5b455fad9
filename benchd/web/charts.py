"""Server-rendered SVG charts for the status page: a time axis, y scaled to the data.

A line chart draws each series over the cycles' start times (UTC tick labels),
its pinned or rolling baseline as a dashed line, and vertical markers at model
changes, config reloads and failed cycles. Every legend entry names something
the chart draws: a series without a single reading is left out of the legend
and named in a note instead (``notes``), so the legend never promises a line
that is not there. Pure functions of plain numbers; nothing here reads a
document, a clock or a file.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise

__all__ = ["MARKER_COLORS", "Marker", "Series", "line_chart", "outcome_chart"]

MARKER_COLORS = {"model change": "#8250df", "reload": "#0550ae", "failed cycle": "#cf222e"}
BASELINE_COLOR = "#57606a"
W, H = 440, 230
_L, _R, _T, _B = 56, 14, 34, 34  # padding around the plot; the legend goes below it
_LEGEND_ROW = 15
_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Series:
    """One line: ``points`` are (unix time, value or None for no reading)."""

    name: str
    color: str
    points: Sequence[tuple[float, float | None]]
    baseline: float | None = None

    @property
    def drawn(self) -> bool:
        return any(v is not None for _, v in self.points)


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical line at ``at`` (unix time): ``kind`` is a key of :data:`MARKER_COLORS`."""

    kind: str
    at: float
    label: str


@dataclass(frozen=True, slots=True)
class _Frame:
    """The plot's scales: time to x, value to y."""

    t0: float
    t1: float
    y0: float
    y1: float
    plot_bottom: float
    ticks: tuple[float, ...] = field(default=())

    def x(self, t: float) -> float:
        width = W - _L - _R
        if self.t1 <= self.t0:
            return _L + width / 2
        return _L + width * (t - self.t0) / (self.t1 - self.t0)

    def y(self, value: float) -> float:
        span = self.y1 - self.y0
        share = 0.5 if span <= 0 else (value - self.y0) / span
        return self.plot_bottom - (self.plot_bottom - _T) * min(max(share, 0.0), 1.0)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _clock(t: float, step: float) -> str:
    stamp = datetime.fromtimestamp(t, UTC)
    return stamp.strftime("%H:%M:%S" if step < 60 else "%H:%M")


def nice_step(span: float, count: int = 4) -> float:
    """A 1/2/2.5/5 x 10^n step giving about ``count`` intervals over ``span``."""
    raw = span / max(count, 1)
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    step: float = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return step


def _value_range(values: Sequence[float], floor: float | None, ceil: float | None,
                 min_span: float) -> tuple[float, float]:  # fmt: skip
    """The data's range, padded 10%, at least ``min_span`` wide, within [floor, ceil]."""
    lo, hi = min(values), max(values)
    if hi - lo < min_span:
        middle = (hi + lo) / 2
        lo, hi = middle - min_span / 2, middle + min_span / 2
    pad = (hi - lo) * 0.1
    lo, hi = lo - pad, hi + pad
    if floor is not None and lo < floor:
        lo, hi = floor, hi + (floor - lo)
    if ceil is not None and hi > ceil:
        lo, hi = max(lo - (hi - ceil), floor if floor is not None else -math.inf), ceil
    return lo, hi


def _time_range(times: Sequence[float]) -> tuple[float, float]:
    t0, t1 = min(times), max(times)
    if t1 - t0 < 2.0:
        return t0 - 1.0, t1 + 1.0
    pad = (t1 - t0) * 0.03
    return t0 - pad, t1 + pad


def _time_axis(frame: _Frame) -> str:
    span = frame.t1 - frame.t0
    step = next((s for s in _TIME_STEPS if span / s <= 4), _TIME_STEPS[-1])
    first = math.ceil(frame.t0 / step) * step
    out = []
    t = first
    while t <= frame.t1:
        x = frame.x(t)
        anchor = "end" if x > W - _R - 25 else "start" if x < _L + 25 else "middle"
        out.append(
            f'<line x1="{x:.1f}" y1="{frame.plot_bottom}" x2="{x:.1f}" '
            f'y2="{frame.plot_bottom + 4}" stroke="#8c959f"/>'
            f'<text class="tick-x" x="{x:.1f}" y="{frame.plot_bottom + 15}" '
            f'text-anchor="{anchor}">{_clock(t, step)}</text>'
        )
        t += step
    out.append(
        f'<text x="{W - _R}" y="{frame.plot_bottom + 27}" text-anchor="end">time (UTC)</text>'
    )
    return "".join(out)


def _value_axis(frame: _Frame, unit: Callable[[float, float], str]) -> str:
    step = nice_step(frame.y1 - frame.y0)
    out = []
    v = math.ceil(frame.y0 / step - 1e-9) * step
    while v <= frame.y1 + 1e-9:
        y = frame.y(v)
        out.append(
            f'<line x1="{_L}" y1="{y:.1f}" x2="{W - _R}" y2="{y:.1f}" stroke="#d8dee4"/>'
            f'<text class="tick-y" x="{_L - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_e(unit(v, step))}</text>"
        )
        v += step
    box = (
        f'<line x1="{_L}" y1="{frame.plot_bottom}" x2="{W - _R}" y2="{frame.plot_bottom}" '
        f'stroke="#8c959f"/><line x1="{_L}" y1="{_T}" x2="{_L}" y2="{frame.plot_bottom}" '
        'stroke="#8c959f"/>'
    )
    return "".join(out) + box


def _line(series: Series, frame: _Frame) -> str:
    """The series' line and a dot per reading; a missing reading breaks the line."""
    runs: list[list[str]] = [[]]
    dots = []
    for t, value in series.points:
        if value is None:
            runs.append([])
            continue
        x, y = frame.x(t), frame.y(value)
        runs[-1].append(f"{x:.1f},{y:.1f}")
        dots.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{series.color}"/>')
    lines = "".join(
        f'<polyline points="{" ".join(run)}" fill="none" stroke="{series.color}" stroke-width="3"/>'
        for run in runs
        if len(run) > 1
    )
    return f'<g class="series" data-series="{_e(series.name)}">{lines}{"".join(dots)}</g>'


def _baseline(series: Series, frame: _Frame) -> str:
    if series.baseline is None:
        return ""
    y = frame.y(series.baseline)
    return (
        f'<line class="baseline" data-series="{_e(series.name)}" x1="{_L}" y1="{y:.1f}" '
        f'x2="{W - _R}" y2="{y:.1f}" stroke="{series.color}" stroke-width="2" '
        f'stroke-dasharray="7 4"><title>{_e(series.name)} baseline '
        f"{series.baseline:.3f}</title></line>"
    )


def _marker(marker: Marker, frame: _Frame) -> str:
    x = frame.x(marker.at)
    color = MARKER_COLORS[marker.kind]
    return (
        f'<g class="marker" data-marker="{_e(marker.kind)}"><title>{_e(marker.label)}</title>'
        f'<line x1="{x:.1f}" y1="{_T - 4}" x2="{x:.1f}" y2="{frame.plot_bottom}" '
        f'stroke="{color}" stroke-width="3" stroke-dasharray="6 3"/>'
        f'<rect x="{x - 5:.1f}" y="{_T - 10}" width="10" height="10" fill="{color}"/></g>'
    )


def _legend_items(entries: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str, int]]:
    """(name, color, style, row) per entry, wrapping to a new row when the line is full."""
    placed, x, row = [], _L, 0
    for name, color, style in entries:
        width = 18 + 7 * len(name) + 12
        if x + width > W - _R and x > _L:
            x, row = _L, row + 1
        placed.append((name, color, style, row))
        x += int(width)
    return placed


def _legend(entries: Sequence[tuple[str, str, str]], top: float) -> str:
    out, x, last_row = [], float(_L), 0
    for name, color, style, row in _legend_items(entries):
        if row != last_row:
            x, last_row = float(_L), row
        y = top + row * _LEGEND_ROW
        if style == "dash":
            swatch = (
                f'<line x1="{x}" y1="{y + 5}" x2="{x + 14}" y2="{y + 5}" stroke="{color}" '
                'stroke-width="2" stroke-dasharray="4 2"/>'
            )
        else:
            swatch = f'<rect x="{x}" y="{y}" width="14" height="10" fill="{color}"/>'
        out.append(
            f'<g class="legend" data-legend="{_e(name)}">{swatch}'
            f'<text x="{x + 18}" y="{y + 9}">{_e(name)}</text></g>'
        )
        x += 18 + 7 * len(name) + 12
    return "".join(out)


def _svg(kind: str, title: str, height: float, body: str) -> str:
    return (
        f'<svg class="chart" data-chart="{kind}" viewBox="0 0 {W} {height:.0f}" '
        f'role="img" aria-label="{_e(title)}"><title>{_e(title)}</title>'
        f'<text class="chart-title" x="{_L}" y="15">{_e(title)}</text>{body}</svg>'
    )


def line_chart(
    kind: str,
    title: str,
    series: Sequence[Series],
    markers: Sequence[Marker] = (),
    *,
    unit: Callable[[float, float], str],
    floor: float | None = None,
    ceil: float | None = None,
    min_span: float = 0.0,
    baseline_label: str = "baseline",
) -> str:
    """A line chart over time; ``unit(value, step)`` labels a y tick."""
    drawn = [s for s in series if s.drawn]
    values = [v for s in drawn for _, v in s.points if v is not None]
    values += [s.baseline for s in drawn if s.baseline is not None]
    times = [t for s in series for t, _ in s.points] + [m.at for m in markers]
    entries = [(s.name, s.color, "box") for s in drawn]
    if any(s.baseline is not None for s in drawn):
        entries.append((baseline_label, BASELINE_COLOR, "dash"))
    kinds = dict.fromkeys(m.kind for m in markers)
    entries += [(k, MARKER_COLORS[k], "dash") for k in kinds]
    rows = max((row for *_, row in _legend_items(entries)), default=0) + 1
    height = H + (rows - 1) * _LEGEND_ROW
    plot_bottom = H - _B - _LEGEND_ROW
    if not times:
        note = '<text x="60" y="90">no cycles in the kept history</text>'
        return _svg(kind, title, height, note)
    y0, y1 = (
        _value_range(values, floor, ceil, min_span)
        if values
        else (floor if floor is not None else 0.0, ceil if ceil is not None else 1.0)
    )
    t0, t1 = _time_range(times)
    frame = _Frame(t0, t1, y0, y1, plot_bottom)
    body = [_value_axis(frame, unit), _time_axis(frame)]
    if not values:
        body.append(f'<text x="{_L + 10}" y="{_T + 30}">no readings in the kept history</text>')
    body += [_baseline(s, frame) for s in drawn]
    body += [_marker(m, frame) for m in markers]
    body += [_line(s, frame) for s in drawn]
    body.append(_legend(entries, plot_bottom + 32))
    return _svg(kind, title, height, "".join(body))


def outcome_chart(
    title: str, cycles: Sequence[tuple[float, float, str, str]], colors: dict[str, str]
) -> str:
    """One bar per cycle (start, end, outcome, tooltip) on the same time axis."""
    plot_bottom = H - _B - _LEGEND_ROW
    if not cycles:
        return _svg("outcome", title, H, '<text x="60" y="90">no cycles yet</text>')
    t0, t1 = _time_range([c[0] for c in cycles] + [c[1] for c in cycles])
    frame = _Frame(t0, t1, 0.0, 1.0, plot_bottom)
    mids = sorted(frame.x((start + end) / 2) for start, end, *_ in cycles)
    gaps = [b - a for a, b in pairwise(mids) if b > a]
    width = max(min([(W - _L - _R) / max(len(cycles), 1), *gaps]) - 2, 2.0)  # never overlap
    bars = []
    for start, end, outcome, tip in cycles:
        x = max(frame.x((start + end) / 2) - width / 2, _L)
        bars.append(
            f'<rect class="outcome" data-outcome="{_e(outcome)}" x="{x:.1f}" y="{_T + 6}" '
            f'width="{min(width, W - _R - x):.1f}" height="{plot_bottom - _T - 6:.0f}" '
            f'fill="{colors.get(outcome, "#afb8c1")}"><title>{_e(tip)}</title></rect>'
        )
    seen = dict.fromkeys(c[2] for c in cycles)
    entries = [(o, colors.get(o, "#afb8c1"), "box") for o in colors if o in seen]
    body = _time_axis(frame) + "".join(bars) + _legend(entries, plot_bottom + 32)
    return _svg("outcome", title, H, body)
