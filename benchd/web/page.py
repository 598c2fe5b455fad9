"""The status page at ``/``: one card per probe, server-rendered, with inline SVG charts.

The page is built from the same document as ``/api/status`` (so the two
never disagree) and needs nothing else: no script, no stylesheet, font or
image from anywhere, so it works offline and behind auth. Each card shows the
probe's state and its reason, the last quality at each k, the headline p99,
the last error, when the next cycle is due, the baseline and the model; and
three charts over the kept history: quality (recall and nDCG at each k),
latency (p99 and p50) and the outcome of every cycle.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from benchd import __version__

__all__ = ["OUTCOME_COLORS", "SERIES_COLORS", "STATE_COLORS", "render_page"]

STATE_COLORS = {"up": "#1a7f37", "degraded": "#9a6700", "failing": "#cf222e", "pending": "#6e7781"}
OUTCOME_COLORS = {
    "success": "#2da44e",
    "degraded": "#d4a72c",
    "failed": "#e5534b",
    "timeout": "#8250df",
}
SERIES_COLORS = ("#0969da", "#bf3989", "#1b7c83", "#953800", "#6639ba", "#116329")
LATENCY_COLORS = {"p99": "#fb8f44", "p50": "#54aeff"}
_MEASURES = ("hit", "recall", "precision", "mrr", "ndcg", "map")
_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 380, 170, 44, 10, 22, 36
_BAR_H = _H - _PAD_T - _PAD_B - 20

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem;color:#1f2328;background:#fff}
h1{font-size:1.4rem;margin:0 0 .2rem}h2{font-size:1.15rem;margin:0 0 .4rem}
.meta{color:#59636e;margin:0 0 1rem}a{color:#0969da}
.probe{border:1px solid #d1d9e0;border-radius:8px;padding:1rem;margin:0 0 1.2rem}
.state{display:inline-block;color:#fff;border-radius:4px;padding:.1rem .6rem;
font-weight:600;margin-left:.4rem;min-width:4.5rem;text-align:center}
.reason{margin:.2rem 0 .6rem}dl{display:grid;grid-template-columns:max-content 1fr;
gap:.15rem 1rem;margin:0 0 .8rem}dt{color:#59636e}dd{margin:0}
table{border-collapse:collapse;margin:0 0 .8rem}td,th{border:1px solid #d1d9e0;
padding:.15rem .5rem;text-align:right}th:first-child,td:first-child{text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:1rem}svg.chart{background:#f6f8fa;border-radius:6px}
svg text{font:11px system-ui,sans-serif;fill:#59636e}
"""


def render_page(document: Mapping[str, Any], *, now: float | None = None) -> str:
    """The whole page for a ``/api/status`` document (built with ``queries=False``)."""
    now = time.time() if now is None else now
    probes = document.get("probes", {})
    cards = "".join(_card(name, probe, now) for name, probe in probes.items())
    config = document.get("config", {})
    reload_note = ""
    if not config.get("last_reload_successful", True):
        reload_note = (
            '<p class="reload-error" data-reload="failed"><strong>Last reload failed:</strong> '
            f"{_e(config.get('last_reload_error') or 'see the log')} "
            "(the previous configuration is still running)</p>"
        )
    links = (
        '<a href="metrics">metrics</a> · <a href="api/status">api/status</a> · '
        '<a href="readyz">readyz</a> · <a href="healthz">healthz</a>'
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width">'
        '<meta http-equiv="refresh" content="30">'
        f"<title>benchd status</title><style>{_STYLE}</style></head><body>"
        f'<h1>benchd</h1><p class="meta">version {_e(__version__)} · '
        f"{len(probes)} probe{'s' if len(probes) != 1 else ''} · {links}</p>"
        f"{reload_note}{cards or '<p>No probes configured.</p>'}</body></html>\n"
    )


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _card(name: str, probe: Mapping[str, Any], now: float) -> str:
    state = str(probe.get("state", "pending"))
    color = STATE_COLORS.get(state, STATE_COLORS["pending"])
    history = list(reversed(probe.get("history") or []))  # oldest first
    last = probe.get("last") or {}
    charts = "".join(
        (
            _quality_chart(history, last.get("ks") or []),
            _latency_chart(history),
            _outcome_chart(history),
        )
    )
    return (
        f'<section class="probe" id="probe-{_e(name)}" data-probe="{_e(name)}" '
        f'data-state="{_e(state)}"><h2>{_e(name)}<span class="state" '
        f'style="background:{color}">{_e(state)}</span></h2>'
        f'<p class="reason">{_e(probe.get("reason") or "")}</p>'
        f"{_facts(probe, last, history, now)}{_quality_table(last)}"
        f'<div class="charts">{charts}</div></section>'
    )


