"""Cranfield 1400 against the reference store: benchd's scores beside trec_eval's.

One command reproduces it::

    .venv/bin/python bench/cranfield_bench.py

It converts ``../shared/data/cranfield`` with ``benchd convert cranfield``
(grades = 5 - Cleverdon code), starts the reference store in-process on
loopback with the ``bm25`` retriever, seeds the corpus through benchd's
``zengram`` adapter (the same code path a probe uses), runs every query once
(``limit`` = 100, read-only), and scores the *same* rankings twice: with
``benchd.scoring.ranking`` and with trec_eval's C code (``pytrec_eval``, the
``pytrec-eval-terrier`` wheel). It prints nDCG@10, MAP and a few more
measures from both, the scoring time of each, and exits 1 unless every
per-query value is identical. ``--save DIR`` writes the qrels and the run in
trec_eval's formats so ``trec_eval -m ndcg_cut.10 -m map`` can check it too.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import anyio
import pytrec_eval

from benchd.cli import main as benchd_main
from benchd.config.secrets import Secret
from benchd.fixtures.model import Fixture, load_fixture
from benchd.kinds.zengram import ZengramConfig, ZengramTarget
from benchd.refstore import RefStoreConfig, running_refstore
from benchd.refstore.retrievers import RETRIEVERS
from benchd.scoring.ranking import query_metrics
from benchd.store.target import SearchQuery

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CRANFIELD = REPO.parent / "shared" / "data" / "cranfield"
NAMESPACE = "benchd-cranfield"
# benchd measure name -> trec_eval measure name
MEASURES = {
    "ndcg@10": "ndcg_cut_10",
    "ap": "map",
    "precision@10": "P_10",
    "rr": "recip_rank",
    "recall@100": "recall_100",
}
Runs = dict[str, tuple[str, ...]]
PerQuery = dict[str, dict[str, float]]


def convert(cranfield: Path, out: Path, max_queries: int | None) -> Fixture:
    """``benchd convert cranfield DIR --out OUT`` (the real command), then load the result."""
    argv = ["convert", "cranfield", str(cranfield), "--out", str(out)]
    if max_queries is not None:
        argv += ["--max-queries", str(max_queries)]
    code = benchd_main(argv)
    if code != 0:
        raise SystemExit(f"benchd convert cranfield failed with exit code {code}")
    return load_fixture(out)


async def rankings(fixture: Fixture, retriever: str, depth: int) -> tuple[Runs, float, float]:
    """Seed the fixture into a fresh reference store and run each query once, in order."""
    config = RefStoreConfig(
        api_key="bench-" + secrets.token_hex(8),
        retriever=retriever,
        read_limit_per_min=0,
        write_limit_per_min=0,
    )
    async with running_refstore(config) as store:
        target = ZengramTarget(
            ZengramConfig(url=store.url, namespace=NAMESPACE), Secret(store.api_key, "bench")
        )
        try:
            started = time.perf_counter()
            report = await target.seed(fixture.memories)
            seeded = time.perf_counter() - started
            if report.verified != len(fixture.memories) or report.missing:
                raise SystemExit(f"seed incomplete: {report}")
            started = time.perf_counter()
            runs = {
                q.id: await target.search(SearchQuery(q.q, depth, q.reference_date))
                for q in fixture.queries
            }
            searched = time.perf_counter() - started
        finally:
            await target.aclose()
    return runs, seeded, searched


def score_benchd(fixture: Fixture, runs: Runs, depth: int) -> tuple[PerQuery, float]:
    started = time.perf_counter()
    per_query = {q.id: query_metrics(runs[q.id], q.relevance, (10, depth)) for q in fixture.queries}
    return per_query, time.perf_counter() - started


def _trec_run(runs: Runs) -> dict[str, dict[str, float]]:
    """Rank order as strictly decreasing scores, so trec_eval's tie-breaking never applies."""
    return {
        qid: {doc: float(len(ranked) - rank) for rank, doc in enumerate(ranked)}
        for qid, ranked in runs.items()
    }


