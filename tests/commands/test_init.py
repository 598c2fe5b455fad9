"""``benchd init`` writes a starter config that benchd itself accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchd.cli import main
from benchd.config.load import load_config


def test_starter_config_loads_and_names_every_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAIN_API_KEY", "k-123456")
    path = tmp_path / "benchd.toml"
    assert main(["init", str(path)]) == 0
    text = path.read_text()
    assert text.count("# ") >= 15  # annotated
    config = load_config(path)
    (probe,) = config.probes
    assert probe.target.settings.namespace == "benchd-eval"
    assert probe.fixture.name == "smoke.json"


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "benchd.toml"
    path.write_text("mine")
    assert main(["init", str(path)]) == 2
    assert path.read_text() == "mine"
    assert main(["init", "--force", str(path)]) == 0
    assert path.read_text() != "mine"
