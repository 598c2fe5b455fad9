"""CLI start-up: wall and CPU time of the commands an operator types first.

Times, in one run and in turn (so a machine whose speed drifts slows all three
alike), whole processes from outside:

- ``python -c pass``: the bare interpreter, the floor;
- ``benchd --version``: goal within 0.15 s of the floor (issue 26);
- ``benchd validate -c benchd.toml`` on the starter config ``benchd init``
  writes: goal within 0.5 s;
- ``benchd once --help``: every module ``once`` imports, no request sent;
- ``benchd once -c`` one cycle of the packaged smoke fixture (34 memories,
  kept between runs: ``cleanup = "never"``) against a reference store the
  bench starts in a process of its own: start-up plus a cycle of a few
  dozen requests.

Prints min / median / max over the runs (quote the median) and the median
difference from the floor. CPU is the children's user + system time (the
reference store's is not counted).

The package's bytecode is compiled first (``python -m compileall``), as an
install does: with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__``,
every run would compile benchd's modules again (``--source`` leaves the
bytecode as it finds it: with no ``__pycache__``, that is what it measures).

    .venv/bin/python bench/cli_startup.py [--runs 10] [--source]
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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_common import compile_package, package_dir, zengram_config

KEY_ENV = "BRAIN_API_KEY"
STORE_KEY = "cli-startup-bench-key-0123456789"


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


@contextmanager
def reference_store() -> Iterator[str]:
    """``benchd refstore`` on a free loopback port (bm25, no rate limits); its URL."""
    argv = [*benchd_command(), "refstore", "--listen", "127.0.0.1:0", "--retriever", "bm25",
            "--read-limit", "0", "--write-limit", "0"]  # fmt: skip
    env = os.environ | {KEY_ENV: STORE_KEY}
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        try:
            url = proc.stdout.readline().strip()
            if not url.startswith("http://"):
                raise SystemExit(f"benchd refstore did not start (exit {proc.poll()})")
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def once_config(workdir: Path, url: str) -> Path:
    """One probe of the packaged smoke fixture against ``url``, kept between runs."""
    return zengram_config(
        workdir / "once.toml",
        name="startup",
        url=url,
        fixture=package_dir() / "data" / "smoke.json",
        key_env=KEY_ENV,
        namespace="cli-startup",
    )


def commands(config: Path, once: Path) -> dict[str, list[str]]:
    benchd = benchd_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "benchd --version": [*benchd, "--version"],
        "benchd validate -c": [*benchd, "validate", "-c", str(config)],
        "benchd once --help": [*benchd, "once", "--help"],
        "benchd once -c": [*benchd, "once", "-c", str(once), "-f", "json"],
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
    lines.append("once --help: the imports of a cycle; once -c: those and a cycle of 34 records")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command")
    parser.add_argument("--source", action="store_true", help="do not compile the bytecode first")
    args = parser.parse_args(argv)
    bytecode = "bytecode as found" if args.source else compile_package()
    with tempfile.TemporaryDirectory() as tmp, reference_store() as url:
        config = Path(tmp) / "benchd.toml"
        subprocess.run([*benchd_command(), "init", str(config)], check=True, capture_output=True)
        # validate needs no key; once needs the store's, which the starter config names too
        os.environ[KEY_ENV] = STORE_KEY
        cmds = commands(config, once_config(Path(tmp), url))
        print(f"{args.runs} runs each, in turn; seconds; {bytecode}", flush=True)
        print("\n".join(report(measure(cmds, args.runs))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
