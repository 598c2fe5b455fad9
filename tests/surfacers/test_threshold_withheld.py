"""A latency threshold on a withheld percentile says what it was checked against."""

from __future__ import annotations

import dataclasses

from cycles import make_result

from benchd.config.thresholds import parse_threshold
from benchd.result import CycleResult, LatencySummary
from benchd.scoring.thresholds import evaluate


def _with_latency(count: int, slowest: float) -> CycleResult:
    summary = LatencySummary(
        count=count, p50=0.01, p90=0.05, p95=slowest, p99=slowest, max=slowest, mean=0.02
    )
    return dataclasses.replace(make_result(), serial_latency=summary)


def test_p99_from_16_samples_says_it_is_the_maximum_and_what_it_needs() -> None:
    verdict = evaluate(parse_threshold("p99<0.2"), _with_latency(16, 0.3))
    assert verdict.breached and verdict.value == 0.3
    assert verdict.note == (
        "p99 needs >= 100 samples and the serial pass had 16: checked against their maximum"
    )
    assert verdict.describe().endswith("needs < 0.2; " + verdict.note)


def test_a_met_threshold_on_too_few_samples_says_so_too() -> None:
    verdict = evaluate(parse_threshold("p95<0.5"), _with_latency(16, 0.3))
    assert not verdict.breached
    assert verdict.describe() == (
        "serial:p95<0.5: p95 = 0.3 (ok; p95 needs >= 20 samples and the serial pass had 16: "
        "checked against their maximum)"
    )


def test_enough_samples_or_another_measure_carry_no_note() -> None:
    assert evaluate(parse_threshold("p99<0.2"), _with_latency(100, 0.1)).note == ""
    assert evaluate(parse_threshold("max<0.2"), _with_latency(3, 0.1)).note == ""
    assert evaluate(parse_threshold("p50<0.2"), _with_latency(16, 0.1)).note == ""
