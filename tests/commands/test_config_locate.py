"""Which config a command runs: ``-c``, then ``$BENCHD_CONFIG``, then ``./benchd.toml``, then
the embedded default (``run``, ``once``) or a usage error naming all three (the others); a
config found rather than named is announced on stderr before anything else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchd.cli import main
from benchd.config.locate import ConfigSource, locate_config
from benchd.errors import UsageError
from benchd.fixtures.model import packaged_fixture
from benchd.refstore.testing import started_refstore

KEY_ENV = "LOCATE_KEY"
BROKEN = '[[probe]]\nname = "{name}"\n'  # no fixture, no target: exit 2, naming the file
# `run` stopped right after its announcement: a pid file that cannot be written (exit 5)
RUN_NO_PID_FILE = ["run", "--listen", "127.0.0.1:0", "--pid-file", "no/such/run.pid"]
ANNOUNCED = {
    "cwd": "benchd: config ./benchd.toml (found in the working directory)",
    "env": "benchd: config {path} (from $BENCHD_CONFIG)",
    "embedded": (
        "benchd: config: the embedded default (no --config, no $BENCHD_CONFIG, no ./benchd.toml)"
    ),
}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, and no $BENCHD_CONFIG."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BENCHD_CONFIG", raising=False)
    return tmp_path


def benchd(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    """Exit code and stderr's lines of ``benchd ARGV`` in-process."""
    code = main(list(argv))
    return code, capsys.readouterr().err.splitlines()


