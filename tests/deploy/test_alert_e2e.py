"""End to end: an embedding-model change pages, through the shipped paging path.

Real processes only: ``benchd refstore`` (dense retrieval, hashing embedder
with 1024 dimensions), ``benchd run`` probing it every 2 s against a pinned
baseline, Debian's ``prometheus`` scraping benchd every second with
deploy/prometheus/alerts.yml and recording.yml loaded exactly as shipped,
Debian's ``prometheus-alertmanager`` with deploy/prometheus/alertmanager.yml
as shipped (its webhook URL the only substitution) and the shipped
deploy/prometheus/webhook_receiver.py receiving the page. The test degrades
the store's embedder to 16 dimensions through its admin endpoint and waits
for BenchdQualityDrift to go pending, then firing once its own ``for:`` has
passed, then for the page at the webhook.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_processes import (
    BENCHD,
    Running,
    page_due_seconds,
    prometheus_query,
    run_alertmanager,
    run_benchd,
    run_prometheus,
    run_refstore,
    run_webhook_receiver,
    wait_for,
)
from deploy_support import DEPLOY, PROMETHEUS_DIR, alert_rules, require_tool

ALERT = "BenchdQualityDrift"
PROBE = "e2e"
KEY_ENV = "BENCHD_E2E_KEY"
GOOD_EMBEDDER, BAD_EMBEDDER = "hash:1024", "hash:16"
# 60 queries: enough for the exact paired test to reach p < 0.01 (the
# 16-query smoke fixture barely can); the same arguments give the same file.
SYNTH_ARGS = ["--memories", "300", "--queries", "60", "--seed", "7"]
CONFIG = """\
[[probe]]
name = "{probe}"
fixture = "fixture.json"
k = [5, 10]
interval_s = 2.0
jitter_s = 0.0
timeout_s = 30.0
{baseline}

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "{key_env}"
namespace = "benchd-e2e"
cleanup = "before"

[probe.load]
mode = "serial"

