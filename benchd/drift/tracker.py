"""Drift: has a probe's ranking quality dropped, with statistical honesty?

For each metric@k, the per-query values of the current cycle are paired with
a baseline's on the query ids both have, and three numbers are computed:

- ``delta`` = mean(after) − mean(before);
- ``p_value`` of a two-sided sign-flip permutation test over the paired
  differences (exact for up to 16 changed queries, seeded Monte Carlo above);
- ``ci_low``/``ci_high``: a seeded bootstrap CI of the delta.

Drift is ``delta <= -min_delta`` **and** ``p_value < alpha``: big enough to
matter and unlikely to be noise. A 12-query corpus that wobbles by one query
cannot page anyone (its smallest p-value with one changed query is 1.0).

The baseline is a pinned :class:`~benchd.drift.baseline.Baseline` when a probe
has one, else the per-query mean of the last ``rolling_window`` successful
cycles. A pinned baseline whose fixture hash differs from the cycle's is
*stale*: it is not compared (the rolling baseline is used instead, and the
outcome says ``stale: true`` with the reason). Queries that errored in a
cycle are left out of the pairing: availability is counted elsewhere.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

import anyio
import anyio.to_thread
import structlog

from benchd.drift.baseline import Baseline, expected_ranks
from benchd.errors import ConfigError
from benchd.result import CycleResult
from benchd.scoring.stats import bootstrap_cis, paired_tests

__all__ = [
    "DEFAULT_METRICS",
    "KNOWN_METRICS",
    "DriftOutcome",
    "DriftReport",
    "DriftSettings",
    "DriftTracker",
    "MetricDrift",
    "MetricDriftDict",
    "RegressedQuery",
    "RegressedQueryDict",
    "compare_runs",
    "metric_keys",
]

DEFAULT_METRICS = ("recall", "ndcg", "mrr", "precision", "hit", "map", "recall_all")
KNOWN_METRICS = (*DEFAULT_METRICS, "rr", "ap", "r_precision")
_TOLERANCE = 1e-9  # a delta of exactly -min_delta counts, despite float rounding

PerQuery = Mapping[str, Mapping[str, float]]
Ranks = Mapping[str, int | None]


@dataclass(frozen=True, slots=True)
class DriftSettings:
    """When a drop counts as drift, and how hard the statistics work to say so."""

    min_delta: float = 0.05
    alpha: float = 0.01
    rolling_window: int = 5  # 0 disables the rolling baseline
    metrics: tuple[str, ...] = DEFAULT_METRICS
    seed: int = 0
    level: float = 0.95
    n_permutations: int = 10000
    n_bootstrap: int = 2000

    def __post_init__(self) -> None:
        problems = [
            ("min_delta", not (0.0 <= self.min_delta <= 1.0), "a ratio between 0 and 1"),
            ("alpha", not (0.0 < self.alpha < 1.0), "a p-value threshold between 0 and 1"),
            ("rolling_window", self.rolling_window < 0, "a number of cycles >= 0"),
            (
                "metrics",
                not self.metrics or not set(self.metrics) <= set(KNOWN_METRICS),
                f"a non-empty list of metric names from {', '.join(KNOWN_METRICS)}",
            ),
            ("level", not (0.0 < self.level < 1.0), "a confidence level between 0 and 1"),
            ("n_permutations", self.n_permutations < 100, "at least 100"),
            ("n_bootstrap", self.n_bootstrap < 100, "at least 100"),
        ]
        for name, bad, expected in problems:
            if bad:
                value = getattr(self, name)
                raise ConfigError(f"{name} = {value!r}: expected {expected}")


class MetricDriftDict(TypedDict):
    delta: float
    p_value: float
    detected: bool
    ci_low: float
    ci_high: float
    n: int


class RegressedQueryDict(TypedDict):
    id: str
    metric: str
    before: float
    after: float
    ranks_before: dict[str, int | None]
    ranks_after: dict[str, int | None]


class DriftOutcome(TypedDict):
    """What :meth:`DriftTracker.observe` returns, stored in ``CycleResult.drift``."""

    baseline: Literal["pinned", "rolling", "none"]
    stale: bool
    stale_reason: str | None
    metrics: dict[str, MetricDriftDict]
    regressed_queries: list[RegressedQueryDict]
    detected: bool


@dataclass(frozen=True, slots=True)
class MetricDrift:
    """One metric@k compared over ``n`` paired queries."""

    delta: float
    p_value: float
    detected: bool
    ci_low: float
    ci_high: float
    n: int

    def as_dict(self) -> MetricDriftDict:
        return MetricDriftDict(
            delta=self.delta,
            p_value=self.p_value,
            detected=self.detected,
            ci_low=self.ci_low,
            ci_high=self.ci_high,
            n=self.n,
        )


@dataclass(frozen=True, slots=True)
class RegressedQuery:
    """A query whose value dropped; ``metric`` is the key where it dropped most."""

    id: str
    metric: str
    before: float
    after: float


@dataclass(frozen=True, slots=True)
class DriftReport:
    """Every compared metric@k, the regressed queries, or why nothing was compared."""

    metrics: Mapping[str, MetricDrift] = field(default_factory=dict)
    regressed: tuple[RegressedQuery, ...] = ()
    stale: bool = False
    stale_reason: str | None = None
    n: int = 0

    @property
    def detected(self) -> bool:
        return any(m.detected for m in self.metrics.values())


def _key_order(key: str, metrics: Sequence[str]) -> tuple[int, int, str]:
    name, _, cut = key.partition("@")
    rank = metrics.index(name) if name in metrics else len(metrics)
    return rank, int(cut) if cut.isdigit() else 0, key


def metric_keys(rows: Sequence[Mapping[str, float]], metrics: Sequence[str]) -> list[str]:
    """Keys present in every row whose metric name is in ``metrics``, in that order, k rising."""
    if not rows:
        return []
    common = set(rows[0]).intersection(*rows[1:])
    chosen = [k for k in common if k.partition("@")[0] in metrics]
    return sorted(chosen, key=lambda k: _key_order(k, metrics))


def _regressions(
    ids: Sequence[str], before: PerQuery, after: PerQuery, keys: Sequence[str]
) -> tuple[RegressedQuery, ...]:
    found: list[tuple[float, RegressedQuery]] = []
    for qid in ids:
        worst: tuple[float, str] | None = None
        for key in keys:
            drop = before[qid][key] - after[qid][key]
            if drop > _TOLERANCE and (worst is None or drop > worst[0]):
                worst = (drop, key)
        if worst is not None:
            key = worst[1]
            found.append((worst[0], RegressedQuery(qid, key, before[qid][key], after[qid][key])))
    found.sort(key=lambda item: (-item[0], item[1].id))
    return tuple(r for _, r in found)


def _stale_report(
    before: PerQuery, after: PerQuery, before_hash: str | None, after_hash: str | None
) -> DriftReport | None:
    if before_hash is not None and after_hash is not None and before_hash != after_hash:
        reason = (
            f"fixture content hash {after_hash[:12] or '(none)'} differs from the baseline's "
            f"{before_hash[:12] or '(none)'}; re-pin it with `benchd baseline save`"
        )
        return DriftReport(stale=True, stale_reason=reason)
    if not set(before) & set(after):
        reason = "no query id in common with the baseline; re-pin it with `benchd baseline save`"
        return DriftReport(stale=True, stale_reason=reason)
    return None


def compare_runs(
    before: PerQuery,
    after: PerQuery,
    settings: DriftSettings | None = None,
    *,
    before_hash: str | None = None,
    after_hash: str | None = None,
) -> DriftReport:
    """Compare per-query metrics (query id -> {"recall@10": ...}) paired on common ids.

    With both fixture hashes given and different, or no query id in common,
    the report is stale and holds no metrics.
    """
    settings = settings or DriftSettings()
    stale = _stale_report(before, after, before_hash, after_hash)
    if stale is not None:
        return stale
    ids = sorted(set(before) & set(after))
    keys = metric_keys([before[q] for q in ids] + [after[q] for q in ids], settings.metrics)
    cols_b = {k: [before[q][k] for q in ids] for k in keys}
    cols_a = {k: [after[q][k] for q in ids] for k in keys}
    p_values = paired_tests(cols_b, cols_a, n_resamples=settings.n_permutations, seed=settings.seed)
    diffs = {k: [a - b for a, b in zip(cols_a[k], cols_b[k], strict=True)] for k in keys}
    cis = bootstrap_cis(
        diffs, level=settings.level, n_resamples=settings.n_bootstrap, seed=settings.seed
    )
    metrics: dict[str, MetricDrift] = {}
    for key in keys:
        delta = math.fsum(diffs[key]) / len(ids)
        p = p_values[key]
        detected = delta <= -settings.min_delta + _TOLERANCE and p < settings.alpha
        metrics[key] = MetricDrift(delta, p, detected, cis[key][0], cis[key][1], len(ids))
    return DriftReport(
        metrics=metrics, regressed=_regressions(ids, before, after, keys), n=len(ids)
    )


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What the rolling baseline keeps of one successful cycle."""

    fixture_hash: str
    metrics: Mapping[str, Mapping[str, float]]
    ranks: Mapping[str, Ranks]