def score_trec_eval(fixture: Fixture, runs: Runs) -> tuple[PerQuery, float]:
    qrels = {q.id: dict(q.relevance) for q in fixture.queries}
    started = time.perf_counter()
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "map", "P.10", "recip_rank", "recall.100"}
    )
    per_query: PerQuery = evaluator.evaluate(_trec_run(runs))
    elapsed = time.perf_counter() - started
    for q in fixture.queries:  # trec_eval skips a query with no results (-c would count 0)
        per_query.setdefault(q.id, dict.fromkeys(MEASURES.values(), 0.0))
    return per_query, elapsed


def _mean(per_query: PerQuery, name: str) -> float:
    return sum(values[name] for values in per_query.values()) / len(per_query)


def compare(ours: PerQuery, theirs: PerQuery) -> list[str]:
    """Every per-query value that differs (empty when benchd equals trec_eval exactly)."""
    return [
        f"query {qid} {mine}: benchd {ours[qid][mine]!r} != trec_eval {theirs[qid][trec]!r}"
        for qid in ours
        for mine, trec in MEASURES.items()
        if ours[qid][mine] != theirs[qid][trec]
    ]


def save(directory: Path, fixture: Fixture, runs: Runs) -> None:
    """Write ``qrels`` and ``run`` in trec_eval's formats."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "qrels").open("w") as fh:
        for q in fixture.queries:
            fh.writelines(f"{q.id} 0 {doc} {grade}\n" for doc, grade in q.relevance.items())
    with (directory / "run").open("w") as fh:
        for qid, docs in _trec_run(runs).items():
            for rank, (doc, score) in enumerate(docs.items(), start=1):
                fh.write(f"{qid} Q0 {doc} {rank} {score:g} benchd-refstore\n")


def report(
    fixture: Fixture,
    ours: PerQuery,
    theirs: PerQuery,
    timings: Mapping[str, float],
    retriever: str,
) -> None:
    queries, docs = len(fixture.queries), len(fixture.memories)
    print(
        f"Cranfield 1400 -> {docs} memories, {queries} queries; reference store, "
        f"{retriever} retriever"
    )
    print(f"seed {timings['seed']:.2f} s, {queries} searches {timings['search']:.2f} s")
    print(f"{'measure':<14}{'benchd':>10}{'trec_eval':>12}{'ratio':>9}")
    for mine, trec in MEASURES.items():
        a, b = _mean(ours, mine), _mean(theirs, trec)
        ratio = f"{a / b:.6f}" if b else "n/a"
        print(f"{trec:<14}{a:>10.4f}{b:>12.4f}{ratio:>9}")
    b_s, t_s = timings["benchd_score"], timings["trec_score"]
    print(
        f"scoring time  benchd {b_s * 1e3:.1f} ms, pytrec_eval {t_s * 1e3:.1f} ms "
        f"({t_s / b_s:.1f}x)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cranfield",
        type=Path,
        default=DEFAULT_CRANFIELD,
        help=f"Cranfield folder (default: {DEFAULT_CRANFIELD})",
    )
    parser.add_argument("--retriever", choices=RETRIEVERS, default="bm25")
    parser.add_argument(
        "--max-queries", type=int, metavar="N", help="only the first N queries (a smoke run)"
    )
    parser.add_argument(
        "--save", type=Path, metavar="DIR", help="also write qrels and run files for trec_eval"
    )
    args = parser.parse_args(argv)
    depth = 100
    with tempfile.TemporaryDirectory() as tmp:  # a JSON Lines fixture is read again to seed
        fixture = convert(args.cranfield, Path(tmp) / "cranfield.jsonl", args.max_queries)
        runs, seeded, searched = anyio.run(rankings, fixture, args.retriever, depth)
    ours, benchd_s = score_benchd(fixture, runs, depth)
    theirs, trec_s = score_trec_eval(fixture, runs)
    timings = {"seed": seeded, "search": searched, "benchd_score": benchd_s, "trec_score": trec_s}
    report(fixture, ours, theirs, timings, args.retriever)
    if args.save:
        save(args.save, fixture, runs)
        print(f"saved {args.save / 'qrels'} and {args.save / 'run'}")
    differences = compare(ours, theirs)
    if differences:
        print(f"MISMATCH in {len(differences)} values, first: {differences[0]}", file=sys.stderr)
        return 1
    print(f"benchd == trec_eval on all {len(ours)} queries x {len(MEASURES)} measures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
