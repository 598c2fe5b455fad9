"""benchd score vs pytrec_eval: time and peak memory on the same two files.

Generates (fixed seed) N queries x 100 ranked documents with 10 judged
relevant documents each (grades 1-3, 4 to 10 of them retrieved; scores with
4 decimals, so about 2% of topics have tied scores), writes a qrels and a run
file, then runs each side in a fresh subprocess and reports wall time, CPU
time and peak RSS (``os.wait4`` rusage of that child):

- benchd:      ``python -m benchd score -m map -m recip_rank -m P.10
               -m ndcg_cut.10 -m recall.10 QRELS RUN``, end to end
               (interpreter start, parsing, scoring every topic, printing);
- pytrec_eval: a child that parses both files into dicts and evaluates the
               same measures (timed), then writes its values (untimed).

benchd runs twice per round: as invoked by default (one process, like
pytrec_eval) and with ``-j N`` (N = the usable cores, at most 4: the run split
across N processes); both are shown against pytrec_eval. A final, untimed ``benchd score
-q --format json`` run gives benchd's per-query values; every one is compared
with pytrec_eval's at 4 decimals. Each side runs ``--repeat`` times,
alternating; the best time is shown.
Usage::

    .venv/bin/python bench/score_bench.py [--queries 100000] [--seed 7] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
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
import json, sys, time
import pytrec_eval
qrels_path, run_path, out_path, measures = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
start, cpu_start = time.perf_counter(), time.process_time()
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
parsed = time.perf_counter()
values = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
done, cpu_done = time.perf_counter(), time.process_time()
report = {"parse_s": parsed - start, "eval_s": done - parsed, "cpu_s": cpu_done - cpu_start}
with open(out_path, "w") as f:
    json.dump({**report, "values": values}, f)
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
    directory: Path, qrels: Path, run: Path, repeat: int
) -> tuple[Figures, Figures, Figures, int]:
    """Best-of-``repeat`` figures of benchd (default, then -j N) and pytrec_eval; mismatches."""
    flags = [f for m in MEASURES for f in ("-m", m)]
    ours_out, theirs_out = directory / "benchd.out", directory / "pytrec.json"
    benchd_argv = [sys.executable, "-m", "benchd", "score", *flags, str(qrels), str(run)]
    parallel_argv = [*benchd_argv[:4], "-j", str(default_jobs()), *benchd_argv[4:]]
    pytrec_argv = [sys.executable, "-c", _PYTREC_CHILD, str(qrels), str(run)]
    ours: list[Figures] = []
    parallel: list[Figures] = []
    theirs: list[Figures] = []
    for _ in range(repeat):  # alternate the sides so all meet the same background load
        ours.append(run_child(benchd_argv, directory / "summary.txt"))
        parallel.append(run_child(parallel_argv, directory / "summary_j.txt"))
        _, _, peak = run_child([*pytrec_argv, str(theirs_out), *MEASURES], directory / "x")
        report = json.loads(theirs_out.read_text())
        theirs.append((report["parse_s"] + report["eval_s"], report["cpu_s"], peak))
    if (directory / "summary.txt").read_text() != (directory / "summary_j.txt").read_text():
        sys.exit("benchd score printed different tables with and without -j")
    # Untimed: the same scoring with every per-query value, for the comparison.
    run_child([*benchd_argv[:4], "-q", "--format", "json", *benchd_argv[4:]], ours_out)
    mismatches = compare(benchd_values(ours_out), report["values"])
    return _best(ours), _best(parallel), _best(theirs), mismatches


def _best(side: list[Figures]) -> Figures:
    """Fastest wall and CPU time, and the largest peak memory, over the repeats."""
    return min(r[0] for r in side), min(r[1] for r in side), max(r[2] for r in side)


def _table(ours: Figures, theirs: Figures, label: str) -> None:
    print(f"{label:24}{'benchd':>10}{'pytrec_eval':>13}{'speed-up / ratio':>18}")
    rows = [
        ("wall time, s", ours[0], theirs[0], f"{theirs[0] / ours[0]:.2f}x faster"),
        ("CPU time, s", ours[1], theirs[1], f"{theirs[1] / ours[1]:.2f}x faster"),
        ("peak RSS, MiB", ours[2], theirs[2], f"{ours[2] / theirs[2]:.2f}x the memory"),
    ]
    for name, mine, peer, ratio in rows:
        print(f"{name:24}{mine:>10.2f}{peer:>13.2f}{ratio:>18}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="runs per side; best is shown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="score-bench-") as tmp:
        directory = Path(tmp)
        qrels, run = generate(directory, args.queries, args.seed)
        processes = len(topic_spans(run, default_jobs()))  # what benchd score -j N will use
        ours, parallel, theirs, mismatches = _measure(directory, qrels, run, max(1, args.repeat))
    size = f"{args.queries:,} queries x {DOCS_PER_QUERY} docs, {RELEVANT_PER_QUERY} relevant each"
    print(f"score_bench: {size}; measures {', '.join(MEASURES)}")
    print("benchd: the whole `benchd score` process; pytrec_eval: parse + evaluate only")
    print(f"best of {args.repeat} runs each")
    _table(ours, theirs, "default (1 process)")
    _table(parallel, theirs, f"-j {default_jobs()} ({processes} proc.)")
    same = "yes" if mismatches == 0 else f"NO ({mismatches} differ)"
    print(f"per-query values identical at 4 decimals: {same}")
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs")
    print("(wall times depend on the machine's load; CPU time is the steadier comparison)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
