"""bench/refstore_bench.py still runs end to end (tiny sizes; the figures are not checked)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "refstore_bench.py"


def test_the_benchmark_script_runs_and_prints_its_table() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--memories", "300", "--rounds", "60", "--seconds", "0.3"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "search p50, concurrency 1 (ms)" in proc.stdout
    assert "searches/s, concurrency 16" in proc.stdout


def test_the_listing_benchmark_runs_and_lists_the_same_ids_both_ways() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--listing", "1200", "--ms-cursor"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "OFFSET (before)" in proc.stdout and "cursor (now)" in proc.stdout
    assert "same 1,200 ids in the same order before and now: yes" in proc.stdout
