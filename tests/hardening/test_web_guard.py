"""benchd's own server against hostile clients: Host, Origin, forwarded addresses, endless heads.

DNS rebinding is a ``Host`` the operator never gave benchd; a cross-origin
write is a ``POST`` a browser marks as coming from another page; a forged
client address is an ``X-Forwarded-For`` from someone benchd has no reason
to believe. Each is generated (hypothesis) or sent by httpx over loopback;
the endless heads come from 50 raw sockets against a daemon whose RSS is
bounded.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import anyio
import httpx
import pytest
import yaml
from drill_support import (
    KEY_ENV,
    probe_toml,
    rss_bytes,
    write_config,
    write_tiny_fixture,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from support import BenchdProcess

from benchd.config.web import WebHttp, read_web_config
from benchd.surfacers.result_book import ResultBook
from benchd.web.app import build_app, set_guard
from benchd.web.guard import GuardPolicy, host_allowed
from benchd.web.server import ServerLimits, is_loopback, serve_web

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20


class Reloads:
    """A reload callback that counts its calls (the server-side effect of a POST)."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self) -> bool:
        self.count += 1
        return True


def idle_daemon(tmp_path: Path, server: str = "") -> Path:
    """A config whose one probe fails fast once an hour (nothing listens on port 9)."""
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    probe = probe_toml("idle", "http://127.0.0.1:9", fixture, interval=3600, retries=0)
    return write_config(tmp_path, probe, server=server)


def app_with(policy: GuardPolicy) -> tuple[Starlette, Reloads]:
    reloads = Reloads()
    app = build_app(ResultBook(), reload=reloads)
    set_guard(app, policy)
    return app, reloads


