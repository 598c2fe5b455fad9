"""Drift: did this system's quality on our labeled set drop beyond its own noise?

For each metric@k, the per-query values of the current cycle are paired with
a reference on the query ids both have. The reference is a pinned
:class:`~benchd.drift.baseline.Baseline` when a probe has one (its repeats
carry its noise; a one-cycle baseline borrows the noise of the recent
unflagged cycles), else the last ``rolling_window`` successful cycles.
Per key:

- ``delta`` = mean(current) − mean(reference);
- ``p_value``: how often the reference's own cycle-to-cycle noise gives a
  drop this large (:func:`benchd.drift.stats.noise_tests`, adjusted over
  every key so one cycle pages falsely at most ``alpha`` of the time);
- ``p_value_queries``: today's sign-flip test over queries — would the drop
  generalize to other queries? Reported, not the gate;
- ``ci_low``/``ci_high``: a seeded bootstrap CI of the delta over queries.

Drift is ``delta <= -min_delta`` and either a reference whose per-query
values and rankings never moved (``noise = "stable"``: every lost id is
real) or ``p_value < alpha``. The label-free signal is the mean rank-biased
overlap of each query's top k with the reference's ranking; ``model_changed``
when it falls by ``min_overlap_drop`` beyond noise, whatever the labels say,
or when the embedding canary (``TargetInfo.canary``, read in the info phase
before any query) fell below the threshold pinned with the baseline.

A pinned baseline whose fixture hash differs from the cycle's is *stale*:
it is not compared (the rolling baseline is used instead). Only ``success``
cycles are compared or remembered; queries that errored are left out.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from benchd.config.drift import DEFAULT_METRICS, KNOWN_METRICS, DriftSettings
from benchd.drift.baseline import KEY_SCHEME, Baseline, expected_ranks
from benchd.drift.stats import Pool, noise_tests, rbo
from benchd.drift_outcome import (
    BaselineKind,
    ChangeSignals,
    DriftOutcome,
    MetricDrift,
    NoiseKind,
    RegressedQuery,
    Transition,
)
from benchd.result import CycleResult, scores_of
from benchd.scoring.stats import bootstrap_cis, paired_tests

__all__ = [
    "DEFAULT_METRICS",
    "KNOWN_METRICS",
    "DriftSettings",
    "DriftTracker",
    "Reference",
    "Snapshot",
    "compare",
    "compare_runs",
    "metric_keys",
    "pinned_reference",
    "rolling_reference",
    "snapshot",
]

_TOLERANCE = 1e-9  # a delta of exactly -min_delta counts, despite float rounding

PerQuery = Mapping[str, Mapping[str, float]]
_Columns = dict[str, list[float]]  # key -> a value per query
Ranks = Mapping[str, int | None]


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


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the drift stage keeps of one successful cycle."""

    fixture_hash: str
    metrics: Mapping[str, Mapping[str, float]]
    ranks: Mapping[str, Ranks]
    rankings: Mapping[str, tuple[str, ...]]  # top ``depth`` ids per query
    model: str = ""
    top_scores: Mapping[str, float] = field(default_factory=dict)  # the store's, where given


def top_score(ranked: Sequence[str]) -> float | None:
    """The store's own score of the first result, when the adapter captured it."""
    scores = scores_of(ranked)
    return scores[0] if scores and scores[0] is not None else None


def snapshot(result: CycleResult, depth: int) -> Snapshot:
    """The answered queries of ``result``: metrics, expected ranks, top ``depth`` ids, scores."""
    answered = [q for q in result.queries if q.error is None]
    scores = {q.id: top_score(q.ranked_ids) for q in answered}
    return Snapshot(
        fixture_hash=result.fixture_hash,
        metrics={q.id: q.metrics for q in answered},
        ranks={q.id: expected_ranks(q.expected_ids, q.ranked_ids) for q in answered},
        rankings={q.id: tuple(q.ranked_ids[:depth]) for q in answered},
        model=result.info.model if result.info else "",
        top_scores={q: s for q, s in scores.items() if s is not None},
    )


