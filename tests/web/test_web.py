"""benchd's HTTP endpoints over a real loopback uvicorn server."""

from __future__ import annotations

import re
import secrets
import socket
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import bcrypt
import httpx
import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families
from surfacers.cycles import make_result, promtool_path

from benchd.config.web import WebAuth, read_web_config
from benchd.drift_outcome import DriftOutcome, MetricDrift
from benchd.errors import ConfigError, InputError
from benchd.surfacers.result_book import ResultBook
from benchd.web.app import ReloadCallback, build_app
from benchd.web.auth import Authenticator, hash_secret
from benchd.web.server import serve_web

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def running(
    book: ResultBook,
    *,
    reload: ReloadCallback | None = None,
    auth: WebAuth | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    app = build_app(book, reload=reload, auth=auth)
    async with (
        serve_web(app, "127.0.0.1", 0) as bound,
        httpx.AsyncClient(base_url=bound.url, timeout=10) as client,
    ):
        yield client


def reloader(outcome: bool | Exception) -> tuple[ReloadCallback, list[int]]:
    calls: list[int] = []

    async def reload() -> bool:
        calls.append(1)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return reload, calls


async def test_landing_page_links_every_read_endpoint() -> None:
    book = ResultBook()
    book.set_probes(["alpha"])
    book.record(make_result("alpha"))
    async with running(book) as client:
        page = await client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        links = re.findall(r'href="([^"]+)"', page.text)
        assert set(links) == {"metrics", "api/status", "readyz", "healthz", "probe/alpha"}
        for link in links:
            assert (await client.get(f"/{link}")).status_code == 200, link
        assert "alpha" in page.text
        missing = await client.get("/probe/nope")
        assert missing.status_code == 404 and "no probe named 'nope'" in missing.text


async def test_metrics_default_to_prometheus_text_and_negotiate_openmetrics() -> None:
    book = ResultBook()
    book.record(make_result())
    async with running(book) as client:
        text = await client.get("/metrics")
        assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
        names = {f.name for f in text_string_to_metric_families(text.text)}
        assert {"benchd_quality", "benchd_up", "benchd_request_duration_seconds"} <= names
        om = await client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
        assert om.headers["content-type"].startswith("application/openmetrics-text")
        assert "benchd_cycles" in {f.name for f in parse_openmetrics(om.text)}


async def test_metrics_are_gzipped_when_the_scraper_accepts_it() -> None:
    book = ResultBook()
    book.record(make_result())
    async with running(book) as client:
        response = await client.get("/metrics", headers={"Accept-Encoding": "gzip"})
        assert response.headers["content-encoding"] == "gzip"
        assert "benchd_quality" in response.text


async def test_cached_bodies_are_served_alike_gzipped_or_not_and_follow_new_cycles() -> None:
    book = ResultBook()
    book.record(make_result())
    async with running(book) as client:
        for path in ("/metrics", "/api/status"):
            zipped = await client.get(path, headers={"Accept-Encoding": "gzip"})
            plain = await client.get(path, headers={"Accept-Encoding": "identity"})
            assert zipped.headers["content-encoding"] == "gzip"
            assert "content-encoding" not in plain.headers
            assert zipped.headers["vary"] == plain.headers["vary"] == "Accept-Encoding", path
            if path == "/api/status":
                assert zipped.json() == plain.json() and plain.json()["probes"]["alpha"]
                continue
            lines = [[ln for ln in r.text.splitlines() if "benchd_" in ln] for r in (zipped, plain)]
            assert lines[0] == lines[1] and lines[0]
        metrics = (await client.get("/metrics")).text
        assert "process_cpu_seconds_total" in metrics
        assert 'benchd_cycles_total{outcome="success",probe="alpha"} 1.0' in metrics
        book.record(make_result(cycle=2))
        metrics = (await client.get("/metrics")).text
        assert 'benchd_cycles_total{outcome="success",probe="alpha"} 2.0' in metrics
        status = (await client.get("/api/status")).json()
        assert status["probes"]["alpha"]["cycles_total"] == 2


@pytest.mark.promtool
async def test_promtool_accepts_the_served_metrics() -> None:
    tool = promtool_path()
    book = ResultBook()
    metric = MetricDrift(-0.2, 0.0, 0.01, True, -0.3, -0.1, 12)
    book.record(make_result(drift=DriftOutcome(baseline="pinned", metrics={"recall@10": metric})))
    async with running(book) as client:
        body = (await client.get("/metrics")).content
    proc = subprocess.run([tool, "check", "metrics"], input=body, capture_output=True, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()


async def test_readyz_is_ready_once_loaded_and_stays_ready_while_probes_fail() -> None:
    book = ResultBook()
    async with running(book) as client:
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert "not loaded" in response.json()["reason"]
        book.set_probes(["alpha", "beta"])
        response = await client.get("/readyz")
        assert response.status_code == 200 and response.json() == {"status": "ready"}
        book.record(make_result("beta", outcome="failed", error_kind="connect"))
        assert (await client.get("/readyz")).status_code == 200  # a failing store stays scraped
        assert (await client.get("/healthz")).text == "OK\n"


async def test_api_status_serves_last_results_without_credentials() -> None:
    key = secrets.token_hex(12)
    book = ResultBook()
    book.set_probes(["alpha", "beta"])
    book.record(make_result("alpha", endpoint=f"http://bench:{key}@store:8080/?api_key={key}"))
    async with running(book) as client:
        response = await client.get("/api/status")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert key not in response.text
    doc = response.json()
    assert doc["probes"]["beta"]["state"] == "pending"
    last = doc["probes"]["alpha"]["last"]
    assert last["target_info"]["endpoint"] == "http://store:8080/"
    assert [q["id"] for q in last["queries"]] == ["q0", "q1", "q2"]


@pytest.mark.parametrize(
    ("outcome", "status", "fragment"),
    [
        (True, 200, "configuration reloaded"),
        (False, 500, "previous configuration stays active"),
        (ConfigError("bench.toml: probe.alpha.k: must be positive"), 500, "probe.alpha.k"),
    ],
)
async def test_post_reload_reports_the_outcome_in_one_json_line(
    outcome: bool | Exception, status: int, fragment: str
) -> None:
    callback, calls = reloader(outcome)
    async with running(ResultBook(), reload=callback) as client:
        response = await client.post("/-/reload")
    assert calls == [1]
    assert response.status_code == status
    assert fragment in response.json()["message"]
    assert "\n" not in response.text


async def test_reload_rejects_get_and_reports_when_unavailable() -> None:
    callback, calls = reloader(True)
    async with running(ResultBook(), reload=callback) as client:
        assert (await client.get("/-/reload")).status_code == 405
    assert calls == []
    async with running(ResultBook()) as client:
        response = await client.post("/-/reload")
        assert response.status_code == 501


def basic_auth() -> tuple[WebAuth, str]:
    password = secrets.token_urlsafe(12)
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    return WebAuth(basic_users={"prom": hashed}), password


async def test_basic_auth_guards_everything_but_healthz() -> None:
    auth, password = basic_auth()
    callback, calls = reloader(True)
    book = ResultBook()
    async with running(book, reload=callback, auth=auth) as client:
        assert (await client.get("/healthz")).status_code == 200
        for path in ("/", "/metrics", "/readyz", "/api/status"):
            denied = await client.get(path)
            assert denied.status_code == 401, path
            assert denied.headers["www-authenticate"].startswith("Basic")
        assert (await client.post("/-/reload")).status_code == 401
        assert (await client.get("/metrics", auth=("prom", "wrong"))).status_code == 401
        assert (await client.get("/metrics", auth=("nobody", password))).status_code == 401
        assert calls == []
        assert (await client.get("/metrics", auth=("prom", password))).status_code == 200
        assert (await client.post("/-/reload", auth=("prom", password))).status_code == 200
        assert calls == [1]


async def test_bearer_token_auth_with_a_sha256_hash() -> None:
    token = secrets.token_urlsafe(24)
    auth = WebAuth(bearer_tokens=(hash_secret(token),))
    async with running(ResultBook(), auth=auth) as client:
        denied = await client.get("/api/status", headers={"Authorization": "Bearer nope"})
        assert denied.status_code == 401
        assert denied.headers["www-authenticate"].startswith("Bearer")
        basic = await client.get("/api/status", auth=("user", token))
        assert basic.status_code == 401
        allowed = await client.get("/api/status", headers={"Authorization": f"Bearer {token}"})
        assert allowed.status_code == 200


def test_malformed_basic_credentials_are_refused_not_crashed() -> None:
    auth = Authenticator(WebAuth(basic_users={"prom": hash_secret("pw")}))
    for header in ("Basic !!!", "Basic " + "cHJvbQ==", "Digest x", "", "Basic"):
        assert auth.check(header) is False, header
    assert auth.check("Basic cHJvbTpwdw==") is True  # prom:pw


def test_web_config_file_is_read_and_validated(tmp_path: Path) -> None:
    good = tmp_path / "web.toml"
    good.write_text(f'bearer_token_hashes = ["{hash_secret("t0ken-t0ken")}"]\n')
    auth = read_web_config(good).auth
    assert auth is not None and Authenticator(auth).check("Bearer t0ken-t0ken")
    cases: list[tuple[str, str]] = [
        ('tls_config = {cert_file = "x"}\n', "unknown key 'tls_config'"),
        ('[basic_auth_users]\nprom = "plaintext"\n', "basic_auth_users.prom: unsupported hash"),
        ("bearer_token_hashes = []\n", "no basic_auth_users and no bearer_token_hashes"),
        ("basic_auth_users = [1]\n", "must be a table"),
        ("= broken", "invalid TOML"),
    ]
    for text, message in cases:
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(message)) as err:
            read_web_config(bad)
        assert str(err.value).startswith(str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        read_web_config(tmp_path / "missing.toml")


def test_bcrypt_hash_without_the_package_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    missing: Callable[[str], object] = lambda name: None if name == "bcrypt" else real(name)  # noqa: E731
    monkeypatch.setattr(importlib.util, "find_spec", missing)
    with pytest.raises(ConfigError, match="pip install bcrypt"):
        WebAuth(basic_users={"prom": "$2b$04$" + "a" * 53})


def test_malformed_hashes_and_user_names_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="malformed bcrypt hash"):
        WebAuth(basic_users={"prom": "$2b$04$short"})
    with pytest.raises(ConfigError, match="malformed bcrypt hash"):
        WebAuth(basic_users={"prom": "$2b$99$" + "a" * 53})
    with pytest.raises(ConfigError, match="hold no ':'"):
        WebAuth(basic_users={"a:b": hash_secret("pw")})


async def test_busy_port_is_a_one_line_input_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InputError, match=rf"cannot listen on 127.0.0.1:{port}: .*--listen"):
            async with serve_web(build_app(ResultBook()), "127.0.0.1", port):
                pass


async def test_server_stops_listening_when_the_block_ends() -> None:
    async with (
        serve_web(build_app(ResultBook()), "127.0.0.1", 0) as bound,
        httpx.AsyncClient() as client,
    ):
        assert (await client.get(f"{bound.url}/healthz")).status_code == 200
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"{bound.url}/healthz")


async def test_an_error_in_the_served_block_reaches_the_caller_unwrapped() -> None:
    with pytest.raises(ConfigError, match="boom"):
        async with serve_web(build_app(ResultBook()), "127.0.0.1", 0):
            raise ConfigError("boom")


async def test_cancelling_the_caller_shuts_the_server_down() -> None:
    with anyio.CancelScope() as scope:
        async with serve_web(build_app(ResultBook()), "127.0.0.1", 0) as bound:
            scope.cancel()
            await anyio.Event().wait()
    assert scope.cancelled_caught
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"{bound.url}/healthz")
