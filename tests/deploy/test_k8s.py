"""deploy/k8s: the kustomize base renders, validates strictly, and configures benchd right.

Rendering: ``kubectl kustomize`` when kubectl is installed, and always an
offline renderer that reads the kustomization's resources and generator
(the base uses nothing else); where both exist they must agree. Validation:
``kubernetes-validate --strict`` for every built-in kind. It has no schemas
for prometheus-operator's CRDs (ServiceMonitor, PrometheusRule) offline, so
those two — and only those — are checked here explicitly instead.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_support import DEPLOY, PROMETHEUS_DIR, load_yaml, require_tool

from benchd.config.load import load_config

BASE = DEPLOY / "k8s" / "base"
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}
K8S_VERSION = "1.30.0"
_HASHED_CONFIGMAP = re.compile(r"^(benchd-config)-[a-z0-9]{10}$")


def _offline_render() -> list[dict[str, Any]]:
    """What ``kubectl kustomize`` makes of the base, minus the ConfigMap name hash."""
    kustomization = load_yaml(BASE / "kustomization.yaml")
    docs = [load_yaml(BASE / name) for name in kustomization["resources"]]
    for generator in kustomization["configMapGenerator"]:
        files = {Path(f).name: (BASE / f).read_text(encoding="utf-8") for f in generator["files"]}
        labels = generator.get("options", {}).get("labels", {})
        metadata = {"name": generator["name"], "labels": labels}
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": files})
    for doc in docs:
        doc["metadata"]["namespace"] = kustomization["namespace"]
    return docs


def _normalise(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    text = yaml.safe_dump_all(docs)
    text = re.sub(r"\bbenchd-config-[a-z0-9]{10}\b", "benchd-config", text)
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text)}


@pytest.fixture(scope="module")
def rendered() -> dict[tuple[str, str], dict[str, Any]]:
    return _normalise(_offline_render())


def _doc(rendered: dict[tuple[str, str], dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(d for (k, _), d in rendered.items() if k == kind)


def _container(deployment: dict[str, Any], name: str = "benchd") -> dict[str, Any]:
    spec = deployment["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] + spec["initContainers"] if c["name"] == name)


def test_kubectl_kustomize_renders_what_the_offline_renderer_reads(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed; the offline renderer alone is used")
    result = subprocess.run(
        [kubectl, "kustomize", str(BASE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    by_kubectl = list(yaml.safe_load_all(result.stdout))
    configmap = next(d for d in by_kubectl if d["kind"] == "ConfigMap")
    assert _HASHED_CONFIGMAP.match(configmap["metadata"]["name"])  # rolls pods on edits
    assert _normalise(by_kubectl) == rendered


@pytest.mark.parametrize(
    "kind", ["ServiceAccount", "ConfigMap", "Service", "StatefulSet", "NetworkPolicy"]
)
def test_built_in_kinds_pass_strict_validation(
    rendered: dict[tuple[str, str], dict[str, Any]], kind: str
) -> None:
    kubernetes_validate.validate(_doc(rendered, kind), K8S_VERSION, strict=True)


def test_strict_validation_rejects_an_unknown_field(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    deployment = copy.deepcopy(_doc(rendered, "StatefulSet"))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_kubernetes_validate_cli_passes_and_lacks_schemas_only_for_the_crds(
    rendered: dict[tuple[str, str], dict[str, Any]], tmp_path: Path
) -> None:
    manifest = tmp_path / "benchd.yaml"
    manifest.write_text(yaml.safe_dump_all(list(rendered.values())), encoding="utf-8")
    cli = Path(sys.executable).with_name("kubernetes-validate")
    result = subprocess.run(
        [str(cli), "--strict", "-k", K8S_VERSION, str(manifest)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    missing = set(re.findall(r"Couldn't find schema for kind (\w+)", output))
    assert missing == CRD_KINDS
    assert output.count("passed for resource") == len(rendered) - len(CRD_KINDS)


def test_prometheus_rule_carries_exactly_the_promtool_tested_rules(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """Regenerate with `python deploy/k8s/sync_rules.py` when this fails."""
    rule = _doc(rendered, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    groups = [
        g for f in ("recording.yml", "alerts.yml") for g in load_yaml(PROMETHEUS_DIR / f)["groups"]
    ]
    assert rule["spec"]["groups"] == groups
    names = [g["name"] for g in groups]
    assert len(names) == len(set(names)), "group names must be unique within one PrometheusRule"


@pytest.mark.promtool
def test_prometheus_rule_spec_passes_promtool(
    rendered: dict[tuple[str, str], dict[str, Any]], tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(_doc(rendered, "PrometheusRule")["spec"]), encoding="utf-8")
    result = subprocess.run(
        [require_tool("promtool"), "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_service_monitor_scrapes_the_service_port_as_job_benchd(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    monitor = _doc(rendered, "ServiceMonitor")
    service = _doc(rendered, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    assert all(e["path"] == "/metrics" for e in monitor["spec"]["endpoints"])
    # prometheus-operator names the job after the Service; the rules select job="benchd"
    assert service["metadata"]["name"] == "benchd" and "jobLabel" not in monitor["spec"]


def test_deployment_runs_non_root_with_limits_and_health_probes(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    deployment = _doc(rendered, "StatefulSet")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] >= 2
    assert (
        pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] > 0
    )
    for container in pod["containers"] + pod["initContainers"]:
        assert {"requests", "limits"} <= set(container["resources"]), container["name"]
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    benchd = _container(deployment)
    assert benchd["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert benchd["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {e["name"]: e for e in benchd["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_selectors_match_the_pods(rendered: dict[tuple[str, str], dict[str, Any]]) -> None:
    deployment = _doc(rendered, "StatefulSet")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"].items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels
    assert _doc(rendered, "Service")["spec"]["selector"].items() <= pod_labels
    policy = _doc(rendered, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels
    container_ports = {p["name"] for p in _container(deployment)["ports"]}
    assert {p["port"] for rule in policy["ingress"] for p in rule["ports"]} <= container_ports


def _render_config(
    rendered: dict[tuple[str, str], dict[str, Any]],
    tmp_path: Path,
    rate: str,
    replicas: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the init container's own script on the ConfigMap's template."""
    init = _container(_doc(rendered, "StatefulSet"), "render-config")
    python, flag, script = init["command"][:3]
    assert (python, flag) == ("python", "-c")
    template = tmp_path / "benchd.toml.in"
    template.write_text(_doc(rendered, "ConfigMap")["data"]["benchd.toml.in"], encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-c", script, str(template), str(tmp_path / "benchd.toml")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"BENCHD_RATE": rate, **({"BENCHD_REPLICAS": replicas} if replicas else {})},
        check=False,
    )


