"""One probe cycle: info → seed (+verify) → serial pass → load pass → cleanup → score.

``run_cycle`` never raises for a store failure and never outlives
``timeout_s``: it returns a frozen :class:`~benchd.result.CycleResult`, built
once at the end in pipeline order, whose ``outcome`` says what happened
(``success``, ``degraded`` with its reasons, ``failed`` with an error kind,
or ``timeout`` naming the phase it was in), so one failing probe never stops
another and every failure can be counted. Scoring is delegated to the pure
functions in :mod:`benchd.scoring`.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import anyio.to_thread

from benchd.config.load import ProbeConfig
from benchd.errors import FixtureChanged, TargetAuthError, TargetError, TargetUnreachable
from benchd.fixtures.model import Fixture, LabeledQuery
from benchd.load import Fire, LoadProfile, LoadRun, run_load
from benchd.progress import CycleProgress, WaitClock, enter_phase, waits_reported_to
from benchd.result import (
    CycleOutcome,
    CycleResult,
    LoadResult,
    QueryResult,
    SeedReport,
    TargetInfo,
)
from benchd.scoring.aggregate import by_category, mean_metrics
from benchd.scoring.latency import summarize
from benchd.scoring.ranking import (
    RANK_ONLY_REASON,
    query_metrics,
    rank_only_keys,
    relevant_in_top,
    set_metrics,
)
from benchd.scoring.stats import bootstrap_cis
from benchd.store.target import (
    ProbeTarget,
    Progress,
    SearchQuery,
    Target,
    service_timer,
)

__all__ = [
    "RATE_LIMITED_KINDS",
    "CycleFailure",
    "ScoreMemo",
    "SerialAnswer",
    "load_pass",
    "load_quality",
    "make_fire",
    "run_cycle",
    "short_answers",
]

# A whole cycle stops on these: every further request would fail the same way.
_FATAL = (TargetAuthError, TargetUnreachable)

RATE_LIMITED_KINDS = frozenset({"rate_limited"})
"""Request outcomes that mean "the store's rate limit said no": counted apart, not errors."""

T = TypeVar("T")


@dataclass(slots=True)
class CycleFailure(Exception):
    """Raised inside a cycle to stop it; carries the phase that failed."""

    phase: str
    error: TargetError | FixtureChanged  # a streamed fixture's file changed under the cycle


@dataclass(frozen=True, slots=True)
class SerialAnswer:
    """One serial query's answer: ranked ids and latency, or the error kind."""

    ranked: tuple[str, ...] | None
    latency_s: float | None = None
    error: str | None = None


def _search_query(query: LabeledQuery, probe: ProbeConfig, fixture: Fixture) -> SearchQuery:
    return SearchQuery(
        q=query.q,
        limit=probe.max_k,
        reference_date=query.reference_date or fixture.reference_date,
    )


async def _serial_pass(
    target: Target, probe: ProbeConfig, fixture: Fixture, progress: Progress | None = None
) -> list[SerialAnswer]:
    """One request at a time, in fixture order: the exact ranking baseline.

    A latency is the answering attempt's service time: backoff and
    ``Retry-After`` waits before a retry are counted apart, never timed.
    ``progress`` hears ``(answered, queries)`` after each query.
    """
    answers: list[SerialAnswer] = []
    for query in fixture.queries:
        answers.append(await _serial_answer(target, _search_query(query, probe, fixture)))
        if progress is not None:
            progress(len(answers), len(fixture.queries))
    return answers


async def _serial_answer(target: Target, query: SearchQuery) -> SerialAnswer:
    """One serial query's ranked ids and service time, or its error kind."""
    try:
        with service_timer() as timer:
            ranked = await target.search(query)
    except _FATAL as exc:
        raise CycleFailure("serial", exc) from None
    except TargetError as exc:
        return SerialAnswer(None, error=exc.kind)
    return SerialAnswer(ranked, timer.service_s())