def _facts(
    probe: Mapping[str, Any], last: Mapping[str, Any], history: Sequence[Mapping[str, Any]],
    now: float,
) -> str:  # fmt: skip
    drift = last.get("drift") or {}
    baseline = str(drift.get("baseline") or "none")
    if drift.get("stale"):
        baseline += f" (stale: {drift.get('stale_reason') or 'unknown reason'})"
    rows = [
        ("Model", probe.get("model") or last.get("model") or "unknown"),
        ("Baseline", baseline),
        ("Last cycle", _last_cycle(last)),
        ("Latency p99", _p99(last)),
        ("Last error", _last_error(last, history)),
        ("Next cycle", _next_cycle(probe, now)),
    ]
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows)
    return f'<dl class="facts">{items}</dl>'


def _last_cycle(last: Mapping[str, Any]) -> str:
    if not last:
        return "none yet"
    duration = last.get("duration_s")
    took = f", {duration:.2f} s" if isinstance(duration, int | float) else ""
    return f"#{last.get('cycle')} {last.get('outcome')} at {last.get('finished_at_iso')}{took}"


def _p99(last: Mapping[str, Any]) -> str:
    latency = last.get("latency") or {}
    for key, label in (("corrected", "corrected, load pass"), ("service", "service")):
        summary = latency.get(key)
        if not summary or not summary.get("count"):
            continue
        if isinstance(summary.get("p99"), int | float):
            return f"{_ms(summary['p99'])} ({label}, {summary['count']} requests)"
        why = (summary.get("withheld") or {}).get("p99", "too few samples")
        p50 = summary.get("p50")
        median = f"; p50 {_ms(p50)}" if isinstance(p50, int | float) else ""
        return f"n/a ({label}: {why}{median})"
    return "no samples"


