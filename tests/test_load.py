"""The load engine against a real keep-alive HTTP server on loopback."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest
from loopback_target import LoopbackTarget, httpx_fire, serve_target

import benchd.load as load_module
from benchd.errors import ConfigError, TargetHTTPError
from benchd.load import OUTCOMES, LoadProfile, LoadRun, run_load, sleep_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def target() -> AsyncIterator[LoopbackTarget]:
    async with serve_target(LoopbackTarget()) as served:
        yield served


async def _run(target: LoopbackTarget, n_queries: int, profile: LoadProfile) -> LoadRun:
    limits = httpx.Limits(max_connections=profile.concurrency)
    async with httpx.AsyncClient(base_url=target.base_url, limits=limits) as client:
        return await run_load(httpx_fire(client), n_queries, profile)


def _max_in_flight(run: LoadRun) -> int:
    events = sorted([(s, 1) for s in run.start] + [(e, -1) for e in run.end])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


async def test_serial_sends_one_pass_of_the_queries_one_at_a_time(
    target: LoopbackTarget,
) -> None:
    run = await _run(target, 5, LoadProfile(mode="serial"))
    assert list(run.query) == [0, 1, 2, 3, 4]
    assert [ids for _, ids in run.answers()] == [(f"doc-{i}",) for i in range(5)]
    assert all(run.start[i + 1] >= run.end[i] for i in range(4))
    assert run.to_result().corrected is None


async def test_serial_with_a_request_count_cycles_through_the_queries(
    target: LoopbackTarget,
) -> None:
    run = await _run(target, 3, LoadProfile(mode="serial", requests=7))
    assert list(run.query) == [0, 1, 2, 0, 1, 2, 0]


async def test_closed_loop_sends_exactly_the_requested_count_with_bounded_concurrency(
    target: LoopbackTarget,
) -> None:
    target.delay_s = 0.005
    run = await _run(target, 4, LoadProfile(mode="closed", concurrency=3, requests=30))
    assert len(run) == 30
    assert sorted(run.query) == sorted(i % 4 for i in range(30))
    assert _max_in_flight(run) == 3
    assert run.counts() == {"ok": 30}


async def test_closed_loop_for_a_duration_stops_sending_when_it_ends(
    target: LoopbackTarget,
) -> None:
    target.delay_s = 0.01
    run = await _run(target, 4, LoadProfile(mode="closed", concurrency=2, duration_s=0.3))
    assert max(run.start) < 0.3  # nothing is sent once the duration is over
    assert run.elapsed_s >= 0.3  # the last answers land after the end
    assert len(run) >= 2  # both workers sent (how many: bench/load_throughput.py)
    assert run.achieved_rate == pytest.approx(len(run) / run.elapsed_s)


async def test_open_loop_sends_at_the_rate_on_schedule(target: LoopbackTarget) -> None:
    # a tolerance no busy CI box can exceed: lateness itself is the next test's subject,
    # dispatch precision is bench/load_accuracy.py's.
    profile = LoadProfile(
        mode="open", rate=200.0, duration_s=0.5, concurrency=32, late_tolerance_s=30.0
    )
    run = await _run(target, 3, profile)
    # every one of the 100 slots is sent or, if a busy box let the pass end
    # first, counted dropped; how many are sent on time is bench/load_accuracy.py's.
    assert len(run) + run.dropped == 100
    assert len(run) > 0
    gaps = {round(b - a, 6) for a, b in zip(run.scheduled, run.scheduled[1:], strict=False)}
    assert 0.005 in gaps  # slots 5 ms apart; a dropped slot leaves a multiple of it
    assert all(g > 0 and abs(g / 0.005 - round(g / 0.005)) < 1e-3 for g in gaps)
    assert all(lag >= 0 for lag in run.dispatch_lags())  # never sent before its slot
    result = run.to_result()
    assert result.late == 0 and result.dropped == run.dropped
    assert result.target_rate == 200.0
    assert result.corrected is not None and result.corrected.count == len(run)


async def test_open_loop_counts_late_and_dropped_requests_when_the_cap_is_saturated(
    target: LoopbackTarget,
) -> None:
    target.delay_s = 0.05  # one slot, 50 ms each: ~10 of 50 arrivals can be sent
    profile = LoadProfile(mode="open", rate=100.0, duration_s=0.5, concurrency=1)
    run = await _run(target, 3, profile)
    sent_late = sum(1 for lag in run.dispatch_lags() if lag > profile.late_tolerance_s)
    assert len(run) + run.dropped == 50
    assert 3 <= len(run) <= 12
    assert run.late == sent_late >= len(run) - 1  # only the first is on time
    assert run.to_result().dropped == run.dropped


async def test_errors_are_classified_and_kept_out_of_latency(target: LoopbackTarget) -> None:
    target.statuses = {1: 503, 2: 429, 3: 404}
    target.garbage = {4}
    target.retry_after = b"0"  # a 429 pauses the pass for its Retry-After: none here
    run = await _run(target, 6, LoadProfile(mode="serial"))
    assert run.counts() == {"ok": 2, "http_5xx": 1, "rate_limited": 1, "http_4xx": 1, "decode": 1}
    assert [OUTCOMES[c] for c in run.outcome][1:5] == [
        "http_5xx",
        "rate_limited",
        "http_4xx",
        "decode",
    ]
    result = run.to_result()
    assert result.service.count == len(result.service_samples) == 2
    assert result.requests == run.counts()


async def test_a_request_past_its_timeout_is_cancelled_and_counted_as_timeout(
    target: LoopbackTarget,
) -> None:
    target.hang = {1}
    # request 1 never gets an answer: only its 0.2 s timeout can end it (60 s guard)
    with anyio.fail_after(60):
        run = await _run(target, 3, LoadProfile(mode="serial", request_timeout_s=0.2))
    assert [OUTCOMES[c] for c in run.outcome] == ["ok", "timeout", "ok"]
    assert run.end[1] - run.start[1] >= 0.15
    assert len(run.service_samples()) == 2


async def test_closed_loop_workers_keep_going_after_a_timeout(target: LoopbackTarget) -> None:
    target.hang = {1}
    profile = LoadProfile(mode="closed", concurrency=2, requests=10, request_timeout_s=0.2)
    run = await _run(target, 4, profile)
    assert len(run) == 10
    assert run.counts() == {"ok": 7, "timeout": 3}  # query 1 is asked at requests 1, 5, 9
    assert {run.query[i] for i, c in enumerate(run.outcome) if OUTCOMES[c] == "timeout"} == {1}


async def test_closed_loop_workers_time_their_requests_with_a_timer_each_not_one_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Moving a deadline per request schedules one timer and cancels another, per request."""
    loop = asyncio.get_running_loop()
    armed: list[object] = []
    schedule = loop.call_at

    def counting(when: float, callback: Callable[..., object], *args: object) -> object:
        armed.append(callback)
        return schedule(when, callback, *args)

    monkeypatch.setattr(loop, "call_at", counting)

    async def instant(query: int) -> tuple[str, ...]:
        await anyio.sleep(0)
        return (f"doc-{query}",)

    profile = LoadProfile(mode="closed", concurrency=4, requests=400, request_timeout_s=30)
    run = await run_load(instant, 3, profile)
    assert run.counts() == {"ok": 400}
    assert len(armed) <= 4


