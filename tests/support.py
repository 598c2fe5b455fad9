"""Test support: ``benchd run`` as a real subprocess, observed through its logs.

The daemon logs JSON lines to stderr when not on a terminal; tests wait for
log events (``started``, ``cycle``, ``reloaded``…) with a deadline instead of
sleeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

Event = dict[str, Any]


class BenchdProcess:
    """``python -m benchd run ...`` with its stderr parsed as structlog JSON events."""

    def __init__(self, args: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.args = ["run", "--listen", "127.0.0.1:0", "--log-format", "json", *args]
        self.env = {**os.environ, **(env or {})}
        self.events: list[Event] = []
        self.lines: list[str] = []
        self._queue: queue.Queue[Event] = queue.Queue()
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> BenchdProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchd", *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        started = self.wait_for(lambda e: e.get("event") == "started", timeout=30)
        self.url = str(started["url"])
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.events.append(event)
                self._queue.put(event)

    def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 30.0) -> Event:
        """The next event (including ones already seen) matching ``predicate``."""
        for event in list(self.events):
            if predicate(event):
                return event
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if predicate(event):
                return event
        raise AssertionError(
            f"no matching log event within {timeout}s; stderr:\n" + "".join(self.lines[-30:])
        )

    def cycles(self, probe: str) -> list[Event]:
        return [
            e for e in list(self.events) if e.get("event") == "cycle" and e.get("probe") == probe
        ]

    def wait_cycles(self, probe: str, count: int, timeout: float = 30.0) -> list[Event]:
        """Block until ``probe`` has logged ``count`` cycles; return them."""
        deadline = time.monotonic() + timeout
        while len(self.cycles(probe)) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{probe}: fewer than {count} cycles within {timeout}s; "
                    "stderr:\n" + "".join(self.lines[-30:])
                )
            with contextlib.suppress(queue.Empty):
                self._queue.get(timeout=left)
        return self.cycles(probe)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=10, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + path, timeout=30, **kwargs)

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        """Every sample of metric ``name`` currently on /metrics."""
        text = self.get("/metrics").text
        return [
            (dict(s.labels), s.value)
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == name
        ]

    def signal(self, signum: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; the exit code."""
        self.signal(signal.SIGTERM)
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A throw-away certificate for 127.0.0.1 and localhost, made with ``openssl``: (cert, key)."""
    import pytest

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command line to make a test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert),
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key
