"""deploy/docker: what can be checked without a Docker engine (none runs here).

The compose file is parsed and cross-checked against the files it mounts,
the configs it feeds benchd and Prometheus, and the Grafana provisioning;
the Dockerfile is checked for its stages, user and health check, and the
health check's own command is run against a real server.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from deploy_processes import free_port, run_refstore
from deploy_support import DEPLOY, ROOT, load_yaml, require_tool

from benchd.config.load import load_config

DOCKER = DEPLOY / "docker"
COMPOSE = DOCKER / "compose.yml"
DOCKERFILE = DOCKER / "Dockerfile"
SERVICES = {"refstore", "benchd", "prometheus", "alertmanager", "webhook", "grafana"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(COMPOSE)
    return data


def _mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Bind mounts of a service: container path -> host path."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith((".", "/")):
            mounts[target] = (DOCKER / source).resolve()
    return mounts


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_compose_runs_benchd_refstore_prometheus_grafana_and_alertmanager(
    compose: dict[str, Any],
) -> None:
    assert set(compose["services"]) == SERVICES
    for name, service in compose["services"].items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin {image}"
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name}: publish {port} on loopback only"


def test_compose_mounts_and_builds_only_files_that_exist(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for target, source in _mounts(service).items():
            assert source.exists(), f"{name}: {source} (mounted at {target}) does not exist"
        build = service.get("build")
        if build:
            context = (DOCKER / build["context"]).resolve()
            assert context == ROOT and (context / build["dockerfile"]).resolve() == DOCKERFILE
    for secret in compose["secrets"].values():
        # the key file is created by the user (docs); its directory ships
        assert (DOCKER / secret["file"]).parent.is_dir()


def test_compose_benchd_config_loads_and_probes_the_refstore_service(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    benchd = compose["services"]["benchd"]
    config_path = _mounts(benchd)["/etc/benchd/benchd.toml"]
    key_path = f"/run/secrets/{benchd['secrets'][0]}"
    key = tmp_path / "api-key"
    key.write_text("compose-test-key\n", encoding="utf-8")
    text = config_path.read_text(encoding="utf-8")
    assert key_path in text
    local = tmp_path / "benchd.toml"
    local.write_text(text.replace(key_path, str(key)), encoding="utf-8")
    probe = load_config(local).probes[0]
    assert probe.target.settings.url == "http://refstore:8084"
    refstore_cmd = " ".join(compose["services"]["refstore"]["entrypoint"])
    assert "--listen 0.0.0.0:8084" in refstore_cmd
    assert f"cat {key_path}" in refstore_cmd  # one key for both sides


@pytest.mark.promtool
def test_compose_prometheus_config_is_valid_with_the_mounted_rules(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    mounts = _mounts(compose["services"]["prometheus"])
    config = yaml.safe_load(mounts["/etc/prometheus/prometheus.yml"].read_text(encoding="utf-8"))
    assert sorted(config["rule_files"]) == sorted(
        t for t in mounts if t.startswith("/etc/prometheus/rules/")
    )
    config["rule_files"] = [str(mounts[f]) for f in config["rule_files"]]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = subprocess.run(
        [require_tool("promtool"), "check", "config", str(local)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in config["scrape_configs"]}
    assert jobs["benchd"] == ["benchd:9108"]
    alertmanagers = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert [t.split(":")[0] for t in alertmanagers] == ["alertmanager"]


def test_compose_grafana_is_provisioned_with_the_dashboard(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    mounts = _mounts(grafana)
    provisioning = mounts["/etc/grafana/provisioning"]
    provider = load_yaml(provisioning / "dashboards" / "benchd.yml")["providers"][0]
    dashboards = [t for t in mounts if t.startswith(provider["options"]["path"] + "/")]
    assert [mounts[t].name for t in dashboards] == ["benchd.json"]
    assert json.loads(mounts[dashboards[0]].read_text(encoding="utf-8"))["uid"] == "benchd"
    datasource = load_yaml(provisioning / "datasources" / "prometheus.yml")["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home in dashboards


def test_compose_alertmanager_runs_the_shipped_config_and_its_webhook_receiver(
    compose: dict[str, Any],
) -> None:
    """benchd -> Prometheus -> Alertmanager -> webhook, with the files deploy/prometheus ships."""
    services = compose["services"]
    mounted = _mounts(services["alertmanager"])["/etc/alertmanager/alertmanager.yml"]
    assert mounted == DEPLOY / "prometheus" / "alertmanager.yml"
    config = load_yaml(mounted)
    (receiver,) = [r for r in config["receivers"] if r["name"] == config["route"]["receiver"]]
    hook = urlsplit(receiver["webhook_configs"][0]["url"])
    assert hook.hostname == "127.0.0.1"  # reachable only inside alertmanager's namespace:
    webhook = services["webhook"]
    assert webhook["network_mode"] == "service:alertmanager"  # ...which the receiver shares
    script = _mounts(webhook)[webhook["entrypoint"][1]]
    assert script == DEPLOY / "prometheus" / "webhook_receiver.py"
    assert webhook["entrypoint"][2:] == ["--listen", f"127.0.0.1:{hook.port}"]
    assert "alertmanager" in services["prometheus"]["depends_on"]


def test_dockerfile_is_multi_stage_and_runs_non_root() -> None:
    instructions = _instructions()
    stages = [args for op, args in instructions if op == "FROM"]
    assert len(stages) >= 2 and any(" AS build" in s for s in stages)
    users = [args for op, args in instructions if op == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}
    copies = [args.split() for op, args in instructions if op == "COPY" and "--from" not in args]
    for args in copies:
        for source in args[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: not in the build context"
    ignored = (DOCKER / "Dockerfile.dockerignore").read_text(encoding="utf-8")
    for args in copies:
        for source in args[:-1]:
            assert f"!{source.rstrip('/')}" in ignored.replace("/\n", "\n"), source


def _healthcheck() -> list[str]:
    check = next(args for op, args in _instructions() if op == "HEALTHCHECK")
    command: list[str] = json.loads(check.split("CMD", 1)[1].strip())
    return command


def test_dockerfile_health_check_asks_healthz_with_python_not_curl() -> None:
    command = _healthcheck()
    assert command[0] == "python" and "curl" not in " ".join(command)
    env = dict(
        re.findall(
            r"(\w+)=(\S+)", next(a for op, a in _instructions() if op == "ENV" and "HEALTH" in a)
        )
    )
    assert env["BENCHD_HEALTH_URL"].endswith(":9108/healthz")
    assert shlex.split(next(a for op, a in _instructions() if op == "EXPOSE")) == ["9108"]


def _run_healthcheck(url: str) -> subprocess.CompletedProcess[str]:
    command = _healthcheck()
    return subprocess.run(
        [sys.executable, *command[1:]],
        env={"BENCHD_HEALTH_URL": url},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_health_check_command_passes_on_a_live_server_and_fails_cleanly_without_one() -> None:
    with run_refstore(secrets.token_urlsafe(16)) as store:
        assert _run_healthcheck(f"{store.url}/health").returncode == 0
    down = _run_healthcheck(f"http://127.0.0.1:{free_port()}/healthz")
    assert down.returncode == 1 and down.stderr == ""
