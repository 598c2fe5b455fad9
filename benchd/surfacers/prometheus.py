"""The Prometheus surfacer: a custom collector over the result book.

The collector builds the metric families afresh from one :class:`BookSnapshot`
(client_python "custom collectors"), so a probe removed by a reload vanishes
from ``/metrics`` instead of going stale, and nothing here ever computes a
metric: it only renames what the cycle result and the book already hold.
``/metrics`` renders them through :mod:`benchd.surfacers.rendered`, which
renders a probe's families again only when its state changed.
The names, labels and meanings are catalogued in ``docs/metrics.md``.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from benchd import __version__, redact
from benchd.result import CYCLE_OUTCOMES, DEGRADED_REASONS, CycleResult, LatencySummary
from benchd.surfacers.result_book import BookSnapshot, ProbeState, ResultBook

__all__ = [
    "UNCUT_K",
    "BookCollector",
    "book_families",
    "build_registry",
    "completed",
    "probe_families",
    "process_registry",
    "split_metric_key",
]

_PERCENTILES = (("50", "p50"), ("90", "p90"), ("95", "p95"), ("99", "p99"), ("100", "max"))
_QUALITY = ["probe", "target", "corpus"]
_DRIFT_FIELDS = (
    ("delta", "benchd_drift_delta", "Current mean minus baseline mean of the measure."),
    ("ci_low", "benchd_drift_delta_ci_lower", "Lower confidence bound of the drift delta."),
    ("ci_high", "benchd_drift_delta_ci_upper", "Upper confidence bound of the drift delta."),
    (
        "p_value",
        "benchd_drift_p_value",
        "Chance that the reference's own noise gives a drop this large (the gate).",
    ),
    (
        "p_value_queries",
        "benchd_drift_p_value_queries",
        "Sign-flip p-value over queries: would the change generalize to other queries.",
    ),
    ("detected", "benchd_drift_detected", "1 if the drop is >= min_delta and beyond noise."),
    (
        "before",
        "benchd_drift_baseline_value",
        "The measure at the baseline, over the queries compared (delta = current - baseline).",
    ),
    (
        "after",
        "benchd_drift_current_value",
        "The measure this cycle, over the same queries as its baseline value.",
    ),
)
_CHANGE_FIELDS = (
    ("overlap", "benchd_drift_ranking_overlap", "Mean rank-biased overlap with the reference."),
    (
        "overlap_delta",
        "benchd_drift_ranking_overlap_delta",
        "Ranking overlap minus what unchanged cycles gave.",
    ),
    (
        "overlap_p_value",
        "benchd_drift_ranking_overlap_p_value",
        "Chance that noise lowers the ranking overlap this much.",
    ),
    (
        "model_changed",
        "benchd_drift_model_changed",
        "1 if the rankings changed beyond noise: the store's model or index changed.",
    ),
)


UNCUT_K = "all"  # the k label of measures with no cut-off (rr, ap, r_precision)


def split_metric_key(key: str) -> tuple[str, str]:
    """``"recall@10"`` -> ``("recall", "10")``; an uncut ``"rr"`` -> ``("rr", "all")``.

    An uncut measure covers the whole ranked list the store returned, so its
    ``k`` label is ``all`` rather than an empty value (docs/metrics.md).
    """
    name, _, k = key.partition("@")
    return name, k or UNCUT_K


class BookCollector(Collector):
    """Yields benchd's metric families from the latest state of a :class:`ResultBook`."""

    def __init__(self, book: ResultBook) -> None:
        self._book = book

    def describe(self) -> Iterable[Metric]:
        # Families depend on the probes; nothing to declare up front.
        return ()

    def collect(self) -> Iterator[Metric]:
        snap = self._book.snapshot()
        yield from book_families(snap)
        yield from probe_families(completed(snap))


def completed(snap: BookSnapshot) -> list[ProbeState]:
    """The configured probes that have completed a cycle, in config order."""
    return [snap.states[p] for p in snap.probes if p in snap.states]


def book_families(snap: BookSnapshot) -> Iterator[Metric]:
    """The families read from the book as a whole (build, config, cycles, intervals), masked."""
    for family in _book_families(snap):
        yield _masked(family)


def probe_families(states: list[ProbeState]) -> Iterator[Metric]:
    """The families read from the probes' states, masked: always the same families in the
    same order, and each family's samples probe by probe in the order of ``states``."""
    for family in _probe_families(states):
        yield _masked(family)


def _book_families(snap: BookSnapshot) -> Iterator[Metric]:
    build = InfoMetricFamily("benchd_build", "benchd build information.", labels=[])
    build.add_metric([], {"version": __version__, "python": platform.python_version()})
    yield build
    yield from _config(snap)
    yield _cycles_total(snap)
    yield _intervals(snap)


