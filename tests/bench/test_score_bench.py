"""A smoke run of bench/score_bench.py at a tiny size, so the script cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "score_bench.py"


def test_score_bench_runs_and_finds_identical_values() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--queries", "30", "--repeat", "1"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "per-query values identical at 4 decimals: yes" in proc.stdout
    assert "peak RSS, MiB" in proc.stdout
