"""Authentication on benchd's endpoints: blind to user names, bounded, reloadable.

Timing equality is shown by what is computed (one hash check of the same kind
and cost for known and unknown users), never by a stopwatch.
"""

from __future__ import annotations

import base64
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import bcrypt
import httpx
import pytest
from support import BenchdProcess

from benchd.config.web import WebAuth, bcrypt_cost
from benchd.surfacers.result_book import ResultBook
from benchd.web.app import build_app
from benchd.web.auth import Authenticator
from benchd.web.server import serve_web

pytestmark = pytest.mark.anyio


class CountingCheckpw:
    """bcrypt.checkpw, counted: every call, the hash it compared with, and peak concurrency."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.hashes: list[bytes] = []
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        with self._lock:
            self.hashes.append(hashed)
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            return bool(self.real(password, hashed))
        finally:
            with self._lock:
                self.active -= 1


@pytest.fixture
def checkpw(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingCheckpw]:
    counter = CountingCheckpw(bcrypt.checkpw)
    monkeypatch.setattr(bcrypt, "checkpw", counter)
    yield counter


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def bcrypt_auth(rounds: int = 6) -> tuple[WebAuth, str]:
    password = secrets.token_urlsafe(12)
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=rounds)).decode()
    return WebAuth(basic_users={"prom": hashed}), password


def test_an_unknown_user_costs_one_check_of_the_same_cost(checkpw: CountingCheckpw) -> None:
    auth, password = bcrypt_auth(rounds=6)
    authenticator = Authenticator(auth)
    assert authenticator.check(basic("nobody", password)) is False
    assert authenticator.check(basic("prom", "wrong")) is False
    assert authenticator.check(basic("prom", password)) is True
    assert len(checkpw.hashes) == 3  # exactly one check each, known user or not
    unknown, known, _ = (h.decode() for h in checkpw.hashes)
    assert unknown != known  # the unknown user was checked against a dummy...
    assert bcrypt_cost(unknown) == bcrypt_cost(known) == 6  # ...of the same cost


def test_over_long_passwords_are_refused_without_error(checkpw: CountingCheckpw) -> None:
    auth, _ = bcrypt_auth(rounds=4)
    authenticator = Authenticator(auth)
    long = "p" * 73  # one byte beyond what bcrypt takes (bcrypt 5 raises on it)
    assert authenticator.check(basic("prom", long)) is False
    assert authenticator.check(basic("nobody", long)) is False
    assert checkpw.hashes == []  # same path for known and unknown users: nothing hashed


async def test_over_long_password_is_a_401_over_http() -> None:
    auth, _ = bcrypt_auth(rounds=4)
    async with (
        serve_web(build_app(ResultBook(), auth=auth), "127.0.0.1", 0) as bound,
        httpx.AsyncClient(base_url=bound.url) as client,
    ):
        reply = await client.get("/metrics", auth=("prom", "é" * 60))  # 120 bytes
        assert reply.status_code == 401
        assert reply.json() == {"status": "error", "message": "authentication required"}


async def test_password_checks_are_bounded_and_cannot_starve_a_scrape(
    checkpw: CountingCheckpw,
) -> None:
    auth, password = bcrypt_auth(rounds=8)
    book = ResultBook()
    fresh = httpx.Limits(max_connections=100, max_keepalive_connections=0)
    async with (
        serve_web(build_app(book, auth=auth), "127.0.0.1", 0) as bound,
        httpx.AsyncClient(base_url=bound.url, timeout=60, limits=fresh) as client,
        httpx.AsyncClient(base_url=bound.url, timeout=60, limits=fresh) as attackers,
    ):
        assert (await client.get("/metrics", auth=("prom", password))).status_code == 200
        checks_before = len(checkpw.hashes)
        codes: list[int] = []
        scrape: list[int] = []

        async def wrong(i: int) -> None:
            reply = await attackers.get("/metrics", auth=("prom", f"bad{i}"))
            codes.append(reply.status_code)

        async with anyio.create_task_group() as tg:
            for i in range(60):
                tg.start_soon(wrong, i)
            # the scraper's header is cached: it needs no check, however many wait
            scrape.append((await client.get("/metrics", auth=("prom", password))).status_code)
        assert scrape == [200]
        assert sorted(set(codes)) <= [401, 429] and len(codes) == 60
        assert checkpw.peak == 1  # one bcrypt check at a time, whatever the load
        checked = len(checkpw.hashes) - checks_before
        assert checked == codes.count(401)  # a 429 costs no hash at all
        assert codes.count(429) > 0  # 60 at once exceed the bounded queue


async def test_post_endpoints_answer_only_loopback_clients_without_auth() -> None:
    async def reload() -> bool:
        return True

    app = build_app(ResultBook(), reload=reload)
    remote = httpx.ASGITransport(app=app, client=("192.0.2.7", 40000))
    async with httpx.AsyncClient(transport=remote, base_url="http://10.0.0.5:9108") as client:
        refused = await client.post("/-/reload")
        assert refused.status_code == 403
        assert "only loopback clients" in refused.json()["message"]
        assert (await client.post("/api/probes/alpha/run")).status_code == 403
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/api/status")).status_code == 200  # reads stay open
    mapped = httpx.ASGITransport(app=app, client=("::ffff:127.0.0.1", 40000))
    async with httpx.AsyncClient(transport=mapped, base_url="http://10.0.0.5:9108") as client:
        assert (await client.post("/-/reload")).status_code == 200
    async with (
        serve_web(app, "127.0.0.1", 0) as bound,
        httpx.AsyncClient(base_url=bound.url) as client,
    ):
        assert (await client.post("/-/reload")).status_code == 200


def web_toml(users: dict[str, str]) -> str:
    lines = ["[basic_auth_users]"]
    for user, password in users.items():
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
        lines.append(f'{user} = "{hashed}"')
    return "\n".join(lines) + "\n"


def test_reload_applies_a_changed_web_config_and_a_missing_one_fails(tmp_path: Path) -> None:
    web = tmp_path / "web.toml"
    web.write_text(web_toml({"alice": "alice-pass-1", "bob": "bob-pass-2"}))
    config = tmp_path / "benchd.toml"
    config.write_text(
        f'[server]\nweb_config = "{web}"\n\n'
        '[[probe]]\nname = "idle"\nfixture = "packaged:smoke"\ninterval_s = 3600\n'
        '[probe.target]\nkind = "zengram"\nurl = "http://127.0.0.1:9"\n'
        'api_key_env = "AUTH_TEST_KEY"\n'
    )
    alice, bob = ("alice", "alice-pass-1"), ("bob", "bob-pass-2")
    with BenchdProcess(["--config", str(config)], env={"AUTH_TEST_KEY": "k"}) as benchd:
        assert benchd.get("/metrics", auth=bob).status_code == 200  # cached from now on
        web.write_text(web_toml({"alice": "alice-pass-1"}))
        assert benchd.post("/-/reload", auth=bob).status_code == 200
        assert benchd.get("/metrics", auth=bob).status_code == 401  # removed: no access
        assert benchd.get("/metrics", auth=alice).status_code == 200
        web.unlink()
        failed = benchd.post("/-/reload", auth=alice)
        assert failed.status_code == 500
        message = failed.json()["message"]
        assert f"{web}: cannot read web config" in message
        assert "previous configuration stays active" in message
        status = benchd.get("/api/status", auth=alice).json()
        assert status["config"]["last_reload_successful"] is False
        assert f"{web}: cannot read web config" in status["config"]["last_reload_error"]
        assert benchd.get("/metrics").status_code == 401  # the old auth still holds
        assert benchd.get("/metrics", auth=bob).status_code == 401
        assert benchd.stop() == 0


def test_listening_beyond_loopback_without_auth_warns_at_start(tmp_path: Path) -> None:
    config = tmp_path / "benchd.toml"
    config.write_text(
        '[[probe]]\nname = "idle"\nfixture = "packaged:smoke"\ninterval_s = 3600\n'
        '[probe.target]\nkind = "zengram"\nurl = "http://127.0.0.1:9"\n'
        'api_key_env = "AUTH_TEST_KEY"\n'
    )
    args = ["--config", str(config), "--listen", "0.0.0.0:0"]
    with BenchdProcess(args, env={"AUTH_TEST_KEY": "k"}) as benchd:
        warning = benchd.wait_for(lambda e: "beyond loopback" in str(e.get("event")), timeout=30)
        assert warning["level"] == "warning" and "web_config" in warning["hint"]
        assert benchd.stop() == 0
    with BenchdProcess(["--config", str(config)], env={"AUTH_TEST_KEY": "k"}) as benchd:
        benchd.wait_for(lambda e: e.get("event") == "started")
        assert benchd.stop() == 0
        assert not [e for e in benchd.events if "beyond loopback" in str(e.get("event"))]
