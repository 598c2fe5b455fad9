"""``benchd baseline save --config`` pins even when the config already names the new file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchd.cli import main
from benchd.drift.baseline import load_baseline
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import make_config

KEY = "pin-config-key-31337"


@pytest.fixture
def store() -> Iterator[RefStoreThread]:
    with RefStoreThread(make_config(api_key=KEY, retriever="bm25")) as thread:
        yield thread


def test_pinning_ignores_a_baseline_file_that_does_not_exist_yet(
    store: RefStoreThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIN_KEY", KEY)
    out = tmp_path / "baseline.toml"
    config = tmp_path / "benchd.toml"
    config.write_text(f"""
[[probe]]
name = "pin"
fixture = "packaged:smoke"
baseline = "{out.name}"
[probe.target]
kind = "zengram"
url = "{store.url}"
api_key_env = "PIN_KEY"
namespace = "benchd-pin"
""")
    assert main(["baseline", "save", "--config", str(config), "--out", str(out)]) == 0
    pinned = load_baseline(out)
    assert pinned.fixture_hash
    assert main(["once", "--config", str(config), "--format", "json"]) == 0
