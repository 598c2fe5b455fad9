"""benchd score reproduces trec_eval's own expected outputs, value for value.

The files are trec_eval's test suite (../shared/conformance/trec_eval, see its
MANIFEST.txt). Each case runs benchd's scorer with the flags trec_eval was run
with and compares every (measure, topic) value benchd implements at trec_eval's
4 decimals; measures benchd does not implement (infAP, utility, relstring, ...)
are skipped, and no implemented measure may be missing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from benchd.commands import score as score_command
from benchd.scoring.trec.evaluate import score_files
from benchd.scoring.trec.format import format_text
from benchd.scoring.trec.measures import FAMILIES

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = REPO_ROOT.parent / "shared" / "conformance" / "trec_eval"

pytestmark = pytest.mark.skipif(
    not (CONFORMANCE / "MANIFEST.txt").is_file(),
    reason=f"trec_eval's conformance files not found at {CONFORMANCE} (optional: the "
    "project's ../shared folder holds them; .ci/run runs these tests in the checkout)",
)

# (expected output, flags, qrels, run) from MANIFEST.txt. For out.test.aql
# trec_eval also had -mrelstring.20, and for out.test.meas_params measures
# benchd does not implement, so those are left out of the flags.
CASES = [
    ("out.test", [], "qrels.test", "results.test"),
    ("out.test", [], "qrels.test.with-comments", "results.test"),
    ("out.comment.test", [], "qrels.comment.test", "results.comment.test"),
    ("out.test.a", ["-m", "all_trec"], "qrels.test", "results.test"),
    ("out.test.aq", ["-m", "all_trec", "-q"], "qrels.test", "results.test"),
    ("out.test.aqc", ["-m", "all_trec", "-q", "-c"], "qrels.test", "results.trunc"),
    ("out.test.aqcM", ["-m", "all_trec", "-q", "-c", "-M100"], "qrels.test", "results.trunc"),
    ("out.test.aql", ["-m", "all_trec", "-q", "-l2"], "qrels.rel_level", "results.test"),
    (
        "out.test.meas_params",
        [
            "-q",
            "-miprec_at_recall..10,.20,.25,.75,.50",
            "-m",
            "P.5,7,3",
            "-m",
            "recall.20,2000",
            "-m",
            "Rprec_mult.5.0,0.2,0.35",
            "-m",
            "ndcg_cut.10,20,23",  # trec_eval was given 23.4 and truncated it
            "-msuccess.2,5,20",
        ],
        "qrels.test",
        "results.test",
    ),
]

Table = dict[tuple[str, str], str]


def _table(lines: list[str]) -> Table:
    table: Table = {}
    for line in lines:
        name, qid, value = line.rstrip("\n").split("\t")
        table[(name.strip(), qid)] = value
    return table


def _implemented(name: str) -> bool:
    """Whether an output name (``P_5``, ``iprec_at_recall_0.10``) is a benchd measure."""
    for fam in FAMILIES:
        if name == fam.name and fam.params == "none":
            return True
        stem, _, param = name.rpartition("_")
        if stem == fam.name and fam.params != "none" and param.replace(".", "", 1).isdigit():
            return True
    return False


def _benchd_lines(flags: list[str], qrels: Path, run: Path) -> list[str]:
    parser = argparse.ArgumentParser()
    score_command.register(parser.add_subparsers())
    args = parser.parse_args(["score", *flags, str(qrels), str(run)])
    options = score_command.options_from_args(args)
    return list(format_text(score_files(qrels, run, options), options, args.q))


@pytest.mark.parametrize(
    ("expected", "flags", "qrels", "run"), CASES, ids=[f"{c[0]}[{c[2]}]" for c in CASES]
)
def test_every_implemented_value_matches_trec_eval(
    expected: str, flags: list[str], qrels: str, run: str
) -> None:
    want = _table((CONFORMANCE / expected).read_text().splitlines())
    got = _table(_benchd_lines(flags, CONFORMANCE / qrels, CONFORMANCE / run))
    if expected == "out.test.meas_params":  # only the measures we asked for
        asked = ("iprec_at_recall", "P", "recall", "Rprec_mult", "ndcg_cut", "success")
        want = {k: v for k, v in want.items() if k[0].rsplit("_", 1)[0] in asked}
    want = {k: v for k, v in want.items() if _implemented(k[0])}
    assert want, "no comparable values: the expected file did not parse"
    assert sorted(set(want) - set(got)) == [], "values trec_eval printed that benchd did not"
    assert sorted(set(got) - set(want)) == [], "values benchd printed that trec_eval did not"
    wrong = {k: (got[k], v) for k, v in want.items() if got[k] != v}
    assert wrong == {}, "(benchd, trec_eval) values differ"


def test_output_lines_are_trec_eval_lines_in_trec_eval_order() -> None:
    """The full text, padding and order included, equals trec_eval's lines."""
    lines = _benchd_lines(
        ["-m", "all_trec", "-q", "-c"], CONFORMANCE / "qrels.test", CONFORMANCE / "results.trunc"
    )
    produced = {line.split("\t")[0].strip() for line in lines}
    expected = [
        line
        for line in (CONFORMANCE / "out.test.aqc").read_text().splitlines()
        if line.split("\t")[0].strip() in produced
    ]
    assert lines == expected


def test_cli_prints_trec_eval_lines() -> None:
    """``benchd score`` as a process: exit 0 and trec_eval's exact lines."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchd",
            "score",
            "-m",
            "map",
            "-m",
            "P.5,10",
            "-m",
            "num_rel_ret",
            str(CONFORMANCE / "qrels.test"),
            str(CONFORMANCE / "results.test"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    expected = [
        line
        for line in (CONFORMANCE / "out.test").read_text().splitlines()
        if line.split("\t")[0].strip() in {"num_rel_ret", "map", "P_5", "P_10"}
    ]
    assert proc.stdout.splitlines() == expected
