"""deploy/grafana: the dashboard imports as is, and every panel query returns data.

The end-to-end test starts the real ``benchd run`` (embedded default) and a
real Prometheus (Debian's ``/usr/bin/prometheus``) scraping it every second,
then runs each panel's PromQL through ``/api/v1/query`` with the dashboard's
template variables substituted.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deploy_processes import prometheus_query, run_benchd, run_prometheus, wait_for
from deploy_support import DEPLOY, catalogue_metrics, load_yaml, metric_names, require_tool

DASHBOARD = DEPLOY / "grafana" / "benchd.json"
PROVISIONING = DEPLOY / "grafana" / "provisioning"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Template variables as a user would pick them on the embedded default. The
# embedded probe cycles every ~30 s, so a 2m window spans a few cycles.
SUBSTITUTIONS = {
    "$probe": "embedded",
    "$metric": "recall|ndcg",
    "$window": "2m",
}
# Two cycles (the second one carries the drift comparison) take ~35-45 s.
DATA_TIMEOUT_S = 75.0


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def _panels() -> list[dict[str, Any]]:
    return [p for p in _dashboard()["panels"] if p["type"] != "row"]


def _targets() -> list[tuple[str, str]]:
    return [(f"{p['title']} [{t['refId']}]", t["expr"]) for p in _panels() for t in p["targets"]]


def _annotations() -> list[dict[str, Any]]:
    return [a for a in _dashboard()["annotations"]["list"] if "expr" in a]


def _substitute(expr: str) -> str:
    for name, value in SUBSTITUTIONS.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def test_dashboard_uses_the_datasource_variable_everywhere() -> None:
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["probe"]["definition"] == "label_values(benchd_up, probe)"
    for panel in _panels():
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert all(t["datasource"] == DATASOURCE for t in panel["targets"]), panel["title"]
    assert all(a["datasource"] == DATASOURCE for a in _annotations())
    # importable as is: no __inputs to fill in, a stable uid, unique panel ids
    dashboard = _dashboard()
    assert "__inputs" not in dashboard and dashboard["uid"] == "benchd"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_queries_only_catalogued_metrics() -> None:
    known = catalogue_metrics()
    for title, expr in [*_targets(), *((a["name"], a["expr"]) for a in _annotations())]:
        assert metric_names(expr) <= known, f"{title}: {sorted(metric_names(expr) - known)}"


def test_dashboard_covers_what_operators_need() -> None:
    exprs = " ".join(expr for _, expr in _targets())
    for needed in (
        "benchd_quality",
        "benchd_category_quality",
        "benchd_drift_delta",
        "benchd_request_duration_seconds_bucket",
        "benchd_requests_total",
        "benchd_seed_last_records",
        "benchd_time_to_searchable_seconds",
        "benchd_threshold_breached",
    ):
        assert needed in exprs, needed
    assert re.search(r"histogram_quantile\(0\.99, sum by \([^)]*\ble\b", exprs)
    assert "benchd_last_cycle_degraded" in exprs and "benchd_cycle_degraded_total" in exprs
    assert "benchd_short_answers_total" in exprs and "benchd_short_answers_last_cycle" in exprs
    annotations = {a["name"]: a["expr"] for a in _annotations()}
    assert "benchd_drift_detected" in annotations["Drift detected"]
    # keyed on the label-free signal: the real server's /health carries no model label
    assert "benchd_drift_model_changed" in annotations["Model change"]
    assert "benchd_probe_info" not in annotations["Model change"]


def test_the_first_row_shows_drift_and_model_change_per_probe() -> None:
    first = [p for p in _panels() if p["gridPos"]["y"] == 1]
    exprs = {p["title"]: p["targets"][0]["expr"] for p in first}
    drift = next(e for e in exprs.values() if "benchd_drift_detected" in e)
    changed = next(e for e in exprs.values() if "benchd_drift_model_changed" in e)
    for expr in (drift, changed):
        assert expr.startswith("max by (probe) (")  # one value per probe
    assert sum(p["gridPos"]["w"] for p in first) == 24  # one row, no overlap


def test_provisioning_points_grafana_at_the_dashboard_and_prometheus() -> None:
    provider = load_yaml(PROVISIONING / "dashboards" / "benchd.yml")["providers"][0]
    assert provider["type"] == "file"
    datasource = load_yaml(PROVISIONING / "datasources" / "prometheus.yml")["datasources"][0]
    assert datasource["type"] == "prometheus" and datasource["isDefault"] is True


@pytest.fixture(scope="module")
def prometheus_with_benchd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    prometheus = require_tool("prometheus")
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    with run_benchd() as benchd:
        target = benchd.url.removeprefix("http://")
        with run_prometheus(prometheus, workdir, [target]) as prom:
            yield prom.url


def _finite(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(sample["value"][1])) for sample in result)


@pytest.mark.promtool
def test_every_panel_query_returns_data_from_a_real_prometheus(
    prometheus_with_benchd: str,
) -> None:
    url = prometheus_with_benchd
    deadline = time.monotonic() + DATA_TIMEOUT_S
    queries = [(title, _substitute(expr)) for title, expr in _targets()]
    missing: dict[str, str] = {}

    def ready() -> bool:
        missing.clear()
        missing.update({t: e for t, e in queries if not _finite(prometheus_query(url, e))})
        return not missing

    try:
        wait_for(ready, timeout=max(deadline - time.monotonic(), 1.0), what="panel data")
    except AssertionError:
        pytest.fail(
            f"panels without data after {DATA_TIMEOUT_S:.0f} s: {json.dumps(missing, indent=1)}"
        )


@pytest.mark.promtool
def test_annotation_and_variable_queries_are_valid_promql(prometheus_with_benchd: str) -> None:
    url = prometheus_with_benchd
    for annotation in _annotations():
        # a healthy run has no drift and no model change: valid and empty is right
        prometheus_query(url, _substitute(annotation["expr"]))
    probes = wait_for(
        lambda: prometheus_query(url, "group by (probe) (benchd_up)"),
        timeout=DATA_TIMEOUT_S,
        what="benchd_up",
    )
    assert [p["metric"]["probe"] for p in probes] == ["embedded"]


@pytest.mark.promtool
def test_the_thresholds_panel_counts_breaches_and_reads_zero_without_thresholds(
    tmp_path: Path,
) -> None:
    """The panel's own PromQL, through promtool: 1 of 2 breached, none breached, none set.

    The embedded default sets no thresholds, so the live test above sees only
    the zero branch; this one sees the count.
    """
    panel = next(p for p in _panels() if "benchd_threshold_breached" in p["targets"][0]["expr"])
    expr = panel["targets"][0]["expr"].replace("$probe", ".*")
    series = {
        'benchd_up{probe="staging"}': "1x5",
        'benchd_up{probe="calm"}': "1x5",
        'benchd_up{probe="bare"}': "1x5",
        'benchd_threshold_breached{probe="staging",threshold="serial:recall@10>=0.8"}': "1x5",
        'benchd_threshold_breached{probe="staging",threshold="load:p99<=0.5"}': "0x5",
        'benchd_threshold_breached{probe="calm",threshold="serial:hit@5>=0.9"}': "0x5",
    }
    lines = ["rule_files: []", "evaluation_interval: 1m", "tests:", "  - interval: 1m",
             "    input_series:"]  # fmt: skip
    for name, values in series.items():
        lines += [f"      - series: {json.dumps(name)}", f"        values: {json.dumps(values)}"]
    lines += ["    promql_expr_test:", f"      - expr: {json.dumps(expr)}", "        eval_time: 2m",
              "        exp_samples:"]  # fmt: skip
    for probe, count in (("staging", 1), ("calm", 0), ("bare", 0)):
        lines += [f"          - labels: '{{probe=\"{probe}\"}}'", f"            value: {count}"]
    unit = tmp_path / "panel_test.yml"
    unit.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [require_tool("promtool"), "test", "rules", unit.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.promtool
def test_the_drift_and_model_change_stats_say_not_compared_no_and_yes(tmp_path: Path) -> None:
    """The first row's stats through promtool: drifted, clean, and never compared (-1)."""
    series = {
        'benchd_up{probe="drifted"}': "1x5",
        'benchd_up{probe="clean"}': "1x5",
        'benchd_up{probe="fresh"}': "1x5",
        'benchd_drift_detected{probe="drifted",metric="recall",k="10"}': "1x5",
        'benchd_drift_detected{probe="drifted",metric="ndcg",k="10"}': "0x5",
        'benchd_drift_detected{probe="clean",metric="recall",k="10"}': "0x5",
        'benchd_drift_model_changed{probe="drifted"}': "1x5",
        'benchd_drift_model_changed{probe="clean"}': "0x5",
    }
    expected = {"drifted": 1, "clean": 0, "fresh": -1}
    lines = ["rule_files: []", "evaluation_interval: 1m", "tests:", "  - interval: 1m",
             "    input_series:"]  # fmt: skip
    for name, values in series.items():
        lines += [f"      - series: {json.dumps(name)}", f"        values: {json.dumps(values)}"]
    lines.append("    promql_expr_test:")
    first = [p for p in _panels() if p["gridPos"]["y"] == 1]
    stats = [p for p in first if "benchd_drift_" in p["targets"][0]["expr"]]
    assert len(stats) == 2
    for panel in stats:
        expr = panel["targets"][0]["expr"].replace("$probe", ".*")
        lines += [f"      - expr: {json.dumps(expr)}", "        eval_time: 2m",
                  "        exp_samples:"]  # fmt: skip
        for probe, value in expected.items():
            lines += [f"          - labels: '{{probe=\"{probe}\"}}'", f"            value: {value}"]
        mapped = panel["fieldConfig"]["defaults"]["mappings"][0]["options"]
        assert set(mapped) == {"-1", "0", "1"}, panel["title"]  # each value has words
    unit = tmp_path / "stats_test.yml"
    unit.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [require_tool("promtool"), "test", "rules", unit.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.promtool
def test_the_short_answers_panel_counts_them_and_marks_kinds_that_do_not(tmp_path: Path) -> None:
    """Through promtool: a pgvector-like probe's count, and -1 for a kind that exports none."""
    panel = next(p for p in _panels() if "benchd_short_answers_total" in p["targets"][0]["expr"])
    series = {
        'benchd_up{probe="vectors"}': "1x5",
        'benchd_up{probe="zengram"}': "1x5",
        'benchd_short_answers_total{probe="vectors"}': "0+2x5",
        'benchd_short_answers_last_cycle{probe="vectors",pass="serial"}': "2x5",
    }
    window = {"$probe": ".*", "$window": "2m"}
    expected = [
        [('{probe="vectors"}', 4), ('{probe="zengram",window="not measured"}', -1)],
        [('{pass="serial",probe="vectors"}', 2), ('{pass="not measured",probe="zengram"}', -1)],
    ]
    lines = ["rule_files: []", "evaluation_interval: 1m", "tests:", "  - interval: 1m",
             "    input_series:"]  # fmt: skip
    for name, values in series.items():
        lines += [f"      - series: {json.dumps(name)}", f"        values: {json.dumps(values)}"]
    lines.append("    promql_expr_test:")
    for target, samples in zip(panel["targets"], expected, strict=True):
        expr = target["expr"]
        for name, value in window.items():
            expr = expr.replace(name, value)
        lines += [f"      - expr: {json.dumps(expr)}", "        eval_time: 4m",
                  "        exp_samples:"]  # fmt: skip
        for labels, number in samples:
            lines += [f"          - labels: {json.dumps(labels)}", f"            value: {number}"]
    unit = tmp_path / "short_answers_test.yml"
    unit.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [require_tool("promtool"), "test", "rules", unit.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
