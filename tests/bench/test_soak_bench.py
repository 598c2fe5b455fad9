"""A smoke run of bench/soak.py at a tiny size, so the script cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


def test_soak_runs_every_fault_phase_and_recovers() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--cycles", "38", "--sample", "19"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "store killed for this phase" in proc.stdout
    assert "store restarted" in proc.stdout
    assert proc.stdout.rstrip().endswith("soak: ok")
