"""One probe cycle: info → seed (+verify) → serial pass → load pass → score → cleanup.

``run_cycle`` never raises for a store failure: it returns a frozen
:class:`~benchd.result.CycleResult` whose ``outcome``/``error_kind`` say what
went wrong, so one failing probe never stops another and every failure can
be counted. Scoring is delegated to the pure functions in
:mod:`benchd.scoring`.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import httpx

from benchd.config.load import ProbeConfig
from benchd.errors import TargetAuthError, TargetError, TargetUnreachable
from benchd.fixtures.model import Fixture, LabeledQuery
from benchd.load import LoadRun, run_load
from benchd.result import CycleResult, LoadResult, QueryResult, SeedReport, TargetInfo
from benchd.scoring.aggregate import by_category, mean_metrics
from benchd.scoring.latency import summarize
from benchd.scoring.ranking import query_metrics, relevant_in_top
from benchd.scoring.stats import bootstrap_cis
from benchd.targets.base import CountsRetries, HttpSearch, Progress, SearchQuery, Target
from benchd.targets.client import DEFAULT_MAX_RESPONSE_BYTES
from benchd.targets.transport import make_http_fire

__all__ = ["CycleFailure", "make_fire", "run_cycle", "score_queries"]

# A whole cycle stops on these: every further request would fail the same way.
_FATAL = (TargetAuthError, TargetUnreachable)


@dataclass(slots=True)
class CycleFailure(Exception):
    """Raised inside a cycle to stop it; carries the phase that failed."""

    phase: str
    error: TargetError


@dataclass(slots=True)
class _Clock:
    phases: dict[str, float] = field(default_factory=dict)

    def timed(self, phase: str, started: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + time.perf_counter() - started


def _search_query(query: LabeledQuery, probe: ProbeConfig, fixture: Fixture) -> SearchQuery:
    return SearchQuery(
        q=query.q,
        limit=probe.max_k,
        reference_date=query.reference_date or fixture.reference_date,
    )


def score_queries(
    queries: Sequence[LabeledQuery], ranked: Sequence[tuple[str, ...] | None], ks: Sequence[int]
) -> list[dict[str, float] | None]:
    """Per-query metrics; ``None`` where the query got no answer (an error)."""
    return [
        None if r is None else query_metrics(r, q.relevance, ks)
        for q, r in zip(queries, ranked, strict=True)
    ]


async def _serial_pass(
    target: Target, probe: ProbeConfig, fixture: Fixture
) -> list[tuple[tuple[str, ...] | None, float | None, str | None]]:
    """One request at a time, in fixture order: the exact ranking baseline."""
    answers: list[tuple[tuple[str, ...] | None, float | None, str | None]] = []
    for query in fixture.queries:
        started = time.perf_counter()
        try:
            ranked = await target.search(_search_query(query, probe, fixture))
        except _FATAL as exc:
            raise CycleFailure("serial", exc) from None
        except TargetError as exc:
            answers.append((None, None, exc.kind))
            continue
        answers.append((ranked, time.perf_counter() - started, None))
    return answers


def make_fire(target: Target, probe: ProbeConfig, fixture: Fixture) -> Callable[[int], Any]:
    """The load engine's ``fire(i)``: search the i-th labeled query (cycled)."""
    queries = [_search_query(q, probe, fixture) for q in fixture.queries]

    async def fire(i: int) -> tuple[str, ...]:
        return await target.search(queries[i % len(queries)])

    return fire


def _quality(
    queries: Sequence[LabeledQuery], metrics: Sequence[dict[str, float] | None], ks: Sequence[int]
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, tuple[float, float]]]:
    scored = [(q, m) for q, m in zip(queries, metrics, strict=True) if m is not None]
    if not scored:
        return {}, {}, {}
    values = [m for _, m in scored]
    aggregate = mean_metrics(values)
    categories = by_category([(q.category, m) for q, m in scored])
    ci = bootstrap_cis({key: [m[key] for m in values] for key in aggregate})
    return aggregate, categories, ci


def _found(
    queries: Sequence[LabeledQuery], ranked: Sequence[tuple[str, ...] | None], ks: Sequence[int]
) -> tuple[dict[int, int], int]:
    found = {k: 0 for k in ks}
    expected = 0
    for q, r in zip(queries, ranked, strict=True):
        if r is None:
            continue
        expected += len(q.expected_ids)
        for k in ks:
            found[k] += relevant_in_top(r, q.relevance, k)
    return found, expected