def _snapshot(result: CycleResult) -> _Snapshot:
    answered = [q for q in result.queries if q.error is None]
    return _Snapshot(
        fixture_hash=result.fixture_hash,
        metrics={q.id: q.metrics for q in answered},
        ranks={q.id: expected_ranks(q.expected_ids, q.ranked_ids) for q in answered},
    )


def _rolling_mean(window: Sequence[_Snapshot]) -> dict[str, dict[str, float]]:
    """Per query and key, the mean over the cycles of the window that have it."""
    sums: dict[str, dict[str, list[float]]] = {}
    for snap in window:
        for qid, values in snap.metrics.items():
            per_key = sums.setdefault(qid, {})
            for key, value in values.items():
                per_key.setdefault(key, []).append(value)
    return {qid: {k: math.fsum(v) / len(v) for k, v in d.items()} for qid, d in sums.items()}


class DriftTracker:
    """One probe's drift state: pinned baseline, rolling window, onset/recovery logging."""

    def __init__(
        self,
        probe: str,
        settings: DriftSettings | None = None,
        baseline: Baseline | None = None,
    ) -> None:
        self.probe = probe
        self.settings = settings or DriftSettings()
        self.baseline = baseline
        self._window: deque[_Snapshot] = deque(maxlen=max(self.settings.rolling_window, 1))
        self._drifting = False
        self._log = structlog.get_logger("benchd.drift").bind(probe=probe)

    @property
    def drifting(self) -> bool:
        """Whether the last compared cycle was flagged as drift."""
        return self._drifting

    def set_baseline(self, baseline: Baseline | None) -> None:
        """Pin another baseline (or none), e.g. after a config reload."""
        self.baseline = baseline

    def observe(self, result: CycleResult) -> DriftOutcome:
        """Compare ``result`` with the baseline, update the window, log onset/recovery."""
        if not result.ok:
            return _outcome("none", DriftReport(), {}, {})
        snap = _snapshot(result)
        kind, report, ranks_before = self._compare(result, snap)
        if self.settings.rolling_window > 0:
            if self._window and self._window[-1].fixture_hash != snap.fixture_hash:
                self._window.clear()  # a new corpus: older cycles measured something else
            self._window.append(snap)
        if kind != "none":
            self._transition(report, kind, result)
        return _outcome(kind, report, ranks_before, snap.ranks)

    async def aobserve(self, result: CycleResult) -> DriftOutcome:
        """:meth:`observe` in a worker thread, so the event loop keeps timing other probes.

        Resampling 21 metric keys over 1,000 queries takes ~0.1 s of CPU; on the
        loop it would stall (and inflate the latency measured by) concurrent cycles.
        """
        return await anyio.to_thread.run_sync(self.observe, result)

    def _compare(
        self, result: CycleResult, snap: _Snapshot
    ) -> tuple[Literal["pinned", "rolling", "none"], DriftReport, Mapping[str, Ranks]]:
        stale_reason: str | None = None
        if self.baseline is not None:
            pinned = self.baseline
            report = compare_runs(
                pinned.per_query_metrics(),
                snap.metrics,
                self.settings,
                before_hash=pinned.fixture_hash,
                after_hash=result.fixture_hash,
            )
            if not report.stale:
                return "pinned", report, {q: b.ranks for q, b in pinned.queries.items()}
            stale_reason = report.stale_reason
        window = [s for s in self._window if s.fixture_hash == snap.fixture_hash]
        if self.settings.rolling_window == 0 or not window:
            return (
                "none",
                DriftReport(stale=stale_reason is not None, stale_reason=stale_reason),
                {},
            )
        report = compare_runs(_rolling_mean(window), snap.metrics, self.settings)
        if stale_reason is not None:
            report = DriftReport(report.metrics, report.regressed, True, stale_reason, report.n)
        return "rolling", report, window[-1].ranks

    def _transition(self, report: DriftReport, kind: str, result: CycleResult) -> None:
        detected = report.detected
        if detected and not self._drifting:
            hits = {k: m for k, m in report.metrics.items() if m.detected}
            worst = min(hits, key=lambda k: hits[k].delta)
            self._log.warning(
                "drift_onset",
                baseline=kind,
                cycle=result.cycle,
                metrics=sorted(hits, key=lambda k: _key_order(k, self.settings.metrics)),
                worst_metric=worst,
                delta=round(hits[worst].delta, 6),
                p_value=hits[worst].p_value,
                regressed_queries=len(report.regressed),
                model=result.info.model if result.info else "",
                baseline_model=self.baseline.model if kind == "pinned" and self.baseline else None,
            )
        elif not detected and self._drifting:
            self._log.info("drift_recovered", baseline=kind, cycle=result.cycle)
        self._drifting = detected


def _outcome(
    kind: Literal["pinned", "rolling", "none"],
    report: DriftReport,
    ranks_before: Mapping[str, Ranks],
    ranks_after: Mapping[str, Ranks],
) -> DriftOutcome:
    regressed = [
        RegressedQueryDict(
            id=r.id,
            metric=r.metric,
            before=r.before,
            after=r.after,
            ranks_before=dict(ranks_before.get(r.id, {})),
            ranks_after=dict(ranks_after.get(r.id, {})),
        )
        for r in report.regressed
    ]
    return DriftOutcome(
        baseline=kind,
        stale=report.stale,
        stale_reason=report.stale_reason,
        metrics={k: m.as_dict() for k, m in report.metrics.items()},
        regressed_queries=regressed,
        detected=report.detected,
    )
