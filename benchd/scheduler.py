"""Per-probe schedules: interval, jitter, cycles on demand, and a loop that never overlaps itself.

The scheduler knows nothing of probing: it calls ``runner.run_once()`` on
time and hands the result to a sink. Each probe runs in its own task, so a
probe that fails, times out or hangs (bounded by its own ``timeout_s``)
never delays another. The first cycle starts at once; jitter spreads the
later ones. :meth:`ProbeLoop.trigger` starts a cycle now (``POST
/api/probes/{name}/run``) unless one is running or the key's read budget
cannot take another yet. Nothing escapes a loop but cancellation: the runner
turns a bug inside a cycle into a ``failed``/``internal`` result, and an
exception from the runner or the sink is logged once (with its traceback)
and the probe runs again at its next slot.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import anyio

from benchd.budget import budget_of
from benchd.probe import ProbeRunner, log_internal
from benchd.result import CycleResult
from benchd.schedule import Busy, OverBudget, Schedule, Started, TriggerOutcome

__all__ = ["ProbeLoop", "next_start", "reads_of"]

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


def reads_of(result: CycleResult) -> int:
    """The read requests a finished cycle sent: its serial queries and its load pass."""
    load = sum(result.load.requests.values()) if result.load is not None else 0
    return len(result.queries) + load


class ProbeLoop:
    """Runs one probe's cycles on its schedule until cancelled."""

    def __init__(self, runner: ProbeRunner, sink: Sink, *, seed: int | None = None) -> None:
        self.runner = runner
        self.sink = sink
        self.scope: anyio.CancelScope | None = None
        self.stopped = anyio.Event()
        self._rng = random.Random(seed)
        self._wake = anyio.Event()
        self._running = False
        self._requested: int | None = None  # cycle number an on-demand request reserved
        self._next_due_at: float | None = None  # unix seconds
        self._last_start: float | None = None  # monotonic
        self._last_reads = 0

    @property
    def schedule(self) -> Schedule:
        running = self._running or self._requested is not None
        return Schedule(running=running, next_due_at=None if running else self._next_due_at)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        probe = self.runner.probe
        with anyio.CancelScope() as scope:
            self.scope = scope
            task_status.started()
            try:
                while True:
                    started = self._begin()
                    result = await self._run_once()
                    wake = next_start(
                        started, probe.interval_s, probe.jitter_s, time.monotonic(), self._rng
                    )
                    self._end(result, wake)
                    if result is not None:
                        self._write(result)
                    with anyio.move_on_after(max(0.0, wake - time.monotonic())):
                        await self._wake.wait()
            finally:
                self.stopped.set()

    def _begin(self) -> float:
        self._running, self._requested, self._next_due_at = True, None, None
        self._last_start = time.monotonic()
        return self._last_start

    def _end(self, result: CycleResult | None, wake: float) -> None:
        self._wake = anyio.Event()  # before anything can trigger the next cycle
        self._running = False
        self._last_reads = reads_of(result) if result is not None else 0
        self._next_due_at = time.time() + max(0.0, wake - time.monotonic())

    def trigger(self) -> TriggerOutcome:
        """Start a cycle now, unless one is running or the read budget needs more time."""
        if self._running or self._requested is not None or self._last_start is None:
            return Busy()
        wait = self._last_start + self.min_spacing_s() - time.monotonic()
        if wait > 0:
            return OverBudget(retry_after_s=wait)
        self._requested = self.runner.cycles + 1
        self._wake.set()
        return Started(cycle=self._requested)

    def min_spacing_s(self) -> float:
        """How long after a cycle's start its reads are back in a per-minute budget.

        A cycle that sent ``R`` reads against a budget of ``B`` reads a minute
        draws ``60 * R / B`` seconds of it; another cycle before then would
        push the key past its budget (and the store into 429s). ``B`` is this
        replica's share of the key's ``[probe.budget] reads_per_min`` (or the
        kind's default); 0 for a store without a read limit.
        """
        budget = budget_of(self.runner.probe)
        if budget is None or budget.reads_per_min is None:
            return 0.0
        return 60.0 * self._last_reads * budget.replicas / budget.reads_per_min

    async def _run_once(self) -> CycleResult | None:
        """The runner's cycle; ``None`` if an exception escaped it (logged once, traceback too)."""
        try:
            return await self.runner.run_once()
        except Exception as exc:  # run_once contains its own; this is the last fence
            log_internal("cycle", self.runner.probe.name, exc)
            return None

    def _write(self, result: CycleResult) -> None:
        try:
            self.sink(result)
        except Exception as exc:  # a surfacer's bug must not stop the probe
            log_internal("surfacer", self.runner.probe.name, exc)

    def cancel(self) -> None:
        if self.scope is not None:
            self.scope.cancel()
