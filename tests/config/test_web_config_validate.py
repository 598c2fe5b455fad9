"""``web_config`` is decoded with the config: ``benchd validate`` checks it, one line a problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = """[server]
web_config = "web.toml"

[[probe]]
name = "p"
fixture = "packaged:smoke"
[probe.target]
kind = "zengram"
url = "http://127.0.0.1:9"
api_key_env = "WEB_VALIDATE_KEY"
"""


def validate(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "-c", str(folder / "benchd.toml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("web", "message"),
    [
        (None, "web.toml: cannot read web config"),
        ('[basic_auth_users]\nprom = "plaintext"\n', "basic_auth_users.prom: unsupported hash"),
        ('[basic_auth_users]\nprom = "$2b$12$tooshort"\n', "malformed bcrypt hash"),
        ("bearer_token_hashes = []\n", "no basic_auth_users and no bearer_token_hashes"),
        ('[tls_server_config]\ncert_file = "c.pem"\nkey_file = "k.pem"\n', "cannot load cert_file"),
    ],
)
def test_validate_reports_a_bad_web_config(tmp_path: Path, web: str | None, message: str) -> None:
    (tmp_path / "benchd.toml").write_text(CONFIG)
    if web is not None:
        (tmp_path / "web.toml").write_text(web)
    proc = validate(tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stdout + proc.stderr
    problems = [line for line in proc.stdout.splitlines() if message in line]
    assert len(problems) == 1 and problems[0].startswith(str(tmp_path / "web.toml")), proc.stdout


def test_validate_accepts_a_good_web_config(tmp_path: Path) -> None:
    (tmp_path / "benchd.toml").write_text(CONFIG)
    (tmp_path / "web.toml").write_text(f'bearer_token_hashes = ["sha256:{"ab" * 32}"]\n')
    proc = validate(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
