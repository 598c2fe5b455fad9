"""deploy/systemd: the unit verifies cleanly, is hardened, and its example config loads."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deploy_processes import free_port, run_benchd
from deploy_support import DEPLOY

from benchd.config.load import load_config

SYSTEMD = DEPLOY / "systemd"
UNIT = SYSTEMD / "benchd.service"
INSTALLED_BENCHD = "/opt/benchd/bin/benchd"
HARDENING = {
    "DynamicUser": "yes",
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "CapabilityBoundingSet": "",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
}
# `systemd-analyze security` exposure: 0 = fully locked down, 10 = unprotected.
MAX_EXPOSURE = 2.0


def _service() -> dict[str, list[str]]:
    """The [Service] section; repeated keys keep every value."""
    values: dict[str, list[str]] = {}
    section = ""
    for raw in UNIT.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            values.setdefault(key, []).append(value)
    return values


def _analyze(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run systemd-analyze on a copy of the unit whose ExecStart points at this benchd."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (systemd package)")
    benchd = Path(sys.executable).with_name("benchd")
    unit = tmp_path / UNIT.name
    unit.write_text(
        UNIT.read_text(encoding="utf-8").replace(INSTALLED_BENCHD, str(benchd)), "utf-8"
    )
    return subprocess.run(
        [tool, *args, str(unit)], capture_output=True, text=True, timeout=60, check=False
    )


def test_unit_has_the_hardening_options() -> None:
    service = _service()
    for key, value in HARDENING.items():
        assert service.get(key) == [value], f"{key}={service.get(key)}"
    assert service["LoadCredential"] == ["api-key:/etc/benchd/api-key"]
    assert service["RestartPreventExitStatus"] == ["2"]  # a bad config does not loop
    assert all(INSTALLED_BENCHD in cmd for cmd in service["ExecStart"] + service["ExecStartPre"])


def test_systemd_analyze_verify_reports_nothing(tmp_path: Path) -> None:
    result = _analyze(tmp_path, "verify")
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def test_systemd_analyze_security_rates_the_unit_ok(tmp_path: Path) -> None:
    result = _analyze(tmp_path, "security", "--offline=yes")
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", result.stdout)
    if match is None:
        pytest.skip(f"this systemd-analyze cannot rate a unit offline: {result.stderr.strip()}")
    assert float(match.group(1)) <= MAX_EXPOSURE, result.stdout[-2000:]


def test_example_config_loads_with_the_env_file_and_the_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = (SYSTEMD / "benchd.env").read_text(encoding="utf-8").splitlines()
    env = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "api-key").write_text("unit-test-key\n", encoding="utf-8")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    config = load_config(SYSTEMD / "benchd.toml")
    target = config.probes[0].target
    assert target.settings.url == env["BENCHD_TARGET_URL"]
    assert target.settings.namespace == env["BENCHD_NAMESPACE"]
    assert target.secret is not None and target.secret.reveal() == "unit-test-key"
    assert "BENCHD_API_KEY" not in env  # the key is a credential, not in the env file


def _probe(name: str, port: int) -> str:
    return (
        f'[[probe]]\nname = "{name}"\nfixture = "packaged:smoke"\ninterval_s = 3600\n'
        f'[probe.target]\nkind = "zengram"\nurl = "http://127.0.0.1:{port}"\n'
        'api_key_env = "UNIT_RELOAD_KEY"\n'
    )


def test_exec_reload_as_systemd_runs_it_reloads_the_main_process(tmp_path: Path) -> None:
    """``systemctl reload benchd`` runs ExecReload with $MAINPID = the ExecStart process.

    benchd is started as the unit starts it (the installed console script, so
    its pid is MAINPID for Type=exec), the config is changed, and the unit's
    own ExecReload line is run: the running daemon reloads, and stays up.
    """
    (reload_line,) = _service()["ExecReload"]
    console_script = Path(sys.executable).with_name("benchd")
    config = tmp_path / "benchd.toml"
    port = free_port()  # nothing listens there: the probe's cycles fail, reloads still work
    config.write_text(_probe("before", port))
    env = {"UNIT_RELOAD_KEY": "unit-reload-key"}
    with run_benchd(["--config", str(config)], env=env, program=[str(console_script)]) as benchd:
        config.write_text(_probe("after", port))
        command = shlex.split(reload_line.replace("$MAINPID", str(benchd.proc.pid)))
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, done.stderr
        reloaded = benchd.logs.wait_json(
            lambda e: e.get("event") in ("reloaded", "reload failed"), time.monotonic() + 30
        )
        assert reloaded["event"] == "reloaded" and reloaded["probes"] == ["after"], reloaded
        assert benchd.proc.poll() is None  # SIGHUP reloaded it; it did not end it