@dataclass(frozen=True, slots=True)
class Reference:
    """What a cycle is compared with, per query.

    ``samples[q][key]`` are the reference values (with ``pinned_first`` the
    first is the reference and the rest only measure noise); ``overlap[q]``
    are the overlaps of unchanged cycles' rankings with ``rankings[q]``;
    ``moved`` says whether rankings differed among the reference samples.
    """

    samples: Mapping[str, Mapping[str, Sequence[float]]]
    ranks: Mapping[str, Ranks]
    rankings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    overlap: Mapping[str, Sequence[float]] = field(default_factory=dict)
    pinned_first: bool = False
    moved: bool = False
    count: int = 1  # samples per query, for the outcome
    scores: Mapping[str, Sequence[float]] = field(default_factory=dict)  # top-score samples


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _regressions(
    ids: Sequence[str],
    ref: Reference,
    after: Snapshot,
    columns: tuple[Mapping[str, Sequence[float]], Mapping[str, Sequence[float]]],
) -> tuple[RegressedQuery, ...]:
    """Queries whose score dropped in some key, worst drop first; ``columns`` holds each
    key's reference and current values, in the order of ``ids``."""
    before_cols, after_cols = columns
    found: list[tuple[float, RegressedQuery]] = []
    for i, qid in enumerate(ids):
        worst: tuple[float, str, float, float] | None = None
        for key, befores in before_cols.items():
            before, now = befores[i], after_cols[key][i]
            drop = before - now
            if drop > _TOLERANCE and (worst is None or drop > worst[0]):
                worst = (drop, key, before, now)
        if worst is not None:
            drop, key, before, now = worst
            query = RegressedQuery(
                qid,
                key,
                before,
                now,
                dict(ref.ranks.get(qid, {})),
                dict(after.ranks.get(qid, {})),
            )
            found.append((drop, query))
    found.sort(key=lambda item: (-item[0], item[1].id))
    return tuple(r for _, r in found)


def _noise_kind(pools: Mapping[str, Pool], ref: Reference) -> NoiseKind:
    if ref.moved or any(p.moved() for p in pools.values()):
        return "measured"
    return "stable" if ref.count > 1 else "none"


def _gate(pools: Mapping[str, Pool], noise: NoiseKind, settings: DriftSettings) -> dict[str, float]:
    """The gating p-value of each key: 0/1 on a reference that never moved, else tested."""
    if noise != "measured":
        return {k: 0.0 if p.delta() < -_TOLERANCE else 1.0 for k, p in pools.items()}
    tests = noise_tests(
        pools, n_resamples=settings.n_permutations, seed=settings.seed, alpha=settings.alpha
    )
    return {k: t.p_value for k, t in tests.items()}


def _metrics(
    ids: Sequence[str],
    ref: Reference,
    after: Snapshot,
    keys: Sequence[str],
    settings: DriftSettings,
) -> tuple[dict[str, MetricDrift], NoiseKind, tuple[_Columns, _Columns]]:
    """Each key's drift, the noise it was judged against, and each key's reference and
    current values (in the order of ``ids``)."""
    samples = [ref.samples[q] for q in ids]
    now = [after.metrics[q] for q in ids]
    pools: dict[str, Pool] = {}
    for k in keys:  # each query's reference computed once, not per use
        pool = Pool([s[k] for s in samples], [m[k] for m in now], ref.pinned_first)
        pools[k] = dataclasses.replace(pool, known=pool.references())
    noise = _noise_kind(pools, ref)
    gate = _gate(pools, noise, settings)
    cols_b = {k: pool.references() for k, pool in pools.items()}
    cols_a = {k: list(pool.current) for k, pool in pools.items()}
    p_queries = paired_tests(
        cols_b, cols_a, n_resamples=settings.n_permutations, seed=settings.seed,
        alpha=settings.alpha,
    )  # fmt: skip
    diffs = {k: [a - b for a, b in zip(cols_a[k], cols_b[k], strict=True)] for k in keys}
    cis = bootstrap_cis(
        diffs, level=settings.level, n_resamples=settings.n_bootstrap, seed=settings.seed
    )
    out: dict[str, MetricDrift] = {}
    for key in keys:
        delta = math.fsum(diffs[key]) / len(ids)
        detected = delta <= -settings.min_delta + _TOLERANCE and gate[key] < settings.alpha
        out[key] = MetricDrift(
            delta, gate[key], p_queries[key], detected, cis[key][0], cis[key][1], len(ids),
            before=_mean(cols_b[key]), after=_mean(cols_a[key]),
        )  # fmt: skip
    return out, noise, (cols_b, cols_a)


