"""How fast benchd loads and validates a big fixture, beside the bare json module.

Usage: ``.venv/bin/python bench/fixture_load.py [--memories N] [--queries N]
[--fixture FILE] [--baseline DIR] [--runs N]``

Writes one synthetic corpus (fixed seed) as JSON and as JSON Lines (or reads
``--fixture``), then runs each measurement in a fresh subprocess (so peak RSS
is per measurement) and reports its wall and CPU seconds (imports not timed):

- ``json.load`` / per-line ``json.loads`` into a list: the floor — parsing only;
- ``load_fixture``: parse + every check + ids + content hash (a JSON file's
  memories kept, a JSON Lines file's streamed: ids, line digests and dates);
- ``validate_fixture``: the same checks without keeping the memories.

``--baseline DIR`` names a directory holding another ``benchd`` package (for
one from a branch: ``mkdir /tmp/base && git archive main benchd | tar -x -C
/tmp/base``): each benchd measurement then runs ``--runs`` times with it and
with this checkout, alternately, and prints min/median/max of each, the ratio
of the medians and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]

WORDS = [
    "staging",
    "production",
    "port",
    "database",
    "cache",
    "queue",
    "deploy",
    "incident",
    "latency",
    "ledger",
    "search",
    "index",
    "replica",
    "backup",
    "restore",
    "certificate",
    "token",
    "session",
    "rollout",
    "canary",
]

# what is measured: the second statement (the first, the import, is not timed)
PEER = {
    ".json": "import json; d = json.load(open(PATH, 'rb'))",
    ".jsonl": "import json; d = [json.loads(line) for line in open(PATH, 'rb')]",
}
BENCHD = {
    "load_fixture": "from benchd.fixtures.model import load_fixture; f = load_fixture(PATH)",
    "validate_fixture": (
        "from benchd.fixtures.model import validate_fixture; assert not validate_fixture(PATH)"
    ),
}
PROBE = """
import resource, time
PATH = {path!r}
{setup}
t, cpu = time.perf_counter(), time.process_time()
{code}
print(time.perf_counter() - t, time.process_time() - cpu,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def corpus(n_memories: int, n_queries: int) -> tuple[list[dict[str, object]], list[object]]:
    rng = random.Random(7)
    memories: list[dict[str, object]] = [
        {
            "id": f"m{i}",
            "type": rng.choice(["fact", "event", "decision", "status"]),
            "content": " ".join(rng.choices(WORDS, k=14)) + f" (record {i})",
            "importance": rng.choice(["low", "medium", "high"]),
            "tags": rng.sample(WORDS, 2),
        }
        for i in range(n_memories)
    ]
    queries: list[object] = [
        {
            "q": " ".join(rng.choices(WORDS, k=5)) + f" #{j}",
            "expected_ids": [f"m{rng.randrange(n_memories)}"],
            "k": 10,
            "category": rng.choice(["lookup", "paraphrase"]),
        }
        for j in range(n_queries)
    ]
    return memories, queries


def write(directory: Path, n_memories: int, n_queries: int) -> dict[str, Path]:
    memories, queries = corpus(n_memories, n_queries)
    as_json = directory / "corpus.json"
    as_json.write_text(json.dumps({"memories": memories, "queries": queries}))
    as_jsonl = directory / "corpus.jsonl"
    with as_jsonl.open("w") as fh:
        fh.writelines(json.dumps({"memory": m}) + "\n" for m in memories)
        fh.writelines(json.dumps({"query": q}) + "\n" for q in queries)
    return {".json": as_json, ".jsonl": as_jsonl}


def measure(path: Path, code: str, tree: Path = CHECKOUT) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of ``code`` run in a fresh interpreter
    that imports benchd from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    setup, timed = code.split("; ", 1)
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(path=str(path), setup=setup, code=timed)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tree,  # ``-c`` puts the working directory first on the path
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]) / 1024


def spread(values: list[float]) -> str:
    """``min/median/max``."""
    return "/".join(f"{v:.2f}" for v in (min(values), statistics.median(values), max(values)))


def against(files: dict[str, Path], baseline: Path, runs: int) -> None:
    """Each benchd measurement with ``baseline`` and with this checkout, alternately."""
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'file':7} {'what':17} {'tree':9} {'CPU s min/med/max':>18} {'peak MiB':>9}")
    for suffix, path in files.items():
        for name, code in BENCHD.items():
            got: dict[str, list[tuple[float, float, float]]] = {"baseline": [], "this": []}
            for _ in range(runs):
                got["baseline"].append(measure(path, code, baseline))
                got["this"].append(measure(path, code))
            for tree, rows in got.items():
                cpu, mb = [r[1] for r in rows], max(r[2] for r in rows)
                print(f"{suffix:7} {name:17} {tree:9} {spread(cpu):>18} {mb:9.0f}")
            ratio = statistics.median(r[1] for r in got["this"]) / statistics.median(
                r[1] for r in got["baseline"]
            )
            print(f"{suffix:7} {name:17} {'ratio':9} {ratio:18.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def against_peer(files: dict[str, Path]) -> None:
    print(
        f"{'file':7} {'what':17} {'seconds':>8} {'CPU s':>6} {'peak MiB':>9} {'time x':>7} "
        f"{'mem x':>6}"
    )
    for suffix, path in files.items():
        base_s, base_cpu, base_mb = measure(path, PEER[suffix])
        print(f"{suffix:7} {'json (peer)':17} {base_s:8.2f} {base_cpu:6.2f} {base_mb:9.0f}")
        for name, code in BENCHD.items():
            s, cpu, mb = measure(path, code)
            print(
                f"{suffix:7} {name:17} {s:8.2f} {cpu:6.2f} {mb:9.0f} {s / base_s:7.2f} "
                f"{mb / base_mb:6.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--fixture", type=Path, help="measure this file instead")
    parser.add_argument("--baseline", type=Path, help="a directory holding another benchd")
    parser.add_argument("--runs", type=int, default=3, help="runs of each with --baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.fixture is not None:
            files = {args.fixture.suffix.lower(): args.fixture}
            print(f"{args.fixture}")
        else:
            files = write(Path(tmp), args.memories, args.queries)
            print(f"{args.memories} memories, {args.queries} queries")
        if args.baseline is not None:
            against(files, args.baseline, args.runs)
        else:
            against_peer(files)


if __name__ == "__main__":
    main()