def asgi(app: Starlette, client: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(client, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:9108")


# -- Host (DNS rebinding) -----------------------------------------------------------------


def test_a_rebound_name_cannot_read_a_loopback_daemon_and_allowed_names_can(
    tmp_path: Path,
) -> None:
    web = tmp_path / "web.toml"
    web.write_text('[http_server_config]\nallowed_hosts = ["benchd.internal", "*.lab.test"]\n')
    config = idle_daemon(tmp_path, 'web_config = "web.toml"\n')
    with BenchdProcess(["--config", str(config)], env={KEY_ENV: "k"}) as benchd:
        port = benchd.url.rsplit(":", 1)[1]
        for path in ("/", "/metrics", "/api/status", "/readyz"):
            for host in (
                f"attacker.example:{port}",
                "attacker.example",
                f"benchd.internal.evil:{port}",
            ):
                answer = benchd.get(path, headers={"Host": host})
                assert answer.status_code == 421, (path, host)
                assert "not one benchd answers to" in answer.json()["message"]
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", "benchd.internal", "a.lab.test"):
                assert benchd.get(path, headers={"Host": host}).status_code in (200, 503), host
        for host in ("attacker.example", f"127.0.0.1:{port}"):
            assert benchd.get("/healthz", headers={"Host": host}).status_code == 200
        refused = benchd.post("/-/reload", headers={"Host": "attacker.example"})
        assert refused.status_code == 421
        counted = {
            s[0]["reason"]: s[1] for s in benchd.samples("benchd_web_requests_refused_total")
        }
        assert counted["host"] >= 9 and counted["origin"] == 0
        reloads = benchd.samples("benchd_config_reloads_total")
        assert all(value == 0 for _, value in reloads)


def _listen(config: Path) -> str:
    """The host of ``[server] listen`` (read as a line: the k8s file is a template)."""
    found = re.search(r'^listen\s*=\s*"([^"]+)"', config.read_text(), re.MULTILINE)
    assert found is not None, config
    return found.group(1).rsplit(":", 1)[0]


def _scrape_targets(prometheus_yml: Path) -> list[str]:
    doc = yaml.safe_load(prometheus_yml.read_text())
    return [
        target
        for job in doc["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("config", "prometheus"),
    [
        ("deploy/docker/benchd.toml", "deploy/docker/prometheus.yml"),
        ("deploy/systemd/benchd.toml", "deploy/prometheus/prometheus.yml"),
    ],
)
async def test_the_shipped_scrape_setups_keep_working(config: str, prometheus: str) -> None:
    listen = _listen(REPO / config)
    app, _ = app_with(GuardPolicy.from_config(WebHttp(), loopback=is_loopback(listen)))
    targets = [t for t in _scrape_targets(REPO / prometheus) if t.endswith(":9108")]
    assert targets
    async with asgi(app, client="10.1.2.3") as client:
        for target in targets:
            answer = await client.get("/metrics", headers={"Host": target})
            assert answer.status_code == 200, (config, target)
            assert "benchd_web_requests_refused_total" in answer.text


@pytest.mark.anyio
async def test_k8s_listens_beyond_loopback_so_scrapes_by_pod_name_pass() -> None:
    listen = _listen(REPO / "deploy/k8s/base/benchd.toml.in")
    assert not is_loopback(listen)
    app, reloads = app_with(GuardPolicy.from_config(WebHttp(), loopback=False))
    async with asgi(app, client="10.1.2.3") as client:
        answer = await client.get("/metrics", headers={"Host": "benchd-0.benchd.ns.svc:9108"})
        assert answer.status_code == 200
        # but a write by name is refused before anything else looks at it
        post = await client.post("/-/reload", headers={"Host": "benchd-0.benchd.ns.svc:9108"})
        assert post.status_code == 421 and reloads.count == 0


@settings(max_examples=300, deadline=None)
@given(
    name=st.one_of(
        st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z0-9-]{1,10}){0,3}", fullmatch=True),
        st.sampled_from(["localhost", "127.0.0.1", "[::1]", "10.0.0.7", "app.localhost"]),
    ),
    port=st.one_of(st.none(), st.integers(1, 65535)),
)
def test_host_allowed_passes_ip_literals_localhost_and_listed_names_only(
    name: str, port: int | None
) -> None:
    host = name if port is None else f"{name}:{port}"
    bare = name.strip("[]")
    listed = ("benchd.internal",)
    expected = (
        bare in ("localhost", "127.0.0.1", "::1", "10.0.0.7")
        or bare.endswith(".localhost")
        or bare == "benchd.internal"
    )
    assert host_allowed(host, listed) is expected


# -- Origin (cross-origin writes) -----------------------------------------------------------

ORIGINS = st.sampled_from(
    [
        None,
        "http://127.0.0.1:9108",
        "http://localhost:9108",
        "http://127.0.0.1:9109",
        "https://127.0.0.1:9108",
        "http://attacker.example",
        "null",
        "file://",
        "http://127.0.0.1:9108/extra",
    ]
)
SITES = st.sampled_from([None, "same-origin", "none", "same-site", "cross-site", "CROSS-SITE"])
AUTHS = st.sampled_from([None, "Bearer abc", "Basic dXNlcjpwYXNz"])


def cross(origin: str | None, site: str | None) -> bool:
    if site is not None and site.lower() not in ("same-origin", "none"):
        return True
    same = (None, "http://127.0.0.1:9108", "http://127.0.0.1:9108/extra")
    return origin not in same


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    origin=ORIGINS, site=SITES, auth=AUTHS, path=st.sampled_from(["/-/reload", "/api/probes/p/run"])
)
def test_a_write_a_browser_marks_cross_origin_is_refused_unless_it_carries_a_bearer(
    origin: str | None, site: str | None, auth: str | None, path: str
) -> None:
    app, reloads = app_with(GuardPolicy(loopback=True))
    headers = {
        k: v
        for k, v in (("Origin", origin), ("Sec-Fetch-Site", site), ("Authorization", auth))
        if v
    }

    async def post() -> int:
        async with asgi(app) as client:
            return (await client.post(path, headers=headers)).status_code

    status = anyio.run(post)
    if cross(origin, site) and not (auth or "").startswith("Bearer"):
        assert status == 403 and reloads.count == 0
    else:
        assert status != 403 or path != "/-/reload"
        if path == "/-/reload":
            assert reloads.count == 1 and status == 200


