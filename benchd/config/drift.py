"""When a drop counts as drift: the ``[probe.drift]`` settings, decoded with the config.

A per-probe settings type, so it lives in config (no numpy, no scoring):
config never imports the drift machinery (tests/test_layering.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchd.errors import ConfigError

__all__ = ["DEFAULT_METRICS", "KNOWN_METRICS", "DriftSettings"]

DEFAULT_METRICS = ("recall", "ndcg", "mrr", "precision", "hit", "map", "recall_all")
KNOWN_METRICS = (*DEFAULT_METRICS, "rr", "ap", "r_precision")


MAX_RESAMPLES = 100_000
"""Most permutations or bootstrap draws: each costs a pass over every query's values."""
_RESAMPLES = f"an integer in 100..{MAX_RESAMPLES}"


@dataclass(frozen=True, slots=True)
class DriftSettings:
    """When a drop counts as drift, and how hard the statistics work to say so."""

    min_delta: float = 0.05
    alpha: float = 0.01
    rolling_window: int = 5  # 0 disables the rolling baseline
    metrics: tuple[str, ...] = DEFAULT_METRICS
    min_overlap_drop: float = 0.1  # ranking-overlap fall that counts as a model change
    min_score_shift: float = 0.25  # relative shift of the store's top scores that counts too
    seed: int = 0
    level: float = 0.95
    n_permutations: int = 10000
    n_bootstrap: int = 2000

    def __post_init__(self) -> None:
        problems = [
            ("min_delta", not (0.0 <= self.min_delta <= 1.0), "a ratio between 0 and 1"),
            ("alpha", not (0.0 < self.alpha < 1.0), "a p-value threshold between 0 and 1"),
            ("rolling_window", self.rolling_window < 0, "a number of cycles >= 0"),
            (
                "metrics",
                not self.metrics or not set(self.metrics) <= set(KNOWN_METRICS),
                f"a non-empty list of metric names from {', '.join(KNOWN_METRICS)}",
            ),
            (
                "min_overlap_drop",
                not (0.0 < self.min_overlap_drop <= 1.0),
                "an overlap fall between 0 (exclusive) and 1",
            ),
            ("min_score_shift", not self.min_score_shift > 0.0, "a relative shift > 0"),
            ("level", not (0.0 < self.level < 1.0), "a confidence level between 0 and 1"),
            ("n_permutations", not 100 <= self.n_permutations <= MAX_RESAMPLES, _RESAMPLES),
            ("n_bootstrap", not 100 <= self.n_bootstrap <= MAX_RESAMPLES, _RESAMPLES),
        ]
        for name, bad, expected in problems:
            if bad:
                value = getattr(self, name)
                raise ConfigError(f"{name} = {value!r}: expected {expected}")
