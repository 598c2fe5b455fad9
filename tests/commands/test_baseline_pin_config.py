"""``benchd baseline save --config`` pins even when the config already names the new file."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchd.cli import main
from benchd.drift.baseline import load_baseline
from benchd.refstore.server import RefStoreThread
from benchd.refstore.testing import refstore_fixture

KEY = "pin-config-key-31337"


store = refstore_fixture("store", api_key=KEY, retriever="bm25")


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


def test_repeats_pin_several_cycles_and_the_baseline_carries_their_noise(
    store: RefStoreThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIN_KEY", KEY)
    out = tmp_path / "baseline.toml"
    config = tmp_path / "benchd.toml"
    config.write_text(f"""
[[probe]]
name = "pin"
fixture = "packaged:smoke"
[probe.target]
kind = "zengram"
url = "{store.url}"
api_key_env = "PIN_KEY"
namespace = "benchd-pin"
cleanup = "never"
""")
    args = ["baseline", "save", "--config", str(config), "--out", str(out), "--repeats", "3"]
    assert main(args) == 0
    pinned = load_baseline(out)
    assert pinned.repeats == 3
    query = next(iter(pinned.queries.values()))
    assert all(len(v) == 3 for v in query.samples.values())
    assert len(query.overlap) == 2 and query.ranked_ids
    # the reference store is deterministic: every repeat ranked the same
    assert all(o == 1.0 for q in pinned.queries.values() for o in q.overlap)
    assert main(["baseline", "show", str(out)]) == 0


def test_repeats_need_a_config_and_a_sane_count(tmp_path: Path) -> None:
    out = str(tmp_path / "b.toml")
    with pytest.raises(SystemExit) as exc:
        main(["baseline", "save", "--from", "x.json", "--out", out, "--repeats", "0"])
    assert exc.value.code == 2
    assert main(["baseline", "save", "--from", "x.json", "--out", out, "--repeats", "3"]) == 2
