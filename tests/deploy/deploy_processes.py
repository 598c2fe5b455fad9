"""Real processes for the deploy end-to-end tests: benchd, the reference store, Prometheus.

Each runner is a context manager that starts the process on an ephemeral
loopback port, waits (polling with a deadline, never a fixed sleep) until it
answers, yields its base URL, and stops it on exit — SIGTERM, then SIGKILL
if it does not stop in time — so a failing test leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

__all__ = [
    "EVALUATION_INTERVAL",
    "LogReader",
    "Running",
    "free_port",
    "page_due_seconds",
    "prometheus_query",
    "run_alertmanager",
    "run_benchd",
    "run_prometheus",
    "run_refstore",
    "run_webhook_receiver",
    "wait_for",
]

T = TypeVar("T")
BENCHD = [sys.executable, "-m", "benchd"]
PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
SHIPPED_ALERTMANAGER = PROMETHEUS_DIR / "alertmanager.yml"
SHIPPED_WEBHOOK_URL = "http://127.0.0.1:5001/"
_STOP_TIMEOUT_S = 10.0
EVALUATION_INTERVAL = "1s"  # run_prometheus's scrape and rule evaluation interval
PROMETHEUS_RESEND_DELAY_S = 60.0  # prometheus --rules.alert.resend-delay (its default; not set)


@dataclass
class LogReader:
    """Collects a process's output lines on a thread so a full pipe never blocks it."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """After the process exited: drain the pipe to EOF and close it."""
        self._thread.join(timeout=_STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            self._queue.put(line)

    def wait_json(
        self, predicate: Callable[[dict[str, Any]], bool], deadline: float
    ) -> dict[str, Any]:
        """The first JSON log line satisfying ``predicate``, or AssertionError at the deadline."""
        while (left := deadline - time.monotonic()) > 0:
            if self.proc.poll() is not None and self._queue.empty():
                raise AssertionError(f"process exited {self.proc.returncode}:\n{self.tail()}")
            try:
                line = self._queue.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and predicate(event):
                return event
        raise AssertionError(f"no matching log line before the deadline:\n{self.tail()}")

    def tail(self, n: int = 30) -> str:
        return "".join(self.lines[-n:])


@dataclass(frozen=True)
class Running:
    """A started process, its base URL and its output."""

    url: str
    proc: subprocess.Popen[str]
    logs: LogReader


def free_port() -> int:
    """A currently free loopback TCP port, for servers that cannot report port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(probe: Callable[[], T | None], *, timeout: float, what: str) -> T:
    """Poll ``probe`` until it returns something truthy; AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(delay)  # polling interval of a deadline loop, not synchronisation
        delay = min(delay * 2, 0.5)


def _seconds(duration: str) -> float:
    value, unit = float(duration[:-1]), duration[-1]
    return value * {"s": 1, "m": 60, "h": 3600}[unit]


def page_due_seconds() -> float:
    """Longest wait from an alert firing to its page through the shipped alertmanager.yml.

    Prometheus sends an alert as it fires, stamped startsAt = the firing time,
    so Alertmanager opens its group and pages group_wait later; plus one resend
    should that first send be lost (Prometheus resends firing alerts every
    resend delay), plus two rule evaluations. A group already open and flushed
    would wait for group_interval instead: the tests' pages are a group's first.
    """
    group_wait = _seconds(yaml.safe_load(SHIPPED_ALERTMANAGER.read_text())["route"]["group_wait"])
    return group_wait + PROMETHEUS_RESEND_DELAY_S + 2 * _seconds(EVALUATION_INTERVAL)


def _spawn(args: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        list(args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen[str], logs: LogReader) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=_STOP_TIMEOUT_S)
    logs.close()


def _get_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def run_benchd(
    args: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
    program: Sequence[str] = BENCHD,
) -> Iterator[Running]:
    """``benchd run --listen 127.0.0.1:0 ARGS``; the URL comes from its 'started' log line.

    ``program`` is how benchd is started (``python -m benchd`` unless told,
    e.g. the installed console script, as a systemd unit starts it).
    """
    cmd = [*program, "run", "--listen", "127.0.0.1:0", "--log-format", "json", *args]
    proc = _spawn(cmd, env)
    logs = LogReader(proc)
    try:
        started = logs.wait_json(lambda e: e.get("event") == "started", time.monotonic() + timeout)
        yield Running(url=str(started["url"]).rstrip("/"), proc=proc, logs=logs)
    finally:
        _stop(proc, logs)


@contextmanager
def run_refstore(key: str, args: Sequence[str] = (), *, timeout: float = 30.0) -> Iterator[Running]:
    """``benchd refstore --listen 127.0.0.1:0 ARGS`` with the key in BENCHD_E2E_KEY."""
    cmd = [*BENCHD, "refstore", "--listen", "127.0.0.1:0", "--api-key-env", "BENCHD_E2E_KEY"]
    proc = _spawn([*cmd, *args], env={"BENCHD_E2E_KEY": key})
    logs = LogReader(proc)
    try:
        ready = logs.wait_json(
            lambda e: e.get("event") == "refstore listening", time.monotonic() + timeout
        )
        yield Running(url=str(ready["url"]).rstrip("/"), proc=proc, logs=logs)
    finally:
        _stop(proc, logs)


@contextmanager
def run_prometheus(
    prometheus: str,
    workdir: Path,
    targets: Sequence[str],
    *,
    rule_files: Sequence[Path] = (),
    alertmanagers: Sequence[str] = (),
    timeout: float = 30.0,
) -> Iterator[Running]:
    """Prometheus scraping ``targets`` (job "benchd"), evaluating rules every second.

    ``alertmanagers`` (``host:port``) receive the firing alerts.
    """
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": EVALUATION_INTERVAL,
            "evaluation_interval": EVALUATION_INTERVAL,
        },
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": "benchd", "static_configs": [{"targets": list(targets)}]}],
    }
    if alertmanagers:
        config["alerting"] = {
            "alertmanagers": [{"static_configs": [{"targets": list(alertmanagers)}]}]
        }
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    proc = _spawn(
        [
            prometheus,
            f"--config.file={config_file}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ]
    )
    logs = LogReader(proc)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: (proc.poll() is None and _get_ok(f"{url}/-/ready")) or _exited(proc, logs),
            timeout=timeout,
            what="prometheus /-/ready",
        )
        yield Running(url=url, proc=proc, logs=logs)
    finally:
        _stop(proc, logs)


