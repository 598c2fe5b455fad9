"""The result book: the one piece of mutable state that surfacers read.

The scheduler :meth:`ResultBook.record`\\ s every finished :class:`CycleResult`;
the Prometheus collector, the status API and readiness read an immutable
:class:`BookSnapshot`. Per probe the book keeps the latest result, the last N
cycle summaries and the cumulative state counters and histograms need
(cycles by outcome, requests by outcome, seed record counts, latency bucket
counts, ...). Each record replaces a probe's frozen :class:`ProbeState` with a
new one, so a snapshot is a cheap dictionary copy taken under a lock and a
scrape running in a worker thread never sees a half-updated probe.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

import numpy as np

from benchd.result import (
    CYCLE_OUTCOMES,
    DEGRADED_REASONS,
    CycleResult,
    LatencySummary,
    Verdict,
)

__all__ = [
    "DEFAULT_BUCKETS",
    "BookSnapshot",
    "CleanupOutcome",
    "CycleSummary",
    "Histogram",
    "ProbeState",
    "ResultBook",
]

# Explicit latency buckets in seconds (DESIGN §4): 1 ms .. 10 s.
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
DEFAULT_HISTORY = 20
_RELOAD_TIMES = 64  # successful reloads remembered, for the status page's markers

_K = TypeVar("_K")


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative-over-time bucket counts of latency samples (seconds).

    ``counts[i]`` holds the samples in ``(bounds[i-1], bounds[i]]``; the last
    entry holds those above the largest bound (the ``+Inf`` overflow).
    """

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    sum: float = 0.0

    @classmethod
    def empty(cls, bounds: Sequence[float] = DEFAULT_BUCKETS) -> Histogram:
        return cls(bounds=tuple(bounds), counts=(0,) * (len(bounds) + 1))

    @property
    def count(self) -> int:
        return sum(self.counts)

    def add(self, samples: Sequence[float]) -> Histogram:
        """A new histogram with ``samples`` added (NaN samples are ignored)."""
        values = np.asarray(samples, dtype=float)
        values = values[~np.isnan(values)]
        if values.size == 0:
            return self
        index = np.searchsorted(np.asarray(self.bounds), values, side="left")
        added = np.bincount(index, minlength=len(self.counts))
        counts = tuple(int(a + b) for a, b in zip(self.counts, added, strict=True))
        return Histogram(self.bounds, counts, self.sum + float(values.sum()))

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, cumulative count)`` pairs ending with ``inf``, as Prometheus wants."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


@dataclass(frozen=True, slots=True)
class CycleSummary:
    """The few numbers of one past cycle kept for the status history."""

    cycle: int
    outcome: str
    started_at: float
    finished_at: float
    error_kind: str | None
    degraded_reasons: tuple[str, ...]
    aggregate: Mapping[str, float]
    latency_p50_s: float | None
    latency_p99_s: float | None
    requests: int
    errors: int
    model: str = ""  # the store's model label this cycle
    drifted: bool = False  # the drift stage flagged some metric@k
    model_changed: bool = False  # the label-free signals said the rankings changed
    compared: bool = False  # the drift stage compared it with a baseline
    short_answers: int = 0  # searches that answered fewer results than asked, all passes

    @property
    def duration_s(self) -> float:
        return self.finished_at - self.started_at


@dataclass(frozen=True, slots=True)
class ProbeState:
    """Everything the surfacers know about one probe; replaced, never mutated."""

    name: str
    latest: CycleResult
    history: tuple[CycleSummary, ...]
    model: str
    last_success_at: float | None
    cycles: Mapping[str, int]
    cycle_errors: Mapping[str, int]
    degraded: Mapping[str, int]  # degraded reason -> cycles
    requests: Mapping[tuple[str, str], int]  # (pass, outcome) -> count
    late: int
    dropped: int
    relevant_found: Mapping[int, int]  # k -> found in top k
    relevant_expected: int
    seed_records: Mapping[str, int]  # imported / skipped / unchanged / errors
    seed_retries: int
    request_retries: int  # search/cleanup requests retried
    request_retry_wait_s: float  # seconds waited before those retries
    errors: Mapping[str, int]  # error kind -> count
    latency: Mapping[tuple[str, str], Histogram]  # (pass, latency) -> histogram
    thresholds: tuple[Verdict, ...] = ()  # the latest cycle against [probe.thresholds]
    short_answers: int = 0  # searches answering fewer than min(k, records seeded), all passes
    # started_at of the cycle that opened the current drift / model-change episode
    # (the drift stage's "onset" transition); None when none is open
    drift_onset_at: float | None = None
    model_change_onset_at: float | None = None


