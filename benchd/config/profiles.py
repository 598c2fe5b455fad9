"""How a probe loads its target: the ``[probe.load]`` settings, decoded with the config.

A leaf module (no anyio, no scoring), so the config package can name the
type without importing the load engine; :mod:`benchd.load` runs what it says
and re-exports it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from benchd.errors import ConfigError

__all__ = ["MAX_CONCURRENCY", "LoadMode", "LoadProfile"]

LoadMode = Literal["serial", "closed", "open"]

MAX_CONCURRENCY = 10_000
"""Most requests in flight at once: each is a task and, over HTTP, a connection."""


@dataclass(frozen=True, slots=True)
class LoadProfile:
    """How to load a target; see the module docstring for the modes."""

    mode: LoadMode = "serial"
    concurrency: int = 8
    rate: float = 50.0
    duration_s: float = 30.0
    requests: int | None = None
    late_tolerance_s: float = 0.010
    request_timeout_s: float = 10.0
    warmup_s: float = 0.0
    max_error_ratio: float = 0.05
    max_rate_limited_ratio: float = 0.1
    max_rate: float | None = None  # cap on sends per second; the cycle lowers it to the read budget

    def __post_init__(self) -> None:
        if self.mode not in ("serial", "closed", "open"):
            raise ConfigError(f"load.mode: unknown mode {self.mode!r}; use serial, closed or open")
        _require(
            1 <= self.concurrency <= MAX_CONCURRENCY,
            "concurrency",
            self.concurrency,
            f"an integer in 1..{MAX_CONCURRENCY}",
        )
        _require(0 < self.rate < math.inf, "rate", self.rate, "requests per second > 0")
        _require(0 < self.duration_s < math.inf, "duration_s", self.duration_s, "seconds > 0")
        if self.requests is not None:
            _require(self.requests >= 1, "requests", self.requests, "an integer >= 1")
        _require(self.late_tolerance_s >= 0, "late_tolerance_s", self.late_tolerance_s, ">= 0")
        _require(self.request_timeout_s > 0, "request_timeout_s", self.request_timeout_s, "> 0")
        _require(0 <= self.warmup_s < math.inf, "warmup_s", self.warmup_s, "seconds >= 0")
        _require(0 <= self.max_error_ratio <= 1, "max_error_ratio", self.max_error_ratio, "0..1")
        ratio = self.max_rate_limited_ratio
        _require(0 <= ratio <= 1, "max_rate_limited_ratio", ratio, "0..1")
        if self.max_rate is not None:
            _require(0 < self.max_rate < math.inf, "max_rate", self.max_rate, "req/s > 0")

    @property
    def effective_rate(self) -> float:
        """Open loop: the arrival rate, capped by ``max_rate``."""
        return self.rate if self.max_rate is None else min(self.rate, self.max_rate)


def _require(ok: bool, name: str, value: object, fix: str) -> None:
    if not ok:
        raise ConfigError(f"load.{name} = {value!r} is out of range; set it to {fix}")
