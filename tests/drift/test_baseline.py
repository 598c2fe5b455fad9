"""Baselines: pinned from `benchd once --format json` output, round-tripped, strictly read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from benchd.cli import main
from benchd.drift.baseline import (
    baseline_from_result,
    baseline_from_results,
    expected_ranks,
    load_baseline,
    save_baseline,
    write_baseline,
)
from benchd.errors import ConfigError, InputError
from benchd.fixtures.model import load_fixture, packaged_fixture
from benchd.refstore.testing import started_refstore
from benchd.result import CycleResult, QueryResult, TargetInfo
from benchd.surfacers.status import result_to_json

HASH = "f" * 64
LIVE_CONFIG = """
[[probe]]
name = "live"
fixture = "{fixture}"

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "BENCHD_BASELINE_KEY"

[probe.load]
mode = "serial"
"""


def _result(
    probe: str = "smoke", outcome: str = "success", error_q: str | None = None
) -> CycleResult:
    queries = tuple(
        QueryResult(
            id=f"q{i}",
            q=f"question {i}",
            category="facts",
            expected_ids=(f"m{i}", f"n{i}"),
            ranked_ids=("x", f"m{i}", "y"),
            metrics={"recall@10": 0.5, "mrr@10": 0.5, "hit@10": 1.0, "rr": 0.5},
            error="http_5xx" if f"q{i}" == error_q else None,
        )
        for i in range(3)
    )
    return CycleResult(
        probe=probe,
        target="zengram",
        corpus="smoke",
        cycle=4,
        started_at=0.0,
        finished_at=1.0,
        outcome=outcome,  # type: ignore[arg-type]
        phases={},
        ks=(10,),
        info=TargetInfo(kind="zengram", endpoint="http://127.0.0.1:1", model="hash:1024"),
        queries=queries,
        aggregate={"recall@10": 0.5, "mrr@10": 0.5, "hit@10": 1.0},
        fixture_hash=HASH,
    )


def _write_result(tmp_path: Path, *results: CycleResult) -> Path:
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"probes": [result_to_json(r) for r in results]}))
    return path


def test_expected_ranks_are_one_based_and_none_when_absent() -> None:
    assert expected_ranks(["a", "b", "c"], ["z", "a", "a", "c"]) == {"a": 2, "b": None, "c": 4}


def test_saved_baseline_round_trips_every_field(tmp_path: Path) -> None:
    path = tmp_path / "baseline.toml"
    document = json.loads(_write_result(tmp_path, _result()).read_text())
    saved = save_baseline(document, None, path)
    loaded = load_baseline(path)
    assert loaded.fixture_hash == HASH and loaded.model == "hash:1024"
    assert loaded.probe == "smoke" and loaded.ks == (10,) and loaded.corpus == "smoke"
    assert loaded.queries["q1"].ranks == {"m1": 2, "n1": None}
    assert loaded.queries["q1"].metrics == saved.queries["q1"].metrics
    assert loaded.aggregate == {"recall@10": 0.5, "mrr@10": 0.5, "hit@10": 1.0}
    assert loaded.created_at.endswith("Z") and loaded.benchd_version
    assert loaded.key_scheme == "namespaced"  # pinned with facts' keys namespaced (#20)


def test_a_baseline_file_without_key_scheme_loads_as_pinned_before_it(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    write_baseline(dataclasses.replace(baseline_from_result(_result()), key_scheme=""), path)
    assert "key_scheme" not in path.read_text()
    assert load_baseline(path).key_scheme == ""


def test_queries_that_errored_are_not_pinned(tmp_path: Path) -> None:
    baseline = baseline_from_result(_result(error_q="q0"))
    assert set(baseline.queries) == {"q1", "q2"}
    document = json.loads(_write_result(tmp_path, _result(error_q="q0")).read_text())
    assert set(save_baseline(document, None, tmp_path / "b.toml").queries) == {"q1", "q2"}


def test_a_failed_cycle_cannot_be_pinned(tmp_path: Path) -> None:
    document = json.loads(_write_result(tmp_path, _result(outcome="failed")).read_text())
    with pytest.raises(InputError, match=r"outcome is 'failed'; pin a baseline from a successful"):
        save_baseline(document, None, tmp_path / "b.toml")


def test_several_probes_need_a_probe_name(tmp_path: Path) -> None:
    document = json.loads(_write_result(tmp_path, _result("a"), _result("b")).read_text())
    with pytest.raises(InputError, match=r"holds 2 probes \(a, b\); pick one with --probe"):
        save_baseline(document, None, tmp_path / "b.toml")
    assert save_baseline(document, "b", tmp_path / "b.toml").probe == "b"
    with pytest.raises(InputError, match=r"no probe named 'c' \(it has: a, b\)"):
        save_baseline(document, "c", tmp_path / "b.toml")


def test_a_result_without_fixture_hash_is_refused(tmp_path: Path) -> None:
    document = json.loads(_write_result(tmp_path, _result()).read_text())
    del document["probes"][0]["fixture_hash"]
    with pytest.raises(InputError, match=r"probes\[smoke\]\.fixture_hash: expected str"):
        save_baseline(document, None, tmp_path / "b.toml")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("probe = ", "probes = ", r"baseline\.probes: unknown key"),
        ("format = 1", "format = 9", r"baseline\.format: expected 1, got 9"),
        ("m1 = 2", "m1 = 0", r"queries\[1\]\.ranks\.m1: expected a rank >= 1"),
        ("m1 = 2", "zz = 2", r"queries\[1\]\.ranks\.zz: not one of expected_ids"),
        ("rr = 0.5", 'rr = "high"', r"queries\[0\]\.metrics\.rr: expected a finite number"),
        ('id = "q2"', 'id = "q1"', r"queries\[2\]\.id: duplicate query id 'q1'"),
        ("[aggregate]", "[[[", r"not valid TOML"),
    ],
)
def test_a_bad_baseline_file_names_the_file_and_key(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    path = tmp_path / "baseline.toml"
    write_baseline(baseline_from_result(_result()), path)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ConfigError, match=message) as info:
        load_baseline(path)
    assert str(info.value).startswith(str(path))


def test_a_missing_baseline_file_says_how_to_create_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not found; create it with `benchd baseline save`"):
        load_baseline(tmp_path / "nope.toml")


def test_cli_saves_and_shows_a_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "baseline.toml"
    source = _write_result(tmp_path, _result())
    assert main(["baseline", "save", "--from", str(source), "--out", str(out)]) == 0
    assert "pinned probe smoke (3 queries, 1 cycle, model hash:1024)" in capsys.readouterr().out
    assert main(["baseline", "show", str(out)]) == 0
    table = capsys.readouterr().out
    assert "model           hash:1024" in table and "recall@10  0.5000" in table
    assert "3 (3 with an expected id not returned)" in table
    assert main(["baseline", "show", str(out), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["queries"][0]["ranks"] == {"m0": 2, "n0": None}


def test_cli_reports_bad_json_with_its_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "result.json"
    source.write_text('{\n"probes": [\n,]}')
    code = main(["baseline", "save", "--from", str(source), "--out", str(tmp_path / "b.toml")])
    err = capsys.readouterr().err
    assert code == 2 and f"{source}:3: not valid JSON" in err and "Traceback" not in err
    assert not (tmp_path / "b.toml").exists()


def test_cli_pins_a_fresh_cycle_of_a_configured_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = packaged_fixture("smoke")
    with started_refstore(embedder="hash:1024") as store:
        monkeypatch.setenv("BENCHD_BASELINE_KEY", store.api_key)
        config = tmp_path / "benchd.toml"
        config.write_text(LIVE_CONFIG.format(fixture=fixture, url=store.url))
        out = tmp_path / "baseline.toml"
        code = main(["baseline", "save", "--config", str(config), "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    baseline = load_baseline(out)
    assert baseline.probe == "live" and baseline.model == "hash:1024"
    assert baseline.fixture_hash == load_fixture(fixture).content_hash
    assert len(baseline.queries) == len(load_fixture(fixture).queries)


def test_a_baseline_of_repeats_round_trips_with_its_samples_and_overlaps(tmp_path: Path) -> None:
    first = _result()
    moved = dataclasses.replace(
        first,
        queries=(
            dataclasses.replace(first.queries[0], ranked_ids=("y", "m0", "x")),
            *first.queries[1:],
        ),
    )
    baseline = baseline_from_results([first, moved, first])
    assert baseline.repeats == 3
    q0 = baseline.queries["q0"]
    assert q0.samples["recall@10"] == (0.5, 0.5, 0.5) and q0.overlap[0] < 1.0 == q0.overlap[1]
    assert q0.ranked_ids == ("x", "m0", "y")
    path = tmp_path / "b.toml"
    write_baseline(baseline, path)
    assert load_baseline(path) == dataclasses.replace(baseline, source=str(path))


def test_samples_of_another_length_per_metric_are_rejected_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    write_baseline(baseline_from_results([_result(), _result()]), path)
    text = path.read_text().replace("0.5,\n    0.5,\n]", "0.5,\n]", 1)
    text = text.replace('"recall@10" = [\n    0.5,\n    0.5,\n]', '"recall@10" = [0.5]', 1)
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"queries\[0\]\.samples: every metric needs one value"):
        load_baseline(path)
