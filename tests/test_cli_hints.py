"""The command line's hints: the likely fix for a typo, the right --help, packaged fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from benchd.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _stderr(capsys: pytest.CaptureFixture[str], words: list[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(words)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_a_misspelt_command_gets_its_likely_name(capsys: pytest.CaptureFixture[str]) -> None:
    err = _stderr(capsys, ["valdiate"])
    assert "invalid choice: 'valdiate'" in err and "did you mean 'validate'?" in err
    assert "did you mean" not in _stderr(capsys, ["xyzzy"])  # nothing close: no guess


def test_a_misspelt_flag_names_the_flag_and_its_commands_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _stderr(capsys, ["run", "--listn", "127.0.0.1:1"])
    assert err.startswith("benchd run: error: unrecognized arguments: --listn 127.0.0.1:1")
    assert "did you mean '--listen'?" in err and err.rstrip().endswith("(see benchd run --help)")
    err = _stderr(capsys, ["once", "--confg=x.toml"])
    assert "did you mean '--config'?" in err and "(see benchd once --help)" in err


def test_a_nested_action_and_a_choice_get_their_likely_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _stderr(capsys, ["baseline", "sav"])
    assert "did you mean 'save'?" in err and "(see benchd baseline --help)" in err
    err = _stderr(capsys, ["baseline", "show", "--formt", "json", "b.toml"])
    assert "did you mean '--format'?" in err and "(see benchd baseline show --help)" in err
    assert "did you mean 'json'?" in _stderr(capsys, ["once", "--format", "jsn"])


def test_qrels_of_a_packaged_fixtures_bare_name_says_how_to_name_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["qrels", "smoke"]) == 2
    err = capsys.readouterr().err
    assert "smoke: no such file; the fixture shipped with benchd is packaged:smoke" in err
    assert main(["qrels", "nothing-like-it"]) == 2
    assert "packaged:" not in capsys.readouterr().err


def _config(tmp_path: Path, kind_lines: str) -> Path:
    path = tmp_path / "benchd.toml"
    path.write_text(
        '[[probe]]\nname = "p"\nfixture = "packaged:smoke"\ninterval_s = 30.0\nintervl = 3\n'
        f'[probe.target]\nnamespace = "x"\n{kind_lines}\n[probe.target.embed]\nmodel = "hash:64"\n'
    )
    return path


def test_a_config_errors_more_problems_are_all_listed_by_the_command_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NC_DSN", raising=False)
    config = _config(tmp_path, 'kind = "pgvector"\ndsn_env = "NC_DSN"')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NC_DSN", None)

    def benchd(*words: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "benchd", *words]
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)

    once = benchd("once", "-c", str(config))
    assert once.returncode == 2
    assert "(and 1 more problem: benchd validate --check-secrets -c FILE lists them all)" in (
        once.stderr
    )
    listed = benchd("validate", "--check-secrets", "-c", str(config))
    assert "2 problems in 1 of 1 file" in listed.stderr  # all of them, as the hint says
    dsn = next(line for line in listed.stdout.splitlines() if "NC_DSN" in line)
    assert "export NC_DSN=<PostgreSQL DSN: a postgresql:// URL with user and password>" in dsn
    assert "api key" not in dsn.lower()


def test_a_missing_api_key_is_still_called_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NC_KEY", raising=False)
    path = tmp_path / "benchd.toml"
    path.write_text(
        '[[probe]]\nname = "p"\nfixture = "packaged:smoke"\n'
        '[probe.target]\nkind = "zengram"\nurl = "http://127.0.0.1:1"\napi_key_env = "NC_KEY"\n'
    )
    assert main(["validate", "--check-secrets", "-c", str(path)]) == 2
    assert "export NC_KEY=<API key> before starting benchd" in capsys.readouterr().out


def test_the_build_asks_for_a_setuptools_that_reads_its_spdx_license() -> None:
    """setuptools 68-76 reject ``license = "Apache-2.0"`` (a PEP 639 string); 77 reads it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert isinstance(project["project"]["license"], str)
    (requirement,) = [r for r in project["build-system"]["requires"] if "setuptools" in r]
    assert requirement.replace(" ", "") == "setuptools>=77"


def test_an_editable_install_is_a_plain_path_entry_without_setuptools_warning() -> None:
    """With the flat layout declared, setuptools' editable wheel is a .pth line; without it
    a meta path finder, and a 10-line "Editable installation ... Please be careful with
    folders in your working directory" warning on every first ``pip install -e .``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["package-dir"] == {"": "."}
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["benchd*"]


def test_plain_validate_warns_of_a_key_run_would_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NC_DSN", raising=False)
    config = _config(tmp_path, 'kind = "pgvector"\ndsn_env = "NC_DSN"')
    config.write_text(config.read_text().replace("intervl = 3\n", ""))
    assert main(["validate", "-c", str(config)]) == 0  # keys are not required here ...
    out = capsys.readouterr().out
    assert (  # ... but one that is missing is named, with the flag that requires it
        "warning: probe 'p': NC_DSN (PostgreSQL DSN: a postgresql:// URL with user and "
        "password) is not set; run and once refuse to start without it (--check-secrets "
        "checks it)"
    ) in out
    monkeypatch.setenv("NC_DSN", "postgresql://u:p@127.0.0.1:1/db")
    assert main(["validate", "-c", str(config)]) == 0
    assert "is not set" not in capsys.readouterr().out
