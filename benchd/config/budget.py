"""``[probe.budget]``: the rate limits of a probe's API key, as the store applies them.

A per-probe settings type, so it lives in config; what the budget costs and
whether a schedule fits it is :mod:`benchd.budget` (which imports config,
never the other way round).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchd.config.schema import check

__all__ = ["BudgetSettings"]


def _at_least(floor: int) -> Any:
    return check(lambda v: None if v >= floor else f"must be an integer >= {floor}")


@dataclass(frozen=True, slots=True)
class BudgetSettings:
    """``[probe.budget]``: the rate limits of the probe's API key, as the store applies them."""

    reads_per_min: int = field(default=120, metadata=_at_least(1))
    writes_per_min: int = field(default=60, metadata=_at_least(1))
    replicas: int = field(default=1, metadata=_at_least(1))  # benchd replicas sharing the key