def _probe_families(states: list[ProbeState]) -> Iterator[Metric]:
    yield from _self_health(states)
    yield from _seeding(states)
    yield from _quality(states)
    yield from _latency(states)
    yield from _requests(states)
    yield from _short_answers(states)
    yield from _drift(states)
    yield from _embed_canary(states)
    yield _thresholds(states)


def _short_answers(states: list[ProbeState]) -> Iterator[Metric]:
    """Searches answering fewer than min(k, records seeded): only kinds promising full answers."""
    total = _counter(
        "benchd_short_answers_total",
        "Searches that answered fewer than min(k, records seeded in the namespace) results, "
        "on a kind that declares full answers (serial and load passes).",
        ["probe"],
    )
    last = _gauge(
        "benchd_short_answers_last_cycle",
        "Last cycle: searches that answered fewer than min(k, records seeded), by pass.",
        ["probe", "pass"],
    )
    for s in states:
        if not s.latest.short_answers and not s.short_answers:
            continue  # a kind without the promise: nothing to count
        total.add_metric([s.name], s.short_answers)
        for pass_, count in sorted(s.latest.short_answers.items()):
            last.add_metric([s.name, pass_], count)
    yield total
    yield last


def _masked(family: Metric) -> Metric:
    """``family`` with every label value through :func:`benchd.redact.label` (bounded too)."""
    for i, sample in enumerate(family.samples):
        labels = {k: redact.label(v) for k, v in sample.labels.items()}
        if labels != sample.labels:
            family.samples[i] = sample._replace(labels=labels)
    return family


def build_registry(book: ResultBook, *, extra: Iterable[Collector] = ()) -> CollectorRegistry:
    """benchd's own registry: the book collector, then process/platform/GC and ``extra`` ones
    (the order ``/metrics`` serves them in: :func:`process_registry` is the part after the book)."""
    registry = CollectorRegistry()
    for collector in (BookCollector(book), *_standard(), *extra):
        registry.register(collector)
    return registry


def process_registry(extra: Iterable[Collector] = ()) -> CollectorRegistry:
    """The collectors read afresh at every scrape: process/platform/GC, then ``extra`` ones."""
    registry = CollectorRegistry()
    for collector in (*_standard(), *extra):
        registry.register(collector)
    return registry


