"""Per-probe schedules: interval, jitter and a loop that never overlaps itself.

The scheduler knows nothing of probing: it calls ``runner.run_once()`` on
time and hands the result to a sink. Each probe runs in its own task, so a
probe that fails, times out or hangs (bounded by its own ``timeout_s``)
never delays another.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import anyio

from benchd.probe import ProbeRunner
from benchd.result import CycleResult

__all__ = ["ProbeLoop", "next_start"]

Sink = Callable[[CycleResult], None]


def next_start(
    previous_start: float, interval_s: float, jitter_s: float, now: float, rng: random.Random
) -> float:
    """When the next cycle should start (monotonic seconds).

    Cycles are anchored on their scheduled start, so they do not drift; a
    cycle that ran longer than the interval is followed immediately (never
    overlapped, never bunched up: missed slots are skipped).
    """
    target = previous_start + interval_s + rng.uniform(-jitter_s, jitter_s)
    if target <= now:
        missed = int((now - previous_start) // interval_s)
        target = max(now, previous_start + missed * interval_s)
    return target


class ProbeLoop:
    """Runs one probe's cycles on its schedule until cancelled."""

    def __init__(self, runner: ProbeRunner, sink: Sink, *, seed: int | None = None) -> None:
        self.runner = runner
        self.sink = sink
        self.scope: anyio.CancelScope | None = None
        self.stopped = anyio.Event()
        self._rng = random.Random(seed)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        probe = self.runner.probe
        with anyio.CancelScope() as scope:
            self.scope = scope
            task_status.started()
            try:
                # Spread first cycles of many probes over the jitter window.
                await anyio.sleep(self._rng.uniform(0, probe.jitter_s))
                while True:
                    started = time.monotonic()
                    self.sink(await self.runner.run_once())
                    wake = next_start(
                        started, probe.interval_s, probe.jitter_s, time.monotonic(), self._rng
                    )
                    await anyio.sleep(max(0.0, wake - time.monotonic()))
            finally:
                self.stopped.set()

    def cancel(self) -> None:
        if self.scope is not None:
            self.scope.cancel()