# -- forwarded addresses ------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_forwarded_for_opens_nothing_unless_web_config_names_the_proxy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")  # what broke: uvicorn believed everyone
    app, reloads = app_with(GuardPolicy(loopback=True))
    # from another address, claiming to be loopback: refused as the remote client it is
    async with asgi(app, client="192.0.2.7") as client:
        forged = await client.post("/-/reload", headers={"X-Forwarded-For": "127.0.0.1"})
        assert forged.status_code == 403 and reloads.count == 0
    # through the real server: uvicorn's own trust is off, so a loopback client that
    # claims another address is still the loopback client it is
    async with serve_web(app, "127.0.0.1", 0) as bound, httpx.AsyncClient() as client:
        claimed = await client.post(
            bound.url + "/-/reload", headers={"X-Forwarded-For": "192.0.2.7"}
        )
        assert claimed.status_code == 200 and reloads.count == 1
        # once web_config names 127.0.0.1 as a proxy, its X-Forwarded-For is believed
        web = tmp_path / "web.toml"
        web.write_text('[http_server_config]\ntrusted_proxies = ["127.0.0.0/8"]\n')
        set_guard(app, GuardPolicy.from_config(read_web_config(web).http, loopback=True))
        believed = await client.post(
            bound.url + "/-/reload", headers={"X-Forwarded-For": "192.0.2.7"}
        )
        assert believed.status_code == 403 and reloads.count == 1
        chained = await client.post(
            bound.url + "/-/reload", headers={"X-Forwarded-For": "192.0.2.7, 127.0.0.1"}
        )
        assert chained.status_code == 403 and reloads.count == 1


# -- request heads -------------------------------------------------------------------------------


def _head(shape: str, over: bool) -> bytes:
    """A request head of ``shape``: well within 16 KiB / 100 lines, or well past them."""
    n = 20_000 if over else 200
    if shape == "long-url":
        return b"GET /healthz?" + b"a" * n + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    if shape == "one-long-header":
        return b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: " + b"v" * n + b"\r\n\r\n"
    lines = b"".join(b"X-%d: v\r\n" % i for i in range(120 if over else 80))
    return b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n"


@pytest.mark.anyio
@pytest.mark.parametrize("shape", ["long-url", "one-long-header", "many-headers"])
async def test_a_head_past_its_bounds_gets_431_and_one_within_is_served(shape: str) -> None:
    limits = ServerLimits(max_head_bytes=16 * 1024, max_headers=100)
    app, _ = app_with(GuardPolicy(loopback=True))
    async with serve_web(app, "127.0.0.1", 0, limits=limits) as bound:
        for over, expected in ((False, b" 200 "), (True, b" 431 ")):
            reader, writer = await asyncio.open_connection(bound.host, bound.port)
            writer.write(_head(shape, over))
            await writer.drain()
            status = await reader.readline()
            writer.close()
            assert expected in status, (shape, over, status)
        assert bound.stats is not None and bound.stats.heads_refused == 1


async def _endless_head(host: str, port: int, rounds: int, refused: list[int]) -> None:
    """Connect ``rounds`` times, each time sending a head that never ends until closed."""
    for _ in range(rounds):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            for i in range(1_000_000):
                writer.write(b"X-Endless-%d: %s\r\n" % (i, b"v" * 1000))
                await writer.drain()
                if reader.at_eof() or writer.is_closing():
                    break
        except ConnectionError:
            pass
        refused.append(1)
        writer.close()


# 50 connections x (a 16 KiB head cap + one 256 KiB read past it), rounded up; measured +0.7 MiB
HEADS_RSS_BOUND = 16 * MIB


def test_fifty_endless_request_heads_leave_rss_within_its_bound(tmp_path: Path) -> None:
    config = idle_daemon(tmp_path)
    with BenchdProcess(["--config", str(config)], env={KEY_ENV: "k"}) as benchd:
        assert benchd.proc is not None
        host, port = benchd.url.removeprefix("http://").rsplit(":", 1)
        before = rss_bytes(benchd.proc.pid)
        done: list[int] = []
        peak = [before]

        async def attack() -> None:
            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(_endless_head, host, int(port), 4, done)

                async def watch() -> None:
                    while len(done) < 200:
                        peak[0] = max(peak[0], rss_bytes(benchd.proc.pid))  # type: ignore[union-attr]
                        await anyio.sleep(0.05)

                tg.start_soon(watch)

        anyio.run(attack)
        assert len(done) == 200
        assert benchd.get("/healthz").status_code == 200
        growth = peak[0] - before
        assert growth < HEADS_RSS_BOUND, f"RSS grew {growth / MIB:.1f} MiB"
        print(f"RSS before {before / MIB:.1f} MiB, peak {peak[0] / MIB:.1f} MiB")
