"""Request budgets: what each API key's probes cost the store per cycle, and whether it fits.

A store's rate limits belong to an API key, not to a probe (the real
Zengram server: 120 reads and 60 writes per minute per key, fixed 60 s
windows; a 429 past them). Probes that share a key share its budget, and
benchd replicas that share a key each take ``1 / replicas`` of it. The
plan counts every request a cycle sends — the namespace listing and its
verification pages, the sentinel, imports, deletes, time-to-searchable
polls, the serial pass and the load pass — and warns, with the numbers, when
a key's probes cannot fit its budget on their schedule. It also gives each
probe its share of the key's read budget, which the load pass is paced to,
and of its write budget, which the flow's deletes are spaced to
(:mod:`benchd.store.pacing`).

``benchd validate --config`` and daemon start-up print the warnings; a
probe's ``[probe.budget]`` declares its key's budget (every probe on one key
must declare the same one). What it leaves out comes from the kind's
default (:class:`~benchd.config.kinds.StoreCosts`: the store's limits per
key, declared in the kind's registry entry); a store without rate limits (``unlimited =
true``, or a kind whose stores have none) is never planned, warned about or
paced.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from benchd.config.budget import BudgetSettings
from benchd.config.kinds import target_kinds
from benchd.config.load import Config, ProbeConfig
from benchd.errors import ConfigError

__all__ = [
    "Budget",
    "BudgetSettings",
    "CycleCost",
    "KeyPlan",
    "Plan",
    "budget_of",
    "cycle_cost",
    "key_of",
    "own_share",
    "own_write_share",
    "plan_budgets",
]


@dataclass(frozen=True, slots=True)
class Budget:
    """A probe's effective budget: its key's limits (None: unlimited) and its replicas."""

    reads_per_min: int | None
    writes_per_min: int | None
    replicas: int = 1

    def show(self) -> str:
        def one(n: int | None) -> str:
            return "unlimited" if n is None else str(n)

        return (
            f"reads_per_min = {one(self.reads_per_min)}, writes_per_min = "
            f"{one(self.writes_per_min)}, replicas = {self.replicas}"
        )


def budget_of(probe: ProbeConfig) -> Budget | None:
    """``[probe.budget]`` over the kind's default; None when the store has no limits at all."""
    declared = probe.budget
    if declared.unlimited:
        return None
    # the kind's default: what its stores allow a key (StoreCosts.reads_per_min, ...)
    default = target_kinds()[probe.target.kind].costs(probe.target.settings)
    reads = declared.reads_per_min or default.reads_per_min
    writes = declared.writes_per_min or default.writes_per_min
    if reads is None and writes is None:
        return None
    return Budget(reads, writes, declared.replicas)


def _read_share(budget: Budget, probes: int) -> float | None:
    """Requests per second one of ``probes`` probes on the key may read (None: unpaced)."""
    if budget.reads_per_min is None:
        return None
    return budget.reads_per_min / 60.0 / (budget.replicas * probes)


def _write_share(budget: Budget, probes: int) -> float | None:
    """Requests per second one of ``probes`` probes on the key may write (None: unpaced)."""
    if budget.writes_per_min is None:
        return None
    return budget.writes_per_min / 60.0 / (budget.replicas * probes)


@dataclass(frozen=True, slots=True)
class CycleCost:
    """Requests one cycle of a probe sends, by what sends them."""

    reads: Mapping[str, int]  # export, searchable, serial, load
    writes: Mapping[str, int]  # sentinel, import, delete

    @property
    def total_reads(self) -> int:
        return sum(self.reads.values())

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())

    def describe(self) -> str:
        """``reads 15 (export 2, serial 12, ...), writes 37 (import 1, delete 36)``."""
        return f"reads {_parts(self.reads)}, writes {_parts(self.writes)}"


def _parts(counts: Mapping[str, int]) -> str:
    inner = ", ".join(f"{name} {n}" for name, n in counts.items() if n)
    return f"{sum(counts.values())}" + (f" ({inner})" if inner else "")


@dataclass(frozen=True, slots=True)
class KeyPlan:
    """One API key: its budget, its probes, their demand and the warnings."""

    key: str  # safe to show: the key's source and the store's origin, never the key
    budget: Budget  # [probe.budget] over the kind's default
    probes: tuple[str, ...]
    costs: Mapping[str, CycleCost]  # probe -> steady-state cycle
    reads_per_min: float  # demand, every replica included
    writes_per_min: float
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """Every key's plan, and each probe's share of its key's read and write budgets (req/s)."""

    keys: tuple[KeyPlan, ...]
    read_rates: Mapping[str, float]  # probe -> requests per second for its load pass
    write_rates: Mapping[str, float] = field(default_factory=dict)  # ... for its deletes

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(w for key in self.keys for w in key.warnings)


