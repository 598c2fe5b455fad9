"""Shared plumbing for the benchmarks: a static nginx target, Locust runs, benchd's bytecode.

Not a benchmark itself; ``bench/load_*.py``, ``bench/scale.py`` and
``bench/cli_startup.py`` import it (run them from the repo root).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

__all__ = [
    "LOCUST_VENV",
    "ProcessSampler",
    "canned_search_body",
    "compile_package",
    "delay_server",
    "describe_machine",
    "free_port",
    "locust_binary",
    "missing",
    "nginx_binary",
    "nginx_serving",
    "package_dir",
    "run_locust",
    "run_locust_sampled",
    "run_wrk",
    "skip",
    "wait_for_port",
    "wrk_binary",
    "zengram_config",
]

LOCUST_VENV = Path("/tmp/locust-venv")
SEARCH_PATH = "/memory/search"

_NGINX_CONF = """worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location {path} {{ default_type application/json; return 200 '{body}'; }}
  }}
}}
"""

_LOCUSTFILE = """from locust import FastHttpUser, constant, task


class Searcher(FastHttpUser):
    wait_time = constant(0)

    @task
    def search(self):
        self.client.get({path!r})
"""


def canned_search_body(n_results: int = 10) -> bytes:
    """A Zengram-shaped search answer with ``n_results`` ranked memories."""
    results = [
        {
            "id": f"mem-{rank}",
            "effective_score": round(1.0 - rank * 0.05, 3),
            "type": "fact",
            "summary": f"summary of memory {rank} about the staging deploy",
        }
        for rank in range(n_results)
    ]
    answer = {"query": "what did alice say about the deploy", "count": n_results}
    return json.dumps({**answer, "results": results}).encode()


def package_dir() -> Path:
    """The directory of the ``benchd`` package that ``python -m benchd`` imports here."""
    code = "import benchd, pathlib; print(pathlib.Path(benchd.__file__).parent)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def compile_package() -> str:
    """Compile the package's bytecode once, as an install does; what was done, in words."""
    argv = [sys.executable, "-m", "compileall", "-q", str(package_dir())]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return "bytecode compiled" if proc.returncode == 0 else "bytecode NOT compiled (read-only?)"


def zengram_config(
    path: Path,
    *,
    name: str,
    url: str,
    fixture: str | Path,
    key_env: str,
    namespace: str,
    cleanup: str = "never",
    probe_timeout_s: float | None = None,
    target_timeout_s: float | None = None,
) -> Path:
    """Write a config of one serial probe of ``fixture`` against a zengram store at ``url``.

    Unlimited budget, k = 10. ``probe_timeout_s`` also sets an hour's interval (no
    second cycle within a run); without it, and without ``target_timeout_s``,
    benchd's defaults hold. Returns ``path``.
    """
    probe_times = f"interval_s = 3600.0\ntimeout_s = {probe_timeout_s}\n" if probe_timeout_s else ""
    target_time = f"timeout_s = {target_timeout_s}\n" if target_timeout_s else ""
    path.write_text(
        f"""[[probe]]
name = "{name}"
fixture = "{fixture}"
k = [10]
{probe_times}
[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "{key_env}"
namespace = "{namespace}"
cleanup = "{cleanup}"
{target_time}
[probe.load]
mode = "serial"

[probe.budget]
unlimited = true
"""
    )
    return path


def skip(reason: str) -> NoReturn:
    """Say why the benchmark cannot run here and stop without failing."""
    print(f"SKIPPED: {reason}", file=sys.stderr)
    raise SystemExit(0)


def missing(reason: str) -> NoReturn:
    """A tool the benchmark cannot do without is absent: say how to get it, in one line."""
    raise SystemExit(f"{Path(sys.argv[0]).name}: {reason}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    """Poll until something accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


@contextmanager
def nginx_serving(body: bytes) -> Iterator[str]:
    """Run a private nginx on loopback answering ``body`` at /memory/search; yield its URL."""
    binary = nginx_binary()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="benchd-nginx-") as tmp:
        conf = Path(tmp, "nginx.conf")
        escaped = body.decode().replace("\\", "\\\\").replace("'", "\\'")
        conf.write_text(_NGINX_CONF.format(tmp=tmp, port=port, path=SEARCH_PATH, body=escaped))
        proc = subprocess.Popen(
            [binary, "-p", tmp, "-c", str(conf), "-e", f"{tmp}/error.log"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port(port)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def nginx_binary() -> str:
    """Debian's nginx, or stop saying how to install it."""
    binary = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if binary is None:
        missing("nginx not found; install it with: apt-get install -y nginx-light")
    return binary


def locust_binary() -> Path:
    """Locust in its own venv (gevent's patching breaks beside ssl), or stop saying how."""
    binary = LOCUST_VENV / "bin" / "locust"
    if not binary.exists():
        missing(
            f"Locust not found at {binary}; install it with: python3 -m venv {LOCUST_VENV}"
            f" && {LOCUST_VENV}/bin/pip install locust"
        )
    return binary


def _locust_args(tmp: str, host: str, path: str, users: int, duration_s: float) -> list[str]:
    locustfile = Path(tmp, "locustfile.py")
    locustfile.write_text(_LOCUSTFILE.format(path=path))
    args = [str(locust_binary()), "-f", str(locustfile), "--headless", "--only-summary"]
    args += ["--json", "-u", str(users), "-r", str(users), "-t", f"{duration_s:g}s"]
    return [*args, "--host", host]


def _locust_stats(stdout: str) -> dict[str, float]:
    stats: dict[str, float] = json.loads(stdout)[0]
    if stats["num_failures"]:
        raise SystemExit(f"Locust saw {stats['num_failures']} failures; the target is unhealthy")
    return stats


def run_locust(host: str, path: str, users: int, duration_s: float) -> float:
    """Run Locust FastHttpUser headless in its own venv; return its req/s."""
    with tempfile.TemporaryDirectory(prefix="benchd-locust-") as tmp:
        args = _locust_args(tmp, host, path, users, duration_s)
        proc = subprocess.run(args, capture_output=True, text=True, check=True, cwd=tmp)
    stats = _locust_stats(proc.stdout)
    elapsed = stats["last_request_timestamp"] - stats["start_time"]
    return float(stats["num_requests"] / elapsed)


def run_locust_sampled(
    host: str, path: str, users: int, duration_s: float
) -> tuple[int, float, float, tuple[float, float]]:
    """Run Locust as :func:`run_locust` does, sampling its process from outside.

    Returns its requests, the wall-clock start and end of its request window
    (``time.time()``) and ``(cpu_s, wait_s)`` over that window (see
    :class:`ProcessSampler`).
    """
    with tempfile.TemporaryDirectory(prefix="benchd-locust-") as tmp:
        args = _locust_args(tmp, host, path, users, duration_s)
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp)
        with ProcessSampler(proc.pid) as sampler:
            out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"Locust failed (exit {proc.returncode}): {err.decode()[-300:]}")
    stats = _locust_stats(out.decode())
    start, end = stats["start_time"], stats["last_request_timestamp"]
    return int(stats["num_requests"]), start, end, sampler.between(start, end)


