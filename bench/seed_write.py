"""CPU per record on a seed's write path, without the network.

Loads a streamed JSON Lines fixture (``benchd synth`` writes one; or name
your own), then times in CPU (``time.process_time``), best and median of
``--repeat`` passes over every memory:

- ``stream``: iterating the streamed fixture's memories (each line read
  again, checked against its digest and decoded);
- ``prepare``: the same, each memory made into benchd's record
  (:meth:`Namespace.records`) and into the import record the zengram kind
  sends (``ZengramStore._prepare``), in batches of 500 as the seeder cuts
  them;
- ``encode``: the import bodies of those batches serialised as httpx does
  a ``json=`` body, for scale beside the two above.

Run from the repo root::

    .venv/bin/python bench/seed_write.py [--memories 100000] [--fixture F] [--repeat 5]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchd.fixtures.model import load_fixture
from benchd.fixtures.stream import StreamedMemories
from benchd.kinds.zengram import ZengramConfig, ZengramStore
from benchd.store.concurrency import chunks
from benchd.store.namespace import Namespace

BATCH = 500
as_sent = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def cpu_of(fn: Callable[[], object], repeat: int) -> list[float]:
    """CPU seconds of each of ``repeat`` calls of ``fn``."""
    out = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        out.append(time.process_time() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--fixture", help="a JSON Lines fixture (else one is synthesised)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.fixture) if args.fixture else Path(tmp) / "synth.jsonl"
        if not args.fixture:
            subprocess.run(
                [sys.executable, "-m", "benchd", "synth", "--memories", str(args.memories),
                 "--queries", "10", "--seed", "0", "--out", str(path)],
                check=True,
            )  # fmt: skip
        memories = load_fixture(path).memories
        assert isinstance(memories, StreamedMemories), "a JSON Lines fixture is streamed"
        store = ZengramStore(ZengramConfig(url="http://127.0.0.1:9", cleanup="never"), None)
        ns = Namespace(store)
        ns.own(memories.ids)
        n = len(memories)

        def stream() -> None:
            for _ in memories:
                pass

        def prepare() -> None:
            for batch in chunks(ns.records(memories), BATCH):
                [store._prepare(r) for r in batch]

        bodies = [
            {"data": [store._prepare(r) for r in batch], "operator_approved": True}
            for batch in chunks(ns.records(memories), BATCH)
        ]

        def encode() -> None:  # as httpx encodes a json= body
            for body in bodies:
                as_sent(body).encode()

        print(f"{n:,} memories of {path.name}; CPU per record, best / median of {args.repeat}")
        for name, fn in (("stream", stream), ("prepare", prepare), ("encode", encode)):
            runs = cpu_of(fn, args.repeat)
            best, median = min(runs) / n * 1e6, statistics.median(runs) / n * 1e6
            print(f"  {name:<8}{best:8.2f} / {median:6.2f} µs   ({min(runs):.3f} s a pass)")


if __name__ == "__main__":
    main()