class _CleanupLike(Protocol):
    @property
    def namespace(self) -> str: ...
    @property
    def deleted(self) -> int: ...
    @property
    def leftover(self) -> int: ...


@dataclass(frozen=True, slots=True)
class CleanupOutcome:
    """A probe's shutdown cleanup: deleted records, and those it left in its namespace."""

    namespace: str
    deleted: int
    leftover: int
    at: float


@dataclass(frozen=True, slots=True)
class BookSnapshot:
    """A consistent view of the book at one instant."""

    probes: tuple[str, ...]  # configured probes, config order
    states: Mapping[str, ProbeState]  # only probes with at least one completed cycle
    reload_successful: bool
    reload_success_at: float
    reloads: Mapping[str, int] = field(default_factory=dict)  # success / failure -> count
    intervals: Mapping[str, float] = field(default_factory=dict)  # probe -> interval_s
    reload_error: str | None = None  # why the last reload failed (None after a success)
    cleanups: Mapping[str, CleanupOutcome] = field(default_factory=dict)  # shutdown cleanups
    reload_times: tuple[float, ...] = ()  # successful reloads, oldest first (the last few)
    version: int = 0  # the book's generation: any change to what it holds changes it

    @property
    def pending(self) -> tuple[str, ...]:
        """Configured probes that have not completed a cycle yet."""
        return tuple(p for p in self.probes if p not in self.states)


class ResultBook:
    """Latest results and cumulative counts per probe, safe to read from a thread."""

    def __init__(
        self,
        *,
        history: int = DEFAULT_HISTORY,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        loaded_at: float | None = None,
    ) -> None:
        if history < 1:
            raise ValueError("history must keep at least one cycle")
        self._history = history
        self._buckets = tuple(sorted(float(b) for b in buckets))
        self._lock = threading.Lock()
        self._probes: tuple[str, ...] | None = None
        self._intervals: dict[str, float] = {}  # probe -> configured interval_s
        self._states: dict[str, ProbeState] = {}
        self._reload_ok = True
        self._reload_at = time.time() if loaded_at is None else loaded_at
        self._reloads: Counter[str] = Counter()
        self._reload_error: str | None = None
        self._cleanups: dict[str, CleanupOutcome] = {}
        self._reload_times: deque[float] = deque(maxlen=_RELOAD_TIMES)
        self._version = 0  # bumped under the lock by every change; see BookSnapshot.version

    @property
    def buckets(self) -> tuple[float, ...]:
        return self._buckets

    def set_probes(
        self, names: Iterable[str], intervals: Mapping[str, float] | None = None
    ) -> None:
        """Declare the configured probes (and their intervals); others' state is dropped."""
        probes = tuple(dict.fromkeys(names))
        with self._lock:
            self._probes = probes
            self._intervals = {p: float(v) for p, v in (intervals or {}).items() if p in probes}
            for name in [n for n in self._states if n not in probes]:
                del self._states[name]
            self._version += 1

    def record(self, result: CycleResult) -> None:
        """Fold one finished cycle (with the threshold verdicts it carries) into the book.

        A result for a probe that a reload has removed is dropped, so a cycle
        finishing just after the reload cannot bring its series back.
        """
        with self._lock:
            if self._probes is not None and result.probe not in self._probes:
                return
            previous = self._states.get(result.probe)
            self._states[result.probe] = _accumulate(
                previous, result, history=self._history, buckets=self._buckets
            )
            if result.thresholds:
                state = self._states[result.probe]
                self._states[result.probe] = replace(state, thresholds=result.thresholds)
            self._version += 1

    def config_loaded(self, at: float) -> None:
        """Note the start-up load: successful, timestamped, but not counted as a reload."""
        with self._lock:
            self._reload_ok = True
            self._reload_error = None
            self._reload_at = at
            self._version += 1

    def config_reload(self, success: bool, at: float, error: str | None = None) -> None:
        """Note the outcome of a config reload (SIGHUP or POST /-/reload), and count it."""
        with self._lock:
            self._reload_ok = success
            self._reload_error = None if success else (error or "reload failed")
            self._reloads["success" if success else "failure"] += 1
            if success:
                self._reload_at = at
                self._reload_times.append(at)
            self._version += 1

    def cleanup(self, probe: str, report: _CleanupLike, at: float) -> None:
        """Record a probe's shutdown cleanup (kept after the probe is removed)."""
        with self._lock:
            self._cleanups[probe] = CleanupOutcome(
                report.namespace, report.deleted, report.leftover, at
            )
            self._version += 1

    def snapshot(self) -> BookSnapshot:
        """A consistent, immutable view for one scrape or one status request."""
        with self._lock:
            states = dict(self._states)
            probes = self._probes if self._probes is not None else tuple(states)
            return BookSnapshot(
                probes=probes,
                states=states,
                reload_successful=self._reload_ok,
                reload_success_at=self._reload_at,
                reloads=dict(self._reloads),
                intervals=dict(self._intervals),
                reload_error=self._reload_error,
                cleanups=dict(self._cleanups),
                reload_times=tuple(self._reload_times),
                version=self._version,
            )

    def latest(self, probe: str) -> CycleResult | None:
        """The probe's last result, if it has completed a cycle."""
        with self._lock:
            state = self._states.get(probe)
        return None if state is None else state.latest

    def configured(self) -> bool:
        """Whether the daemon has declared its probes yet."""
        with self._lock:
            return self._probes is not None

    def ready(self) -> bool:
        """True once the config is loaded and the probes are declared.

        Readiness means "this process is up and can be scraped", not "the
        store is healthy": a Kubernetes readiness probe that failed with the
        store would take benchd out of the scrape exactly when its metrics
        matter. A failing probe shows in ``benchd_up`` and ``/api/status``.
        """
        return self.configured()