class ProcessSampler:
    """CPU and run-queue wait of one process, sampled every ``period_s`` by a thread.

    Each sample is ``(time.time(), cpu_s, wait_s)``: user + system time of
    all its threads (``/proc/PID/stat``) and the time its threads were
    runnable but not on a CPU (``/proc/PID/task/*/schedstat``).
    :meth:`between` interpolates both at two wall-clock instants.
    """

    def __init__(self, pid: int, period_s: float = 0.02) -> None:
        self.pid, self.period_s = pid, period_s
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> ProcessSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def sample(self) -> None:
        """Take one sample now (nothing once the process has gone)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            cpu = (int(fields[11]) + int(fields[12])) / self._tick
            wait = 0.0
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                wait += int((task / "schedstat").read_text().split()[1]) / 1e9
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            return
        self.samples.append((time.time(), cpu, wait))

    def between(self, start: float, end: float) -> tuple[float, float]:
        """``(cpu_s, wait_s)`` from ``start`` to ``end`` (wall clock), interpolated."""
        a, b = self._at(start), self._at(end)
        return b[0] - a[0], b[1] - a[1]

    def _at(self, when: float) -> tuple[float, float]:
        samples = self.samples
        if len(samples) >= 2 and samples[-1][0] < when <= samples[-1][0] + self.period_s:
            when = samples[-1][0]  # the process ended within a period of it
        if len(samples) < 2 or not samples[0][0] <= when <= samples[-1][0]:
            raise SystemExit(f"no samples around {when:.3f}: the run was too short to measure")
        for (t0, c0, w0), (t1, c1, w1) in itertools.pairwise(samples):
            if t0 <= when <= t1:
                share = (when - t0) / (t1 - t0) if t1 > t0 else 0.0
                return c0 + share * (c1 - c0), w0 + share * (w1 - w0)
        raise AssertionError("unreachable")


@contextmanager
def delay_server(
    delay_ms: float, stall_after_s: float = 0.0, stall_s: float = 0.0
) -> Iterator[str]:
    """Run bench/load_server.py in its own process; yield its base URL."""
    port = free_port()
    script = Path(__file__).resolve().parent / "load_server.py"
    args = [sys.executable, str(script), "--port", str(port), "--delay-ms", f"{delay_ms:g}"]
    args += ["--stall-after-s", f"{stall_after_s:g}", "--stall-s", f"{stall_s:g}"]
    proc = subprocess.Popen(args)
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def run_wrk(url: str, connections: int, duration_s: float) -> dict[str, float]:
    """Run ``wrk -t1 -cN -dDs --latency``; return its latency percentiles (seconds) and req/s."""
    args = [wrk_binary(), "-t1", f"-c{connections}", f"-d{duration_s:g}s", "--latency", url]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    figures: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("50%", "75%", "90%", "99%"):
            figures[f"p{parts[0][:-1]}"] = _seconds(parts[1])
        elif line.startswith("Requests/sec:"):
            figures["rate"] = float(parts[1])
    return figures


def wrk_binary() -> str:
    """Debian's wrk, or skip."""
    binary = shutil.which("wrk")
    if binary is None:
        skip("wrk not found; install it with: apt-get install -y wrk")
    return binary


def _seconds(text: str) -> float:
    for unit in ("us", "ms", "s", "m"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * _UNITS[unit]
    raise ValueError(f"unexpected wrk duration {text!r}")


def describe_machine() -> str:
    """CPUs, load average and scheduling policy: timing figures depend on them."""
    policy = "SCHED_FIFO" if os.sched_getscheduler(0) == os.SCHED_FIFO else "normal"
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load average {load}, scheduling policy {policy}"
