"""Per-key fixed-window rate limits, as the target API applies them.

Requests are *writes* (POST, PUT, PATCH, DELETE) or *reads* (everything
else); each key gets ``limit`` of each per 60-second window, counted from
the window's first request. A limit of 0 means unlimited.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RateLimiter", "request_class"]

WINDOW_S = 60.0
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def request_class(method: str) -> str:
    """``"write"`` or ``"read"``."""
    return "write" if method.upper() in _WRITE_METHODS else "read"


@dataclass(slots=True)
class _Window:
    start: float
    count: int


class RateLimiter:
    """Counts requests per (key, class); :meth:`check` returns seconds to wait or None."""

    def __init__(
        self, reads_per_min: int, writes_per_min: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = {"read": reads_per_min, "write": writes_per_min}
        self._clock = clock
        self._windows: dict[tuple[str, str], _Window] = {}

    def check(self, key: str, kind: str) -> int | None:
        """Count one request; if over the limit, the Retry-After seconds instead."""
        limit = self.limits[kind]
        if limit <= 0:
            return None
        now = self._clock()
        window = self._windows.get((key, kind))
        if window is None or now - window.start >= WINDOW_S:
            if len(self._windows) > 10_000:
                self._windows.clear()  # bound memory under key spraying
            window = self._windows[(key, kind)] = _Window(now, 0)
        if window.count >= limit:
            return max(1, math.ceil(window.start + WINDOW_S - now))
        window.count += 1
        return None
