"""``benchd run`` as an operator drives it: pid file, reload by signal, readiness, listen address.

Every test starts a real ``python -m benchd run`` and talks to it over loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support import BenchdProcess

from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture

KEY = "run-operator-key-24680"
ENV = {"OP_KEY": KEY}
DEAD = "http://127.0.0.1:9"


store = refstore_fixture("store", scope="module", api_key=KEY, retriever="bm25")


def config(tmp_path: Path, url: str, *, name: str = "op", extra: str = "") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f"""
[[probe]]
name = "{name}"
fixture = "packaged:smoke"
interval_s = 0.5
jitter_s = 0.0
timeout_s = 20.0
{extra}
[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "OP_KEY"
namespace = "benchd-{name}"
max_retries = 0
""")
    return path


def one_sample(proc: BenchdProcess, name: str, **labels: str) -> float:
    found = [v for got, v in proc.samples(name) if all(got.get(k) == x for k, x in labels.items())]
    assert len(found) == 1, (name, labels, proc.samples(name))
    return found[0]


def test_pid_file_reload_by_sighup_counts_reloads_only(
    store: RefStoreThread, tmp_path: Path
) -> None:
    path = config(tmp_path, store.url)
    pid_file = tmp_path / "benchd.pid"
    with BenchdProcess(["--config", str(path), "--pid-file", str(pid_file)], env=ENV) as benchd:
        assert benchd.proc is not None
        assert pid_file.read_text() == f"{benchd.proc.pid}\n"
        # the start-up load is not a reload
        assert one_sample(benchd, "benchd_config_reloads_total", outcome="success") == 0
        assert one_sample(benchd, "benchd_config_last_reload_successful") == 1
        # what the README says: kill -HUP "$(cat benchd.pid)"
        subprocess.run(["sh", "-c", f"kill -HUP $(cat {pid_file})"], check=True, timeout=10)
        benchd.wait_for(lambda e: e.get("event") == "reloaded")
        assert one_sample(benchd, "benchd_config_reloads_total", outcome="success") == 1
        # and the other documented way, as written: curl -X POST .../-/reload
        if shutil.which("curl"):
            curl = ["curl", "-sS", "-X", "POST", f"{benchd.url}/-/reload"]
            out = subprocess.run(curl, capture_output=True, text=True, timeout=30, check=True)
            assert json.loads(out.stdout)["status"] == "success"
        else:
            assert httpx.post(f"{benchd.url}/-/reload", timeout=30).status_code == 200
        assert one_sample(benchd, "benchd_config_reloads_total", outcome="success") == 2
        assert one_sample(benchd, "benchd_config_reloads_total", outcome="failure") == 0
        assert benchd.stop() == 0
    assert not pid_file.exists()  # removed on a clean stop


def test_readyz_stays_200_while_every_cycle_fails(tmp_path: Path) -> None:
    with BenchdProcess(["--config", str(config(tmp_path, DEAD, name="down"))], env=ENV) as benchd:
        ready = benchd.get("/readyz")
        assert ready.status_code == 200 and ready.json() == {"status": "ready"}
        benchd.wait_cycles("down", 2)
        assert one_sample(benchd, "benchd_up", probe="down") == 0
        assert benchd.get("/readyz").status_code == 200


def test_threshold_gauge_follows_the_config_table(store: RefStoreThread, tmp_path: Path) -> None:
    extra = '[probe.thresholds.serial]\n"hit@10" = 0.0\np99 = 1e-9\n'
    path = config(tmp_path, store.url, name="gated", extra=extra)
    with BenchdProcess(["--config", str(path)], env=ENV) as benchd:
        benchd.wait_cycles("gated", 1)
        breached = {
            labels["threshold"]: value
            for labels, value in benchd.samples("benchd_threshold_breached")
            if labels["probe"] == "gated"
        }
        assert breached == {"serial:hit@10>=0": 0.0, "serial:p99<=1e-09": 1.0}


def test_listen_address_from_the_environment(store: RefStoreThread, tmp_path: Path) -> None:
    env = {**ENV, "BENCHD_LISTEN": "127.0.0.1:0"}
    proc = BenchdProcess(["--config", str(config(tmp_path, store.url, name="envl"))], env=env)
    proc.args = ["run", "--log-format", "json", *proc.args[5:]]  # no --listen flag at all
    with proc as benchd:
        assert benchd.url.startswith("http://127.0.0.1:") and not benchd.url.endswith(":9108")
    bad = subprocess.run(
        [sys.executable, "-m", "benchd", "run", "-c", str(tmp_path / "envl.toml")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **ENV, "BENCHD_LISTEN": "localhost"},
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "BENCHD_LISTEN" in bad.stderr and "HOST:PORT" in bad.stderr


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *args],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **ENV, **(env or {})},
    )  # fmt: skip


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_a_one_line_io_error_exit_5(tmp_path: Path) -> None:
    path = config(tmp_path, DEAD)
    pid = run_cli("run", "-c", str(path), "--listen", "127.0.0.1:0", "--pid-file", "/dev/full")
    assert pid.returncode == 5
    assert pid.stderr == (
        "benchd: error: I/O error writing the pid file /dev/full: No space left on device; "
        "free some space or write elsewhere\n"
    )
    assert os.path.exists("/dev/full") and not os.path.isfile("/dev/full")
    with open("/dev/full", "w") as full:  # benchd init - > /dev/full
        out = subprocess.run(
            [sys.executable, "-m", "benchd", "init", "-"],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert out.returncode == 5
    assert out.stderr == (
        "benchd: error: I/O error writing standard output: No space left on device; "
        "free some space or write elsewhere\n"
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_baseline_on_a_full_disk_is_exit_5(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    once = run_cli("once", "--format", "json")
    assert once.returncode == 0, once.stderr
    result.write_text(once.stdout)
    saved = run_cli("baseline", "save", "--from", str(result), "--out", "/dev/full")
    assert saved.returncode == 5, saved.stderr
    assert saved.stderr.count("\n") == 1 and "No space left on device" in saved.stderr
    assert os.path.exists("/dev/full") and not os.path.isfile("/dev/full")


@pytest.mark.parametrize("command", ["run", "once", "validate"])
def test_an_empty_config_is_an_error_everywhere(tmp_path: Path, command: str) -> None:
    path = tmp_path / "empty.toml"
    path.write_text('[server]\nlisten = "127.0.0.1:0"\n')
    proc = run_cli(command, "-c", str(path))
    assert proc.returncode == 2
    out = proc.stdout + proc.stderr
    assert f"{path}: no [[probe]] tables" in out and "Traceback" not in out


def test_validate_needs_no_secret_unless_asked(tmp_path: Path) -> None:
    path = config(tmp_path, DEAD)
    env = {k: v for k, v in os.environ.items() if k != "OP_KEY"}
    plain = subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "-c", str(path)],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert plain.stdout.splitlines()[0] == f"{path}: ok (1 probe)"
    strict = subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "-c", str(path), "--check-secrets"],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert strict.returncode == 2
    assert "environment variable OP_KEY is not set" in strict.stdout
    key_line = 'api_key_env = "OP_KEY"'
    path.write_text(path.read_text().replace(key_line, f'{key_line}\napi_key_file = "/k"'))
    conflict = subprocess.run(
        [sys.executable, "-m", "benchd", "validate", "-c", str(path)],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert conflict.returncode == 2 and "not both" in conflict.stdout


def test_validate_lists_every_config_problem_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("""
[server]
listen = "nowhere"
history = 0

[[probe]]
name = "a b"
fixture = "packaged:smoke"
colour = "red"
[probe.target]
kind = "zengram"
url = "http://127.0.0.1:9"
namespace = "benchd-x"
timeout_s = "slow"

[[probe]]
name = "ok"
fixture = "packaged:smoke"
[probe.target]
kind = "nosuchkind"
""")
    proc = run_cli("validate", "-c", str(path), "--format", "json")
    assert proc.returncode == 2
    (entry, *_fixtures) = json.loads(proc.stdout)
    assert entry["kind"] == "config" and not entry["ok"]
    problems = entry["problems"]
    expected = ["server.history", "probe[0].name", "probe[0].colour: unknown key",
                "probe[0].target.timeout_s", "probe[1].target.kind: unknown kind"]  # fmt: skip
    for where in expected:
        assert sum(where in p for p in problems) == 1, (where, problems)
    assert all(p.startswith(f"{path}: ") and "\n" not in p for p in problems)
    text = run_cli("validate", "-c", str(path))
    assert text.stdout.splitlines() == problems
    assert text.stderr == f"benchd validate: {len(problems)} problems in 1 of 1 file\n"


def test_refstore_ignores_sighup_and_logs_it(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchd", "refstore", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "BRAIN_API_KEY": KEY},
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().strip()
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        for line in proc.stderr:  # bounded by the deadline and the process's own output
            if "refstore ignores SIGHUP" in line or time.monotonic() > deadline:
                break
        assert "refstore ignores SIGHUP" in line
        assert proc.poll() is None
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert proc.returncode == 0


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_fixture_written_to_a_full_disk_is_exit_5_and_the_device_stays(tmp_path: Path) -> None:
    out = tmp_path / "full.jsonl"
    out.symlink_to("/dev/full")  # the name says JSON Lines; the device says no space
    proc = run_cli("synth", "--memories", "3000", "--queries", "5", "--seed", "1",
                   "--out", str(out))  # fmt: skip
    assert proc.returncode == 5, proc.stderr
    assert proc.stderr == (
        f"benchd: error: I/O error writing {out}: No space left on device; "
        "free some space or write elsewhere\n"
    )
    assert out.is_symlink() and not os.path.isfile("/dev/full")  # written in place, not replaced
