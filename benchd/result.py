"""Frozen results of one probe cycle: the only link between probing and surfacing.

A cycle produces a :class:`CycleResult`; the Prometheus collector, the status
API, the log line and the drift detector only read it. Nothing here does I/O.
Metric keys are ``"<name>@<k>"`` for cut-off measures (``hit``, ``recall``,
``recall_all``, ``precision``, ``mrr``, ``ndcg``, ``map``) and bare names for
uncut ones (``rr``, ``ap``, ``r_precision``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from benchd.config.thresholds import Threshold
from benchd.drift_outcome import DriftOutcome

__all__ = [
    "CYCLE_OUTCOMES",
    "DEGRADED_REASONS",
    "MIN_SAMPLES",
    "CycleOutcome",
    "CycleResult",
    "EmbedCanary",
    "LatencySummary",
    "LoadResult",
    "QueryResult",
    "RankedIds",
    "SeedReport",
    "TargetInfo",
    "Verdict",
    "scores_of",
]

CycleOutcome = Literal["success", "degraded", "failed", "timeout"]
CYCLE_OUTCOMES: tuple[CycleOutcome, ...] = ("success", "degraded", "failed", "timeout")
"""Every cycle outcome, in the order surfacers list them (the one list of them).

``success``: every fixture record verified and every serial query answered
(and the load pass, if any, within its error bound); ``degraded``: the cycle
ran but measured less than it should (see :data:`DEGRADED_REASONS`);
``failed``: a fatal error (its ``error_kind``: ``auth``, ``connect``,
``ownership``, ...) or no serial query answered; ``timeout``: ``timeout_s``
passed first.
"""

DEGRADED_REASONS: tuple[str, ...] = (
    "seed_incomplete",  # a fixture record was rejected or not found on read-back
    "queries_failed",  # a serial query got no answer
    "load_errors",  # load-pass errors (429s apart) above load.max_error_ratio
    "rate_limited",  # the load pass met too many 429s and stopped early
)
"""Why a cycle is ``degraded``; a bounded label value (``benchd_cycle_degraded_total``)."""

MIN_SAMPLES: Mapping[str, int] = {"p50": 2, "p90": 10, "p95": 20, "p99": 100}
"""Samples a percentile needs before it is published: ``1 / (1 - p)``.

Below it the nearest-rank percentile is just the largest sample (a "p99" of
30 samples is their maximum), so surfacers omit it and say why.
"""


class RankedIds(tuple[str, ...]):
    """Ids in rank order, carrying the store's own score of each where it gave one.

    Still a plain tuple of ids to everything that ranks or scores; the drift
    stage reads the scores (:func:`scores_of`) for its label-free score-shift
    signal. A store that reports no scores gives a plain tuple.
    """

    scores: tuple[float | None, ...]

    def __new__(cls, ids: Sequence[str], scores: Sequence[float | None] = ()) -> RankedIds:
        ranked = super().__new__(cls, ids)
        ranked.scores = tuple(scores)
        return ranked


def scores_of(ranked: Sequence[str]) -> tuple[float | None, ...]:
    """The store's scores of a ranking, () where it gave none."""
    return ranked.scores if isinstance(ranked, RankedIds) else ()


@dataclass(frozen=True, slots=True)
class EmbedCanary:
    """The embedding canary of one cycle: a few fixed texts embedded with one uncached call.

    ``vectors`` are this cycle's while nothing is pinned (what ``benchd
    baseline save`` pins), () once compared;
    ``similarity`` is the lowest cosine of a text's vector with its pinned
    one (0 when the width changed), None when nothing was pinned or the call
    failed (``error``: its kind). Below ``threshold`` (learned when pinned)
    the model changed behind its label.
    """

    texts: tuple[str, ...]
    vectors: tuple[tuple[float, ...], ...] = ()
    similarity: float | None = None
    threshold: float | None = None
    error: str | None = None
    detail: str = ""  # what was seen, in words: "width 128, pinned 256"

    @property
    def changed(self) -> bool:
        """The vectors moved below the pinned threshold: the model changed."""
        return (
            self.similarity is not None
            and self.threshold is not None
            and self.similarity < self.threshold
        )


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """What a store says about itself (``/health`` or the adapter's config)."""

    kind: str
    endpoint: str
    model: str = ""
    version: str = ""
    healthy: bool = True
    # the guarantees a probe on this store lacks, one sentence each (its capabilities)
    lacks: tuple[str, ...] = ()
    # the embedding canary's reading, on a probe that embeds on the client with one pinned
    canary: EmbedCanary | None = None


@dataclass(frozen=True, slots=True)
class SeedReport:
    """How seeding went: the store's own counts plus benchd's verification."""

    requested: int
    imported: int
    skipped: int  # the store deduplicated them (same content, namespace and type stored)
    errors: int
    verified: int = 0
    missing: tuple[str, ...] = ()
    retries: int = 0
    duration_s: float = 0.0
    searchable_after_s: float | None = None
    adopted: bool = False
    # Set when the namespace is leased by another live benchd: the corpus was
    # verified and queried read-only (nothing written or deleted); names the holder.
    read_only_beside: str | None = None
    # Not sent at all: the namespace already held them unchanged (cleanup "never"/"after").
    unchanged: int = 0