@contextmanager
def run_alertmanager(
    alertmanager: str, workdir: Path, webhook_url: str, *, timeout: float = 30.0
) -> Iterator[Running]:
    """Debian's Alertmanager on loopback with deploy/prometheus/alertmanager.yml as shipped.

    The one substitution: its webhook receiver's URL becomes ``webhook_url``.
    Grouping and timing are the shipped file's (first page 30 s after the
    first alert of a group). Clustering is off (no gossip port).
    """
    shipped = SHIPPED_ALERTMANAGER.read_text(encoding="utf-8")
    line = f"url: {SHIPPED_WEBHOOK_URL}"
    assert shipped.count(line) == 1, "the shipped receiver URL moved"
    config_file = workdir / "alertmanager.yml"
    config_file.write_text(shipped.replace(line, f"url: {webhook_url}"), encoding="utf-8")
    port = free_port()
    proc = _spawn(
        [
            alertmanager,
            f"--config.file={config_file}",
            f"--storage.path={workdir / 'alertmanager'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]
    )
    logs = LogReader(proc)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: (proc.poll() is None and _get_ok(f"{url}/-/ready")) or _exited(proc, logs),
            timeout=timeout,
            what="alertmanager /-/ready",
        )
        yield Running(url=url, proc=proc, logs=logs)
    finally:
        _stop(proc, logs)


@contextmanager
def run_webhook_receiver(*, timeout: float = 30.0) -> Iterator[Running]:
    """deploy/prometheus/webhook_receiver.py --json on a free port: each page a JSON line."""
    port = free_port()
    receiver = PROMETHEUS_DIR / "webhook_receiver.py"
    proc = _spawn([sys.executable, str(receiver), "--listen", f"127.0.0.1:{port}", "--json"])
    logs = LogReader(proc)
    try:
        wait_for(
            lambda: any("webhook receiver on" in ln for ln in logs.lines) or _exited(proc, logs),
            timeout=timeout,
            what="the webhook receiver listening",
        )
        yield Running(url=f"http://127.0.0.1:{port}/", proc=proc, logs=logs)
    finally:
        _stop(proc, logs)


def _exited(proc: subprocess.Popen[str], logs: LogReader) -> bool:
    if proc.poll() is not None:
        raise AssertionError(f"{proc.args[0]} exited {proc.returncode}:\n{logs.tail()}")
    return False


def prometheus_query(url: str, expr: str) -> list[dict[str, Any]]:
    """The result vector of an instant query; AssertionError if Prometheus rejects it."""
    reply = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10.0)
    body = reply.json()
    assert body.get("status") == "success", f"{expr}: {body.get('error', body)}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result