def _change(
    ids: Sequence[str],
    ref: Reference,
    after: Snapshot,
    noise: NoiseKind,
    depth: int,
    settings: DriftSettings,
) -> ChangeSignals | None:
    """Ranking overlap with the reference's rankings, tested against unchanged cycles'."""
    ranked = [q for q in ids if ref.rankings.get(q)]
    if not ranked:
        return None
    now = [rbo(after.rankings.get(q, ()), ref.rankings[q], depth) for q in ranked]
    samples = [list(ref.overlap.get(q, ())) or [1.0] for q in ranked]
    pool = Pool(samples, now)
    if noise == "measured" and any(len(s) > 1 or s[0] < 1.0 for s in samples):
        test = noise_tests(
            {"overlap": pool}, n_resamples=settings.n_permutations, seed=settings.seed,
            alpha=settings.alpha,
        )  # fmt: skip
        p = test["overlap"].p_value
    else:
        p = 0.0 if pool.delta() < -_TOLERANCE else 1.0
    delta = pool.delta()
    changed = delta <= -settings.min_overlap_drop + _TOLERANCE and p < settings.alpha
    shift, score_p = _score_shift(ids, ref, after, noise, settings)
    shifted = (
        shift is not None
        and score_p is not None
        and abs(shift) >= settings.min_score_shift
        and score_p < settings.alpha
    )
    return ChangeSignals(
        depth, _mean(now), delta, p, changed or shifted, score_shift=shift, score_p_value=score_p
    )


def _score_shift(
    ids: Sequence[str], ref: Reference, after: Snapshot, noise: NoiseKind,
    settings: DriftSettings,
) -> tuple[float | None, float | None]:
    """Relative change of the store's top scores, and its two-sided p-value against noise.

    A shift smaller than ``min_score_shift`` cannot count whatever its
    p-value, so it is not tested (p-value None): a store's top scores jitter
    every cycle, and testing that jitter resampled every query every cycle.
    """
    scored = [q for q in ids if ref.scores.get(q) and q in after.top_scores]
    if not scored:
        return None, None
    pool = Pool([list(ref.scores[q]) for q in scored], [after.top_scores[q] for q in scored],
                ref.pinned_first)  # fmt: skip
    scale = _mean([abs(v[0] if ref.pinned_first else _mean(v)) for v in pool.values])
    if scale <= _TOLERANCE:
        return None, None
    shift = pool.delta() / scale
    if abs(shift) < settings.min_score_shift:
        return shift, None
    if noise == "measured" or pool.moved():
        tests = noise_tests(
            {"score": pool}, n_resamples=settings.n_permutations, seed=settings.seed,
            two_sided=True, alpha=settings.alpha,
        )  # fmt: skip
        p = tests["score"].p_value
    else:
        p = 0.0 if abs(pool.delta()) > _TOLERANCE else 1.0
    return shift, p


def _predates_keys(baseline: Baseline | None) -> str | None:
    """Why a pinned baseline from before namespaced keys is not compared; None if it is not."""
    if baseline is None or baseline.key_scheme == KEY_SCHEME:
        return None
    where = f" {baseline.source}" if baseline.source else ""
    return (
        f"the baseline{where} was pinned before benchd namespaced facts' key and statuses' "
        "subject (a store that ranks on them ranks the corpus differently now); re-pin it "
        "with `benchd baseline save`"
    )


def _stale_reason(ref_ids: Sequence[str], after: Snapshot, ref_hash: str | None) -> str | None:
    if ref_hash is not None and ref_hash != after.fixture_hash:
        return (
            f"fixture content hash {after.fixture_hash[:12] or '(none)'} differs from the "
            f"baseline's {ref_hash[:12] or '(none)'}; re-pin it with `benchd baseline save`"
        )
    if not set(ref_ids) & set(after.metrics):
        return "no query id in common with the baseline; re-pin it with `benchd baseline save`"
    return None


def compare(
    ref: Reference,
    after: Snapshot,
    settings: DriftSettings,
    *,
    kind: BaselineKind,
    ref_hash: str | None = None,
    depth: int = 10,
) -> DriftOutcome:
    """Compare ``after`` with ``ref`` on their common query ids (a stale reference: no metrics)."""
    reason = _stale_reason(list(ref.samples), after, ref_hash)
    if reason is not None:
        return DriftOutcome(stale=True, stale_reason=reason, model=after.model)
    ids = sorted(set(ref.samples) & set(after.metrics))
    rows = [after.metrics[q] for q in ids]
    samples = [ref.samples[q] for q in ids]
    shared = set(samples[0]).intersection(*samples[1:]) if samples else set()
    keys = [k for k in metric_keys(rows, settings.metrics) if k in shared]
    metrics, noise, columns = _metrics(ids, ref, after, keys, settings)
    return DriftOutcome(
        baseline=kind,
        noise=noise,
        samples=ref.count,
        metrics=metrics,
        regressed=_regressions(ids, ref, after, columns),
        change=_change(ids, ref, after, noise, depth, settings),
        model=after.model,
    )


