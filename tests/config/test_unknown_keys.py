"""An unknown config key names the likely one ("did you mean") beside every known key."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_config import GOOD, write

from benchd.config.load import load_config
from benchd.errors import ConfigError


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHD_TEST_KEY", "s3cret-key-value")
    monkeypatch.setenv("STORE_URL", "http://127.0.0.1:8084")


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    return list(info.value.problems)


def test_a_typo_names_the_likely_key_at_every_level(tmp_path: Path) -> None:
    text = (
        GOOD.replace("interval_s = 60", "intervl_s = 60")
        .replace('namespace = "benchd-eval"', 'namespce = "benchd-eval"')
        .replace("concurrency = 4", "concurency = 4")
    )
    found = problems(tmp_path, text)
    assert len(found) == 3
    assert any("probe[0].intervl_s: unknown key; did you mean 'interval_s'?" in p for p in found)
    assert any("target.namespce: unknown key; did you mean 'namespace'?" in p for p in found)
    assert any("load.concurency: unknown key; did you mean 'concurrency'?" in p for p in found)
    assert all("known keys here:" in p for p in found)  # the full list stays


def test_a_key_like_none_gets_no_guess(tmp_path: Path) -> None:
    (problem,) = problems(tmp_path, GOOD.replace("timeout_s = 30.0", "colour = 30.0"))
    assert "probe[0].colour: unknown key; known keys here: " in problem
    assert "did you mean" not in problem