def make_fire(target: Target, probe: ProbeConfig, fixture: Fixture) -> Fire:
    """The load engine's ``fire(i)``: search the i-th labeled query (cycled)."""
    queries = [_search_query(q, probe, fixture) for q in fixture.queries]

    async def fire(i: int) -> tuple[str, ...]:
        return await target.search(queries[i % len(queries)])

    return fire


@dataclass(frozen=True, slots=True)
class _Quality:
    """The serial pass scored: per-query metrics, means, categories, CIs, found counts."""

    per_query: tuple[dict[str, float] | None, ...]
    aggregate: dict[str, float]
    by_category: dict[str, dict[str, float]]
    ci: dict[str, tuple[float, float]]
    found: dict[int, int]
    expected: int


@dataclass(slots=True)
class ScoreMemo:
    """One probe's per-query scores of its last cycle, by (query index, ranking).

    A query's scores depend on its ranked ids, its judgments and the cut-offs
    alone, and a probe at rest gets the same rankings cycle after cycle: its
    runner keeps them here (the last cycle's only, for these queries and ks).
    """

    queries: Sequence[LabeledQuery] = ()
    ks: tuple[int, ...] = ()
    unranked: bool = False
    scores: dict[tuple[int, tuple[str, ...]], dict[str, float]] = field(default_factory=dict)


def _per_query(
    queries: Sequence[LabeledQuery],
    answers: Sequence[SerialAnswer],
    ks: Sequence[int],
    unranked: bool,
    memo: ScoreMemo | None,
) -> tuple[dict[str, float] | None, ...]:
    """Each answered query's scores (None: unanswered), from ``memo`` where it had them."""
    score = set_metrics if unranked else query_metrics
    same = memo is not None and memo.queries is queries and memo.ks == tuple(ks)
    known = memo.scores if memo is not None and same and memo.unranked == unranked else {}
    kept: dict[tuple[int, tuple[str, ...]], dict[str, float]] = {}
    out: list[dict[str, float] | None] = []
    for i, (q, a) in enumerate(zip(queries, answers, strict=True)):
        if a.ranked is None:
            out.append(None)
            continue
        m = known.get((i, a.ranked))
        if m is None:
            m = score(a.ranked, q.relevance, ks)
        kept[(i, a.ranked)] = m
        out.append(dict(m))
    if memo is not None:
        memo.queries, memo.ks, memo.unranked, memo.scores = queries, tuple(ks), unranked, kept
    return tuple(out)


def _quality(
    queries: Sequence[LabeledQuery],
    answers: Sequence[SerialAnswer],
    ks: Sequence[int],
    *,
    unranked: bool = False,
    memo: ScoreMemo | None = None,
) -> _Quality:
    """Score every answered query at the cut-offs ``ks`` (a set: whole); unanswered left out."""
    per_query = _per_query(queries, answers, ks, unranked, memo)
    scored = [(q, m) for q, m in zip(queries, per_query, strict=True) if m is not None]
    found = {} if unranked else dict.fromkeys(ks, 0)  # a set has no top k: recall says it
    expected = 0
    for q, a in zip(queries, answers, strict=True):
        if a.ranked is not None:
            expected += len(q.expected_ids)
            for k in found:
                found[k] += relevant_in_top(a.ranked, q.relevance, k)
    if not scored:
        return _Quality(per_query, {}, {}, {}, found, expected)
    values = [m for _, m in scored]
    aggregate = mean_metrics(values)
    categories = by_category([(q.category, m) for q, m in scored])
    ci = bootstrap_cis({key: [m[key] for m in values] for key in aggregate})
    return _Quality(per_query, aggregate, categories, ci, found, expected)