def cycle_cost(
    probe: ProbeConfig,
    memories: int,
    queries: int,
    *,
    read_rate: float | None,
    first: bool = False,
) -> CycleCost:
    """The requests one cycle of ``probe`` sends (``first``: into an empty namespace).

    An estimate where the store decides: one time-to-searchable poll (more
    while indexing lags), and listings one page per 500 records.
    """
    costs = target_kinds()[probe.target.kind].costs(probe.target.settings)
    cleanup = probe.target.cleanup
    imports = math.ceil(memories / costs.batch_size) if memories else 0
    pages = max(1, math.ceil((memories + 1) / costs.page_size))
    reads = {
        "export": costs.lists * pages,
        "searchable": costs.searchable_polls,
        "serial": queries,
        "load": _load_reads(probe, read_rate),
        "lease": costs.lease_reads + costs.lease_listings * pages,
    }
    writes = {
        "sentinel": 1 if first else costs.lease_writes,
        "import": imports if (first or cleanup != "never") else 0,
        "delete": memories if (cleanup != "never" and not first) or cleanup == "after" else 0,
    }
    return CycleCost(reads, writes)


def _load_reads(probe: ProbeConfig, read_rate: float | None) -> int:
    """The load pass's requests; 0 for an unpaced closed loop (as many as the store answers)."""
    load = probe.load
    if load.mode == "serial":
        return 0
    if load.requests is not None:
        return load.requests
    caps = [r for r in (read_rate, load.max_rate) if r is not None]
    if load.mode == "open":
        caps.append(load.rate)
    return math.ceil(min(caps) * load.duration_s) if caps else 0


def key_of(probe: ProbeConfig) -> str | None:
    """The budget a probe draws on: its API key at its store; None for in-process targets.

    The text before ``"\\x00"`` is safe to show; what follows tells keys apart.
    """
    url = probe.target.url
    if url is None:
        return None
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
    secret = probe.target.secret
    if secret is None:
        return f"no API key at {origin}"
    # Grouped by the key itself (two variables holding one key share its budget);
    # shown by where it was read from. The digest never leaves this module.
    digest = hashlib.sha256(secret.reveal().encode()).hexdigest()
    return f"key {secret.source} at {origin}\x00{digest}"


def own_share(probe: ProbeConfig) -> float | None:
    """The probe's read rate (req/s) when no plan says otherwise: its budget, alone on its key.

    None (not paced) for targets with no store behind them (in-process
    retrievers) and for stores without a read limit.
    """
    budget = budget_of(probe)
    if key_of(probe) is None or budget is None:
        return None
    return _read_share(budget, 1)


def own_write_share(probe: ProbeConfig) -> float | None:
    """The probe's write rate (req/s) when no plan says otherwise: its budget, alone on its
    key. None (deletes not spaced) where :func:`own_share` is None or writes are unlimited.
    """
    budget = budget_of(probe)
    if key_of(probe) is None or budget is None:
        return None
    return _write_share(budget, 1)


def plan_budgets(config: Config, sizes: Mapping[str, tuple[int, int]]) -> Plan:
    """Plan every key of ``config``; ``sizes`` gives each probe's (memories, queries).

    Raises :class:`~benchd.errors.ConfigError` when probes sharing a key
    declare different budgets (``unlimited`` beside limits included). A key
    without limits is not planned.
    """
    groups: dict[str, list[ProbeConfig]] = {}
    for probe in config.probes:
        key = key_of(probe)
        if key is not None and probe.name in sizes:
            groups.setdefault(key, []).append(probe)
    keys = tuple(
        _plan_key(config.path, key.partition("\x00")[0], probes, sizes)
        for key, probes in groups.items()
        if _same_budget(config.path, key.partition("\x00")[0], probes) is not None
    )
    reads = {name: rate for key in keys for name, rate in _shares(key, _read_share).items()}
    writes = {name: rate for key in keys for name, rate in _shares(key, _write_share).items()}
    return Plan(keys, reads, writes)


def _shares(key: KeyPlan, share_of: Callable[[Budget, int], float | None]) -> dict[str, float]:
    share = share_of(key.budget, len(key.probes))
    return {} if share is None else dict.fromkeys(key.probes, share)


