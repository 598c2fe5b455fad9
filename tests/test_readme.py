"""The README stays true: its config reference decodes, its commands exist."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from benchd.cli import COMMANDS
from benchd.config.load import parse_config

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_starts_with_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    block = lines[lines.index("```sh") + 1 : lines.index("```")]
    assert [line.split("#")[0].strip() for line in block] == [
        "bash scripts/run.sh",
        "bash scripts/test.sh",
    ]


def test_config_reference_decodes_with_every_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BRAIN_API_KEY", "readme-key")
    text = README.read_text().split("## Configuration reference")[1]
    data = tomllib.loads(text.split("```toml")[1].split("```")[0])
    # the web config it names is read with the config: give it one, as docs/endpoints.md shows
    endpoints = (README.parent / "docs" / "endpoints.md").read_text()
    web_example = endpoints.split("```toml")[1].split("```")[0]
    (tmp_path / "web.toml").write_text(web_example)
    data["server"]["web_config"] = str(tmp_path / "web.toml")
    config = parse_config(data, file="README.md", base=README.parent)
    (probe,) = config.probes
    assert probe.name == "staging-memory"
    assert probe.load.late_tolerance_s == 0.010
    assert probe.drift.n_bootstrap == 2000
    assert config.web is not None and config.web.auth is not None


def test_every_command_in_the_table_exists() -> None:
    table = README.read_text().split("## Commands")[1].split("## Exit codes")[0]
    named = set(re.findall(r"^\| `benchd (\w+)", table, flags=re.M))
    assert named == set(COMMANDS)
