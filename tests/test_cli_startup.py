"""The command line answers at once: what `--version`, `--help` and a command import."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchd.cli import COMMANDS, build_parser

# Heavy modules no command's parser may pull in before a command runs.
HEAVY = {"numpy", "httpx", "anyio", "prometheus_client", "structlog", "benchd.kinds",
         "benchd.store", "benchd.refstore", "starlette", "uvicorn", "rich"}  # fmt: skip
# What `benchd --version` may load of benchd itself: the package, the CLI and what it catches.
CLI_ONLY = {"benchd", "benchd.cli", "benchd.errors", "benchd.redact"}

# Runs benchd's main() as the console script does, then writes the loaded module names.
DUMP = """
import json, sys
from benchd.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(k for k, v in sys.modules.items() if v)}, out)
"""


def loaded_modules(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[object, set[str]]:
    """Run ``benchd ARGS`` in a fresh interpreter, stderr a pipe; its exit code and modules."""
    dump = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", DUMP, str(dump), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    data = json.loads(dump.read_text())
    return data["code"], set(data["modules"])


def heavy_in(modules: set[str]) -> set[str]:
    return {m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY or
            any(m.startswith(h + ".") for h in HEAVY)}  # fmt: skip


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_only_the_cli(tmp_path: Path, flag: str) -> None:
    code, modules = loaded_modules(tmp_path, flag)
    assert code == 0
    assert heavy_in(modules) == set()
    assert {m for m in modules if m.split(".")[0] == "benchd"} == CLI_ONLY
    assert not any(m.startswith("benchd.commands") for m in modules)


def test_an_unknown_word_imports_no_command_module(tmp_path: Path) -> None:
    code, modules = loaded_modules(tmp_path, "frobnicate")
    assert code == 2
    assert {m for m in modules if m.split(".")[0] == "benchd"} == CLI_ONLY


def test_a_command_imports_its_own_module_and_no_other(tmp_path: Path) -> None:
    code, modules = loaded_modules(tmp_path, "init", str(tmp_path / "benchd.toml"))
    assert code == 0
    commands = {m for m in modules if m.startswith("benchd.commands.")}
    assert commands == {"benchd.commands.init"}
    assert "numpy" not in modules and "httpx" not in modules


def test_once_imports_neither_the_web_stack_nor_an_output_it_does_not_write(tmp_path: Path) -> None:
    """No web server or metrics; the JSON document (and result book) for --format json only."""
    code, modules = loaded_modules(tmp_path, "once", "--help")
    assert code == 0
    assert "benchd.commands.once" in modules and "benchd.probe" in modules  # it did load
    formats = {"benchd.surfacers.status", "benchd.surfacers.result_book",
               "benchd.surfacers.junit", "benchd.surfacers.trec_run"}  # fmt: skip
    assert formats & modules == set()
    daemon = {"prometheus_client", "starlette", "uvicorn", "benchd.web", "benchd.daemon",
              "benchd.refstore", "benchd.surfacers.prometheus"}  # fmt: skip
    assert {m for m in modules if m in daemon or m.split(".")[0] in daemon} == set()


def fake_rich(tmp_path: Path) -> dict[str, str]:
    """A stand-in `rich` package on the path, so the test sees an import of it wherever
    it is installed or not (structlog and httpx import rich only when they find it)."""
    package = tmp_path / "site" / "rich"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    return {"PYTHONPATH": str(tmp_path / "site")}


def test_the_fake_rich_is_imported_by_structlog_and_httpx_left_alone(tmp_path: Path) -> None:
    """The control for the test below: without benchd's guards, both import rich."""
    env = {**os.environ, **fake_rich(tmp_path)}
    for module in ("structlog", "httpx"):
        proc = subprocess.run(
            [sys.executable, "-c", f"import sys, {module}; print('rich' in sys.modules)"],
            capture_output=True, text=True, check=True, env=env,
        )  # fmt: skip
        assert proc.stdout.strip() == "True", module


def test_rich_is_not_imported_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    config = tmp_path / "benchd.toml"
    code, _ = loaded_modules(tmp_path, "init", str(config))
    assert code == 0
    code, modules = loaded_modules(
        tmp_path, "validate", "-c", str(config), env={**fake_rich(tmp_path), "BRAIN_API_KEY": "k"}
    )
    assert code == 0
    assert {"structlog", "httpx", "benchd.kinds"} <= modules  # the importers did run
    assert "rich" not in modules


def _registered_help(name: str) -> str:
    parser = build_parser(name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    (action,) = [a for a in sub._choices_actions if a.dest == name]
    return str(action.help)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_help_table_says_what_each_command_registers(name: str) -> None:
    assert COMMANDS[name] == _registered_help(name)


def test_validate_imports_no_cycle_and_no_numpy(tmp_path: Path) -> None:
    """It builds what `run` builds (the adapter, the baseline) and nothing of the cycle."""
    config = tmp_path / "benchd.toml"
    assert loaded_modules(tmp_path, "init", str(config))[0] == 0
    code, modules = loaded_modules(tmp_path, "validate", "-c", str(config))
    assert code == 0
    assert "benchd.kinds" in modules and "benchd.assemble" in modules
    assert not {"numpy", "benchd.cycle", "benchd.load", "benchd.probe"} & modules
