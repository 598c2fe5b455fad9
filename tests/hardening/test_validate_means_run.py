"""validate means run will work: what once, run or a reload rejects or crashes on, validate rejects.

Each input below once made ``benchd validate`` say ok while ``benchd once``
exited 4 (or hung, or grew without bound), and a reload applying it killed
the running daemon. Now validate rejects it with one line per problem (every
problem, exit 2), once rejects it the same way before any cycle, and a
reload (SIGHUP or ``POST /-/reload``) keeps the old config and the daemon up.
All against real processes; nothing here needs a store (the zengram URL is a
closed loopback port, the healthy probe is the in-process BM25 retriever).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from drill_support import write_tiny_fixture
from support import BenchdProcess

from benchd.fixtures.checks import MAX_GRADE
from benchd.inputs import MAX_CONFIG_BYTES, MAX_JSON_FIXTURE_BYTES

HUGE = "1" * 5001
GOOD_TARGET = 'url = "http://127.0.0.1:9"\nnamespace = "validate-means-run"'


def config_text(fixture: Path, target: str = GOOD_TARGET, extra: str = "") -> str:
    return f"""
[server]
history = 3

[[probe]]
name = "store"
fixture = "{fixture}"
interval_s = 0.2
jitter_s = 0.0
{extra}
[probe.target]
kind = "zengram"
max_retries = 0
{target}