[probe.budget]
unlimited = true  # the reference store runs without limits: deletes are not spaced
"""


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, duration
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]


def _for_seconds() -> float:
    return _seconds(next(r for r in alert_rules() if r["alert"] == ALERT)["for"])


def _benchd(args: list[str], env: dict[str, str], cwd: Path) -> None:
    result = subprocess.run(
        [*BENCHD, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, f"benchd {args[0]}: {result.stderr}"


def _write_configs(workdir: Path, store_url: str, env: dict[str, str]) -> Path:
    """A synthetic fixture, a config, and a baseline pinned on the good embedder."""
    _benchd(["synth", *SYNTH_ARGS, "--out", "fixture.json"], env, workdir)
    fields = {"probe": PROBE, "url": store_url, "key_env": KEY_ENV}
    (workdir / "pin.toml").write_text(CONFIG.format(baseline="", **fields), encoding="utf-8")
    _benchd(["baseline", "save", "--config", "pin.toml", "--out", "baseline.toml"], env, workdir)
    config = workdir / "benchd.toml"
    config.write_text(CONFIG.format(baseline='baseline = "baseline.toml"', **fields), "utf-8")
    return config


def _drift_alerts(prometheus: str) -> list[dict[str, Any]]:
    reply = httpx.get(f"{prometheus}/api/v1/alerts", timeout=10.0).json()
    assert reply["status"] == "success", reply
    return [a for a in reply["data"]["alerts"] if a["labels"]["alertname"] == ALERT]


def _is_recall_at_10(alert: dict[str, Any]) -> bool:
    return alert["labels"].get("metric") == "recall" and alert["labels"].get("k") == "10"


def _in_state(prometheus: str, state: str) -> list[dict[str, Any]]:
    return [a for a in _drift_alerts(prometheus) if a["state"] == state]


def _switch_embedder(store_url: str, key: str, spec: str) -> None:
    reply = httpx.post(
        f"{store_url}/admin/config", json={"embedder": spec}, headers={"x-api-key": key}, timeout=30
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["model"] == spec


def _model_change_annotation(prometheus: str) -> list[dict[str, Any]]:
    dashboard = json.loads((DEPLOY / "grafana" / "benchd.json").read_text(encoding="utf-8"))
    annotation = next(a for a in dashboard["annotations"]["list"] if a["name"] == "Model change")
    return prometheus_query(prometheus, annotation["expr"].replace("$probe", PROBE))


def _paged(hook: Running, deadline: float) -> dict[str, Any]:
    """The first firing BenchdQualityDrift alert the webhook receiver was sent."""
    payload = hook.logs.wait_json(
        lambda p: any(
            a["status"] == "firing" and a["labels"]["alertname"] == ALERT
            for a in p.get("alerts", [])
        ),
        deadline,
    )
    alert: dict[str, Any] = next(a for a in payload["alerts"] if a["labels"]["alertname"] == ALERT)
    return alert


@pytest.mark.promtool
@pytest.mark.timeout(420)
def test_embedding_model_change_pages_through_the_shipped_alertmanager(tmp_path: Path) -> None:
    prometheus = require_tool("prometheus")
    alertmanager = require_tool("prometheus-alertmanager")
    key = secrets.token_urlsafe(24)
    env = {KEY_ENV: key}
    rule_files = [PROMETHEUS_DIR / "recording.yml", PROMETHEUS_DIR / "alerts.yml"]
    refstore_args = ["--retriever", "dense", "--embedder", GOOD_EMBEDDER]
    with run_refstore(key, [*refstore_args, "--read-limit", "0", "--write-limit", "0"]) as store:
        config = _write_configs(tmp_path, store.url, env)
        with (
            run_benchd(["--config", str(config)], env=env) as benchd,
            run_webhook_receiver() as hook,
            run_alertmanager(alertmanager, tmp_path, hook.url) as am,
            run_prometheus(
                prometheus,
                tmp_path,
                [benchd.url.removeprefix("http://")],
                rule_files=rule_files,
                alertmanagers=[am.url.removeprefix("http://")],
            ) as prom,
        ):
            # Before the change: benchd compares with the baseline and finds nothing.
            before = wait_for(
                lambda: prometheus_query(
                    prom.url, f'benchd_drift_detected{{probe="{PROBE}", metric="recall"}}'
                ),
                timeout=30,
                what="a drift comparison scraped by Prometheus",
            )
            assert {s["value"][1] for s in before} == {"0"}
            assert _drift_alerts(prom.url) == []

            _switch_embedder(store.url, key, BAD_EMBEDDER)
            switched = time.monotonic()

            pending = wait_for(
                lambda: _in_state(prom.url, "pending") or _in_state(prom.url, "firing"),
                timeout=30,
                what=f"{ALERT} pending after the embedder switch",
            )
            assert _model_change_annotation(prom.url), "no model-change annotation"
            # the README's quick start promises recall@10 fires: that exact series, not
            # any of recall/nDCG at any k
            firing = wait_for(
                lambda: [a for a in _in_state(prom.url, "firing") if _is_recall_at_10(a)],
                timeout=_for_seconds() + 30,
                what=f"{ALERT} firing for recall@10 within its for: window",
            )
            # the group's first page is due group_wait (30 s) after the firing; the bound
            # adds one Prometheus resend and two evaluations (page_due_seconds: 92 s). A
            # bound against a hang, not a timing assertion.
            page = _paged(hook, time.monotonic() + page_due_seconds())
    assert time.monotonic() - switched >= _for_seconds()  # its for: was honoured
    alert = firing[0]
    assert alert["labels"]["probe"] == PROBE and alert["labels"]["severity"] == "critical"
    assert (alert["labels"]["metric"], alert["labels"]["k"]) == ("recall", "10")
    assert alert["annotations"]["runbook_url"].endswith("#benchdqualitydrift")
    assert pending[0]["labels"]["alertname"] == ALERT
    assert page["labels"]["probe"] == PROBE and page["labels"]["severity"] == "critical"
    assert page["annotations"]["runbook_url"] == alert["annotations"]["runbook_url"]
    # the page carries the values: recall@10 at the baseline and now, as benchd measured them
    told = re.search(
        r"dropped beyond noise: (\d\.\d{3}) → (\d\.\d{3}) \(baseline → now\)",
        page["annotations"]["summary"],
    )
    assert told is not None, page["annotations"]["summary"]
    assert float(told[1]) > float(told[2])