def _plan_key(
    file: str, key: str, probes: Sequence[ProbeConfig], sizes: Mapping[str, tuple[int, int]]
) -> KeyPlan:
    budget = _same_budget(file, key, probes)
    assert budget is not None  # plan_budgets plans limited keys only
    rate = _read_share(budget, len(probes))
    costs = {p.name: cycle_cost(p, *sizes[p.name], read_rate=rate) for p in probes}
    reads = budget.replicas * sum(costs[p.name].total_reads * 60.0 / p.interval_s for p in probes)
    writes = budget.replicas * sum(costs[p.name].total_writes * 60.0 / p.interval_s for p in probes)
    plan = KeyPlan(key, budget, tuple(p.name for p in probes), costs, reads, writes, ())
    return KeyPlan(**{**_fields(plan), "warnings": tuple(_warnings(plan, probes, sizes))})


def _same_budget(file: str, key: str, probes: Sequence[ProbeConfig]) -> Budget | None:
    """The one budget the probes on ``key`` have (None: no limits), or a ConfigError."""
    budget = budget_of(probes[0])
    for other in probes[1:]:
        if budget_of(other) != budget:
            raise ConfigError(
                f"{file}: probe {other.name!r} has [probe.budget] {_show(other)} but "
                f"probe {probes[0].name!r}, which shares its {key}, has {_show(probes[0])}; "
                "a budget belongs to the key: declare the same one in both"
            )
    return budget


def _fields(plan: KeyPlan) -> dict[str, Any]:
    return {name: getattr(plan, name) for name in KeyPlan.__dataclass_fields__}


def _show(probe: ProbeConfig) -> str:
    budget = budget_of(probe)
    return "unlimited = true" if budget is None else budget.show()


def _warnings(
    plan: KeyPlan, probes: Sequence[ProbeConfig], sizes: Mapping[str, tuple[int, int]]
) -> list[str]:
    out: list[str] = []
    budget = plan.budget
    who = f"budget of {plan.key} (probes {', '.join(plan.probes)}; {budget.replicas} replica(s))"
    detail = "; ".join(f"{name}: {cost.describe()} a cycle" for name, cost in plan.costs.items())
    detail += "; an on-demand cycle (POST /api/probes/NAME/run, benchd once) costs one more"
    if budget.writes_per_min is not None and plan.writes_per_min > budget.writes_per_min:
        out.append(
            f"{who}: the schedule needs {plan.writes_per_min:.1f} writes/min of "
            f"writes_per_min = {budget.writes_per_min} ({detail}); cycles will wait on 429s. "
            'Use cleanup = "never" (in steady state only the lease heartbeat writes), '
            "a longer interval_s, "
            "or fewer probes on this key"
        )
    if budget.reads_per_min is not None and plan.reads_per_min > budget.reads_per_min:
        out.append(
            f"{who}: the schedule needs {plan.reads_per_min:.1f} reads/min of "
            f"reads_per_min = {budget.reads_per_min} ({detail}); cycles will wait on 429s. "
            "Use a longer interval_s, a shorter load pass, or fewer queries or probes on "
            "this key"
        )
    share = _read_share(budget, len(probes))
    for probe in probes:
        out.extend(_one_cycle(who, probe, plan.costs[probe.name], budget, sizes[probe.name]))
        if probe.load.mode == "open" and share is not None and probe.load.rate > share:
            out.append(
                f"{who}: probe {probe.name!r} asks for load.rate = {probe.load.rate:g}/s, above "
                f"its share of the read budget ({share:.2f}/s); the load pass is paced to "
                f"{share:.2f}/s. Lower load.rate, or declare the budget the store really grants"
            )
    return out


def _one_cycle(
    who: str,
    probe: ProbeConfig,
    cost: CycleCost,
    budget: Budget,
    size: tuple[int, int],
) -> list[str]:
    """A cycle that alone sends more than one window admits (and what that costs it)."""
    out = []
    first = cycle_cost(probe, *size, read_rate=_read_share(budget, 1), first=True)
    for label, steady, initial, limit in (
        ("writes", cost.total_writes, first.total_writes, budget.writes_per_min),
        ("reads", cost.total_reads, first.total_reads, budget.reads_per_min),
    ):
        needed = max(steady, initial) * budget.replicas  # replicas cycle at the same time
        if limit is None or needed <= limit:
            continue
        waits_s = (math.ceil(needed / limit) - 1) * 60.0
        verdict = (
            f"cannot finish within timeout_s = {probe.timeout_s:g}"
            if waits_s >= probe.timeout_s
            else f"takes >= {waits_s:.0f} s"
        )
        out.append(
            f"{who}: one cycle of probe {probe.name!r} sends up to {needed} {label} against "
            f"{label}_per_min = {limit}: it waits on 429s and {verdict}"
        )
    return out
