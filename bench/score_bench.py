"""benchd score vs pytrec_eval: time and peak memory on the same two files.

Generates (fixed seed) N queries x 100 ranked documents with 10 judged
relevant documents each (grades 1-3, 4 to 10 of them retrieved; scores with
4 decimals, so about 2% of topics have tied scores), writes a qrels and a run
file, then runs each side in a fresh subprocess and reports wall time, CPU
time and peak RSS (``os.wait4`` rusage of that child):

- benchd:      ``python -m benchd score -m map -m recip_rank -m P.10
               -m ndcg_cut.10 -m recall.10 QRELS RUN``, end to end
               (interpreter start, parsing, scoring every topic, printing);
- pytrec_eval: ``python -c ...``, end to end too: interpreter start, import,
               parsing both files into dicts, evaluating the same measures,
               printing each measure's mean.

Both are whole processes reading the same two files. They run in pairs
(``--repeat`` of them), the side that goes first alternating; benchd runs
twice in each pair: as invoked by default (one process, like pytrec_eval)
and with ``-j N`` (N = the usable cores, at most 4: the run split across N
processes). Each figure is printed as min/median/max over the pairs, with
the ratios taken pair by pair. A final, untimed run of each side gives the
per-query values (``benchd score -q --format json``, and pytrec_eval's
dict); every one is compared at 4 decimals.
Usage::

    .venv/bin/python bench/score_bench.py [--queries 100000] [--seed 7] [--repeat 3]
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
import time
from pathlib import Path

from benchd.scoring.trec.parallel import default_jobs, topic_spans

MEASURES = ("map", "recip_rank", "P.10", "ndcg_cut.10", "recall.10")
OUT_NAMES = ("map", "recip_rank", "P_10", "ndcg_cut_10", "recall_10")
DOCS_PER_QUERY = 100
RELEVANT_PER_QUERY = 10

_PYTREC_CHILD = """
import json, sys
import pytrec_eval
qrels_path, run_path, out_path, measures = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
qrels = {}
with open(qrels_path) as f:
    for line in f:
        qid, _, doc, rel = line.split()
        qrels.setdefault(qid, {})[doc] = int(rel)
run = {}
with open(run_path) as f:
    for line in f:
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
values = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
names = sorted({name for row in values.values() for name in row})
for name in names:
    print(name, "all", round(sum(row[name] for row in values.values()) / len(values), 4))
if out_path != "-":
    with open(out_path, "w") as f:
        json.dump({"values": values}, f)
