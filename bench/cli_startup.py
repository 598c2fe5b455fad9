"""CLI start-up: wall and CPU time of the commands an operator types first.

Times, in one run and in turn (so a machine whose speed drifts slows all three
alike), whole processes from outside:

- ``python -c pass``: the bare interpreter, the floor;
- ``benchd --version``: goal within 0.15 s of the floor (issue 26);
- ``benchd validate -c benchd.toml`` on the starter config ``benchd init``
  writes: goal within 0.5 s.

Prints min / median / max over the runs (quote the median) and the median
difference from the floor. CPU is the children's user + system time.

    .venv/bin/python bench/cli_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def benchd_command() -> list[str]:
    """The installed ``benchd`` script beside this interpreter, else ``python -m benchd``."""
    script = Path(sys.executable).parent / "benchd"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "benchd"]


def timed(argv: Sequence[str]) -> tuple[float, float]:
    """One run of ``argv``: (wall s, cpu s); fails loudly if the command fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def commands(config: Path) -> dict[str, list[str]]:
    benchd = benchd_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "benchd --version": [*benchd, "--version"],
        "benchd validate -c": [*benchd, "validate", "-c", str(config)],
    }


def measure(cmds: dict[str, list[str]], runs: int) -> dict[str, list[tuple[float, float]]]:
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    for argv in cmds.values():  # one warm-up each: page cache, .pyc files
        timed(argv)
    for _ in range(runs):
        for name, argv in cmds.items():
            samples[name].append(timed(argv))
    return samples


def report(samples: dict[str, list[tuple[float, float]]]) -> list[str]:
    floor = statistics.median(w for w, _ in samples["python -c pass"])
    lines = [
        f"{'command':<22} {'wall min':>9} {'median':>8} {'max':>8} {'cpu med':>8} {'- floor':>8}"
    ]
    for name, runs in samples.items():
        walls = [w for w, _ in runs]
        wall = statistics.median(walls)
        cpu = statistics.median(c for _, c in runs)
        lines.append(
            f"{name:<22} {min(walls):>9.3f} {wall:>8.3f} {max(walls):>8.3f} "
            f"{cpu:>8.3f} {wall - floor:>+8.3f}"
        )
    lines.append("goals: --version within 0.15 s of python -c pass; validate within 0.5 s")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "benchd.toml"
        subprocess.run([*benchd_command(), "init", str(config)], check=True, capture_output=True)
        env_key = "BRAIN_API_KEY"  # validate needs no key; set one anyway, as a user would
        os.environ.setdefault(env_key, "bench-key")
        print(f"{args.runs} runs each, in turn; seconds", flush=True)
        print("\n".join(report(measure(commands(config), args.runs))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
