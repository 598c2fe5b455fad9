"""The drift stage's verdict on one cycle: typed, frozen, and the only shape surfacers read.

:class:`DriftOutcome` is stored in ``CycleResult.drift``. It says what the
cycle was compared with (``baseline``), how noisy that reference was
(``noise``), per metric@k the change and both p-values, the regressed
queries with the ranks of their expected ids before and after, the
label-free change signals (:class:`ChangeSignals`) and whether this cycle
starts or ends a drift or model-change episode (``transition``), which the
log surfacer turns into ``drift_onset`` / ``drift_recovered`` /
``model_change_onset`` / ``model_change_recovered`` events. Nothing here
computes; :meth:`DriftOutcome.as_json` is the JSON shape of ``benchd once
--format json`` and ``/api/status`` (docs/json.md). It sits beside
:mod:`benchd.result`, outside :mod:`benchd.drift`, so that the result and the
surfacers read it without importing the drift stage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BaselineKind",
    "ChangeSignals",
    "DriftOutcome",
    "MetricDrift",
    "NoiseKind",
    "RegressedQuery",
    "Transition",
]

BaselineKind = Literal["pinned", "rolling", "none"]
NoiseKind = Literal["stable", "measured", "none"]
"""``stable``: the reference samples agreed exactly, so every change is real;
``measured``: they moved, and changes are tested against that noise;
``none``: one sample only, nothing to measure (treated as stable)."""
Transition = Literal["onset", "recovered"]


@dataclass(frozen=True, slots=True)
class MetricDrift:
    """One metric@k compared over ``n`` paired queries."""

    delta: float  # mean(current) - mean(reference), over the paired queries
    p_value: float  # the gate: P(a drop this large | the system's own noise), adjusted over keys
    p_value_queries: float  # sign-flip over queries: "generalizes over queries" (not the gate)
    detected: bool  # delta <= -min_delta and (stable reference, or p_value < alpha)
    ci_low: float  # bootstrap CI of delta over queries
    ci_high: float
    n: int
    before: float = math.nan  # mean of the reference over the paired queries (the baseline)
    after: float = math.nan  # mean of this cycle over the same queries (delta = after - before)

    def as_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
            "p_value": self.p_value,
            "p_value_queries": self.p_value_queries,
            "detected": self.detected,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
        }


@dataclass(frozen=True, slots=True)
class RegressedQuery:
    """A query whose value dropped; ``metric`` is the key where it dropped most."""

    id: str
    metric: str
    before: float
    after: float
    ranks_before: Mapping[str, int | None] = field(default_factory=dict)
    ranks_after: Mapping[str, int | None] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "metric": self.metric,
            "before": self.before,
            "after": self.after,
            "ranks_before": dict(self.ranks_before),
            "ranks_after": dict(self.ranks_after),
        }


@dataclass(frozen=True, slots=True)
class ChangeSignals:
    """Label-free signs that the store changed, whatever the labels say.

    ``overlap`` is the mean over queries of the rank-biased overlap of the
    top ``depth`` ids with the reference's ranking of the same query (1 =
    same order); ``overlap_delta`` is how far it fell below what unchanged
    cycles gave. ``model_changed`` = the fall is at least
    ``min_overlap_drop`` and beyond noise (``overlap_p_value < alpha``,
    or a reference whose rankings never moved) — or the store's own top
    scores shifted by ``min_score_shift`` (relative) beyond noise.
    """

    depth: int
    overlap: float
    overlap_delta: float
    overlap_p_value: float
    model_changed: bool
    label_changed: bool = False  # the store's model label differs from the baseline's
    score_shift: float | None = None  # mean top-score change / mean reference top score
    score_p_value: float | None = None  # two-sided, against the reference's score noise;
    # None below min_score_shift (such a shift cannot count, so it is not tested)

    def as_json(self) -> dict[str, Any]:
        return {
            "depth": self.depth,
            "overlap": self.overlap,
            "overlap_delta": self.overlap_delta,
            "overlap_p_value": self.overlap_p_value,
            "model_changed": self.model_changed,
            "label_changed": self.label_changed,
            "score_shift": self.score_shift,
            "score_p_value": self.score_p_value,
        }


@dataclass(frozen=True, slots=True)
class DriftOutcome:
    """What the drift stage concluded about one cycle (``CycleResult.drift``)."""

    baseline: BaselineKind = "none"
    stale: bool = False
    stale_reason: str | None = None
    noise: NoiseKind = "none"
    samples: int = 0  # reference samples per query: window cycles or baseline repeats
    metrics: Mapping[str, MetricDrift] = field(default_factory=dict)
    regressed: tuple[RegressedQuery, ...] = ()
    change: ChangeSignals | None = None
    transition: Transition | None = None  # drift episode starts / ends with this cycle
    model_transition: Transition | None = None  # model-change episode starts / ends
    model: str = ""  # the store's model label this cycle
    baseline_model: str | None = None  # the pinned baseline's, when compared with one
    # the embedding canary's vectors fell below the threshold pinned with the baseline
    canary_changed: bool = False

    @property
    def detected(self) -> bool:
        """Some compared metric@k drifted."""
        return any(m.detected for m in self.metrics.values())

    @property
    def model_changed(self) -> bool:
        """The label-free signals say the store's model (or index) changed: the rankings
        moved, or the embedding canary's vectors did."""
        return self.canary_changed or (self.change is not None and self.change.model_changed)

    @property
    def compared(self) -> bool:
        return self.baseline != "none"

    def as_json(self) -> dict[str, Any]:
        """The documented JSON shape (docs/json.md)."""
        return {
            "baseline": self.baseline,
            "stale": self.stale,
            "stale_reason": self.stale_reason,
            "noise": self.noise,
            "samples": self.samples,
            "detected": self.detected,
            "model_changed": self.model_changed,
            "model": self.model,
            "baseline_model": self.baseline_model,
            "metrics": {key: m.as_json() for key, m in self.metrics.items()},
            "regressed_queries": [r.as_json() for r in self.regressed],
            "change": self.change.as_json() if self.change is not None else None,
        }
