"""What changed, for a person: one entry per change, and each cycle's quality verdict.

A probe's open changes are its drifted metric@k (baseline value, value now,
the verdict) and a change in its rankings (a model change?), each with the
time its episode began (the onset: the start of the cycle the drift stage
flagged first). :func:`quality_verdict` says, beside a cycle's outcome
(which only says whether the cycle ran), what the cycle said about quality.
``/api/status`` and the status page read the same words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from benchd.drift_outcome import DriftOutcome, MetricDrift

__all__ = ["QUALITY_WORDS", "change_list", "drift_reason", "quality_verdict"]

QUALITY_WORDS: Mapping[str, str] = {
    "dropped": "quality dropped",
    "rankings-changed": "rankings changed",
    "held": "quality held",
    "not-compared": "not compared (no baseline yet)",
    "not-measured": "not measured",
}
"""A cycle's quality verdict, key -> words: what the cycle says about quality,
beside its outcome (``success`` says only that the cycle ran to its end)."""


def quality_verdict(outcome: str, *, drifted: bool, model_changed: bool, compared: bool) -> str:
    """The key of :data:`QUALITY_WORDS` for one cycle."""
    if outcome in ("failed", "timeout"):
        return "not-measured"
    if drifted:
        return "dropped"
    if model_changed:
        return "rankings-changed"
    return "held" if compared else "not-compared"


def _iso(seconds: float | None) -> str | None:
    from benchd.surfacers.status import iso_time  # one clock format for every document

    return iso_time(seconds)


def metric_verdict(metric: MetricDrift, noise: str) -> str:
    """Why a drifted metric@k counts: beyond measured noise, or a reference that never moved."""
    if noise == "measured":
        return f"dropped beyond noise (p = {metric.p_value:.3g})"
    return "dropped (the baseline never moved: every lost id is real)"


def _worst_first(drift: DriftOutcome) -> list[tuple[str, MetricDrift]]:
    flagged = [(k, m) for k, m in drift.metrics.items() if m.detected]
    return sorted(flagged, key=lambda item: item[1].delta)


def _num(value: float) -> float | None:
    return value if math.isfinite(value) else None


def change_list(
    drift: DriftOutcome | None, *, onset: float | None, model_onset: float | None
) -> list[dict[str, Any]]:
    """One entry per open change: the rankings first (a model change explains the rest),
    then each drifted metric@k, worst first; what, before, now, delta, verdict, since when."""
    if drift is None:
        return []
    since = {"since": onset, "since_iso": _iso(onset)}
    out: list[dict[str, Any]] = [
        {
            "what": key,
            "before": _num(m.before),
            "now": _num(m.after),
            "delta": m.delta,
            "verdict": metric_verdict(m, drift.noise),
            **since,
        }
        for key, m in _worst_first(drift)
    ]
    change = drift.change
    if change is not None and change.model_changed:
        label = ""
        if drift.baseline_model and drift.model and drift.baseline_model != drift.model:
            label = f"; model label {drift.baseline_model} → {drift.model}"
        out.insert(
            0,
            {
                "what": f"rankings (overlap of the top {change.depth})",
                "before": change.overlap - change.overlap_delta,
                "now": change.overlap,
                "delta": change.overlap_delta,
                "verdict": f"rankings changed: a model or index change?{label}",
                "since": model_onset,
                "since_iso": _iso(model_onset),
            },
        )
    return out


def drift_reason(drift: DriftOutcome, onset: float | None) -> str:
    """A drifted probe's reason in one short line: the worst metric, and how many more."""
    (key, worst), *rest = _worst_first(drift)
    when = f" since {_iso(onset)}" if onset is not None else ""
    more = f" and {len(rest)} more metric@k" if rest else ""
    values = (
        f"{worst.before:.3f} → {worst.after:.3f}"
        if math.isfinite(worst.before) and math.isfinite(worst.after)
        else f"{worst.delta:+.3f}"
    )
    return f"quality dropped against the {drift.baseline} baseline{when}: {key} {values}{more}"

