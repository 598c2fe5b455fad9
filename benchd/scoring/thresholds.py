"""Judging one cycle's readings against thresholds: pure functions over a CycleResult.

The thresholds themselves (parsing, checking against a probe) are
:mod:`benchd.config.thresholds`; a verdict (:class:`benchd.result.Verdict`)
is computed once, by the probe runner, and carried in the result, so
surfacers only read it. A measure the cycle did not produce (a failed
cycle) counts as breached.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence

from benchd.config.thresholds import Threshold
from benchd.result import MIN_SAMPLES, CycleResult, LatencySummary, Verdict

__all__ = ["evaluate", "evaluate_all", "measured", "withheld_note"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}


def _latency(summary: LatencySummary | None, measure: str) -> float | None:
    if summary is None or summary.count == 0:
        return None
    return float(getattr(summary, measure))


def _load_latency(result: CycleResult) -> LatencySummary | None:
    load = result.load
    if load is None:
        return None
    if load.corrected is not None and load.corrected.count:
        return load.corrected  # open loop: from when each request should have been sent
    return load.service


def _ratio(outcomes: Mapping[str, int]) -> float | None:
    total = sum(outcomes.values())
    return None if total == 0 else (total - outcomes.get("ok", 0)) / total


def measured(t: Threshold, result: CycleResult) -> float | None:
    """The value ``t`` is about in ``result``, or None when the cycle did not produce it."""
    if t.family == "quality":
        means: Mapping[str, float] = result.aggregate
        if t.pass_ == "load":
            means = result.load.aggregate if result.load is not None else {}
        value = means.get(t.measure)
        return None if value is None else float(value)
    if t.family == "latency":
        summary = result.serial_latency if t.pass_ == "serial" else _load_latency(result)
        return _latency(summary, t.measure)
    if t.pass_ == "serial":
        outcomes: dict[str, int] = {}
        for q in result.queries:
            key = q.error or "ok"
            outcomes[key] = outcomes.get(key, 0) + 1
        return _ratio(outcomes)
    return None if result.load is None else _ratio(result.load.requests)


def withheld_note(t: Threshold, result: CycleResult) -> str:
    """What a latency threshold was really checked against, when its percentile is withheld.

    Below :data:`~benchd.result.MIN_SAMPLES` a percentile is not published; the
    nearest-rank value there is the maximum of the samples, so ``p99<0.2`` on 16
    samples checks the slowest request (a pass still holds for the true p99).
    """
    need = MIN_SAMPLES.get(t.measure)
    if t.family != "latency" or need is None:
        return ""
    summary = result.serial_latency if t.pass_ == "serial" else _load_latency(result)
    if summary is None or not 0 < summary.count < need:
        return ""
    return (
        f"{t.measure} needs >= {need} samples and the {t.pass_} pass had {summary.count}: "
        "checked against their maximum"
    )


def evaluate(t: Threshold, result: CycleResult) -> Verdict:
    """Whether ``result`` meets ``t``; a measure the cycle lacks is breached."""
    value = measured(t, result)
    breached = value is None or not _OPS[t.op](value, t.bound)
    return Verdict(t, value, breached, note=withheld_note(t, result))


def evaluate_all(thresholds: Sequence[Threshold], result: CycleResult) -> tuple[Verdict, ...]:
    return tuple(evaluate(t, result) for t in thresholds)
