"""Pass/fail thresholds (k6 style): the ``[probe.thresholds]`` settings, parsed and checked.

A threshold is ``[PASS:]MEASURE OP BOUND``:

- ``PASS`` is ``serial`` (the default: the exact, one-at-a-time pass) or
  ``load`` (the answers timed under load);
- ``MEASURE`` is a ranking measure (``recall@10``, ``ndcg@5``, ``rr``, ...,
  0-1), a set measure of a store whose search answers a set (``hit``,
  ``recall``, ``recall_all``, ``precision``: over the whole answer, no
  ``@k``; ``recall@all`` as ``/metrics`` labels it is the same), a latency
  percentile in seconds (``p50``, ``p90``, ``p95``, ``p99``, ``max``; under
  open-loop load the corrected latency), or ``error_ratio`` (failed
  requests / requests in that pass, 0-1);
- ``OP`` is ``<``, ``<=``, ``>`` or ``>=``: the condition that must *hold*.

``--fail-under recall@10=0.8`` is ``recall@10>=0.8``. The config's
``[probe.thresholds.serial]`` / ``[probe.thresholds.load]`` tables map a
measure to a bound: ranking measures are floors (``>=``), latency and
``error_ratio`` are ceilings (``<=``).

Everything a threshold can get wrong (an unknown measure, a bound out of
range, a cut-off the probe does not measure, a set measure on a probe that
ranks or a rank measure on one that answers sets, a load pass the probe
does not run) is found by :func:`parse_threshold` and :func:`check_threshold` before
any cycle runs. Judging a cycle against a threshold is
:func:`benchd.scoring.thresholds.evaluate`; its verdict
(:class:`benchd.result.Verdict`) is carried in the result.

The measure names live here (config names them; :mod:`benchd.scoring.ranking`
computes them), so config imports nothing of scoring's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchd.errors import UsageError

__all__ = [
    "LATENCY_MEASURES",
    "METRIC_NAMES",
    "PASSES",
    "SET_METRIC_NAMES",
    "UNCUT_METRIC_NAMES",
    "Threshold",
    "ThresholdSettings",
    "check_threshold",
    "parse_fail_under",
    "parse_threshold",
    "threshold_problem",
]

# Cut-off measure names (keys are "<name>@<k>") and uncut ones, in report order.
METRIC_NAMES: tuple[str, ...] = (
    "hit",
    "recall",
    "recall_all",
    "precision",
    "mrr",
    "ndcg",
    "map",
)
UNCUT_METRIC_NAMES: tuple[str, ...] = ("rr", "ap", "r_precision")
SET_METRIC_NAMES: tuple[str, ...] = ("hit", "recall", "recall_all", "precision")
"""The measures of a search that answers a set, over the whole set (no ``@k``)."""
UNCUT_K = "all"  # how /metrics labels the k of a measure without a cut-off
PASSES: tuple[str, ...] = ("serial", "load")
LATENCY_MEASURES: tuple[str, ...] = ("p50", "p90", "p95", "p99", "max")

_PASS = r"(?:(?P<pass>[a-z]+):)?"
_MEASURE = rf"(?P<measure>[a-z_0-9]+(?:@(?:\d+|{UNCUT_K}))?)"
_NUMBER = r"(?P<bound>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_EXPR = re.compile(rf"^{_PASS}{_MEASURE}\s*(?P<op><=|>=|<|>)\s*{_NUMBER}$")
_FAIL_UNDER = re.compile(rf"^{_PASS}{_MEASURE}={_NUMBER}$")


@dataclass(frozen=True, slots=True)
class Threshold:
    """One condition on one pass's measure; ``name`` is its bounded label value."""

    pass_: str
    measure: str
    op: str
    bound: float

    @property
    def name(self) -> str:
        return f"{self.pass_}:{self.measure}{self.op}{self.bound:g}"

    @property
    def family(self) -> str:
        """``quality``, ``latency`` or ``errors``."""
        if self.measure in LATENCY_MEASURES:
            return "latency"
        return "errors" if self.measure == "error_ratio" else "quality"

    @property
    def cutoff(self) -> int | None:
        _, _, k = self.measure.partition("@")
        return int(k) if k else None


@dataclass(frozen=True, slots=True)
class ThresholdSettings:
    """``[probe.thresholds]``: ``serial`` and ``load`` tables of measure -> bound."""

    serial: dict[str, float] = field(default_factory=dict)
    load: dict[str, float] = field(default_factory=dict)

    def thresholds(self) -> tuple[Threshold, ...]:
        """The tables as thresholds (unvalidated: see :func:`threshold_problem`)."""
        out = []
        for pass_, table in (("serial", self.serial), ("load", self.load)):
            for key, bound in table.items():
                measure = uncut(key)
                op = ">=" if _family(measure) == "quality" else "<="
                out.append(Threshold(pass_, measure, op, float(bound)))
        return tuple(out)


