"""The 90 s CI soak: hostile stores and hostile clients beside a healthy probe.

``bench/soak_hostile.py --duration 90``: a healthy probe every 2 s beside one
probe per hostile store mode (stacked-gzip bomb, endless header block, lone
surrogates, extreme numbers, a 500 with unencodable text) and 10 clients
sending benchd request heads that never end. The healthy probe must complete
at least 90% of the cycles its interval allows, ``/metrics``, ``/api/status``
and the page must answer 200, no output may hold the API key, and the
daemon's RSS must stay under 150 MiB (measured: 65-75 MiB). The 10-minute
version is the script's default.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "soak_hostile.py"


def test_hostile_stores_and_clients_leave_the_healthy_probe_and_memory_alone() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--duration", "90", "--rss-bound-mib", "150"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("soak-hostile: ok")
    for mode in ("bomb", "endless", "surrogate", "extreme", "error"):
        assert f"\n{mode}: " in proc.stdout  # each hostile probe ran cycles
