"""Fault injection for drills: latency, errors, stalls, 429s, degraded search, bad bodies.

A fault spec is ``NAME=VALUE``, optionally followed by ``@ROUTE[+ROUTE...]``
to limit it to ``search``, ``import``, ``export`` or ``delete`` (default:
every API route; ``/health`` and ``/admin`` are never faulted)::

    latency=fixed:20ms                   every request waits 20 ms
    latency=uniform:5ms..50ms            uniform between the bounds
    latency=lognormal:median=20ms,p99=200ms
    error_rate=0.2                       20% of requests answer 500
    stall=every:10s,for:2s               the first 2 s of every 10 s hang
    rate_limit=0.1                       10% answer 429 with Retry-After: 1
    degraded=0.1@search                  10% answer 503 with retrieval.degraded
    slow_body=500ms                      the body is dribbled out over 500 ms
    malformed=0.05                       5% of 2xx bodies are cut in half
    rank_swap=0.3@search                 30% of searches swap one random pair of
                                         adjacent results (ranking noise, as
                                         other tenants' writes cause on the
                                         real server)
    auth_lockout=10                      10 bad keys from one IP in 60 s lock
                                         that IP out (429, no Retry-After)
    seed=42                              seed the fault dice (reproducible drills)

Durations take ``ms`` or ``s``; rates are fractions in [0, 1]. Stall windows
count from the moment the fault plan was set.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ROUTES",
    "FaultInjector",
    "FaultPlan",
    "FaultSpecError",
    "parse_duration",
    "parse_faults",
]

ROUTES = frozenset({"search", "import", "export", "delete"})
_Z99 = 2.3263478740408408  # standard normal quantile at 0.99
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s)$")
_RATE_FAULTS = ("error_rate", "rate_limit", "degraded", "malformed", "rank_swap")
LOCKOUT_WINDOW_S = 60.0


class FaultSpecError(ValueError):
    """A fault spec that cannot be parsed; the message quotes it and shows the form."""


def parse_duration(text: str) -> float:
    """``"20ms"`` → 0.02, ``"2s"`` → 2.0."""
    match = _DURATION.match(text.strip())
    if not match:
        raise FaultSpecError(f"bad duration '{text}': use e.g. 20ms or 1.5s")
    value = float(match.group(1))
    return value / 1000.0 if match.group(2) == "ms" else value


@dataclass(frozen=True, slots=True)
class Latency:
    """Added delay: ``kind`` is fixed, uniform or lognormal."""

    kind: str
    a: float
    b: float = 0.0

    def sample(self, rng: random.Random) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        mu = math.log(self.a)
        sigma = (math.log(self.b) - mu) / _Z99
        return rng.lognormvariate(mu, sigma)


@dataclass(frozen=True, slots=True)
class Scoped:
    """A fault value with the routes it applies to (None = all)."""

    value: float | Latency | tuple[float, float]
    routes: frozenset[str] | None

    def applies(self, route: str) -> bool:
        return self.routes is None or route in self.routes


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Parsed faults by name, plus the specs they came from (reported by the admin API)."""

    specs: tuple[str, ...] = ()
    faults: dict[str, Scoped] = field(default_factory=dict)
    seed: int | None = None


def _parse_latency(value: str) -> Latency:
    kind, _, args = value.partition(":")
    try:
        if kind == "fixed":
            return Latency("fixed", parse_duration(args))
        if kind == "uniform":
            low, _, high = args.partition("..")
            lo, hi = parse_duration(low), parse_duration(high)
            if hi < lo:
                raise FaultSpecError(f"latency uniform bounds reversed in '{value}'")
            return Latency("uniform", lo, hi)
        if kind == "lognormal":
            parts = dict(p.split("=", 1) for p in args.split(","))
            median, p99 = parse_duration(parts["median"]), parse_duration(parts["p99"])
            if not 0 < median < p99:
                raise FaultSpecError(f"latency lognormal needs 0 < median < p99 in '{value}'")
            return Latency("lognormal", median, p99)
    except (KeyError, ValueError) as exc:
        if isinstance(exc, FaultSpecError):
            raise
    raise FaultSpecError(
        f"bad latency '{value}': use fixed:20ms, uniform:5ms..50ms "
        "or lognormal:median=20ms,p99=200ms"
    )


def _parse_stall(value: str) -> tuple[float, float]:
    try:
        parts = dict(p.split(":", 1) for p in value.split(","))
        every, length = parse_duration(parts["every"]), parse_duration(parts["for"])
    except (KeyError, ValueError) as exc:
        raise FaultSpecError(f"bad stall '{value}': use every:10s,for:2s") from exc
    if not 0 < length < every:
        raise FaultSpecError(f"bad stall '{value}': need 0 < for < every")
    return every, length


