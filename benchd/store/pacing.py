"""Delete requests kept within a probe's share of its API key's write budget (#27).

A store's rate limits belong to an API key (the real Zengram server: 60
writes a minute per key, counted in fixed 60 s windows). The load pass is
paced to the probe's share of the key's *read* budget (:mod:`benchd.budget`);
the flow's deletes — one request per record on a store without a bulk
delete, 10^5 of them for a cleanup of a large corpus — are kept within its
share of the *write* budget. Each cleanup sends what one window of that share
admits at once (the store would take it: a small corpus is cleaned up as fast
as before), and the rest one after another at the share's rate, so a large
cleanup no longer spends the key's budget in bursts that the store's 429s
pace, making the heartbeat and the key's other probes wait behind them. Over
any ``t`` seconds a cleanup sends at most ``share × (WINDOW_S + t)`` deletes:
twice its share in its first minute, its share a minute after. A 429 still
pauses a request by its ``Retry-After``: the spacing cannot know what else
spends the key's budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import anyio

__all__ = ["WINDOW_S", "Spacing"]

WINDOW_S = 60.0
"""The window a per-minute budget is counted in: a cleanup's first turns, one window's share,
are not spaced."""


class Spacing:
    """A token bucket of turns: ``burst`` at once, then ``rate`` a second, taken one after
    another by any number of workers.

    Over any ``t`` seconds after it was made, at most ``burst + rate × t`` turns
    start. ``rate`` None (a store without a write limit) never waits.
    """

    def __init__(
        self,
        rate: float | None = None,
        burst: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate is not None and not (rate > 0 and math.isfinite(rate)):
            raise ValueError(f"a write rate must be a positive number of requests a second: {rate}")
        self.rate = rate
        self._burst = max(1, burst)
        self._tokens = float(self._burst)
        self._clock = clock
        self._at = clock()
        self._turns = anyio.Lock()

    @classmethod
    def for_budget(cls, rate: float | None) -> Spacing:
        """Turns for one cleanup at ``rate`` a second: one window's share at once, then spaced."""
        burst = 1 if rate is None else math.floor(rate * WINDOW_S)
        return cls(rate, burst)

    async def turn(self) -> None:
        """Wait until a turn is free (at once when unpaced or the bucket holds one)."""
        rate = self.rate
        if rate is None:
            return
        async with self._turns:
            while True:
                now = self._clock()
                self._tokens = min(self._burst, self._tokens + (now - self._at) * rate)
                self._at = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                # spacing requests to an external store's budget (a timer may fire a
                # clock tick early: the bucket is looked at again)
                await anyio.sleep((1.0 - self._tokens) / rate)
