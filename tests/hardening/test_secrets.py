"""API keys never leak: not in logs, /metrics, /api/status, error messages or command output.

Distinctive keys are used so that a hit anywhere is unambiguous. Both the
right key and a wrong one (an auth failure) are searched for, from the key's
environment variable and from a key file, with debug logging switched on.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from drill_support import KEY_ENV, RefstoreProcess, free_port, probe_toml, write_config
from drill_support import write_tiny_fixture as tiny
from support import BenchdProcess

RIGHT = "sk-benchd-RIGHT-8d3f0c6b91e2a7d4"
WRONG = "sk-benchd-WRONG-1a6e44f0c9b7d358"
SECRETS = (RIGHT, WRONG)
DEBUG = '[server]\nlog_level = "debug"\n'


@pytest.fixture(scope="module")
def store() -> Iterator[RefstoreProcess]:
    with RefstoreProcess(free_port(), key=RIGHT) as running:
        yield running


def assert_clean(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"a key leaked into {where}"
        assert secret[-12:] not in text, f"part of a key leaked into {where}"


def daemon_config(
    tmp_path: Path, url: str, *, key_file: Path | None = None, extra: str = ""
) -> Path:
    fixture = tiny(tmp_path / "tiny.json")
    probe = probe_toml("secret", url, fixture, interval=0.2, retries=0, target_extra=extra)
    if key_file is not None:
        probe = probe.replace(f'api_key_env = "{KEY_ENV}"', f'api_key_file = "{key_file}"')
    path = write_config(tmp_path, probe)
    path.write_text(path.read_text().replace("[server]\n", DEBUG, 1))
    return path


def once(config: Path, key: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "once", "--config", str(config), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, KEY_ENV: key},
    )


def scrape_everything(benchd: BenchdProcess) -> str:
    pages = ("/", "/metrics", "/api/status", "/readyz", "/healthz")
    return "".join(benchd.get(page).text for page in pages)


@pytest.mark.parametrize("key", [RIGHT, WRONG], ids=["right-key", "wrong-key"])
def test_run_never_shows_the_key_in_logs_metrics_or_status(
    tmp_path: Path, store: RefstoreProcess, key: str
) -> None:
    config = daemon_config(tmp_path, store.url)
    with BenchdProcess(["--config", str(config)], env={KEY_ENV: key}) as benchd:
        cycles = benchd.wait_cycles("secret", 2)
        expected = ("success", None) if key == RIGHT else ("failed", "auth")
        assert (cycles[-1]["outcome"], cycles[-1].get("error_kind")) == expected
        assert_clean("/metrics, /api/status and pages", scrape_everything(benchd))
        reload = benchd.post("/-/reload")
        assert_clean("the reload answer", reload.text)
        assert benchd.stop() == 0
    assert any('"level": "debug"' in line for line in benchd.lines)  # debug logging was on
    assert_clean("benchd run's stderr", "".join(benchd.lines))
    assert_clean("benchd refstore's log", "".join(store.stderr))


@pytest.mark.parametrize("fmt", ["json", "table"])
@pytest.mark.parametrize("key", [RIGHT, WRONG], ids=["right-key", "wrong-key"])
def test_once_output_and_errors_never_show_the_key(
    tmp_path: Path, store: RefstoreProcess, key: str, fmt: str
) -> None:
    proc = once(daemon_config(tmp_path, store.url), key, "--format", fmt)
    assert proc.returncode == (0 if key == RIGHT else 3), proc.stderr
    if key == WRONG:
        assert "refused the API key" in proc.stderr
    assert_clean("benchd once's output", proc.stdout + proc.stderr)


def test_a_key_from_a_file_never_shows_either(tmp_path: Path, store: RefstoreProcess) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(WRONG + "\n")
    config = daemon_config(tmp_path, store.url, key_file=key_file)
    proc = once(config, "unused", "--format", "json")
    assert proc.returncode == 3
    assert_clean("benchd once's output", proc.stdout + proc.stderr)
    with BenchdProcess(["--config", str(config)]) as benchd:
        assert benchd.wait_cycles("secret", 1)[0]["error_kind"] == "auth"
        assert_clean("/metrics, /api/status and pages", scrape_everything(benchd))
        assert benchd.stop() == 0
    assert_clean("benchd run's stderr", "".join(benchd.lines))


def test_a_config_error_names_the_variable_never_a_value(tmp_path: Path) -> None:
    config = daemon_config(tmp_path, "http://127.0.0.1:9")
    config.write_text(config.read_text() + '\n[bogus]\nkey = "x"\n')
    proc = once(config, RIGHT)
    assert proc.returncode == 2
    assert "bogus" in proc.stderr
    assert_clean("a config error", proc.stdout + proc.stderr)


# --------------------------------------------------------------------------- a store that echoes

API_KEY = "sk-guard-APIKEY-4f1d2c3b5a69e0"
URL_PASSWORD = "PW-guard-7d3a9e1f6b20"
TOKEN = "tok-guard-BEARER-0b8e6a2c9d17"
TRACE = "trace-guard-HEADER-5c2f8b1e33"
ECHOED = (API_KEY, URL_PASSWORD, TOKEN, TRACE)
BASIC = base64.b64encode(f"benchuser:{URL_PASSWORD}".encode()).decode()
ENV = {KEY_ENV: API_KEY, "GUARD_TOKEN": TOKEN, "GUARD_TRACE": TRACE}


class _Echo(BaseHTTPRequestHandler):
    """Answers with every credential it was sent: /health in its model label, the rest in a 400.

    A 400 (not a 401) because benchd quotes the store's ``{"error": ...}`` for
    other 4xx answers, and that quoted text is the path a key could leak by.
    """

    def do_GET(self) -> None:
        sent = {k: self.headers.get(k, "") for k in ("x-api-key", "authorization", "x-trace")}
        echo = " ".join(f"{k}={v}" for k, v in sent.items())
        if self.path.startswith("/health"):
            self._json(200, {"status": "ok", "model": f"model {echo}", "version": echo})
        else:
            self._json(400, {"error": f"invalid credentials: {echo} ({self.path})"})

    do_POST = do_DELETE = do_GET

    def _json(self, status: int, body: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # keep the test output quiet
        pass


@pytest.fixture(scope="module")
def echo_store() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://benchuser:{URL_PASSWORD}@127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def echo_config(tmp_path: Path, url: str) -> Path:
    headers = 'headers = { Authorization = "Bearer ${GUARD_TOKEN}", X-Trace = "${GUARD_TRACE}" }'
    return daemon_config(tmp_path, url, extra=headers)


def assert_nothing_echoed(where: str, text: str) -> None:
    for secret in (*ECHOED, BASIC):
        assert secret not in text, f"{secret} leaked into {where}"
        assert secret[-12:] not in text, f"part of {secret} leaked into {where}"


def test_the_store_sent_every_secret_back(echo_store: str) -> None:
    """The premise: the store really does echo each credential (else the tests prove nothing)."""
    reply = httpx.get(
        echo_store.replace(f"benchuser:{URL_PASSWORD}@", "") + "/export",
        headers={"x-api-key": API_KEY, "authorization": f"Bearer {TOKEN}", "x-trace": TRACE},
    )
    assert reply.status_code == 400
    assert all(secret in reply.text for secret in (API_KEY, TOKEN, TRACE))


@pytest.mark.parametrize("fmt", ["json", "table", "junit"])
def test_once_masks_what_a_store_echoes(tmp_path: Path, echo_store: str, fmt: str) -> None:
    config = echo_config(tmp_path, echo_store)
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "once", "--config", str(config), "--format", fmt],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **ENV},
    )
    assert proc.returncode == 3, proc.stderr
    assert "invalid credentials" in proc.stdout + proc.stderr  # the store's text is shown...
    assert "***" in proc.stdout + proc.stderr  # ...with the credentials masked
    assert_nothing_echoed(f"benchd once --format {fmt}", proc.stdout + proc.stderr)


def test_run_masks_what_a_store_echoes_in_logs_status_and_metrics(
    tmp_path: Path, echo_store: str
) -> None:
    config = echo_config(tmp_path, echo_store)
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        cycles = benchd.wait_cycles("secret", 2)
        assert {c.get("error_kind") for c in cycles} == {"http_4xx"}
        status = benchd.get("/api/status")
        assert "invalid credentials" in status.text
        metrics = benchd.get("/metrics").text
        assert 'model="model x-api-key=***' in metrics  # the echoed label, masked
        assert_nothing_echoed("/metrics, /api/status and pages", scrape_everything(benchd))
        assert benchd.stop() == 0
    assert_nothing_echoed("benchd run's stderr", "".join(benchd.lines))