"""


def generate(directory: Path, queries: int, seed: int) -> tuple[Path, Path]:
    """Write the qrels and run files; scores are rounded so some tie."""
    rnd = random.Random(seed)
    qrels_path, run_path = directory / "qrels.txt", directory / "run.txt"
    with qrels_path.open("w") as qrels, run_path.open("w") as run:
        for i in range(queries):
            qid = f"q{i}"
            docs = list(dict.fromkeys(f"d{rnd.randrange(10**8)}" for _ in range(DOCS_PER_QUERY)))
            retrieved_rel = rnd.randint(4, RELEVANT_PER_QUERY)
            relevant = rnd.sample(docs, retrieved_rel)
            relevant += [f"u{i}_{j}" for j in range(RELEVANT_PER_QUERY - retrieved_rel)]
            qrels.writelines(f"{qid} 0 {doc} {rnd.randint(1, 3)}\n" for doc in relevant)
            scores = sorted((round(rnd.random() * 20, 4) for _ in docs), reverse=True)
            run.writelines(
                f"{qid} Q0 {doc} {rank} {score} bench\n"
                for rank, (doc, score) in enumerate(zip(docs, scores, strict=True), start=1)
            )
    return qrels_path, run_path


def run_child(argv: list[str], stdout_path: Path) -> tuple[float, float, float]:
    """Run ``argv`` to completion; return wall s, CPU s and peak RSS MiB of that child."""
    with stdout_path.open("w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if code != 0:
        sys.exit(f"{' '.join(argv[:4])} failed ({code}): {stderr.strip()}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024  # Linux reports ru_maxrss in KiB


def benchd_values(path: Path) -> dict[str, dict[str, str]]:
    """Per-query values from ``benchd score -q --format json``, printed like trec_eval."""
    per_query = json.loads(path.read_text())["per_query"]
    return {
        qid: {name: f"{value:6.4f}" for name, value in row.items()}
        for qid, row in per_query.items()
    }


def compare(ours: dict[str, dict[str, str]], theirs: dict[str, dict[str, float]]) -> int:
    """Count (query, measure) values that differ at 4 decimals; print the first few."""
    mismatches = 0
    if set(ours) != set(theirs):
        print(f"query sets differ: {len(ours)} vs {len(theirs)}")
        return max(len(ours), len(theirs))
    for qid, row in theirs.items():
        for name in OUT_NAMES:
            if ours[qid][name] != f"{row[name]:6.4f}":
                mismatches += 1
                if mismatches <= 5:
                    print(f"  differs: {qid} {name} benchd={ours[qid][name]} pytrec={row[name]}")
    return mismatches


Figures = tuple[float, float, float]  # wall s, CPU s, peak RSS MiB


def _measure(
    directory: Path, qrels: Path, run: Path, pairs: int
) -> tuple[list[Figures], list[Figures], list[Figures], int]:
    """Each pair's figures of benchd (default, then -j N) and pytrec_eval, whole processes,
    the side that goes first alternating; the per-query values that differ."""
    flags = [f for m in MEASURES for f in ("-m", m)]
    ours_out, theirs_out = directory / "benchd.out", directory / "pytrec.json"
    benchd_argv = [sys.executable, "-m", "benchd", "score", *flags, str(qrels), str(run)]
    parallel_argv = [*benchd_argv[:4], "-j", str(default_jobs()), *benchd_argv[4:]]
    pytrec_argv = [sys.executable, "-c", _PYTREC_CHILD, str(qrels), str(run)]
    ours: list[Figures] = []
    parallel: list[Figures] = []
    theirs: list[Figures] = []
    for n in range(pairs):
        if n % 2:
            theirs.append(run_child([*pytrec_argv, "-", *MEASURES], directory / "means.txt"))
        ours.append(run_child(benchd_argv, directory / "summary.txt"))
        parallel.append(run_child(parallel_argv, directory / "summary_j.txt"))
        if not n % 2:
            theirs.append(run_child([*pytrec_argv, "-", *MEASURES], directory / "means.txt"))
    if (directory / "summary.txt").read_text() != (directory / "summary_j.txt").read_text():
        sys.exit("benchd score printed different tables with and without -j")
    # Untimed: every per-query value of each side, for the comparison.
    run_child([*benchd_argv[:4], "-q", "--format", "json", *benchd_argv[4:]], ours_out)
    run_child([*pytrec_argv, str(theirs_out), *MEASURES], directory / "x")
    report = json.loads(theirs_out.read_text())
    mismatches = compare(benchd_values(ours_out), report["values"])
    return ours, parallel, theirs, mismatches


def _spread(values: list[float]) -> str:
    """min/median/max."""
    picked = (min(values), statistics.median(values), max(values))
    return "/".join(f"{v:.2f}" for v in picked)


def _table(ours: list[Figures], theirs: list[Figures], label: str) -> None:
    print(f"{label:22}{'benchd':>22}{'pytrec_eval':>22}{'ratio (pair by pair)':>30}")
    names = ("wall time, s", "CPU time, s", "peak RSS, MiB")
    for at, name in enumerate(names):
        mine = [f[at] for f in ours]
        peer = [f[at] for f in theirs]
        if at < 2:
            ratios, what = [p / m for m, p in zip(mine, peer, strict=True)], "x faster"
        else:
            ratios, what = [m / p for m, p in zip(mine, peer, strict=True)], "x the memory"
        print(f"{name:22}{_spread(mine):>22}{_spread(peer):>22}{_spread(ratios) + what:>30}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="pairs of runs (alternated)")
    args = parser.parse_args()
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="score-bench-") as tmp:
        directory = Path(tmp)
        qrels, run = generate(directory, args.queries, args.seed)
        processes = len(topic_spans(run, default_jobs()))  # what benchd score -j N will use
        ours, parallel, theirs, mismatches = _measure(directory, qrels, run, max(1, args.repeat))
    size = f"{args.queries:,} queries x {DOCS_PER_QUERY} docs, {RELEVANT_PER_QUERY} relevant each"
    print(f"score_bench: {size}; measures {', '.join(MEASURES)}")
    print("each side a whole process (start, parse, score, print) on the same two files")
    print(f"{args.repeat} pair(s), the first side alternating; min/median/max")
    _table(ours, theirs, "default (1 process)")
    _table(parallel, theirs, f"-j {default_jobs()} ({processes} proc.)")
    same = "yes" if mismatches == 0 else f"NO ({mismatches} differ)"
    print(f"per-query values identical at 4 decimals: {same}")
    load = os.getloadavg()[0]
    print(f"load average {before:.1f} before, {load:.1f} after, on {os.cpu_count()} CPUs")
    print("(wall times depend on the machine's load; CPU time is the steadier comparison)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