@dataclass(frozen=True, slots=True)
class QueryResult:
    """One labeled query's answer and its per-query metric values."""

    id: str
    q: str
    category: str | None
    expected_ids: tuple[str, ...]
    ranked_ids: tuple[str, ...]
    metrics: Mapping[str, float]
    latency_s: float | None = None
    error: str | None = None  # an error kind from benchd.errors.ERROR_KINDS


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Exact percentiles (seconds) over raw samples of one cycle."""

    count: int
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    mean: float

    @classmethod
    def empty(cls) -> LatencySummary:
        return cls(count=0, p50=0.0, p90=0.0, p95=0.0, p99=0.0, max=0.0, mean=0.0)

    def published(self, name: str) -> float | None:
        """Percentile ``name`` (``"p50"``...``"p99"``, ``"max"``, ``"mean"``) if it may be shown.

        ``None`` when there are fewer samples than :data:`MIN_SAMPLES` asks for
        (``max`` and ``mean`` need one sample).
        """
        if self.count < MIN_SAMPLES.get(name, 1):
            return None
        value: float = getattr(self, name)
        return value

    def withheld(self) -> dict[str, str]:
        """Why each unpublished percentile is withheld, e.g. ``{"p99": "needs >= 100 ..."}``."""
        return {
            name: f"needs >= {need} samples, the cycle had {self.count}"
            for name, need in MIN_SAMPLES.items()
            if self.count < need
        }


@dataclass(frozen=True, slots=True)
class LoadResult:
    """A load run: timings, outcomes and the quality scored on its answers."""

    mode: str
    duration_s: float
    requests: Mapping[str, int]  # outcome -> count ("ok" or an error kind)
    service: LatencySummary
    corrected: LatencySummary | None  # open loop only
    service_samples: tuple[float, ...]
    corrected_samples: tuple[float, ...]
    achieved_rate: float
    target_rate: float | None = None
    late: int = 0
    dropped: int = 0
    aggregate: Mapping[str, float] = field(default_factory=dict)
    rate_limited: bool = False  # stopped early: too many 429s, or a Retry-After past its end
    paused_s: float = 0.0  # seconds sending was paused for 429 Retry-After
    max_rate: float | None = None  # the read-budget cap the pass was paced to (req/s)

    @property
    def sent(self) -> int:
        """Requests sent (every outcome)."""
        return sum(self.requests.values())


@dataclass(frozen=True, slots=True)
class Verdict:
    """A threshold and what the cycle measured: ``value`` None means not measured."""

    threshold: Threshold
    value: float | None
    breached: bool
    note: str = ""  # how the value was taken, when not as named (a withheld percentile)

    def describe(self) -> str:
        t = self.threshold
        if self.value is None:
            return f"{t.name}: not measured (the cycle produced no {t.pass_} {t.measure})"
        note = f"; {self.note}" if self.note else ""
        if self.breached:
            return f"{t.name}: {t.measure} = {self.value:.4g}, needs {t.op} {t.bound:g}{note}"
        return f"{t.name}: {t.measure} = {self.value:.4g} (ok{note})"



@dataclass(frozen=True, slots=True)
class CycleResult:
    """Everything one cycle of one probe produced, ready to be surfaced."""

    probe: str
    target: str  # target kind, a bounded label
    corpus: str  # fixture name, a bounded label
    cycle: int
    started_at: float  # unix seconds
    finished_at: float
    outcome: CycleOutcome
    phases: Mapping[str, float]  # phase -> seconds (info, seed, serial, load, cleanup)
    ks: tuple[int, ...]
    info: TargetInfo | None = None
    seed: SeedReport | None = None
    queries: tuple[QueryResult, ...] = ()
    aggregate: Mapping[str, float] = field(default_factory=dict)
    by_category: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    ci: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    relevant_found: Mapping[int, int] = field(default_factory=dict)  # k -> found in top k
    relevant_expected: int = 0
    serial_latency: LatencySummary = field(default_factory=LatencySummary.empty)
    load: LoadResult | None = None
    errors: Mapping[str, int] = field(default_factory=dict)  # error kind -> count
    retries: int = 0  # search/cleanup requests retried after seeding (seed.retries has those)
    retry_wait_s: float = 0.0  # seconds waited before those retries (never in a latency)
    error_kind: str | None = None
    error_message: str | None = None
    degraded_reasons: tuple[str, ...] = ()  # from DEGRADED_REASONS, when outcome is degraded
    fixture_hash: str = ""
    drift: DriftOutcome | None = None  # attached by the drift stage; None before it ran
    # [probe.thresholds] and the command line's, judged once by the probe runner
    thresholds: tuple[Verdict, ...] = ()
    # pass -> searches that answered fewer than min(k, records seeded), on a kind that
    # declares full answers (Capabilities.full_answers); empty where it does not
    short_answers: Mapping[str, int] = field(default_factory=dict)
    # A store whose search answers sets: why rank measures are absent, and their keys
    unranked: str | None = None
    omitted: tuple[str, ...] = ()
    # phase -> wall seconds during which at least one of its requests was waiting (before a
    # retry: Retry-After, backoff; or the load pass paused on a 429); at most phases[phase]
    phase_wait_s: Mapping[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome == "success"

    @property
    def duration_s(self) -> float:
        return self.finished_at - self.started_at