def load_quality(
    queries: Sequence[LabeledQuery],
    answers: Sequence[tuple[int, tuple[str, ...]]],
    ks: Sequence[int],
    *,
    unranked: bool = False,
) -> dict[str, float]:
    """Quality under load: the mean over *distinct* queries of each query's mean.

    A query asked five times under load weighs as much as one asked once, so
    identical rankings score the same under load as serially. ``unranked``:
    each answer is a set, scored whole (:func:`~benchd.scoring.ranking.set_metrics`).
    A query's answers mostly repeat one ranking: each distinct ranking of a query
    is scored once (the scores depend on the ids and the labels alone).
    """
    score = set_metrics if unranked else query_metrics
    by_query: dict[int, list[dict[str, float]]] = {}
    scored: dict[tuple[int, tuple[str, ...]], dict[str, float]] = {}
    for index, ranked in answers:
        at = index % len(queries)
        metrics = scored.get((at, ranked))
        if metrics is None:
            metrics = scored[at, ranked] = score(ranked, queries[at].relevance, ks)
        by_query.setdefault(at, []).append(metrics)
    return mean_metrics([mean_metrics(by_query[i]) for i in sorted(by_query)])


def short_answers(ranked: Iterable[Sequence[str] | None], full: int) -> int:
    """Searches that answered fewer than ``full`` results (a failed one is an error, not short).

    ``full`` is ``min(k, records seeded)`` on a kind whose searches return that
    many when the store is healthy (a kNN store); a pgvector HNSW index over a
    shared table can answer 1 row of the 11 asked once a filter drops most of
    its candidates.
    """
    if full <= 0:
        return 0
    return sum(1 for r in ranked if r is not None and len(r) < full)


async def load_pass(
    target: ProbeTarget, probe: ProbeConfig, fixture: Fixture, profile: LoadProfile
) -> LoadRun:
    """The raw load pass, paced as ``profile`` says, over the target's own sender if it has one."""
    n = len(fixture.queries)
    if not target.capabilities.load_sender:
        return await run_load(make_fire(target, probe, fixture), n, profile)
    queries = [_search_query(q, probe, fixture) for q in fixture.queries]
    sender = target.load_sender(
        queries, concurrency=profile.concurrency, timeout_s=profile.request_timeout_s
    )
    async with sender as fire:
        return await run_load(fire, n, profile)


