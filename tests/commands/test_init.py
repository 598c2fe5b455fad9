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


@pytest.mark.parametrize("kind", ["pgvector", "chroma", "milvus", "qdrant"])
def test_init_kind_writes_a_config_of_that_kind_that_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setenv("BENCHD_PG_DSN", "postgresql://benchd:pw-123456@127.0.0.1:5432/benchd")
    path = tmp_path / "benchd.toml"
    assert main(["init", str(path), "--kind", kind]) == 0
    (probe,) = load_config(path).probes
    assert probe.target.kind == kind
    assert probe.target.settings.embed.model == "minilm"
    assert probe.target.settings.namespace == "benchd-eval"
    assert "[probe.budget]" not in path.read_text()  # a database has no per-key request budget
