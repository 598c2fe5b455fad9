"""Listing read-back: benchd's CPU per listed record when a cycle lists what it wrote.

After its writes a cycle lists its namespace again to verify them
(``Seeder.verify``): each ``GET /export`` page is decoded (``json.loads``
and the depth check), reduced (``zengram_wire.export_page``), each record
made a ``Listed`` (``ZengramStore._listed``) and kept in the listing's
table (``ListedTable``, ``OwnedIds.index``), then every fixture id is looked
up in it (``Namespace.learn``). This bench times that path alone, without a
network, on the pages the reference store really answers for a corpus
benchd wrote, and beside it what a plain client pays for the same pages
(``json.loads`` and the ids pulled out), and the pass that makes the
corpus's records (``Namespace.records``: what the writes and ``seeded``
iterate).

The pages are made once and kept in ``--pages`` (default
``/tmp/benchd-listing-N.pickle``): a synthetic fixture of N memories
(``benchd synth``) seeded by benchd's zengram target into a fresh
reference store (bm25), then listed in pages of 500 as raw answer bodies.
Each measurement is its own process (``--tree`` runs it on another
checkout's ``benchd``, for before/after) that runs each part ``--repeats``
times and keeps the least CPU (the neighbours on a shared box only ever
add); pairs alternate which tree runs first; figures are min/median/max
over the runs, and the read-back over the plain client's decode measured
in the same process. Run from the repo root::

    .venv/bin/python bench/listing_readback.py --records 100000 --runs 5
    git archive BASE | tar -x -C /tmp/before
    .venv/bin/python bench/listing_readback.py --tree /tmp/before --runs 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NAMESPACE = "bench-listing"
KEY = "bench-listing-key-0123456789"
PAGE = 500


# -- the pages, made once -------------------------------------------------------------


def make_pages(records: int, out: Path) -> None:
    """Seed ``records`` synthetic memories with benchd into a fresh reference store and keep
    its ``GET /export`` answers (raw bodies), the fixture ids and the memories."""
    import anyio
    import httpx

    from benchd.config.secrets import Secret
    from benchd.kinds.zengram import ZengramConfig, ZengramTarget
    from benchd.refstore.testing import started_refstore

    fixture = out.with_suffix(".jsonl")
    subprocess.run(
        [sys.executable, "-m", "benchd", "synth", "--memories", str(records),
         "--queries", "100", "--out", str(fixture)],
        check=True, capture_output=True,
    )  # fmt: skip
    memories = [
        entry["memory"] for entry in map(json.loads, fixture.read_text().splitlines())
        if "memory" in entry
    ]
    with started_refstore(api_key=KEY, retriever="bm25", import_pacing=0.0) as store:
        settings = ZengramConfig(
            url=store.url, namespace=NAMESPACE, cleanup="never", timeout_s=600.0,
            searchable_timeout_s=0.0,
        )  # fmt: skip

        async def seed() -> list[bytes]:
            target = ZengramTarget(settings, Secret(KEY, "bench"))
            try:
                report = await target.seed(memories)
            finally:
                await target.aclose()
            print(f"seeded: {report.imported} imported, {report.verified} verified", flush=True)
            bodies: list[bytes] = []
            async with httpx.AsyncClient(base_url=store.url, timeout=600.0) as client:
                more = True
                while more:
                    params = {"client_id": NAMESPACE, "limit": PAGE, "offset": PAGE * len(bodies)}
                    answer = await client.get("/export", params=params, headers={"x-api-key": KEY})
                    answer.raise_for_status()
                    bodies.append(answer.content)
                    more = bool(json.loads(answer.content).get("has_more"))
            return bodies

        bodies = anyio.run(seed)
    fixture.unlink()
    ids = [str(m["id"]) for m in memories]
    out.write_bytes(pickle.dumps({"ids": ids, "memories": memories, "bodies": bodies}))
    print(f"wrote {out}: {len(bodies)} pages, {sum(map(len, bodies)) / 2**20:.1f} MiB")


# -- one measurement, in its own process ------------------------------------------------


def measure(pages: Path, repeats: int) -> dict[str, float]:
    """CPU seconds of: the verify read-back, a plain client's decode, the records pass (the
    least of ``repeats`` runs each)."""
    import anyio
    import numpy  # noqa: F401  (imported by a cycle's scoring anyway: not timed here)

    from benchd.config.secrets import Secret
    from benchd.http.error_map import Answer
    from benchd.kinds.zengram import ZengramConfig, ZengramTarget

    data = pickle.loads(pages.read_bytes())
    ids, memories, bodies = data["ids"], data["memories"], data["bodies"]
    settings = ZengramConfig(url="http://127.0.0.1:9", namespace=NAMESPACE, cleanup="never")
    target = ZengramTarget(settings, Secret(KEY, "bench"))
    ns = target.namespace

    async def request(method: str, path: str, **kwargs: Any) -> Answer:
        assert (method, path) == ("GET", "/export"), (method, path)
        return Answer(200, {}, bodies[int(kwargs["params"]["offset"]) // PAGE])

    target.store._http.request = request  # type: ignore[attr-defined]

    async def verify() -> tuple[int, tuple[str, ...]]:
        return await target.seeder.verify(ids)

    def read_back() -> None:
        verified, missing = anyio.run(verify)
        assert verified == len(ids) and not missing, (verified, len(missing))

    def plain() -> None:
        listed = 0
        for body in bodies:
            listed += len([str(r["id"]) for r in json.loads(body)["memories"]])
        assert listed == len(ids) + 1, listed  # the corpus and the sentinel

    def records() -> None:
        assert sum(1 for _ in ns.records(memories)) == len(ids)

    ns.own(ids)  # the seed's, before its writes: not the read-back's
    ns.listing_limit = max(20_000, 2 * len(ids) + 1)
    parts = {"verify_s": read_back, "plain_decode_s": plain, "records_s": records}
    out = dict.fromkeys(parts, math.inf)
    for _ in range(repeats):  # the least of a few: what the code costs, less the neighbours
        for name, part in parts.items():
            started = time.process_time()
            part()
            out[name] = min(out[name], time.process_time() - started)
    return out


def measured(tree: str, pages: Path, repeats: int) -> dict[str, float]:
    env = os.environ | {"PYTHONPATH": tree}
    argv = [sys.executable, __file__, "--measure", str(pages), "--repeats", str(repeats)]
    done = subprocess.run(argv, env=env, check=True, capture_output=True, text=True, cwd=tree)
    return dict(json.loads(done.stdout))


def spread(values: list[float]) -> str:
    return f"{min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pages", type=Path, default=None)
    parser.add_argument("--tree", default=None, help="another checkout to compare (before)")
    parser.add_argument("--repeats", type=int, default=3, help="in each process (least kept)")
    parser.add_argument("--measure", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.repeats)))
        return
    pages = args.pages or Path(f"/tmp/benchd-listing-{args.records}.pickle")
    if not pages.exists():
        make_pages(args.records, pages)
    here = str(Path(__file__).resolve().parent.parent)
    trees = {"this": here} | ({"other": str(Path(args.tree).resolve())} if args.tree else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for n in range(args.runs):
        order = list(trees) if n % 2 == 0 else list(reversed(trees))
        for name in order:
            runs[name].append(measured(trees[name], pages, args.repeats))
            print(f"run {n + 1} {name}: {runs[name][-1]}", flush=True)
    print(f"\nCPU seconds, min / median / max of {args.runs} runs (load {os.getloadavg()[0]:.1f})")
    for name, results in runs.items():
        for key in results[0]:
            print(f"  {name:5} {key:15} {spread([r[key] for r in results])}")
    for name, results in runs.items():
        ratios = [r["verify_s"] / r["plain_decode_s"] for r in results]
        print(f"  {name:5} verify/plain    {spread(ratios)}")
    if "other" in runs:
        for key in runs["this"][0]:
            ratios = [a[key] / b[key] for a, b in zip(runs["this"], runs["other"], strict=True)]
            print(f"  this/other {key:15} {spread(ratios)}")


if __name__ == "__main__":
    main()