def _accumulate(
    previous: ProbeState | None,
    result: CycleResult,
    *,
    history: int,
    buckets: tuple[float, ...],
) -> ProbeState:
    """The probe's new state: ``previous`` (or nothing) plus one cycle."""
    base = previous if previous is not None else _initial(result, buckets)
    seed = result.seed
    seed_counts = (
        {
            "imported": seed.imported,
            "skipped": seed.skipped,
            "unchanged": seed.unchanged,
            "errors": seed.errors,
        }
        if seed
        else {}
    )
    model = result.info.model if result.info is not None and result.info.model else base.model
    load = result.load
    return ProbeState(
        name=result.probe,
        latest=result,
        history=(*base.history, _summarize(result))[-history:],
        model=model,
        last_success_at=result.finished_at if result.ok else base.last_success_at,
        cycles=_add(base.cycles, {result.outcome: 1}),
        cycle_errors=_add(base.cycle_errors, _cycle_error(result)),
        degraded=_add(base.degraded, dict.fromkeys(result.degraded_reasons, 1)),
        requests=_add(base.requests, _request_outcomes(result)),
        late=base.late + (load.late if load else 0),
        dropped=base.dropped + (load.dropped if load else 0),
        relevant_found=_add(base.relevant_found, result.relevant_found),
        relevant_expected=base.relevant_expected + result.relevant_expected,
        seed_records=_add(base.seed_records, seed_counts),
        seed_retries=base.seed_retries + (seed.retries if seed else 0),
        request_retries=base.request_retries + result.retries,
        request_retry_wait_s=base.request_retry_wait_s + result.retry_wait_s,
        errors=_add(base.errors, result.errors),
        latency=_add_samples(base.latency, _latency_samples(result), buckets),
        short_answers=base.short_answers + sum(result.short_answers.values()),
        drift_onset_at=_onset(base.drift_onset_at, result, model=False),
        model_change_onset_at=_onset(base.model_change_onset_at, result, model=True),
    )