[[probe]]
name = "healthy"
fixture = "packaged:smoke"
interval_s = 0.2
jitter_s = 0.0
[probe.target]
kind = "python"
factory = "benchd.examples.retrievers:bm25"
"""


def benchd(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "BENCHD_VMR_SECRET": "env-value-that-must-not-show-9c2e"},
    )


def assert_rejected(proc: subprocess.CompletedProcess[str], *expected: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "internal error" not in out and "Traceback" not in out, out
    for text in expected:
        assert text in out, out


# ----------------------------------------------------------------------------- config

BAD_TARGETS = {
    "port-out-of-range": ('url = "http://127.0.0.1:99999"', "probe[0].target.url: the port"),
    "port-zero": ('url = "http://127.0.0.1:0"', "probe[0].target.url: the port"),
    "unclosed-ipv6": ('url = "http://[::1"', "probe[0].target.url: not a valid URL"),
    "no-host": ('url = "http://:8084"', "probe[0].target.url: no host"),
    "space-in-host": ('url = "http://exa mple:8084"', "probe[0].target.url: the host part"),
    "nan": (GOOD_TARGET + "\nsearchable_timeout_s = nan", "searchable_timeout_s: must be a finite"),
    "inf": (GOOD_TARGET + "\ntimeout_s = inf", "probe[0].target.timeout_s: must be a finite"),
    "negative-inf": (GOOD_TARGET + "\nbackoff_s = -inf", "backoff_s: must be a finite"),
    "huge-float": (GOOD_TARGET + "\nmax_retry_after_s = 1e300", "max_retry_after_s: out of range"),
    "int-beyond-64-bit": (
        GOOD_TARGET + "\nmax_response_bytes = 99999999999999999999",
        "max_response_bytes: integer out of range",
    ),
    "5001-digit-int": (
        GOOD_TARGET + f"\nseed_batch = {HUGE}",
        "an integer with thousands of digits",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_TARGETS))
def test_validate_and_once_reject_a_bad_target_value(tmp_path: Path, case: str) -> None:
    target, expected = BAD_TARGETS[case]
    config = tmp_path / "benchd.toml"
    config.write_text(config_text(write_tiny_fixture(tmp_path / "tiny.json"), target))
    assert_rejected(benchd("validate", "--config", config), expected)
    assert_rejected(benchd("once", "--config", config), expected)


def test_validate_reports_every_problem_one_line_each(tmp_path: Path) -> None:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    extra = "timeout_s = nan\nk = [0]\n[probe.load]\nrate = inf\nmode = 'sideways'\n"
    target = (
        'url = "http://[::1"\nnamespace = "${BENCHD_VMR_SECRET}"\ncleanup = "${BENCHD_VMR_SECRET}"'
    )
    config = tmp_path / "benchd.toml"
    config.write_text(config_text(fixture, target, extra))
    proc = benchd("validate", "--config", config)
    assert_rejected(proc)
    lines = proc.stdout.splitlines()
    assert all(line.startswith(f"{config}: probe[0].") for line in lines), lines
    keys = sorted(line.split(": ")[1] for line in lines)
    assert keys == [
        "probe[0].k",
        "probe[0].load.mode",
        "probe[0].load.rate",
        "probe[0].target.cleanup",
        "probe[0].target.url",
        "probe[0].timeout_s",
    ]
    assert "(a value from the environment)" in proc.stdout
    assert "env-value-that-must-not-show" not in proc.stdout + proc.stderr
    assert proc.stderr == f"benchd validate: {len(lines)} problems in 1 of 1 file\n"
    once = benchd("once", "--config", config)
    assert_rejected(once, f"(and {len(lines) - 1} more problems")
    assert len(once.stderr.splitlines()) == 1
    assert "env-value-that-must-not-show" not in once.stdout + once.stderr


def test_a_config_that_is_a_fifo_a_device_a_directory_or_too_big_is_refused(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    big = tmp_path / "big.toml"
    with big.open("wb") as fh:  # sparse: costs no disk
        fh.truncate(MAX_CONFIG_BYTES + 1)
    cases = {
        fifo: "is a named pipe (FIFO)",
        Path("/dev/zero"): "is a character device",
        tmp_path: "is a directory",
        big: "larger than the 16 MiB limit",
    }
    for path, expected in cases.items():
        assert_rejected(benchd("validate", "--config", path, timeout=30), f"{path}: {expected}")


# ----------------------------------------------------------------------------- fixtures


def fixture_with(tmp_path: Path, text_edit: tuple[str, str]) -> Path:
    path = write_tiny_fixture(tmp_path / "edited.json")
    old, new = text_edit
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


BAD_FIXTURES = {
    "importance-nan": (('"type": "fact"', '"importance": NaN, "type": "fact"'), "NaN is not"),
    "infinity": (('"type": "fact"', '"weight": -Infinity, "type": "fact"'), "-Infinity is not"),
    "float-overflow": (('"type": "fact"', '"weight": 1e400, "type": "fact"'), "1e400 is out of"),
    "grade-10**400": (
        ('"expected_ids": ["mem-harbor"]', '"relevance": {"mem-harbor": 1' + "0" * 400 + "}"),
        "is out of range; fixture integers are within",
    ),
    "grade-beyond-range": (
        ('"expected_ids": ["mem-harbor"]', f'"relevance": {{"mem-harbor": {MAX_GRADE + 1}}}'),
        f"grades are integers in -{MAX_GRADE}..{MAX_GRADE}",
    ),
    "5001-digit-int": (('"type": "fact"', f'"n": {HUGE}, "type": "fact"'), "(5001 characters)"),
}


@pytest.mark.parametrize("case", sorted(BAD_FIXTURES))
def test_validate_and_once_reject_a_bad_fixture_number(tmp_path: Path, case: str) -> None:
    edit, expected = BAD_FIXTURES[case]
    fixture = fixture_with(tmp_path, edit)
    proc = benchd("validate", fixture)
    # where: the line and column of a number JSON cannot carry, else the JSON path
    where = ': $.queries[0].relevance["mem-harbor"]' if case == "grade-beyond-range" else ":1:"
    assert_rejected(proc, f"{fixture}{where}", expected)
    config = tmp_path / "benchd.toml"
    config.write_text(config_text(fixture))
    assert_rejected(benchd("validate", "--config", config), expected)
    assert_rejected(benchd("once", "--config", config), expected)


def test_a_fixture_that_is_special_or_too_big_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(MAX_JSON_FIXTURE_BYTES + 1)
    cases = {
        fifo: "is a named pipe (FIFO)",
        Path("/dev/zero"): "is a character device",
        tmp_path / "dir.json": "is a directory",
        big: "larger than the 256 MiB limit",
    }
    (tmp_path / "dir.json").mkdir()
    for path, expected in cases.items():
        # a FIFO would block open() forever and /dev/zero would grow forever: the timeout
        # turns either into a failure of this test instead of a hung suite
        named = "no .json or .jsonl files in this directory" if path.is_dir() else expected
        assert_rejected(benchd("validate", path, timeout=30), f"{path}: {named}")
        config = tmp_path / "benchd.toml"
        config.write_text(config_text(path))
        assert_rejected(benchd("once", "--config", config, timeout=30), expected)


def test_a_bad_baseline_is_a_validate_error_too(tmp_path: Path) -> None:
    config = tmp_path / "benchd.toml"
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    config.write_text(config_text(fixture, extra='baseline = "/dev/zero"'))
    assert_rejected(benchd("validate", "--config", config), "/dev/zero: is a character device")
    baseline = tmp_path / "base.toml"
    baseline.write_text(f"format = {HUGE}\n")
    config.write_text(config_text(fixture, extra=f'baseline = "{baseline}"'))
    assert_rejected(benchd("validate", "--config", config), "integer with thousands of digits")


# ----------------------------------------------------------------------------- reload

RELOADS = {
    "port": 'url = "http://127.0.0.1:99999"',
    "ipv6": 'url = "http://[::1"',
    "nan": GOOD_TARGET + "\nsearchable_timeout_s = nan",
    "digits": GOOD_TARGET + f"\nseed_batch = {HUGE}",
}


def reload_failures(daemon: BenchdProcess) -> int:
    return len([e for e in daemon.events if e.get("event") == "reload failed"])


def test_a_reload_keeps_the_old_config_on_anything_validate_rejects(tmp_path: Path) -> None:
    fixture = write_tiny_fixture(tmp_path / "tiny.json")
    config = tmp_path / "benchd.toml"
    good = config_text(fixture)
    config.write_text(good)
    bad_fixture = fixture_with(tmp_path, BAD_FIXTURES["importance-nan"][0])
    variants = {name: config_text(fixture, target) for name, target in RELOADS.items()}
    variants["fixture-nan"] = config_text(bad_fixture)
    variants["fixture-fifo"] = config_text(tmp_path / "fifo.json")
    os.mkfifo(tmp_path / "fifo.json")
    with BenchdProcess(["--config", str(config)]) as daemon:
        daemon.wait_cycles("healthy", 1)
        for i, (name, text) in enumerate(variants.items()):
            config.write_text(text)
            assert benchd("validate", "--config", config).returncode == 2, name
            if i % 2:
                before = reload_failures(daemon)
                daemon.signal(signal.SIGHUP)
                daemon.wait_for(lambda e, n=before: reload_failures(daemon) > n)
            else:
                answer = daemon.post("/-/reload")
                assert answer.status_code == 500, (name, answer.text)
            [(_, ok)] = daemon.samples("benchd_config_last_reload_successful")
            assert ok == 0.0, name
            seen = len(daemon.cycles("healthy"))
            daemon.wait_cycles("healthy", seen + 1)  # still scoring on the old config
            assert daemon.proc is not None and daemon.proc.poll() is None, name
        config.write_text(good)
        assert daemon.post("/-/reload").status_code == 200
        assert daemon.stop() == 0
    assert not [e for e in daemon.events if e.get("event") == "internal error"]
    failures = [e for e in daemon.events if e.get("event") == "reload failed"]
    assert len(failures) == len(variants)
    assert all("problems" in e and e["problems"] for e in failures)
    assert json.dumps(failures).count("Traceback") == 0
