"""A smoke run of bench/cli_startup.py with one run each, so the script cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cli_startup.py"


def test_bench_reports_the_five_commands() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--runs", "1"], capture_output=True, text=True, check=True
    )
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("bytecode compiled")
    names = [line[:22].strip() for line in lines[2:7]]
    assert names == [
        "python -c pass",
        "benchd --version",
        "benchd validate -c",
        "benchd once --help",
        "benchd once -c",
    ]
    for line in lines[2:7]:
        assert float(line.split()[-4]) > 0  # the median wall time, parsed
