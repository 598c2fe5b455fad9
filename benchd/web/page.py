"""The status page at ``/`` and one page per probe at ``/probe/NAME``, server-rendered.

Both are built from the ``/api/status`` document (so page and API never
disagree) and need nothing else: no script, no stylesheet, font or image from
anywhere, so they work offline and behind auth. A probe's card answers what
an operator asks right after a change: how is it (health in words that are no
cycle outcome's name), what dropped (each drifted metric@k with its baseline,
its value now, the delta and the verdict), which model now and at the
baseline, which queries regressed (their text, expected ids and ranks before
and after), and the charts over the kept history (:mod:`benchd.web.charts`):
quality with its baseline, latency, and every cycle's outcome, on a time axis
with markers at model changes, reloads and failed cycles. The probe page adds
every kept cycle in a table and the last cycle's queries. Every string from a
store or a config is escaped.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from benchd import __version__
from benchd.result import MIN_SAMPLES
from benchd.surfacers.status import HEALTH_WORDS
from benchd.web.charts import Marker, Series, line_chart, outcome_chart
from benchd.web.headline import changes_block, quality_words, short_answers_fact

__all__ = [
    "HEALTH_COLORS",
    "LATENCY_COLORS",
    "OUTCOME_COLORS",
    "SERIES_COLORS",
    "render_page",
    "render_probe_page",
]

HEALTH_COLORS = {
    "healthy": "#1a7f37",
    "quality-dropped": "#b35900",
    "rankings-changed": "#8a6100",
    "partial": "#9a6700",
    "not-measuring": "#cf222e",
    "waiting": "#6e7781",
}
OUTCOME_COLORS = {
    "success": "#2da44e",
    "degraded": "#d4a72c",
    "failed": "#e5534b",
    "timeout": "#8250df",
}
SERIES_COLORS = ("#0969da", "#bf3989", "#1b7c83", "#953800", "#6639ba", "#116329")
LATENCY_COLORS = {"p50": "#54aeff", "p99": "#fb8f44"}
_MEASURES = ("hit", "recall", "recall_all", "precision", "mrr", "ndcg", "map")
_OVERVIEW_QUERIES = 10  # regressed queries on the overview; the probe page lists them all

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1rem;color:#1f2328;background:#fff;
max-width:1400px}
h1{font-size:1.4rem;margin:0 0 .2rem}h2{font-size:1.15rem;margin:0 0 .4rem;
overflow-wrap:anywhere}
h3{font-size:1rem;margin:.8rem 0 .3rem}
.meta{color:#59636e;margin:0 0 1rem}a{color:#0969da}
.probe{border:1px solid #d1d9e0;border-radius:8px;padding:.8rem;margin:0 0 1.2rem}
.health{display:inline-block;color:#fff;border-radius:4px;padding:.1rem .6rem;
font-weight:600;margin-left:.4rem}
.reason{margin:.2rem 0 .6rem;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.15rem 1rem;margin:0 0 .8rem}
dt{color:#59636e}dd{margin:0;overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%;margin:0 0 .8rem}
table{border-collapse:collapse}td,th{border:1px solid #d1d9e0;padding:.15rem .5rem;
text-align:right;vertical-align:top}th:first-child,td:first-child{text-align:left}
.text{text-align:left;overflow-wrap:anywhere}
tr.drifted td{background:#fff1e5}
table.history td,table.history th,table.drift td{white-space:nowrap}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,360px),1fr));
gap:1rem;align-items:start}figure{margin:0}
svg.chart{background:#f6f8fa;border-radius:6px;width:100%;height:auto;display:block}
svg text{font:12px system-ui,sans-serif;fill:#424a53}svg .chart-title{font-weight:600}
.hint{color:#59636e}
@media (max-width:600px){body{margin:.5rem}.probe{padding:.5rem}
dl{grid-template-columns:minmax(0,1fr)}dt{margin-top:.3rem}td,th{padding:.15rem .3rem}
table.cards,table.cards tbody,table.cards tr,table.cards td{display:block;width:auto}
table.cards tr:first-child{display:none}table.cards tr{border:1px solid #d1d9e0;
margin:0 0 .4rem}table.cards td{border:0;text-align:left}
table.cards td::before{content:attr(data-label) ": ";color:#59636e}}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _html(title: str, body: str, *, refresh: bool = True) -> str:
    meta = '<meta http-equiv="refresh" content="30">' if refresh else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{meta}'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>{body}</body></html>\n"
    )


def render_page(document: Mapping[str, Any], *, now: float | None = None) -> str:
    """The overview for a ``/api/status`` document (built with ``queries=False``)."""
    now = time.time() if now is None else now
    probes = document.get("probes", {})
    config = document.get("config", {})
    cards = "".join(_card(name, probe, config, now) for name, probe in probes.items())
    links = (
        '<a href="metrics">metrics</a> · <a href="api/status">api/status</a> · '
        '<a href="readyz">readyz</a> · <a href="healthz">healthz</a>'
    )
    body = (
        f'<h1>benchd</h1><p class="meta">version {_e(__version__)} · '
        f"{len(probes)} probe{'s' if len(probes) != 1 else ''} · {links}</p>"
        f"{_reload_note(config)}{cards or '<p>No probes configured.</p>'}"
    )
    return _html("benchd status", body)


def render_probe_page(document: Mapping[str, Any], name: str, *, now: float | None = None) -> str:
    """``/probe/NAME``: the card, every kept cycle in full and the last cycle's queries.

    ``document`` is a ``/api/status`` document holding ``name`` (with queries).
    """
    now = time.time() if now is None else now
    probe = document["probes"][name]
    config = document.get("config", {})
    history = probe.get("history") or []
    last = probe.get("last") or {}
    body = (
        f'<p class="meta"><a href="../">all probes</a> · '
        f'<a href="../api/status?probe={_e(quote(name, safe=""))}">this probe as JSON</a></p>'
        f"{_reload_note(config)}{_card(name, probe, config, now, full=True)}"
        f"<h3>The last {len(history)} cycles (newest first)</h3>{_history_table(history, last)}"
        f"<h3>Queries of cycle #{_e(last.get('cycle', '–'))}</h3>{_queries_table(last)}"
    )
    return _html(f"benchd: {name}", body)


def _reload_note(config: Mapping[str, Any]) -> str:
    if config.get("last_reload_successful", True):
        return ""
    return (
        '<p class="reload-error" data-reload="failed"><strong>Last reload failed:</strong> '
        f"{_e(config.get('last_reload_error') or 'see the log')} "
        "(the previous configuration is still running)</p>"
    )


def _card(
    name: str, probe: Mapping[str, Any], config: Mapping[str, Any], now: float,
    *, full: bool = False,
) -> str:  # fmt: skip
    health = str(probe.get("health", "waiting"))
    color = HEALTH_COLORS.get(health, HEALTH_COLORS["waiting"])
    history = list(reversed(probe.get("history") or []))  # oldest first
    last = probe.get("last") or {}
    drift = last.get("drift") or {}
    href = _e(quote(name, safe=""))
    link = "" if full else f' <a class="details" href="probe/{href}">details</a>'
    charts = (
        _quality_chart(history, last, config),
        _latency_chart(history, config),
        _outcome_chart(history),
    )
    return (
        f'<section class="probe" id="probe-{_e(name)}" data-probe="{_e(name)}" '
        f'data-state="{_e(probe.get("state", "pending"))}" data-health="{_e(health)}">'
        f'<h2>{_e(name)}<span class="health" style="background:{color}">'
        f"{_e(HEALTH_WORDS.get(health, health))}</span>{link}</h2>"
        f'<p class="reason">{_e(probe.get("reason") or "")}</p>'
        f"{changes_block(probe)}"
        f"{_facts(probe, last, history, now)}{_drift_table(drift)}"
        f'<div class="charts">{"".join(charts)}</div>'
        f"{_regressed_table(drift, None if full else _OVERVIEW_QUERIES, href)}"
        f"{_quality_table(last)}</section>"
    )


def _facts(
    probe: Mapping[str, Any], last: Mapping[str, Any], history: Sequence[Mapping[str, Any]],
    now: float,
) -> str:  # fmt: skip
    drift = last.get("drift") or {}
    rows = [
        ("Model now", probe.get("model") or last.get("model") or "unknown"),
        ("Model at the baseline", _baseline_model(drift)),
        ("Baseline", _baseline(drift)),
        ("Cycles", _cycles(probe)),
        ("Last cycle", _last_cycle(last, probe.get("quality"))),
        ("Latency", _latency(last)),
        ("Last error", _last_error(last, history)),
        ("Next cycle", _next_cycle(probe, now)),
    ]
    short = short_answers_fact(probe, last)
    if short is not None:
        rows.insert(5, ("Short answers", short))
    items = "".join(f'<dt>{_e(k)}</dt><dd data-fact="{_e(k)}">{_e(v)}</dd>' for k, v in rows)
    return f'<dl class="facts">{items}</dl>'


def _baseline(drift: Mapping[str, Any]) -> str:
    kind = str(drift.get("baseline") or "none")
    text = {
        "pinned": "pinned (a baseline file)",
        "rolling": f"rolling (the last {drift.get('samples', '?')} compared cycles)",
        "none": "none yet",
    }.get(kind, kind)
    if kind != "none":
        text += "; " + _noise(drift)
    if drift.get("stale"):
        text += f" (stale: {drift.get('stale_reason') or 'unknown reason'})"
    return text


def _noise(drift: Mapping[str, Any]) -> str:
    """The reference's noise as the log's ``noise`` field names it, and what it rests on."""
    noise, samples = drift.get("noise", "?"), drift.get("samples", "?")
    why = {
        "measured": "drops are tested against it",
        "stable": "the samples never moved: every drop is real",
        "none": "one sample: nothing to measure, every drop is real",
    }.get(str(noise), "")
    unit = "sample" if samples == 1 else "samples"
    return f"noise {noise} over {samples} {unit}" + (f" ({why})" if why else "")


def _baseline_model(drift: Mapping[str, Any]) -> str:
    if drift.get("baseline_model"):
        return str(drift["baseline_model"])
    if drift.get("baseline") == "pinned":
        return "not recorded in the baseline file"
    return "no pinned baseline"


def _cycles(probe: Mapping[str, Any]) -> str:
    counts = probe.get("cycles") or {}
    total = probe.get("cycles_total", sum(counts.values()))
    parts = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    return f"{total} since benchd started (reloads included)" + (f": {parts}" if parts else "")


def _last_cycle(last: Mapping[str, Any], quality: object) -> str:
    """Its outcome (did it run?) with its quality verdict (what did it say?), and when."""
    if not last:
        return "none yet"
    duration = last.get("duration_s")
    took = f" ({duration:.2f} s)" if isinstance(duration, int | float) else ""
    return (
        f"#{last.get('cycle')} {last.get('outcome')}, {quality_words(quality)}; "
        f"started {last.get('started_at_iso')}{took}"
    )


def _latency(last: Mapping[str, Any]) -> str:
    """The headline p50 and p99, and how to get a percentile that is withheld."""
    latency = last.get("latency") or {}
    for key, label in (("corrected", "corrected, load pass"), ("service", "service")):
        summary = latency.get(key)
        if not summary or not summary.get("count"):
            continue
        count = int(summary["count"])
        shown = [f"{p} {_ms(summary.get(p))}" for p in ("p50", "p99") if _num(summary.get(p))]
        text = f"{'; '.join(shown) or 'no percentile yet'} ({label}, {count} requests)"
        if not _num(summary.get("p99")):
            text += "; " + _withheld_hint(last, count)
        return text
    return "no samples"


def _withheld_hint(last: Mapping[str, Any], count: int) -> str:
    """What a probe needs for p99: samples per cycle, from more queries or a load pass."""
    need = MIN_SAMPLES["p99"]
    load = last.get("load")
    if load:
        return (
            f"p99 withheld: it needs {need} samples a cycle and the load pass sent {count}; "
            "raise [probe.load] requests, duration_s or rate"
        )
    return (
        f"p99 withheld: it needs {need} samples a cycle and the serial pass gives one per "
        f'query ({count}); add a load pass ([probe.load] mode = "closed", '
        f"requests = {need}) or use a fixture of {need} or more queries"
    )


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


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _fmt(value: object, sign: bool = False) -> str:
    number = _num(value)
    if number is None:
        return "–"
    return f"{number:+.3f}" if sign else f"{number:.3f}"


def _verdict(metric: Mapping[str, Any], drift: Mapping[str, Any]) -> str:
    if metric.get("detected"):
        if drift.get("noise") == "measured":
            return f"dropped, p = {_fmt(metric.get('p_value'))}"
        return "dropped"
    delta = _num(metric.get("delta")) or 0.0
    return "within noise or min_delta" if delta < 0 else "held"


def _drift_table(drift: Mapping[str, Any]) -> str:
    """Each drifted metric@k: baseline, now, delta, verdict; the rest folded away."""
    metrics: Mapping[str, Mapping[str, Any]] = drift.get("metrics") or {}
    if not metrics:
        return ""
    head = (
        "<tr><th>metric@k</th><th>baseline</th><th>now</th><th>delta</th>"
        '<th class="text">verdict</th></tr>'
    )

    def row(key: str, metric: Mapping[str, Any]) -> str:
        flagged = ' class="drifted"' if metric.get("detected") else ""
        return (
            f'<tr{flagged} data-metric="{_e(key)}"><td data-label="metric@k">{_e(key)}</td>'
            f'<td data-value="baseline" data-label="baseline">{_fmt(metric.get("before"))}</td>'
            f'<td data-value="now" data-label="now">{_fmt(metric.get("after"))}</td>'
            f'<td data-value="delta" data-label="delta">{_fmt(metric.get("delta"), sign=True)}'
            f'</td><td data-label="verdict">{_e(_verdict(metric, drift))}</td></tr>'
        )

    drifted = [row(k, m) for k, m in metrics.items() if m.get("detected")]
    others = [row(k, m) for k, m in metrics.items() if not m.get("detected")]
    title = (
        f"Drifted against the {drift.get('baseline')} baseline ({len(drifted)} of {len(metrics)})"
        if drifted
        else f"No drift against the {drift.get('baseline')} baseline ({len(metrics)} compared)"
    )
    why = (
        "The baseline's samples never moved: every lost id is a real loss."
        if drift.get("noise") != "measured"
        else "Each drop is beyond the noise measured in the baseline (p: its adjusted p-value)."
    )
    table = (
        f'<div class="scroll"><table class="drift">{head}{"".join(drifted)}</table></div>'
        f'<p class="hint">{_e(why)}</p>'
        if drifted
        else ""
    )
    rest = (
        f'<details><summary>{len(others)} other metric@k compared</summary><div class="scroll">'
        f'<table class="drift-rest">{head}{"".join(others)}</table></div></details>'
        if others
        else ""
    )
    return f"<h3>{_e(title)}</h3>{table}{rest}"


def _ranks(expected: Sequence[str], ranks: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{i}: {'not returned' if ranks.get(i) is None else ranks.get(i)}" for i in expected
    )


def _regressed_table(drift: Mapping[str, Any], limit: int | None, href: str) -> str:
    regressed: Sequence[Mapping[str, Any]] = drift.get("regressed_queries") or []
    if not regressed:
        return ""
    shown = regressed if limit is None else regressed[:limit]
    rows = []
    for r in shown:
        expected = list(r.get("expected_ids") or r.get("ranks_before") or [])
        rows.append(
            f'<tr class="regressed" data-query="{_e(r.get("id"))}">'
            f'<td class="text" data-label="query">{_e(r.get("q") or r.get("id"))}</td>'
            f'<td class="text" data-label="expected">{_e(", ".join(expected))}</td>'
            f'<td class="text" data-label="ranks before">'
            f'{_e(_ranks(expected, r.get("ranks_before") or {}))}</td>'
            f'<td class="text" data-label="ranks after">'
            f'{_e(_ranks(expected, r.get("ranks_after") or {}))}</td>'
            f'<td data-label="worst drop">{_e(r.get("metric"))} '
            f"{_fmt(r.get('before'))} → {_fmt(r.get('after'))}</td>"
            "</tr>"
        )
    more = ""
    if len(shown) < len(regressed):
        more = (
            f'<p class="hint">{len(regressed) - len(shown)} more on '
            f'<a class="more" href="probe/{href}#regressed">the probe\'s page</a>.</p>'
        )
    anchor = "" if limit else ' id="regressed"'  # the probe's page: the overview links here
    return (
        f"<h3{anchor}>Regressed queries ({len(regressed)})</h3>"
        '<div class="scroll"><table class="regressed cards"><tr><th>query</th><th>expected ids</th>'
        "<th>ranks before</th><th>ranks after</th><th>worst drop</th></tr>"
        f"{''.join(rows)}</table></div>{more}"
    )


def _quality_table(last: Mapping[str, Any]) -> str:
    ks = last.get("ks") or []
    aggregate = last.get("aggregate") or {}
    if last.get("unranked") and aggregate:
        return _set_quality_table(last, aggregate)
    if not ks or not aggregate:
        return '<p class="quality">No quality readings from the last cycle.</p>'
    head = "".join(f"<th>@{_e(k)}</th>" for k in ks)
    rows = []
    for measure in _MEASURES:
        values = [aggregate.get(f"{measure}@{k}") for k in ks]
        if all(v is None for v in values):
            continue
        cells = "".join(f"<td>{_fmt(v)}</td>" for v in values)
        rows.append(f"<tr><td>{_e(measure)}</td>{cells}</tr>")
    return (
        f'<div class="scroll"><table class="quality"><tr><th>last quality</th>{head}</tr>'
        f"{''.join(rows)}</table></div>"
    )


def _set_quality_table(last: Mapping[str, Any], aggregate: Mapping[str, Any]) -> str:
    """A store answering sets: its whole-answer measures, and why rank measures are absent."""
    rows = "".join(
        f"<tr><td>{_e(m)}</td><td>{_fmt(aggregate.get(m))}</td></tr>"
        for m in ("hit", "recall", "recall_all", "precision")
        if aggregate.get(m) is not None
    )
    return (
        f'<div class="scroll"><table class="quality"><tr><th>last quality</th>'
        f"<th>whole answer</th></tr>{rows}</table></div>"
        f'<p class="hint">{_e(last.get("unranked"))}</p>'
    )


# --------------------------------------------------------------------------- charts


def _markers(history: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> list[Marker]:
    """Model changes (label, or the rankings moving), reloads and failed cycles."""
    out: list[Marker] = []
    model, changed = "", False
    for h in history:
        at = float(h.get("started_at") or 0.0)
        now_model = str(h.get("model") or "")
        if model and now_model and now_model != model:
            out.append(Marker("model change", at, f"model {model} → {now_model} "
                                                  f"({_cycle_at(h)})"))  # fmt: skip
        elif h.get("model_changed") and not changed:
            out.append(Marker("model change", at, f"rankings changed ({_cycle_at(h)})"))
        model, changed = now_model or model, bool(h.get("model_changed"))
        if h.get("outcome") in ("failed", "timeout"):
            tip = f"cycle #{h.get('cycle')} {h.get('outcome')}: {h.get('error_kind') or ''}"
            out.append(Marker("failed cycle", at, tip))
    if history:
        first = float(history[0].get("started_at") or 0.0)
        end = float(history[-1].get("finished_at") or history[-1].get("started_at") or 0.0)
        for at in config.get("reload_times") or []:
            if first <= at <= end:
                out.append(Marker("reload", float(at), "configuration reloaded"))
    return out


def _cycle_at(summary: Mapping[str, Any]) -> str:
    return f"cycle #{summary.get('cycle')}, started {summary.get('started_at_iso')}"


def _t(summary: Mapping[str, Any]) -> float:
    return float(summary.get("started_at") or 0.0)


def _charted_ks(ks: Sequence[int]) -> list[int]:
    """At most three cut-offs (six lines): 10 when measured, the smallest and the largest."""
    if len(ks) <= len(SERIES_COLORS) // 2:
        return list(ks)
    return sorted({k for k in ks if k == 10} | {min(ks), max(ks)})


def _quality_chart(
    history: Sequence[Mapping[str, Any]], last: Mapping[str, Any], config: Mapping[str, Any]
) -> str:
    ks = last.get("ks") or []
    metrics = (last.get("drift") or {}).get("metrics") or {}
    names = [f"{m}@{k}" for k in _charted_ks(ks) for m in ("recall", "ndcg")]
    if last.get("unranked"):  # a set has no cut-off
        names = ["recall", "precision"]
    series = [
        Series(
            name,
            color,
            [(_t(h), _num((h.get("aggregate") or {}).get(name))) for h in history],
            _num((metrics.get(name) or {}).get("before")),
        )
        for name, color in zip(names, SERIES_COLORS, strict=False)
    ]
    kind = (last.get("drift") or {}).get("baseline") or "none"
    return line_chart(
        "quality",
        f"Quality over {len(history)} cycles",
        series,
        _markers(history, config),
        unit=lambda v, step: f"{v:.2f}",
        floor=0.0,
        ceil=1.0,
        min_span=0.05,
        baseline_label=f"baseline ({kind})",
    )


def _ms_tick(seconds: float, step: float) -> str:
    """A latency tick in ms (in s from 1 s), with the decimals its step needs."""
    if seconds >= 1.0:
        return f"{seconds:g} s"
    step_ms = step * 1000
    decimals = next((d for d in range(4) if abs(round(step_ms, d) - step_ms) < 1e-9), 4)
    return f"{seconds * 1000:.{decimals}f} ms"


def _latency_chart(history: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> str:
    series = [
        Series(
            name,
            color,
            [(_t(h), _num(h.get(f"latency_{name}_s"))) for h in history],
        )
        for name, color in LATENCY_COLORS.items()
    ]
    chart = line_chart(
        "latency",
        f"Latency over {len(history)} cycles",
        series,
        [m for m in _markers(history, config) if m.kind != "model change"],
        unit=_ms_tick,
        floor=0.0,
        min_span=0.0005,
    )
    missing = [s.name for s in series if not s.drawn]
    if not missing or not history:
        return chart
    if len(missing) == len(series) and not any(h.get("requests") for h in history):
        note = "no search request in the kept history: no latency to draw"
    else:
        note = f"{', '.join(missing)} withheld in every kept cycle (too few samples: see Latency)"
    caption = f'<figcaption class="hint">{_e(note)}</figcaption>'
    return f'<figure class="chart-note">{chart}{caption}</figure>'


def _outcome_chart(history: Sequence[Mapping[str, Any]]) -> str:
    cycles = [
        (
            float(h.get("started_at") or 0.0),
            float(h.get("finished_at") or h.get("started_at") or 0.0),
            str(h.get("outcome")),
            f"cycle #{h.get('cycle')}: {h.get('outcome')}, {quality_words(h.get('quality'))}; "
            f"started {h.get('started_at_iso')}",
        )
        for h in history
    ]
    return outcome_chart(f"Outcome of {len(history)} cycles", cycles, OUTCOME_COLORS)


# --------------------------------------------------------------------------- probe page


def _history_table(history: Sequence[Mapping[str, Any]], last: Mapping[str, Any]) -> str:
    """Every kept cycle, newest first: outcome, model, quality at each k, latency, errors."""
    if not history:
        return "<p>No cycle yet.</p>"
    ks = last.get("ks") or []
    keys = [f"{m}@{k}" for m in ("recall", "ndcg", "mrr", "precision", "hit") for k in ks]
    head = (
        "<tr><th>cycle</th><th>started (UTC)</th><th>outcome</th>"
        '<th class="text">quality</th><th>s</th>'
        '<th class="text">model</th><th>drift</th>'
        + "".join(f"<th>{_e(k)}</th>" for k in keys)
        + "<th>p50</th><th>p99</th><th>requests</th><th>errors</th>"
        '<th class="text">why</th></tr>'
    )
    rows = []
    for h in history:
        aggregate = h.get("aggregate") or {}
        flags = [w for w, f in (("drift", h.get("drifted")), ("rankings", h.get("model_changed")))
                 if f]  # fmt: skip
        why = h.get("error_kind") or ", ".join(h.get("degraded_reasons") or [])
        cells = "".join(f"<td>{_fmt(aggregate.get(k))}</td>" for k in keys)
        rows.append(
            f'<tr data-cycle="{_e(h.get("cycle"))}"><td>#{_e(h.get("cycle"))}</td>'
            f"<td>{_e(h.get('started_at_iso'))}</td><td>{_e(h.get('outcome'))}</td>"
            f'<td class="text" data-quality="{_e(h.get("quality"))}">'
            f"{_e(quality_words(h.get('quality')))}</td>"
            f'<td>{_fmt(h.get("duration_s"))}</td><td>{_e(h.get("model") or "")}'
            f"</td><td>{_e(', '.join(flags) or '–')}</td>{cells}"
            f"<td>{_ms(h.get('latency_p50_s'))}</td><td>{_ms(h.get('latency_p99_s'))}</td>"
            f"<td>{_e(h.get('requests'))}</td><td>{_e(h.get('errors'))}</td>"
            f'<td class="text">{_e(why)}</td></tr>'
        )
    return f'<div class="scroll"><table class="history">{head}{"".join(rows)}</table></div>'


def _queries_table(last: Mapping[str, Any]) -> str:
    queries: Sequence[Mapping[str, Any]] = last.get("queries") or []
    if not queries:
        return "<p>No queries in the last cycle.</p>"
    ks = last.get("ks") or []
    keys = [f"{m}@{k}" for m in ("recall", "ndcg") for k in ks]
    head = (
        '<tr><th>id</th><th class="text">query</th><th class="text">expected ids</th>'
        '<th class="text">ranked ids (top 10)</th>'
        + "".join(f"<th>{_e(k)}</th>" for k in keys)
        + "<th>latency</th><th>error</th></tr>"
    )
    rows = []
    for q in queries:
        metrics = q.get("metrics") or {}
        rows.append(
            f'<tr data-query="{_e(q.get("id"))}"><td>{_e(q.get("id"))}</td>'
            f'<td class="text">{_e(q.get("q"))}</td>'
            f'<td class="text">{_e(", ".join(q.get("expected_ids") or []))}</td>'
            f'<td class="text">{_e(", ".join((q.get("ranked_ids") or [])[:10]))}</td>'
            + "".join(f"<td>{_fmt(metrics.get(k))}</td>" for k in keys)
            + f"<td>{_ms(q.get('latency_s'))}</td><td>{_e(q.get('error') or '')}</td></tr>"
        )
    return f'<div class="scroll"><table class="queries">{head}{"".join(rows)}</table></div>'