def said(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    """Exit code, stderr's lines, and all it printed (validate prints problems on stdout)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, err.splitlines(), out + err


# --------------------------------------------------------------------------- the order


def test_the_flag_comes_first_then_the_variable_then_the_working_directory(folder: Path) -> None:
    (folder / "benchd.toml").write_text("")
    env = {"BENCHD_CONFIG": "/etc/benchd/benchd.toml"}
    assert locate_config("mine.toml", env) == ConfigSource("mine.toml", "given with --config", True)
    assert locate_config(None, env).path == "/etc/benchd/benchd.toml"
    assert locate_config(None, {}).path == "./benchd.toml"
    assert locate_config(None, {"BENCHD_CONFIG": ""}).path == "./benchd.toml"  # empty: unset
    (folder / "benchd.toml").unlink()
    (folder / "benchd.toml").mkdir()  # not a file: not a config
    assert locate_config(None, {}).path is None


def test_nothing_found_is_the_embedded_default_or_a_usage_error_naming_every_way(
    folder: Path,
) -> None:
    found = locate_config(None, {})
    assert found.line() == ANNOUNCED["embedded"]
    with pytest.raises(UsageError) as caught:
        found.required("purge", "--namespace NAME --url URL")
    assert str(caught.value) == (
        "purge needs --namespace NAME --url URL, or a config: give --config FILE, set "
        "$BENCHD_CONFIG or run where ./benchd.toml is"
    )


# --------------------------------------------------------------------------- every command


COMMANDS = [
    ["run", "--log-format", "console"],  # the daemon's logs are JSON unless on a terminal
    ["once"],
    ["validate"],
    ["baseline", "save", "--out", "b.toml"],
    ["purge"],
    ["compare"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_every_command_runs_benchd_toml_in_the_working_directory_and_says_so_first(
    folder: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    (folder / "benchd.toml").write_text(BROKEN.format(name="local"))
    code, err, printed = said(capsys, *argv)
    assert code == 2
    assert err[0] == ANNOUNCED["cwd"]
    assert "./benchd.toml: probe[0]" in printed  # that file is the one loaded


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_every_command_prefers_benchd_config_to_the_working_directory(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:  # fmt: skip
    (folder / "benchd.toml").write_text(BROKEN.format(name="local"))
    chosen = folder / "elsewhere" / "team.toml"
    chosen.parent.mkdir()
    chosen.write_text(BROKEN.format(name="team"))
    monkeypatch.setenv("BENCHD_CONFIG", str(chosen))
    code, err, printed = said(capsys, *argv)
    assert code == 2
    assert err[0] == ANNOUNCED["env"].format(path=chosen)
    assert f"{chosen}: probe[0]" in printed


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_a_config_named_with_c_beats_both_and_is_not_announced(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:  # fmt: skip
    (folder / "benchd.toml").write_text(BROKEN.format(name="local"))
    monkeypatch.setenv("BENCHD_CONFIG", str(folder / "missing.toml"))
    (folder / "named.toml").write_text(BROKEN.format(name="named"))
    code, err, printed = said(capsys, *argv, "-c", "named.toml")
    assert code == 2
    assert len(err) == 1  # the error alone: the user named the file
    assert "named.toml: probe[0]" in printed and "benchd: config" not in printed


@pytest.mark.parametrize(
    ("argv", "alternative"),
    [
        (["baseline", "save", "--out", "b.toml"], "--from RESULT.json"),
        (["purge"], "--namespace NAME --url URL"),
        (["compare"], "one or two RESULT.json files"),
    ],
    ids=lambda a: a[0] if isinstance(a, list) else "",
)
def test_a_command_without_an_embedded_default_says_every_way_to_give_a_config(
    folder: Path, capsys: pytest.CaptureFixture[str], argv: list[str], alternative: str
) -> None:
    code, err = benchd(capsys, *argv)
    assert code == 2
    command = " ".join(argv[:2] if argv[0] == "baseline" else argv[:1])
    assert err == [
        f"benchd: error: {command} needs {alternative}, or a config: give --config FILE, set "
        "$BENCHD_CONFIG or run where ./benchd.toml is"
    ]


def test_validate_with_nothing_named_or_found_says_every_way(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = benchd(capsys, "validate")
    assert code == 2 and len(err) == 1
    assert "--config FILE, or set $BENCHD_CONFIG or run where ./benchd.toml is" in err[0]


def test_validate_of_named_fixtures_reads_no_config(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (folder / "benchd.toml").write_text(BROKEN.format(name="local"))
    monkeypatch.setenv("BENCHD_CONFIG", str(folder / "benchd.toml"))
    assert benchd(capsys, "validate", str(packaged_fixture("smoke"))) == (0, [])


def test_run_with_nothing_found_announces_the_embedded_default_first(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = benchd(capsys, *RUN_NO_PID_FILE, "--log-format", "console")
    assert code == 5
    assert err[0] == ANNOUNCED["embedded"]
    assert err[1].startswith("benchd: error: I/O error writing the pid file no/such/run.pid")


def test_a_daemon_logging_json_announces_its_config_as_a_json_log_line(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "benchd.toml").write_text(BROKEN.format(name="local"))
    code, err = benchd(capsys, "run", "--log-format", "json")
    assert code == 2
    event = json.loads(err[0])
    assert (event["event"], event["level"]) == ("config", "info")
    assert (event["config"], event["found"]) == ("./benchd.toml", "found in the working directory")
    assert event["timestamp"].endswith("Z")
    (folder / "benchd.toml").unlink()
    code, err = benchd(capsys, *RUN_NO_PID_FILE, "--log-format", "json")
    assert code == 5
    assert json.loads(err[0])["config"] is None  # the embedded default


# --------------------------------------------------------------------------- as a user runs it


def _once(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchd", "once", "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False, cwd=cwd,
        env={k: v for k, v in {**os.environ, **env}.items() if k != "BENCHD_CONFIG" or v},
    )  # fmt: skip


def _write_config(path: Path, url: str, probe: str) -> None:
    path.write_text(f"""
[[probe]]
name = "{probe}"
fixture = "packaged:smoke"
k = [5]

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "{KEY_ENV}"
namespace = "benchd-locate-{probe}"
""")


def test_once_in_the_folder_benchd_init_wrote_runs_that_config_not_the_embedded_one(
    tmp_path: Path,
) -> None:
    with started_refstore() as store:
        _write_config(tmp_path / "benchd.toml", store.url, "here")
        env = {KEY_ENV: store.api_key, "BENCHD_CONFIG": ""}
        local = _once(tmp_path, env)
        assert local.returncode == 0, local.stderr
        assert local.stderr.splitlines()[0] == ANNOUNCED["cwd"]
        assert [p["name"] for p in json.loads(local.stdout)["probes"]] == ["here"]

        _write_config(tmp_path / "team.toml", store.url, "team")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        env["BENCHD_CONFIG"] = str(tmp_path / "team.toml")
        team = _once(elsewhere, env)
        assert team.returncode == 0, team.stderr
        assert team.stderr.splitlines()[0] == ANNOUNCED["env"].format(path=tmp_path / "team.toml")
        assert [p["name"] for p in json.loads(team.stdout)["probes"]] == ["team"]