def uncut(measure: str) -> str:
    """``recall@all`` (as ``/metrics`` labels a measure without a cut-off) -> ``recall``."""
    name, at, k = measure.partition("@")
    return name if at and k == UNCUT_K else measure


def _family(measure: str) -> str:
    if measure in LATENCY_MEASURES:
        return "latency"
    return "errors" if measure == "error_ratio" else "quality"


def threshold_problem(t: Threshold) -> str | None:
    """What is wrong with ``t`` on its own (unknown pass or measure, bound out of range)."""
    if t.pass_ not in PASSES:
        return f"unknown pass {t.pass_!r}; one of serial, load"
    name, at, k = t.measure.partition("@")
    if t.family == "quality":
        if name in UNCUT_METRIC_NAMES and at:
            return f"{name} has no cut-off; write {name} without @{k}"
        if name in METRIC_NAMES and name not in SET_METRIC_NAMES and not at:
            return f"{name} needs a cut-off, e.g. {name}@10"
        if name not in METRIC_NAMES and name not in UNCUT_METRIC_NAMES:
            known = ", ".join([*(f"{m}@K" for m in METRIC_NAMES), *UNCUT_METRIC_NAMES])
            sets = ", ".join(SET_METRIC_NAMES)
            extra = ", ".join([*LATENCY_MEASURES, "error_ratio"])
            return (
                f"unknown measure {t.measure!r}; one of {known}, {extra} "
                f"(and {sets} for a store whose search answers a set)"
            )
        if at and not 1 <= int(k) <= 100:
            return f"cut-off @{k} is out of range; k is 1..100"
    if not math.isfinite(t.bound):
        return f"bound {t.bound!r} is not a finite number"
    if t.family in ("quality", "errors") and not 0.0 <= t.bound <= 1.0:
        return f"{t.measure} is a ratio in 0..1; {t.bound:g} can never be met or is always met"
    if t.family == "latency" and t.bound <= 0:
        return f"{t.measure} is a latency in seconds; the bound must be > 0, got {t.bound:g}"
    return None


def parse_threshold(text: str, flag: str = "--threshold") -> Threshold:
    """``load:p99<0.2`` -> Threshold; a bad spec raises :class:`~benchd.errors.UsageError`."""
    m = _EXPR.match(text.strip())
    if m is None:
        raise UsageError(
            f"{flag} {text!r}: expected [serial:|load:]MEASURE<BOUND or MEASURE>=BOUND, "
            "e.g. p99<0.2, load:error_ratio<0.01, recall@10>=0.8"
        )
    spec = Threshold(m["pass"] or "serial", uncut(m["measure"]), m["op"], float(m["bound"]))
    return _checked(spec, flag, text)


def parse_fail_under(text: str) -> Threshold:
    """``recall@10=0.8`` (or ``load:recall@10=0.8``) -> ``recall@10>=0.8``."""
    m = _FAIL_UNDER.match(text.strip())
    if m is None:
        raise UsageError(
            f"--fail-under {text!r}: expected METRIC@K=VALUE such as recall@10=0.8 or rr=0.5"
        )
    spec = Threshold(m["pass"] or "serial", uncut(m["measure"]), ">=", float(m["bound"]))
    t = _checked(spec, "--fail-under", text)
    if t.family != "quality":
        raise UsageError(
            f"--fail-under {text!r}: {t.measure} is not a ranking measure; "
            f"use --threshold '{t.measure}<{m['bound']}'"
        )
    return t


def _checked(t: Threshold, flag: str, text: str) -> Threshold:
    problem = threshold_problem(t)
    if problem:
        raise UsageError(f"{flag} {text!r}: {problem}")
    return t


def check_threshold(
    t: Threshold, *, ks: Sequence[int], load_mode: str, unranked: bool = False
) -> str | None:
    """What keeps ``t`` from being measured by a probe with cut-offs ``ks``, that load mode,
    and a search that ranks or (``unranked``) answers a set."""
    if t.pass_ == "load" and load_mode == "serial":
        return "the probe has no load pass (load.mode = 'serial')"
    if t.family == "quality" and (problem := _shape_problem(t.measure, ks, unranked)):
        return problem
    k = t.cutoff
    if k is not None and k not in ks:
        return f"the probe measures k = {', '.join(map(str, ks))}, not {k}"
    return None


def _shape_problem(measure: str, ks: Sequence[int], unranked: bool) -> str | None:
    """A set measure on a probe that ranks, or a rank measure on one that answers sets."""
    is_set = measure in SET_METRIC_NAMES
    if unranked and not is_set:
        name = measure.partition("@")[0]
        instead = f"{name} (over the whole set)" if name in SET_METRIC_NAMES else (
            ", ".join(SET_METRIC_NAMES)
        )
        return (
            f"the probe's search answers a set (scored whole): {measure} is not measured "
            f"there (no rank, no cut-off); use {instead}"
        )
    if is_set and not unranked:
        return (
            f"{measure} without @k is the set measure of a store whose search answers a set; "
            f"this probe ranks: write {measure}@K (k = {', '.join(map(str, ks))})"
        )
    return None