def _standard() -> tuple[Collector, ...]:
    return (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


def _self_health(states: list[ProbeState]) -> Iterator[Metric]:
    up = _gauge(
        "benchd_up",
        "1 if the probe's last cycle was a success (not degraded, failed or timed out), else 0.",
        ["probe"],
    )
    info = InfoMetricFamily(
        "benchd_probe", "The probe's store kind, corpus and model label.", labels=["probe"]
    )
    errors = _counter(
        "benchd_cycle_errors_total",
        "Cycles that failed or timed out, by error kind.",
        ["probe", "kind"],
    )
    for s in states:
        up.add_metric([s.name], 1.0 if s.latest.ok else 0.0)
        info.add_metric(
            [s.name],
            {
                "target": s.latest.target,
                "corpus": s.latest.corpus,
                "model": redact.label(s.model),
            },
        )
        for kind, count in sorted(s.cycle_errors.items()):
            errors.add_metric([s.name, kind], count)
    yield from (up, info, errors)
    yield from _degraded(states)
    yield from _cycle_times(states)


def _degraded(states: list[ProbeState]) -> Iterator[Metric]:
    total = _counter(
        "benchd_cycle_degraded_total",
        "Degraded cycles by reason (a cycle may have several).",
        ["probe", "reason"],
    )
    last = _gauge(
        "benchd_last_cycle_degraded",
        "Last cycle: 1 for each reason it was degraded, else 0.",
        ["probe", "reason"],
    )
    for s in states:
        for reason in DEGRADED_REASONS:
            total.add_metric([s.name, reason], s.degraded.get(reason, 0))
            last.add_metric([s.name, reason], float(reason in s.latest.degraded_reasons))
    yield from (total, last)


def _intervals(snap: BookSnapshot) -> Metric:
    interval = _gauge(
        "benchd_probe_interval_seconds",
        "Configured interval between the probe's cycle starts.",
        ["probe"],
    )
    for probe in snap.probes:
        if probe in snap.intervals:
            interval.add_metric([probe], snap.intervals[probe])
    return interval


def _config(snap: BookSnapshot) -> Iterator[Metric]:
    ok = _gauge(
        "benchd_config_last_reload_successful",
        "1 if the last configuration (re)load succeeded, else 0.",
        [],
    )
    ok.add_metric([], 1.0 if snap.reload_successful else 0.0)
    at = _gauge(
        "benchd_config_last_reload_success_timestamp_seconds",
        "Unix time of the last successful configuration load.",
        [],
    )
    at.add_metric([], snap.reload_success_at)
    reloads = _counter(
        "benchd_config_reloads_total",
        "Configuration reloads (SIGHUP or POST /-/reload; not the start-up load) by outcome.",
        ["outcome"],
    )
    for outcome in ("success", "failure"):
        reloads.add_metric([outcome], snap.reloads.get(outcome, 0))
    yield from (ok, at, reloads)
    leftover = _gauge(
        "benchd_cleanup_leftover_records",
        "Records benchd wrote and its last shutdown cleanup could not delete (0: all deleted).",
        ["probe"],
    )
    for name in sorted(snap.cleanups):
        leftover.add_metric([name], snap.cleanups[name].leftover)
    yield leftover


def _cycles_total(snap: BookSnapshot) -> Metric:
    cycles = _counter("benchd_cycles_total", "Completed cycles by outcome.", ["probe", "outcome"])
    for probe in snap.probes:
        state = snap.states.get(probe)
        counts: Mapping[str, int] = state.cycles if state else {}
        for outcome in CYCLE_OUTCOMES:
            cycles.add_metric([probe, outcome], counts.get(outcome, 0))
    return cycles


def _cycle_times(states: list[ProbeState]) -> Iterator[Metric]:
    phases = _gauge(
        "benchd_cycle_duration_seconds", "Last cycle: seconds spent per phase.", ["probe", "phase"]
    )
    duration = _gauge(
        "benchd_last_cycle_duration_seconds", "Last cycle: wall time, start to finish.", ["probe"]
    )
    finished = _gauge(
        "benchd_last_cycle_timestamp_seconds", "Unix time the last cycle finished.", ["probe"]
    )
    waits = _gauge(
        "benchd_cycle_wait_seconds",
        "Last cycle: wall seconds per phase during which at least one request was waiting "
        "(retry backoff, 429 Retry-After, load pass paused).",
        ["probe", "phase"],
    )
    success = _gauge(
        "benchd_last_success_timestamp_seconds",
        "Unix time the last successful cycle finished.",
        ["probe"],
    )
    for s in states:
        for phase, seconds in s.latest.phases.items():
            phases.add_metric([s.name, phase], seconds)
        for phase, seconds in s.latest.phase_wait_s.items():
            waits.add_metric([s.name, phase], seconds)
        duration.add_metric([s.name], s.latest.duration_s)
        finished.add_metric([s.name], s.latest.finished_at)
        if s.last_success_at is not None:
            success.add_metric([s.name], s.last_success_at)
    yield from (phases, waits, duration, finished, success)


def _seeding(states: list[ProbeState]) -> Iterator[Metric]:
    total = _counter(
        "benchd_seed_records_total",
        "Seed records as the store reported them, by status.",
        ["probe", "status"],
    )
    retries = _counter("benchd_seed_retries_total", "Seed requests retried.", ["probe"])
    last = _gauge(
        "benchd_seed_last_records", "Last cycle: seed records by status.", ["probe", "status"]
    )
    searchable = _gauge(
        "benchd_time_to_searchable_seconds",
        "Last cycle: seconds from the end of the import until every record was findable.",
        ["probe"],
    )
    for s in states:
        for status, count in s.seed_records.items():
            total.add_metric([s.name, status], count)
        retries.add_metric([s.name], s.seed_retries)
        seed = s.latest.seed
        if seed is None:
            continue
        for status, value in (
            ("requested", seed.requested),
            ("imported", seed.imported),
            ("skipped", seed.skipped),
            ("unchanged", seed.unchanged),
            ("errors", seed.errors),
            ("verified", seed.verified),
            ("missing", len(seed.missing)),
        ):
            last.add_metric([s.name, status], value)
        if seed.searchable_after_s is not None:
            searchable.add_metric([s.name], seed.searchable_after_s)
    yield from (total, retries, last, searchable)


def _quality(states: list[ProbeState]) -> Iterator[Metric]:
    quality = _gauge(
        "benchd_quality",
        "Last cycle: mean of a ranking measure over the labeled queries (0-1).",
        [*_QUALITY, "pass", "metric", "k"],
    )
    category = _gauge(
        "benchd_category_quality",
        "Last cycle, serial pass: mean of a ranking measure over one query category (0-1).",
        [*_QUALITY, "category", "metric", "k"],
    )
    lower = _gauge(
        "benchd_quality_ci_lower",
        "Last cycle, serial pass: lower confidence bound of the mean.",
        [*_QUALITY, "metric", "k"],
    )
    upper = _gauge(
        "benchd_quality_ci_upper",
        "Last cycle, serial pass: upper confidence bound of the mean.",
        [*_QUALITY, "metric", "k"],
    )
    for s in states:
        r = s.latest
        head = [s.name, r.target, r.corpus]
        _add_means(quality, [*head, "serial"], r.aggregate)
        if r.load is not None:
            _add_means(quality, [*head, "load"], r.load.aggregate)
        for name, means in sorted(r.by_category.items()):
            _add_means(category, [*head, name], means)
        for key, (lo, hi) in r.ci.items():
            lower.add_metric([*head, *split_metric_key(key)], lo)
            upper.add_metric([*head, *split_metric_key(key)], hi)
    yield from (quality, category, lower, upper)
    yield from _relevant(states)


def _add_means(family: GaugeMetricFamily, head: list[str], means: Mapping[str, float]) -> None:
    for key, value in means.items():
        family.add_metric([*head, *split_metric_key(key)], value)


def _relevant(states: list[ProbeState]) -> Iterator[Metric]:
    found = _counter(
        "benchd_relevant_found_total",
        "Relevant items found in the top k, summed over queries and cycles (serial pass).",
        ["probe", "k"],
    )
    expected = _counter(
        "benchd_relevant_expected_total",
        "Relevant items expected, summed over queries and cycles (serial pass).",
        ["probe"],
    )
    for s in states:
        for k, count in sorted(s.relevant_found.items()):
            found.add_metric([s.name, str(k)], count)
        expected.add_metric([s.name], s.relevant_expected)
    yield from (found, expected)


def _latency(states: list[ProbeState]) -> Iterator[Metric]:
    histogram = HistogramMetricFamily(
        "benchd_request_duration_seconds",
        "Search request latency in seconds (errors excluded).",
        labels=["probe", "pass", "latency"],
    )
    percentiles = _gauge(
        "benchd_request_duration_percentile_seconds",
        "Last cycle: exact latency percentile over the raw samples "
        "(omitted below its sample floor: p50 2, p90 10, p95 20, p99 100).",
        ["probe", "pass", "latency", "percentile"],
    )
    samples = _gauge(
        "benchd_request_duration_samples",
        "Last cycle: latency samples the percentiles were computed from.",
        ["probe", "pass", "latency"],
    )
    for s in states:
        for (pass_, latency), hist in sorted(s.latency.items()):
            buckets = [(_le(bound), float(n)) for bound, n in hist.cumulative()]
            histogram.add_metric([s.name, pass_, latency], buckets, hist.sum)
        for (pass_, latency), summary in _last_summaries(s.latest):
            samples.add_metric([s.name, pass_, latency], summary.count)
            for label, attr in _PERCENTILES:
                value = summary.published(attr)
                if value is not None:
                    percentiles.add_metric([s.name, pass_, latency, label], value)
    yield from (histogram, percentiles, samples)


def _le(bound: float) -> str:
    """A bucket bound as the ``le`` label value Prometheus expects (``+Inf`` last)."""
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def _last_summaries(result: CycleResult) -> list[tuple[tuple[str, str], LatencySummary]]:
    out = [(("serial", "service"), result.serial_latency)]
    if result.load is not None:
        out.append((("load", "service"), result.load.service))
        if result.load.corrected is not None:
            out.append((("load", "corrected"), result.load.corrected))
    return [(key, summary) for key, summary in out if summary.count > 0]


def _requests(states: list[ProbeState]) -> Iterator[Metric]:
    total = _counter(
        "benchd_requests_total", "Search requests by outcome.", ["probe", "pass", "outcome"]
    )
    late = _counter(
        "benchd_requests_late_total",
        "Open loop: requests that could not start on time.",
        ["probe"],
    )
    dropped = _counter(
        "benchd_requests_dropped_total", "Open loop: requests never sent.", ["probe"]
    )
    retried = _counter(
        "benchd_request_retries_total",
        "Search and cleanup requests retried (429 with Retry-After, 5xx, connection errors).",
        ["probe"],
    )
    waited = _counter(
        "benchd_request_retry_wait_seconds_total",
        "Seconds waited before those retries (backoff and Retry-After); never in a latency.",
        ["probe"],
    )
    errors = _counter(
        "benchd_errors_total", "Errors met during cycles, by kind.", ["probe", "kind"]
    )
    achieved = _gauge(
        "benchd_achieved_rate_requests_per_second",
        "Last cycle: completed requests per second in the load pass.",
        ["probe"],
    )
    target = _gauge(
        "benchd_target_rate_requests_per_second",
        "Last cycle: configured open-loop arrival rate.",
        ["probe"],
    )
    for s in states:
        for (pass_, outcome), count in sorted(s.requests.items()):
            total.add_metric([s.name, pass_, outcome], count)
        late.add_metric([s.name], s.late)
        dropped.add_metric([s.name], s.dropped)
        retried.add_metric([s.name], s.request_retries)
        waited.add_metric([s.name], s.request_retry_wait_s)
        for kind, count in sorted(s.errors.items()):
            errors.add_metric([s.name, kind], count)
        load = s.latest.load
        if load is not None:
            achieved.add_metric([s.name], load.achieved_rate)
            if load.target_rate is not None:
                target.add_metric([s.name], load.target_rate)
    yield from (total, late, dropped, retried, waited, errors, achieved, target)


def _drift(states: list[ProbeState]) -> Iterator[Metric]:
    families = {
        field: _gauge(name, doc, ["probe", "metric", "k"]) for field, name, doc in _DRIFT_FIELDS
    }
    change = {field: _gauge(name, doc, ["probe"]) for field, name, doc in _CHANGE_FIELDS}
    regressed = _gauge(
        "benchd_drift_regressed_queries",
        "Queries whose score dropped against the baseline.",
        ["probe"],
    )
    stale = _gauge(
        "benchd_drift_baseline_stale",
        "1 if the baseline was measured on another corpus and was not compared.",
        ["probe"],
    )
    samples = _gauge(
        "benchd_drift_reference_samples",
        "Cycles behind the reference each query is compared with (window or repeats).",
        ["probe"],
    )
    measured = _gauge(
        "benchd_drift_noise_measured",
        "1 if the reference moved between its cycles, so changes are tested against noise.",
        ["probe"],
    )
    shift = _gauge(
        "benchd_drift_score_shift",
        "Relative change of the store's own top scores against the reference.",
        ["probe"],
    )
    shift_p = _gauge(
        "benchd_drift_score_shift_p_value",
        "Chance that noise shifts the store's top scores this much (two-sided).",
        ["probe"],
    )
    for s in states:
        drift = s.latest.drift
        if drift is None:
            continue
        stale.add_metric([s.name], float(drift.stale))
        if not drift.compared:
            continue
        for key, entry in drift.metrics.items():
            labels = [s.name, *split_metric_key(key)]
            for field, family in families.items():
                value = float(getattr(entry, field))
                if math.isfinite(value) or field not in ("before", "after"):
                    family.add_metric(labels, value)
        regressed.add_metric([s.name], float(len(drift.regressed)))
        samples.add_metric([s.name], float(drift.samples))
        measured.add_metric([s.name], float(drift.noise == "measured"))
        if drift.change is not None:
            for field, family in change.items():
                family.add_metric([s.name], float(getattr(drift.change, field)))
            if drift.change.score_shift is not None:
                shift.add_metric([s.name], drift.change.score_shift)
            if drift.change.score_p_value is not None:  # tested only past min_score_shift
                shift_p.add_metric([s.name], drift.change.score_p_value)
    yield from families.values()
    yield from change.values()
    yield from (shift, shift_p)
    yield from (regressed, stale, samples, measured)


def _embed_canary(states: list[ProbeState]) -> Iterator[Metric]:
    """The embedding canary's last reading, on probes whose baseline pinned one."""
    similarity = _gauge(
        "benchd_embed_canary_similarity",
        "Lowest cosine of the canary texts' vectors this cycle with those pinned in the "
        "baseline (0 when the width changed).",
        ["probe"],
    )
    threshold = _gauge(
        "benchd_embed_canary_threshold",
        "The similarity below which the embedding model changed, learned when the baseline "
        "was pinned.",
        ["probe"],
    )
    for s in states:
        canary = s.latest.info.canary if s.latest.info is not None else None
        if canary is None or canary.similarity is None or canary.threshold is None:
            continue
        similarity.add_metric([s.name], canary.similarity)
        threshold.add_metric([s.name], canary.threshold)
    yield from (similarity, threshold)


def _thresholds(states: list[ProbeState]) -> Metric:
    breached = _gauge(
        "benchd_threshold_breached",
        "Last cycle: 1 if a [probe.thresholds] condition did not hold (or was not measured).",
        ["probe", "threshold"],
    )
    for s in states:
        for verdict in s.thresholds:
            breached.add_metric([s.name, verdict.threshold.name], float(verdict.breached))
    return breached