def compare_runs(
    before: PerQuery,
    after: PerQuery,
    settings: DriftSettings | None = None,
    *,
    before_hash: str | None = None,
    after_hash: str | None = None,
) -> DriftOutcome:
    """Compare two single runs (query id -> {"recall@10": ...}) paired on common ids.

    One sample per side: no noise can be measured, so the verdict is
    ``delta <= -min_delta``; ``p_value_queries`` says whether it generalizes.
    """
    ref = Reference(
        samples={q: {k: [v] for k, v in m.items()} for q, m in before.items()}, ranks={}
    )
    snap = Snapshot(fixture_hash=after_hash or "", metrics=after, ranks={}, rankings={})
    ref_hash = before_hash if before_hash is not None and after_hash is not None else None
    return compare(ref, snap, settings or DriftSettings(), kind="pinned", ref_hash=ref_hash)


def pinned_reference(baseline: Baseline, quiet: Sequence[Snapshot], depth: int) -> Reference:
    """A pinned baseline; one with a single repeat borrows the noise of unflagged cycles."""
    queries = baseline.queries
    rankings = {q: b.ranked_ids for q, b in queries.items()}
    if baseline.repeats > 1:
        return Reference(
            samples={
                q: b.samples or {k: [v] for k, v in b.metrics.items()} for q, b in queries.items()
            },
            ranks={q: b.ranks for q, b in queries.items()},
            rankings=rankings,
            overlap={q: b.overlap for q, b in queries.items()},
            moved=any(o < 1.0 - _TOLERANCE for b in queries.values() for o in b.overlap),
            count=baseline.repeats,
            scores={q: b.top_scores for q, b in queries.items() if b.top_scores},
        )
    samples: dict[str, dict[str, list[float]]] = {}
    overlap: dict[str, list[float]] = {}
    scores: dict[str, list[float]] = {}
    for qid, b in queries.items():
        later = [s for s in quiet if qid in s.metrics]
        samples[qid] = {
            k: [v, *(s.metrics[qid][k] for s in later if k in s.metrics[qid])]
            for k, v in b.metrics.items()
        }
        if b.ranked_ids:
            overlap[qid] = [rbo(s.rankings.get(qid, ()), b.ranked_ids, depth) for s in later]
        if b.top_scores:
            since = [s.top_scores[qid] for s in later if qid in s.top_scores]
            scores[qid] = [b.top_scores[0], *since]
    moved = any(o < 1.0 - _TOLERANCE for values in overlap.values() for o in values)
    return Reference(
        samples=samples,
        ranks={q: b.ranks for q, b in queries.items()},
        rankings=rankings,
        overlap=overlap,
        pinned_first=True,
        moved=moved,
        count=1 + len(quiet),
        scores=scores,
    )


def rolling_reference(window: Sequence[Snapshot], depth: int) -> Reference:
    """The window's cycles; rankings are compared with its oldest cycle's."""
    samples = _window_samples(window)
    first = window[0]
    overlap = {
        q: [rbo(s.rankings.get(q, ()), ranked, depth) for s in window[1:] if q in s.rankings]
        for q, ranked in first.rankings.items()
    }
    moved = any(
        len({s.rankings.get(q) for s in window if q in s.rankings}) > 1 for q in first.rankings
    )
    scores: dict[str, list[float]] = {}
    for snap in window:
        for qid, value in snap.top_scores.items():
            scores.setdefault(qid, []).append(value)
    return Reference(
        samples=samples,
        ranks=window[-1].ranks,
        rankings=dict(first.rankings),
        overlap=overlap,
        moved=moved,
        count=len(window),
        scores=scores,
    )


def _window_samples(window: Sequence[Snapshot]) -> dict[str, dict[str, Sequence[float]]]:
    """Query id -> key -> its values over the window's cycles (those that answered it).

    The values are tuples where every cycle has the same keys: no list per query and
    key for the garbage collector to walk while the window is held.
    """
    samples: dict[str, dict[str, Sequence[float]]] = {}
    for qid in dict.fromkeys(q for snap in window for q in snap.metrics):
        rows = [snap.metrics[qid] for snap in window if qid in snap.metrics]
        keys = rows[0].keys()
        if len(keys) > 1 and all(len(row) == len(keys) for row in rows):
            try:  # the usual case: the same keys each cycle (as many, none missing)
                columns = zip(*map(operator.itemgetter(*keys), rows), strict=True)
            except KeyError:
                pass
            else:
                samples[qid] = dict(zip(keys, columns, strict=True))
                continue
        per_key: dict[str, list[float]] = {}
        for row in rows:
            for key, value in row.items():
                per_key.setdefault(key, []).append(value)
        samples[qid] = dict(per_key)
    return samples


def _transition(was: bool, now: bool) -> Transition | None:
    if now and not was:
        return "onset"
    if was and not now:
        return "recovered"
    return None