def _onset(since: float | None, result: CycleResult, *, model: bool) -> float | None:
    """When the open episode began: this cycle's start on an onset, None once recovered."""
    drift = result.drift
    if drift is None:
        return since
    transition = drift.model_transition if model else drift.transition
    if transition == "onset":
        return result.started_at
    if transition == "recovered":
        return None
    open_now = drift.model_changed if model else drift.detected
    if open_now and since is None:  # an episode benchd saw begin before it kept state
        return result.started_at
    return since


def _initial(result: CycleResult, buckets: tuple[float, ...]) -> ProbeState:
    """Zeroed state, with the histograms and counters Prometheus should see from the start."""
    empty = Histogram.empty(buckets)
    return ProbeState(
        name=result.probe,
        latest=result,
        history=(),
        model="",
        last_success_at=None,
        cycles=dict.fromkeys(CYCLE_OUTCOMES, 0),
        cycle_errors={},
        degraded=dict.fromkeys(DEGRADED_REASONS, 0),
        requests={},
        late=0,
        dropped=0,
        relevant_found=dict.fromkeys(result.ks, 0),
        relevant_expected=0,
        seed_records=dict.fromkeys(("imported", "skipped", "unchanged", "errors"), 0),
        seed_retries=0,
        request_retries=0,
        request_retry_wait_s=0.0,
        errors={},
        latency={("serial", "service"): empty},
    )


def _add(base: Mapping[_K, int], extra: Mapping[_K, int]) -> dict[_K, int]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = out.get(key, 0) + value
    return out


def _add_samples(
    base: Mapping[tuple[str, str], Histogram],
    samples: Mapping[tuple[str, str], Sequence[float]],
    bounds: tuple[float, ...],
) -> dict[tuple[str, str], Histogram]:
    out = dict(base)
    for key, values in samples.items():
        out[key] = out.get(key, Histogram.empty(bounds)).add(values)
    return out


def _cycle_error(result: CycleResult) -> dict[str, int]:
    """The error kind of a failed or timed-out cycle (a degraded one has reasons instead)."""
    if result.outcome in ("success", "degraded"):
        return {}
    kind = result.error_kind or ("timeout" if result.outcome == "timeout" else "internal")
    return {kind: 1}


def _request_outcomes(result: CycleResult) -> dict[tuple[str, str], int]:
    """Requests by (pass, outcome): serial from the per-query answers, load from the engine."""
    out: Counter[tuple[str, str]] = Counter(("serial", q.error or "ok") for q in result.queries)
    if result.load is not None:
        for outcome, count in result.load.requests.items():
            out["load", outcome] += count
    return dict(out)


def _latency_samples(result: CycleResult) -> dict[tuple[str, str], Sequence[float]]:
    """Raw timings by (pass, latency); failed requests carry no latency."""
    serial = [q.latency_s for q in result.queries if q.error is None and q.latency_s is not None]
    out: dict[tuple[str, str], Sequence[float]] = {("serial", "service"): serial}
    load = result.load
    if load is not None:
        out["load", "service"] = load.service_samples
        if load.corrected is not None or load.corrected_samples:
            out["load", "corrected"] = load.corrected_samples
    return out


def _summarize(result: CycleResult) -> CycleSummary:
    latency = _headline_latency(result)
    requests = len(result.queries) + (sum(result.load.requests.values()) if result.load else 0)
    drift = result.drift
    return CycleSummary(
        cycle=result.cycle,
        outcome=result.outcome,
        started_at=result.started_at,
        finished_at=result.finished_at,
        error_kind=result.error_kind,
        degraded_reasons=result.degraded_reasons,
        aggregate=dict(result.aggregate),
        latency_p50_s=latency.published("p50"),
        latency_p99_s=latency.published("p99"),
        requests=requests,
        errors=sum(result.errors.values()),
        model=result.info.model if result.info is not None else "",
        drifted=drift is not None and drift.detected,
        model_changed=drift is not None and drift.model_changed,
        compared=drift is not None and drift.compared,
        short_answers=sum(result.short_answers.values()),
    )


def _headline_latency(result: CycleResult) -> LatencySummary:
    """The latency a human looks at first: corrected under load, else service, else serial."""
    load = result.load
    if load is not None:
        if load.corrected is not None and load.corrected.count:
            return load.corrected
        if load.service.count:
            return load.service
    return result.serial_latency
