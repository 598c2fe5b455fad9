"""Shared parts of the hardening drills: a reference store as a real subprocess,
a tiny corpus, probe configs, and /proc readings of a process's fds and RSS.

The store runs as ``benchd refstore`` on a fixed free port so it can be killed
and restarted at the same address while a daemon keeps probing it; faults are
switched through its admin endpoint (``POST /admin/config``).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import httpx

KEY = "drill-key-5f1c7a93e2d44b08"
KEY_ENV = "DRILL_STORE_KEY"
ENV = {KEY_ENV: KEY}

TINY_MEMORIES = [
    ("mem-harbor", "The harbor ferry leaves pier nine at seven every morning."),
    ("mem-quartz", "Quartz crystals in the museum cellar glow under ultraviolet lamps."),
    ("mem-violin", "The violin workshop repairs cracked spruce tops with hide glue."),
    ("mem-glacier", "Glacier tours start from the northern lodge after the snowmelt."),
    ("mem-bakery", "The corner bakery sells rye sourdough only on Saturdays."),
    ("mem-orbit", "The weather satellite keeps a sun synchronous polar orbit."),
]
TINY_QUERIES = [
    ("q-ferry", "when does the harbor ferry leave pier nine", "mem-harbor"),
    ("q-quartz", "quartz crystals glow under ultraviolet lamps", "mem-quartz"),
    ("q-violin", "violin workshop spruce tops hide glue", "mem-violin"),
    ("q-orbit", "satellite polar orbit", "mem-orbit"),
]


def write_tiny_fixture(path: Path) -> Path:
    """A six-memory, four-query corpus: a whole cycle takes a few milliseconds."""
    doc = {
        "memories": [
            {"id": mid, "type": "fact", "content": text, "created_at": "2026-01-05T10:00:00Z"}
            for mid, text in TINY_MEMORIES
        ],
        "queries": [{"id": qid, "q": q, "expected_ids": [mid]} for qid, q, mid in TINY_QUERIES],
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def probe_toml(
    name: str,
    url: str,
    fixture: Path,
    *,
    interval: float = 0.1,
    timeout: float = 5.0,
    request_timeout: float = 2.0,
    retries: int = 3,
    target_extra: str = "",
) -> str:
    """One ``[[probe]]`` table for the tiny fixture with fast retries and short waits."""
    return f"""
[[probe]]
name = "{name}"
fixture = "{fixture}"
k = [1, 3]
interval_s = {interval}
timeout_s = {timeout}
jitter_s = 0.0

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "{KEY_ENV}"
namespace = "drill-{name}"
timeout_s = {request_timeout}
max_retries = {retries}
backoff_s = 0.02
max_retry_after_s = 0.05
searchable_timeout_s = 1.0
{target_extra}
"""


def write_config(tmp_path: Path, *probes: str, server: str = "") -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text("[server]\nhistory = 5\n" + server + "".join(probes), encoding="utf-8")
    return path


class RefstoreProcess:
    """``python -m benchd refstore`` on a fixed port; killable and restartable."""

    def __init__(self, port: int, *, faults: Sequence[str] = (), key: str = KEY) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.faults = list(faults)
        self.key = key
        self.stderr: list[str] = []
        self.proc: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 20.0) -> RefstoreProcess:
        args = [sys.executable, "-m", "benchd", "refstore", "--listen", f"127.0.0.1:{self.port}"]
        args += ["--api-key-env", KEY_ENV, "--read-limit", "0", "--write-limit", "0"]
        args += [f"--fault={spec}" for spec in self.faults]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, KEY_ENV: self.key},
        )
        first = _first_line(self.proc, timeout)
        if not first.startswith("http://"):
            raise AssertionError(f"refstore did not start: {first!r}")
        threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()
        return self

    def _drain(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        with proc.stderr:
            for line in proc.stderr:
                self.stderr.append(line)

    def kill(self) -> None:
        """SIGKILL: the store vanishes without closing anything gracefully."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def set_faults(self, specs: Sequence[str]) -> None:
        """Replace the active fault plan (an empty list clears every fault)."""
        reply = httpx.post(
            self.url + "/admin/config",
            json={"faults": list(specs)},
            headers={"x-api-key": self.key},
            timeout=10,
        )
        assert reply.status_code == 200, reply.text

    def export_ids(self, client_id: str) -> list[str]:
        reply = httpx.get(
            self.url + "/export",
            params={"client_id": client_id},
            headers={"x-api-key": self.key},
            timeout=10,
        )
        reply.raise_for_status()
        return sorted(str(m["id"]) for m in reply.json()["memories"])

    def __enter__(self) -> RefstoreProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """The first stdout line (the store's URL), read with a deadline."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout).strip()
    except queue.Empty:
        proc.kill()
        raise AssertionError(f"refstore printed no URL within {timeout}s") from None


# --------------------------------------------------------------------------- /proc


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


# --------------------------------------------------------------------------- metrics

Samples = list[tuple[dict[str, str], float]]


def value(samples: Samples, **labels: str) -> float:
    """The sum of the samples whose labels include ``labels`` (0 when none)."""
    return sum(v for lbl, v in samples if all(lbl.get(k) == w for k, w in labels.items()))