@dataclass(slots=True)
class _Entry:
    snap: Snapshot
    flagged: bool  # drift or model change: not "unchanged", so not noise for a pinned baseline


class DriftTracker:
    """One probe's drift state: pinned baseline, rolling window, episode transitions."""

    def __init__(
        self,
        probe: str,
        settings: DriftSettings | None = None,
        baseline: Baseline | None = None,
        *,
        owned_keys: bool = False,
    ) -> None:
        self.probe = probe
        self.settings = settings or DriftSettings()
        self.baseline = baseline
        # The probe's store ranks on fields benchd namespaces (facts' key, statuses'
        # subject): a pinned baseline from before that is stale, never a page.
        self._key_stale = _predates_keys(baseline) if owned_keys else None
        self._window: deque[_Entry] = deque(maxlen=max(self.settings.rolling_window, 1))
        # The last unflagged cycles: a one-cycle pinned baseline's noise. Kept apart from
        # the window so that a drift lasting a window's length does not evict them (the
        # noise the onset was judged against stays the noise of every later cycle).
        self._quiet: deque[Snapshot] = deque(maxlen=max(self.settings.rolling_window, 1))
        self._drifting = False
        self._model_changed = False

    def observe(self, result: CycleResult) -> DriftOutcome:
        """Compare ``result`` with the baseline, then remember it (successful cycles only)."""
        model = result.info.model if result.info else ""
        canary = result.info.canary if result.info else None
        changed = canary is not None and canary.changed
        if result.outcome != "success":
            return DriftOutcome(model=model, canary_changed=changed)
        depth = max(result.ks, default=10)
        snap = snapshot(result, depth)
        outcome = dataclasses.replace(self._compare(snap, depth), canary_changed=changed)
        if self._window and self._window[-1].snap.fixture_hash != snap.fixture_hash:
            self._window.clear()  # a new corpus: older cycles measured something else
            self._quiet.clear()
        flagged = outcome.detected or outcome.model_changed
        self._window.append(_Entry(snap, flagged))
        if not flagged:
            self._quiet.append(snap)
        if not outcome.compared and (canary is None or canary.similarity is None):
            return outcome
        drift = _transition(self._drifting, outcome.detected) if outcome.compared else None
        model_episode = _transition(self._model_changed, outcome.model_changed)
        if outcome.compared:
            self._drifting = outcome.detected
        self._model_changed = outcome.model_changed
        return dataclasses.replace(outcome, transition=drift, model_transition=model_episode)

    async def aobserve(self, result: CycleResult) -> DriftOutcome:
        """:meth:`observe` in a worker thread, so the event loop keeps timing other probes.

        Resampling every metric key over the queries is real CPU work; on the
        loop it would stall (and inflate the latency measured by) other cycles.
        """
        return await anyio.to_thread.run_sync(self.observe, result)

    def _compare(self, snap: Snapshot, depth: int) -> DriftOutcome:
        same = [e for e in self._window if e.snap.fixture_hash == snap.fixture_hash]
        stale_reason: str | None = None
        if self.baseline is not None and self._key_stale is not None:
            stale_reason = self._key_stale  # the rolling baseline still watches for drift
        elif self.baseline is not None:
            pinned = self.baseline
            quiet = [s for s in self._quiet if s.fixture_hash == snap.fixture_hash]
            outcome = compare(
                pinned_reference(pinned, quiet, depth),
                snap,
                self.settings,
                kind="pinned",
                ref_hash=pinned.fixture_hash,
                depth=depth,
            )
            if not outcome.stale:
                return self._labelled(outcome, pinned.model)
            stale_reason = outcome.stale_reason
        if self.settings.rolling_window == 0 or not same:
            return DriftOutcome(
                stale=stale_reason is not None, stale_reason=stale_reason, model=snap.model
            )
        outcome = compare(
            rolling_reference([e.snap for e in same], depth),
            snap,
            self.settings,
            kind="rolling",
            depth=depth,
        )
        if stale_reason is not None:
            outcome = dataclasses.replace(outcome, stale=True, stale_reason=stale_reason)
        return self._labelled(outcome, same[0].snap.model)

    def _labelled(self, outcome: DriftOutcome, before: str) -> DriftOutcome:
        """Note whether the store's own model label changed (informative, never the verdict)."""
        change = outcome.change
        label_changed = bool(before and outcome.model and before != outcome.model)
        if change is not None:
            change = dataclasses.replace(change, label_changed=label_changed)
        pinned_model = before if outcome.baseline == "pinned" else None
        return dataclasses.replace(outcome, change=change, baseline_model=pinned_model)
