"""The one small protocol every push surfacer implements (cloudprober's ``Write``).

A surfacer receives each finished, frozen :class:`~benchd.result.CycleResult`
and exports it; it never computes a metric, talks to a target or changes the
result. Pull surfacers (the Prometheus collector, the status API) read the
:class:`~benchd.surfacers.result_book.ResultBook` when asked instead: the book is the
aggregation state the daemon records every result into before the push
surfacers see it, not a surfacer itself.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from benchd.result import CycleResult

__all__ = ["Surfacer"]


@runtime_checkable
class Surfacer(Protocol):
    """Exports finished cycles; called once per result, in the daemon's order."""

    def write(self, result: CycleResult) -> None:
        """Export ``result``; must not block the event loop for long."""
        ...
