"""What a probe's schedule tells its readers: where its loop stands, what a trigger got.

Plain frozen data, below both the scheduler that makes it
(:class:`benchd.scheduler.ProbeLoop`) and the web app and surfacers that
show it, so that neither of those imports the daemon's modules.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Busy", "OverBudget", "Schedule", "Started", "TriggerOutcome"]


@dataclass(frozen=True, slots=True)
class Schedule:
    """Where a probe's loop stands: running now, or when its next cycle is due (unix s)."""

    running: bool
    next_due_at: float | None


@dataclass(frozen=True, slots=True)
class Started:
    """An on-demand cycle was started; it will carry this cycle number."""

    cycle: int


@dataclass(frozen=True, slots=True)
class Busy:
    """A cycle is already running (or about to): the request is refused."""


@dataclass(frozen=True, slots=True)
class OverBudget:
    """The key's read budget cannot take another cycle for ``retry_after_s`` seconds."""

    retry_after_s: float


TriggerOutcome = Started | Busy | OverBudget
"""What :meth:`benchd.scheduler.ProbeLoop.trigger` answers a request to run a cycle now."""