def _last_error(last: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> str:
    error = last.get("error")
    if error:
        return f"{error.get('kind')}: {error.get('message')}"
    for summary in reversed(history):
        if summary.get("error_kind"):
            return f"{summary['error_kind']} in cycle #{summary.get('cycle')}"
    return "none in the kept history"


def _next_cycle(probe: Mapping[str, Any], now: float) -> str:
    if probe.get("running"):
        return "running now"
    due = probe.get("next_cycle_at")
    if not isinstance(due, int | float):
        return "not scheduled"
    return f"{probe.get('next_cycle_at_iso')} (in {max(0.0, due - now):.0f} s)"


def _ms(seconds: object) -> str:
    return f"{float(seconds) * 1000:.1f} ms" if isinstance(seconds, int | float) else "n/a"


def _quality_table(last: Mapping[str, Any]) -> str:
    ks = last.get("ks") or []
    aggregate = last.get("aggregate") or {}
    if not ks or not aggregate:
        return '<p class="quality">No quality readings from the last cycle.</p>'
    head = "".join(f"<th>@{_e(k)}</th>" for k in ks)
    rows = []
    for measure in _MEASURES:
        values = [aggregate.get(f"{measure}@{k}") for k in ks]
        if all(v is None for v in values):
            continue
        cells = "".join(f"<td>{v:.3f}</td>" if v is not None else "<td>–</td>" for v in values)
        rows.append(f"<tr><td>{_e(measure)}</td>{cells}</tr>")
    return f'<table class="quality"><tr><th>last quality</th>{head}</tr>{"".join(rows)}</table>'


def _svg(kind: str, title: str, body: str) -> str:
    return (
        f'<svg class="chart" data-chart="{kind}" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" role="img" aria-label="{_e(title)}">'
        f"<title>{_e(title)}</title>"
        f'<text x="{_PAD_L}" y="14">{_e(title)}</text>{body}</svg>'
    )


def _x(i: int, n: int) -> float:
    width = _W - _PAD_L - _PAD_R
    return _PAD_L + (width / 2 if n <= 1 else width * i / (n - 1))


def _y(value: float, top: float) -> float:
    height = _H - _PAD_T - _PAD_B
    return _PAD_T + height * (1 - min(max(value / top, 0.0), 1.0))


def _axes(top_label: str) -> str:
    x0, x1, y0, y1 = _PAD_L, _W - _PAD_R, _PAD_T, _H - _PAD_B
    return (
        f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#afb8c1"/>'
        f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#afb8c1"/>'
        f'<text x="2" y="{y0 + 4}">{_e(top_label)}</text><text x="2" y="{y1}">0</text>'
    )


def _series(values: Sequence[float | None], top: float, color: str, name: str, kind: str) -> str:
    """A line with a dot per reading; missing readings (failed cycles) break the line."""
    n = len(values)
    runs: list[list[str]] = [[]]
    dots = []
    for i, value in enumerate(values):
        if value is None:
            runs.append([])
            continue
        x, y = _x(i, n), _y(value, top)
        runs[-1].append(f"{x:.1f},{y:.1f}")
        dots.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"/>')
    lines = "".join(
        f'<polyline points="{" ".join(run)}" fill="none" stroke="{color}" stroke-width="3"/>'
        for run in runs
        if len(run) > 1
    )
    return f'<g class="series" data-series="{_e(name)}" data-{kind}="1">{lines}{"".join(dots)}</g>'


def _legend(names: Iterable[tuple[str, str]]) -> str:
    """A row of swatches under the plot (wrapping to a second row when long)."""
    out, x, y = [], _PAD_L, _H - 20
    for name, color in names:
        width = 14 + 7 * len(name) + 10
        if x + width > _W and x > _PAD_L:
            x, y = _PAD_L, y + 13
        out.append(
            f'<rect x="{x}" y="{y}" width="10" height="10" fill="{color}"/>'
            f'<text x="{x + 13}" y="{y + 9}">{_e(name)}</text>'
        )
        x += width
    return "".join(out)


def _quality_chart(history: Sequence[Mapping[str, Any]], ks: Sequence[int]) -> str:
    names = [f"{m}@{k}" for k in ks for m in ("recall", "ndcg")][: len(SERIES_COLORS)]
    colors = dict(zip(names, SERIES_COLORS, strict=False))
    body = [_axes("1")]
    for name in names:
        values = [_number((h.get("aggregate") or {}).get(name)) for h in history]
        body.append(_series(values, 1.0, colors[name], name, "quality"))
    body.append(_legend(colors.items()))
    return _svg("quality", f"Quality over {len(history)} cycles", "".join(body))


def _latency_chart(history: Sequence[Mapping[str, Any]]) -> str:
    p99 = [_number(h.get("latency_p99_s")) for h in history]
    p50 = [_number(h.get("latency_p50_s")) for h in history]
    top = max((v for v in p99 + p50 if v is not None), default=0.0) * 1.15 or 1.0
    body = [_axes(_ms(top).replace(" ms", "ms"))]
    body.append(_series(p50, top, LATENCY_COLORS["p50"], "p50", "latency"))
    body.append(_series(p99, top, LATENCY_COLORS["p99"], "p99", "latency"))
    body.append(_legend(LATENCY_COLORS.items()))
    return _svg("latency", f"Latency over {len(history)} cycles", "".join(body))


def _outcome_chart(history: Sequence[Mapping[str, Any]]) -> str:
    n = max(len(history), 1)
    width = (_W - _PAD_L - _PAD_R) / n
    bars = []
    for i, summary in enumerate(history):
        outcome = str(summary.get("outcome"))
        color = OUTCOME_COLORS.get(outcome, "#afb8c1")
        tip = f"cycle #{summary.get('cycle')}: {outcome} at {summary.get('started_at_iso')}"
        bars.append(
            f'<rect class="outcome" data-outcome="{_e(outcome)}" x="{_PAD_L + i * width:.1f}" '
            f'y="{_PAD_T + 10}" width="{max(width - 2, 1):.1f}" height="{_BAR_H}" '
            f'fill="{color}"><title>{_e(tip)}</title></rect>'
        )
    legend = _legend(
        (o, c) for o, c in OUTCOME_COLORS.items() if o in {str(h.get("outcome")) for h in history}
    )
    return _svg("outcome", f"Outcome of {len(history)} cycles", "".join(bars) + legend)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
