"""Waits on a store's 429s are reported as the wall time actually spent (DESIGN §4, #20 item 4).

Concurrent waits overlap and count once; a wait counts as it passes, never
when its 429 arrives, so a pause the pass never sat out counts nothing. Each
phase of a cycle reports its own (``phase_wait_s``, #36 item 5).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
from loopback_target import LoopbackTarget, httpx_fire, serve_target
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from benchd.config.budget import BudgetSettings
from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.errors import TargetError
from benchd.fixtures.model import packaged_fixture
from benchd.hooks import WaitClock, covered_s, waits_reported_to
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.load import LoadProfile, run_load
from benchd.probe import ProbeRunner
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.server import running_refstore
from benchd.result import CycleResult
from benchd.surfacers.book import ResultBook
from benchd.surfacers.prometheus import build_registry
from benchd.surfacers.status import result_to_json

pytestmark = pytest.mark.anyio
KEY = "test-key-waits-0123456789"


@pytest.fixture
async def target() -> AsyncIterator[LoopbackTarget]:
    async with serve_target(LoopbackTarget()) as served:
        yield served


def _ignore(seconds: float, reason: str) -> None:
    """A progress listener that shows nothing."""


def test_the_wait_clock_counts_overlapping_windows_once_and_only_what_has_passed() -> None:
    clock = WaitClock()
    for _ in range(4):  # four requests waiting the same 30 s
        clock.open(100.0, 130.0)
    late = clock.open(140.0, 200.0)  # a pause announced for 60 s ...
    assert clock.total(now=110.0) == 10.0  # ... nothing of it yet, 10 s of the four
    assert clock.total(now=150.0) == 40.0
    WaitClock.cut(late, 145.0)  # ... that ended after 5 s
    assert clock.total(now=500.0) == 35.0


async def test_a_load_pass_stopped_early_reports_the_pause_it_actually_took(
    target: LoopbackTarget,
) -> None:
    """A 30 s Retry-After outlasts a 1 s pass: it stops, having paused only until then."""
    target.statuses = {0: 429}
    target.retry_after = b"30"
    profile = LoadProfile(mode="closed", concurrency=1, duration_s=1.0, max_rate_limited_ratio=1.0)
    clock = WaitClock()
    started = time.monotonic()
    with waits_reported_to(_ignore, clock):
        async with httpx.AsyncClient(base_url=target.base_url) as client:
            run = await run_load(httpx_fire(client), 2, profile)
    elapsed = time.monotonic() - started
    assert run.rate_limited
    assert 0.0 <= run.paused_s <= elapsed  # was 30.0: the whole Retry-After, on arrival
    assert clock.total() <= elapsed


async def test_concurrent_retries_on_429_count_their_wall_time_once() -> None:
    """Four imports at a time against a spent write budget: their waits overlap."""
    config = RefStoreConfig(api_key=KEY, read_limit_per_min=0, write_limit_per_min=1)
    async with running_refstore(config) as store:
        t = ZengramTarget(
            ZengramConfig(
                url=store.url,
                seed_batch=1,
                seed_concurrency=4,
                max_retries=2,
                max_retry_after_s=0.2,
                verify=False,
                searchable_timeout_s=0.0,
            ),
            Secret(KEY, "test"),
        )
        clock = WaitClock()
        memories = [{"id": f"m{i}", "content": f"note {i}"} for i in range(8)]
        started = time.monotonic()
        try:
            with waits_reported_to(_ignore, clock), anyio.fail_after(60):
                await t.seed(memories)
        except TargetError:
            pass  # the budget stays spent: the seed gives up, which is not the point here
        finally:
            elapsed = time.monotonic() - started
            await t.aclose()
    assert t.retries >= 1
    assert 0.0 < clock.total() <= elapsed  # summed per request, they came to more


def test_the_union_of_spans_counts_a_shared_moment_once() -> None:
    assert covered_s([]) == 0.0
    assert covered_s([(0.0, 10.0), (5.0, 15.0), (20.0, 25.0)]) == 20.0
    assert covered_s([(0.0, 10.0), (2.0, 3.0)]) == 10.0  # one inside another
    assert covered_s([(0.0, 30.0)] * 4) == 30.0  # four requests waiting the same 30 s
    assert covered_s([(3.0, 4.0), (0.0, 1.0), (1.0, 2.0)]) == 3.0  # any order; touching


def test_each_phase_counts_its_own_waits_and_only_while_it_ran() -> None:
    clock = WaitClock()
    clock.enter("seed", at=0.0)
    clock.open(1.0, 5.0)
    clock.open(2.0, 6.0)  # overlaps the first: [1, 6] is 5 s
    clock.open(8.0, 30.0)  # outlasts the seed: counts until the seed ended
    clock.leave(at=10.0)
    clock.open(10.5, 11.0)  # between phases (scoring): no phase's
    clock.enter("load", at=11.0)
    paused = clock.open(12.0, 40.0)
    WaitClock.cut(paused, 15.0)
    clock.open(14.0, 16.0)
    clock.leave(at=20.0)
    clock.enter("cleanup", at=20.0)
    clock.leave(at=21.0)
    assert clock.by_phase(now=100.0) == {"seed": 7.0, "load": 4.0, "cleanup": 0.0}
    assert clock.by_phase(now=13.0) == {"seed": 7.0, "load": 1.0, "cleanup": 0.0}


def _rate_limited_probe(url: str) -> ProbeConfig:
    settings = ZengramConfig(
        url=url,
        seed_batch=2,  # 18 imports, 4 at a time: their waits overlap
        seed_concurrency=4,
        max_retries=12,  # 0.3 ** 13: no request runs out of retries
        cleanup="after",
    )
    return ProbeConfig(
        name="waits",
        fixture=packaged_fixture("smoke"),
        target=TargetConfig("zengram", settings, Secret(KEY, "test")),
        k=(5, 10),
        timeout_s=300.0,
        load=LoadProfile(mode="closed", concurrency=4, requests=24, max_rate_limited_ratio=1.0),
        budget=BudgetSettings(unlimited=True),  # no pacing: only the store's 429s wait
    )


def _wait_gauges(result: CycleResult) -> dict[str, float]:
    book = ResultBook()
    book.record(result)
    text = generate_latest(build_registry(book)).decode()
    return {
        s.labels["phase"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "benchd_cycle_wait_seconds" and s.labels["probe"] == "waits"
    }


async def test_a_rate_limited_cycle_reports_each_phases_wall_wait() -> None:
    """30% of every request answer 429 with Retry-After: 1; requests go 4 at a time.

    Per phase, the wall time waited is at most the phase's own time and at
    most the per-request sum it covers; it is positive where requests waited.
    ``1e-9``: the two figures are the same float sums taken two ways.
    """
    config = RefStoreConfig(
        api_key=KEY,
        retriever="bm25",
        read_limit_per_min=0,
        write_limit_per_min=0,
        faults=("rate_limit=0.3", "seed=7"),
    )
    async with running_refstore(config) as store:
        runner = ProbeRunner(_rate_limited_probe(store.url))
        try:
            result = await runner.run_once()
            summed = runner.target.retry_wait_s  # every request's own wait, seed included
        finally:
            await runner.aclose()
    assert result.outcome in ("success", "degraded"), result.error_message
    waits = result.phase_wait_s
    assert set(waits) == set(result.phases) == {"info", "seed", "serial", "load", "cleanup"}
    for phase, waited in waits.items():
        assert 0.0 <= waited <= result.phases[phase], phase
    before = summed - result.retry_wait_s  # result.retry_wait_s counts from the seed's end
    assert result.seed is not None and result.seed.retries > 0  # the dice did say 429
    assert waits["seed"] > 0.0
    assert waits["info"] + waits["seed"] <= before + 1e-9
    assert waits["serial"] + waits["cleanup"] <= result.retry_wait_s + 1e-9
    assert (waits["serial"] + waits["cleanup"] > 0) == (result.retry_wait_s > 0)
    assert result.load is not None
    assert (waits["load"] > 0) == (result.load.paused_s > 0)  # its pauses are not retries
    assert sum(waits.values()) <= result.duration_s
    assert result_to_json(result)["phase_wait_s"] == dict(waits)
    assert _wait_gauges(result) == pytest.approx(dict(waits))


async def test_a_timed_out_phase_reports_the_wait_it_was_cut_in() -> None:
    """Every search answers 429 (Retry-After: 1): the serial pass sleeps until the timeout."""
    config = RefStoreConfig(
        api_key=KEY,
        retriever="bm25",
        read_limit_per_min=0,
        write_limit_per_min=0,
        faults=("rate_limit=1.0@search",),
    )
    async with running_refstore(config) as store:
        settings = ZengramConfig(
            url=store.url, max_retries=10, verify=False, searchable_timeout_s=0.0
        )
        probe = ProbeConfig(
            name="waits",
            fixture=packaged_fixture("smoke"),
            target=TargetConfig("zengram", settings, Secret(KEY, "test")),
            k=(5, 10),
            timeout_s=2.5,
            budget=BudgetSettings(unlimited=True),
        )
        runner = ProbeRunner(probe)
        try:
            result = await runner.run_once()
        finally:
            await runner.aclose()
    assert result.outcome == "timeout"
    assert "still in phase 'serial'" in (result.error_message or "")
    assert 1.0 <= result.phase_wait_s["serial"] <= result.phases["serial"]
    assert result.phase_wait_s["seed"] == 0.0
