"""The scheduler: when the next cycle starts, and a loop that never overlaps itself."""

from __future__ import annotations

import random
from typing import Any, cast

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from surfacers.cycles import make_result

from benchd.probe import ProbeRunner
from benchd.result import CycleResult
from benchd.scheduler import ProbeLoop, next_start


def test_next_start_is_anchored_on_the_previous_scheduled_start() -> None:
    """A cycle that took 2 s of a 10 s interval is followed 10 s after it started, not 12."""
    rng = random.Random(0)
    assert next_start(100.0, 10.0, 0.0, now=102.0, rng=rng) == 110.0


def test_a_cycle_longer_than_its_interval_is_followed_at_once_and_missed_slots_skipped() -> None:
    rng = random.Random(0)
    # started at 100, interval 10, finished at 135: slots 110, 120, 130 were missed
    assert next_start(100.0, 10.0, 0.0, now=135.0, rng=rng) == 135.0


@given(
    previous=st.floats(0, 1e6),
    interval=st.floats(0.05, 3600),
    jitter_share=st.floats(0, 0.5),
    ran_for=st.floats(0, 1e4),
    seed=st.integers(0, 2**32 - 1),
)
def test_next_start_is_never_in_the_past_nor_beyond_one_interval_plus_jitter(
    previous: float, interval: float, jitter_share: float, ran_for: float, seed: int
) -> None:
    jitter = interval * jitter_share
    now = previous + ran_for
    start = next_start(previous, interval, jitter, now=now, rng=random.Random(seed))
    assert start >= now
    assert start <= max(now, previous + interval + jitter)


class _Runner:
    """Stands in for a ProbeRunner: counts cycles, records overlap, stops after ``limit``."""

    def __init__(self, probe: Any, limit: int) -> None:
        self.probe = probe
        self.limit = limit
        self.calls = 0
        self.running = 0
        self.max_running = 0
        self.done = anyio.Event()

    async def run_once(self) -> CycleResult:
        self.calls += 1
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        await anyio.sleep(0.01)  # a cycle longer than the interval below
        self.running -= 1
        if self.calls >= self.limit:
            self.done.set()
        return make_result(self.probe.name, cycle=self.calls)


class _Probe:
    name = "alpha"
    interval_s = 0.001
    jitter_s = 0.0


@pytest.mark.anyio
async def test_probe_loop_hands_every_result_to_the_sink_and_never_overlaps() -> None:
    runner = _Runner(_Probe(), limit=5)
    seen: list[CycleResult] = []
    loop = ProbeLoop(cast(ProbeRunner, runner), seen.append, seed=1)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await tg.start(loop.run)
            await runner.done.wait()
            loop.cancel()
        await loop.stopped.wait()
    assert runner.max_running == 1
    assert [r.cycle for r in seen] == list(range(1, runner.calls + 1))
    assert runner.calls >= 5


@pytest.mark.anyio
async def test_cancelling_a_loop_mid_cycle_sets_stopped_and_records_nothing_half_done() -> None:
    gate = anyio.Event()

    class Hanging(_Runner):
        async def run_once(self) -> CycleResult:
            gate.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    seen: list[CycleResult] = []
    loop = ProbeLoop(cast(ProbeRunner, Hanging(_Probe(), limit=1)), seen.append, seed=1)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await tg.start(loop.run)
            await gate.wait()
            loop.cancel()
    assert loop.stopped.is_set()
    assert seen == []
