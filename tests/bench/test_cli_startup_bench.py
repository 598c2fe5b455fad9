"""A smoke run of bench/cli_startup.py with one run each, so the script cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cli_startup.py"


def test_bench_reports_the_three_commands() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--runs", "1"], capture_output=True, text=True, check=True
    )
    rows = [line.split()[0:2] for line in proc.stdout.splitlines()[2:5]]
    assert rows == [["python", "-c"], ["benchd", "--version"], ["benchd", "validate"]]
    for line in proc.stdout.splitlines()[2:5]:
        assert float(line.split()[-4]) > 0  # the median wall time, parsed
