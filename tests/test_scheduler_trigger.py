"""Cycles on demand: ProbeLoop.trigger starts a cycle now, refuses while one runs or
while the key's read budget still holds the last cycle's reads; the first cycle
starts at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from surfacers.cycles import make_result

from benchd.config.budget import BudgetSettings
from benchd.config.load import ProbeConfig, TargetConfig
from benchd.kinds.python import PythonConfig
from benchd.kinds.zengram import ZengramConfig
from benchd.probe import ProbeRunner
from benchd.result import CycleResult
from benchd.scheduler import Busy, OverBudget, ProbeLoop, Started, reads_of

pytestmark = pytest.mark.anyio

SETTINGS: dict[str, object] = {  # never connected to: the runner below stands in for the probe
    "zengram": ZengramConfig(url="http://127.0.0.1:9"),
    "python": PythonConfig(factory="benchd.examples.retrievers:bm25"),
}


class GatedRunner:
    """Stands in for ProbeRunner: each cycle waits until the test opens its gate."""

    def __init__(
        self, *, reads_per_min: int | None = None, queries: int = 3, kind: str = "zengram"
    ) -> None:
        settings = SETTINGS[kind]
        target = TargetConfig(kind=kind, settings=settings)
        budget = BudgetSettings() if reads_per_min is None else BudgetSettings(reads_per_min)
        self.probe = ProbeConfig(
            name="alpha",
            fixture=Path("f.json"),
            target=target,
            interval_s=3600.0,
            jitter_s=600.0,
            budget=budget,
        )
        self.cycles = 0
        self.began = anyio.Event()
        self.gate = anyio.Event()
        self.latencies = (0.01,) * queries

    async def run_once(self) -> CycleResult:
        self.cycles += 1
        self.began.set()
        await self.gate.wait()
        self.began, self.gate = anyio.Event(), anyio.Event()
        return make_result(cycle=self.cycles, load=False, latencies=self.latencies)


async def run_loop(runner: GatedRunner, results: list[CycleResult]) -> tuple[ProbeLoop, Any]:
    loop = ProbeLoop(cast(ProbeRunner, runner), results.append, seed=1)
    return loop, loop.run


async def test_first_cycle_starts_at_once_despite_jitter() -> None:
    runner = GatedRunner()
    results: list[CycleResult] = []
    loop, run = await run_loop(runner, results)
    async with anyio.create_task_group() as tg:
        await tg.start(run)
        with anyio.fail_after(10):  # a bound, not a margin: jitter_s is 600 s
            await runner.began.wait()
        assert loop.schedule.running and loop.schedule.next_due_at is None
        assert isinstance(loop.trigger(), Busy)  # 409: a cycle is running
        runner.gate.set()
        with anyio.fail_after(10):
            while not results:
                await anyio.sleep(0.01)
        due = loop.schedule.next_due_at
        assert due is not None and not loop.schedule.running
        assert due >= results[0].finished_at + 3600 - 600 - 1
        tg.cancel_scope.cancel()


async def test_trigger_runs_a_cycle_now_then_refuses_until_it_ends() -> None:
    runner = GatedRunner(reads_per_min=10**9)  # a budget that never binds
    results: list[CycleResult] = []
    loop, run = await run_loop(runner, results)
    async with anyio.create_task_group() as tg:
        await tg.start(run)
        await runner.began.wait()
        runner.gate.set()
        while not results:
            await anyio.sleep(0.01)
        outcome = loop.trigger()
        assert outcome == Started(cycle=2)
        assert isinstance(loop.trigger(), Busy)  # reserved: a second request is refused
        with anyio.fail_after(10):
            await runner.began.wait()
        runner.gate.set()
        while len(results) < 2:
            await anyio.sleep(0.01)
        assert results[1].cycle == 2
        tg.cancel_scope.cancel()


async def test_trigger_waits_for_the_read_budget_of_the_last_cycle() -> None:
    runner = GatedRunner(reads_per_min=6, queries=3)  # 3 reads of 6/min: 30 s of budget
    results: list[CycleResult] = []
    loop, run = await run_loop(runner, results)
    async with anyio.create_task_group() as tg:
        await tg.start(run)
        await runner.began.wait()
        runner.gate.set()
        while not results:
            await anyio.sleep(0.01)
        assert reads_of(results[0]) == 3 and loop.min_spacing_s() == pytest.approx(30.0)
        outcome = loop.trigger()
        assert isinstance(outcome, OverBudget) and 0 < outcome.retry_after_s <= 30.0
        assert runner.cycles == 1  # nothing started
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("kind", "spacing_s"),
    [("zengram", 6.0), ("python", 0.0)],  # 12 reads of the Zengram API's 120/min; no limit
)
async def test_without_a_declared_budget_the_kinds_default_applies(
    kind: str, spacing_s: float
) -> None:
    runner = GatedRunner(reads_per_min=None, queries=12, kind=kind)
    results: list[CycleResult] = []
    loop, run = await run_loop(runner, results)
    async with anyio.create_task_group() as tg:
        await tg.start(run)
        await runner.began.wait()
        runner.gate.set()
        while not results:
            await anyio.sleep(0.01)
        assert loop.min_spacing_s() == pytest.approx(spacing_s)
        if kind == "python":
            assert isinstance(loop.trigger(), Started)  # an on-demand cycle is never held
        tg.cancel_scope.cancel()
