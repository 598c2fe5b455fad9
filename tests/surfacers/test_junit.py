"""JUnit XML from hand-built results: what each cycle outcome and threshold becomes."""

from __future__ import annotations

import dataclasses

import junitparser
from cycles import make_result

from benchd.config.thresholds import parse_threshold
from benchd.scoring.thresholds import evaluate_all
from benchd.surfacers.junit import render_junit


def _suite(xml: str) -> junitparser.TestSuite:
    (suite,) = list(junitparser.JUnitXml.fromstring(xml))
    return suite


def test_a_degraded_cycle_is_a_failure_naming_its_reasons() -> None:
    result = dataclasses.replace(
        make_result(), outcome="degraded", degraded_reasons=("seed_incomplete", "rate_limited")
    )
    suite = _suite(render_junit([result]))
    assert (suite.tests, suite.failures, suite.errors) == (1, 1, 0)
    (case,) = list(suite)
    (failure,) = case.result
    assert isinstance(failure, junitparser.Failure) and failure.type == "degraded"
    assert failure.message == "degraded: seed_incomplete, rate_limited"
    allowed = _suite(render_junit([result], allow_degraded=True))
    assert (allowed.tests, allowed.failures, allowed.errors) == (1, 0, 0)
    (passed,) = list(allowed)
    assert passed.is_passed
    assert passed.system_out == "degraded: seed_incomplete, rate_limited (allowed)"


def test_control_characters_from_a_store_never_break_the_xml() -> None:
    result = make_result(outcome="failed", error_kind="decode", error_message="bad \x00\x1b byte")
    verdicts = evaluate_all([parse_threshold("recall@10>=0.5")], result)  # not measured
    suite = _suite(render_junit([dataclasses.replace(result, thresholds=verdicts)]))
    assert (suite.tests, suite.failures, suite.errors) == (2, 1, 1)
    cycle, _threshold = list(suite)
    (error,) = cycle.result
    assert error.type == "decode" and error.message == "outcome failed: bad ?? byte"
