"""How fast benchd loads and validates a big fixture, beside the bare json module.

Usage: ``.venv/bin/python bench/fixture_load.py [--memories N] [--queries N]``

Writes one synthetic corpus (fixed seed) as JSON and as JSON Lines, then runs
each measurement in a fresh subprocess (so peak RSS is per measurement):

- ``json.load`` / per-line ``json.loads`` into a list: the floor — parsing only;
- ``load_fixture``: parse + every check + ids + content hash, memories kept;
- ``validate_fixture``: the same checks without keeping the memories.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

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
t = time.perf_counter()
{code}
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
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


def measure(path: Path, code: str) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of ``code`` run in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(path=str(path), code=code)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(out[0]), int(out[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = write(Path(tmp), args.memories, args.queries)
        print(f"{args.memories} memories, {args.queries} queries")
        print(f"{'file':7} {'what':17} {'seconds':>8} {'peak MiB':>9} {'time x':>7} {'mem x':>6}")
        for suffix, path in files.items():
            base_s, base_mb = measure(path, PEER[suffix])
            print(f"{suffix:7} {'json (peer)':17} {base_s:8.2f} {base_mb:9.0f}")
            for name, code in BENCHD.items():
                s, mb = measure(path, code)
                print(
                    f"{suffix:7} {name:17} {s:8.2f} {mb:9.0f} {s / base_s:7.2f} {mb / base_mb:6.2f}"
                )


if __name__ == "__main__":
    main()