async def test_a_paced_wait_longer_than_the_timeout_times_out_no_request() -> None:
    """Waiting for a turn (max_rate) is not part of any request's timeout."""

    async def instant(query: int) -> tuple[str, ...]:
        await anyio.sleep(0)
        return (f"doc-{query}",)

    profile = LoadProfile(
        mode="closed", concurrency=1, requests=3, max_rate=5.0, request_timeout_s=0.05
    )
    run = await run_load(instant, 3, profile)
    assert run.counts() == {"ok": 3}
    assert run.start[2] - run.start[0] > 2 * profile.request_timeout_s  # it did wait (0.2 s each)


async def test_an_unreachable_target_is_counted_as_connect_errors() -> None:
    async with serve_target(LoopbackTarget()) as gone:
        port = gone.port
    dead = LoopbackTarget(port=port)
    run = await _run(dead, 2, LoadProfile(mode="serial"))
    assert run.counts() == {"connect": 2}
    assert run.to_result().service.count == 0


async def test_warmup_requests_are_sent_but_not_recorded(target: LoopbackTarget) -> None:
    profile = LoadProfile(mode="open", rate=100.0, duration_s=0.2, warmup_s=0.1)
    run = await _run(target, 2, profile)
    # 10 warmup slots then 20 measured ones; a busy box may drop some (counted
    # for the measured ones only), never record a warmup send.
    assert 0 < run.warmup_requests <= 10
    assert len(run) + run.dropped == 20
    assert min(run.scheduled) >= 0.0
    assert target.served == run.warmup_requests + len(run)


async def test_corrected_latency_shows_a_stall_that_service_latency_hides(
    target: LoopbackTarget,
) -> None:
    """Coordinated omission: 0.5 s stall, 4 in flight, 200 req/s for 3 s."""
    stall = 0.5
    target.stall_from = time.perf_counter() + 1.0
    target.stall_until = target.stall_from + stall
    profile = LoadProfile(mode="open", rate=200.0, duration_s=3.0, concurrency=4)
    result = (await _run(target, 5, profile)).to_result()
    assert result.corrected is not None
    assert result.corrected.p99 >= 0.8 * stall
    assert result.service.max >= 0.8 * stall  # the requests caught in the stall
    # ~100 sends were due during the stall but only 4 were in flight: the rest
    # waited unsent, so their service time hides the stall and only the
    # corrected latency shows it.
    hidden = sum(c >= 0.8 * stall for c in result.corrected_samples)
    shown = sum(s >= 0.8 * stall for s in result.service_samples)
    assert hidden > shown + 10
    assert result.late > 0.1 * 200 * stall


