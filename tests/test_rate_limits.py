"""The load pass respects the store's read budget: counted server-side, over loopback.

The reference store's limiter is swapped for a counting one (its fixed
window, or a token bucket written here), so every request benchd sends is
counted where it arrives. No wall-clock margins: bounds are request counts.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.cycle import load_pass
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds import build_target
from benchd.kinds.zengram import ZengramConfig
from benchd.load import OUTCOMES, LoadProfile
from benchd.probe import ProbeRunner
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.ratelimit import RateLimiter
from benchd.refstore.server import RunningRefStore, running_refstore

pytestmark = pytest.mark.anyio
KEY = "rate-limit-test-key-7"
PASS_S = 3.0
READS_PER_MIN = 120  # the real server's default read budget


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class TokenBucket:
    """A token-bucket limiter with the refstore limiter's ``check`` interface."""

    per_min: float
    burst: float
    tokens: float = -1.0
    at: float = field(default_factory=time.monotonic)

    @property
    def limits(self) -> dict[str, float]:
        return {"read": self.per_min, "write": 0}

    def check(self, key: str, kind: str) -> int | None:
        if kind != "read":
            return None
        now = time.monotonic()
        if self.tokens < 0:
            self.tokens = self.burst
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_min / 60.0)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - self.tokens) * 60.0 / self.per_min))


@dataclass
class Counting:
    """Counts every authenticated request as it reaches the limiter, and the 429s it gives."""

    inner: RateLimiter | TokenBucket
    reads: int = 0
    limited: int = 0

    @property
    def limits(self) -> dict[str, float]:
        return dict(self.inner.limits)

    def check(self, key: str, kind: str) -> int | None:
        if kind == "read":
            self.reads += 1
        wait = self.inner.check(key, kind)
        if wait is not None:
            self.limited += 1
        return wait


@pytest.fixture
async def store() -> AsyncIterator[RunningRefStore]:
    config = RefStoreConfig(
        api_key=KEY, retriever="bm25", read_limit_per_min=0, write_limit_per_min=0
    )
    async with running_refstore(config) as running:
        yield running


def probe_for(url: str, load: LoadProfile) -> ProbeConfig:
    settings = ZengramConfig(url=url, namespace="benchd-rate", max_retries=0, verify=False)
    return ProbeConfig(
        name="rate",
        fixture=packaged_fixture("smoke"),
        target=TargetConfig("zengram", settings, Secret(KEY, "test")),
        k=(5, 10),
        timeout_s=60.0,
        load=load,
    )


def limiters() -> list[RateLimiter | TokenBucket]:
    return [RateLimiter(READS_PER_MIN, 0), TokenBucket(READS_PER_MIN, burst=2)]


@pytest.mark.parametrize("limiter", limiters(), ids=["fixed-window", "token-bucket"])
async def test_a_closed_pass_sends_at_most_twice_what_the_read_budget_admits(
    store: RunningRefStore, limiter: RateLimiter | TokenBucket
) -> None:
    counting = Counting(limiter)
    store.guard.limiter = counting  # type: ignore[assignment]
    budget_rate = READS_PER_MIN / 60.0
    load = LoadProfile(mode="closed", concurrency=4, duration_s=PASS_S, max_rate=budget_rate)
    probe = probe_for(store.url, load)
    target = build_target("zengram", probe.target.settings, probe.target.secret)
    try:
        run = await load_pass(target, probe, load_fixture(probe.fixture), load)
    finally:
        await target.aclose()
    admitted = budget_rate * PASS_S  # 120/min over 3 s: 6
    assert 1 <= counting.reads <= 2 * admitted
    assert counting.reads == len(run)  # every send reached the store, none was invented
    assert not run.rate_limited


async def test_a_closed_pass_on_a_spent_budget_stops_early_and_marks_the_cycle() -> None:
    """The budget benchd was told (6000/min) is 50x what the store gives (120/min)."""
    config = RefStoreConfig(
        api_key=KEY, retriever="bm25", read_limit_per_min=READS_PER_MIN, write_limit_per_min=0
    )
    async with running_refstore(config) as running:
        counting = Counting(running.guard.limiter)
        running.guard.limiter = counting  # type: ignore[assignment]
        load = LoadProfile(mode="closed", concurrency=4, duration_s=PASS_S)
        runner = ProbeRunner(probe_for(running.url, load), read_rate=6000 / 60.0)
        try:
            result = await runner.run_once()
        finally:
            await runner.aclose()
    assert result.load is not None
    assert result.outcome == "degraded", result.error_message
    assert "rate_limited" in result.degraded_reasons
    assert result.load.rate_limited
    # It stopped at the first 429s instead of hammering: at most one per worker.
    assert 1 <= counting.limited <= load.concurrency
    assert counting.reads <= READS_PER_MIN + load.concurrency
    assert result.load.requests.get("rate_limited", 0) == counting.limited


async def test_an_open_pass_drops_the_sends_a_pause_covers_and_restarts_after_it(
    store: RunningRefStore,
) -> None:
    """A token bucket with room for 3 requests and a 1 s Retry-After, at 10 req/s for 3 s."""
    counting = Counting(TokenBucket(60, burst=3))
    store.guard.limiter = counting  # type: ignore[assignment]
    profile = LoadProfile(
        mode="open", rate=10.0, duration_s=PASS_S, concurrency=1, max_rate_limited_ratio=1.0
    )
    probe = probe_for(store.url, profile)
    target = build_target("zengram", probe.target.settings, probe.target.secret)
    try:
        run = await load_pass(target, probe, load_fixture(probe.fixture), profile)
    finally:
        await target.aclose()
    scheduled = math.floor(PASS_S * 10.0)
    assert counting.limited >= 1 and run.paused_s >= 1.0
    assert len(run) + run.dropped == scheduled  # every slot was sent or dropped
    assert run.dropped >= 9 * (counting.limited - 1)  # a 1 s pause covers ~10 sends
    assert run.rate_limited  # the last pause outlasts the pass
    # The schedule restarts when a pause ends: every request sent after a 429 was
    # scheduled no earlier than that 429's answer plus its Retry-After (1 s), so
    # corrected latency never includes the pause.
    limited_at = [run.end[i] for i, c in enumerate(run.outcome) if OUTCOMES[c] != "ok"]
    for i in range(len(run)):
        before = [end for end in limited_at if end < run.start[i]]
        if before:
            assert run.scheduled[i] >= max(before) + 1.0 - 0.001
        assert run.scheduled[i] <= run.start[i]