def _parse_rate(name: str, value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise FaultSpecError(f"bad {name} '{value}': use a fraction in [0, 1], e.g. {name}=0.1")
    return rate


def _parse_routes(text: str, spec: str) -> frozenset[str] | None:
    if not text:
        return None
    routes = frozenset(text.split("+"))
    if not routes <= ROUTES:
        raise FaultSpecError(f"bad route in fault '{spec}': use {', '.join(sorted(ROUTES))}")
    return routes


def _parse_value(name: str, value: str) -> float | Latency | tuple[float, float]:
    if name == "latency":
        return _parse_latency(value)
    if name == "stall":
        return _parse_stall(value)
    if name == "slow_body":
        return parse_duration(value)
    if name in _RATE_FAULTS:
        return _parse_rate(name, value)
    if name == "auth_lockout":
        if not value.isdigit() or int(value) < 1:
            raise FaultSpecError(f"bad auth_lockout '{value}': use a count >= 1, e.g. 10")
        return float(value)
    known = ", ".join(("latency", "stall", "slow_body", "auth_lockout", "seed", *_RATE_FAULTS))
    raise FaultSpecError(f"unknown fault '{name}': use one of {known}")


def parse_faults(specs: Sequence[str]) -> FaultPlan:
    """Parse fault specs (later specs of the same name win); raises FaultSpecError."""
    faults: dict[str, Scoped] = {}
    seed: int | None = None
    for spec in specs:
        body, _, scope = spec.strip().partition("@")
        name, eq, value = body.partition("=")
        if not eq or not value:
            raise FaultSpecError(f"bad fault '{spec}': use NAME=VALUE, e.g. latency=fixed:20ms")
        if name == "seed":
            if not value.isdigit():
                raise FaultSpecError(f"bad seed '{value}': use a non-negative integer")
            seed = int(value)
            continue
        try:
            faults[name] = Scoped(_parse_value(name, value), _parse_routes(scope, spec))
        except FaultSpecError as exc:
            if spec in str(exc):
                raise
            raise FaultSpecError(f"fault '{spec}': {exc}") from exc
    return FaultPlan(tuple(specs), faults, seed)


class FaultInjector:
    """Rolls the dice and computes waits for one active :class:`FaultPlan`."""

    def __init__(self, plan: FaultPlan, clock: Callable[[], float] = time.monotonic) -> None:
        self.plan = plan
        self._rng = random.Random(plan.seed)
        self._clock = clock
        self._t0 = clock()
        self._auth_failures: dict[str, tuple[float, int]] = {}

    def _get(self, name: str, route: str) -> Scoped | None:
        found = self.plan.faults.get(name)
        return found if found is not None and found.applies(route) else None

    def roll(self, name: str, route: str) -> bool:
        """True when a rate fault fires for this request."""
        found = self._get(name, route)
        return found is not None and self._rng.random() < float(found.value)  # type: ignore[arg-type]

    def delay(self, route: str) -> float:
        """Seconds this request must wait: the rest of a stall window plus sampled latency."""
        wait = 0.0
        stall = self._get("stall", route)
        if stall is not None:
            every, length = stall.value  # type: ignore[misc]
            phase = (self._clock() - self._t0) % every
            if phase < length:
                wait += length - phase
        latency = self._get("latency", route)
        if latency is not None:
            wait += latency.value.sample(self._rng)  # type: ignore[union-attr]
        return wait

    def swap_ranks(self, results: list[Any]) -> None:
        """``rank_swap``: with its probability, swap one random adjacent pair, in place."""
        if len(results) >= 2 and self.roll("rank_swap", "search"):
            i = self._rng.randrange(len(results) - 1)
            results[i], results[i + 1] = results[i + 1], results[i]

    def slow_body(self, route: str) -> float:
        found = self._get("slow_body", route)
        return float(found.value) if found is not None else 0.0  # type: ignore[arg-type]

    def locked_out(self, client: str) -> bool:
        """True while ``client`` (an IP) has hit the ``auth_lockout`` count this window."""
        found = self.plan.faults.get("auth_lockout")
        if found is None:
            return False
        start, count = self._auth_failures.get(client, (0.0, 0))
        if self._clock() - start >= LOCKOUT_WINDOW_S:
            return False
        return count >= float(found.value)  # type: ignore[arg-type]

    def auth_failed(self, client: str) -> None:
        """Count a rejected key from ``client`` (only while ``auth_lockout`` is set)."""
        if "auth_lockout" not in self.plan.faults:
            return
        now = self._clock()
        start, count = self._auth_failures.get(client, (now, 0))
        if now - start >= LOCKOUT_WINDOW_S:
            start, count = now, 0
        self._auth_failures[client] = (start, count + 1)
