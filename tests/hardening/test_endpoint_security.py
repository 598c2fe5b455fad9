"""benchd's own endpoints: TLS and auth from the web config, a guarded reload, safe defaults.

The daemon runs as a real process; the certificate is a throw-away
self-signed one made with the ``openssl`` command line.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from drill_support import ENV, free_port, probe_toml, write_config, write_tiny_fixture
from support import BenchdProcess, self_signed_cert

from benchd.config.load import DEFAULT_LISTEN, ServerConfig, parse_listen
from benchd.config.web import read_web_config
from benchd.errors import ConfigError
from benchd.web.auth import hash_secret

USER, PASSWORD = "prometheus", "scrape-pass-4e1b"
TOKEN = "reload-token-7a2c90d1e5f3"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


def daemon_config(tmp_path: Path, web: str) -> Path:
    """A daemon config whose probe points nowhere (endpoints are what is tested)."""
    (tmp_path / "web.toml").write_text(web)
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    probe = probe_toml("guarded", f"http://127.0.0.1:{free_port()}", fixture, interval=30)
    return write_config(tmp_path, probe, server=f'web_config = "{tmp_path / "web.toml"}"\n')


def test_tls_and_basic_auth_guard_everything_but_healthz(
    tmp_path: Path, cert: tuple[Path, Path]
) -> None:
    cert_file, key_file = cert
    web = (
        f'[basic_auth_users]\n{USER} = "{hash_secret(PASSWORD)}"\n\n'
        f'[tls_server_config]\ncert_file = "{cert_file}"\nkey_file = "{key_file}"\n'
    )
    config = daemon_config(tmp_path, web)
    trust = ssl.create_default_context(cafile=str(cert_file))
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        assert benchd.url.startswith("https://127.0.0.1:")
        assert benchd.get("/healthz", verify=trust).status_code == 200
        for path in ("/", "/metrics", "/api/status", "/readyz"):
            assert benchd.get(path, verify=trust).status_code == 401, path
            assert benchd.get(path, verify=trust, auth=(USER, PASSWORD)).status_code in (200, 503)
        assert benchd.get("/metrics", verify=trust, auth=(USER, "wrong")).status_code == 401
        assert benchd.post("/-/reload", verify=trust).status_code == 401
        assert benchd.post("/-/reload", verify=trust, auth=(USER, PASSWORD)).status_code == 200
        with pytest.raises(httpx.ConnectError):  # untrusted certificate: the handshake fails
            benchd.get("/healthz", verify=ssl.create_default_context())
        plain = benchd.url.replace("https://", "http://")
        with pytest.raises(httpx.TransportError):  # no plain-HTTP fallback
            httpx.get(plain + "/healthz", timeout=5)
        assert benchd.stop() == 0


def test_reload_needs_the_bearer_token_when_auth_is_configured(tmp_path: Path) -> None:
    config = daemon_config(tmp_path, f'bearer_token_hashes = ["{hash_secret(TOKEN)}"]\n')
    with BenchdProcess(["--config", str(config)], env=ENV) as benchd:
        assert benchd.post("/-/reload").status_code == 401
        wrong = {"Authorization": "Bearer not-the-token"}
        assert benchd.post("/-/reload", headers=wrong).status_code == 401
        assert benchd.get("/metrics", headers=wrong).status_code == 401
        good = {"Authorization": f"Bearer {TOKEN}"}
        reply = benchd.post("/-/reload", headers=good)
        assert reply.status_code == 200 and reply.json()["status"] == "success"
        assert benchd.get("/healthz").status_code == 200
        assert benchd.stop() == 0


def test_a_bad_certificate_is_a_one_line_config_error(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    web = '[tls_server_config]\ncert_file = "cert.pem"\nkey_file = "cert.pem"\n'
    config = daemon_config(tmp_path, web)
    proc = subprocess.run(
        [sys.executable, "-m", "benchd", "run", "--config", str(config), "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=30, check=False,
        env={**os.environ, **ENV},
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "web.toml: tls_server_config: cannot load cert_file" in lines[0]


def test_benchd_listens_on_loopback_unless_told_otherwise(tmp_path: Path) -> None:
    assert ServerConfig().listen == DEFAULT_LISTEN == "127.0.0.1:9108"
    assert parse_listen(":9108") == ("127.0.0.1", 9108)  # an empty host is loopback too
    help_text = subprocess.run(
        [sys.executable, "-m", "benchd", "run", "--help"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    assert "127.0.0.1:9108" in help_text


def test_web_config_reads_tls_alone_relative_to_its_own_folder(tmp_path: Path) -> None:
    path = tmp_path / "web.toml"
    path.write_text('[tls_server_config]\ncert_file = "c.pem"\nkey_file = "k.pem"\n')
    web = read_web_config(path)
    assert web.auth is None and web.tls is not None
    assert (web.tls.cert_file, web.tls.key_file) == (tmp_path / "c.pem", tmp_path / "k.pem")
    cases = [
        ('[tls_server_config]\ncert_file = "c.pem"\n', "cert_file and key_file are both required"),
        ('[tls_server_config]\ncert_file = "c"\nkey_file = "k"\nca = "x"\n', "unknown key 'ca'"),
        ('tls_server_config = "c.pem"\n', "must be a table"),
    ]
    for text, message in cases:
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            read_web_config(path)
