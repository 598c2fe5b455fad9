"""``benchd init`` writes a starter config that benchd itself accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchd.cli import main
from benchd.commands.init import STARTERS
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


KINDS = list(json.loads(STARTERS.read_text(encoding="utf-8"))["kinds"])
"""Every kind with a starter (tests/kinds/test_registry.py: every kind the registry declares)."""


def test_every_kind_has_a_starter() -> None:
    eight = {"zengram", "http", "python", "mcp", "pgvector", "chroma", "milvus", "qdrant"}
    assert eight <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kinds_starter_validates(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    """`benchd init --kind K` then `benchd validate --check-secrets`: accepted as written."""
    for var in ("BRAIN_API_KEY", "STORE_API_KEY"):
        monkeypatch.setenv(var, "k-123456")
    monkeypatch.setenv("BENCHD_PG_DSN", "postgresql://benchd:pw-123456@127.0.0.1:5432/benchd")
    path = tmp_path / "benchd.toml"
    assert main(["init", str(path), "--kind", kind]) == 0
    assert main(["validate", "--check-secrets", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: ok (1 probe)" in out
    (probe,) = load_config(path).probes
    assert probe.target.kind == kind
    text = path.read_text()
    assert ("[probe.budget]" in text) == (kind in ("zengram", "http"))  # a key's default limit


def test_init_says_what_to_edit_for_the_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path / "a.toml")]) == 0
    assert "edit url/api_key_env, then" in capsys.readouterr().out
    assert main(["init", str(tmp_path / "b.toml"), "--kind", "python"]) == 0
    assert "edit factory and options, then" in capsys.readouterr().out
