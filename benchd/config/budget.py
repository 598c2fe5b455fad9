"""``[probe.budget]``: the rate limits of a probe's API key, as the store applies them.

A per-probe settings type, so it lives in config; what a cycle costs and
whether a schedule fits is :mod:`benchd.budget` (which imports config,
never the other way round).

A key left out takes the kind's default (:data:`benchd.budget.KIND_LIMITS`:
the Zengram API's 120 reads and 60 writes a minute for ``zengram`` and
``http``; none for ``python``). ``unlimited = true`` says the store has no
limits: no budget warning, no pacing of the load pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchd.config.schema import check

__all__ = ["BudgetSettings"]


def _at_least(floor: int) -> Any:
    return check(lambda v: None if v is None or v >= floor else f"must be an integer >= {floor}")


@dataclass(frozen=True, slots=True)
class BudgetSettings:
    """``[probe.budget]``: the rate limits of the probe's API key, as the store applies them."""

    reads_per_min: int | None = field(default=None, metadata=_at_least(1))  # None: the kind's
    writes_per_min: int | None = field(default=None, metadata=_at_least(1))
    replicas: int = field(default=1, metadata=_at_least(1))  # benchd replicas sharing the key
    unlimited: bool = False  # the store has no rate limits: no warning, no pacing

    def __post_init__(self) -> None:
        if self.unlimited and (self.reads_per_min or self.writes_per_min):
            raise ValueError(
                "unlimited = true says the store has no rate limits; remove reads_per_min "
                "and writes_per_min, or unlimited"
            )
