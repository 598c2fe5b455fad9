"""`benchd compare`: pairing probes across files, deltas with CIs and p-values, output formats."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from benchd.cli import main
from benchd.fixtures.model import packaged_fixture
from benchd.refstore.testing import started_refstore
from benchd.result import CycleResult, QueryResult
from benchd.scoring.stats import paired_bootstrap_delta_ci, paired_permutation_test
from benchd.surfacers.status import result_to_json

HASH = "e" * 64


def _result(probe: str, recalls: Sequence[float], fixture_hash: str = HASH) -> CycleResult:
    queries = tuple(
        QueryResult(
            id=f"q{i:02d}",
            q=f"question {i}",
            category=None,
            expected_ids=(f"m{i}",),
            ranked_ids=(f"m{i}",) if r else (),
            metrics={
                "recall@5": r,
                "recall@10": r,
                "precision@10": r / 10,
                "mrr@10": r,
                "hit@10": float(r > 0),
            },
        )
        for i, r in enumerate(recalls)
    )
    return CycleResult(
        probe=probe,
        target="refstore",
        corpus="smoke",
        cycle=1,
        started_at=0.0,
        finished_at=1.0,
        outcome="success",
        phases={},
        ks=(5, 10),
        queries=queries,
        fixture_hash=fixture_hash,
    )


GOOD = [1.0] * 30
WORSE = [0.0] * 12 + [1.0] * 18


def _file(tmp_path: Path, name: str, *results: CycleResult) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"probes": [result_to_json(r) for r in results]}))
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_two_files_give_means_delta_ci_and_p_value_per_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _file(tmp_path, "a.json", _result("bm25", GOOD))
    b = _file(tmp_path, "b.json", _result("bm25", WORSE))
    code, out, _ = _run(capsys, a, b, "--format", "json")
    assert code == 0
    pair = json.loads(out)["pairs"][0]
    recall = pair["metrics"]["recall@10"]
    assert pair["n"] == 30 and (recall["a"], recall["b"]) == (1.0, 0.6)
    assert recall["delta"] == pytest.approx(-0.4)
    assert recall["p_value"] == paired_permutation_test(GOOD, WORSE)
    assert (recall["ci_low"], recall["ci_high"]) == pytest.approx(
        paired_bootstrap_delta_ci(GOOD, WORSE)
    )
    assert recall["significant"] is True


def test_table_marks_significant_deltas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _file(tmp_path, "a.json", _result("x", GOOD))
    b = _file(tmp_path, "b.json", _result("y", [0.0, *GOOD[1:]]))
    code, out, _ = _run(capsys, a, b)
    lines = {
        line.split()[0]: line for line in out.splitlines() if line.startswith(("recall", "hit"))
    }
    assert code == 0 and "(30 paired queries)" in out
    assert lines["recall@10"].rstrip().endswith("1.0000")  # one query changed: p = 1
    assert "**" in out.splitlines()[-1]  # the legend


def test_one_file_compares_every_probe_with_the_first_in_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(
        tmp_path,
        "run.json",
        _result("bm25", GOOD),
        _result("tags", WORSE),
        _result("hybrid", GOOD),
    )
    code, out, _ = _run(capsys, path, "--format", "markdown")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "| Retriever | mean_recall@10 | mean_precision@10 | MRR@10 |"
    assert lines[2] == "| bm25 | 1.0000 | 0.1000 | 1.0000 |"
    assert lines[3].startswith(
        "| tags | 0.6000 (-0.4000, p=0.000488**) | 0.0600 (-0.0400,"
    )  # 2 / 2**12
    assert lines[4] == (
        "| hybrid | 1.0000 (+0.0000, p=1) | 0.1000 (+0.0000, p=1) | 1.0000 (+0.0000, p=1) |"
    )


def test_markdown_takes_the_cut_off_from_k(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, "run.json", _result("bm25", GOOD), _result("tags", WORSE))
    code, out, _ = _run(capsys, path, "--format", "markdown", "--k", "5", "-m", "recall")
    assert code == 0 and out.splitlines()[0] == "| Retriever | mean_recall@5 |"
    code, _, err = _run(capsys, path, "--format", "markdown", "--k", "3")
    assert code == 2 and "--k 3: the runs have k = 5, 10" in err


def test_files_with_several_probes_pair_them_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _file(tmp_path, "a.json", _result("one", GOOD), _result("two", GOOD))
    b = _file(tmp_path, "b.json", _result("two", WORSE), _result("three", GOOD))
    code, out, _ = _run(capsys, a, b, "--format", "json")
    pairs = json.loads(out)["pairs"]
    assert code == 0 and [(p["a"], p["b"]) for p in pairs] == [(f"{a}:two", f"{b}:two")]


def test_probe_flags_pick_the_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _file(tmp_path, "a.json", _result("one", GOOD), _result("two", WORSE))
    b = _file(tmp_path, "b.json", _result("three", GOOD))
    code, out, _ = _run(capsys, a, b, "--probe-a", "two", "--probe-b", "three", "-f", "json")
    recall = json.loads(out)["pairs"][0]["metrics"]["recall@10"]
    assert code == 0 and recall["delta"] == pytest.approx(0.4)


def test_no_common_probe_name_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _file(tmp_path, "a.json", _result("one", GOOD), _result("two", GOOD))
    b = _file(tmp_path, "b.json", _result("three", GOOD), _result("four", GOOD))
    code, _, err = _run(capsys, a, b)
    assert code == 2 and "no probe name in common; pick the two with --probe-a" in err


def test_runs_over_different_fixtures_are_not_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _file(tmp_path, "a.json", _result("x", GOOD))
    b = _file(tmp_path, "b.json", _result("x", GOOD, fixture_hash="d" * 64))
    code, out, _ = _run(capsys, a, b)
    assert code == 0 and "not compared: fixture content hash" in out


def test_a_single_probe_file_needs_a_second_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, "a.json", _result("x", GOOD))
    code, _, err = _run(capsys, path)
    assert code == 2 and "holds one probe; give a second result file" in err
    code, _, err = _run(capsys)
    assert code == 2 and "needs one or two RESULT.json files" in err


CONFIG_PROBE = """
[[probe]]
name = "{name}"
fixture = "{fixture}"

[probe.target]
kind = "zengram"
url = "{url}"
api_key_env = "{env}"

[probe.load]
mode = "serial"
"""


def test_config_runs_every_probe_and_compares_them_with_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = packaged_fixture("smoke")
    with (
        started_refstore(retriever="bm25") as bm25,
        started_refstore(retriever="dense", embedder="hash:16") as dense,
    ):
        parts = []
        for name, store in (("bm25", bm25), ("dense16", dense)):
            env = f"BENCHD_COMPARE_{name.upper()}"
            monkeypatch.setenv(env, store.api_key)
            parts.append(CONFIG_PROBE.format(name=name, fixture=fixture, url=store.url, env=env))
        config = tmp_path / "ab.toml"
        config.write_text("".join(parts))
        code, out, err = _run(capsys, "--config", str(config), "--format", "markdown")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("|")]  # not the store's log
    assert lines[0] == "| Retriever | mean_recall@10 | mean_precision@10 | MRR@10 |"
    assert lines[2].startswith("| bm25 | ") and lines[3].startswith("| dense16 | ")
    assert "**" in lines[3]  # a 16-dim hashing embedder is significantly worse than BM25
