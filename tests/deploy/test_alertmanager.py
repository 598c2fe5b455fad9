"""deploy/prometheus/alertmanager.yml, its webhook receiver and its systemd unit.

The config as shipped and each of its commented receiver examples pass
``amtool check-config``; its webhook receiver is the shipped
webhook_receiver.py's default address, and that script prints a real
Alertmanager payload; the systemd unit verifies and is rated OK. That
Alertmanager really delivers a benchd alert through this file is
tests/deploy/test_alert_e2e.py.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import yaml
from deploy_processes import free_port
from deploy_support import DEPLOY, PROMETHEUS_DIR, load_yaml, require_tool

ALERTMANAGER_YML = PROMETHEUS_DIR / "alertmanager.yml"
RECEIVER = PROMETHEUS_DIR / "webhook_receiver.py"
UNIT = DEPLOY / "systemd" / "benchd-alertmanager.service"

# A payload as Alertmanager 0.25 posts it (version 4), for one benchd alert.
PAYLOAD = {
    "version": "4",
    "status": "firing",
    "receiver": "webhook",
    "groupLabels": {"alertname": "BenchdQualityDrift", "probe": "staging"},
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "BenchdQualityDrift", "probe": "staging",
                       "metric": "recall", "k": "10", "severity": "critical"},
            "annotations": {"summary": "recall@10 dropped on staging",
                            "runbook_url": "https://example.org/docs/deploy.md#benchdqualitydrift"},
        }
    ],
}  # fmt: skip


def _check_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("amtool"), "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.promtool
def test_shipped_config_passes_amtool() -> None:
    result = _check_config(ALERTMANAGER_YML)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.promtool
def test_every_commented_example_is_valid_once_uncommented(tmp_path: Path) -> None:
    text = ALERTMANAGER_YML.read_text(encoding="utf-8")
    uncommented = re.sub(r"^( +)# ?", r"\1", text, flags=re.MULTILINE)
    config = yaml.safe_load(uncommented)
    names = {r["name"] for r in config["receivers"]}
    assert {"slack", "pagerduty", "opsgenie", "email"} <= names
    assert {r["receiver"] for r in config["route"]["routes"]} <= names
    path = tmp_path / "alertmanager.yml"
    path.write_text(uncommented, encoding="utf-8")
    result = _check_config(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_default_route_posts_to_the_shipped_receivers_address() -> None:
    config = load_yaml(ALERTMANAGER_YML)
    (receiver,) = [r for r in config["receivers"] if r["name"] == config["route"]["receiver"]]
    (hook,) = receiver["webhook_configs"]
    spec = importlib.util.spec_from_file_location("webhook_receiver", RECEIVER)
    assert spec is not None and spec.loader is not None
    receiver_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(receiver_module)
    assert hook["url"] == f"http://{receiver_module.DEFAULT_LISTEN}/"
    assert "probe" in config["route"]["group_by"]


def test_webhook_receiver_prints_each_alert_and_rejects_junk() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(RECEIVER), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        # printed once the socket is bound: no wait needed after it
        assert proc.stderr is not None and "webhook receiver on" in proc.stderr.readline()
        assert httpx.post(url, json=PAYLOAD, timeout=5).status_code == 200
        assert httpx.post(url, content=b"not json", timeout=5).status_code == 400
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert out.splitlines() == [
        "FIRING BenchdQualityDrift probe=staging metric=recall k=10 severity=critical: "
        "recall@10 dropped on staging (https://example.org/docs/deploy.md#benchdqualitydrift)"
    ]


def test_webhook_receiver_json_mode_prints_the_payload_as_one_line() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(RECEIVER), "--listen", f"127.0.0.1:{port}", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None and "webhook receiver on" in proc.stderr.readline()
        reply = httpx.post(f"http://127.0.0.1:{port}/", json=PAYLOAD, timeout=5)
        assert reply.status_code == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert [json.loads(line) for line in out.splitlines()] == [PAYLOAD]


def test_pages_posted_at_once_come_out_one_per_line(tmp_path: Path) -> None:
    """Alertmanager flushes groups that fired together at the same instant, on parallel
    connections: each page is still one whole line (test_alert_e2e read two pages printed
    into one line as no page at all)."""
    port = free_port()
    printed = tmp_path / "pages.jsonl"  # a file, not a pipe: nothing here reads it meanwhile
    with printed.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, str(RECEIVER), "--listen", f"127.0.0.1:{port}", "--json"],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
    pages = [
        {**PAYLOAD, "groupKey": f"group-{i}", "pad": "x" * (i * 997 % 8_000)} for i in range(200)
    ]
    posters = 4  # below the receiver's listen backlog (5): a connection is never refused
    barrier = threading.Barrier(posters)

    def post_some(share: list[dict[str, object]]) -> None:
        with httpx.Client(timeout=30) as client:
            barrier.wait()
            for page in share:
                assert client.post(f"http://127.0.0.1:{port}/", json=page).status_code == 200

    try:
        assert proc.stderr is not None and "webhook receiver on" in proc.stderr.readline()
        threads = [
            threading.Thread(target=post_some, args=(pages[i::posters],)) for i in range(posters)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
    got = [json.loads(line) for line in printed.read_text(encoding="utf-8").splitlines()]
    assert sorted(p["groupKey"] for p in got) == sorted(p["groupKey"] for p in pages)


def _unit_lines(key: str) -> list[str]:
    lines = UNIT.read_text(encoding="utf-8").splitlines()
    return [ln.split("=", 1)[1] for ln in lines if ln.startswith(f"{key}=")]


def test_alertmanager_unit_runs_the_shipped_config_checked_first() -> None:
    (start,) = _unit_lines("ExecStart")
    (check,) = _unit_lines("ExecStartPre")
    assert "--config.file=/etc/benchd/alertmanager.yml" in start
    assert "--web.listen-address=127.0.0.1:9093" in start  # where prometheus.yml looks
    assert check.endswith("amtool check-config /etc/benchd/alertmanager.yml")
    prometheus = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    targets = prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert targets == ["127.0.0.1:9093"]
    assert _unit_lines("DynamicUser") == ["yes"] and _unit_lines("StateDirectory")


@pytest.mark.parametrize("args", [["verify"], ["security", "--offline=yes"]])
def test_alertmanager_unit_verifies_and_rates_ok(tmp_path: Path, args: list[str]) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (systemd package)")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text(encoding="utf-8"), encoding="utf-8")
    binaries = {"/usr/bin/prometheus-alertmanager", "/usr/bin/amtool"}
    if args == ["verify"] and not all(Path(b).is_file() for b in binaries):
        pytest.skip("prometheus-alertmanager is not installed (systemd-analyze checks ExecStart)")
    result = subprocess.run(
        [tool, *args, str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    if args == ["verify"]:
        assert result.stderr.strip() == "", result.stderr
    else:
        exposure = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
        assert exposure is not None and float(exposure.group(1)) <= 2.0, result.stdout
