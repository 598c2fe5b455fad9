"""A smoke run of bench/cranfield_bench.py on a few queries, so the script cannot rot."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cranfield_bench.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cranfield_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_scores_equal_trec_eval_on_a_few_queries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _bench()
    if not (bench.DEFAULT_CRANFIELD / "cranqrel").is_file():
        pytest.skip(f"shared Cranfield collection not found at {bench.DEFAULT_CRANFIELD}")
    code = bench.main(["--max-queries", "5", "--save", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "benchd == trec_eval on all 5 queries" in out
    qids = {line.split()[0] for line in (tmp_path / "run").read_text().splitlines()}
    assert qids == {"1", "2", "3", "4", "5"}