async def _load_run(target: Target, probe: ProbeConfig, fixture: Fixture) -> LoadRun:
    """Run the load pass, over the engine's own pool when the target is sans-I/O HTTP."""
    n = len(fixture.queries)
    if not isinstance(target, HttpSearch):
        return await run_load(make_fire(target, probe, fixture), n, probe.load)
    queries = [_search_query(q, probe, fixture) for q in fixture.queries]
    http: HttpSearch = target

    def build(i: int) -> httpx.Request:
        return http.build_search_request(queries[i % n])

    def parse(i: int, status: int, headers: Mapping[str, str], body: bytes) -> tuple[str, ...]:
        return http.parse_search_response(status, headers, body)

    cap = getattr(probe.target.settings, "max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)
    async with make_http_fire(
        build,
        parse,
        concurrency=probe.load.concurrency,
        timeout_s=probe.load.request_timeout_s,
        max_response_bytes=cap,
    ) as fire:
        return await run_load(fire, n, probe.load)


async def _load_pass(target: Target, probe: ProbeConfig, fixture: Fixture) -> LoadResult:
    run = await _load_run(target, probe, fixture)
    per_request = [
        query_metrics(ids, fixture.queries[i % len(fixture.queries)].relevance, probe.k)
        for i, ids in run.answers()
    ]
    return run.to_result(aggregate=mean_metrics(per_request) if per_request else {})


@dataclass(slots=True)
class _Cycle:
    probe: ProbeConfig
    fixture: Fixture
    target: Target
    progress: Progress | None
    clock: _Clock = field(default_factory=_Clock)
    info: TargetInfo | None = None
    seed: SeedReport | None = None

    async def phase(self, name: str, work: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return await work()
        except TargetError as exc:
            raise CycleFailure(name, exc) from None
        finally:
            self.clock.timed(name, started)


async def run_cycle(
    probe: ProbeConfig,
    fixture: Fixture,
    target: Target,
    *,
    cycle: int = 1,
    progress: Progress | None = None,
) -> CycleResult:
    """Run one cycle of ``probe`` against ``target``; never raises for store failures."""
    started_at = time.time()
    state = _Cycle(probe, fixture, target, progress)
    base: dict[str, Any] = dict(
        probe=probe.name,
        target=probe.target.kind,
        corpus=fixture.name,
        cycle=cycle,
        started_at=started_at,
        ks=probe.k,
        fixture_hash=fixture.content_hash,
    )
    try:
        return await _run(state, base)
    except CycleFailure as failure:
        return CycleResult(
            **base,
            finished_at=time.time(),
            outcome="failed",
            phases=dict(state.clock.phases),
            info=state.info,
            seed=state.seed,
            errors={failure.error.kind: 1},
            error_kind=failure.error.kind,
            error_message=f"{failure.phase}: {failure.error}",
        )


async def _run(state: _Cycle, base: Mapping[str, Any]) -> CycleResult:
    probe, fixture, target = state.probe, state.fixture, state.target
    state.info = await state.phase("info", target.info)
    state.seed = await state.phase(
        "seed", lambda: target.seed(fixture.memories, progress=state.progress)
    )
    retried_before = _retries(target)
    started = time.perf_counter()
    answers = await _serial_pass(target, probe, fixture)
    state.clock.timed("serial", started)
    load = None
    if probe.load.mode != "serial":
        load = await state.phase("load", lambda: _load_pass(target, probe, fixture))
    if getattr(probe.target.settings, "cleanup", "never") == "after":
        ids = [str(m["id"]) for m in fixture.memories]
        await state.phase("cleanup", lambda: target.cleanup(ids))
    # Scoring and bootstrap are pure CPU work: off the loop, so other probes'
    # request timings are not stalled by this one's arithmetic.
    retried = _retries(target) - retried_before
    result = await anyio.to_thread.run_sync(_assemble, state, base, answers, load)
    return dataclasses.replace(result, retries=retried)


def _retries(target: Target) -> int:
    """Requests the target has retried so far (0 for targets that do not retry)."""
    return target.retries if isinstance(target, CountsRetries) else 0


def _assemble(
    state: _Cycle,
    base: Mapping[str, Any],
    answers: Sequence[tuple[tuple[str, ...] | None, float | None, str | None]],
    load: LoadResult | None,
) -> CycleResult:
    probe, fixture = state.probe, state.fixture
    ranked = [a[0] for a in answers]
    metrics = score_queries(fixture.queries, ranked, probe.k)
    aggregate, categories, ci = _quality(fixture.queries, metrics, probe.k)
    found, expected = _found(fixture.queries, ranked, probe.k)
    errors = Counter(a[2] for a in answers if a[2] is not None)
    if load is not None:
        errors.update({k: v for k, v in load.requests.items() if k != "ok"})
    queries = tuple(
        QueryResult(
            id=q.id,
            q=q.q,
            category=q.category,
            expected_ids=q.expected_ids,
            ranked_ids=r or (),
            metrics=m or {},
            latency_s=a[1],
            error=a[2],
        )
        for q, r, m, a in zip(fixture.queries, ranked, metrics, answers, strict=True)
    )
    all_failed = all(r is None for r in ranked)
    return CycleResult(
        **base,
        finished_at=time.time(),
        outcome="failed" if all_failed else "success",
        phases=dict(state.clock.phases),
        info=state.info,
        seed=state.seed,
        queries=queries,
        aggregate=aggregate,
        by_category=categories,
        ci=ci,
        relevant_found=found,
        relevant_expected=expected,
        serial_latency=summarize([a[1] for a in answers if a[1] is not None]),
        load=load,
        errors=dict(errors),
        error_kind=next(iter(errors), None) if all_failed else None,
        error_message="every query failed" if all_failed else None,
    )
