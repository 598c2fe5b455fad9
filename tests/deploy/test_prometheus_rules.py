"""deploy/prometheus: the rule files pass promtool and their unit tests, and say what they must.

``promtool check rules`` and ``promtool test rules`` (Debian's ``prometheus``
package) run the files in deploy/prometheus/tests/; the structural tests here
need no promtool and keep the files honest about the metrics catalogue.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from deploy_support import (
    DOCS,
    PROMETHEUS_DIR,
    alert_rules,
    catalogue_metrics,
    load_yaml,
    metric_names,
    require_tool,
    rule_groups,
)

RULE_FILES = (PROMETHEUS_DIR / "alerts.yml", PROMETHEUS_DIR / "recording.yml")
UNIT_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
ALERT_NAMES = [rule["alert"] for rule in alert_rules()]
_MATCHER = re.compile(r"[{,]\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_CATALOGUE_LABEL = re.compile(r"^\|\s*`([a-z_]+)`\s*\|", re.MULTILINE)
# Labels Prometheus adds to every scraped series, and the histogram bucket label.
_TARGET_LABELS = {"job", "instance", "le"}


def _run(args: list[str], cwd: Path = PROMETHEUS_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def _recorded_names() -> set[str]:
    return {
        r["record"] for f in RULE_FILES for g in rule_groups(f) for r in g["rules"] if "record" in r
    }


def _all_rules() -> list[dict[str, Any]]:
    return [r for f in RULE_FILES for g in rule_groups(f) for r in g["rules"]]


def _catalogue_labels() -> set[str]:
    text = (DOCS / "metrics.md").read_text(encoding="utf-8")
    section = text.split("## Labels", 1)[1].split("\n## ", 1)[0]
    return set(_CATALOGUE_LABEL.findall(section))


@pytest.mark.promtool
def test_promtool_check_rules_accepts_both_rule_files() -> None:
    result = _run([require_tool("promtool"), "check", "rules", *map(str, RULE_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)


@pytest.mark.promtool
@pytest.mark.parametrize("unit_test", UNIT_TESTS, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(unit_test: Path) -> None:
    # rule_files are relative to the unit test file, so run from its directory
    result = _run([require_tool("promtool"), "test", "rules", unit_test.name], cwd=unit_test.parent)
    assert result.returncode == 0, result.stdout + result.stderr


def test_unit_tests_run_from_their_own_directory() -> None:
    """rule_files in the unit tests point at the shipped files, not copies."""
    for unit_test in UNIT_TESTS:
        for rule_file in load_yaml(unit_test)["rule_files"]:
            assert (PROMETHEUS_DIR / "tests" / rule_file).resolve() in {
                f.resolve() for f in RULE_FILES
            }, f"{unit_test.name}: {rule_file}"


@pytest.mark.parametrize("alert", ALERT_NAMES)
def test_every_alert_has_for_severity_and_runbook_annotations(alert: str) -> None:
    rule = next(r for r in alert_rules() if r["alert"] == alert)
    assert re.fullmatch(r"\d+[smh]", rule["for"]), rule.get("for")
    assert rule["labels"]["severity"] in {"critical", "warning"}
    annotations = rule["annotations"]
    assert {"summary", "description", "runbook_url"} <= set(annotations)
    anchor = annotations["runbook_url"].rsplit("#", 1)[1]
    headings = {
        line.lstrip("#").strip().lower()
        for line in (DOCS / "deploy.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("### ")
    }
    assert anchor in headings, f"docs/deploy.md has no '### {anchor}' runbook section"


@pytest.mark.parametrize("alert", ALERT_NAMES)
def test_every_alert_is_unit_tested_firing_and_not_firing(alert: str) -> None:
    cases = [
        case
        for unit_test in UNIT_TESTS
        for group in load_yaml(unit_test)["tests"]
        for case in group.get("alert_rule_test", [])
        if case["alertname"] == alert
    ]
    assert any(case.get("exp_alerts") for case in cases), f"{alert}: no firing case"
    assert any(not case.get("exp_alerts") for case in cases), f"{alert}: no silent case"


def test_rules_name_only_catalogued_metrics_or_recorded_series() -> None:
    known = catalogue_metrics() | _recorded_names()
    for rule in _all_rules():
        unknown = metric_names(str(rule["expr"])) - known
        assert not unknown, f"{rule.get('alert') or rule.get('record')}: {sorted(unknown)}"


def test_rules_use_only_catalogued_labels() -> None:
    known = _catalogue_labels() | _TARGET_LABELS
    for rule in _all_rules():
        expr = str(rule["expr"])
        used = set(_MATCHER.findall(expr))
        for group in _GROUPING.findall(expr):
            used |= {label.strip() for label in group.split(",") if label.strip()}
        assert used <= known, f"{rule.get('alert') or rule.get('record')}: {sorted(used - known)}"


def test_drift_alert_covers_recall_and_ndcg() -> None:
    rule = next(r for r in alert_rules() if r["alert"] == "BenchdQualityDrift")
    assert "benchd_drift_detected" in rule["expr"]
    assert re.search(r'metric=~"recall\|ndcg"', rule["expr"])


@pytest.mark.promtool
def test_example_prometheus_config_is_valid_and_loads_both_rule_files() -> None:
    config = PROMETHEUS_DIR / "prometheus.yml"
    result = _run([require_tool("promtool"), "check", "config", str(config)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(load_yaml(config)["rule_files"]) == sorted(f.name for f in RULE_FILES)
