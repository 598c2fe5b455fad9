"""The shipped vector-store examples load as they are (configs/<kind>.toml, one per kind)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchd.config.load import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("kind", ["pgvector", "chroma", "milvus", "qdrant", "lancedb"])
def test_every_shipped_vector_example_loads(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHD_PG_DSN", "postgresql://benchd:pw-0123456789@127.0.0.1:5432/benchd")
    (probe,) = load_config(CONFIGS / f"{kind}.toml").probes
    assert probe.target.kind == kind
    assert probe.target.settings.embed.model == "minilm"
    assert probe.load.mode == "closed" and probe.load.concurrency == 8
