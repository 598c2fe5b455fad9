"""The load pass respects the store's read budget: counted server-side, over loopback.

The reference store's limiter is swapped for a counting one (its fixed
window, or a token bucket written here), so every request benchd sends is
counted where it arrives. No wall-clock margins: bounds are request counts.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import anyio
import anyio.lowlevel
import pytest

from benchd import load as load_module
from benchd.config.load import ProbeConfig, TargetConfig
from benchd.config.secrets import Secret
from benchd.cycle import load_pass
from benchd.errors import TargetRateLimited
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.kinds import build_target
from benchd.kinds.zengram import ZengramConfig
from benchd.load import OUTCOMES, LoadProfile
from benchd.probe import ProbeRunner
from benchd.refstore.config import RefStoreConfig
from benchd.refstore.ratelimit import RateLimiter
from benchd.refstore.server import RunningRefStore, running_refstore
from benchd.refstore.testing import running_refstore_fixture

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
    clock: Callable[[], float] = time.monotonic
    tokens: float = -1.0
    at: float = -1.0

    @property
    def limits(self) -> dict[str, float]:
        return {"read": self.per_min, "write": 0}

    def check(self, key: str, kind: str) -> int | None:
        if kind != "read":
            return None
        now = self.clock()
        if self.tokens < 0:
            self.tokens, self.at = self.burst, now
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


class PassClock:
    """The load pass's clock, moved only by its dispatcher's waits for the next send.

    A request takes no time on it: with ``settle``, a wait first lets every send in
    flight be answered (a 429's pause taken; it holds the pass's in-flight slots till
    then), then the clock jumps to the wait's deadline. The token bucket reads it too,
    so the pass meets the same budget at the same instants however loaded the machine is.
    """

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, concurrency: int = 1, settle: bool = True
    ) -> None:
        self.now = 1000.0
        self.concurrency, self.settle = concurrency, settle
        self.slots: anyio.Semaphore | None = None
        acquire = load_module._acquire_before

        async def noted(slots: anyio.Semaphore, deadline: float) -> bool:
            self.slots = slots
            return await acquire(slots, deadline)

        clock = SimpleNamespace(perf_counter=self.perf_counter, monotonic=time.monotonic)
        monkeypatch.setattr(load_module, "time", clock)
        monkeypatch.setattr(load_module, "sleep_until", self.sleep_until)
        monkeypatch.setattr(load_module, "_acquire_before", noted)

    def perf_counter(self) -> float:
        return self.now

    async def sleep_until(self, deadline: float, limiter: object = None) -> None:
        if self.settle and self.slots is not None:
            for _ in range(self.concurrency):
                await self.slots.acquire()
            for _ in range(self.concurrency):
                self.slots.release()
        self.now = max(self.now, deadline)
        await anyio.lowlevel.checkpoint()


store = running_refstore_fixture(api_key=KEY, retriever="bm25")


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
    store: RunningRefStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token bucket with room for 3 requests and a 1 s Retry-After, at 10 req/s for 3 s.

    The pass and the bucket share a :class:`PassClock`: sends at 0, 0.1, 0.2 s pass, 0.3 s
    is refused until 1.3 s, 1.3 s passes, 1.4 s is refused until 2.4 s, 2.4 s passes and
    2.5 s is refused past the pass's end.
    """
    clock = PassClock(monkeypatch, concurrency=1)
    counting = Counting(TokenBucket(60, burst=3, clock=clock.perf_counter))
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
    sent = zip(run.scheduled, run.outcome, strict=True)
    timeline = [(round(at - run.scheduled[0], 9), OUTCOMES[c]) for at, c in sent]
    assert timeline == [
        (0.0, "ok"), (0.1, "ok"), (0.2, "ok"), (0.3, "rate_limited"),
        (1.3, "ok"), (1.4, "rate_limited"), (2.4, "ok"), (2.5, "rate_limited"),
    ]  # fmt: skip
    # The schedule restarts when a pause ends: every request sent after a 429 was
    # scheduled no earlier than that 429's answer plus its Retry-After (1 s), so
    # corrected latency never includes the pause.
    limited_at = [run.end[i] for i, c in enumerate(run.outcome) if OUTCOMES[c] != "ok"]
    for i in range(len(run)):
        before = [end for end in limited_at if end < run.start[i]]
        if before:
            assert run.scheduled[i] >= max(before) + 1.0
        assert run.scheduled[i] <= run.start[i]


async def test_a_429_answered_while_the_next_send_waits_for_a_slot_holds_that_send_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Send 1 is answered 429 (Retry-After 1 s) once send 2, due, waits for its slot."""
    PassClock(monkeypatch, settle=False)
    waiting = anyio.Event()
    acquire = load_module._acquire_before

    async def blocked(slots: anyio.Semaphore, deadline: float) -> bool:
        if slots.value == 0:
            waiting.set()
        return await acquire(slots, deadline)

    monkeypatch.setattr(load_module, "_acquire_before", blocked)

    async def fire(query: int) -> list[str]:
        if query == 1:
            await waiting.wait()
            raise TargetRateLimited("429 from the test", retry_after_s=1.0)
        return ["m1"]

    profile = LoadProfile(
        mode="open", rate=10.0, duration_s=PASS_S, concurrency=1, max_rate_limited_ratio=1.0
    )
    run = await load_module.run_load(fire, 100, profile)
    [limited] = [i for i, c in enumerate(run.outcome) if OUTCOMES[c] != "ok"]
    held = [s for s in run.scheduled if run.scheduled[limited] < s < run.end[limited] + 1.0]
    assert held == []  # send 2 (and all due in the pause) dropped, not sent in the pause
    assert len(run) + run.dropped == math.floor(PASS_S * 10.0)
    assert min(s for s in run.scheduled if s > run.scheduled[limited]) == run.end[limited] + 1.0