def test_rendered_config_gives_each_pod_its_namespace_and_share_of_the_load(
    rendered: dict[tuple[str, str], dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deployment = _doc(rendered, "StatefulSet")
    init_env = {e["name"]: e["value"] for e in _container(deployment, "render-config")["env"]}
    result = _render_config(
        rendered, tmp_path, init_env["BENCHD_RATE"], init_env["BENCHD_REPLICAS"]
    )
    assert result.returncode == 0, result.stderr
    # the key file lives in the mounted Secret; point the config at a stand-in
    mount = next(m for m in _container(deployment)["volumeMounts"] if m["name"] == "api-key")
    key_file = tmp_path / "api-key"
    key_file.write_text("test-key\n", encoding="utf-8")
    config_file = tmp_path / "benchd.toml"
    text = config_file.read_text(encoding="utf-8")
    assert f'api_key_file = "{mount["mountPath"]}/api-key"' in text
    config_file.write_text(text.replace(f"{mount['mountPath']}/api-key", str(key_file)), "utf-8")
    monkeypatch.setenv("POD_NAME", "benchd-1")
    config = load_config(config_file)
    probe = config.probes[0]
    assert probe.target.settings.namespace == "benchd-benchd-1"
    # the stable pod name holds the namespace's lease; the corpus stays between cycles
    assert config.server.instance == "benchd-1"
    assert probe.target.settings.cleanup == "never"
    assert probe.load.rate == float(init_env["BENCHD_RATE"])
    # each pod plans for its share of the key's budget: the replica count is spec.replicas
    assert probe.budget.replicas == deployment["spec"]["replicas"]
    assert probe.target.secret is not None and probe.target.secret.reveal() == "test-key"
    assert config.server.listen.endswith(":9108")


@pytest.mark.parametrize("rate", ["", "ten", "0", "-5", "1e3"])
def test_render_config_refuses_a_rate_that_is_not_a_positive_number(
    rendered: dict[tuple[str, str], dict[str, Any]], tmp_path: Path, rate: str
) -> None:
    result = _render_config(rendered, tmp_path, rate)
    assert result.returncode != 0
    assert "BENCHD_RATE" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "benchd.toml").exists()


@pytest.mark.parametrize("replicas", ["0", "three", "-1", "2.5"])
def test_render_config_refuses_a_replica_count_that_is_not_a_positive_integer(
    rendered: dict[tuple[str, str], dict[str, Any]], tmp_path: Path, replicas: str
) -> None:
    result = _render_config(rendered, tmp_path, "0.5", replicas)
    assert result.returncode != 0
    assert "BENCHD_REPLICAS" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "benchd.toml").exists()


def test_replicas_are_a_statefulset_so_pods_keep_their_names_namespaces_and_leases(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    assert not [k for k, _ in rendered if k == "Deployment"]
    statefulset = _doc(rendered, "StatefulSet")
    assert statefulset["spec"]["serviceName"] in {n for k, n in rendered if k == "Service"}
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    assert statefulset["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 30


def test_init_container_replica_count_is_the_deployments(
    rendered: dict[tuple[str, str], dict[str, Any]],
) -> None:
    deployment = _doc(rendered, "StatefulSet")
    init_env = {e["name"]: e["value"] for e in _container(deployment, "render-config")["env"]}
    assert int(init_env["BENCHD_REPLICAS"]) == deployment["spec"]["replicas"]


def test_the_docs_take_a_newcomer_from_an_empty_cluster_to_a_scraped_probe() -> None:
    """docs/deploy.md's Kubernetes steps build and push the image the pods run, name the
    operator's CRDs as a prerequisite, and point at the template line holding the store URL."""
    docs = (DEPLOY.parent / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = docs.split("\n## Kubernetes\n", 1)[1].split("\n## ", 1)[0]
    statefulset = load_yaml(BASE / "statefulset.yaml")
    spec = statefulset["spec"]["template"]["spec"]
    images = {c["image"] for c in spec["containers"] + spec["initContainers"]}
    (image,) = images
    name, tag = image.split(":")
    pushed = f"registry.example.com/team/{name}:{tag}"
    assert f"docker build -f deploy/docker/Dockerfile -t {pushed} ." in section
    assert f"docker push {pushed}" in section
    assert f"{{name: {name}, newName: {pushed.split(':')[0]}, newTag: {tag}}}" in section
    for crd in CRD_KINDS:
        assert f"`{crd}`" in section
    template = (BASE / "benchd.toml.in").read_text(encoding="utf-8").splitlines()
    edit = next(i for i, line in enumerate(template) if line.startswith("# EDIT"))
    url_line = next(line for line in template[edit:] if not line.startswith("#"))
    assert url_line.startswith("url = ")
    assert "marked `EDIT`" in section