@dataclass(slots=True)
class _Cycle:
    """What a cycle has gathered so far, phase by phase; turned into a result once."""

    probe: ProbeConfig
    fixture: Fixture
    target: ProbeTarget
    progress: Progress | None
    cycle: int
    read_rate: float | None = None
    memo: ScoreMemo | None = None
    started_at: float = field(default_factory=time.time)
    phases: dict[str, float] = field(default_factory=dict)
    current: str = "info"
    current_since: float = field(default_factory=time.perf_counter)
    retries_before: int | None = None  # the target's count when seeding ended
    waited_before: float | None = None  # the target's retry_wait_s when seeding ended
    # wall time spent waiting (retries' Retry-After and backoff, load pauses), as it passed
    waits: WaitClock = field(default_factory=WaitClock)
    info: TargetInfo | None = None
    seed: SeedReport | None = None
    answers: list[SerialAnswer] = field(default_factory=list)
    load: LoadResult | None = None
    full_answer: int = 0  # results a full answer holds; 0: the kind makes no such promise
    short: dict[str, int] = field(default_factory=dict)  # pass -> short answers

    async def phase(self, name: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run one phase's ``work``, timing it; a TargetError (or a fixture file changed since
        it was loaded) fails the cycle in ``name``."""
        self.current, self.current_since = name, time.perf_counter()
        self.waits.enter(name)
        enter_phase(self.progress, name)
        try:
            done = await work()
        except (TargetError, FixtureChanged) as exc:
            raise CycleFailure(name, exc) from None
        finally:
            self.waits.leave()
            elapsed = time.perf_counter() - self.current_since
            self.phases[name] = self.phases.get(name, 0.0) + elapsed
        # Between phases, and after the last one, the cycle is scoring.
        self.current, self.current_since = "score", time.perf_counter()
        return done

    def retries(self) -> int:
        """Requests the target retried during this cycle, after seeding."""
        if self.retries_before is None:
            return 0  # still seeding: those retries are in the seed report
        now = self.target.retries
        return now - self.retries_before

    def on_wait(self, seconds: float, reason: str) -> None:
        """A wait the store imposed (see :mod:`benchd.progress`): show it (``waits`` counts it)."""
        if isinstance(self.progress, CycleProgress):
            self.progress.waiting(seconds, reason)

    def retry_wait_s(self) -> float:
        """Seconds the target waited before its retries this cycle (backoff, Retry-After)."""
        if self.waited_before is None:
            return 0.0  # still seeding: those waits belong to the seed
        now = self.target.retry_wait_s
        return now - self.waited_before

    def phase_wait_s(self) -> dict[str, float]:
        """Per phase: wall seconds during which at least one of its requests was waiting
        (before a retry, or a load pass paused on a 429), never more than the phase took."""
        waited = self.waits.by_phase()
        return {name: min(waited.get(name, 0.0), took) for name, took in self.phases.items()}

    def failed(self, failure: CycleFailure) -> CycleResult:
        return self._result(
            "failed",
            errors={failure.error.kind: 1},
            error_kind=failure.error.kind,
            error_message=f"{failure.phase}: {failure.error}",
        )

    def timed_out(self) -> CycleResult:
        """The timeout result: which phase, for how long, how much of it waiting on 429s."""
        in_phase = time.perf_counter() - self.current_since  # phase() has timed it already
        waited = self.waits.total()  # wall time, concurrent waits once, none before it passed
        message = (
            f"cycle did not finish within timeout_s={self.probe.timeout_s:g}: still in phase "
            f"{self.current!r} after {in_phase:.1f} s"
        )
        if waited > 0:
            message += (
                f"; {waited:.1f} s of the cycle went waiting on 429 Retry-After"
                " and retry backoff"
            )
        return self._result(
            "timeout", errors={"timeout": 1}, error_kind="timeout", error_message=message
        )

    def _result(
        self,
        outcome: CycleOutcome,
        *,
        errors: Mapping[str, int],
        error_kind: str | None,
        error_message: str | None,
    ) -> CycleResult:
        probe, fixture = self.probe, self.fixture
        return CycleResult(
            probe=probe.name,
            target=probe.target.kind,
            corpus=fixture.name,
            cycle=self.cycle,
            started_at=self.started_at,
            finished_at=time.time(),
            outcome=outcome,
            phases=dict(self.phases),
            phase_wait_s=self.phase_wait_s(),
            ks=probe.k,
            info=self.info,
            seed=self.seed,
            errors=dict(errors),
            retries=self.retries(),
            retry_wait_s=self.retry_wait_s(),
            error_kind=error_kind,
            error_message=error_message,
            fixture_hash=fixture.content_hash,
        )


async def run_cycle(
    probe: ProbeConfig,
    fixture: Fixture,
    target: ProbeTarget,
    *,
    cycle: int = 1,
    progress: Progress | None = None,
    read_rate: float | None = None,
    memo: ScoreMemo | None = None,
) -> CycleResult:
    """Run one cycle of ``probe`` against ``target`` within ``probe.timeout_s``.

    ``read_rate`` (requests per second) is this probe's share of its API key's
    read budget (:mod:`benchd.budget`): the load pass is paced to it.
    ``memo``: the probe's scores of its last cycle, reused and updated. Never
    raises for store failures.
    """
    state = _Cycle(probe, fixture, target, progress, cycle, read_rate, memo)
    with waits_reported_to(state.on_wait, state.waits), anyio.move_on_after(probe.timeout_s):
        try:
            await _run(state)
        except CycleFailure as failure:
            return state.failed(failure)
        # Scoring and bootstrap are pure CPU work: off the loop, so other probes'
        # request timings are not stalled by this one's arithmetic.
        return await anyio.to_thread.run_sync(_assemble, state)
    return state.timed_out()


async def _run(state: _Cycle) -> None:
    probe, fixture, target = state.probe, state.fixture, state.target
    state.info = await state.phase("info", target.info)
    state.seed = await state.phase(
        "seed", lambda: target.seed(fixture.memories, progress=state.progress)
    )
    state.retries_before = target.retries
    state.waited_before = target.retry_wait_s
    state.answers = await state.phase(
        "serial", lambda: _serial_pass(target, probe, fixture, state.progress)
    )
    if target.capabilities.full_answers and state.seed is not None:
        state.full_answer = min(probe.max_k, state.seed.verified)
        state.short["serial"] = short_answers((a.ranked for a in state.answers), state.full_answer)
    if probe.load.mode != "serial":
        caps = [r for r in (probe.load.max_rate, state.read_rate) if r is not None]
        profile = dataclasses.replace(probe.load, max_rate=min(caps, default=None))
        run = await state.phase("load", lambda: load_pass(target, probe, fixture, profile))
        answered = list(run.answers())
        state.load = run.to_result(
            aggregate=load_quality(
                fixture.queries, answered, probe.k, unranked=target.capabilities.unranked
            )
        )
        state.short["load"] = short_answers((r for _, r in answered), state.full_answer)
    if probe.target.cleanup == "after":
        ids = fixture.memory_ids
        await state.phase("cleanup", lambda: target.cleanup(ids))


def _verdict(state: _Cycle) -> tuple[CycleOutcome, tuple[str, ...]]:
    """``success`` only when everything was measured; else ``degraded`` and why."""
    reasons: list[str] = []
    seed = state.seed
    if seed is not None and (seed.errors or seed.missing or seed.verified < seed.requested):
        reasons.append("seed_incomplete")
    if any(a.error is not None for a in state.answers):
        reasons.append("queries_failed")
    load = state.load
    if load is not None:
        errors = sum(
            n for k, n in load.requests.items() if k != "ok" and k not in RATE_LIMITED_KINDS
        )
        if load.sent and errors / load.sent > state.probe.load.max_error_ratio:
            reasons.append("load_errors")
        if load.rate_limited:
            reasons.append("rate_limited")
    return ("degraded" if reasons else "success"), tuple(reasons)


def _assemble(state: _Cycle) -> CycleResult:
    """The one :class:`CycleResult` of a cycle that ran to its end."""
    probe, fixture, answers = state.probe, state.fixture, state.answers
    unranked = state.target.capabilities.unranked
    quality = _quality(fixture.queries, answers, probe.k, unranked=unranked, memo=state.memo)
    errors = Counter(a.error for a in answers if a.error is not None)
    if state.load is not None:
        errors.update({k: v for k, v in state.load.requests.items() if k != "ok"})
    all_failed = all(a.ranked is None for a in answers)
    outcome, reasons = ("failed", ()) if all_failed else _verdict(state)
    queries = tuple(
        QueryResult(
            id=q.id,
            q=q.q,
            category=q.category,
            expected_ids=q.expected_ids,
            ranked_ids=a.ranked or (),
            metrics=m or {},
            latency_s=a.latency_s,
            error=a.error,
        )
        for q, a, m in zip(fixture.queries, answers, quality.per_query, strict=True)
    )
    return CycleResult(
        probe=probe.name,
        target=probe.target.kind,
        corpus=fixture.name,
        cycle=state.cycle,
        started_at=state.started_at,
        finished_at=time.time(),
        outcome=outcome,
        phases=dict(state.phases),
        phase_wait_s=state.phase_wait_s(),
        ks=probe.k,
        info=state.info,
        seed=state.seed,
        queries=queries,
        aggregate=quality.aggregate,
        by_category=quality.by_category,
        ci=quality.ci,
        relevant_found=quality.found,
        relevant_expected=quality.expected,
        serial_latency=summarize([a.latency_s for a in answers if a.latency_s is not None]),
        load=state.load,
        errors=dict(errors),
        retries=state.retries(),
        retry_wait_s=state.retry_wait_s(),
        error_kind=next(iter(errors), None) if all_failed else None,
        error_message="every query failed" if all_failed else None,
        degraded_reasons=reasons,
        fixture_hash=fixture.content_hash,
        short_answers=dict(state.short),
        unranked=RANK_ONLY_REASON if unranked else None,
        omitted=rank_only_keys(probe.k) if unranked else (),
    )