async def test_sleep_until_never_returns_before_its_deadline() -> None:
    for gap in (0.0, 0.0002, 0.0015, 0.004):
        deadline = time.perf_counter() + gap
        await sleep_until(deadline)
        assert time.perf_counter() >= deadline


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("concurrency", 0),
        ("rate", 0.0),
        ("rate", float("nan")),
        ("duration_s", -1.0),
        ("duration_s", float("inf")),
        ("requests", 0),
    ],
)
def test_an_out_of_range_profile_is_a_config_error_naming_the_field(
    field: str, value: float
) -> None:
    with pytest.raises(ConfigError, match=f"load.{field}"):
        LoadProfile(**{field: value})  # type: ignore[arg-type]


class LoadClock:
    """benchd.load's clock in the test's hands: every read moves it one tick on, so reads
    are ordered as they happened, and a worker's wait (``anyio.sleep``) moves it to the
    wait's end at once. Its times are dyadic, so a pause's sums are exact."""

    TICK = 2.0**-20

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1024.0
        clock = SimpleNamespace(perf_counter=self.perf_counter, monotonic=time.monotonic)
        monkeypatch.setattr(load_module, "time", clock)
        monkeypatch.setattr(load_module, "anyio", _AnyioWith(self.sleep))

    def perf_counter(self) -> float:
        self.now += self.TICK
        return self.now

    async def sleep(self, delay: float) -> None:
        self.now += max(0.0, delay)
        await anyio.lowlevel.checkpoint()


class _AnyioWith:
    """anyio as benchd.load sees it, with its own ``sleep``."""

    def __init__(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        self.sleep = sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(anyio, name)


async def test_a_429_pauses_every_closed_loop_worker_for_its_retry_after(
    target: LoopbackTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    target.statuses = {1: 429}
    target.retry_after = b"0.25"
    clock = LoadClock(monkeypatch)
    sent: list[float] = []  # the pass's clock as each request reached fire
    raised: list[float] = []  # and as each 429 left it, before the gate read the clock
    profile = LoadProfile(mode="closed", concurrency=2, requests=8)
    async with httpx.AsyncClient(base_url=target.base_url) as client:
        fire = httpx_fire(client)

        async def noting(query: int) -> tuple[str, ...]:
            sent.append(clock.perf_counter())
            try:
                return await fire(query)
            except TargetHTTPError as exc:
                if exc.status == 429:
                    raised.append(clock.perf_counter())
                raise

        run = await run_load(noting, 4, profile)
    limited = [i for i, c in enumerate(run.outcome) if OUTCOMES[c] != "ok"]
    assert len(limited) == len(raised) == 2 and not run.rate_limited  # under the share bound
    assert len(sent) == len(run) == 8
    for answered in raised:
        # nothing was sent between a 429's answer and the end of its Retry-After
        assert not [t for t in sent if answered < t < answered + 0.25]
    assert run.paused_s == 0.25 * len(raised)
    assert max(sent) > max(raised) + 0.25  # and sending went on after each pause


async def test_a_429_without_retry_after_stops_the_pass_marked_rate_limited(
    target: LoopbackTarget,
) -> None:
    target.statuses = {2: 429}
    target.retry_after = None  # the real store's lockout answer
    run = await _run(target, 4, LoadProfile(mode="closed", concurrency=1, requests=20))
    assert run.rate_limited
    assert OUTCOMES[run.outcome[-1]] != "ok" and len(run) == 3  # q0, q1, then q2's 429


async def test_a_turn_due_between_two_clock_reads_is_sent_not_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The clock moves between "is my turn in the future?" and "sleep until it".

    CI saw it: on a loaded box the second read passed the turn, the sleep was
    asked for a negative delay and the whole cycle failed as an internal
    error. Here the clock says "1 µs early" once, then "1 µs late".
    """
    from types import SimpleNamespace

    import benchd.load as load

    turn = 100.0
    reads = iter([turn - 1e-6, turn + 1e-6])
    monkeypatch.setattr(load, "time", SimpleNamespace(perf_counter=lambda: next(reads, turn + 1)))

    class OneTurn:
        paused_until = 0.0
        given = False

        def reserve(self) -> float | None:
            if self.given:
                return None
            self.given = True
            return turn

    plan = load._ClosedPlan(origin=0.0, stop_at=math.inf, budget=None)
    seq = await load._next_send(plan, OneTurn())  # type: ignore[arg-type]
    assert seq == 0
